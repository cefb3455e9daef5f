package elastic

import (
	"context"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Step time by hand: compute 0.1 + 0.01 x 32 = 0.42; across 2 nodes with
// 4 replicas sync 0.2 + 0.05 x 2 = 0.3; gamma 1 adds them (0.72), gamma
// large tends to the max (0.42); 2 accumulation steps add 2 x 0.42.
func TestStepTimeByHand(t *testing.T) {
	p := PerfParams{AlphaC: 0.1, BetaC: 0.01, AlphaN: 0.2, BetaN: 0.05, AlphaR: 0.05, BetaR: 0.01, Gamma: 1}
	assert.InDelta(t, 0.72, p.StepTime(2, 4, 32, 0), 1e-12)
	assert.InDelta(t, 0.72+0.84, p.StepTime(2, 4, 32, 2), 1e-12)
	assert.InDelta(t, 0.42, p.StepTime(1, 1, 32, 0), 1e-12)
	assert.InDelta(t, 0.42+0.05, p.StepTime(1, 2, 32, 0), 1e-12)
	p.Gamma = 10
	assert.InDelta(t, math.Pow(math.Pow(0.42, 10)+math.Pow(0.3, 10), 0.1), p.StepTime(2, 4, 32, 0), 1e-12)
	assert.Less(t, p.StepTime(2, 4, 32, 0), 0.43)
}

// The fit recovers the parameters that generated noise-free samples over
// Pollux-like placements (1 to 4 nodes, 1 to 16 replicas, 4 batch sizes).
// Pollux's penalty on (BetaR / AlphaR)^2 trades the single-node slope for
// a larger AlphaR (BetaR 0.005 -> ~0, AlphaR 0.080 -> 0.085): predictions
// stay within 4%, the computation and cross-node terms within 1%.
func TestFitPerfParamsRecovers(t *testing.T) {
	truth := PerfParams{AlphaC: 0.05, BetaC: 0.002, AlphaN: 0.3, BetaN: 0.01, AlphaR: 0.08, BetaR: 0.005, Gamma: 2}
	var samples []PerfSample
	for _, nr := range [][2]int{{1, 1}, {1, 2}, {1, 4}, {2, 4}, {2, 8}, {4, 8}, {4, 16}, {1, 3}, {3, 12}} {
		for _, m := range []float64{16, 32, 64, 128} {
			samples = append(samples, PerfSample{Nodes: nr[0], Replicas: nr[1], Atomic: m,
				ComputeTime: truth.ComputeTime(m), StepTime: truth.StepTime(nr[0], nr[1], m, 0)})
		}
	}
	got, err := FitPerfParams(context.Background(), samples)
	require.NoError(t, err)
	for _, s := range samples {
		assert.InDelta(t, 1, got.StepTime(s.Nodes, s.Replicas, s.Atomic, 0)/s.StepTime, 0.04, "%+v", s)
	}
	assert.InDelta(t, truth.AlphaC, got.AlphaC, 0.0005)
	assert.InDelta(t, truth.BetaC, got.BetaC, 0.00002)
	assert.InDelta(t, truth.AlphaN, got.AlphaN, 0.003)
	assert.InDelta(t, truth.BetaN, got.BetaN, 0.0001)
	assert.InDelta(t, truth.Gamma, got.Gamma, 0.05)
	// Single-node samples only: the network terms are pinned tiny.
	one, err := FitPerfParams(context.Background(), samples[:12])
	require.NoError(t, err)
	assert.Less(t, one.AlphaN, 1e-7)
	_, err = FitPerfParams(context.Background(), nil)
	assert.ErrorIs(t, err, ErrFitFailed)
	_, err = FitPerfParams(context.Background(), []PerfSample{{Nodes: 2, Replicas: 1, Atomic: 1, ComputeTime: 1, StepTime: 1}})
	assert.ErrorIs(t, err, ErrInvalid)
}

// Efficiency (Pollux eq. 7): 1 at the initial batch; with no gradient
// noise (Var 0) doubling the batch halves it; with only noise (Sqr 0) it
// stays 1; by hand, Var 3, Sqr 1, batch 4 x init: (3 + 1) / (3/4 + 1) / 4.
func TestEfficiency(t *testing.T) {
	g := GradStats{Sqr: 1, Var: 3}
	assert.InDelta(t, 1, g.Efficiency(32, 32), 1e-12)
	assert.InDelta(t, 4/1.75/4, g.Efficiency(32, 128), 1e-12)
	assert.InDelta(t, 0.5, GradStats{Sqr: 1}.Efficiency(32, 64), 1e-12)
	assert.InDelta(t, 1, GradStats{Var: 1}.Efficiency(32, 64), 1e-12)
	assert.Equal(t, 1.0, GradStats{}.Efficiency(32, 64))
}

// Batch configurations as adaptdl chooses them: on one GPU above the
// initial batch at least one accumulation step; micro-batches within the
// limits; the best goodput grows with more GPUs when compute dominates.
func TestGoodputConfigs(t *testing.T) {
	g := &Goodput{Perf: PerfParams{AlphaC: 0.01, BetaC: 0.001, AlphaN: 0.05, BetaN: 0.001, AlphaR: 0.01, BetaR: 0.001, Gamma: 1},
		Grad: GradStats{Sqr: 1, Var: 50}, InitBatch: 64, MaxBatch: 4096, MinAtomic: 16, MaxAtomic: 256, Accumulation: true}
	assert.Equal(t, Config{Batch: 128, Atomic: 64, Accum: 1}, g.FixedBatch(1, 128))
	assert.Equal(t, Config{Batch: 1024, Atomic: 256, Accum: 3}, g.FixedBatch(1, 1024))
	assert.Equal(t, Config{Batch: 1024, Atomic: 128, Accum: 0}, g.FixedBatch(8, 1024))
	cs := g.Candidates(4)
	require.NotEmpty(t, cs)
	assert.InDelta(t, 64, cs[0].Batch, 1e-9)
	for _, c := range cs {
		assert.True(t, c.Atomic >= 16 && c.Atomic <= 256, "%+v", c)
		assert.GreaterOrEqual(t, 4*c.Atomic*float64(c.Accum+1), c.Batch-1e-9)
	}
	prev := 0.0
	for _, r := range []int{1, 2, 4, 8, 16} {
		_, rate, ok := g.Best((r+3)/4, r)
		require.True(t, ok)
		assert.Greater(t, rate, prev, "%d GPUs", r)
		prev = rate
	}
	// The best configuration is the best candidate.
	best, rate, _ := g.Best(1, 4)
	for _, c := range g.Candidates(4) {
		assert.LessOrEqual(t, g.Rate(1, 4, c), rate+1e-12)
	}
	assert.InDelta(t, rate, g.Rate(1, 4, best), 1e-12)
	// No placement, no rate: fewer than one replica or node, or more
	// nodes than replicas (FixedBatch(0, 128) used to give an
	// accumulation of 2^63 - 1, Rate(-1, 0, ...) a positive rate).
	for _, nr := range [][2]int{{1, 0}, {1, -4}, {0, 2}, {-1, 0}, {3, 2}} {
		assert.Zero(t, g.Rate(nr[0], nr[1], Config{Batch: 64, Atomic: 32}), "%v", nr)
		if nr[1] < 1 {
			assert.Equal(t, Config{}, g.FixedBatch(nr[1], 128))
		}
		_, rate, ok := g.Best(nr[0], nr[1])
		assert.False(t, ok, "%v", nr)
		assert.Zero(t, rate)
	}
	assert.Nil(t, g.Candidates(0))
	assert.Zero(t, Linear{2}.Throughput(-3))
	// Micro-batch limits that no candidate meets.
	g.MinAtomic, g.MaxAtomic = 300, 200
	_, _, ok := g.Best(1, 1)
	assert.False(t, ok)
}

// With concave curves and one-GPU workers the p = -1 objective is
// separable and convex in each job's GPUs, so Pollux's local search must
// reach the brute-force optimum (no restart penalty).
func TestPolluxMatchesBruteForce(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	for trial := 0; trial < 150; trial++ {
		n := 1 + rng.IntN(4)
		var jobs []*Job
		for i := 0; i < n; i++ {
			hi := 1 + rng.IntN(5)
			tab := make(Table, hi)
			x, inc := 0.0, 1+rng.Float64()
			for k := range tab {
				x += inc
				inc *= 0.3 + 0.7*rng.Float64()
				tab[k] = x
			}
			jobs = append(jobs, &Job{ID: i, MinWorkers: 1, MaxWorkers: hi, GPUsPerWorker: 1, Work: 1, Curve: tab})
		}
		st := states(jobs...)
		gpus := rng.IntN(10)
		w, err := Pollux{RestartPenalty: -1}.Allocate(st, gpus)
		require.NoError(t, err)
		fair := max(1, (gpus+n-1)/n)
		obj := func(w []int) (float64, bool) {
			s, used := 0.0, 0
			for i := range st {
				used += w[i]
				sp := 0.0
				if w[i] > 0 {
					sp = st[i].Curve.Throughput(w[i]) / st[i].Curve.Throughput(min(fair, st[i].MaxWorkers))
				}
				s += 1 / (sp + 1e-3)
			}
			return s, used <= gpus
		}
		got, ok := obj(w)
		require.True(t, ok)
		best := math.Inf(1)
		cur := make([]int, n)
		var rec func(i int)
		rec = func(i int) {
			if i == n {
				if v, ok := obj(cur); ok && v < best {
					best = v
				}
				return
			}
			for k := 0; k <= st[i].MaxWorkers; k++ {
				cur[i] = k
				rec(i + 1)
			}
		}
		rec(0)
		assert.InDelta(t, best, got, 1e-9*best, "trial %d: %v", trial, w)
	}
}

// The restart penalty: a young job keeps its allocation rather than grow
// (its speedup after a restart is scaled by age / (age + 30)); an old one
// grows. Running jobs keep their base; bad exponents are errors.
func TestPolluxRestartPenalty(t *testing.T) {
	j := &Job{ID: 1, MinWorkers: 1, MaxWorkers: 4, GPUsPerWorker: 1, Work: 10, Curve: Linear{PerWorker: 1}}
	young := []State{{Job: j, Remaining: 10, Workers: 2, Age: 10}}
	w, err := Pollux{}.Allocate(young, 4)
	require.NoError(t, err)
	assert.Equal(t, []int{2}, w, "4 GPUs at 10 / 40 of the speed is worse than 2")
	old := []State{{Job: j, Remaining: 10, Workers: 2, Age: 3000}}
	w, err = Pollux{}.Allocate(old, 4)
	require.NoError(t, err)
	assert.Equal(t, []int{4}, w)
	_, err = Pollux{P: 1}.Allocate(old, 4)
	assert.ErrorIs(t, err, ErrInvalid)
	_, err = Pollux{}.Allocate(old, 1)
	assert.ErrorIs(t, err, ErrInvalid)
}

// BenchmarkFitPerfParams fits the 36 samples of TestFitPerfParamsRecovers.
func BenchmarkFitPerfParams(b *testing.B) {
	truth := PerfParams{AlphaC: 0.05, BetaC: 0.002, AlphaN: 0.3, BetaN: 0.01, AlphaR: 0.08, BetaR: 0.005, Gamma: 2}
	var samples []PerfSample
	for _, nr := range [][2]int{{1, 1}, {1, 2}, {1, 4}, {2, 4}, {2, 8}, {4, 8}, {4, 16}, {1, 3}, {3, 12}} {
		for _, m := range []float64{16, 32, 64, 128} {
			samples = append(samples, PerfSample{Nodes: nr[0], Replicas: nr[1], Atomic: m,
				ComputeTime: truth.ComputeTime(m), StepTime: truth.StepTime(nr[0], nr[1], m, 0)})
		}
	}
	for b.Loop() {
		if _, err := FitPerfParams(context.Background(), samples); err != nil {
			b.Fatal(err)
		}
	}
}
