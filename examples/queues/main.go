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
	"bytes"
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
	"github.com/gpusched/gpusched/perfmodel"
	"github.com/gpusched/gpusched/perfmodel/gavel"
	"github.com/gpusched/gpusched/sim"
	"github.com/gpusched/gpusched/topology"
)

// traces are the shipped traces, relative to the module root.
var traces = map[string]struct {
	path string
	read func(io.Reader, string) ([]sim.Job, error)
}{
	"itp":      {filepath.Join("sim", "testdata", "itp", "cluster04.csv"), sim.ReadITP},
	"philly":   {filepath.Join("sim", "testdata", "philly", "philly-jobs.csv"), sim.ReadPhilly},
	"tiresias": {filepath.Join("sim", "testdata", "tiresias", "60_job.csv"), sim.ReadTiresias},
}

func main() {
	trace := flag.String("trace", "itp", "itp, philly or tiresias (files shipped in sim/testdata)")
	load := flag.Float64("load", 0.8, "offered load: the trace's mean GPU demand over the cluster's GPUs")
	samples := flag.String("gittins", filepath.Join("sim", "testdata", "tiresias", "yarn-gput1000.csv"), "GPU-time samples for 2D-Gittins")
	only := flag.String("policies", "", "comma-separated policies to run (default all)")
	cpuprofile := flag.String("cpuprofile", "", "write a CPU profile to this file")
	flag.Parse()
	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		if err == nil {
			err = pprof.StartCPUProfile(f)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "queues:", err)
			os.Exit(1)
		}
		defer pprof.StopCPUProfile()
	}
	if err := run(context.Background(), os.Stdout, *trace, *load, *samples, *only); err != nil {
		pprof.StopCPUProfile()
		fmt.Fprintln(os.Stderr, "queues:", err)
		os.Exit(1)
	}
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

func run(ctx context.Context, w io.Writer, name string, load float64, samplesPath, only string) error {
	if !(load > 0) {
		return fmt.Errorf("load %v: want a positive fraction", load)
	}
	tr, ok := traces[name]
	if !ok {
		return fmt.Errorf("unknown trace %q (want itp, philly or tiresias)", name)
	}
	data, err := os.ReadFile(tr.path)
	if err != nil {
		return err
	}
	jobs, err := tr.read(bytes.NewReader(data), tr.path)
	if err != nil {
		return err
	}
	for i := range jobs {
		jobs[i].Duration = max(jobs[i].Duration, 1)
	}
	if err := (&sim.AssignModels{Seed: 1}).Apply(jobs); err != nil {
		return err
	}
	gput, err := os.ReadFile(samplesPath)
	if err != nil {
		return err
	}
	samples, err := sim.ReadSamples(bytes.NewReader(gput), samplesPath)
	if err != nil {
		return err
	}
	peak, mean := demand(jobs)
	widest := 0
	for _, j := range jobs {
		widest = max(widest, j.Key.ScaleFactor)
	}
	gpus := max(int(math.Ceil(mean/load)), widest)
	if _, err := fmt.Fprintf(w, "%s: %d jobs, mean demand %.0f GPUs, peak %d; cluster of %d V100s (offered load %.2f)\n\n",
		name, len(jobs), mean, peak, gpus, mean/float64(gpus)); err != nil {
		return err
	}
	gittins, err := gang.NewGittins2D(samples, 3250)
	if err != nil {
		return err
	}
	policies := []struct {
		name string
		s    gang.Scheduler
	}{
		{"fifo", gang.Priority{Order: gang.ByArrival{}, NoPreemption: true}},
		{"fifo+easy", gang.Priority{Order: gang.ByArrival{}, NoPreemption: true, Backfill: gang.EASY}},
		{"fifo+conservative", gang.Priority{Order: gang.ByArrival{}, NoPreemption: true, Backfill: gang.Conservative, Depth: 500}},
		{"sjf", gang.Priority{Order: gang.ShortestJob{}, NoPreemption: true}},
		{"sjf+easy", gang.Priority{Order: gang.ShortestJob{}, NoPreemption: true, Backfill: gang.EASY}},
		{"sjf+conservative", gang.Priority{Order: gang.ShortestJob{}, NoPreemption: true, Backfill: gang.Conservative, Depth: 500}},
		{"srtf", gang.Priority{Order: gang.ShortestRemaining{}}},
		{"srtf+easy", gang.Priority{Order: gang.ShortestRemaining{}, Backfill: gang.EASY}},
		{"2d-las", gang.Priority{Order: gang.LAS2D{}}},
		{"2d-las+easy", gang.Priority{Order: gang.LAS2D{}, Backfill: gang.EASY}},
		{"2d-gittins", gang.Priority{Order: gittins}},
		{"2d-gittins+easy", gang.Priority{Order: gittins, Backfill: gang.EASY}},
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	var werr error
	line := func(cells ...string) {
		if werr == nil {
			_, werr = fmt.Fprintln(tw, strings.Join(cells, "\t")+"\t")
		}
	}
	line("policy", "mean JCT (h)", "p95 JCT (h)", "mean wait (h)", "p95 wait (h)", "preemptions/job", "run time")
	base := 0.0
	for _, p := range policies {
		if only != "" && !slices.Contains(strings.Split(only, ","), p.name) {
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
		line(p.name, fmt.Sprintf("%.2f (%.2fx)", s.MeanJCT/3600, base/s.MeanJCT), fmt.Sprintf("%.2f", s.P95JCT/3600), fmt.Sprintf("%.2f", s.MeanQueueing/3600),
			fmt.Sprintf("%.2f", q[len(q)*95/100]/3600), fmt.Sprintf("%.2f", s.Preemptions), time.Since(start).Round(10*time.Millisecond).String())
	}
	if werr != nil {
		return werr
	}
	return tw.Flush()
}
