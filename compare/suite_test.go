package compare_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/gpusched/gpusched/allocation"
	"github.com/gpusched/gpusched/compare"
	"github.com/gpusched/gpusched/elastic"
	"github.com/gpusched/gpusched/gang"
	"github.com/gpusched/gpusched/internal/cli/clitest"
	"github.com/gpusched/gpusched/sim"
	"github.com/gpusched/gpusched/topology"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The built-in suite parses, names every trace the repository ships, and
// its Gavel scenarios are Gavel's protocol (jobs 4,000 to 5,000 of its
// exact draws, arrivals continuing until they finish).
func TestDefaultSuite(t *testing.T) {
	s := compare.DefaultSuite()
	require.NotEmpty(t, s.Scenarios)
	var names []string
	for _, sc := range s.Scenarios {
		names = append(names, sc.Name)
		for _, tr := range []string{sc.Workload.Trace, sc.Workload.Pollux} {
			if tr != "" {
				_, err := os.Stat(filepath.Join("..", tr))
				assert.NoError(t, err, sc.Name)
			}
		}
		if strings.HasPrefix(sc.Name, "gavel-single") || strings.HasPrefix(sc.Name, "gavel-multi") {
			assert.True(t, sc.UntilMeasured && sc.Workload.Python, sc.Name)
			assert.Equal(t, [2]int{4000, 5000}, sc.Window, sc.Name)
			assert.NotNil(t, sc.Published, sc.Name)
		}
	}
	assert.Equal(t, []string{"gavel-single-4.8", "gavel-multi-2.8", "gavel-makespan-100", "kueue-flavor-walk", "itp", "philly", "tiresias", "sia-heterogeneous", "pollux-t4"}, names)
}

func tinySuite(t *testing.T) *compare.Suite {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", "tiny.json"))
	require.NoError(t, err)
	s, err := compare.ReadSuite(data, "tiny.json")
	require.NoError(t, err)
	return s
}

// counting is a user's entrant whose runs are counted.
func counting(n *atomic.Int32) compare.Entrant {
	return compare.Entrant{Name: "mine/v1", Description: "max-min fairness, counted",
		Policy: func(compare.Setup) allocation.Policy { n.Add(1); return &allocation.MaxMinFairness{} }}
}

// A suite keeps each row as it finishes and resumes from them: a second
// run simulates nothing and reports the same figures; a changed scenario
// or entrant runs again; -fresh ignores what was kept.
func TestSuiteResumes(t *testing.T) {
	s := tinySuite(t)
	dir := t.TempDir()
	var runs atomic.Int32
	opt := compare.SuiteOptions{Traces: "..", Results: dir, Extra: []compare.Entrant{counting(&runs)}}
	first, err := s.Run(context.Background(), opt)
	require.NoError(t, err)
	require.Len(t, first.Reports, 2)
	assert.Equal(t, int32(2), runs.Load())
	assert.Len(t, first.Reports[0].Rows, 4)
	assert.Equal(t, "mine/v1", first.Reports[0].Rows[3].Entrant)
	_, err = os.Stat(filepath.Join(dir, "small-gavel", "mine%2Fv1.json"))
	require.NoError(t, err)

	second, err := s.Run(context.Background(), opt)
	require.NoError(t, err)
	assert.Equal(t, int32(2), runs.Load(), "nothing simulated again")
	var a, b bytes.Buffer
	require.NoError(t, first.WriteCSV(&a))
	require.NoError(t, second.WriteCSV(&b))
	assert.Equal(t, a.String(), b.String())

	s.Scenarios[1].Seed = 9 // another definition: its rows run again
	_, err = s.Run(context.Background(), opt)
	require.NoError(t, err)
	assert.Equal(t, int32(3), runs.Load())
	opt.Fresh, opt.Only = true, []string{"small-gavel"}
	_, err = s.Run(context.Background(), opt)
	require.NoError(t, err)
	assert.Equal(t, int32(4), runs.Load())

	// A kept row that was tampered with is run again, not trusted.
	file := filepath.Join(dir, "small-gavel", "gavel.json")
	require.NoError(t, os.WriteFile(file, []byte(`{"digest": 1}`), 0o644))
	opt.Fresh = false
	_, err = s.Run(context.Background(), opt)
	require.NoError(t, err)
	kept, err := os.ReadFile(file)
	require.NoError(t, err)
	assert.Contains(t, string(kept), `"entrant": "gavel"`)

	opt.Only = []string{"nope"}
	_, err = s.Run(context.Background(), opt)
	assert.ErrorIs(t, err, compare.ErrUnknown)
	opt.Only, opt.Entrants = nil, []string{"gavle"}
	_, err = s.Run(context.Background(), opt)
	assert.ErrorIs(t, err, compare.ErrUnknown, "a misspelt entrant")
	opt.Entrants = nil
	opt.Only, opt.Extra = nil, []compare.Entrant{{Name: "gavel", Policy: func(compare.Setup) allocation.Policy { return &allocation.MaxMinFairness{} }}}
	_, err = s.Run(context.Background(), opt)
	var ee *compare.EntrantError
	assert.ErrorAs(t, err, &ee, "a user's entrant named as a baseline")
}

// The report ranks each scenario by its metric (utilisation: higher is
// better), puts the published figure and ours over it beside ours, and
// the ranks over the scenarios first.
func TestSuiteReport(t *testing.T) {
	s := tinySuite(t)
	rep, err := s.Run(context.Background(), compare.SuiteOptions{Traces: ".."})
	require.NoError(t, err)
	var md strings.Builder
	require.NoError(t, rep.WriteMarkdown(&md))
	out := md.String()
	assert.Contains(t, out, "| entrant | scenarios | mean rank (share of the field) | small-gavel | small-tiresias |")
	assert.Contains(t, out, "| policy | mean JCT (h) | rank | paper | ours/paper | jobs |")
	assert.Contains(t, out, "| policy | utilisation | rank | jobs |")
	assert.Contains(t, out, "Published: made up for the test.")
	g := rep.Reports[0].Rows[1]
	assert.Contains(t, out, "| gavel | "+strings.TrimSpace(fixed2(g.Summary.MeanJCT/3600))+" | ")
	assert.Contains(t, out, " | 20.00 | "+fixed2(g.Summary.MeanJCT/3600/20)+" | ")
	// Higher utilisation ranks first.
	u := rep.Reports[1].Rows
	best := 0
	if u[1].Summary.Utilisation > u[0].Summary.Utilisation {
		best = 1
	}
	assert.Contains(t, out, "| "+u[best].Entrant+" | "+strings.TrimSuffix(percent(u[best].Summary.Utilisation), "%")+"% | 1 |")
	var csv strings.Builder
	require.NoError(t, rep.WriteCSV(&csv))
	lines := strings.Split(strings.TrimSpace(csv.String()), "\n")
	assert.Len(t, lines, 1+3+2)
	assert.True(t, strings.HasPrefix(lines[0], "scenario,entrant,jobs,"), lines[0])
	assert.True(t, strings.HasPrefix(lines[5], "small-tiresias,gavel,60,"), lines[5])
}

func fixed2(v float64) string {
	var b strings.Builder
	rep := &compare.Report{Rows: []compare.Row{{}}}
	cols, _ := rep.Select("mean_jct_h")
	b.WriteString(cols[0].Format(v))
	return b.String()
}

func percent(v float64) string {
	rep := &compare.Report{}
	cols, _ := rep.Select("utilisation")
	return cols[0].Format(v)
}

// Every wrong suite file is a *SuiteError naming the file and the value
// at fault.
func TestReadSuiteErrors(t *testing.T) {
	good := `{"name": "a", "cluster": "v100:4", "workload": {"generator": "gavel", "jobs": 10, "rate": 1}, "window": [0, 10], "entrants": ["gavel"]}`
	elastic := `{"name": "e", "engine": "elastic", "pools": "t4:4x4", "workload": {"pollux": "p", "workloads": 1}, "entrants": ["sia"]}`
	for _, c := range []struct{ doc, want string }{
		{`{}`, "scenarios: 0 scenarios"},
		{`{"scenarios": [` + good + `], "x": 1}`, `unknown`},
		{`{"scenarios": [` + good + `, ` + good + `]}`, `scenarios[1].name: "a" appears twice`},
		{strings.Replace(good, `"a"`, `"a/b"`, 1), `scenarios[0].name: "a/b"`},
		{strings.Replace(good, `"a"`, `".."`, 1), `scenarios[0].name`},
		{strings.Replace(good, `v100:4`, `v100:0`, 1), `scenarios[0].cluster`},
		{strings.Replace(good, `"generator": "gavel", `, ``, 1), `scenarios[0].workload: exactly one of generator and trace`},
		{strings.Replace(good, `"gavel", "jobs"`, `"gavel", "trace": "x.csv", "jobs"`, 1), `exactly one of generator and trace`},
		{strings.Replace(good, `"jobs": 10`, `"jobs": 0`, 1), `scenarios[0].workload.jobs: 0`},
		{strings.Replace(good, `"rate": 1`, `"rate": 1e-9`, 1), `scenarios[0].workload.rate`},
		{strings.Replace(good, `[0, 10]`, `[5, 5]`, 1), `scenarios[0].window: [5, 5]`},
		{strings.Replace(good, `[0, 10]`, `[0, 11]`, 1), `beyond the 10 jobs generated`},
		{strings.Replace(good, `["gavel"]`, `["gavel", "gavel"]`, 1), `scenarios[0].entrants[1]: "gavel" appears twice`},
		{strings.Replace(good, `["gavel"]`, `["tiresias"]`, 1), `scenarios[0].entrants[0]`},
		{strings.Replace(good, `["gavel"]`, `[]`, 1), `scenarios[0].entrants: 0 entrants`},
		{strings.Replace(good, `["gavel"]`, `["kueue"], "until_measured": true`, 1), `cannot stop when the measured jobs finish`},
		{strings.Replace(good, `"window"`, `"metric": "speed", "window"`, 1), `scenarios[0].metric: "speed"`},
		{strings.Replace(good, `"window"`, `"compat": "tiresias", "window"`, 1), `scenarios[0].compat`},
		{strings.Replace(good, `"window"`, `"published": {"source": "", "values": {}}, "window"`, 1), `published.source`},
		{strings.Replace(good, `"window"`, `"published": {"source": "x", "values": {"las": 1}}, "window"`, 1), `"las" is not an entrant`},
		{strings.Replace(good, `"window"`, `"published": {"source": "x", "values": {"gavel": -1}}, "window"`, 1), `gavel: -1`},
		{`{"scenarios": [{"name": "t", "cluster": "v100:4", "workload": {"trace": "/etc/passwd", "format": "itp"}, "window": [0, 0], "entrants": ["gavel"]}]}`, `workload.trace: "/etc/passwd"`},
		{`{"scenarios": [{"name": "t", "cluster": "v100:4", "workload": {"trace": "../x.csv", "format": "itp"}, "window": [0, 0], "entrants": ["gavel"]}]}`, `workload.trace: "../x.csv"`},
		{`{"scenarios": [{"name": "t", "cluster": "v100:4", "workload": {"trace": "x.csv", "format": "yaml"}, "window": [0, 0], "entrants": ["gavel"]}]}`, `workload.format: "yaml"`},
		{`{"scenarios": [{"name": "t", "cluster": "v100:4", "workload": {"trace": "x.csv", "format": "itp", "rate": 2}, "window": [0, 0], "entrants": ["gavel"]}]}`, `are for the generator`},
		{`{"scenarios": [{"name": "t", "cluster": "v100:4", "workload": {"trace": "x.csv", "format": "itp"}, "window": [3, 0], "entrants": ["gavel"]}]}`, `window: [3, 0]`},
		{strings.Replace(elastic, `"t4:4x4"`, `"t4:4"`, 1), `scenarios[0].pools: compare: pool "t4:4"`},
		{strings.Replace(elastic, `"engine": "elastic"`, `"engine": "elastic", "cluster": "v100:4"`, 1), `scenarios[0].engine: an elastic scenario has pools`},
		{strings.Replace(elastic, `"workloads": 1`, `"workloads": 9`, 1), `scenarios[0].workload.workloads: 9`},
		{strings.Replace(elastic, `"workloads": 1`, `"workloads": 1, "power": 2`, 1), `scenarios[0].workload.power: 2`},
		{strings.Replace(elastic, `"pollux": "p"`, `"pollux": "../p"`, 1), `scenarios[0].workload.pollux: "../p"`},
		{strings.Replace(elastic, `["sia"]`, `["gavel-ss"]`, 1), `scenarios[0].entrants[0]: compare: typed baseline "gavel-ss"`},
		{strings.Replace(elastic, `"elastic"`, `"hetero"`, 1), `scenarios[0].engine: "hetero"`},
		{strings.Replace(good, `"window"`, `"pools": "t4:1x4", "window"`, 1), `scenarios[0].pools: pools, pollux, workloads and power are for elastic scenarios`},
	} {
		doc := c.doc
		if strings.HasPrefix(doc, `{"name"`) {
			doc = `{"scenarios": [` + doc + `]}`
		}
		_, err := compare.ReadSuite([]byte(doc), "bad.json")
		var se *compare.SuiteError
		if assert.ErrorAs(t, err, &se, c.doc) {
			assert.Equal(t, "bad.json", se.File)
			assert.ErrorContains(t, err, c.want, c.doc)
		}
	}
	_, err := compare.ReadSuite(make([]byte, compare.MaxSuiteBytes+1), "big.json")
	assert.ErrorContains(t, err, "more than")
	// A trace that is not there names the file; one shorter than the
	// window says so.
	sc := compare.SuiteScenario{Name: "t", Cluster: "v100:4", Workload: compare.Workload{Trace: "missing.csv", Format: "itp"}, Entrants: []string{"gavel"}}
	_, err = sc.Scenario(func(string) ([]byte, error) { return nil, os.ErrNotExist }, t.TempDir())
	assert.ErrorIs(t, err, os.ErrNotExist)
	sc.Window = [2]int{0, 100}
	_, err = sc.Scenario(func(string) ([]byte, error) {
		return []byte("job_id,submission_time,duration,num_gpu\n1,0,60,1\n"), nil
	}, ".")
	var se *compare.ScenarioError
	assert.ErrorAs(t, err, &se)
}

func FuzzReadSuite(f *testing.F) {
	data, err := os.ReadFile(filepath.Join("testdata", "tiny.json"))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(data)
	f.Add([]byte(`{"scenarios": []}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := compare.ReadSuite(b, "fuzz.json")
		if err != nil {
			var se *compare.SuiteError
			if !errors.As(err, &se) {
				t.Fatalf("not a *SuiteError: %v", err)
			}
			return
		}
		for _, sc := range s.Scenarios {
			if sc.Workload.Generator != "" && sc.Workload.Jobs > 1000 {
				continue // too slow to build here; checked by ReadSuite
			}
			if _, err := sc.Scenario(func(string) ([]byte, error) { return nil, os.ErrNotExist }, "."); err != nil && sc.Workload.Generator != "" {
				t.Fatalf("scenario %s passed ReadSuite but not Scenario: %v", sc.Name, err)
			}
		}
	})
}

// TestMainCorpus runs the command lines of testdata/args.txt: every bad
// flag is refused with exit status 2 and one line naming it.
func TestMainCorpus(t *testing.T) {
	corpus, err := filepath.Abs(filepath.Join("testdata", "args.txt"))
	require.NoError(t, err)
	t.Chdir("..")
	clitest.Run(t, corpus, func(args []string, stdout, stderr io.Writer) int { return compare.Main(args, stdout, stderr) })
}

// docs/compare.md's table of FIFOs on the suite's itp scenario: the round
// engine's FIFO is a preemptive FIFO, within 5% of the event engine's
// preemptive one; gang.FIFO is Priority over arrival order without
// preemption, whose Backfill zero value now lets later jobs pass.
func TestTwoFIFOs(t *testing.T) {
	if testing.Short() {
		t.Skip("simulates 4,000 ITP jobs five times")
	}
	scen := defaultScenario(t, "itp")
	events := func(name string, s sim.EventScheduler) compare.Entrant {
		return compare.Entrant{Name: name, Events: func(compare.Setup) sim.EventScheduler { return s }}
	}
	entrants := append(baselines(t, "fifo", "fifo-events"),
		compare.Entrant{Name: "sticky", Policy: func(s compare.Setup) allocation.Policy { return &allocation.FIFO{Seed: s.Seed, Sticky: true} }},
		events("preemptive", gang.Priority{Order: gang.ByArrival{}}),
		events("non-preemptive", gang.Priority{Order: gang.ByArrival{}, NoPreemption: true}),
		events("strict", gang.FIFO{Strict: true}))
	rep, err := compare.Run(context.Background(), scen, entrants, compare.Options{})
	require.NoError(t, err)
	mean := map[string]string{}
	for _, r := range rep.Rows {
		mean[r.Entrant] = fixed2(r.Summary.MeanJCT / 3600)
	}
	doc := docFile(t, "docs/compare.md")
	for name, want := range map[string]string{"fifo": "| rounds | " + mean["fifo"] + " h |", "sticky": "| rounds | " + mean["sticky"] + " h |",
		"preemptive": "| events | " + mean["preemptive"] + " h |", "fifo-events": "| events | " + mean["fifo-events"] + " h |", "strict": "| events | " + mean["strict"] + " h |"} {
		if !strings.Contains(doc, want) {
			t.Errorf("docs/compare.md lacks %s's row: %s", name, want)
		}
	}
	assert.Equal(t, mean["fifo-events"], mean["non-preemptive"])
	r := rep.Rows[0].Summary.MeanJCT / rep.Rows[3].Summary.MeanJCT
	assert.InDelta(t, 1, r, 0.05, "round FIFO over preemptive event FIFO")
}

// docs/reproduction.md's "ours" column for Gavel's single-GPU experiment
// at 4.8 jobs/h (Gavel's protocol, its exact jobs), rebuilt through the
// suite's scenario, and docs/kueue.md's table of the flavor walk.
func TestReproductionTables(t *testing.T) {
	if testing.Short() {
		t.Skip("simulates Gavel's experiment under five policies (about 20 s of CPU)")
	}
	scenarios := map[string]compare.SuiteScenario{}
	for _, s := range compare.DefaultSuite().Scenarios {
		scenarios[s.Name] = s
	}
	run := func(name string, entrants ...string) *compare.Report {
		sc := scenarios[name]
		scen, err := sc.Scenario(os.ReadFile, "..")
		require.NoError(t, err)
		rep, err := compare.Run(context.Background(), scen, baselines(t, entrants...), compare.Options{})
		require.NoError(t, err)
		return rep
	}
	doc := docFile(t, "docs/reproduction.md")
	rep := run("gavel-single-4.8", "fifo", "fifo-perf", "las", "gavel", "gavel-ss")
	label := map[string]string{"fifo": "FIFO", "fifo-perf": "FIFO-perf", "las": "LAS", "gavel": "Gavel", "gavel-ss": "Gavel w/ SS"}
	for i, row := range rep.Rows {
		prefix := "|  | "
		if i == 0 {
			prefix = "| single-GPU, 4.8 jobs/h | "
		}
		want := prefix + label[row.Entrant] + " | " + fmt.Sprintf("%.2f h", scenarios["gavel-single-4.8"].Published.Values[row.Entrant]) + " | " + fixed2(row.Summary.MeanJCT/3600) + " h |"
		if !strings.Contains(doc, want) {
			t.Errorf("docs/reproduction.md lacks %q", want)
		}
	}
	kueue := run("kueue-flavor-walk", "kueue", "kueue-gpusched", "kueue-gpusched-nowait")
	doc = docFile(t, "docs/kueue.md")
	h := func(v float64) string {
		s := fixed2(v / 3600)
		if whole, frac, ok := strings.Cut(s, "."); ok && len(whole) > 3 {
			s = whole[:len(whole)-3] + "," + whole[len(whole)-3:] + "." + frac
		}
		return s + " h"
	}
	for _, row := range kueue.Rows {
		s := row.Summary
		want := "| `" + row.Entrant + "` | " + strings.Join([]string{h(s.MeanJCT), h(s.MedianJCT), h(s.P95JCT), h(s.P99JCT), h(s.MeanQueueing), h(s.Makespan), percent(s.Utilisation)}, " | ") + " |"
		if !strings.Contains(doc, want) {
			t.Errorf("docs/kueue.md lacks %q", want)
		}
	}
}

// Every scenario is built before any runs: a trace that is not there, or
// shorter than its window, in the last scenario is a *SuiteError naming
// the file and the scenario before the first has run; a trace changed
// since a row was kept runs that row again; the report says which rows
// were kept.
func TestSuitePreparesAndKeysTraces(t *testing.T) {
	dir := t.TempDir()
	trace := filepath.Join(dir, "t.csv")
	full, err := os.ReadFile(filepath.Join("..", "sim", "testdata", "tiresias", "60_job.csv"))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(trace, full, 0o644))
	doc := `{"scenarios": [
	  {"name": "gen", "cluster": "v100:4", "workload": {"generator": "gavel", "jobs": 20, "rate": 20}, "window": [0, 0], "entrants": ["gavel"]},
	  {"name": "tr", "cluster": "v100:8", "workload": {"trace": "t.csv", "format": "tiresias"}, "window": [0, 50], "entrants": ["fifo"]}]}`
	s, err := compare.ReadSuite([]byte(doc), "two.json")
	require.NoError(t, err)
	var runs atomic.Int32
	opt := compare.SuiteOptions{Traces: dir, Results: filepath.Join(dir, "results"), Extra: []compare.Entrant{counting(&runs)}}
	_, err = s.Run(context.Background(), compare.SuiteOptions{Traces: t.TempDir(), Extra: opt.Extra})
	var se *compare.SuiteError
	require.ErrorAs(t, err, &se)
	assert.Equal(t, "two.json", se.File)
	assert.Equal(t, "scenarios[1] (tr)", se.Path)
	var te *compare.TraceError
	assert.ErrorAs(t, err, &te)
	assert.ErrorIs(t, err, os.ErrNotExist)
	assert.Equal(t, int32(0), runs.Load(), "nothing ran before the missing trace was found")

	_, err = s.Run(context.Background(), opt)
	require.NoError(t, err)
	assert.Equal(t, int32(2), runs.Load())
	rep, err := s.Run(context.Background(), opt)
	require.NoError(t, err)
	assert.Equal(t, int32(2), runs.Load(), "all kept")
	var md strings.Builder
	require.NoError(t, rep.WriteMarkdown(&md))
	assert.Contains(t, md.String(), "Kept from an earlier run of the same scenario, trace and gpusched (-fresh runs them again): fifo, mine/v1.")

	// The trace shortened: its rows run again (and the window no longer
	// fits: an error naming the scenario).
	lines := strings.SplitAfter(string(full), "\n")
	require.NoError(t, os.WriteFile(trace, []byte(strings.Join(lines[:56], "")), 0o644))
	s.Scenarios[1].Window = [2]int{0, 40}
	before := runs.Load()
	_, err = s.Run(context.Background(), opt)
	require.NoError(t, err)
	assert.Equal(t, before+1, runs.Load(), "the changed trace's row ran again, the generated scenario's did not")
	s.Scenarios[1].Window = [2]int{0, 58}
	_, err = s.Run(context.Background(), opt)
	require.ErrorAs(t, err, &se)
	assert.ErrorContains(t, err, "beyond the trace's 55 jobs")
}

// A cluster of a GPU type Gavel's table (the default rates) does not know
// is an error before anything runs.
func TestUnknownTypeInCluster(t *testing.T) {
	_, err := compare.Run(context.Background(), compare.Scenario{Cluster: "v10:4", Jobs: gavelJobs(t, 5, 20, 0)}, baselines(t, "fifo"), compare.Options{})
	var se *compare.ScenarioError
	require.ErrorAs(t, err, &se)
	assert.ErrorContains(t, err, "GPU type v10 has no rates in Gavel's table")
}

// An elastic scenario: Pollux's workload 1 on Pollux's testbed (16 nodes
// of 4 T4) under typed baselines and a typed entrant of one's own, kept
// and resumed as the others; Pollux's goodput beats the workload's fixed
// GPUs (FIFO) as in Pollux's evaluation, and the row agrees with the
// per-workload figure docs/reproduction.md gives for the typed Sia.
func TestTypedSuite(t *testing.T) {
	if testing.Short() {
		t.Skip("fits six step-time models")
	}
	doc := `{"scenarios": [{"name": "p1", "engine": "elastic", "pools": "t4:16x4", "workload": {"pollux": "sim/testdata/pollux", "workloads": 1}, "entrants": ["pollux", "sia", "fifo"], "published": {"source": "artifact, workload 1", "values": {"pollux": 0.58}}}]}`
	s, err := compare.ReadSuite([]byte(doc), "p.json")
	require.NoError(t, err)
	var runs atomic.Int32
	mine := compare.TypedEntrant{Name: "mine", Description: "FIFO, counted", Fixed: true,
		Policy: func() elastic.TypedPolicy { runs.Add(1); return elastic.Unaware{Policy: elastic.FIFO{}} }}
	opt := compare.SuiteOptions{Traces: "..", Results: t.TempDir(), Typed: []compare.TypedEntrant{mine}}
	rep, err := s.Run(context.Background(), opt)
	require.NoError(t, err)
	rows := rep.Reports[0].Rows
	require.Len(t, rows, 4)
	assert.Equal(t, int32(1), runs.Load())
	pollux, sia, fifo, own := rows[0].Summary, rows[1].Summary, rows[2].Summary, rows[3].Summary
	assert.Less(t, pollux.MeanJCT, fifo.MeanJCT)
	assert.Equal(t, fifo, own, "the same policy as fifo")
	assert.Equal(t, "2108", fmt.Sprintf("%.0f", sia.MeanJCT), "docs/reproduction.md: Sia (one GPU type), workload 1")
	assert.Equal(t, 160, pollux.Jobs)
	assert.Equal(t, []topology.GPUType{"t4"}, rep.Reports[0].Types)
	assert.InDelta(t, rows[0].GPUHours[0], pollux.Utilisation*64*pollux.Makespan/3600, 1)
	again, err := s.Run(context.Background(), opt)
	require.NoError(t, err)
	assert.Equal(t, int32(1), runs.Load(), "kept")
	assert.Equal(t, rows[0].Summary, again.Reports[0].Rows[0].Summary)
	var md strings.Builder
	require.NoError(t, again.WriteMarkdown(&md))
	assert.Regexp(t, `\| pollux \| `+fixed2(pollux.MeanJCT/3600)+` \| \d \| 0\.58 \|`, md.String())

	_, err = s.Run(context.Background(), compare.SuiteOptions{Traces: t.TempDir()})
	var te *compare.TraceError
	require.ErrorAs(t, err, &te, "no Pollux folder there")
	assert.Contains(t, te.Path, "app-profiles")

	opt.Typed = []compare.TypedEntrant{{Name: "sia", Policy: mine.Policy}}
	_, err = s.Run(context.Background(), opt)
	var ee *compare.EntrantError
	assert.ErrorAs(t, err, &ee, "a typed entrant named as a typed baseline")
	_, err = compare.ParsePools(strings.Repeat("t4:1x4,", 64) + "t4:1x4")
	assert.ErrorContains(t, err, "65 pools, more than 64")
	_, err = compare.ParsePools("t4:0x4")
	assert.ErrorContains(t, err, `pool "t4:0x4"`)
}

// A queue order on the round engine (QueueOrder): arrival order is Gavel's
// FIFO-perf bit for bit; SRTF ranks by remaining work as the event
// engine's preemptive SRTF does, and lands within a fifth of it on the
// itp scenario (the round: jobs start and GPUs free at its boundaries;
// the events engine places on the fastest type with room too).
func TestQueueOrderEngines(t *testing.T) {
	if testing.Short() {
		t.Skip("simulates 4,000 ITP jobs four times")
	}
	scen := defaultScenario(t, "itp")
	byArrival, err := compare.QueueOrder("fifo-order", gang.ByArrival{})
	require.NoError(t, err)
	srtfOrder, err := compare.QueueOrder("srtf", gang.ShortestRemaining{})
	require.NoError(t, err)
	var ee *compare.EntrantError
	for _, o := range []gang.Order{gang.LAS2D{}, &gang.Gittins2D{}, nil} {
		_, err := compare.QueueOrder("tiresias", o)
		require.ErrorAs(t, err, &ee, "%T", o)
	}
	_, err = compare.QueueOrder("a,b", gang.ByArrival{})
	require.ErrorAs(t, err, &ee)
	entrants := append(baselines(t, "fifo-perf"), byArrival, srtfOrder,
		compare.Entrant{Name: "srtf-events", Events: func(compare.Setup) sim.EventScheduler {
			return gang.Priority{Order: gang.ShortestRemaining{}}
		}})
	rep, err := compare.Run(context.Background(), scen, entrants, compare.Options{})
	require.NoError(t, err)
	assert.Equal(t, rep.Rows[0].Summary, rep.Rows[1].Summary, "arrival order is FIFO-perf")
	srtf, events := rep.Rows[2].Summary.MeanJCT, rep.Rows[3].Summary.MeanJCT
	assert.Less(t, srtf, rep.Rows[0].Summary.MeanJCT, "SRTF beats FIFO")
	assert.InDelta(t, 1, srtf/events, 0.2, "SRTF %.2f h on rounds, %.2f h on events", srtf/3600, events/3600)
	t.Logf("mean JCT: fifo-perf %.2f h, srtf rounds %.2f h, srtf events %.2f h", rep.Rows[0].Summary.MeanJCT/3600, srtf/3600, events/3600)
}

// defaultScenario builds a scenario of the built-in suite, its traces
// read from the repository.
func defaultScenario(t *testing.T, name string) compare.Scenario {
	t.Helper()
	for _, s := range compare.DefaultSuite().Scenarios {
		if s.Name == name {
			scen, err := s.Scenario(os.ReadFile, "..")
			require.NoError(t, err)
			return scen
		}
	}
	t.Fatalf("no scenario %q in the built-in suite", name)
	return compare.Scenario{}
}
