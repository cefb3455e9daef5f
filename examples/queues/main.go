// Command queues compares queue policies on public traces with the
// event-driven simulator (Tiresias, Gu et al., NSDI 2019, section 6): FIFO,
// SJF, SRTF, Tiresias's 2D-LAS and 2D-Gittins, each with and without EASY
// backfilling (and FIFO and SJF with conservative backfilling), all with
// gang admission (a job runs with all its GPUs or
// not at all). Traces without models get Gavel job types
// (sim.AssignModels); the cluster is V100s only, sized so that the
// trace's offered load (its jobs' GPU-time over the span of their arrivals
// and ends) is a given fraction of capacity, so that jobs queue in bursts.
//
//	go run ./examples/queues -trace itp
//	go run ./examples/queues -trace philly -load 0.6
//	go run ./examples/queues -trace tiresias
package main

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/gpusched/gpusched/gang"
	"github.com/gpusched/gpusched/internal/cli"
	"github.com/gpusched/gpusched/perfmodel"
	"github.com/gpusched/gpusched/perfmodel/gavel"
	"github.com/gpusched/gpusched/sim"
	"github.com/gpusched/gpusched/topology"
)

// traces are the shipped traces, relative to the module root.
var traces = map[string]struct {
	path, format string
}{
	"itp":      {filepath.Join("sim", "testdata", "itp", "cluster04.csv"), "itp"},
	"philly":   {filepath.Join("sim", "testdata", "philly", "philly-jobs.csv"), "philly"},
	"tiresias": {filepath.Join("sim", "testdata", "tiresias", "60_job.csv"), "tiresias"},
}

// readers are the formats of trace files the command reads.
var readers = map[string]func(io.Reader, string) ([]sim.Job, error){
	"itp": sim.ReadITP, "philly": sim.ReadPhilly, "tiresias": sim.ReadTiresias, "alibaba": sim.ReadAlibabaPods,
}

var formatNames = []string{"itp", "philly", "tiresias", "alibaba"}

// options are the command's settings.
type options struct {
	trace, format, samples, policies, cpuprofile string
	load                                         float64
}

func main() { os.Exit(command(os.Args[1:], os.Stdout, os.Stderr)) }

// command runs queues with args and returns the exit status.
func command(args []string, stdout, stderr io.Writer) int {
	var o options
	fs := flag.NewFlagSet("queues", flag.ContinueOnError)
	fs.StringVar(&o.trace, "trace", "itp", "itp, philly or tiresias (files shipped in sim/testdata), or the path of a trace file of at most 512 MiB")
	fs.StringVar(&o.format, "format", "itp", "the format of a trace file: "+strings.Join(formatNames, ", "))
	fs.Float64Var(&o.load, "load", 0.8, "offered load: the trace's mean GPU demand over the cluster's GPUs, 0.05 to 10")
	fs.StringVar(&o.samples, "gittins", filepath.Join("sim", "testdata", "tiresias", "yarn-gput1000.csv"), "GPU-time samples for 2D-Gittins (a file of at most 512 MiB)")
	fs.StringVar(&o.policies, "policies", "", "comma-separated policies to run (default all): "+strings.Join(policyNames(), ", "))
	fs.StringVar(&o.cpuprofile, "cpuprofile", "", "write a CPU profile to this file")
	return cli.Main(fs, args, stderr, func(ctx context.Context) error {
		if err := o.check(); err != nil {
			return err
		}
		if o.cpuprofile == "" {
			return run(ctx, stdout, o)
		}
		f, err := cli.Create(o.cpuprofile)
		if err != nil {
			return err
		}
		defer func() { _ = f.Close() }()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		err = run(ctx, stdout, o)
		pprof.StopCPUProfile()
		if err != nil {
			return err
		}
		return f.Commit()
	})
}

// check validates every flag before any work starts.
func (o *options) check() error {
	var c cli.Checks
	if _, shipped := traces[o.trace]; !shipped {
		if !strings.ContainsAny(o.trace, `./\`) {
			c.Fail("trace", o.trace, "itp, philly, tiresias or the path of a trace file")
		}
		c.InputFile("trace", o.trace, sim.MaxTraceBytes)
	}
	c.OneOf("format", o.format, formatNames...)
	c.Float("load", o.load, 0.05, 10)
	c.InputFile("gittins", o.samples, sim.MaxTraceBytes)
	c.List("policies", o.policies, true, policyNames()...)
	if o.cpuprofile != "" {
		c.OutputFile("cpuprofile", o.cpuprofile)
	}
	return c.Err()
}

// demand returns the most GPUs the jobs hold at once if each runs from its
// arrival for its duration, and the mean they hold over the span from the
// first arrival to the last end.
func demand(jobs []sim.Job) (peak int, mean float64) {
	type ev struct {
		t float64
		d int
	}
	var evs []ev
	for _, j := range jobs {
		evs = append(evs, ev{j.Arrival, j.Key.ScaleFactor}, ev{j.Arrival + j.Duration, -j.Key.ScaleFactor})
	}
	slices.SortFunc(evs, func(a, b ev) int { return cmp.Or(cmp.Compare(a.t, b.t), cmp.Compare(a.d, b.d)) })
	if len(evs) == 0 {
		return 0, 0
	}
	cur, area := 0, 0.0
	for i, e := range evs {
		if i > 0 {
			area += float64(cur) * (e.t - evs[i-1].t)
		}
		cur += e.d
		peak = max(peak, cur)
	}
	if span := evs[len(evs)-1].t - evs[0].t; span > 0 {
		mean = area / span
	}
	return peak, mean
}

// policies are the queue policies compared, by name; gittins orders the
// 2D-Gittins policies.
func policies(gittins gang.Order) []struct {
	name string
	s    gang.Scheduler
} {
	return []struct {
		name string
		s    gang.Scheduler
	}{
		{"fifo", gang.Priority{Order: gang.ByArrival{}, NoPreemption: true, Backfill: gang.NoBackfill}},
		{"fifo+easy", gang.Priority{Order: gang.ByArrival{}, NoPreemption: true, Backfill: gang.EASY}},
		{"fifo+conservative", gang.Priority{Order: gang.ByArrival{}, NoPreemption: true, Backfill: gang.Conservative, Depth: 500}},
		{"sjf", gang.Priority{Order: gang.ShortestJob{}, NoPreemption: true, Backfill: gang.NoBackfill}},
		{"sjf+easy", gang.Priority{Order: gang.ShortestJob{}, NoPreemption: true, Backfill: gang.EASY}},
		{"sjf+conservative", gang.Priority{Order: gang.ShortestJob{}, NoPreemption: true, Backfill: gang.Conservative, Depth: 500}},
		{"srtf", gang.Priority{Order: gang.ShortestRemaining{}, Backfill: gang.NoBackfill}},
		{"srtf+easy", gang.Priority{Order: gang.ShortestRemaining{}, Backfill: gang.EASY}},
		{"2d-las", gang.Priority{Order: gang.LAS2D{}, Backfill: gang.NoBackfill}},
		{"2d-las+easy", gang.Priority{Order: gang.LAS2D{}, Backfill: gang.EASY}},
		{"2d-gittins", gang.Priority{Order: gittins, Backfill: gang.NoBackfill}},
		{"2d-gittins+easy", gang.Priority{Order: gittins, Backfill: gang.EASY}},
	}
}

// policyNames lists the policies in the order they run.
func policyNames() []string {
	var out []string
	for _, p := range policies(nil) {
		out = append(out, p.name)
	}
	return out
}

// load reads the trace: a shipped one by name, or a file.
func load(o options) (string, []sim.Job, error) {
	path, format := o.trace, o.format
	if tr, ok := traces[o.trace]; ok {
		path, format = tr.path, tr.format
	}
	read, ok := readers[format]
	if !ok {
		return "", nil, cli.Usage("format", format, "one of %s", strings.Join(formatNames, ", "))
	}
	jobs, err := cli.Read(path, sim.MaxTraceBytes, read)
	if err != nil {
		return "", nil, err
	}
	if len(jobs) == 0 {
		return "", nil, fmt.Errorf("%s has no jobs", path)
	}
	return o.trace, jobs, nil
}

func run(ctx context.Context, w io.Writer, o options) error {
	if !(o.load >= 0.05 && o.load <= 10) {
		return cli.Usage("load", fmt.Sprint(o.load), "a number from 0.05 to 10")
	}
	name, jobs, err := load(o)
	if err != nil {
		return err
	}
	for i := range jobs {
		jobs[i].Duration = max(jobs[i].Duration, 1)
	}
	if err := (&sim.AssignModels{Seed: 1}).Apply(jobs); err != nil {
		return err
	}
	samples, err := cli.Read(o.samples, sim.MaxTraceBytes, sim.ReadSamples)
	if err != nil {
		return err
	}
	if len(samples) == 0 {
		return fmt.Errorf("%s has no GPU-time samples", o.samples)
	}
	peak, mean := demand(jobs)
	widest := 0
	for _, j := range jobs {
		widest = max(widest, j.Key.ScaleFactor)
	}
	gpus := max(int(math.Ceil(mean/o.load)), widest)
	if _, err := fmt.Fprintf(w, "%s: %d jobs, mean demand %.0f GPUs, peak %d; cluster of %d V100s (offered load %.2f)\n\n",
		name, len(jobs), mean, peak, gpus, mean/float64(gpus)); err != nil {
		return err
	}
	only := strings.Split(o.policies, ",")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	var werr error
	line := func(cells ...string) {
		if werr == nil {
			_, werr = fmt.Fprintln(tw, strings.Join(cells, "\t")+"\t")
		}
	}
	line("policy", "mean JCT (h)", "p95 JCT (h)", "mean wait (h)", "p95 wait (h)", "preemptions/job", "run time")
	base := 0.0
	gittins, err := gang.NewGittins2D(samples, 3250)
	if err != nil {
		return err
	}
	for _, p := range policies(gittins) {
		if o.policies != "" && !slices.Contains(only, p.name) {
			continue
		}
		start := time.Now()
		cfg := sim.EventConfig{Types: []topology.GPUType{topology.V100}, Capacity: []int{gpus},
			Throughput: perfmodel.Extrapolated{Table: gavel.Simulation()}, Scheduler: p.s, Timer: 300}
		res, err := sim.RunEvents(ctx, cfg, jobs)
		if err != nil {
			return fmt.Errorf("%s: %w", p.name, err)
		}
		s := res.Summarise(0, 0)
		var q []float64
		for _, r := range res.Records {
			q = append(q, r.Start-r.Arrival)
		}
		slices.Sort(q)
		if p.name == "fifo" {
			base = s.MeanJCT
		}
		p95wait := math.NaN()
		if len(q) > 0 {
			p95wait = q[len(q)*95/100]
		}
		line(p.name, cli.Fixed(s.MeanJCT/3600, 2)+" ("+cli.Ratio(base, s.MeanJCT, 2)+")", cli.Fixed(s.P95JCT/3600, 2), cli.Fixed(s.MeanQueueing/3600, 2),
			cli.Fixed(p95wait/3600, 2), cli.Fixed(s.Preemptions, 2), time.Since(start).Round(10*time.Millisecond).String())
	}
	if werr != nil {
		return werr
	}
	return tw.Flush()
}
