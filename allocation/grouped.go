package allocation

import (
	"context"
	"encoding/binary"
	"math"

	"github.com/gpusched/gpusched/allocation/lp"
)

// Space sharing over groups of identical jobs. When co-located rates come
// by class (ClassPairRates), jobs of one class with the same scale factor,
// weight and rates are interchangeable: the max-min LP over all pairs is
// invariant under permuting them, so averaging an optimal solution over
// those permutations gives an optimal solution in which every job of a
// group gets the same allocation. Such solutions are described exactly by
// a group-level LP:
//
//	x[g][k]      time of each job of group g alone on type k,
//	P[g][h][k]   total time pairs of a job of g and a job of h share type k,
//
//	per group g:  sum_k x[g][k] + sum_h,k c_gh P[g][h][k] <= 1,
//	per type k:   sum_g n_g sf_g x[g][k] + sum_{g<=h} sf P[g][h][k] <= n_k,
//	per group g:  t <= s_g (sum_k T_gk x[g][k] + sum_h,k c_gh T^gh_g,k P[g][h][k]),
//
// where c_gh = 1/n_g for h != g and 2/n_g for h == g (each job is in two
// of its group's pairs). Its size depends on the number of groups, not of
// jobs: Gavel's 26 job types give 1,131 variables whatever N is. A
// solution is then turned into pairs of jobs: between two groups by the
// north-west corner rule on equal shares (at most n_g + n_h - 1 pairs),
// within a group as a cycle of consecutive jobs. The result is optimal for
// the LP over all pairs, which the tests check against the full LP and
// against column generation.

// group is a set of interchangeable jobs.
type group struct {
	jobs  []int
	class int
	sf    int
}

// groupJobs partitions the jobs into groups of identical jobs; it returns
// nil when there are too many groups for the group LP to pay off.
// With cp nil (no space sharing) jobs are grouped by their data alone;
// key, if set, adds an Extension's key to the data.
func groupJobs(p *Problem, cp ClassPairRates, tput [][]float64, scale []float64, key func(m int) string) []group {
	index := map[string]int{}
	var groups []group
	var b []byte
	for m := range p.Jobs {
		j := &p.Jobs[m]
		class := 0
		if cp != nil {
			class = cp.Class(m)
		}
		// The key: class, scale factor, weight, scale and both rates per
		// type, as fixed-width binary (bit patterns, so equal means equal).
		b = binary.LittleEndian.AppendUint64(b[:0], uint64(class))
		b = binary.LittleEndian.AppendUint64(b, uint64(j.ScaleFactor))
		b = binary.LittleEndian.AppendUint64(b, math.Float64bits(j.weight()))
		b = binary.LittleEndian.AppendUint64(b, math.Float64bits(scale[m]))
		for k := range p.Types {
			b = binary.LittleEndian.AppendUint64(b, math.Float64bits(tput[m][k]))
			b = binary.LittleEndian.AppendUint64(b, math.Float64bits(j.Throughput[k]))
		}
		if key != nil {
			b = append(b, key(m)...)
		}
		g, ok := index[string(b)]
		if !ok {
			g = len(groups)
			index[string(b)] = g
			groups = append(groups, group{class: class, sf: j.ScaleFactor})
		}
		groups[g].jobs = append(groups[g].jobs, m)
	}
	if len(groups) > len(p.Jobs)/2+8 {
		return nil
	}
	return groups
}

type groupPair struct {
	g, h, k int
	ta, tb  float64 // rates of g's and h's job
	v       int     // LP variable of P[g][h][k]
}

func (pol *MaxMinFairness) allocateGrouped(ctx context.Context, p *Problem, tput [][]float64, cp ClassPairRates, groups []group) (*Allocation, error) {
	scale := normalisers(p, tput)
	real := p.matrix()
	nk := len(p.Types)
	m := lp.NewModel(lp.Maximize)
	nGroups := len(groups)
	// Without pairs a group has at most nk variables and a type at most a
	// variable per group: the rows are cut from blocks of that size (a
	// pair's entry beyond them moves a row out of its block). A level row
	// starts with t's entry.
	m.Grow(1+nGroups*nk, 2*nGroups+nk, 4*nGroups*nk+nGroups)
	t := m.AddVar(0, lp.Inf, 1)
	x := make([][]int, nGroups)
	timeIdx, timeVal := make([][]int, nGroups), make([][]float64, nGroups)
	levelIdx, levelVal := make([][]int, nGroups), make([][]float64, nGroups)
	capIdx, capVal := make([][]int, nk), make([][]float64, nk)
	ints := make([]int, nGroups*(4*nk+1))
	floats := make([]float64, nGroups*(3*nk+1))
	cut := func(s []int, n int) ([]int, []int) { return s[:0:n], s[n:] }
	cutf := func(s []float64, n int) ([]float64, []float64) { return s[:0:n], s[n:] }
	for g := range groups {
		x[g], ints = ints[:nk:nk], ints[nk:]
		timeIdx[g], ints = cut(ints, nk)
		timeVal[g], floats = cutf(floats, nk)
		levelIdx[g], ints = cut(ints, nk+1)
		levelVal[g], floats = cutf(floats, nk+1)
		levelIdx[g], levelVal[g] = append(levelIdx[g], t), append(levelVal[g], 1)
	}
	for k := range nk {
		capIdx[k], ints = cut(ints, nGroups)
		capVal[k], floats = cutf(floats, nGroups)
	}
	for g, gr := range groups {
		rep := gr.jobs[0]
		n := float64(len(gr.jobs))
		for k := range p.Types {
			x[g][k] = -1
			if !p.runnable(rep, k, real[rep]) {
				continue
			}
			v := m.AddVar(0, 1, 0)
			x[g][k] = v
			timeIdx[g], timeVal[g] = append(timeIdx[g], v), append(timeVal[g], 1)
			capIdx[k], capVal[k] = append(capIdx[k], v), append(capVal[k], n*float64(gr.sf))
			if tput[rep][k] != 0 {
				levelIdx[g], levelVal[g] = append(levelIdx[g], v), append(levelVal[g], -scale[rep]*tput[rep][k])
			}
		}
	}
	var pairs []groupPair
	for g := range groups {
		if cp == nil {
			break
		}
		for h := g; h < len(groups); h++ {
			gg, hh := &groups[g], &groups[h]
			if gg.sf != hh.sf || (g == h && len(gg.jobs) < 2) {
				continue
			}
			for k := range p.Types {
				if p.Capacity[k] < gg.sf {
					continue
				}
				ta, tb := cp.ClassRates(gg.class, hh.class, k)
				if !(ta+tb > 0) || ta < 0 || tb < 0 {
					continue
				}
				v := m.AddVar(0, lp.Inf, 0)
				pairs = append(pairs, groupPair{g, h, k, ta, tb, v})
				ng, nh := float64(len(gg.jobs)), float64(len(hh.jobs))
				capIdx[k], capVal[k] = append(capIdx[k], v), append(capVal[k], float64(gg.sf))
				if g == h {
					timeIdx[g], timeVal[g] = append(timeIdx[g], v), append(timeVal[g], 2/ng)
					levelIdx[g], levelVal[g] = append(levelIdx[g], v), append(levelVal[g], -scale[gg.jobs[0]]*(ta+tb)/ng)
					continue
				}
				timeIdx[g], timeVal[g] = append(timeIdx[g], v), append(timeVal[g], 1/ng)
				timeIdx[h], timeVal[h] = append(timeIdx[h], v), append(timeVal[h], 1/nh)
				levelIdx[g], levelVal[g] = append(levelIdx[g], v), append(levelVal[g], -scale[gg.jobs[0]]*ta/ng)
				levelIdx[h], levelVal[h] = append(levelIdx[h], v), append(levelVal[h], -scale[hh.jobs[0]]*tb/nh)
			}
		}
	}
	anyLevel := false
	for g := range groups {
		if len(timeIdx[g]) > 0 {
			m.AddRow(-lp.Inf, 1, timeIdx[g], timeVal[g])
		}
		if len(levelIdx[g]) > 1 && scale[groups[g].jobs[0]] != 0 {
			anyLevel = true
			m.AddRow(-lp.Inf, 0, levelIdx[g], levelVal[g])
		}
	}
	if !anyLevel {
		return newAllocation(p), nil
	}
	for k := range p.Types {
		if len(capIdx[k]) > 0 {
			m.AddRow(-lp.Inf, float64(p.Capacity[k]), capIdx[k], capVal[k])
		}
	}
	if pol.Extension != nil && cp == nil {
		units := make([][]int, len(groups))
		for g := range groups {
			units[g] = groups[g].jobs
		}
		if err := extend(pol.Extension, &Program{p: p, m: m, units: units, x: x, level: t, scale: scale, rates: tput}); err != nil {
			return nil, err
		}
	}
	s := lpSolver(pol.Solver, pol.Vertex)
	sol, err := solveLP(ctx, s, m)
	if err != nil {
		return nil, solveError(err)
	}
	level := sol.X[t]
	if cp == nil {
		return groupAllocation(p, groups, x, sol.X, level).fit(p), nil
	}
	// Second stage: among the allocations that keep the level, take one of
	// greatest total normalised throughput. Max-min alone is indifferent
	// to the jobs above the minimum, and the interior-point solution would
	// spread them over every optimal pair, slowing them for nothing.
	m.SetVarBounds(t, level*(1-1e-9), lp.Inf)
	m.SetObjective(t, 0)
	for g, gr := range groups {
		rep := gr.jobs[0]
		for k, v := range x[g] {
			if v >= 0 {
				m.SetObjective(v, float64(len(gr.jobs))*scale[rep]*tput[rep][k])
			}
		}
	}
	for _, gp := range pairs {
		sg, sh := scale[groups[gp.g].jobs[0]], scale[groups[gp.h].jobs[0]]
		m.SetObjective(gp.v, sg*gp.ta+sh*gp.tb)
	}
	if sol2, err := solveLP(ctx, s, m); err == nil {
		sol = sol2
	}
	a := groupAllocation(p, groups, x, sol.X, level)
	rp := newPairRealiser(p)
	for _, gp := range pairs {
		mass := sol.X[gp.v]
		if mass <= 1e-9 {
			continue
		}
		gj, hj := groups[gp.g].jobs, groups[gp.h].jobs
		if gp.g == gp.h {
			rp.cycle(gj, gp.k, mass)
		} else {
			rp.northWest(gj, hj, gp.k, mass)
		}
	}
	a.Pairs = rp.pairs
	return a.fit(p), nil
}

// pairRealiser turns pair masses into pairs of jobs.
type pairRealiser struct {
	p     *Problem
	pairs []Pair
	index map[[2]int]int
}

func newPairRealiser(p *Problem) *pairRealiser {
	return &pairRealiser{p: p, index: map[[2]int]int{}}
}

func (r *pairRealiser) add(a, b, k int, x float64) {
	if x <= 0 {
		return
	}
	if a > b {
		// Keep A as the job whose rate Rates(A, B, k) returns first.
		a, b = b, a
	}
	key := [2]int{a, b}
	i, ok := r.index[key]
	if !ok {
		i = len(r.pairs)
		r.index[key] = i
		r.pairs = append(r.pairs, Pair{A: a, B: b, X: make([]float64, len(r.p.Types))})
	}
	r.pairs[i].X[k] = clip(r.pairs[i].X[k] + x)
}

// cycle shares mass among the jobs of one group: job i pairs with job
// i+1 (cyclically) for mass/n each, so every job shares 2 mass/n.
func (r *pairRealiser) cycle(jobs []int, k int, mass float64) {
	n := len(jobs)
	if n == 2 {
		r.add(jobs[0], jobs[1], k, mass)
		return
	}
	for i := range n {
		r.add(jobs[i], jobs[(i+1)%n], k, mass/float64(n))
	}
}

// northWest shares mass between two groups so that every job of g gets
// mass/n_g and every job of h mass/n_h, with at most n_g + n_h - 1 pairs.
func (r *pairRealiser) northWest(g, h []int, k int, mass float64) {
	ra, rb := mass/float64(len(g)), mass/float64(len(h))
	leftA, leftB := ra, rb
	for i, j := 0, 0; i < len(g) && j < len(h); {
		x := min(leftA, leftB)
		r.add(g[i], h[j], k, x)
		// x is exactly one of the two, which drops to exactly 0.
		if leftA -= x; leftA == 0 {
			i++
			leftA = ra
		}
		if leftB -= x; leftB == 0 {
			j++
			leftB = rb
		}
	}
}

// groupAllocation gives every job its group's time fractions.
func groupAllocation(p *Problem, groups []group, x [][]int, sol []float64, level float64) *Allocation {
	a := newAllocation(p)
	a.Objective = level
	for g, gr := range groups {
		for k, v := range x[g] {
			if v >= 0 {
				for _, j := range gr.jobs {
					a.X[j][k] = clip(sol[v])
				}
			}
		}
	}
	return a
}
