package allocation

import (
	"context"
	"math/rand/v2"
	"testing"

	"github.com/gpusched/gpusched/allocation/lp"
	"github.com/gpusched/gpusched/perfmodel"
	"github.com/gpusched/gpusched/perfmodel/gavel"
	"github.com/gpusched/gpusched/topology"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fixedPairs gives every pair the same rates.
type fixedPairs struct{ ta, tb float64 }

func (f fixedPairs) Rates(a, b, k int) (float64, float64) { return f.ta, f.tb }

// By hand: two jobs, one GPU, each running at 1 alone and 0.8 together.
// Without sharing each gets half the GPU (level 0.5); sharing all the time
// gives both 0.8.
func TestSpaceSharingTwoJobs(t *testing.T) {
	p := &Problem{Types: []topology.GPUType{"a"}, Capacity: []int{1}, Jobs: []Job{
		{ID: 1, ScaleFactor: 1, Throughput: []float64{1}},
		{ID: 2, ScaleFactor: 1, Throughput: []float64{1}},
	}, Pairs: fixedPairs{0.8, 0.8}}
	a := allocate(t, &MaxMinFairness{}, p)
	assert.InDelta(t, 0.5, a.Objective, 1e-7)
	a = allocate(t, &MaxMinFairness{SpaceSharing: true}, p)
	assert.InDelta(t, 0.8, a.Objective, 1e-6)
	require.Len(t, a.Pairs, 1)
	assert.InDelta(t, 1.0, a.Pairs[0].X[0], 1e-6)
	assert.InDelta(t, 0.8, a.EffectiveThroughput(p, 0), 1e-6)

	// Sharing that slows both jobs below half is never chosen.
	p.Pairs = fixedPairs{0.4, 0.4}
	a = allocate(t, &MaxMinFairness{SpaceSharing: true}, p)
	assert.InDelta(t, 0.5, a.Objective, 1e-6)
	assert.Empty(t, a.Pairs)

	// Jobs of different scale factors never share.
	p.Pairs = fixedPairs{0.8, 0.8}
	p.Capacity = []int{2}
	p.Jobs[1].ScaleFactor = 2
	a = allocate(t, &MaxMinFairness{SpaceSharing: true}, p)
	assert.Empty(t, a.Pairs)

	_, err := (&MaxMinFairness{SpaceSharing: true}).Allocate(context.Background(), &Problem{Types: []topology.GPUType{"a"}, Capacity: []int{1}})
	assert.ErrorIs(t, err, ErrInvalidProblem)
}

// gavelProblem draws n single-GPU jobs from Gavel's 26 job types on n/4
// GPUs of each of k80, p100 and v100 (POP's setup).
func gavelProblem(t testing.TB, seed uint64, n int) (*Problem, *TablePairs) {
	tab := gavel.Simulation()
	var single []perfmodel.JobKey
	for _, k := range tab.Jobs() {
		if k.ScaleFactor == 1 {
			single = append(single, k)
		}
	}
	rng := rand.New(rand.NewPCG(seed, 1))
	types := []topology.GPUType{topology.K80, topology.P100, topology.V100}
	p := &Problem{Types: types, Capacity: []int{max(1, n/4), max(1, n/4), max(1, n/4)}}
	keys := make([]perfmodel.JobKey, n)
	for m := range n {
		keys[m] = single[rng.IntN(len(single))]
		j := Job{ID: m, ScaleFactor: 1, Throughput: make([]float64, 3)}
		for k, gt := range types {
			v, err := tab.Throughput(keys[m], gt)
			if err != nil {
				t.Fatal(err)
			}
			j.Throughput[k] = v
		}
		p.Jobs = append(p.Jobs, j)
	}
	pairs, err := NewTablePairs(tab, keys, types)
	if err != nil {
		t.Fatal(err)
	}
	p.Pairs = pairs
	return p, pairs
}

// hidden hides the class methods, forcing pricing of every pair.
type hidden struct{ PairRates }

// The column generation is exact: it matches the LP written with every
// pair column up front, with both pricing methods.
func TestColumnGenerationIsExact(t *testing.T) {
	for seed := range uint64(3) {
		p, _ := gavelProblem(t, seed, 24)
		gen := allocate(t, &MaxMinFairness{SpaceSharing: true}, p)

		full := &packedProgram{p: p, tput: p.matrix(), real: p.matrix(), scale: normalisers(p, p.matrix()), known: map[[3]int]bool{}}
		for k := range p.Types {
			for a := range p.Jobs {
				for b := a + 1; b < len(p.Jobs); b++ {
					ta, tb := p.Pairs.Rates(a, b, k)
					if full.shareable(a, b, k, ta, tb) {
						full.add(a, b, k, ta, tb)
					}
				}
			}
		}
		require.NoError(t, full.solve(context.Background(), &lp.InteriorPoint{}))
		assert.InDelta(t, full.objective, gen.Objective, 1e-6*full.objective, "seed %d", seed)

		q := *p
		q.Pairs = hidden{p.Pairs}
		brute := allocate(t, &MaxMinFairness{SpaceSharing: true}, &q)
		assert.InDelta(t, full.objective, brute.Objective, 1e-6*full.objective, "seed %d", seed)

		// Every job reaches the level, counting its pairs.
		scale := normalisers(p, p.matrix())
		for m := range p.Jobs {
			assert.GreaterOrEqual(t, scale[m]*gen.EffectiveThroughput(p, m), gen.Objective*(1-1e-6), "job %d", m)
		}
		// Sharing never hurts, and with Gavel's pairs it helps.
		plain := allocate(t, &MaxMinFairness{}, p)
		assert.Greater(t, gen.Objective, plain.Objective*1.01)
		t.Logf("seed %d: %d pair columns in the full LP, %d generated; level %.6f (without sharing %.6f)", seed, len(full.columns), len(gen.Pairs), gen.Objective, plain.Objective)
	}
}

// Groups of unequal sizes and within-group pairs, checked against the
// column generation on the same problem.
func TestGroupedMatchesColumnGeneration(t *testing.T) {
	for seed := range uint64(4) {
		p, _ := gavelProblem(t, 10+seed, 40+int(seed)*7)
		// Weights split some groups.
		for m := range p.Jobs {
			if m%5 == 0 {
				p.Jobs[m].Weight = 2
			}
		}
		grouped := allocate(t, &MaxMinFairness{SpaceSharing: true}, p)
		q := *p
		q.Pairs = hidden{p.Pairs}
		gen := allocate(t, &MaxMinFairness{SpaceSharing: true}, &q)
		assert.InDelta(t, gen.Objective, grouped.Objective, 1e-6*gen.Objective, "seed %d", seed)
		scale := normalisers(p, p.matrix())
		for m := range p.Jobs {
			assert.GreaterOrEqual(t, scale[m]*grouped.EffectiveThroughput(p, m), grouped.Objective*(1-1e-6), "job %d", m)
		}
	}
}

// Without space sharing, interchangeable jobs also share variables; the
// optimum is that of the LP over every job.
func TestGroupedMaxMinMatchesPerJobLP(t *testing.T) {
	for seed := range uint64(3) {
		p, _ := gavelProblem(t, 20+seed, 120)
		p.Pairs = nil
		for m := range p.Jobs {
			p.Jobs[m].ScaleFactor = []int{1, 1, 2}[m%3]
		}
		grouped := allocate(t, &MaxMinFairness{}, p)
		g := newProgram(p, lp.Maximize, p.matrix())
		scale := normalisers(p, p.matrix())
		tv := g.m.AddVar(0, lp.Inf, 1)
		for m := range p.Jobs {
			g.idx, g.val = append(g.idx[:0], tv), append(g.val[:0], 1)
			g.rate(m, p.Jobs[m].Throughput, -scale[m])
			g.m.AddRow(-lp.Inf, 0, g.idx, g.val)
		}
		_, sol, err := g.solve(context.Background(), nil)
		require.NoError(t, err)
		assert.InDelta(t, sol.X[tv], grouped.Objective, 1e-6*sol.X[tv], "seed %d", seed)
		lv := levels(p, grouped, p.matrix())
		for m := range lv {
			assert.GreaterOrEqual(t, lv[m], grouped.Objective*(1-1e-6))
		}
	}
}
