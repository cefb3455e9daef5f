package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path"
	"text/tabwriter"
	"time"

	"github.com/gpusched/gpusched/elastic"
	"github.com/gpusched/gpusched/sim"
)

// polluxPolicies are the rows of the Pollux comparison, with Pollux's
// published mean JCT where there is one (OSDI 2021, simulator, 1.0x load).
var polluxPolicies = []struct {
	name            string
	policy          elastic.Policy
	adaptive, fixed bool
	published       string
}{
	{"Pollux-style (goodput, p = -1)", elastic.Pollux{}, true, false, "Pollux 2751 s"},
	{"Optimus-style", elastic.Optimus{Admission: elastic.ArrivalOrder}, false, false, "Optimus 5682 s"},
	{"AFS-style", elastic.AFS{Admission: elastic.ArrivalOrder}, false, false, ""},
	{"FIFO, fixed GPUs and batch", elastic.FIFO{}, false, true, "(Tiresias 4038 s)"},
}

// runPollux runs the first n workloads under every policy and returns the
// mean JCT over the workloads, per policy.
func runPollux(ctx context.Context, out io.Writer, dir string, n int) ([]float64, error) {
	w := &bytes.Buffer{}
	defer func() { _, _ = out.Write(w.Bytes()) }()
	fsys := os.DirFS(dir)
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
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	_, _ = fmt.Fprint(tw, "policy\t")
	for i := 1; i <= n; i++ {
		_, _ = fmt.Fprintf(tw, "wl %d\t", i)
	}
	_, _ = fmt.Fprintln(tw, "mean JCT (s)\tresizes/job\tpublished\ttime\t")
	means := make([]float64, len(polluxPolicies))
	for k, p := range polluxPolicies {
		_, _ = fmt.Fprintf(tw, "%s\t", p.name)
		t0 := time.Now()
		resizes := 0.0
		for i := 1; i <= n; i++ {
			name := fmt.Sprintf("workload-%d.csv", i)
			f, err := fsys.Open(path.Join("workloads", name))
			if err != nil {
				return nil, err
			}
			trace, err := sim.ReadPollux(f, name)
			_ = f.Close()
			if err != nil {
				return nil, err
			}
			jobs, err := sim.PolluxJobs(trace, apps, 4, 64, p.adaptive, p.fixed)
			if err != nil {
				return nil, err
			}
			res, err := sim.RunElastic(ctx, sim.ElasticConfig{TrainingServers: 16, GPUsPerServer: 4, Policy: p.policy,
				RestartOverhead: 30, ChargeStart: true, EveryInterval: true, Pack: true}, jobs)
			if err != nil {
				return nil, fmt.Errorf("%s, %s: %w", p.name, name, err)
			}
			s := res.Summarise()
			means[k] += s.MeanJCT / float64(n)
			resizes += s.ResizesPerJob / float64(n)
			_, _ = fmt.Fprintf(tw, "%.0f\t", s.MeanJCT)
		}
		_, _ = fmt.Fprintf(tw, "%.0f\t%.2f\t%s\t%.1fs\t\n", means[k], resizes, p.published, time.Since(t0).Seconds())
	}
	if err := tw.Flush(); err != nil {
		return nil, err
	}
	_, _ = fmt.Fprintln(w, "\nPollux (OSDI 2021, simulator, 1.0x load, 16 x 4 GPUs): Pollux 2751 s, Tiresias 4038 s, Optimus 5682 s (mean JCT over the 8 workloads).")
	_, _ = fmt.Fprintln(w, "Policies see the fitted models; jobs run at the measured step times of their placements (the model where the profile has none).")
	_, _ = fmt.Fprintln(w, "Our Pollux-style policy knows each application's model and true gradient statistics from the start (Pollux learns them online).")
	return means, nil
}
