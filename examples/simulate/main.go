// Command simulate runs gpusched's trace-driven simulator and compares
// allocation policies. With no flags it reproduces the setting of Gavel's
// continuous single-GPU experiment (Narayanan et al., OSDI 2020, figure 8):
// jobs from Gavel's workload generator arriving at 4.8 jobs per hour on
// 36 V100 + 36 P100 + 36 K80, under FIFO, LAS (heterogeneity-agnostic
// max-min), Gavel (heterogeneity-aware max-min) and Gavel with space
// sharing; it prints a table and writes SVG plots (JCT CDF, utilisation
// over time). The default trace is shorter than Gavel's (2,500 jobs,
// measuring jobs 1,000 to 2,000) so that it runs in seconds; -jobs 5000
// -window 4000:5000 is Gavel's.
//
//	go run ./examples/simulate
//	go run ./examples/simulate -rate 5.6 -policies las,gavel -out plots
//	go run ./examples/simulate -trace my.trace -cluster v100:8,k80:8
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/gpusched/gpusched/allocation"
	"github.com/gpusched/gpusched/perfmodel/gavel"
	"github.com/gpusched/gpusched/sim"
	"github.com/gpusched/gpusched/topology"
)

type options struct {
	trace, format, cluster, policies, window, out string
	rate                                          float64
	jobs                                          int
	seed                                          uint64
	multiGPU, quiet                               bool
	parallel                                      int
}

func main() {
	var o options
	flag.StringVar(&o.trace, "trace", "", "a trace file (default: generate Gavel's workload)")
	flag.StringVar(&o.format, "format", "gavel", "the trace's format: gavel, philly, itp, tiresias or alibaba (jobs without a model get Gavel job types by sim.AssignModels)")
	flag.StringVar(&o.cluster, "cluster", "v100:36,p100:36,k80:36", "cluster: type:count,... (Gavel's throughput table knows v100, p100, k80)")
	flag.StringVar(&o.policies, "policies", "fifo,las,gavel,gavel-ss", "policies to compare: "+strings.Join(policyNames(), ", "))
	flag.Float64Var(&o.rate, "rate", 4.8, "arrival rate of the generated workload, jobs per hour")
	flag.IntVar(&o.jobs, "jobs", 2500, "number of generated jobs")
	flag.StringVar(&o.window, "window", "1000:2000", "jobs to measure, from:to in order of arrival (Gavel: 4000:5000)")
	flag.Uint64Var(&o.seed, "seed", 0, "seed of the workload generator and the policies")
	flag.BoolVar(&o.multiGPU, "multi-gpu", false, "generate multi-GPU jobs (Gavel's 70/10/15/5% scale factors)")
	flag.StringVar(&o.out, "out", "out", "folder for the SVG plots (empty: no plots)")
	flag.BoolVar(&o.quiet, "quiet", false, "no progress on standard error")
	flag.IntVar(&o.parallel, "parallel", 2, "policies simulated at once")
	flag.Parse()
	if err := run(context.Background(), os.Stdout, os.Stderr, o); err != nil {
		fmt.Fprintln(os.Stderr, "simulate:", err)
		os.Exit(1)
	}
}

// readers are the trace formats the command reads.
var readers = map[string]func(io.Reader, string) ([]sim.Job, error){
	"gavel": sim.ReadGavelTrace, "philly": sim.ReadPhilly, "itp": sim.ReadITP, "tiresias": sim.ReadTiresias, "alibaba": sim.ReadAlibabaPods,
}

// policies are the policies the command knows, by name.
var policies = map[string]struct {
	make         func(seed uint64) allocation.Policy
	spaceSharing bool
	agnostic     bool
}{
	"fifo":       {func(s uint64) allocation.Policy { return &allocation.FIFO{Seed: s} }, false, true},
	"fifo-perf":  {func(uint64) allocation.Policy { return &allocation.FIFO{Perf: true} }, false, false},
	"las":        {func(uint64) allocation.Policy { return &allocation.MaxMinFairness{Agnostic: true} }, false, true},
	"gavel":      {func(uint64) allocation.Policy { return &allocation.MaxMinFairness{} }, false, false},
	"gavel-ss":   {func(uint64) allocation.Policy { return &allocation.MaxMinFairness{SpaceSharing: true} }, true, false},
	"gandiva":    {func(s uint64) allocation.Policy { return &allocation.Gandiva{Seed: s} }, true, true},
	"ftf":        {func(uint64) allocation.Policy { return &allocation.FinishTimeFairness{} }, false, false},
	"makespan":   {func(uint64) allocation.Policy { return &allocation.MinMakespan{} }, false, false},
	"throughput": {func(uint64) allocation.Policy { return &allocation.MaxThroughput{} }, false, false},
}

// eventPolicies run in the event-driven model: jobs start as GPUs free up.
var eventPolicies = map[string]sim.EventScheduler{
	"fifo-events": sim.EventFIFO{},
}

func policyNames() []string {
	return []string{"fifo", "fifo-perf", "fifo-events", "las", "gavel", "gavel-ss", "gandiva", "ftf", "makespan", "throughput"}
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
	from, to, err := parseWindow(o.window)
	if err != nil {
		return err
	}
	var jobs []sim.Job
	source := fmt.Sprintf("Gavel's workload generator: %d jobs at %.1f jobs/h, seed %d", o.jobs, o.rate, o.seed)
	if o.multiGPU {
		source += ", multi-GPU"
	}
	if o.trace != "" {
		data, err := os.ReadFile(o.trace)
		if err != nil {
			return err
		}
		read, ok := readers[o.format]
		if !ok {
			return fmt.Errorf("unknown trace format %q (want gavel, philly, itp, tiresias or alibaba)", o.format)
		}
		if jobs, err = read(bytes.NewReader(data), o.trace); err != nil {
			return err
		}
		if err := (&sim.AssignModels{Seed: o.seed}).Apply(jobs); err != nil {
			return err
		}
		source = fmt.Sprintf("%s: %d jobs", o.trace, len(jobs))
	} else if jobs, err = (&sim.GavelWorkload{Rate: o.rate, MultiGPU: o.multiGPU, Seed: o.seed}).Generate(o.jobs); err != nil {
		return err
	}
	var names []string
	for _, n := range strings.Split(o.policies, ",") {
		n = strings.TrimSpace(n)
		_, event := eventPolicies[n]
		if _, ok := policies[n]; !ok && !event {
			return fmt.Errorf("unknown policy %q (known: %s)", n, strings.Join(policyNames(), ", "))
		}
		names = append(names, n)
	}
	if _, err := fmt.Fprintf(stdout, "Cluster %s (%d GPUs); %s; measuring jobs %d to %d.\n\n", o.cluster, cluster.NumGPUs(), source, from, to); err != nil {
		return err
	}

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
				res, err := sim.RunEvents(ctx, sim.EventConfig{Types: types, Capacity: capacity, Scheduler: ev,
					Progress: func(done, total int) { progress.update(i, done, total) }}, jobs)
				results[i] = outcome{name: name, result: res, took: time.Since(start), err: err}
				if err == nil {
					results[i].summary = res.Summarise(from, to)
				}
				return
			}
			spec := policies[name]
			cfg := sim.Config{
				Types: types, Capacity: capacity, Policy: spec.make(o.seed), Seed: o.seed,
				ShuffleTypes: spec.agnostic,
				Progress:     func(done, total int) { progress.update(i, done, total) },
			}
			if spec.spaceSharing {
				cfg.Colocation = gavel.Simulation()
			}
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
	line("policy", "jobs", "mean JCT (h)", "median (h)", "p95 (h)", "p99 (h)", "queueing (h)", "makespan (h)", "utilisation", "mean rho", "rho>1", "allocations", "run time")
	for _, r := range results {
		s := r.summary
		h := func(v float64) string { return strconv.FormatFloat(v/3600, 'f', 2, 64) }
		line(r.name, strconv.Itoa(s.Jobs), h(s.MeanJCT), h(s.MedianJCT), h(s.P95JCT), h(s.P99JCT), h(s.MeanQueueing), h(s.Makespan),
			fmt.Sprintf("%.0f%%", 100*s.Utilisation), fmt.Sprintf("%.2f", s.MeanRho), fmt.Sprintf("%.0f%%", 100*s.RhoAbove1),
			strconv.Itoa(r.result.Allocations), r.took.Round(10*time.Millisecond).String())
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
	files, err := plots(o.out, results, from, to)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(stdout, "\nPlots: %s\n", strings.Join(files, ", "))
	return err
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

// progress prints each policy's share of finished jobs, at most every
// half second.
type progress struct {
	mu    sync.Mutex
	w     io.Writer
	quiet bool
	names []string
	pct   []int
	last  time.Time
}

func newProgress(w io.Writer, quiet bool, names []string) *progress {
	return &progress{w: w, quiet: quiet, names: names, pct: make([]int, len(names))}
}

func (p *progress) update(i, done, total int) {
	if p.quiet || total == 0 {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.pct[i] = 100 * done / total
	if time.Since(p.last) < 500*time.Millisecond {
		return
	}
	p.last = time.Now()
	parts := make([]string, len(p.names))
	for j, n := range p.names {
		parts[j] = fmt.Sprintf("%s %3d%%", n, p.pct[j])
	}
	_, _ = fmt.Fprintf(p.w, "\r%s", strings.Join(parts, "  ")) // progress is best effort
}

func (p *progress) done() {
	if !p.quiet && !p.last.IsZero() {
		_, _ = fmt.Fprintln(p.w)
	}
}

// plotPath joins the output folder and a file name.
func plotPath(dir, name string) string { return filepath.Join(dir, name) }
