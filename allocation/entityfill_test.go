package allocation

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/gpusched/gpusched/topology"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// entityPolicies are the policies that water-fill entities.
func entityPolicies() []Policy {
	return []Policy{
		&WaterFilling{Hierarchical: true, PerEntity: true},
		&QuotaFairness{WaterFilling: true, Hierarchical: true, PerEntity: true},
	}
}

// gpusOf is the entity's GPUs in use on each type under a.
func gpusOf(p *Problem, a *Allocation, e string) []float64 {
	return usage(p, a, e).GPUs
}

// splitProblem is issue #40's split attack on one type of 8 GPUs: tenants
// B, C and D have one 4-GPU job each; A's 4 GPUs of work are one 4-GPU job
// (n = 1) or n jobs of 4/n GPUs, with rates in proportion.
func splitProblem(n int) *Problem {
	p := &Problem{Types: []topology.GPUType{"v100"}, Capacity: []int{8}}
	for i := range n {
		p.Jobs = append(p.Jobs, Job{ID: i, ScaleFactor: 4 / min(n, 4), Throughput: []float64{4 / float64(min(n, 4))}, Entity: "A"})
	}
	for i, e := range []string{"B", "C", "D"} {
		p.Jobs = append(p.Jobs, Job{ID: 100 + i, ScaleFactor: 4, Throughput: []float64{4}, Entity: e})
	}
	return p
}

// By hand: four entities of weight 1 with more demand than 8 GPUs get 2
// GPUs each, however A splits its work (1, 4, 8 or 32 jobs). Plain max-min
// fairness gives every job the same level, a job's level being the GPUs it
// holds: with 32 jobs A holds 32/35 of the 8 GPUs.
func TestEntityFillSplitGainsNothing(t *testing.T) {
	for _, pol := range entityPolicies() {
		for _, n := range []int{1, 4, 8, 32} {
			p := splitProblem(n)
			a := allocate(t, pol, p)
			for _, e := range []string{"A", "B", "C", "D"} {
				assert.InDelta(t, 2, gpusOf(p, a, e)[0], 1e-5, "%T: A in %d jobs: %s's GPUs", pol, n, e)
			}
		}
	}
	p := splitProblem(32)
	mm := allocate(t, &MaxMinFairness{}, p)
	assert.InDelta(t, 8*32.0/35, gpusOf(p, mm, "A")[0], 1e-4)
}

// By hand, 8 GPUs: B's one 1-GPU job cannot use its quarter, so it freezes
// at 1 GPU (level 1); A (32 jobs of 1 GPU) and C (one 4-GPU job) rise to
// 3.5 GPUs each; C's job runs 3.5/4 of the time, A's 3.5/32 each.
// Weights 3 and 1 for A and C instead give A 3 x 7/4 = 5.25, C 1.75.
func TestEntityFillWaterFills(t *testing.T) {
	p := &Problem{Types: []topology.GPUType{"v100"}, Capacity: []int{8}}
	for i := range 32 {
		p.Jobs = append(p.Jobs, Job{ID: i, ScaleFactor: 1, Throughput: []float64{1}, Entity: "A"})
	}
	p.Jobs = append(p.Jobs, Job{ID: 100, ScaleFactor: 1, Throughput: []float64{1}, Entity: "B"},
		Job{ID: 101, ScaleFactor: 4, Throughput: []float64{2}, Entity: "C"})
	for _, pol := range entityPolicies() {
		a := allocate(t, pol, p)
		assert.InDelta(t, 1, a.X[32][0], 1e-5, "%T: B", pol)
		assert.InDelta(t, 3.5/4, a.X[33][0], 1e-5, "%T: C", pol)
		for m := range 32 {
			assert.InDelta(t, 3.5/32, a.X[m][0], 1e-5, "%T: A's job %d", pol, m)
		}
		q := *p
		q.EntityWeights = map[string]float64{"A": 3}
		a = allocate(t, pol, &q)
		assert.InDelta(t, 5.25, gpusOf(&q, a, "A")[0], 1e-5, "%T: A weight 3", pol)
		assert.InDelta(t, 1.75, gpusOf(&q, a, "C")[0], 1e-5, "%T: C", pol)
		assert.InDelta(t, 1, gpusOf(&q, a, "B")[0], 1e-5, "%T: B", pol)
	}
}

// randomEntities is n jobs of e entities on three types, with rates drawn
// from kinds rate vectors (so that jobs repeat) and scale factors 1, 2, 4.
func randomEntities(seed uint64, n, e, kinds int) *Problem {
	rng := rand.New(rand.NewPCG(seed, 40))
	p := &Problem{Types: []topology.GPUType{"v100", "p100", "k80"}, Capacity: []int{n / 4, n / 5, n / 3}}
	var rates [][]float64
	for range kinds {
		rates = append(rates, []float64{1 + rng.Float64()*9, 1 + rng.Float64()*5, 0.5 + rng.Float64()*2})
	}
	for m := range n {
		sf := []int{1, 1, 2, 4}[rng.IntN(4)]
		r := rates[rng.IntN(kinds)]
		p.Jobs = append(p.Jobs, Job{ID: m, ScaleFactor: sf, Entity: fmt.Sprintf("e%d", rng.IntN(e)),
			Throughput: []float64{r[0] * float64(sf), r[1] * float64(sf), r[2] * float64(sf)}})
	}
	return p
}

// Heterogeneous: entity e0's 4-GPU jobs split into four 1-GPU jobs each,
// at a quarter of the rate, leave every entity's total normalised rate as
// it was (the program is the same, column for column).
func TestEntityFillSplitHeterogeneous(t *testing.T) {
	for seed := range uint64(3) {
		p := randomEntities(seed, 60, 4, 5)
		split := &Problem{Types: p.Types, Capacity: p.Capacity}
		for _, j := range p.Jobs {
			if j.Entity != "e0" || j.ScaleFactor != 4 {
				split.Jobs = append(split.Jobs, j)
				continue
			}
			for i := range 4 {
				part := j
				part.ID, part.ScaleFactor = 1000*j.ID+1000+i, 1
				part.Throughput = []float64{j.Throughput[0] / 4, j.Throughput[1] / 4, j.Throughput[2] / 4}
				split.Jobs = append(split.Jobs, part)
			}
		}
		for _, pol := range entityPolicies() {
			a, b := allocate(t, pol, p), allocate(t, pol, split)
			ua, ub := a.Usage(p), b.Usage(split)
			for e, u := range ua {
				assert.InDelta(t, u.Normalised, ub[e].Normalised, 1e-4*max(1, u.Normalised), "%T seed %d: %s", pol, seed, e)
			}
		}
	}
}

// The entities' levels are water-filled: no entity below another's level
// could have more without the other falling below it. Checked through its
// consequence on the first level: it is at least the job water filling's
// (which asks the same of every job's share of its entity), and every
// entity's level is at least the first.
func TestEntityFillLevels(t *testing.T) {
	for seed := range uint64(3) {
		p := randomEntities(seed, 80, 5, 6)
		p.EntityWeights = map[string]float64{"e0": 2, "e3": 0.5}
		pe := allocate(t, &WaterFilling{Hierarchical: true, PerEntity: true}, p)
		pj := allocate(t, &WaterFilling{Hierarchical: true}, p)
		assert.GreaterOrEqual(t, pe.Objective, pj.Objective*(1-1e-6), "seed %d", seed)
		u := pe.Usage(p)
		for e, eu := range u {
			w := 1.0
			if v, ok := p.EntityWeights[e]; ok {
				w = v
			}
			assert.GreaterOrEqual(t, eu.Normalised/w, pe.Objective*(1-1e-5), "seed %d: %s", seed, e)
		}
	}
}

// The reduced program (identical jobs merged) gives every job the level
// the full one gives it: water filling's levels are unique.
func TestReductionKeepsLevels(t *testing.T) {
	for seed := range uint64(3) {
		p := randomEntities(seed, 120, 3, 3)
		r := reduce(p)
		require.NotNil(t, r, "seed %d: the jobs repeat", seed)
		assert.Less(t, len(r.p.Jobs), len(p.Jobs))
		for _, pol := range []*WaterFilling{{}, {Hierarchical: true}} {
			full, err := pol.fill(context.Background(), p, nil)
			require.NoError(t, err)
			red, err := pol.fill(context.Background(), r.p, nil)
			require.NoError(t, err)
			got := r.expand(p, red)
			require.NoError(t, got.Check(p, 1e-7))
			rf, rg := rates(full, p.matrix()), rates(got, p.matrix())
			for m := range p.Jobs {
				assert.InDelta(t, rf[m], rg[m], 1e-4*max(1, rf[m]), "seed %d, hierarchical %v: job %d", seed, pol.Hierarchical, m)
			}
		}
	}
}

// reduce keeps jobs of different entities, scale factors, weights or rates
// apart, and refuses when little would merge.
func TestReduceKeys(t *testing.T) {
	base := Job{ScaleFactor: 1, Throughput: []float64{2}, Entity: "A"}
	var jobs []Job
	for i, mut := range []func(*Job){
		func(*Job) {}, func(*Job) {},
		func(j *Job) { j.Entity = "B" },
		func(j *Job) { j.ScaleFactor = 2 },
		func(j *Job) { j.Weight = 2 },
		func(j *Job) { j.Throughput = []float64{3} },
		func(j *Job) { j.Entity = "C" },
		func(j *Job) { j.Throughput = []float64{4} },
	} {
		j := base
		j.ID = i
		mut(&j)
		jobs = append(jobs, j)
	}
	p := &Problem{Types: []topology.GPUType{"a"}, Capacity: []int{4}, Jobs: jobs}
	assert.Nil(t, reduce(p), "7 groups of 8 jobs: not worth it")
	for i := range 8 {
		j := base
		j.ID = 100 + i
		p.Jobs = append(p.Jobs, j)
	}
	r := reduce(p)
	require.NotNil(t, r)
	assert.Len(t, r.p.Jobs, 7)
	assert.Equal(t, 10, r.p.Jobs[0].members)
	assert.Equal(t, []int{0, 0, 1, 2, 3, 4, 5, 6}, r.of[:8])
	assert.InDelta(t, 10.0, r.p.Jobs[0].count(), 0)
	assert.InDelta(t, 1.0, r.p.Jobs[1].count(), 0)
	assert.Equal(t, 0, p.Jobs[0].members, "the caller's problem is untouched")
}

// The reduced program gives every entity what the full one gives it under
// the quota policies, guarantees included (each entity's guaranteed
// total counts every member of a group of identical jobs: it counted one
// member only, which left a guarantee short by the others' rates).
func TestReductionKeepsQuotas(t *testing.T) {
	for seed := range uint64(4) {
		p := randomEntities(seed, 90, 3, 2)
		p.EntityQuotas = map[string]Quota{
			"e0": {GuaranteedShare: 0.5},
			"e1": {GuaranteedGPUs: map[topology.GPUType]float64{"v100": 6}},
		}
		r := reduce(p)
		require.NotNil(t, r)
		for _, pol := range []*QuotaFairness{{}, {WaterFilling: true, Hierarchical: true, PerEntity: true}} {
			full, err := pol.allocate(context.Background(), p)
			require.NoError(t, err)
			red, err := pol.allocate(context.Background(), r.p)
			require.NoError(t, err)
			got := r.expand(p, red)
			require.NoError(t, got.Check(p, 1e-6))
			uf, ug := full.Usage(p), got.Usage(p)
			for e, u := range uf {
				assert.InDelta(t, u.Normalised, ug[e].Normalised, 1e-3*max(1, u.Normalised), "seed %d, %+v: %s", seed, *pol, e)
			}
		}
	}
}

// The guarantee's total binds. Capacities 4 V100s and a K80 make a job's
// proportional rate 0.8 r_v100 + 0.2 r_k80. A is guaranteed 2 V100s and
// the K80: on that slice its two identical jobs (10 steps/s on a V100, 1
// on the K80) run full time on the V100s, normalised rate 10/8.2 = 1.22
// each, and its K80-only job of weight 10 (normalised rate 5 on the K80)
// sets the level at 0.5; A's guaranteed total is 2 x 1.22 + 5 = 7.44. C's
// six V100-only jobs gain more per V100 (1.25), so maximising the total
// would push A's two jobs down to the level (a V100 half the time each),
// were the total counted for one member of their group only (6.22).
func TestReductionGuaranteedTotal(t *testing.T) {
	p := &Problem{Types: []topology.GPUType{"v100", "k80"}, Capacity: []int{4, 1},
		EntityQuotas: map[string]Quota{"A": {GuaranteedGPUs: map[topology.GPUType]float64{"v100": 2, "k80": 1}}}}
	for i := range 2 {
		p.Jobs = append(p.Jobs, Job{ID: i, ScaleFactor: 1, Throughput: []float64{10, 1}, Entity: "A"})
	}
	p.Jobs = append(p.Jobs, Job{ID: 2, ScaleFactor: 1, Weight: 10, Throughput: []float64{0, 1}, Entity: "A"})
	for i := range 6 {
		p.Jobs = append(p.Jobs, Job{ID: 10 + i, ScaleFactor: 1, Throughput: []float64{1, 0}, Entity: "C"})
	}
	require.NotNil(t, reduce(p))
	a := allocate(t, &QuotaFairness{}, p)
	assert.InDelta(t, 2*10/8.2+5, a.Usage(p)["A"].Normalised, 1e-4)
	assert.InDelta(t, 1, a.X[0][0], 1e-4, "A's jobs keep their V100s")
	assert.InDelta(t, 1, a.X[1][0], 1e-4)
}
