// Command benchsuite reproduces the simulated results of Gavel (Narayanan
// et al., OSDI 2020, section 7; the numbers printed in the notebooks of
// stanford-futuredata/gavel at c4fa400) and prints ours beside them: mean
// JCT of jobs 4000-5000 of Gavel's continuous traces on 36 V100 + 36 P100 +
// 36 K80 at several arrival rates (seed 0), and the makespan of static
// multi-GPU traces (mean of seeds 0-2).
//
// Both runs use the jobs Gavel's own generator draws (sim.GavelWorkload
// with Python), and Gavel's protocol: jobs keep arriving until the measured
// ones have finished (when they outlast 40,000 arrivals, the backlog is not
// draining and the mean is printed as a lower bound, ">="; -fixed runs the
// old protocol instead, arrivals stopping at the last measured job). Each
// experiment runs in our mode (the mechanism's
// defaults: a queue per type, fastest type first, work-conserving; FIFO as
// meant) and in Gavel's (-compat gavel: its mechanism, FIFO and simulator
// loop, quirks included). Runs are CPU-heavy (on 2 cores shared with
// other jobs, single-4.8 took 7 minutes, single-5.6 19 and multi-2.8 more
// than 30); -only selects experiments, -policies columns, -compat one mode.
//
//	go run ./examples/benchsuite
//	go run ./examples/benchsuite -only single-4.8,makespan-100 -compat gavel
//	go run -tags clp ./examples/benchsuite -solver clp -only single-4.8
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/gpusched/gpusched/allocation"
	"github.com/gpusched/gpusched/allocation/lp"
	"github.com/gpusched/gpusched/internal/cli"
	"github.com/gpusched/gpusched/perfmodel/gavel"
	"github.com/gpusched/gpusched/sim"
	"github.com/gpusched/gpusched/topology"
)

// experiment is one of Gavel's settings with its published numbers (hours;
// a policy missing from published was not reported, or did not finish).
type experiment struct {
	name     string
	rate     float64 // jobs/h; 0 for a static trace
	multiGPU bool
	from, to int // measured jobs (a static trace has to jobs)
	static   bool
	seeds    []uint64
	// published maps a column to Gavel's figure.
	published map[string]float64
}

// linspace returns Gavel's sweep value i of np.linspace(0, stop, 16), as
// Python computes it (i * (stop / 15)), so that the arrivals are Gavel's.
func linspace(stop float64, i int) float64 {
	step := stop / 15
	return float64(i) * step
}

// experiments: continuous_jobs.ipynb, continuous_jobs_multigpu.ipynb and
// makespan.ipynb (fifo is Gavel's base FIFO, fifo-perf its fifo_perf, las
// max_min_fairness, gavel max_min_fairness_perf or min_total_duration_perf,
// gavel-ss max_min_fairness_packed).
var experiments = []experiment{
	{name: "single-0.4", rate: linspace(6, 1), from: 4000, to: 5000, seeds: []uint64{0},
		published: map[string]float64{"fifo": 17.58, "fifo-perf": 15.31, "las": 23.26, "gavel": 17.58, "gavel-ss": 18.42}},
	{name: "single-4.8", rate: linspace(6, 12), from: 4000, to: 5000, seeds: []uint64{0},
		published: map[string]float64{"fifo": 99.19, "fifo-perf": 22.24, "las": 35.79, "gavel": 18.97, "gavel-ss": 18.67}},
	{name: "single-5.6", rate: linspace(6, 14), from: 4000, to: 5000, seeds: []uint64{0},
		published: map[string]float64{"fifo-perf": 104.12, "las": 95.99, "gavel": 28.96, "gavel-ss": 19.64}},
	{name: "multi-2.8", rate: linspace(3, 14), multiGPU: true, from: 4000, to: 5000, seeds: []uint64{0},
		published: map[string]float64{"fifo": 414.68, "fifo-perf": 204.44, "las": 169.93, "gavel": 55.78, "gavel-ss": 38.25}},
	{name: "makespan-100", multiGPU: true, to: 100, static: true, seeds: []uint64{0, 1, 2},
		published: map[string]float64{"fifo": 182.3, "gavel": 161.2, "gavel-ss": 163.6}},
	{name: "makespan-700", multiGPU: true, to: 700, static: true, seeds: []uint64{0, 1, 2},
		published: map[string]float64{"fifo": 619.5, "gavel": 244.2, "gavel-ss": 226.2}},
}

var columns = []string{"fifo", "fifo-perf", "las", "gavel", "gavel-ss"}

// solvers are the LP solvers -solver names; clp registers itself when
// built with -tags clp.
var solvers = map[string]func() lp.Solver{"ipm": func() lp.Solver { return &lp.InteriorPoint{} }}

type options struct {
	only, policies, compat, solver, queues string
	// fixed runs a fixed trace of exactly the window's end jobs to
	// completion (arrivals stop at the last measured job) instead of
	// Gavel's protocol.
	fixed bool
}

func main() { os.Exit(command(os.Args[1:], os.Stdout, os.Stderr)) }

// command runs benchsuite with args and returns the exit status.
func command(args []string, stdout, stderr io.Writer) int {
	var o options
	fs := flag.NewFlagSet("benchsuite", flag.ContinueOnError)
	fs.StringVar(&o.only, "only", "", "comma-separated experiments to run (default: all): "+names())
	fs.StringVar(&o.policies, "policies", "", "comma-separated columns to run (default: all): "+strings.Join(columns, ", "))
	fs.StringVar(&o.compat, "compat", "both", "mechanism: none (ours), gavel (Gavel's code, quirks included) or both")
	fs.StringVar(&o.solver, "solver", "ipm", "LP solver: ipm (interior point: the centre of an optimal face), or clp (dual simplex: a vertex; build with -tags clp)")
	fs.StringVar(&o.queues, "queues", "per-type", "our mode's queues: per-type (Gavel's) or global")
	fs.BoolVar(&o.fixed, "fixed", false, "continuous experiments: run exactly jobs 0 to the window's end, arrivals stopping there, instead of Gavel's protocol (arrivals continue until the measured jobs finish)")
	return cli.Main(fs, args, stderr, func(ctx context.Context) error {
		return run(ctx, stdout, stderr, o)
	})
}

func names() string {
	var n []string
	for _, e := range experiments {
		n = append(n, e.name)
	}
	return strings.Join(n, ", ")
}

// setup is a column's policy and mechanism settings in a mode.
type setup struct {
	policy       allocation.Policy
	spaceSharing bool
	shuffle      bool
}

// column returns what a column stands for in an experiment, or false where
// it is not built (space sharing for makespan).
func column(col string, e experiment, seed uint64, c allocation.Compat, s lp.Solver) (setup, bool) {
	switch {
	case col == "fifo":
		// Gavel shuffles the types for FIFO ("Perf" is not in its name).
		return setup{policy: &allocation.FIFO{Seed: seed, Compat: c}, shuffle: true}, true
	case col == "fifo-perf":
		return setup{policy: &allocation.FIFO{Perf: true, Compat: c}}, true
	case col == "las":
		return setup{policy: &allocation.MaxMinFairness{Agnostic: true, Solver: s}, shuffle: true}, true
	case e.static && col == "gavel":
		return setup{policy: &allocation.MinMakespan{Solver: s}}, true
	case e.static && col == "gavel-ss":
		return setup{}, false
	case col == "gavel":
		return setup{policy: &allocation.MaxMinFairness{Solver: s}}, true
	case col == "gavel-ss":
		return setup{policy: &allocation.MaxMinFairness{SpaceSharing: true, Solver: s}, spaceSharing: true}, true
	}
	return setup{}, false
}

func run(ctx context.Context, w, stderr io.Writer, o options) error {
	selected := map[string]bool{}
	for _, n := range strings.Split(o.only, ",") {
		if n = strings.TrimSpace(n); n != "" {
			if !slices.ContainsFunc(experiments, func(e experiment) bool { return e.name == n }) {
				return cli.Usage("only", o.only, "a comma-separated list of %s (%q is not one)", names(), n)
			}
			selected[n] = true
		}
	}
	cols := map[string]bool{}
	for _, n := range strings.Split(o.policies, ",") {
		if n = strings.TrimSpace(n); n != "" {
			if !slices.Contains(columns, n) {
				return cli.Usage("policies", o.policies, "a comma-separated list of %s (%q is not one)", strings.Join(columns, ", "), n)
			}
			cols[n] = true
		}
	}
	var modes []allocation.Compat
	switch o.compat {
	case "both":
		modes = []allocation.Compat{allocation.CompatNone, allocation.CompatGavel}
	case "none", "gavel":
		c, _ := allocation.ParseCompat(o.compat)
		modes = []allocation.Compat{c}
	default:
		return cli.Usage("compat", o.compat, "none, gavel or both")
	}
	newSolver, ok := solvers[o.solver]
	if !ok {
		return cli.Usage("solver", o.solver, "ipm or clp (clp needs -tags clp)")
	}
	if o.queues != "per-type" && o.queues != "global" {
		return cli.Usage("queues", o.queues, "per-type or global")
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	var werr error
	out := func(cells ...string) {
		if werr == nil {
			_, werr = fmt.Fprintln(tw, strings.Join(cells, "\t")+"\t")
		}
	}
	header := []string{"experiment", "policy", "metric", "Gavel (h)"}
	for _, c := range modes {
		label := "ours"
		if c == allocation.CompatGavel {
			label = "compat"
		}
		header = append(header, label+" (h)", label+"/Gavel")
	}
	out(append(header, "run time")...)
	for _, e := range experiments {
		if len(selected) > 0 && !selected[e.name] {
			continue
		}
		metric := "mean JCT"
		if e.static {
			metric = "makespan"
		}
		for _, col := range columns {
			pub, ok := e.published[col]
			if !ok || (len(cols) > 0 && !cols[col]) {
				continue
			}
			row := []string{e.name, col, metric, fmt.Sprintf("%.2f", pub)}
			start := time.Now()
			for _, c := range modes {
				v, atLeast, built, err := measure(ctx, stderr, e, col, c, newSolver, o.queues == "global", o.fixed)
				if err != nil {
					return fmt.Errorf("%s %s (compat %s): %w", e.name, col, c, err)
				}
				if !built {
					row = append(row, "not built", "")
					continue
				}
				bound := ""
				if atLeast {
					bound = ">="
				}
				row = append(row, bound+cli.Fixed(v, 2), bound+cli.Fixed(v/pub, 2))
			}
			out(append(row, time.Since(start).Round(100*time.Millisecond).String())...)
		}
	}
	if werr != nil {
		return werr
	}
	return tw.Flush()
}

// measure runs one column of an experiment in one mode, over its seeds, and
// returns the mean metric in hours.
func measure(ctx context.Context, stderr io.Writer, e experiment, col string, c allocation.Compat, newSolver func() lp.Solver, global, fixed bool) (v float64, atLeast, built bool, err error) {
	types := []topology.GPUType{topology.V100, topology.P100, topology.K80}
	total := 0.0
	for _, seed := range e.seeds {
		st, ok := column(col, e, seed, c, newSolver())
		if !ok {
			return 0, false, false, nil
		}
		cfg := sim.Config{Types: types, Capacity: []int{36, 36, 36}, Policy: st.policy,
			Mechanism: allocation.Mechanism{Seed: seed, ShuffleTypes: st.shuffle, Compat: c, GlobalQueue: global && c == allocation.CompatNone}}
		if st.spaceSharing {
			cfg.Colocation = gavel.Simulation()
		}
		w := &sim.GavelWorkload{Rate: e.rate, MultiGPU: e.multiGPU, Seed: seed, Python: true}
		if e.static || fixed {
			jobs, err := w.Generate(e.to)
			if err != nil {
				return 0, false, false, err
			}
			res, err := sim.Run(ctx, cfg, jobs)
			if err != nil {
				return 0, false, false, err
			}
			if e.static {
				total += res.End / 3600
			} else {
				total += windowMean(res, e)
			}
			continue
		}
		v, lower, err := continuous(ctx, stderr, cfg, w, e, col, c)
		if err != nil {
			return 0, false, false, err
		}
		total += v
		atLeast = atLeast || lower
	}
	return total / float64(len(e.seeds)), atLeast, true, nil
}

// maxArrivals bounds the trace of Gavel's protocol: when the measured jobs
// outlast it, the backlog is not draining (or drains over thousands of
// hours), and the mean is reported as a lower bound.
const maxArrivals = 40000

// continuous runs Gavel's protocol: jobs keep arriving until jobs from..to
// have finished. The trace is long (jobs past the end cost nothing: the
// run stops when the measured jobs are done); if its last arrival still
// comes before that, the mean is only a lower bound (lower is true).
func continuous(ctx context.Context, stderr io.Writer, cfg sim.Config, w *sim.GavelWorkload, e experiment, col string, c allocation.Compat) (mean float64, lower bool, err error) {
	cfg.JobsToComplete = nil
	for id := e.from; id < e.to; id++ {
		cfg.JobsToComplete = append(cfg.JobsToComplete, id)
	}
	jobs, err := w.Generate(maxArrivals)
	if err != nil {
		return 0, false, err
	}
	res, err := sim.Run(ctx, cfg, jobs)
	if err != nil {
		return 0, false, err
	}
	if last := jobs[len(jobs)-1].Arrival; res.End >= last {
		lower = true
		if _, err := fmt.Fprintf(stderr, "benchsuite: %s %s (compat %s): the measured jobs finish at %.0f h, after the last of %d arrivals (%.0f h): the mean is a lower bound\n",
			e.name, col, c, res.End/3600, len(jobs), last/3600); err != nil {
			return 0, false, err
		}
	}
	return windowMean(res, e), lower, nil
}

// windowMean is the mean JCT in hours of the measured jobs that finished
// (jobs Gavel's simulator drops, in compat, are left out of its mean too).
func windowMean(res *sim.Result, e experiment) float64 {
	sum, count := 0.0, 0
	for _, r := range res.Records {
		if r.ID >= e.from && r.ID < e.to {
			sum += r.JCT()
			count++
		}
	}
	if count == 0 {
		return math.NaN()
	}
	return sum / float64(count) / 3600
}
