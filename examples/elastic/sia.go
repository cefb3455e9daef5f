package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"text/tabwriter"
	"time"

	"github.com/gpusched/gpusched/compare"
	"github.com/gpusched/gpusched/elastic"
	"github.com/gpusched/gpusched/perfmodel"
	"github.com/gpusched/gpusched/perfmodel/gavel"
	"github.com/gpusched/gpusched/perfmodel/hw"
	"github.com/gpusched/gpusched/sim"
	"github.com/gpusched/gpusched/topology"
)

// siaPools is Sia's heterogeneous setting (SOSP 2023, section 4.3: 6
// nodes of 4 T4s, 3 nodes of 8 RTX 2080 Ti, 2 DGX A100 nodes of 8; 64
// GPUs), with V100s in place of the RTX 2080 Ti, which has no spec in
// perfmodel/hw.
var siaPools = []elastic.Pool{{Type: topology.T4, Nodes: 6, GPUsPerNode: 4}, {Type: topology.V100, Nodes: 3, GPUsPerNode: 8}, {Type: topology.A100, Nodes: 2, GPUsPerNode: 8}}

// siaPublished is Sia's Table 3, Philly traces (160 jobs over 8 hours on
// the heterogeneous 64-GPU cluster, means of 10 traces): average and p99
// JCT, makespan (h) and GPU-hours per job.
var siaPublished = map[string][4]float64{
	"Sia":      {0.6, 9.5, 14.2, 4.0},
	"Pollux":   {1.0, 14.9, 24.5, 5.6},
	"Gavel+TJ": {1.9, 30.0, 33.8, 9.0},
}

// siaPolicy is a row of the heterogeneous comparison.
type siaPolicy struct {
	name, label     string
	adaptive, fixed bool
	interval        float64
	published       string // the row of siaPublished it stands beside
	policy          func() elastic.TypedPolicy
}

// siaPolicies are compare.TypedBaselines, the comparison's entrants
// defined once, with the row of Sia's Table 3 each stands beside.
var siaPolicies = func() []siaPolicy {
	published := map[string]string{"sia": "Sia", "pollux": "Pollux", "gavel": "Gavel+TJ"}
	var out []siaPolicy
	for _, e := range compare.TypedBaselines() {
		out = append(out, siaPolicy{e.Name, e.Description, e.Adaptive, e.Fixed, e.Interval, published[e.Name], e.Policy})
	}
	return out
}()

func siaNames() []string {
	var n []string
	for _, p := range siaPolicies {
		n = append(n, p.name)
	}
	return n
}

// siaMetrics are Table 3's metrics over the workloads: means of the
// per-workload average JCT, p99 JCT and makespan (h), GPU-hours per job,
// and the share of GPU time on each pool.
type siaMetrics struct {
	jct, p99, makespan, gpuHours float64
	poolShare                    []float64
	resizes                      float64
}

// runSia runs the first n of Pollux's workloads on Sia's heterogeneous
// cluster under the selected policies (all when names is empty) and
// returns each one's metrics, in the order of siaPolicies.
// power raises every predicted speedup to that power (1: as predicted; 0.5
// halves them in logarithm, which brings them near the speedups Sia
// measured for its A100s and RTX 2080 Tis).
func runSia(ctx context.Context, out io.Writer, dir string, n int, names []string, power float64) ([]siaMetrics, error) {
	w := &bytes.Buffer{}
	defer func() { _, _ = out.Write(w.Bytes()) }()
	fsys := os.DirFS(dir)
	apps, err := loadPolluxApps(w, fsys)
	if err != nil {
		return nil, err
	}
	model, err := hw.Model(perfmodel.Observations(gavel.Simulation(), perfmodel.FP32, "Gavel simulation table"))
	if err != nil {
		return nil, err
	}
	on := make([]map[string]*sim.PolluxApp, len(siaPools))
	for k, p := range siaPools {
		on[k] = map[string]*sim.PolluxApp{}
		for name, a := range apps {
			s, _, err := sim.PolluxSpeedup(model, name, p.Type)
			if err != nil {
				return nil, err
			}
			if on[k][name], err = a.OnType(p.Type, math.Pow(s, power)); err != nil {
				return nil, err
			}
		}
	}
	_, _ = fmt.Fprintf(w, "Cluster: %s. Compute speedup over Pollux's T4 profiles (network as measured on T4)", poolsText(siaPools))
	if power != 1 {
		_, _ = fmt.Fprintf(w, ", predictions raised to the power %g", power)
	}
	_, _ = fmt.Fprintln(w, ":")
	for _, name := range sim.PolluxApps {
		_, _ = fmt.Fprintf(w, "  %-12s", name)
		for k, p := range siaPools {
			_, basis, err := sim.PolluxSpeedup(model, name, p.Type)
			if err != nil {
				return nil, err
			}
			_, _ = fmt.Fprintf(w, " %s %5.2f", p.Type, on[k][name].Speedup)
			if p.Type != topology.T4 {
				_, _ = fmt.Fprintf(w, " (%s)", basis)
			}
		}
		_, _ = fmt.Fprintln(w)
	}
	_, _ = fmt.Fprintln(w)
	traces := make([][]sim.Job, n)
	for i := range traces {
		if traces[i], err = readPolluxWorkload(fsys, i+1); err != nil {
			return nil, err
		}
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	_, _ = fmt.Fprintln(tw, "policy\tavg JCT (h)\tp99 JCT (h)\tmakespan (h)\tGPU-h/job\tGPU time t4/v100/a100\tresizes/job\tSia/this: JCT, p99, makespan, GPU-h\tpublished (Table 3, Philly)\ttime\t")
	var all []siaMetrics
	var sia *siaMetrics
	for _, p := range siaPolicies {
		if len(names) > 0 && !slices.Contains(names, p.name) {
			continue
		}
		t0 := time.Now()
		m := siaMetrics{poolShare: make([]float64, len(siaPools))}
		for i, trace := range traces {
			jobs, err := sim.PolluxHeteroJobs(trace, on, siaPools, 64, p.adaptive, p.fixed)
			if err != nil {
				return nil, err
			}
			res, err := sim.RunHetero(ctx, sim.HeteroConfig{Pools: siaPools, Policy: p.policy(), Interval: p.interval,
				RestartOverhead: 30, ChargeStart: true, EveryInterval: true}, jobs)
			if err != nil {
				return nil, fmt.Errorf("%s, workload %d: %w", p.label, i+1, err)
			}
			m.add(res, float64(n))
		}
		all = append(all, m)
		if p.name == "sia" {
			sia = &all[len(all)-1]
		}
		ratios, pub := "", ""
		if sia != nil && p.name != "sia" {
			ratios = fmt.Sprintf("%.2f, %.2f, %.2f, %.2f", sia.jct/m.jct, sia.p99/m.p99, sia.makespan/m.makespan, sia.gpuHours/m.gpuHours)
		}
		if v, ok := siaPublished[p.published]; ok {
			s := siaPublished["Sia"]
			pub = fmt.Sprintf("%.1f / %.1f / %.1f h, %.1f", v[0], v[1], v[2], v[3])
			if p.published != "Sia" {
				pub += fmt.Sprintf(" (Sia/this %.2f, %.2f, %.2f, %.2f)", s[0]/v[0], s[1]/v[1], s[2]/v[2], s[3]/v[3])
			}
		}
		_, _ = fmt.Fprintf(tw, "%s\t%.2f\t%.2f\t%.2f\t%.2f\t%.0f/%.0f/%.0f%%\t%.2f\t%s\t%s\t%.1fs\t\n", p.label, m.jct, m.p99, m.makespan, m.gpuHours,
			100*m.poolShare[0], 100*m.poolShare[1], 100*m.poolShare[2], m.resizes, ratios, pub, time.Since(t0).Seconds())
	}
	if err := tw.Flush(); err != nil {
		return nil, err
	}
	_, _ = fmt.Fprintf(w, "\nPollux's %d workloads of 160 jobs over 8 hours (Sia's Philly traces are sampled the same way from Microsoft's trace), 30 s per\n", n)
	_, _ = fmt.Fprintln(w, "restart, 60 s rounds (Gavel 360 s); means over the workloads. Jobs never span GPU types; rigid jobs of more GPUs than the largest pool")
	_, _ = fmt.Fprintln(w, "run on the largest pool's 24. Types other than T4 are predicted (the speedups above); their networks are T4's.")
	return all, nil
}

// add accumulates one workload's result, weighted 1/n.
func (m *siaMetrics) add(res *sim.ElasticResult, n float64) {
	var jcts []float64
	first, last, gpu := math.Inf(1), math.Inf(-1), 0.0
	for _, r := range res.Records {
		jcts = append(jcts, r.Finish-r.Arrival)
		first, last = math.Min(first, r.Arrival), math.Max(last, r.Finish)
		gpu += r.GPUSeconds
	}
	slices.Sort(jcts)
	mean := 0.0
	for _, j := range jcts {
		mean += j / float64(len(jcts))
	}
	p99 := jcts[min(len(jcts)-1, int(math.Ceil(0.99*float64(len(jcts))))-1)]
	m.jct += mean / 3600 / n
	m.p99 += p99 / 3600 / n
	m.makespan += (last - first) / 3600 / n
	m.gpuHours += gpu / 3600 / float64(len(jcts)) / n
	busy := 0.0
	for _, b := range res.PoolBusy {
		busy += b
	}
	for k, b := range res.PoolBusy {
		m.poolShare[k] += b / busy / n
	}
	m.resizes += res.Summarise().ResizesPerJob / n
}

func poolsText(pools []elastic.Pool) string {
	var b bytes.Buffer
	for k, p := range pools {
		if k > 0 {
			b.WriteString(" + ")
		}
		fmt.Fprintf(&b, "%d x %d %s", p.Nodes, p.GPUsPerNode, p.Type)
	}
	return b.String()
}
