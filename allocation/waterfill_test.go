package allocation

import (
	"context"
	"github.com/gpusched/gpusched/allocation/lp"
	"math/rand/v2"
	"testing"

	"github.com/gpusched/gpusched/topology"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// By hand: job A runs only on type a (1 GPU), B and C only on type b
// (2 GPUs). T^prop is 1/3 for A and 2/3 for B and C, so the levels are
// 3 x_A, 1.5 x_B and 1.5 x_C. Max-min stops at 1.5 (B and C use all of
// b); water-filling then raises A to 3.
func TestWaterFillingTwoLevels(t *testing.T) {
	p := &Problem{Types: []topology.GPUType{"a", "b"}, Capacity: []int{1, 2}, Jobs: []Job{
		{ID: 1, ScaleFactor: 1, Throughput: []float64{1, 0}},
		{ID: 2, ScaleFactor: 1, Throughput: []float64{0, 1}},
		{ID: 3, ScaleFactor: 1, Throughput: []float64{0, 1}},
	}}
	mm := allocate(t, &MaxMinFairness{}, p)
	assert.InDelta(t, 1.5, mm.Objective, 1e-7)
	wf := allocate(t, &WaterFilling{}, p)
	assert.InDelta(t, 1.5, wf.Objective, 1e-7)
	assertX(t, [][]float64{{1, 0}, {0, 1}, {0, 1}}, wf.X)
}

// By hand: 2 GPUs, four identical jobs, entity e1 with job 1 and entity e2
// with jobs 2 to 4, equal entity weights. Fairness inside e2 gives job 1 a
// whole GPU and the others a third each; FIFO inside e2 gives its oldest
// job the whole other GPU.
func TestHierarchical(t *testing.T) {
	p := &Problem{Types: []topology.GPUType{"a"}, Capacity: []int{2}, EntityWeights: map[string]float64{"e1": 1, "e2": 1}}
	for i := range 4 {
		e := "e2"
		if i == 0 {
			e = "e1"
		}
		p.Jobs = append(p.Jobs, Job{ID: i, ScaleFactor: 1, Throughput: []float64{1}, Entity: e, Arrival: float64(10 - i)})
	}
	flat := allocate(t, &WaterFilling{}, p)
	assertX(t, [][]float64{{0.5}, {0.5}, {0.5}, {0.5}}, flat.X)
	fair := allocate(t, &WaterFilling{Hierarchical: true}, p)
	assertX(t, [][]float64{{1}, {1.0 / 3}, {1.0 / 3}, {1.0 / 3}}, fair.X)
	fifo := allocate(t, &WaterFilling{Hierarchical: true, Within: map[string]Reweighting{"e2": EntityFIFO}}, p)
	// The oldest job of e2 is job 3 (arrival 7).
	assertX(t, [][]float64{{1}, {0}, {0}, {1}}, fifo.X)
}

func TestWaterFillingProperties(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for range 15 {
		p := randomProblem(rng, 2+rng.IntN(20), 1+rng.IntN(3))
		mm := allocate(t, &MaxMinFairness{}, p)
		wf := allocate(t, &WaterFilling{}, p)
		// The first level is max-min's optimum, and no job falls below it.
		assert.InDelta(t, mm.Objective, wf.Objective, 1e-6*max(1, mm.Objective))
		lv := levels(p, wf, p.matrix())
		g := newProgram(p, 0, p.matrix())
		for m := range p.Jobs {
			if g.runs(m) && normalisers(p, p.matrix())[m] > 0 {
				assert.GreaterOrEqual(t, lv[m], wf.Objective*(1-1e-6))
			}
		}
		// One entity with Fairness is the flat policy.
		q := *p
		q.Jobs = append([]Job(nil), p.Jobs...)
		for m := range q.Jobs {
			q.Jobs[m].Entity = "only"
		}
		h, err := (&WaterFilling{Hierarchical: true}).Allocate(context.Background(), &q)
		require.NoError(t, err)
		lh := levels(p, h, p.matrix())
		for m := range lv {
			assert.InDelta(t, lv[m], lh[m], 1e-5*max(1, lv[m]), "job %d", m)
		}
	}
}

// referenceWaterFilling finds bottlenecks the slow, sure way: one LP per
// unfrozen job, maximising its level while every other job keeps the
// current level. It returns each job's final normalised level.
func referenceWaterFilling(t *testing.T, p *Problem) []float64 {
	tput := p.matrix()
	scale := normalisers(p, tput)
	n := len(p.Jobs)
	probe := newProgram(p, 0, tput)
	frozen := make([]bool, n)
	floor := make([]float64, n)
	for m := range p.Jobs {
		frozen[m] = !probe.runs(m) || scale[m] == 0
	}
	solveWith := func(target int, level float64) float64 {
		g := newProgram(p, lp.Maximize, tput)
		obj := g.m.AddVar(0, lp.Inf, 1)
		for m := range p.Jobs {
			g.idx, g.val = g.idx[:0], g.val[:0]
			g.rate(m, tput[m], scale[m])
			switch {
			case frozen[m] && floor[m] > 0:
				g.m.AddRow(floor[m]*(1-1e-9), lp.Inf, g.idx, g.val)
			case !frozen[m] && m == target:
				g.idx, g.val = append(g.idx, obj), append(g.val, -1)
				g.m.AddRow(0, lp.Inf, g.idx, g.val)
			case !frozen[m] && target < 0:
				g.idx, g.val = append(g.idx, obj), append(g.val, -1)
				g.m.AddRow(0, lp.Inf, g.idx, g.val)
			case !frozen[m]:
				g.m.AddRow(level*(1-1e-9), lp.Inf, g.idx, g.val)
			}
		}
		_, sol, err := g.solve(context.Background(), nil)
		require.NoError(t, err)
		return sol.X[obj]
	}
	for {
		var open []int
		for m := range p.Jobs {
			if !frozen[m] {
				open = append(open, m)
			}
		}
		if len(open) == 0 {
			break
		}
		level := solveWith(-1, 0)
		var stuck []int
		for _, m := range open {
			if solveWith(m, level) <= level*(1+1e-6)+1e-9 {
				stuck = append(stuck, m)
			}
		}
		require.NotEmpty(t, stuck)
		for _, m := range stuck {
			frozen[m], floor[m] = true, level
		}
	}
	return floor
}

func TestBottlenecksMatchOneLPPerJob(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	for range 10 {
		p := randomProblem(rng, 2+rng.IntN(10), 1+rng.IntN(3))
		for m := range p.Jobs {
			p.Jobs[m].Weight = 1
		}
		want := referenceWaterFilling(t, p)
		got := levels(p, allocate(t, &WaterFilling{}, p), p.matrix())
		for m := range want {
			if want[m] > 0 {
				assert.InDelta(t, want[m], got[m], 1e-5*max(1, want[m]), "job %d", m)
			}
		}
	}
}
