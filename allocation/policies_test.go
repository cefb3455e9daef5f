package allocation

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gpusched/gpusched/allocation/lp"
	"github.com/gpusched/gpusched/perfmodel"
	"github.com/gpusched/gpusched/perfmodel/gavel"
	"github.com/gpusched/gpusched/topology"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// twoByTwo: one GPU of each of two types; job 0 runs at 4 on A and 1 on B,
// job 1 at 2 on A and 1 on B.
func twoByTwo() *Problem {
	return &Problem{
		Types:    []topology.GPUType{"a", "b"},
		Capacity: []int{1, 1},
		Jobs: []Job{
			{ID: 10, ScaleFactor: 1, Throughput: []float64{4, 1}, RemainingSteps: 8},
			{ID: 11, ScaleFactor: 1, Throughput: []float64{2, 1}, RemainingSteps: 4},
		},
	}
}

func allocate(t *testing.T, pol Policy, p *Problem) *Allocation {
	t.Helper()
	a, err := pol.Allocate(context.Background(), p)
	require.NoError(t, err)
	require.NoError(t, a.Check(p, 1e-7))
	return a
}

func assertX(t *testing.T, want, got [][]float64) {
	t.Helper()
	assertXWithin(t, want, got, 1e-6)
}

func assertXWithin(t *testing.T, want, got [][]float64, tol float64) {
	t.Helper()
	for m := range want {
		for k := range want[m] {
			assert.InDelta(t, want[m][k], got[m][k], tol, "X[%d][%d]", m, k)
		}
	}
}

// By hand: T^prop = (2.5, 1.5), so the levels are 0.4 (4 x00 + x01) and
// (2/3)(2 x10 + x11). Sharing both GPUs half and half gives each job level
// 1; no allocation does better, since the two levels trade off along the
// full-use line with slopes 1.2 and -2/3.
func TestMaxMinTwoByTwo(t *testing.T) {
	p := twoByTwo()
	a := allocate(t, &MaxMinFairness{}, p)
	assert.InDelta(t, 1.0, a.Objective, 1e-7)
	assertX(t, [][]float64{{0.5, 0.5}, {0.5, 0.5}}, a.X)
	assert.Equal(t, []int{10, 11}, a.JobIDs)

	// LAS: every rate 1, so each job's level is its total time: 1 each.
	a = allocate(t, &MaxMinFairness{Agnostic: true}, p)
	assert.InDelta(t, 1.0, a.Objective, 1e-7)

	// Weight 2 on job 0 halves its level: the optimum favours it.
	p.Jobs[0].Weight = 2
	a = allocate(t, &MaxMinFairness{}, p)
	// Levels 0.2 (4a + 1 - a) and (2/3)(2 - a) with job 0 on A for a:
	// 0.2 + 0.6a = 4/3 - 2a/3, a = 17/19, level 0.2 + 0.6 * 17/19.
	assert.InDelta(t, 0.2+0.6*17.0/19, a.Objective, 1e-7)
	assert.InDelta(t, 17.0/19, a.X[0][0], 1e-6)
}

// By hand: job 0 on A for a and B for 1 - a, job 1 the other way round;
// rates 1 + 3a and 2 - a must finish 8 and 4 steps together:
// (1 + 3a) / 8 = (2 - a) / 4 gives a = 0.6 and makespan 8 / 2.8 = 20/7 s.
func TestMakespanTwoByTwo(t *testing.T) {
	p := twoByTwo()
	a := allocate(t, &MinMakespan{}, p)
	assert.InDelta(t, 20.0/7, a.Objective, 1e-6)
	assertX(t, [][]float64{{0.6, 0.4}, {0.4, 0.6}}, a.X)
}

// By hand: job 0 on A and job 1 on B give 4 + 1 = 5; the swap gives 3.
func TestMaxThroughputTwoByTwo(t *testing.T) {
	p := twoByTwo()
	a := allocate(t, &MaxThroughput{}, p)
	assert.InDelta(t, 5.0, a.Objective, 1e-6)
	assertX(t, [][]float64{{1, 0}, {0, 1}}, a.X)
}

func TestMaxThroughputCost(t *testing.T) {
	// Prices 4 and 1 per hour: per dollar job 0 makes 1 on A and 1 on B,
	// job 1 makes 0.5 on A and 1 on B. The best is job 1 on B (1) plus job
	// 0 on A (1): 2.
	p := twoByTwo()
	p.Prices = []float64{4, 1}
	a := allocate(t, &MaxThroughput{Cost: true}, p)
	assert.InDelta(t, 2.0, a.Objective, 1e-6)
	assert.InDelta(t, 1.0, a.X[1][1], 1e-6)
	// Gavel's default prices need known types.
	_, err := (&MaxThroughput{Cost: true}).Allocate(context.Background(), twoByTwo())
	assert.ErrorIs(t, err, ErrInvalidProblem)
	assert.ErrorContains(t, err, "no price for GPU type a")
}

func TestMaxThroughputSLOs(t *testing.T) {
	// Job 1 must make 4 steps in 2 s: rate 2, so it needs all of A; job 0
	// then takes B: 1 + 2 = 3 instead of 5.
	p := twoByTwo()
	p.Jobs[1].Deadline = 2
	a := allocate(t, &MaxThroughput{SLOs: true}, p)
	assert.InDelta(t, 3.0, a.Objective, 1e-6)
	assertX(t, [][]float64{{0, 1}, {1, 0}}, a.X)
	assert.Empty(t, a.Note)

	// 4 steps in 1 s cannot be met: fall back and say so, or fail if strict.
	p.Jobs[1].Deadline = 1
	a = allocate(t, &MaxThroughput{SLOs: true}, p)
	assert.InDelta(t, 5.0, a.Objective, 1e-6)
	assert.Contains(t, a.Note, "SLOs cannot all be met")
	_, err := (&MaxThroughput{SLOs: true, Strict: true}).Allocate(context.Background(), p)
	assert.ErrorIs(t, err, ErrNoSolution)
	// A deadline already past.
	p.Now = 5
	_, err = (&MaxThroughput{SLOs: true, Strict: true}).Allocate(context.Background(), p)
	assert.ErrorIs(t, err, ErrNoSolution)
	assert.ErrorContains(t, err, "job 11 cannot meet its deadline")
}

// Gavel's data: Recommendation (batch size 1024) runs faster on P100 than
// on V100, ResNet-50 far faster on V100. The heterogeneity-aware policy
// gives Recommendation the P100 and ResNet-50 the V100; LAS cannot tell.
func TestRecommendationGoesToP100(t *testing.T) {
	tab := gavel.Simulation()
	types := []topology.GPUType{topology.K80, topology.P100, topology.V100}
	jobs := []perfmodel.JobKey{
		{Model: "Recommendation", BatchSize: 1024, ScaleFactor: 1},
		{Model: "ResNet-50", BatchSize: 64, ScaleFactor: 1},
	}
	p := &Problem{Types: types, Capacity: []int{0, 1, 1}}
	for i, k := range jobs {
		j := Job{ID: i, ScaleFactor: 1, Throughput: make([]float64, len(types))}
		for ti, gt := range types {
			v, err := tab.Throughput(k, gt)
			require.NoError(t, err)
			j.Throughput[ti] = v
		}
		p.Jobs = append(p.Jobs, j)
	}
	// Total throughput: each on its fast type.
	a := allocate(t, &MaxThroughput{}, p)
	assertX(t, [][]float64{{0, 1, 0}, {0, 0, 1}}, a.X)
	// Max-min: Recommendation mostly on P100, ResNet-50 mostly on V100, and
	// both better off than under LAS, which cannot tell the types apart.
	aware := allocate(t, &MaxMinFairness{}, p)
	assert.Greater(t, aware.X[0][1], 0.9)
	assert.Greater(t, aware.X[1][2], 0.9)
	assert.Zero(t, aware.X[0][0], "no K80 in this cluster")
	las := allocate(t, &MaxMinFairness{Agnostic: true}, p)
	la, ll := levels(p, aware, p.matrix()), levels(p, las, p.matrix())
	assert.Greater(t, min(la[0], la[1]), min(ll[0], ll[1])*1.2)
}

func randomProblem(rng *rand.Rand, jobs, types int) *Problem {
	p := &Problem{}
	for k := range types {
		p.Types = append(p.Types, topology.GPUType(string(rune('a'+k))))
		p.Capacity = append(p.Capacity, rng.IntN(8))
	}
	for m := range jobs {
		j := Job{ID: 100 + m, ScaleFactor: []int{1, 1, 1, 2, 4, 8}[rng.IntN(6)], Weight: float64(1 + rng.IntN(3)), RemainingSteps: 1 + rng.Float64()*1000}
		for range types {
			v := rng.Float64() * 10
			if rng.IntN(5) == 0 {
				v = 0
			}
			j.Throughput = append(j.Throughput, v)
		}
		p.Jobs = append(p.Jobs, j)
	}
	return p
}

// levels returns each job's normalised max-min level under a.
func levels(p *Problem, a *Allocation, tput [][]float64) []float64 {
	scale := normalisers(p, tput)
	r := rates(a, tput)
	out := make([]float64, len(p.Jobs))
	for m := range out {
		out[m] = scale[m] * r[m]
	}
	return out
}

func TestPoliciesOnRandomProblems(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for range 40 {
		p := randomProblem(rng, 1+rng.IntN(30), 1+rng.IntN(4))
		for _, pol := range []Policy{&MaxMinFairness{}, &MaxMinFairness{Agnostic: true}, &MaxThroughput{}, Proportional{}, Isolated{}} {
			a, err := pol.Allocate(context.Background(), p)
			require.NoError(t, err)
			require.NoError(t, a.Check(p, 1e-7), "%T", pol)
		}
		// The max-min objective is the smallest level among jobs that can run.
		a := allocate(t, &MaxMinFairness{}, p)
		g := newProgram(p, lp.Maximize, p.matrix())
		lv := levels(p, a, p.matrix())
		low := math.Inf(1)
		for m := range p.Jobs {
			if g.runs(m) {
				low = min(low, lv[m])
			}
		}
		if !math.IsInf(low, 1) {
			assert.InDelta(t, a.Objective, low, 1e-6*max(1, low))
		}
	}
}

func TestEmptyAndZeroCapacity(t *testing.T) {
	p := &Problem{Types: []topology.GPUType{"a"}, Capacity: []int{0}}
	for _, pol := range []Policy{&MaxMinFairness{}, &MaxThroughput{}, &MinMakespan{}, Proportional{}, Isolated{}} {
		a := allocate(t, pol, p)
		assert.Empty(t, a.X)
	}
	p.Jobs = []Job{{ID: 1, ScaleFactor: 1, Throughput: []float64{3}, RemainingSteps: 5}}
	a := allocate(t, &MaxMinFairness{}, p)
	assert.Zero(t, a.X[0][0])
	_, err := (&MinMakespan{}).Allocate(context.Background(), p)
	assert.ErrorIs(t, err, ErrNoSolution)
	assert.ErrorContains(t, err, "can run on no type")
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name   string
		modify func(p *Problem)
		msg    string
	}{
		{"capacities", func(p *Problem) { p.Capacity = []int{1} }, "2 GPU types but 1 capacities"},
		{"negative capacity", func(p *Problem) { p.Capacity[1] = -1 }, "capacity of b is -1"},
		{"duplicate type", func(p *Problem) { p.Types[1] = "a" }, "GPU type a appears twice"},
		{"prices", func(p *Problem) { p.Prices = []float64{1} }, "2 GPU types but 1 prices"},
		{"zero price", func(p *Problem) { p.Prices = []float64{1, 0} }, "price of b is 0"},
		{"duplicate job", func(p *Problem) { p.Jobs[1].ID = 10 }, "job ID 10 appears twice"},
		{"scale factor", func(p *Problem) { p.Jobs[0].ScaleFactor = 0 }, "scale factor 0"},
		{"throughput length", func(p *Problem) { p.Jobs[0].Throughput = []float64{1} }, "1 throughputs for 2 GPU types"},
		{"negative throughput", func(p *Problem) { p.Jobs[0].Throughput[1] = -1 }, "throughput -1 on b"},
		{"NaN throughput", func(p *Problem) { p.Jobs[0].Throughput[1] = math.NaN() }, "throughput NaN"},
		{"weight", func(p *Problem) { p.Jobs[0].Weight = -2 }, "weight -2"},
		{"remaining", func(p *Problem) { p.Jobs[0].RemainingSteps = math.Inf(1) }, "remaining steps +Inf"},
		{"entity weight", func(p *Problem) { p.EntityWeights = map[string]float64{"x": 0} }, `entity "x": weight 0`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := twoByTwo()
			tc.modify(p)
			for _, pol := range []Policy{&MaxMinFairness{}, &MaxThroughput{}, &MinMakespan{}, Proportional{}, Isolated{}} {
				_, err := pol.Allocate(context.Background(), p)
				assert.ErrorIs(t, err, ErrInvalidProblem)
				assert.ErrorContains(t, err, tc.msg)
			}
		})
	}
}

func TestProportionalAndIsolated(t *testing.T) {
	p := &Problem{Types: []topology.GPUType{"a", "b"}, Capacity: []int{2, 6}, Jobs: []Job{
		{ID: 1, ScaleFactor: 1, Throughput: []float64{1, 1}},
		{ID: 2, ScaleFactor: 4, Throughput: []float64{1, 1}},
	}}
	// Proportional: n_k / max(N, sum sf) = n_k / 8.
	a := allocate(t, Proportional{}, p)
	assertX(t, [][]float64{{0.25, 0.75}, {0.25, 0.75}}, a.X)
	// Isolated: n_k / (M sf): job 1 (1, 3) scaled to sum 1; job 2 (0.25, 0.75).
	a = allocate(t, Isolated{}, p)
	assertX(t, [][]float64{{0.25, 0.75}, {0.25, 0.75}}, a.X)
	p.Capacity = []int{1, 1}
	a = allocate(t, Isolated{}, p)
	assertX(t, [][]float64{{0.5, 0.5}, {0.125, 0.125}}, a.X)
	// Proportional scaled down: 5 GPUs asked for, 2 exist.
	a = allocate(t, Proportional{}, p)
	assertX(t, [][]float64{{0.2, 0.2}, {0.2, 0.2}}, a.X)
}

// The makespan example of #16: an LM (batch size 20) job with 17,401,100
// steps left and a Transformer (batch size 256) job with 99,145,600, on one
// V100, one P100 and one K80, at Gavel's simulated rates
// (simulation_throughputs.json). The Transformer is the bottleneck: it
// needs the P100 (its fastest type) for its whole run, 99,145,600 /
// 1.6776964927127545 = 59,096,267.07 s, while the LM job finishes far
// earlier on the V100. Weights do not enter the makespan.
func TestMakespanLongJobsExact(t *testing.T) {
	p := &Problem{
		Types:    []topology.GPUType{topology.V100, topology.P100, topology.K80},
		Capacity: []int{1, 1, 1},
		Jobs: []Job{
			{ID: 1, ScaleFactor: 1, Weight: 5, RemainingSteps: 17401100, Throughput: []float64{64.74245099960703, 58.17267240669826, 17.142289692304086}},
			{ID: 2, ScaleFactor: 1, Weight: 1, RemainingSteps: 99145600, Throughput: []float64{1.5951407072133263, 1.6776964927127545, 0.4583310125271042}},
		},
	}
	a := allocate(t, &MinMakespan{}, p)
	want := 99145600 / 1.6776964927127545
	assert.InDelta(t, want, a.Objective, 1e-6*want)
	assert.InDelta(t, 59096267, a.Objective, 1)
	assert.InDelta(t, 1.0, a.X[1][1], 1e-6, "the Transformer job holds the P100")
}

// Remaining steps spanning 1 to 1e10 over 163 and 1,000 jobs, makespans up
// to 1e10 s: the makespan the LP reports is the one its allocation
// achieves (to 1e-6), the feasibility LP 1e-6 longer is feasible, and the
// one 1e-5 shorter infeasible (a smaller infeasibility is within the
// tolerance of the solver's phase-1 check; the clp tests compare the
// makespans with CLP's to 1e-6).
func TestMakespanWideRanges(t *testing.T) {
	rng := rand.New(rand.NewPCG(16, 16))
	for _, jobs := range []int{163, 1000} {
		if testing.Short() && jobs > 163 {
			continue
		}
		p := &Problem{Types: []topology.GPUType{topology.V100, topology.P100, topology.K80}, Capacity: []int{16, 24, 32}}
		for m := range jobs {
			j := Job{ID: m, ScaleFactor: []int{1, 1, 2, 4, 8}[rng.IntN(5)], RemainingSteps: math.Pow(10, 10*rng.Float64())}
			for k := range 3 {
				v := math.Pow(10, 3*rng.Float64()-1) // 0.1 to 100 steps/s
				if k > 0 && rng.IntN(10) == 0 {
					v = 0
				}
				j.Throughput = append(j.Throughput, v)
			}
			p.Jobs = append(p.Jobs, j)
		}
		p.Jobs[rng.IntN(jobs)].RemainingSteps = 1
		p.Jobs[rng.IntN(jobs)].RemainingSteps = 1e10
		a := allocate(t, &MinMakespan{}, p)
		achieved := 0.0
		for m, r := range rates(a, p.matrix()) {
			if p.Jobs[m].RemainingSteps > 0 {
				achieved = max(achieved, p.Jobs[m].RemainingSteps/r)
			}
		}
		assert.InDelta(t, achieved, a.Objective, 1e-6*achieved, "jobs=%d", jobs)
		assert.Greater(t, a.Objective, 1e8, "jobs=%d: makespans this long are the point", jobs)
		assert.False(t, makespanFeasible(t, p, a.Objective*(1-1e-5)), "jobs=%d: a shorter makespan is feasible", jobs)
		assert.True(t, makespanFeasible(t, p, a.Objective*(1+1e-6)), "jobs=%d", jobs)
	}
}

// makespanFeasible reports whether every job can finish within T: the LP
// sum_k (T T_mk / R_m) X_mk >= 1 over the base constraints (each row in
// units of its own job's work).
func makespanFeasible(t *testing.T, p *Problem, T float64) bool {
	g := newProgram(p, lp.Minimize, p.matrix())
	for m := range p.Jobs {
		g.idx, g.val = g.idx[:0], g.val[:0]
		g.rate(m, p.Jobs[m].Throughput, T/p.Jobs[m].RemainingSteps)
		g.m.AddRow(1, lp.Inf, g.idx, g.val)
	}
	_, _, err := g.solve(context.Background(), nil)
	if errors.Is(err, lp.ErrInfeasible) {
		return false
	}
	require.NoError(t, err)
	return true
}

// With Vertex the LP policies return a vertex of the optimal face: the same
// objective as the centre, but without the centre's even spread. For LAS,
// where every type looks alike, the centre gives each job the same share of
// every type (J*K fractional entries), a vertex at most J + K (a basic
// solution has at most as many positive variables as the LP has rows).
func TestVertexOption(t *testing.T) {
	p := &Problem{Types: []topology.GPUType{topology.V100, topology.P100, topology.K80}, Capacity: []int{4, 4, 4}}
	for m := range 30 {
		// Distinct weights, so that no two jobs are interchangeable (the
		// policy would share one set of variables among those).
		p.Jobs = append(p.Jobs, Job{ID: m, ScaleFactor: 1, Weight: 1 + float64(m)/100, RemainingSteps: 100 + float64(m), Throughput: []float64{3 + float64(m)/50, 2, 1}})
	}
	fractional := func(a *Allocation) int {
		n := 0
		for _, row := range a.X {
			for _, v := range row {
				if v > 1e-6 && v < 1-1e-6 {
					n++
				}
			}
		}
		return n
	}
	centre := allocate(t, &MaxMinFairness{Agnostic: true}, p)
	vertex := allocate(t, &MaxMinFairness{Agnostic: true, Vertex: true}, p)
	assert.InDelta(t, centre.Objective, vertex.Objective, 1e-7)
	assert.Equal(t, 30*3, fractional(centre), "the centre spreads every job")
	assert.LessOrEqual(t, fractional(vertex), 30+3)
	for _, pair := range [][2]Policy{
		{&MaxMinFairness{}, &MaxMinFairness{Vertex: true}},
		{&MinMakespan{}, &MinMakespan{Vertex: true}},
		{&MaxThroughput{}, &MaxThroughput{Vertex: true}},
		{&FinishTimeFairness{}, &FinishTimeFairness{Vertex: true}},
	} {
		a, b := allocate(t, pair[0], p), allocate(t, pair[1], p)
		assert.InDelta(t, a.Objective, b.Objective, 1e-6*max(1, a.Objective), "%T", pair[0])
	}
}
