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
	"slices"
	"strconv"
	"strings"

	"github.com/gpusched/gpusched/allocation"
	"github.com/gpusched/gpusched/compare"
	"github.com/gpusched/gpusched/internal/cli"
	"github.com/gpusched/gpusched/perfmodel/gavel"
	"github.com/gpusched/gpusched/sim"
	"github.com/gpusched/gpusched/topology"
)

type options struct {
	trace, format, cluster, policies, window, out, compat string
	rates, table                                          string
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
	fs.StringVar(&o.table, "table", "text", "the table's format: text (aligned, with a header line), markdown, csv or json (every metric but the run time; package compare)")
	fs.StringVar(&o.rates, "rates", "", "hide the truth (Gavel's table) from the round policies, which see, per run: "+strings.Join(compare.RateSettings, ", ")+" (a list: each policy runs once per setting; progress noisy, a warm-up at every start; sim.Hidden; issue #41); empty: the table, as it is")
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
	if cl, err := topology.ParseCompact(o.cluster, 1); err != nil {
		c.Fail("cluster", o.cluster, "type:count,... with counts above 0 (%v)", err)
	} else {
		known := gavel.Simulation().GPUTypes()
		for _, t := range cl.GPUTypes() {
			if !slices.Contains(known, t) {
				c.Fail("cluster", o.cluster, "types Gavel's throughput table knows (%v; %s is not one)", known, t)
				break
			}
		}
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
	c.OneOf("table", o.table, "text", "markdown", "csv", "json")
	if o.rates != "" {
		c.List("rates", o.rates, false, compare.RateSettings...)
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

// policyNames are the baselines -policies accepts (compare.Baselines).
func policyNames() []string { return compare.BaselineNames() }

func run(ctx context.Context, stdout, stderr io.Writer, o options) error {
	cluster, err := topology.ParseCompact(o.cluster, 1)
	if err != nil {
		return err
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
	entrants, err := o.entrants()
	if err != nil {
		return err
	}
	mechanism := "ours (a queue per type, fastest type first, work-conserving)"
	if compat == allocation.CompatGavel {
		mechanism = "Gavel's code (-compat gavel)"
		if o.trace == "" {
			source += ", CPython's draws"
		}
	}
	if o.table == "" || o.table == string(compare.FormatText) {
		if _, err := fmt.Fprintf(stdout, "Cluster %s (%d GPUs); %s; measuring jobs %d to %d; mechanism: %s.\n\n", o.cluster, cluster.NumGPUs(), source, from, to, mechanism); err != nil {
			return err
		}
	}
	names := make([]string, len(entrants))
	for i, e := range entrants {
		names[i] = e.Name
	}
	opt := compare.Options{Parallel: max(1, o.parallel)}
	var progress *compare.Progress
	if !o.quiet {
		progress = compare.NewProgress(stderr, names)
		opt.Progress = progress.Update
	}
	sc := compare.Scenario{Cluster: o.cluster, Jobs: jobs, From: from, To: to, Seed: o.seed, Compat: compat, Vertex: o.vertex}
	report, err := compare.Run(ctx, sc, entrants, opt)
	if progress != nil {
		progress.Done()
	}
	if err != nil {
		return err
	}
	cols, err := o.columns(report)
	if err != nil {
		return err
	}
	format := compare.Format(o.table)
	if format == "" {
		format = compare.FormatText
	}
	if err := report.Write(stdout, format, cols); err != nil {
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
	files, err := report.WritePlots(o.out)
	if err != nil {
		return err
	}
	if format != compare.FormatText {
		return nil // the table alone on standard output
	}
	_, err = fmt.Fprintf(stdout, "\nPlots: %s\n", strings.Join(files, ", "))
	return err
}

// entrants returns the baselines -policies names, each once per -rates
// setting.
func (o *options) entrants() ([]compare.Entrant, error) {
	settings := []string{""}
	if o.rates != "" {
		settings = strings.Split(o.rates, ",")
	}
	var out []compare.Entrant
	for _, n := range strings.Split(o.policies, ",") {
		e, err := compare.Baseline(strings.TrimSpace(n))
		if err != nil {
			return nil, fmt.Errorf("unknown policy %q (known: %s)", strings.TrimSpace(n), strings.Join(policyNames(), ", "))
		}
		for _, r := range settings {
			r = strings.TrimSpace(r)
			if r == "" {
				out = append(out, e)
				continue
			}
			if e.Policy == nil || e.SpaceSharing {
				return nil, cli.Usage("rates", o.rates, "round policies without space sharing only (%s is not)", e.Name)
			}
			h, err := compare.WithRates(e, r)
			if err != nil {
				return nil, err
			}
			out = append(out, h)
		}
	}
	return out, nil
}

// columns are the table's columns: simulate's own in text (with the
// GPU-hours explored under -rates), every reproducible one in the other
// formats.
func (o *options) columns(r *compare.Report) ([]compare.Column, error) {
	if o.table != "" && o.table != string(compare.FormatText) {
		return r.Select()
	}
	keys := compare.TextKeys
	if o.rates != "" {
		keys = append(slices.Clone(keys), "explored_gpu_h")
	}
	return r.Select(keys...)
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
