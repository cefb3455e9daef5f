// Command simulate runs gpusched's trace-driven simulator and compares
// allocation policies. With no flags it reproduces the setting of Gavel's
// continuous single-GPU experiment (Narayanan et al., OSDI 2020, figure 8):
// jobs from Gavel's workload generator arriving at 4.8 jobs per hour on
// 36 V100 + 36 P100 + 36 K80, under FIFO, LAS (heterogeneity-agnostic
// max-min), Gavel (heterogeneity-aware max-min) and Gavel with space
// sharing; it prints a table and writes SVG plots (JCT CDF, utilisation
// over time). The default trace is shorter than Gavel's (2,500 jobs,
// measuring jobs 1,000 to 2,000) so that it runs in seconds; -jobs 5000
// -window 4000:5000 is Gavel's. A trace shorter than the default window is
// measured whole (with a note); a window given beyond the trace is an
// error.
//
// The round mechanism is Gavel's (a queue per GPU type, types visited
// fastest first, shuffled for the policies that ignore throughputs) and
// work-conserving; -compat gavel runs Gavel's code instead, quirks included
// (allocation.CompatGavel: its FIFO type choice, leftover GPUs to jobs
// without a share, its priority seeding, type order and shuffle, and its
// simulator loop), on the jobs Gavel's own generator draws for the seed.
//
//	go run ./examples/simulate
//	go run ./examples/simulate -rate 5.6 -policies las,gavel -out plots
//	go run ./examples/simulate -trace my.trace -cluster v100:8,k80:8
//	go run ./examples/simulate -compat gavel -policies fifo,fifo-perf
//
// The event-driven policies run jobs to their end once started:
// fifo-events (the fastest type with room), kueue (Kueue's flavor walk
// over the types in the order -cluster names them, package flavor) and
// kueue-gpusched (Kueue steered by gpusched's controller, kube/kueue, with
// its default wait rule for slow types; kueue-gpusched-nowait without it):
//
//	go run ./examples/simulate -policies kueue,kueue-gpusched -cluster v100:8,p100:8,k80:8 -rate 2 -jobs 300 -window 50:250
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/gpusched/gpusched/allocation"
	"github.com/gpusched/gpusched/flavor"
	"github.com/gpusched/gpusched/internal/cli"
	"github.com/gpusched/gpusched/perfmodel"
	"github.com/gpusched/gpusched/perfmodel/gavel"
	"github.com/gpusched/gpusched/sim"
	"github.com/gpusched/gpusched/topology"
)

type options struct {
	trace, format, cluster, policies, window, out, compat string
	rates                                                 string
	rate                                                  float64
	jobs                                                  int
	seed                                                  uint64
	multiGPU, quiet, vertex                               bool
	parallel                                              int
	// windowSet says -window was given: a window beyond the trace is then
	// an error rather than adapted; parallelSet that -parallel was.
	windowSet, parallelSet bool
}

// defaultWindow is the measured window when -window is not given.
const defaultWindow = "1000:2000"

func main() { os.Exit(command(os.Args[1:], os.Stdout, os.Stderr)) }

// command runs simulate with args and returns the exit status.
func command(args []string, stdout, stderr io.Writer) int {
	var o options
	fs := flag.NewFlagSet("simulate", flag.ContinueOnError)
	fs.StringVar(&o.trace, "trace", "", "a trace file, at most 512 MiB (default: generate Gavel's workload)")
	fs.StringVar(&o.format, "format", "gavel", "the trace's format: "+strings.Join(formatNames, ", ")+" (jobs without a model get Gavel job types by sim.AssignModels)")
	fs.StringVar(&o.cluster, "cluster", "v100:36,p100:36,k80:36", "cluster: type:count,... (Gavel's throughput table knows v100, p100, k80)")
	fs.StringVar(&o.policies, "policies", "fifo,las,gavel,gavel-ss", "policies to compare: "+strings.Join(policyNames(), ", "))
	fs.Float64Var(&o.rate, "rate", 4.8, "arrival rate of the generated workload, jobs per hour: 0 (all at once) or 0.001 to 1e6")
	fs.IntVar(&o.jobs, "jobs", 2500, fmt.Sprintf("number of generated jobs, 1 to %d", maxJobs))
	fs.StringVar(&o.window, "window", defaultWindow, "jobs to measure, from:to in order of arrival (Gavel: 4000:5000); by default all jobs of a shorter trace")
	fs.StringVar(&o.compat, "compat", "none", "round mechanism and FIFO: none (ours: work-conserving, fastest type first) or gavel (Gavel's code, quirks included, on the jobs its generator draws)")
	fs.Uint64Var(&o.seed, "seed", 0, "seed of the workload generator and the policies")
	fs.BoolVar(&o.multiGPU, "multi-gpu", false, "generate multi-GPU jobs (Gavel's 70/10/15/5% scale factors)")
	fs.StringVar(&o.out, "out", "out", "folder for the SVG plots (empty: no plots)")
	fs.BoolVar(&o.quiet, "quiet", false, "no progress on standard error")
	fs.BoolVar(&o.vertex, "vertex", false, "solve the LP policies for a vertex of the optimal face (crossover) instead of its centre")
	fs.IntVar(&o.parallel, "parallel", 2, "policies simulated at once, 1 to 64")
	fs.StringVar(&o.rates, "rates", "", "hide the truth (Gavel's table) from the round policies, which see, per run: "+strings.Join(rateNames, ", ")+" (a list: each policy runs once per setting; progress noisy, a warm-up at every start; sim.Hidden; issue #41); empty: the table, as it is")
	return cli.Main(fs, args, stderr, func(ctx context.Context) error {
		fs.Visit(func(f *flag.Flag) {
			o.windowSet = o.windowSet || f.Name == "window"
			o.parallelSet = o.parallelSet || f.Name == "parallel"
		})
		if err := o.check(); err != nil {
			return err
		}
		return run(ctx, stdout, stderr, o)
	})
}

// maxJobs bounds the generated workload (Gavel's largest is 5,000 jobs).
const maxJobs = 1_000_000

// parallelFor returns the policies simulated at once for a trace of n
// jobs: -parallel, or 1 beyond bigTrace jobs when -parallel was not given
// (each run holds its own state of every job present).
func (o *options) parallelFor(n int) int {
	if n > bigTrace && !o.parallelSet {
		return 1
	}
	return o.parallel
}

// bigTrace is the number of jobs beyond which the policies are simulated
// one at a time unless -parallel says otherwise: a run's memory peaks at
// about 3 KB per job present at once (6.2 GB for 2 million jobs arriving
// together), and two such runs at once had a 24 GB machine run out.
const bigTrace = 1 << 20

// formatNames are the trace formats, in the order the help lists them.
var formatNames = []string{"gavel", "philly", "itp", "tiresias", "alibaba"}

// check validates every flag before any work starts.
func (o *options) check() error {
	var c cli.Checks
	if o.trace != "" {
		c.InputFile("trace", o.trace, sim.MaxTraceBytes)
	}
	c.OneOf("format", o.format, formatNames...)
	c.OneOf("compat", o.compat, "none", "gavel")
	if _, err := topology.ParseCompact(o.cluster, 1); err != nil {
		c.Fail("cluster", o.cluster, "type:count,... with counts above 0 (%v)", err)
	}
	c.List("policies", o.policies, false, policyNames()...)
	c.ZeroOr("rate", o.rate, 0.001, 1e6, "every job at time 0")
	c.Int("jobs", o.jobs, 1, maxJobs)
	if _, _, err := parseWindow(o.window); err != nil {
		c.Fail("window", o.window, "from:to with 0 <= from < to, for instance 1000:2000")
	}
	if o.out != "" {
		c.OutputDir("out", o.out)
	}
	c.Int("parallel", o.parallel, 1, 64)
	if o.rates != "" {
		c.List("rates", o.rates, false, rateNames...)
		if o.compat != "none" {
			c.Fail("rates", o.rates, "no -rates with -compat gavel (Gavel's loop runs on the rates the policies see)")
		}
	}
	return c.Err()
}

// readers are the trace formats the command reads.
var readers = map[string]func(io.Reader, string) ([]sim.Job, error){
	"gavel": sim.ReadGavelTrace, "philly": sim.ReadPhilly, "itp": sim.ReadITP, "tiresias": sim.ReadTiresias, "alibaba": sim.ReadAlibabaPods,
}

// policies are the policies the command knows, by name.
// agnostic policies are shuffled in our mode; gavelShuffle those Gavel
// shuffles (policy names without "Perf" or "Packing": fifo, las).
var policies = map[string]struct {
	make         func(seed uint64, c allocation.Compat) allocation.Policy
	spaceSharing bool
	agnostic     bool
	gavelShuffle bool
}{
	"fifo":      {func(s uint64, c allocation.Compat) allocation.Policy { return &allocation.FIFO{Seed: s, Compat: c} }, false, true, true},
	"fifo-perf": {func(_ uint64, c allocation.Compat) allocation.Policy { return &allocation.FIFO{Perf: true, Compat: c} }, false, false, false},
	// fifo-random is FIFO with a random type with room (fifo.py's intent;
	// our default before #29); with -compat gavel it is fifo.py, as fifo.
	"fifo-random": {func(s uint64, c allocation.Compat) allocation.Policy {
		return &allocation.FIFO{Seed: s, Random: true, Compat: c}
	}, false, true, true},
	"las":   {func(uint64, allocation.Compat) allocation.Policy { return &allocation.MaxMinFairness{Agnostic: true} }, false, true, true},
	"gavel": {func(uint64, allocation.Compat) allocation.Policy { return &allocation.MaxMinFairness{} }, false, false, false},
	"gavel-ss": {func(uint64, allocation.Compat) allocation.Policy {
		return &allocation.MaxMinFairness{SpaceSharing: true}
	}, true, false, false},
	"gandiva":    {func(s uint64, _ allocation.Compat) allocation.Policy { return &allocation.Gandiva{Seed: s} }, true, true, false},
	"ftf":        {func(uint64, allocation.Compat) allocation.Policy { return &allocation.FinishTimeFairness{} }, false, false, false},
	"makespan":   {func(uint64, allocation.Compat) allocation.Policy { return &allocation.MinMakespan{} }, false, false, false},
	"throughput": {func(uint64, allocation.Compat) allocation.Policy { return &allocation.MaxThroughput{} }, false, false, false},
}

// eventPolicies run in the event-driven model: jobs start as GPUs free up
// and run to their end.
var eventPolicies = map[string]func(c eventCluster) sim.EventScheduler{
	"fifo-events": func(eventCluster) sim.EventScheduler { return sim.EventFIFO{} },
	// Kueue's own flavor assignment (package flavor): one ClusterQueue
	// holding the cluster, its flavors in the order -cluster names the
	// types, the first with room taken.
	"kueue": func(c eventCluster) sim.EventScheduler { return &flavor.Kueue{Queues: []flavor.Queue{c.queue()}} },
	// Kueue steered by gpusched's controller (kube/kueue) with Gavel's
	// heterogeneity-aware max-min fairness (gpusched-kueue --policy
	// max-min-fairness; with one ClusterQueue, the default's fairness
	// between ClusterQueues has nothing to share) and its default wait rule for
	// slow types (gpusched-kueue --patience 1: jobs' durations unknown,
	// an hour assumed); kueue-gpusched-nowait without the rule.
	"kueue-gpusched": func(c eventCluster) sim.EventScheduler {
		return &flavor.Steered{Queues: []flavor.Queue{c.queue()}, Types: c.types, Patience: 1}
	},
	"kueue-gpusched-nowait": func(c eventCluster) sim.EventScheduler {
		return &flavor.Steered{Queues: []flavor.Queue{c.queue()}, Types: c.types}
	},
}

// eventCluster is what an event-driven policy is built for: the types
// (sorted), their GPUs, and the order in which -cluster names them.
type eventCluster struct {
	types    []topology.GPUType
	capacity []int
	order    []int
}

// queue is a ClusterQueue over the whole cluster, its flavors in order.
func (c eventCluster) queue() flavor.Queue {
	q := flavor.Queue{Name: "cluster"}
	for _, k := range c.order {
		q.Flavors = append(q.Flavors, flavor.Flavor{Name: string(c.types[k]), Type: k, Nominal: c.capacity[k],
			BorrowingLimit: flavor.NoLimit, LendingLimit: flavor.NoLimit})
	}
	return q
}

// typeOrder lists the types (indices into the sorted types) in the order
// the -cluster flag names them ("v100:36,p100:36,k80:36"; Gavel's
// "36:36:36" means V100, P100, K80); types it does not name come last.
func typeOrder(spec string, types []topology.GPUType) []int {
	var names []string
	for _, part := range strings.Split(spec, ",") {
		name, _, _ := strings.Cut(strings.TrimSpace(part), ":")
		names = append(names, strings.ToLower(name))
	}
	if len(names) == 1 && strings.Count(spec, ":") == 2 {
		names = []string{"v100", "p100", "k80"} // Gavel's form
	}
	var order []int
	for _, n := range names {
		for k, t := range types {
			if string(t) == n && !slices.Contains(order, k) {
				order = append(order, k)
			}
		}
	}
	for k := range types {
		if !slices.Contains(order, k) {
			order = append(order, k)
		}
	}
	return order
}

// setVertex asks an LP policy for vertices (lp.InteriorPoint.Crossover).
func setVertex(p allocation.Policy) {
	switch p := p.(type) {
	case *allocation.MaxMinFairness:
		p.Vertex = true
	case *allocation.FinishTimeFairness:
		p.Vertex = true
	case *allocation.MinMakespan:
		p.Vertex = true
	case *allocation.MaxThroughput:
		p.Vertex = true
	}
}

func policyNames() []string {
	return []string{"fifo", "fifo-perf", "fifo-random", "fifo-events", "kueue", "kueue-gpusched", "kueue-gpusched-nowait", "las", "gavel", "gavel-ss", "gandiva", "ftf", "makespan", "throughput"}
}

type outcome struct {
	name    string
	result  *sim.Result
	summary sim.Summary
	took    time.Duration
	err     error
}

func run(ctx context.Context, stdout, stderr io.Writer, o options) error {
	cluster, err := topology.ParseCompact(o.cluster, 1)
	if err != nil {
		return err
	}
	types := cluster.GPUTypes()
	capacity := make([]int, len(types))
	for k, t := range types {
		capacity[k] = cluster.Capacity()[t]
	}
	window := o.window
	if window == "" {
		window = defaultWindow
	}
	from, to, err := parseWindow(window)
	if err != nil {
		return err
	}
	compat, err := allocation.ParseCompat(o.compat)
	if err != nil {
		return cli.Usage("compat", o.compat, "none or gavel")
	}
	var jobs []sim.Job
	source := fmt.Sprintf("Gavel's workload generator: %d jobs at %.1f jobs/h, seed %d", o.jobs, o.rate, o.seed)
	if o.multiGPU {
		source += ", multi-GPU"
	}
	if o.trace != "" {
		read, ok := readers[o.format]
		if !ok {
			return cli.Usage("format", o.format, "one of %s", strings.Join(formatNames, ", "))
		}
		if jobs, err = cli.Read(o.trace, sim.MaxTraceBytes, read); err != nil {
			return err
		}
		if err := (&sim.AssignModels{Seed: o.seed}).Apply(jobs); err != nil {
			return err
		}
		source = fmt.Sprintf("%s: %d jobs", o.trace, len(jobs))
	} else if jobs, err = (&sim.GavelWorkload{Rate: o.rate, MultiGPU: o.multiGPU, Seed: o.seed, Python: compat == allocation.CompatGavel}).Generate(o.jobs); err != nil {
		return err
	}
	if to > len(jobs) {
		if o.windowSet {
			return cli.Usage("window", o.window, "a window within the trace's %d jobs", len(jobs))
		}
		if _, err := fmt.Fprintf(stderr, "simulate: the trace has %d jobs, fewer than the default window %s: measuring all of them\n", len(jobs), defaultWindow); err != nil {
			return err
		}
		from, to = 0, len(jobs)
	}
	if p := o.parallelFor(len(jobs)); p != o.parallel {
		o.parallel = p
		if _, err := fmt.Fprintf(stderr, "simulate: %d jobs: simulating one policy at a time (a run takes about 3 KB per job present at once; -parallel to override)\n", len(jobs)); err != nil {
			return err
		}
	}
	var names []string
	var hidden []*sim.Hidden // per name: nil for the table as it is
	settings := []string{""}
	if o.rates != "" {
		settings = strings.Split(o.rates, ",")
	}
	for _, n := range strings.Split(o.policies, ",") {
		n = strings.TrimSpace(n)
		_, event := eventPolicies[n]
		if _, ok := policies[n]; !ok && !event {
			return fmt.Errorf("unknown policy %q (known: %s)", n, strings.Join(policyNames(), ", "))
		}
		for _, r := range settings {
			r = strings.TrimSpace(r)
			if r == "" {
				names, hidden = append(names, n), append(hidden, nil)
				continue
			}
			if event || policies[n].spaceSharing {
				return cli.Usage("rates", o.rates, "round policies without space sharing only (%s is not)", n)
			}
			h, err := hiddenFor(r, o.seed)
			if err != nil {
				return err
			}
			names, hidden = append(names, n+"/"+r), append(hidden, h)
		}
	}
	mechanism := "ours (a queue per type, fastest type first, work-conserving)"
	if compat == allocation.CompatGavel {
		mechanism = "Gavel's code (-compat gavel)"
		if o.trace == "" {
			source += ", CPython's draws"
		}
	}
	if _, err := fmt.Fprintf(stdout, "Cluster %s (%d GPUs); %s; measuring jobs %d to %d; mechanism: %s.\n\n", o.cluster, cluster.NumGPUs(), source, from, to, mechanism); err != nil {
		return err
	}

	// Traces hold jobs of 16 GPUs and more, which Gavel never measured:
	// they run at rates extrapolated from its largest measurement.
	model := perfmodel.Extrapolated{Table: gavel.Simulation()}
	results := make([]outcome, len(names))
	var wg sync.WaitGroup
	sem := make(chan struct{}, max(1, o.parallel))
	progress := newProgress(stderr, o.quiet, names)
	for i, name := range names {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			start := time.Now()
			if ev, ok := eventPolicies[name]; ok {
				sched := ev(eventCluster{types: types, capacity: capacity, order: typeOrder(o.cluster, types)})
				res, err := sim.RunEvents(ctx, sim.EventConfig{Types: types, Capacity: capacity, Scheduler: sched, Throughput: model,
					Progress: func(done, total int) { progress.update(i, done, total) }}, jobs)
				results[i] = outcome{name: name, result: res, took: time.Since(start), err: err}
				if err == nil {
					results[i].summary = res.Summarise(from, to)
				}
				return
			}
			spec := policies[strings.SplitN(name, "/", 2)[0]]
			pol := spec.make(o.seed, compat)
			if o.vertex {
				setVertex(pol)
			}
			cfg := sim.Config{
				Types: types, Capacity: capacity, Policy: pol, Throughput: model,
				Mechanism: allocation.Mechanism{Seed: o.seed, Compat: compat, ShuffleTypes: spec.agnostic},
				Progress:  func(done, total int) { progress.update(i, done, total) },
			}
			if compat == allocation.CompatGavel {
				cfg.ShuffleTypes = spec.gavelShuffle
			}
			if spec.spaceSharing {
				cfg.Colocation = measuredPairs{gavel.Simulation()}
			}
			cfg.Hidden = hidden[i]
			res, err := sim.Run(ctx, cfg, jobs)
			results[i] = outcome{name: name, result: res, took: time.Since(start), err: err}
			if err == nil {
				results[i].summary = res.Summarise(from, to)
			}
		}()
	}
	wg.Wait()
	progress.done()
	for _, r := range results {
		if r.err != nil {
			return fmt.Errorf("%s: %w", r.name, r.err)
		}
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	var werr error
	line := func(cells ...string) {
		if werr == nil {
			_, werr = fmt.Fprintln(tw, strings.Join(cells, "\t")+"\t")
		}
	}
	head := []string{"policy", "jobs", "mean JCT (h)", "median (h)", "p95 (h)", "p99 (h)", "queueing (h)", "makespan (h)", "utilisation", "mean rho", "rho>1", "allocations", "run time"}
	if o.rates != "" {
		head = append(head, "explored (GPU-h)")
	}
	line(head...)
	for _, r := range results {
		s := r.summary
		h := func(v float64) string { return cli.Fixed(v/3600, 2) }
		// The event-driven engine does not compute isolated times, so it
		// has no rho to show.
		rho, above := cli.Fixed(s.MeanRho, 2), cli.Percent(s.RhoAbove1)
		if !hasRho(r.result) {
			rho, above = "-", "-"
		}
		cells := []string{r.name, strconv.Itoa(s.Jobs), h(s.MeanJCT), h(s.MedianJCT), h(s.P95JCT), h(s.P99JCT), h(s.MeanQueueing), h(s.Makespan),
			cli.Percent(s.Utilisation), rho, above, strconv.Itoa(r.result.Allocations), r.took.Round(10 * time.Millisecond).String()}
		if o.rates != "" {
			cells = append(cells, cli.Fixed(r.result.ExploredGPUSeconds/3600, 1))
		}
		line(cells...)
	}
	if werr != nil {
		return werr
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if o.out == "" {
		return nil
	}
	if err := os.MkdirAll(o.out, 0o755); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	files, err := plots(o.out, results, from, to)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(stdout, "\nPlots: %s\n", strings.Join(files, ", "))
	return err
}

// hasRho reports whether any job has an isolated time, the denominator of
// rho.
func hasRho(res *sim.Result) bool {
	for _, r := range res.Records {
		if r.Isolated > 0 {
			return true
		}
	}
	return false
}

// measuredPairs answers co-located rates from Gavel's table; jobs it never
// measured (16 GPUs and more) do not share a GPU.
type measuredPairs struct{ t *perfmodel.Table }

var _ perfmodel.ColocationModel = measuredPairs{}

func (m measuredPairs) Colocated(a, b perfmodel.JobKey, t topology.GPUType) (float64, float64, error) {
	ta, tb, err := m.t.Colocated(a, b, t)
	if errors.Is(err, perfmodel.ErrUnknownJob) {
		return 0, 0, nil
	}
	return ta, tb, err
}

func parseWindow(s string) (int, int, error) {
	a, b, ok := strings.Cut(s, ":")
	from, err1 := strconv.Atoi(strings.TrimSpace(a))
	to, err2 := strconv.Atoi(strings.TrimSpace(b))
	if !ok || err1 != nil || err2 != nil || from < 0 || to <= from {
		return 0, 0, errors.New("window: want from:to with 0 <= from < to, for instance 1000:2000")
	}
	return from, to, nil
}

// progress prints each policy's share of finished jobs ("waiting" until
// its run starts): on a terminal redrawn in place at most every half
// second; elsewhere (a log file, a pipe) as plain lines, at most every
// 10 s.
type progress struct {
	mu    sync.Mutex
	w     io.Writer
	quiet bool
	tty   bool
	names []string
	pct   []int // -1: waiting
	last  time.Time
}

func newProgress(w io.Writer, quiet bool, names []string) *progress {
	p := &progress{w: w, quiet: quiet, names: names, pct: make([]int, len(names))}
	for i := range p.pct {
		p.pct[i] = -1
	}
	if f, ok := w.(*os.File); ok {
		if st, err := f.Stat(); err == nil && st.Mode()&os.ModeCharDevice != 0 {
			p.tty = true
		}
	}
	return p
}

func (p *progress) update(i, done, total int) {
	if p.quiet || total == 0 {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.pct[i] = 100 * done / total
	every := 10 * time.Second
	if p.tty {
		every = 500 * time.Millisecond
	}
	if time.Since(p.last) < every {
		return
	}
	p.last = time.Now()
	line := p.line()
	if p.tty {
		_, _ = fmt.Fprintf(p.w, "\r%s", line) // progress is best effort
	} else {
		_, _ = fmt.Fprintln(p.w, line)
	}
}

// line is the progress of every policy.
func (p *progress) line() string {
	parts := make([]string, len(p.names))
	for j, n := range p.names {
		if p.pct[j] < 0 {
			parts[j] = n + " waiting"
		} else {
			parts[j] = fmt.Sprintf("%s %3d%%", n, p.pct[j])
		}
	}
	return strings.Join(parts, "  ")
}

func (p *progress) done() {
	if !p.quiet && !p.last.IsZero() && p.tty {
		_, _ = fmt.Fprintln(p.w)
	}
}

// plotPath joins the output folder and a file name.
func plotPath(dir, name string) string { return filepath.Join(dir, name) }
