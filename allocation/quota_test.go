package allocation

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"testing"

	"github.com/gpusched/gpusched/allocation/lp"
	"github.com/gpusched/gpusched/topology"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// quotaPolicies are the two forms of the policy.
func quotaPolicies() []*QuotaFairness {
	return []*QuotaFairness{{}, {WaterFilling: true}}
}

// oneType is a cluster of n GPUs of one type, with jobs of one GPU each:
// a job's normalised rate is its time share X (T^prop = T), so hand
// computation is in GPUs.
func oneType(n int, jobs map[string]int) *Problem {
	p := &Problem{Types: []topology.GPUType{"a"}, Capacity: []int{n}}
	id := 0
	for _, e := range []string{"A", "B", "C"} {
		for range jobs[e] {
			p.Jobs = append(p.Jobs, Job{ID: id, ScaleFactor: 1, Throughput: []float64{3}, Entity: e})
			id++
		}
	}
	return p
}

// usage returns the entity's usage, zero if it has no jobs.
func usage(p *Problem, a *Allocation, e string) EntityUsage {
	u, ok := a.Usage(p)[e]
	if !ok {
		u.GPUs = make([]float64, len(p.Types))
	}
	return u
}

// Lending and reclaim on 4 GPUs, A guaranteed half of them, B nothing.
// (1) A has no jobs: B's 4 jobs get a GPU each (A's half is lent).
// (2) A's one job arrives: its slice is min(2, its demand 1) = 1 GPU, on
// which it alone gets level 1 (L_A = R_A = 1): it runs full time and B's
// jobs share the other 3 GPUs, 0.75 each (plain max-min gives all five
// 0.8, A's job less than its slice).
// (3) A has a 2-GPU job and a 1-GPU job: on its 2-GPU slice max-min gives
// both rate 1 (2 x2 = x1 = 1 with 2 x2 + x1 = 2), R_A = 2; over the
// cluster max-min would give all six jobs 2/3, so the floors bind: A's
// jobs keep rates 1 and 1 (x = 0.5 and 1), B's 4 share the other 2 GPUs,
// 0.5 each, the level.
// (4) A and B with 4 jobs each: max-min gives 0.5 to all, A's guarantee
// (0.5 each, 2 in total) exactly.
func TestQuotaLendAndReclaim(t *testing.T) {
	quotas := map[string]Quota{"A": {GuaranteedShare: 0.5}}
	for _, pol := range quotaPolicies() {
		p := oneType(4, map[string]int{"B": 4})
		p.EntityQuotas = quotas
		a := allocate(t, pol, p)
		assertX(t, [][]float64{{1}, {1}, {1}, {1}}, a.X)
		assert.Empty(t, a.Note)

		p = oneType(4, map[string]int{"A": 1, "B": 4})
		p.EntityQuotas = quotas
		a = allocate(t, pol, p)
		assertX(t, [][]float64{{1}, {0.75}, {0.75}, {0.75}, {0.75}}, a.X)
		assert.InDelta(t, 0.75, a.Objective, 1e-5)
		mm := allocate(t, &MaxMinFairness{}, p)
		assert.InDelta(t, 0.8, mm.X[0][0], 1e-6)

		p = oneType(4, map[string]int{"A": 2, "B": 4})
		p.Jobs[0].ScaleFactor = 2
		p.EntityQuotas = quotas
		a = allocate(t, pol, p)
		// The floors hold within the guarantee rows' relative slack
		// (quotaSlack), 1e-6 of rate 1.
		assertXWithin(t, [][]float64{{0.5}, {1}, {0.5}, {0.5}, {0.5}, {0.5}}, a.X, 2e-6)
		assert.InDelta(t, 0.5, a.Objective, 1e-5)
		assert.InDelta(t, 2.0/3, allocate(t, &MaxMinFairness{}, p).Objective, 1e-6)

		p = oneType(4, map[string]int{"A": 4, "B": 4})
		p.EntityQuotas = quotas
		a = allocate(t, pol, p)
		for m := range p.Jobs {
			assert.InDelta(t, 0.5, a.X[m][0], 1e-5)
		}
	}
}

// The guarantee is in normalised throughput (Gavel's), over two types: one
// K80 and one V100; A's job a runs 1 and 4 steps/s on them, B's jobs b1
// and b2 1 and 2. T^prop = 2.5 for a and 1.5 for b, so r_a = 0.4 (p + 4q)
// and r_b = (2/3)(u + 2v) for a's times (p, q) and each b's (u, v).
//
// A is guaranteed half of each type: alone on 0.5 K80 and 0.5 V100 its job
// reaches r_a = 0.4 (0.5 + 2) = 1 (L_A = R_A = 1), half the cluster's 2.
// Plain max-min gives a less: a has the comparative advantage on the V100
// (4x against 2x), so p = 0, u = 1/2, v = (1 - q)/2 and 1.6 q = 1 - 2q/3:
// q = 15/34, level 12/17 = 0.706. With the guarantee r_a >= 1 forces
// q = 0.625 (still p = 0: a V100 second costs B less than 2.5 K80
// seconds), v = 0.1875 and the level r_b = (2/3)(0.5 + 0.375) = 0.5833.
// Alone, either tenant takes everything its jobs can use: a the V100
// (1.6), b1 and b2 half of each (1 each).
func TestQuotaNormalisedShareByHand(t *testing.T) {
	p := &Problem{Types: []topology.GPUType{topology.K80, topology.V100}, Capacity: []int{1, 1},
		Jobs: []Job{
			{ID: 1, ScaleFactor: 1, Throughput: []float64{1, 4}, Entity: "A"},
			{ID: 2, ScaleFactor: 1, Throughput: []float64{1, 2}, Entity: "B"},
			{ID: 3, ScaleFactor: 1, Throughput: []float64{1, 2}, Entity: "B"},
		},
		EntityQuotas: map[string]Quota{"A": {GuaranteedShare: 0.5}},
	}
	mm := allocate(t, &MaxMinFairness{}, p)
	assert.InDelta(t, 12.0/17, mm.Objective, 1e-6)
	assert.InDelta(t, 15.0/34, mm.X[0][1], 1e-6)
	for _, pol := range quotaPolicies() {
		a := allocate(t, pol, p)
		assertX(t, [][]float64{{0, 0.625}, {0.5, 0.1875}, {0.5, 0.1875}}, a.X)
		assert.InDelta(t, 0.5+1.0/12, a.Objective, 1e-5)
		assert.InDelta(t, 1, usage(p, a, "A").Normalised, 1e-5)

		alone := *p
		alone.Jobs = p.Jobs[:1]
		assertX(t, [][]float64{{0, 1}}, allocate(t, pol, &alone).X)
		alone.Jobs = p.Jobs[1:]
		assertX(t, [][]float64{{0.5, 0.5}, {0.5, 0.5}}, allocate(t, pol, &alone).X)
	}
}

// A per-type guarantee is the throughput of those GPUs, not the GPUs: on
// 2 GPUs of type a and 2 of b, A (guaranteed both a GPUs) has two jobs
// that run 1 step/s on either type, B two jobs that run 4 on a and 1 on b
// (T^prop 2.5, r = 0.4 (4 x_a + x_b)). On its slice A's jobs reach rate 1
// each (L_A = 1, R_A = 2), which they reach as well on b; B's jobs take
// a, at 1.6 each, which the total stage prefers to any other split of
// level 1. A limit, in contrast, is GPU-time: A capped at 1 GPU of b must
// then take at least 1 of a for its second job.
func TestQuotaPerTypeGuaranteeIsThroughput(t *testing.T) {
	p := &Problem{Types: []topology.GPUType{"a", "b"}, Capacity: []int{2, 2},
		Jobs: []Job{
			{ID: 1, ScaleFactor: 1, Throughput: []float64{1, 1}, Entity: "A"},
			{ID: 2, ScaleFactor: 1, Throughput: []float64{1, 1}, Entity: "A"},
			{ID: 3, ScaleFactor: 1, Throughput: []float64{4, 1}, Entity: "B"},
			{ID: 4, ScaleFactor: 1, Throughput: []float64{4, 1}, Entity: "B"},
		},
		EntityQuotas: map[string]Quota{"A": {GuaranteedGPUs: map[topology.GPUType]float64{"a": 2}}},
	}
	a := allocate(t, &QuotaFairness{}, p)
	assertX(t, [][]float64{{0, 1}, {0, 1}, {1, 0}, {1, 0}}, a.X)
	assert.InDelta(t, 1, a.Objective, 1e-5)

	p.EntityQuotas = map[string]Quota{"A": {GuaranteedGPUs: map[topology.GPUType]float64{"a": 2}, MaxGPUs: map[topology.GPUType]float64{"b": 1}}}
	for _, pol := range quotaPolicies() {
		a = allocate(t, pol, p)
		u := usage(p, a, "A")
		assert.LessOrEqual(t, u.GPUs[1], 1.0)
		assert.InDelta(t, 1, u.GPUs[0], 1e-5)
		assert.InDelta(t, 2, u.Normalised, 1e-5)
	}
}

// Limits: on 4 GPUs, A's one job and B's four. B capped at a quarter of
// the cluster's normalised throughput gets 1 GPU (0.25 per job), at 1.5
// GPUs 0.375 per job; A's job takes a whole GPU and the rest stays idle,
// as a cap means. Capped off a type, an entity runs on the others only.
func TestQuotaLimits(t *testing.T) {
	for _, pol := range quotaPolicies() {
		p := oneType(4, map[string]int{"A": 1, "B": 4})
		p.EntityQuotas = map[string]Quota{"B": {MaxShare: 0.25}}
		a := allocate(t, pol, p)
		assertX(t, [][]float64{{1}, {0.25}, {0.25}, {0.25}, {0.25}}, a.X)
		assert.LessOrEqual(t, usage(p, a, "B").Normalised, 1.0)

		p.EntityQuotas = map[string]Quota{"B": {MaxGPUs: map[topology.GPUType]float64{"a": 1.5}}}
		a = allocate(t, pol, p)
		assertX(t, [][]float64{{1}, {0.375}, {0.375}, {0.375}, {0.375}}, a.X)
		assert.LessOrEqual(t, usage(p, a, "B").GPUs[0], 1.5)

		q := &Problem{Types: []topology.GPUType{"a", "b"}, Capacity: []int{2, 2}, EntityQuotas: map[string]Quota{"B": {MaxGPUs: map[topology.GPUType]float64{"a": 0}}}}
		for i := range 4 {
			q.Jobs = append(q.Jobs, Job{ID: i, ScaleFactor: 1, Throughput: []float64{1, 1}, Entity: "B"})
		}
		a = allocate(t, pol, q)
		for m := range q.Jobs {
			assert.Zero(t, a.X[m][0])
			assert.InDelta(t, 0.5, a.X[m][1], 1e-5)
		}
	}
}

// Over-committed guarantees: A and B each guaranteed three quarters of 4
// GPUs, both with 4 jobs; the slices (3 + 3 of 4) are scaled by 2/3 to 2
// each, and the Note says so. An entity without jobs does not count: with
// C idle and guaranteed as much, A keeps its 3 GPUs against B's none.
func TestQuotaOverCommitted(t *testing.T) {
	for _, pol := range quotaPolicies() {
		p := oneType(4, map[string]int{"A": 4, "B": 4})
		p.EntityQuotas = map[string]Quota{"A": {GuaranteedShare: 0.75}, "B": {GuaranteedShare: 0.75}}
		a := allocate(t, pol, p)
		for m := range p.Jobs {
			assert.InDelta(t, 0.5, a.X[m][0], 1e-5)
		}
		assert.Contains(t, a.Note, "guarantees over-commit a (6 of 4 GPUs for the entities with jobs): scaled by 0.666667")

		p.EntityQuotas = map[string]Quota{"A": {GuaranteedShare: 0.75}, "C": {GuaranteedShare: 0.75}}
		a = allocate(t, pol, p)
		assert.Empty(t, a.Note)
		assert.InDelta(t, 3, usage(p, a, "A").GPUs[0], 1e-5)
		assert.InDelta(t, 1, usage(p, a, "B").GPUs[0], 1e-5)
	}
}

// countingSolver fails every solve after the first ok ones.
type countingSolver struct {
	ok    int64
	calls atomic.Int64
}

func (s *countingSolver) Solve(ctx context.Context, m *lp.Model) (*lp.Solution, error) {
	if s.calls.Add(1) > s.ok {
		return nil, lp.StatusError(lp.Failed, errors.New("numerical trouble"))
	}
	return (&lp.InteriorPoint{}).Solve(ctx, m)
}

// A solver that fails on the allocation program leaves each entity its
// slice's own allocation (its guarantee), said in the Note; one that fails
// on a slice drops that guarantee for the round, also said; a cancelled
// context is an error.
func TestQuotaSolverFailures(t *testing.T) {
	p := oneType(4, map[string]int{"A": 1, "B": 4})
	p.EntityQuotas = map[string]Quota{"A": {GuaranteedShare: 0.5}}
	a := allocate(t, &QuotaFairness{Solver: &countingSolver{ok: 2}}, p)
	assertX(t, [][]float64{{1}, {0}, {0}, {0}, {0}}, a.X)
	assert.Contains(t, a.Note, "the quota program failed")

	a = allocate(t, &QuotaFairness{Solver: &countingSolver{ok: 0}}, p)
	assert.Contains(t, a.Note, `entity "A": its guarantee could not be computed`)
	assert.Contains(t, a.Note, "the quota program failed")

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := (&QuotaFairness{}).Allocate(ctx, p)
	require.ErrorIs(t, err, context.Canceled)
}

// The maps of a Quota and the entities are bounded.
func TestQuotaBounds(t *testing.T) {
	p := twoByTwo()
	big := map[topology.GPUType]float64{}
	for i := range MaxQuotaTypes + 1 {
		big[topology.GPUType(fmt.Sprint(i))] = 1
	}
	p.EntityQuotas = map[string]Quota{"x": {MaxGPUs: big}}
	require.ErrorIs(t, p.Validate(), ErrInvalidProblem)
	assert.ErrorContains(t, p.Validate(), `entity "x": quota: maximum GPUs name 1025 types, more than 1024`)
	p.EntityQuotas = map[string]Quota{}
	for i := range MaxEntityQuotas + 1 {
		p.EntityQuotas[fmt.Sprint(i)] = Quota{}
	}
	assert.ErrorContains(t, p.Validate(), "65537 entity quotas, more than 65536")
}

// normRates returns each job's normalised rate r_m = sf_m rate_m /
// T^prop_m under a.
func normRates(p *Problem, a *Allocation) []float64 {
	prop := proportionalRates(p, p.matrix())
	r := rates(a, p.matrix())
	for m := range r {
		if prop[m] > 0 {
			r[m] *= float64(p.Jobs[m].ScaleFactor) / prop[m]
		}
	}
	return r
}

// sliceProblem is entity e's jobs alone on GPUs slice, weighted so that
// Gavel's normalisation on the slice (its own T^prop) gives the levels in
// the units of the whole problem p.
func sliceProblem(p *Problem, e string, slice []int) *Problem {
	q := &Problem{Types: p.Types, Capacity: slice}
	prop := proportionalRates(p, p.matrix())
	for m := range p.Jobs {
		if p.Jobs[m].Entity == e && prop[m] > 0 {
			q.Jobs = append(q.Jobs, p.Jobs[m])
		}
	}
	qprop := proportionalRates(q, q.matrix())
	for i := range q.Jobs {
		m := 0
		for p.Jobs[m].ID != q.Jobs[i].ID {
			m++
		}
		if qprop[i] > 0 {
			q.Jobs[i].Weight = p.Jobs[m].weight() * prop[m] / qprop[i]
		}
	}
	return q
}

// The invariants over random instances, for both forms of the policy:
// answers fit; limits hold; every entity with jobs gets at least its
// guarantee, checked against the policies run on its slice alone (each
// job at least max-min's level there, the entity at least water filling's
// total there); no GPU a job could use is left idle unless its entity is
// at a limit (idle guarantees are lent); and without quotas the level is
// max-min's.
func TestQuotaProperties(t *testing.T) {
	rng := rand.New(rand.NewPCG(26, 1))
	entities := []string{"e0", "e1", "e2", "e3", "free"}
	for it := range 40 {
		nk := 1 + rng.IntN(3)
		p := &Problem{EntityQuotas: map[string]Quota{}}
		for k := range nk {
			p.Types = append(p.Types, topology.GPUType(string(rune('a'+k))))
			p.Capacity = append(p.Capacity, 2*rng.IntN(5))
		}
		// Guarantees in GPUs (0, 2 or 4 of a type) within the capacity,
		// so that each slice is a problem of its own; limits above them.
		left := append([]int(nil), p.Capacity...)
		slices := map[string][]int{}
		for _, e := range entities[:4] {
			q := Quota{GuaranteedGPUs: map[topology.GPUType]float64{}}
			slices[e] = make([]int, nk)
			for k, ty := range p.Types {
				g := min(2*rng.IntN(3), left[k])
				left[k] -= g
				slices[e][k] = g
				q.GuaranteedGPUs[ty] = float64(g)
				if rng.IntN(4) == 0 {
					if q.MaxGPUs == nil {
						q.MaxGPUs = map[topology.GPUType]float64{}
					}
					q.MaxGPUs[ty] = float64(g) + float64(rng.IntN(3))
				}
			}
			if rng.IntN(4) == 0 {
				q.MaxShare = 0.5 + 0.5*rng.Float64()
				// A share cap may sit below what the slice gives: then
				// the slice's guarantee is computed under it.
			}
			p.EntityQuotas[e] = q
		}
		id := 0
		for _, e := range entities {
			n := rng.IntN(6)
			if rng.IntN(4) == 0 {
				n = 0 // an idle entity
			}
			for range n {
				j := Job{ID: id, ScaleFactor: 1 + rng.IntN(2), Weight: float64(1 + rng.IntN(3)), Entity: e}
				for range nk {
					v := 0.5 + rng.Float64()*9.5
					if rng.IntN(5) == 0 {
						v = 0
					}
					j.Throughput = append(j.Throughput, v)
				}
				p.Jobs = append(p.Jobs, j)
				id++
			}
		}
		for _, pol := range quotaPolicies() {
			name := fmt.Sprintf("instance %d, water filling %v", it, pol.WaterFilling)
			a := allocate(t, pol, p)
			use := map[string]EntityUsage{}
			for _, e := range entities {
				use[e] = usage(p, a, e)
			}
			for _, e := range entities[:4] {
				q := p.EntityQuotas[e]
				for k, ty := range p.Types {
					if c, ok := q.MaxGPUs[ty]; ok {
						assert.LessOrEqual(t, use[e].GPUs[k], c, "%s: %s on %s", name, e, ty)
					}
				}
				if q.MaxShare > 0 {
					assert.LessOrEqual(t, use[e].Normalised, q.MaxShare*float64(sum(p.Capacity))*(1+1e-12), "%s: %s", name, e)
				}
				sp := sliceProblem(p, e, slices[e])
				if len(sp.Jobs) == 0 || q.MaxShare > 0 {
					continue
				}
				mm := allocate(t, &MaxMinFairness{}, sp)
				wf := allocate(t, &WaterFilling{}, sp)
				r := normRates(p, a)
				for i := range sp.Jobs {
					m := sp.Jobs[i].ID
					if runsOn(sp, i) {
						assert.GreaterOrEqual(t, r[m]/p.Jobs[m].weight(), mm.Objective*(1-1e-5)-1e-9, "%s: job %d of %s", name, m, e)
					}
				}
				total := 0.0
				wr := rates(wf, sp.matrix())
				prop := proportionalRates(p, p.matrix())
				for i := range sp.Jobs {
					m := sp.Jobs[i].ID
					total += float64(p.Jobs[m].ScaleFactor) * wr[i] / prop[m]
				}
				assert.GreaterOrEqual(t, use[e].Normalised, total*(1-1e-5)-1e-9, "%s: total of %s", name, e)
			}
			workConserving(t, p, a, name)
		}
		p.EntityQuotas = nil
		mm := allocate(t, &MaxMinFairness{}, p)
		assert.InDelta(t, mm.Objective, allocate(t, &QuotaFairness{}, p).Objective, 1e-6*max(1, mm.Objective), "instance %d", it)
	}
}

// runsOn reports whether job i of q has a type it can run on.
func runsOn(q *Problem, i int) bool {
	for k := range q.Types {
		if q.runnable(i, k, q.Jobs[i].Throughput) {
			return true
		}
	}
	return false
}

func sum(v []int) int {
	s := 0
	for _, x := range v {
		s += x
	}
	return s
}

// workConserving checks that a GPU a job could use is idle only when the
// job runs all the time or its entity is at a limit.
func workConserving(t *testing.T, p *Problem, a *Allocation, name string) {
	t.Helper()
	n := float64(sum(p.Capacity))
	for k := range p.Types {
		used := 0.0
		for m := range p.Jobs {
			used += float64(p.Jobs[m].ScaleFactor) * a.X[m][k]
		}
		if used >= float64(p.Capacity[k])-1e-4 {
			continue
		}
		for m := range p.Jobs {
			if !p.runnable(m, k, p.Jobs[m].Throughput) {
				continue
			}
			row := 0.0
			for _, x := range a.X[m] {
				row += x
			}
			e := p.Jobs[m].Entity
			q := p.EntityQuotas[e]
			u := usage(p, a, e)
			atCap := false
			if c, ok := q.MaxGPUs[p.Types[k]]; ok && u.GPUs[k] >= c-1e-4 {
				atCap = true
			}
			if q.MaxShare > 0 && u.Normalised >= q.MaxShare*n*(1-1e-5) {
				atCap = true
			}
			assert.True(t, row >= 1-1e-4 || atCap, "%s: %s has %.6f of %d GPUs used but job %d (%s) runs %.6f of the time", name, p.Types[k], used, p.Capacity[k], p.Jobs[m].ID, e, row)
		}
	}
}

// A large random instance stays feasible and meets every guarantee: 400
// jobs of 8 tenants on three types, the guarantees over-committed.
func TestQuotaLarge(t *testing.T) {
	p := quotaBenchProblem(400, 8, 3)
	for _, pol := range quotaPolicies()[:1] {
		a := allocate(t, pol, p)
		assert.Contains(t, a.Note, "over-commit")
		workConserving(t, p, a, "large")
	}
}

// randomTenants spreads p's jobs over tenants e0 to e3 and gives them
// random quotas: shares and GPUs that may over-commit the cluster, limits
// at or above the guarantees, an idle tenant now and then.
func randomTenants(rng *rand.Rand, p *Problem) {
	p.EntityQuotas = map[string]Quota{}
	for i := range 4 {
		q := Quota{GuaranteedShare: []float64{0, 0.1, 0.25, 0.5}[rng.IntN(4)]}
		for k, ty := range p.Types {
			if rng.IntN(3) == 0 {
				if q.GuaranteedGPUs == nil {
					q.GuaranteedGPUs = map[topology.GPUType]float64{}
				}
				q.GuaranteedGPUs[ty] = float64(rng.IntN(p.Capacity[k] + 1))
			}
			if rng.IntN(4) == 0 {
				if q.MaxGPUs == nil {
					q.MaxGPUs = map[topology.GPUType]float64{}
				}
				q.MaxGPUs[ty] = q.GuaranteedGPUs[ty] + float64(rng.IntN(4))
			}
		}
		if rng.IntN(4) == 0 {
			q.MaxShare = q.GuaranteedShare + (1-q.GuaranteedShare)*rng.Float64()
		}
		p.EntityQuotas[fmt.Sprintf("e%d", i)] = q
	}
	idle := rng.IntN(5) // e4 is no tenant: e0 to e3 may all have jobs
	for m := range p.Jobs {
		e := rng.IntN(4)
		if e == idle {
			e = (e + 1) % 4
		}
		p.Jobs[m].Entity = fmt.Sprintf("e%d", e)
	}
}

// On random tenants with quotas of every kind, over-committed or not, the
// answer fits, the limits hold, each entity with a slice gets its
// guarantee (the optima of its slice's programs) and no usable GPU is
// left idle.
func TestQuotaRandomTenants(t *testing.T) {
	rng := rand.New(rand.NewPCG(26, 3))
	for it := range 30 {
		p := randomProblem(rng, 2+rng.IntN(25), 1+rng.IntN(3))
		randomTenants(rng, p)
		pl := newQuotaPlan(p)
		require.NoError(t, pl.guarantee(context.Background(), &lp.InteriorPoint{}))
		n := float64(sum(p.Capacity))
		for _, pol := range quotaPolicies() {
			name := fmt.Sprintf("instance %d, water filling %v", it, pol.WaterFilling)
			a := allocate(t, pol, p)
			r := normRates(p, a)
			for _, qe := range pl.ents {
				u := usage(p, a, qe.name)
				q := p.EntityQuotas[qe.name]
				for k, ty := range p.Types {
					if c, ok := q.MaxGPUs[ty]; ok {
						assert.LessOrEqual(t, u.GPUs[k], c, "%s: %s on %s", name, qe.name, ty)
					}
				}
				if q.MaxShare > 0 {
					assert.LessOrEqual(t, u.Normalised, q.MaxShare*n, "%s: %s", name, qe.name)
				}
				for _, m := range qe.floor {
					assert.GreaterOrEqual(t, r[m], qe.level*p.Jobs[m].weight()*(1-2e-6)-1e-9, "%s: job %d of %s", name, p.Jobs[m].ID, qe.name)
				}
				assert.GreaterOrEqual(t, u.Normalised, qe.total*(1-2e-6)-1e-9, "%s: %s", name, qe.name)
				if qe.slice != nil {
					for k, c := range p.Capacity {
						assert.LessOrEqual(t, qe.slice[k], float64(c), "%s: %s's slice", name, qe.name)
					}
				}
			}
			workConserving(t, p, a, name)
		}
	}
}
