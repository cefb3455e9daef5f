package learn_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"testing"

	"github.com/gpusched/gpusched/perfmodel/learn"
	"github.com/gpusched/gpusched/topology"
)

// benchTypes are 8 GPU types.
var benchTypes = []topology.GPUType{"a100", "a30", "b200", "h100", "h200", "l40s", "t4", "v100"}

// populated returns a learner with n jobs, each measured on every type
// of benchTypes with probability keep (at least one), at rates of a
// planted rank-2 model: what a busy cluster's learner holds.
func populated(b testing.TB, n int, keep float64) *learn.Learner {
	return populatedWith(b, n, keep, learn.Config{})
}

// populatedWith is populated with the settings of cfg (its Types and
// MaxJobs replaced).
func populatedWith(b testing.TB, n int, keep float64, cfg learn.Config) *learn.Learner {
	cfg.Types, cfg.MaxJobs = benchTypes, n+1
	l, err := learn.New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	m := make([]float64, len(benchTypes))
	v := make([][2]float64, len(benchTypes))
	for t := range m {
		m[t], v[t] = rng.NormFloat64(), [2]float64{rng.NormFloat64(), rng.NormFloat64()}
	}
	for j := range n {
		a := 2 + rng.NormFloat64()
		u := [2]float64{0.3 * rng.NormFloat64(), 0.3 * rng.NormFloat64()}
		name := fmt.Sprintf("job-%d", j)
		r := newRunner(l, name)
		for t, gt := range benchTypes {
			if rng.Float64() < keep || t == j%len(benchTypes) {
				r.run(b, gt, 1, 4, steady(math.Exp(m[t]+a+u[0]*v[t][0]+u[1]*v[t][1])))
			}
		}
	}
	return l
}

// BenchmarkObserve: one progress report of a running job, a window
// closed by every report (the costlier case): O(1), no allocation.
func BenchmarkObserve(b *testing.B) {
	l := populated(b, 1000, 0.3)
	o := learn.Observation{Type: topology.H100, GPUs: 8, Segment: 1 << 40, Time: 1e6}
	if err := l.Observe("job-7", o); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	c := cpuTime()
	for b.Loop() {
		o.Time += 60
		o.Steps += 600
		if err := l.Observe("job-7", o); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(cpuTime()-c)/float64(b.N), "cpu-ns/op")
}

// BenchmarkRefresh: the population refit at 10,000 jobs by 8 types, 40%
// of the entries measured (without a tolerance, so that every Refresh
// fits).
func BenchmarkRefresh(b *testing.B) {
	l := populatedWith(b, 10000, 0.4, learn.Config{Tolerance: -1})
	b.ReportAllocs()
	c := cpuTime()
	var st learn.FitStats
	for b.Loop() {
		st = l.Refresh()
	}
	b.ReportMetric(float64(st.Sweeps), "sweeps")
	b.ReportMetric(float64(cpuTime()-c)/1e6/float64(b.N), "cpu-ms/op")
}

// BenchmarkRefreshCold: the first fit of a learner (restored from a
// snapshot, so with no previous fit to start from), at 10,000 jobs by 8
// types, 40% measured.
func BenchmarkRefreshCold(b *testing.B) {
	l := populated(b, 10000, 0.4)
	snap, err := l.Snapshot()
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	var cpu int64
	var st learn.FitStats
	for b.Loop() {
		b.StopTimer()
		if err := l.Restore(snap); err != nil {
			b.Fatal(err)
		}
		runtime.GC() // the restore's garbage is not the fit's
		b.StartTimer()
		c := cpuTime()
		st = l.Refresh()
		cpu += cpuTime() - c
	}
	b.ReportMetric(float64(cpu)/1e6/float64(b.N), "cpu-ms/op")
	b.ReportMetric(float64(st.Sweeps), "sweeps")
}

// BenchmarkEstimates: a job's estimates on 8 types against 256 reference
// rows.
func BenchmarkEstimates(b *testing.B) {
	l := populated(b, 10000, 0.4)
	l.Refresh()
	var dst []learn.Estimate
	b.ReportAllocs()
	c := cpuTime()
	for b.Loop() {
		dst = l.Estimates("job-42", dst[:0])
	}
	b.ReportMetric(float64(cpuTime()-c)/1e3/float64(b.N), "cpu-us/op")
}

// BenchmarkEstimatesOneType: the estimates on 8 types of a job measured
// on one type (as every job under Kueue), its priors from the fit's grid
// (the grid's points filled before).
func BenchmarkEstimatesOneType(b *testing.B) {
	l := populated(b, 10000, 0.4)
	newRunner(l, "one").run(b, topology.H100, 1, 4, steady(20))
	l.Refresh()
	dst := l.Estimates("one", nil)
	b.ReportAllocs()
	c := cpuTime()
	for b.Loop() {
		dst = l.Estimates("one", dst[:0])
	}
	b.ReportMetric(float64(cpuTime()-c)/1e3/float64(b.N), "cpu-us/op")
}

// BenchmarkRefreshUnchanged: a Refresh of the same learner when no row
// changed beyond the tolerance since its last fit: no fit.
func BenchmarkRefreshUnchanged(b *testing.B) {
	l := populated(b, 10000, 0.4)
	l.Refresh()
	b.ReportAllocs()
	for b.Loop() {
		l.Refresh()
	}
}
