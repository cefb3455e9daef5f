package compare

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"math"
	"net/url"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"
	"time"

	"github.com/gpusched/gpusched/internal/cli"
	"github.com/gpusched/gpusched/internal/strictjson"
	"github.com/gpusched/gpusched/sim"
)

// SuiteOptions tune a suite's run. A plain value, safe for concurrent
// reads.
type SuiteOptions struct {
	// Only selects scenarios by name (none: all); Entrants keeps, in every
	// scenario, only the entrants of these names (none: all).
	Only, Entrants []string
	// Extra are entrants of one's own, run in every scenario beside its
	// baselines (their names must differ from the baselines'); Typed are
	// elastic ones, run in every elastic scenario.
	Extra []Entrant
	Typed []TypedEntrant
	// Traces is the folder trace paths are relative to ("" is the current
	// one: the built-in suite's traces are the repository's sim/testdata).
	Traces string
	// Results is the folder where each scenario's rows are kept as they
	// finish, so that a suite stopped half-way resumes where it stopped
	// (a row is resumed when its scenario's definition and its entrant's
	// name and description are unchanged; "" keeps nothing). Fresh
	// ignores what it holds.
	Results string
	Fresh   bool
	// Parallel and Progress are Options' (Progress per scenario: called
	// with the scenario's name).
	Parallel int
	Progress func(scenario string, names []string) func(entrant, done, total int)
}

// SuiteReport is a suite's outcome: one report per scenario, in the
// suite's order. A plain value, safe for concurrent reads.
type SuiteReport struct {
	Scenarios []SuiteScenario
	Reports   []*Report
}

// savedRow is a row as a results folder keeps it.
type savedRow struct {
	Digest      string      `json:"digest"`
	Entrant     string      `json:"entrant"`
	Description string      `json:"description,omitempty"`
	Summary     sim.Summary `json:"summary"`
	GPUHours    []float64   `json:"gpu_hours"`
	HasRho      bool        `json:"has_rho"`
	Allocations int         `json:"allocations"`
	Explored    float64     `json:"explored_gpu_h"`
	AuditFailed int         `json:"audit_failed"`
	TookSeconds float64     `json:"took_s"`
}

// named is an entrant's name and description, which a kept row must
// carry.
type named struct{ name, description string }

// maxSavedRowBytes bounds a saved row's file.
const maxSavedRowBytes = 1 << 16

// rowFile is where a results folder keeps an entrant's row of a scenario.
func rowFile(dir, scenario, entrant string) string {
	return filepath.Join(dir, scenario, url.PathEscape(entrant)+".json")
}

// loadRow returns the saved row of an entrant if it matches the digest.
func loadRow(dir, scenario, digest string, e named, types int) (Row, bool) {
	data, err := cli.ReadFile(rowFile(dir, scenario, e.name), maxSavedRowBytes)
	if err != nil {
		return Row{}, false
	}
	var s savedRow
	if strictjson.Decode(data, &s) != nil || s.Digest != digest || s.Entrant != e.name || s.Description != e.description ||
		len(s.GPUHours) != types || s.TookSeconds < 0 || math.IsNaN(s.TookSeconds) || s.TookSeconds > 1e9 {
		return Row{}, false
	}
	return Row{Entrant: s.Entrant, Summary: s.Summary, GPUHours: s.GPUHours, HasRho: s.HasRho, Allocations: s.Allocations,
		ExploredGPUHours: s.Explored, AuditFailed: s.AuditFailed, Took: time.Duration(s.TookSeconds * float64(time.Second)), Resumed: true}, true
}

// saveRow keeps a row in the results folder.
func saveRow(dir, scenario, digest string, e named, r *Row) error {
	if err := os.MkdirAll(filepath.Join(dir, scenario), 0o755); err != nil {
		return err
	}
	b, err := json.MarshalIndent(savedRow{Digest: digest, Entrant: e.name, Description: e.description, Summary: r.Summary, GPUHours: r.GPUHours,
		HasRho: r.HasRho, Allocations: r.Allocations, Explored: r.ExploredGPUHours, AuditFailed: r.AuditFailed, TookSeconds: r.Took.Seconds()}, "", "  ")
	if err != nil {
		return err
	}
	return cli.WriteFile(rowFile(dir, scenario, e.name), func(w io.Writer) error {
		_, err := w.Write(append(b, '\n'))
		return err
	})
}

// Run runs the suite's scenarios one after the other, each scenario's
// entrants in parallel, keeping each row in opt.Results as it finishes.
func (s *Suite) Run(ctx context.Context, opt SuiteOptions) (*SuiteReport, error) {
	for _, n := range opt.Only {
		if !slices.ContainsFunc(s.Scenarios, func(sc SuiteScenario) bool { return sc.Name == n }) {
			return nil, fmt.Errorf("compare: scenario %q: %w", n, ErrUnknown)
		}
	}
	for i := range opt.Extra {
		if err := opt.Extra[i].Validate(); err != nil {
			return nil, err
		}
		if _, err := Baseline(opt.Extra[i].Name); err == nil {
			return nil, &EntrantError{Name: opt.Extra[i].Name, Reason: "a name no baseline has"}
		}
	}
	for i := range opt.Typed {
		if err := opt.Typed[i].Validate(); err != nil {
			return nil, err
		}
		if _, err := TypedBaseline(opt.Typed[i].Name); err == nil {
			return nil, &EntrantError{Name: opt.Typed[i].Name, Reason: "a name no typed baseline has"}
		}
	}
	if err := knownEntrants(opt); err != nil {
		return nil, err
	}
	todo, err := s.prepare(opt)
	if err != nil {
		return nil, err
	}
	out := &SuiteReport{}
	for _, p := range todo {
		rep, err := p.run(ctx, opt)
		if err != nil {
			return nil, &SuiteError{File: s.file, Path: p.path, Err: err}
		}
		out.Scenarios = append(out.Scenarios, *p.sc)
		out.Reports = append(out.Reports, rep)
	}
	return out, nil
}

// knownEntrants checks that Options.Entrants names only baselines, typed
// baselines and the options' own entrants: a name nobody has would
// quietly leave scenarios without rows.
func knownEntrants(opt SuiteOptions) error {
	known := map[string]bool{}
	for _, n := range BaselineNames() {
		known[n] = true
	}
	for _, e := range TypedBaselines() {
		known[e.Name] = true
	}
	for _, e := range opt.Extra {
		known[e.Name] = true
	}
	for _, e := range opt.Typed {
		known[e.Name] = true
	}
	for _, n := range opt.Entrants {
		if !known[n] {
			return fmt.Errorf("compare: entrant %q: %w", n, ErrUnknown)
		}
	}
	return nil
}

// prepared is a scenario ready to run: its jobs, setup, entrants, and the
// digest its kept rows must carry.
type prepared struct {
	sc       *SuiteScenario
	path     string // "scenarios[2] (itp)", for errors
	scenario Scenario
	setup    Setup
	entrants []Entrant
	digest   string
	// typed is an elastic scenario, with its entrants; fit fits its
	// applications on its pools.
	typed         *TypedScenario
	typedEntrants []TypedEntrant
	fit           func() ([]map[string]*sim.PolluxApp, error)
}

// prepare builds every selected scenario before any runs, so that a
// mistake in the last (a trace that is not there, a window beyond it) is
// found before the first has run for minutes.
func (s *Suite) prepare(opt SuiteOptions) ([]prepared, error) {
	var out []prepared
	for i := range s.Scenarios {
		sc := &s.Scenarios[i]
		if len(opt.Only) > 0 && !slices.Contains(opt.Only, sc.Name) {
			continue
		}
		p := prepared{sc: sc, path: fmt.Sprintf("scenarios[%d] (%s)", i, sc.Name)}
		if sc.Engine == "elastic" {
			if err := p.prepareTyped(opt); err != nil {
				return nil, &SuiteError{File: s.file, Path: p.path, Err: err}
			}
			out = append(out, p)
			continue
		}
		var trace string
		var err error
		if p.scenario, trace, err = sc.build(func(f string) ([]byte, error) { return cli.ReadFile(f, sim.MaxTraceBytes) }, opt.Traces); err == nil {
			if p.setup, err = p.scenario.setup(); err == nil {
				p.entrants, err = scenarioEntrants(sc, opt)
			}
		}
		if err != nil {
			return nil, &SuiteError{File: s.file, Path: p.path, Err: err}
		}
		p.digest = sc.Digest() + "-" + trace + "-" + moduleVersion()
		out = append(out, p)
	}
	return out, nil
}

// moduleVersion is gpusched's version in the running program's build
// ("(devel)" in a clone): a kept row of another version is not resumed.
func moduleVersion() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	if info.Main.Path == module {
		return info.Main.Version
	}
	for _, d := range info.Deps {
		if d.Path == module {
			if d.Replace != nil {
				return d.Version + "=>" + d.Replace.Path + "@" + d.Replace.Version
			}
			return d.Version
		}
	}
	return "unknown"
}

// module is gpusched's module path.
const module = "github.com/gpusched/gpusched"

// run runs the scenario's entrants that the results folder does not hold
// yet, keeping each row as it finishes.
func (p *prepared) run(ctx context.Context, opt SuiteOptions) (*Report, error) {
	if p.typed != nil {
		return p.runTyped(ctx, opt)
	}
	sc, setup := p.sc, p.setup
	rep := &Report{Scenario: sc.Name, Cluster: sc.Cluster, Types: setup.Types, From: p.scenario.From, To: p.scenario.To, Rows: make([]Row, len(p.entrants))}
	for _, c := range setup.Capacity {
		rep.GPUs += c
	}
	if rep.To == 0 {
		rep.To = len(p.scenario.Jobs)
	}
	var todo []Entrant
	var at []int
	for i := range p.entrants {
		if row, ok := resumed(opt, sc.Name, p.digest, named{p.entrants[i].Name, p.entrants[i].Description}, len(setup.Types)); ok {
			rep.Rows[i] = row
			continue
		}
		todo, at = append(todo, p.entrants[i]), append(at, i)
	}
	if len(todo) == 0 {
		return rep, nil
	}
	got, err := Run(ctx, p.scenario, todo, Options{Parallel: opt.Parallel, Progress: scenarioProgress(opt, sc.Name, todo)})
	if err != nil {
		return nil, err
	}
	for j, row := range got.Rows {
		rep.Rows[at[j]] = row
		if opt.Results != "" {
			if err := saveRow(opt.Results, sc.Name, p.digest, named{todo[j].Name, todo[j].Description}, &row); err != nil {
				return nil, err
			}
		}
	}
	return rep, nil
}

// prepareTyped builds an elastic scenario: its pools, Pollux's
// applications on them, its workloads, its entrants, and a digest of the
// workloads' bytes.
func (p *prepared) prepareTyped(opt SuiteOptions) error {
	sc, w := p.sc, &p.sc.Workload
	pools, err := ParsePools(sc.Pools)
	if err != nil {
		return err
	}
	dir := filepath.Join(opt.Traces, w.Pollux)
	fsys := os.DirFS(dir)
	power := w.Power
	if power == 0 {
		power = 1
	}
	// The applications are fitted only when a row runs (kept rows need
	// none; fitting takes seconds): here their folder must be there.
	if _, err := fs.Stat(fsys, "app-profiles"); err != nil {
		return &TraceError{Path: filepath.Join(dir, "app-profiles"), Err: err}
	}
	p.fit = func() ([]map[string]*sim.PolluxApp, error) { return PolluxOnPools(fsys, pools, power) }
	ts := &TypedScenario{Name: sc.Name, Pools: pools}
	h := sha256.New()
	for i := 1; i <= w.Workloads; i++ {
		name := fmt.Sprintf("workloads/workload-%d.csv", i)
		data, err := fs.ReadFile(fsys, name)
		if err == nil && len(data) > sim.MaxTraceBytes {
			err = fmt.Errorf("%d bytes, more than %d", len(data), sim.MaxTraceBytes)
		}
		var jobs []sim.Job
		if err == nil {
			jobs, err = sim.ReadPollux(bytes.NewReader(data), name)
		}
		if err != nil {
			return &TraceError{Path: filepath.Join(dir, name), Err: err}
		}
		h.Write(data)
		ts.Workloads = append(ts.Workloads, jobs)
	}
	for _, n := range sc.Entrants {
		e, err := TypedBaseline(n)
		if err != nil {
			return err
		}
		p.typedEntrants = append(p.typedEntrants, e)
	}
	p.typedEntrants = append(p.typedEntrants, opt.Typed...)
	if len(opt.Entrants) > 0 {
		p.typedEntrants = slices.DeleteFunc(p.typedEntrants, func(e TypedEntrant) bool { return !slices.Contains(opt.Entrants, e.Name) })
	}
	p.typed = ts
	p.digest = sc.Digest() + "-" + hex.EncodeToString(h.Sum(nil)[:8]) + "-" + moduleVersion()
	return nil
}

// runTyped runs an elastic scenario's entrants that the results folder
// does not hold yet.
func (p *prepared) runTyped(ctx context.Context, opt SuiteOptions) (*Report, error) {
	rep := p.typed.report()
	rep.Rows = make([]Row, len(p.typedEntrants))
	var todo []TypedEntrant
	var at []int
	for i, e := range p.typedEntrants {
		if row, ok := resumed(opt, p.sc.Name, p.digest, named{e.Name, e.Description}, len(p.typed.Pools)); ok {
			rep.Rows[i] = row
			continue
		}
		todo, at = append(todo, e), append(at, i)
	}
	var progress func(entrant, done, total int)
	if opt.Progress != nil {
		var names []string
		for _, e := range todo {
			names = append(names, e.Name)
		}
		progress = opt.Progress(p.sc.Name, names)
	}
	if len(todo) == 0 {
		return rep, nil
	}
	if p.typed.Apps == nil {
		apps, err := p.fit()
		if err != nil {
			return nil, &TraceError{Path: filepath.Join(opt.Traces, p.sc.Workload.Pollux), Err: err}
		}
		p.typed.Apps = apps
	}
	got, err := RunTyped(ctx, *p.typed, todo, Options{Parallel: opt.Parallel, Progress: progress})
	if err != nil {
		return nil, err
	}
	for j, row := range got.Rows {
		rep.Rows[at[j]] = row
		if opt.Results != "" {
			if err := saveRow(opt.Results, p.sc.Name, p.digest, named{todo[j].Name, todo[j].Description}, &row); err != nil {
				return nil, err
			}
		}
	}
	return rep, nil
}

// scenarioEntrants returns a scenario's entrants: its baselines and the
// options' own (not those of the event engine where the scenario stops
// when the measured jobs finish), those of Options.Entrants.
func scenarioEntrants(sc *SuiteScenario, opt SuiteOptions) ([]Entrant, error) {
	var entrants []Entrant
	for _, n := range sc.Entrants {
		e, err := Baseline(n)
		if err != nil {
			return nil, err
		}
		entrants = append(entrants, e)
	}
	for _, e := range opt.Extra {
		if !sc.UntilMeasured || e.Events == nil {
			entrants = append(entrants, e)
		}
	}
	if len(opt.Entrants) > 0 {
		entrants = slices.DeleteFunc(entrants, func(e Entrant) bool { return !slices.Contains(opt.Entrants, e.Name) })
	}
	return entrants, nil
}

// resumed returns the row the results folder keeps for an entrant, unless
// the options ask for a fresh run.
func resumed(opt SuiteOptions, scenario, digest string, e named, types int) (Row, bool) {
	if opt.Results == "" || opt.Fresh {
		return Row{}, false
	}
	return loadRow(opt.Results, scenario, digest, e, types)
}

// scenarioProgress returns a scenario's progress callback, or nil.
func scenarioProgress(opt SuiteOptions, scenario string, entrants []Entrant) func(entrant, done, total int) {
	if opt.Progress == nil {
		return nil
	}
	names := make([]string, len(entrants))
	for i, e := range entrants {
		names[i] = e.Name
	}
	return opt.Progress(scenario, names)
}

// higherIsBetter are the metrics ranked in decreasing order.
var higherIsBetter = map[string]bool{"utilisation": true}

// ranks returns the rank of each row by a column (1 is best; ties share
// a rank; rows without a value rank last).
func ranks(rep *Report, c Column, higher bool) []int {
	vals := make([]float64, len(rep.Rows))
	for i, row := range rep.Rows {
		v, ok := c.Value(row)
		switch {
		case !ok || math.IsNaN(v):
			v = math.Inf(1)
		case higher:
			v = -v
		}
		vals[i] = v
	}
	out := make([]int, len(vals))
	for i, v := range vals {
		out[i] = 1
		for _, w := range vals {
			if w < v {
				out[i]++
			}
		}
	}
	return out
}

// WriteMarkdown writes the suite's report: the entrants' ranks over the
// scenarios, then each scenario's table with its metric, the published
// figure, ours over it and the rank beside every reproducible metric.
func (s *SuiteReport) WriteMarkdown(w io.Writer) error {
	var b strings.Builder
	b.WriteString("# Benchmark suite\n\n")
	what := fmt.Sprintf("%d scenarios", len(s.Reports))
	if len(s.Reports) == 1 {
		what = "1 scenario"
	}
	fmt.Fprintf(&b, "%s. Each is ranked by its metric (1 is best; ties share a rank); the papers' figures are beside ours where they published one.\n\n", what)
	if err := s.writeRanks(&b); err != nil {
		return err
	}
	for i := range s.Reports {
		if err := s.writeScenario(&b, i); err != nil {
			return err
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// writeRanks writes the table of each entrant's ranks over the scenarios.
func (s *SuiteReport) writeRanks(b *strings.Builder) error {
	var names []string
	rankOf := map[string][]string{}
	sum, count := map[string]float64{}, map[string]int{}
	for i, rep := range s.Reports {
		sc := &s.Scenarios[i]
		col, err := rep.Select(sc.metric())
		if err != nil {
			return err
		}
		rk := ranks(rep, col[0], higherIsBetter[sc.metric()])
		for j, row := range rep.Rows {
			if !slices.Contains(names, row.Entrant) {
				names = append(names, row.Entrant)
				rankOf[row.Entrant] = slices.Repeat([]string{"-"}, len(s.Reports))
			}
			rankOf[row.Entrant][i] = fmt.Sprintf("%d of %d", rk[j], len(rep.Rows))
			sum[row.Entrant] += float64(rk[j]) / float64(len(rep.Rows))
			count[row.Entrant]++
		}
	}
	head, rule := "| entrant | scenarios | mean rank (share of the field) |", "| --- | --- | --- |"
	for _, sc := range s.Scenarios {
		head, rule = head+" "+sc.Name+" |", rule+" --- |"
	}
	b.WriteString(head + "\n" + rule + "\n")
	for _, n := range names {
		fmt.Fprintf(b, "| %s | %d | %s | %s |\n", n, count[n], cli.Fixed(sum[n]/float64(count[n]), 2), strings.Join(rankOf[n], " | "))
	}
	return nil
}

// writeScenario writes one scenario's section: what it is, its source,
// and its table.
func (s *SuiteReport) writeScenario(b *strings.Builder, i int) error {
	rep, sc := s.Reports[i], &s.Scenarios[i]
	fmt.Fprintf(b, "\n## %s\n\n", sc.Name)
	if sc.About != "" {
		fmt.Fprintf(b, "%s.\n\n", strings.TrimSuffix(sc.About, "."))
	}
	cols, err := rep.Select(sc.metric())
	if err != nil {
		return err
	}
	metric := cols[0]
	rk := ranks(rep, metric, higherIsBetter[sc.metric()])
	cols = append(cols, Column{Key: "rank", Header: "rank", Format: integer, Value: func(r Row) (float64, bool) {
		return float64(rk[slices.IndexFunc(rep.Rows, func(x Row) bool { return x.Entrant == r.Entrant })]), true
	}})
	var kept []string
	for _, row := range rep.Rows {
		if row.Resumed {
			kept = append(kept, row.Entrant)
		}
	}
	if len(kept) > 0 {
		fmt.Fprintf(b, "Kept from an earlier run of the same scenario, trace and gpusched (-fresh runs them again): %s.\n\n", strings.Join(kept, ", "))
	}
	if p := sc.Published; p != nil {
		fmt.Fprintf(b, "Published: %s.\n\n", strings.TrimSuffix(p.Source, "."))
		cols = append(cols, publishedColumns(p, metric)...)
	}
	rest, err := rep.Select()
	if err != nil {
		return err
	}
	for _, c := range rest {
		if c.Key != metric.Key {
			cols = append(cols, c)
		}
	}
	cols = append(cols, Column{Key: "run_time_s", Header: "run time", Format: func(v float64) string {
		return time.Duration(v * float64(time.Second)).Round(time.Second).String()
	}, Value: func(r Row) (float64, bool) { return r.Took.Seconds(), true }})
	return rep.WriteMarkdown(b, cols)
}

// publishedColumns are the paper's figure and ours over it.
func publishedColumns(p *Published, metric Column) []Column {
	return []Column{
		{Key: "published", Header: "paper", Format: metric.Format, Value: func(r Row) (float64, bool) {
			v, ok := p.Values[r.Entrant]
			return v, ok
		}},
		{Key: "ratio", Header: "ours/paper", Format: fixed(2), Value: func(r Row) (float64, bool) {
			v, ok := p.Values[r.Entrant]
			m, has := metric.Value(r)
			return m / v, ok && has && v > 0
		}},
	}
}

// WriteCSV writes every row of every scenario: the scenario's name, then
// the entrant and every reproducible column but the GPU-hours per type
// (which depend on the scenario's types).
func (s *SuiteReport) WriteCSV(w io.Writer) error {
	var b strings.Builder
	for i, rep := range s.Reports {
		cols, err := rep.Select()
		if err != nil {
			return err
		}
		cols = slices.DeleteFunc(cols, func(c Column) bool { return strings.HasPrefix(c.Key, "gpu_h_") })
		var part strings.Builder
		if err := rep.WriteCSV(&part, cols); err != nil {
			return err
		}
		for j, line := range strings.Split(strings.TrimSuffix(part.String(), "\n"), "\n") {
			if j == 0 {
				if i == 0 {
					b.WriteString("scenario," + line + "\n")
				}
				continue
			}
			b.WriteString(s.Scenarios[i].Name + "," + line + "\n")
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// Main is the benchmark suite's command: the body of a program's main,
// with the program's own entrants (none for the built-in baselines alone):
//
//	func main() { os.Exit(compare.Main(os.Args[1:], os.Stdout, os.Stderr, myEntrants...)) }
//
// It runs the built-in suite (or -suite's file) and writes the report to
// standard output and, with the results kept, report.md and results.csv
// into -results. It returns the exit status: 0, 1 when a run fails, 2
// for a bad flag.
func Main(args []string, stdout, stderr io.Writer, extra ...Entrant) int {
	return MainWith(args, stdout, stderr, extra, nil)
}

// MainWith is Main with typed entrants of one's own too, run in every
// elastic scenario beside its typed baselines.
func MainWith(args []string, stdout, stderr io.Writer, extra []Entrant, typed []TypedEntrant) int {
	fset := flag.NewFlagSet("suite", flag.ContinueOnError)
	f := &suiteFlags{extra: extra, typed: typed}
	fset.StringVar(&f.suite, "suite", "", "a suite file (JSON; default: the built-in suite, compare/suite.json)")
	fset.StringVar(&f.traces, "traces", ".", "the folder the suite's trace paths are relative to (the built-in suite's: a clone's root)")
	fset.StringVar(&f.only, "only", "", "scenarios to run, comma-separated (default: all)")
	fset.StringVar(&f.entrants, "entrants", "", "entrants to run, comma-separated (default: each scenario's and the program's own)")
	fset.StringVar(&f.results, "results", "suite-results", "folder for the rows as they finish (a run resumes from it), report.md and results.csv; empty: none")
	fset.BoolVar(&f.fresh, "fresh", false, "run every row again, ignoring the rows kept in -results")
	fset.IntVar(&f.parallel, "parallel", 2, "entrants simulated at once, 1 to 64")
	fset.BoolVar(&f.list, "list", false, "list the scenarios and exit")
	fset.BoolVar(&f.quiet, "quiet", false, "no progress on standard error")
	return cli.Main(fset, args, stderr, func(ctx context.Context) error { return f.run(ctx, stdout, stderr) })
}

// suiteFlags are Main's flags and the program's own entrants.
type suiteFlags struct {
	suite, traces, only, entrants, results string
	fresh, list, quiet                     bool
	parallel                               int
	extra                                  []Entrant
	typed                                  []TypedEntrant
}

// run runs Main's command: checks, the suite, the run, the report.
func (f *suiteFlags) run(ctx context.Context, stdout, stderr io.Writer) error {
	suite, err := f.load()
	if err != nil {
		return err
	}
	if f.list {
		for _, sc := range suite.Scenarios {
			if f.only != "" && !slices.Contains(split(f.only), sc.Name) {
				continue
			}
			if _, err := fmt.Fprintf(stdout, "%s: %s (entrants %s)\n", sc.Name, sc.About, strings.Join(sc.Entrants, ", ")); err != nil {
				return err
			}
		}
		return nil
	}
	opt, err := f.options(suite)
	if err != nil {
		return err
	}
	var shown *Progress
	if !f.quiet {
		opt.Progress = func(scenario string, names []string) func(int, int, int) {
			if shown != nil {
				shown.Done()
			}
			_, _ = fmt.Fprintf(stderr, "suite: %s\n", scenario) // progress is best effort
			shown = NewProgress(stderr, names)
			return shown.Update
		}
	}
	rep, err := suite.Run(ctx, opt)
	if shown != nil {
		shown.Done()
	}
	var te *TraceError
	if errors.As(err, &te) && errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%w (trace paths are relative to -traces, %q: a clone's root for the built-in suite's traces; or -only the generated scenarios)", err, f.traces)
	}
	if err != nil {
		return err
	}
	return f.write(stdout, rep)
}

// load checks the flags' values and reads the suite.
func (f *suiteFlags) load() (*Suite, error) {
	var c cli.Checks
	if f.suite != "" {
		c.InputFile("suite", f.suite, MaxSuiteBytes)
	}
	c.Int("parallel", f.parallel, 1, 64)
	if f.results != "" {
		c.OutputDir("results", f.results)
	}
	if err := c.Err(); err != nil {
		return nil, err
	}
	if f.suite == "" {
		return DefaultSuite(), nil
	}
	data, err := cli.ReadFile(f.suite, MaxSuiteBytes)
	if err != nil {
		return nil, err
	}
	return ReadSuite(data, f.suite)
}

// options turns the flags into SuiteOptions, checking -only and -entrants
// against the suite and the entrants known.
func (f *suiteFlags) options(suite *Suite) (SuiteOptions, error) {
	opt := SuiteOptions{Only: split(f.only), Entrants: split(f.entrants), Extra: f.extra, Typed: f.typed, Traces: f.traces, Results: f.results,
		Fresh: f.fresh, Parallel: f.parallel}
	for _, n := range opt.Only {
		if !slices.ContainsFunc(suite.Scenarios, func(sc SuiteScenario) bool { return sc.Name == n }) {
			return opt, cli.Usage("only", f.only, "scenarios of the suite (-list lists them; %q is not one)", n)
		}
	}
	known := BaselineNames()
	for _, e := range TypedBaselines() {
		known = append(known, e.Name)
	}
	for _, e := range f.extra {
		known = append(known, e.Name)
	}
	for _, e := range f.typed {
		known = append(known, e.Name)
	}
	for _, n := range opt.Entrants {
		if !slices.Contains(known, n) {
			return opt, cli.Usage("entrants", f.entrants, "baselines or the program's own entrants (%s; %q is not one)", strings.Join(known, ", "), n)
		}
	}
	return opt, nil
}

// write writes the report to standard output and, with -results,
// report.md and results.csv.
func (f *suiteFlags) write(stdout io.Writer, rep *SuiteReport) error {
	var md strings.Builder
	if err := rep.WriteMarkdown(&md); err != nil {
		return err
	}
	if f.results != "" {
		if err := os.MkdirAll(f.results, 0o755); err != nil {
			return err
		}
		if err := cli.WriteFile(filepath.Join(f.results, "report.md"), func(w io.Writer) error {
			_, err := io.WriteString(w, md.String())
			return err
		}); err != nil {
			return err
		}
		if err := cli.WriteFile(filepath.Join(f.results, "results.csv"), rep.WriteCSV); err != nil {
			return err
		}
	}
	_, err := io.WriteString(stdout, md.String())
	return err
}

// split splits a comma-separated list, dropping empty items.
func split(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}
