package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"text/tabwriter"
	"time"

	"github.com/gpusched/gpusched/elastic"
	"github.com/gpusched/gpusched/gang"
	"github.com/gpusched/gpusched/sim"
	"github.com/gpusched/gpusched/topology"
)

// artifactJCT are the mean JCTs (s) per workload that the Pollux artifact
// stores for its simulator at 1.0x load (petuum/adaptdl @ c793c70,
// simulator/results-jobload/<policy>-1.0/summary.json, "avgs"; Apache-2.0),
// workloads 1 to 8; their means are the paper's 2,751, 4,038 and 5,682 s.
var artifactJCT = map[string][8]float64{
	"Pollux":   {2088.77, 3322.94, 2188.49, 2720.98, 2673.70, 2446.13, 3616.14, 2951.91},
	"Optimus":  {4087.06, 6913.88, 3944.01, 5967.75, 5656.25, 5301.88, 7290.86, 6293.79},
	"Tiresias": {2473.65, 5144.96, 3876.26, 3280.26, 3501.01, 3469.69, 5479.91, 5079.71},
}

// polluxPolicy is a row of the Pollux comparison: its -policies name, its
// label, how its jobs are built (adaptive batch sizes; fixed GPUs and
// batch), and the artifact's policy it stands beside.
type polluxPolicy struct {
	name, label     string
	adaptive, fixed bool
	artifact        string
	// policy builds the policy; gpuTimes are the GPU-seconds of every job
	// at its fixed GPUs (2D-Gittins's distribution). typed, when set,
	// is a policy for pools of GPU types, run on one pool of the 16 x 4.
	policy func(gpuTimes []float64) (elastic.Policy, error)
	typed  func() elastic.TypedPolicy
}

func fixedPolicy(p elastic.Policy) func([]float64) (elastic.Policy, error) {
	return func([]float64) (elastic.Policy, error) { return p, nil }
}

// polluxPolicies are the rows, in the order they run (fifo first: its
// jobs' GPU times are 2D-Gittins's distribution).
var polluxPolicies = []polluxPolicy{
	{"fifo", "FIFO, fixed GPUs and batch", false, true, "", fixedPolicy(elastic.FIFO{}), nil},
	{"pollux", "Pollux-style (goodput, p = -1)", true, false, "Pollux", fixedPolicy(elastic.Pollux{}), nil},
	{"optimus", "Optimus-style", false, false, "Optimus", fixedPolicy(elastic.Optimus{Admission: elastic.ArrivalOrder}), nil},
	{"afs", "AFS-style", false, false, "", fixedPolicy(elastic.AFS{Admission: elastic.ArrivalOrder}), nil},
	{"tiresias", "Tiresias 2D-LAS (artifact: 2 queues, 16 GPU-h)", false, true, "Tiresias",
		fixedPolicy(elastic.Tiresias{Order: gang.LAS2D{Thresholds: []float64{16 * 3600}}}), nil},
	{"tiresias-las", "Tiresias 2D-LAS (Tiresias's 3,250/7,200/18,000 GPU-s)", false, true, "",
		fixedPolicy(elastic.Tiresias{Order: gang.LAS2D{}}), nil},
	{"tiresias-gittins", "Tiresias 2D-Gittins (quantum 3,250 GPU-s)", false, true, "", func(times []float64) (elastic.Policy, error) {
		g, err := gang.NewGittins2D(times, 3250)
		if err != nil {
			return nil, err
		}
		return elastic.Tiresias{Order: g}, nil
	}, nil},
	{"sia", "Sia (one GPU type: configurations 1, 2, 4 GPUs, whole nodes)", true, false, "", nil, func() elastic.TypedPolicy { return elastic.Sia{} }},
}

// polluxNames lists the rows' names for -policies.
func polluxNames() []string {
	var n []string
	for _, p := range polluxPolicies {
		n = append(n, p.name)
	}
	return n
}

// loadPolluxApps fits the six applications' models and prints their fit.
func loadPolluxApps(w io.Writer, fsys fs.FS) (map[string]*sim.PolluxApp, error) {
	apps := map[string]*sim.PolluxApp{}
	start := time.Now()
	_, _ = fmt.Fprintln(w, "application  fitted step-time model (RMSLE over measured steps)")
	for _, name := range sim.PolluxApps {
		a, err := sim.LoadPolluxApp(fsys, "app-profiles", name)
		if err != nil {
			return nil, err
		}
		apps[name] = a
		_, _ = fmt.Fprintf(w, "%-12s %.3f over %d steps; %d epochs, batch %g to %g\n", name, a.FitError(), len(a.Samples), a.MaxEpochs, a.InitBatch, a.MaxBatch)
	}
	_, _ = fmt.Fprintf(w, "(fitted in %.1f s)\n\n", time.Since(start).Seconds())
	return apps, nil
}

// readPolluxWorkload reads workload i (1 to 8).
func readPolluxWorkload(fsys fs.FS, i int) ([]sim.Job, error) {
	name := fmt.Sprintf("workload-%d.csv", i)
	f, err := fsys.Open(path.Join("workloads", name))
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	return sim.ReadPollux(f, name)
}

// runPollux runs the first n workloads under the selected policies (all
// when names is empty) and returns the mean JCT over the workloads, per
// policy run, in the order of polluxPolicies.
func runPollux(ctx context.Context, out io.Writer, dir string, n int, names []string) ([]float64, error) {
	w := &bytes.Buffer{}
	defer func() { _, _ = out.Write(w.Bytes()) }()
	fsys := os.DirFS(dir)
	apps, err := loadPolluxApps(w, fsys)
	if err != nil {
		return nil, err
	}
	traces := make([][]sim.Job, n)
	for i := range traces {
		if traces[i], err = readPolluxWorkload(fsys, i+1); err != nil {
			return nil, err
		}
	}
	selected := func(name string) bool {
		if len(names) == 0 {
			return true
		}
		for _, x := range names {
			if x == name || x == "tiresias-gittins" && name == "fifo" {
				return true // 2D-Gittins needs FIFO's GPU times
			}
		}
		return false
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	_, _ = fmt.Fprint(tw, "policy\t")
	for i := 1; i <= n; i++ {
		_, _ = fmt.Fprintf(tw, "wl %d\t", i)
	}
	_, _ = fmt.Fprintln(tw, "mean JCT (s)\tresizes/job\tpreempted/job\tartifact\tours/artifact\ttime\t")
	var means []float64
	var gpuTimes []float64
	for _, p := range polluxPolicies {
		if !selected(p.name) {
			continue
		}
		var policy elastic.Policy
		if p.policy != nil {
			if policy, err = p.policy(gpuTimes); err != nil {
				return nil, fmt.Errorf("%s: %w", p.label, err)
			}
		}
		_, _ = fmt.Fprintf(tw, "%s\t", p.label)
		t0 := time.Now()
		mean, resizes, preempted := 0.0, 0.0, 0.0
		for i, trace := range traces {
			jobs, err := sim.PolluxJobs(trace, apps, 4, 64, p.adaptive, p.fixed)
			if err != nil {
				return nil, err
			}
			var res *sim.ElasticResult
			if p.typed != nil {
				res, err = sim.RunHetero(ctx, sim.HeteroConfig{Pools: []elastic.Pool{{Type: topology.T4, Nodes: 16, GPUsPerNode: 4}}, Policy: p.typed(),
					RestartOverhead: 30, ChargeStart: true, EveryInterval: true}, jobs)
			} else {
				res, err = sim.RunElastic(ctx, sim.ElasticConfig{TrainingServers: 16, GPUsPerServer: 4, Policy: policy,
					RestartOverhead: 30, ChargeStart: true, EveryInterval: true, Pack: true}, jobs)
			}
			if err != nil {
				return nil, fmt.Errorf("%s, workload %d: %w", p.label, i+1, err)
			}
			s := res.Summarise()
			mean += s.MeanJCT / float64(n)
			resizes += s.ResizesPerJob / float64(n)
			for _, r := range res.Records {
				preempted += float64(r.Preemptions) / float64(len(res.Records)*n)
				if p.name == "fifo" {
					gpuTimes = append(gpuTimes, r.GPUSeconds)
				}
			}
			_, _ = fmt.Fprintf(tw, "%.0f\t", s.MeanJCT)
		}
		art, ratio := "", ""
		if a, ok := artifactJCT[p.artifact]; ok {
			m := 0.0
			for _, v := range a[:n] {
				m += v / float64(n)
			}
			art, ratio = fmt.Sprintf("%s %.0f s", p.artifact, m), fmt.Sprintf("%.2f", mean/m)
		}
		means = append(means, mean)
		_, _ = fmt.Fprintf(tw, "%.0f\t%.2f\t%.2f\t%s\t%s\t%.1fs\t\n", mean, resizes, preempted, art, ratio, time.Since(t0).Seconds())
	}
	for _, name := range []string{"Pollux", "Optimus", "Tiresias"} {
		_, _ = fmt.Fprintf(tw, "artifact: %s\t", name)
		a := artifactJCT[name]
		m := 0.0
		for _, v := range a[:n] {
			_, _ = fmt.Fprintf(tw, "%.0f\t", v)
			m += v / float64(n)
		}
		_, _ = fmt.Fprintf(tw, "%.0f\t\t\t\t\t\t\n", m)
	}
	if err := tw.Flush(); err != nil {
		return nil, err
	}
	_, _ = fmt.Fprintln(w, "\nPollux (OSDI 2021, simulator, 1.0x load, 16 x 4 GPUs): Pollux 2751 s, Tiresias 4038 s, Optimus 5682 s (mean JCT over the 8 workloads;")
	_, _ = fmt.Fprintln(w, "artifact rows: the per-workload means its simulator stored, petuum/adaptdl c793c70 simulator/results-jobload/*-1.0).")
	_, _ = fmt.Fprintln(w, "Policies see the fitted models; jobs run at the measured step times of their placements (the model where the profile has none).")
	_, _ = fmt.Fprintln(w, "Our Pollux-style policy knows each application's model and true gradient statistics from the start (Pollux learns them online).")
	_, _ = fmt.Fprintln(w, "Tiresias rows run the workload's GPUs and batch sizes, preempting by attained service every 60 s; 2D-Gittins's GPU-time")
	_, _ = fmt.Fprintln(w, "distribution is that of the FIFO row's jobs (all workloads run).")
	return means, nil
}
