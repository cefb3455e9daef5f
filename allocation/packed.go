package allocation

import (
	"cmp"
	"context"
	"fmt"
	"slices"

	"github.com/gpusched/gpusched/allocation/lp"
)

// Space sharing (Gavel's MaxMinFairnessPolicyWithPacking; Narayanan et
// al., OSDI 2020, section 3.1): besides X[m][k], a pair of jobs of equal
// scale factor may share GPUs of type k for a fraction of time X[ab][k],
// each then running at its co-located rate. Every pair is a column of the
// LP, O(N^2 K) of them. Rather than writing them all down, as Gavel does
// with cvxpy, they are generated as needed (column generation; Dantzig and
// Wolfe 1960, Gilmore and Gomory 1961): solve with the columns so far, price
// every pair with the duals (alpha_m of job m's time row, beta_k of type
// k's capacity row, gamma_m of job m's level row),
//
//	d(a, b, k) = gamma_a s_a T^ab_a,k + gamma_b s_b T^ab_b,k - alpha_a - alpha_b - sf beta_k,
//
// add the pairs with d > 0, and stop when none is left: the LP over all
// pairs is then solved exactly. With ClassPairRates the pricing separates
// over the two jobs, so all pairs are priced in O(N K C) for C classes.

// pairColumn is one generated column: jobs a < b sharing type k.
type pairColumn struct {
	a, b, k int
	ta, tb  float64
}

// packedProgram is the max-min LP with singles and the pair columns so far.
type packedProgram struct {
	m                *lp.Model
	single           [][]int // variable of X[m][k], -1
	pairVar          []int
	t                int
	jobRow, epiRow   []int // -1 where absent
	capRow           []int
	jobDual, epiDual []float64
	capDual          []float64
	objective        float64
	singleX, pairX   []float64
	scale            []float64
	tput, real       [][]float64
	p                *Problem
	columns          []pairColumn
	known            map[[3]int]bool
	rounds           int
}

const (
	maxPricingRounds = 200
	maxPairsPerGroup = 256
	pricingTolerance = 1e-7
)

func (pol *MaxMinFairness) allocatePacked(ctx context.Context, p *Problem, tput [][]float64) (*Allocation, error) {
	pp := &packedProgram{p: p, tput: tput, real: p.matrix(), scale: normalisers(p, tput), known: map[[3]int]bool{}}
	solver := lpSolver(pol.Solver, pol.Vertex)
	for pp.rounds = 1; ; pp.rounds++ {
		if err := pp.solve(ctx, solver); err != nil {
			return nil, err
		}
		added := pp.price()
		if added == 0 {
			break
		}
		if pp.rounds == maxPricingRounds {
			a := pp.allocation()
			a.Note = fmt.Sprintf("space sharing: stopped after %d pricing rounds with %d pair columns; the allocation is feasible but may not be optimal", pp.rounds, len(pp.columns))
			return a, nil
		}
	}
	return pp.allocation(), nil
}

// solve builds and solves the LP over the singles and the current pairs.
func (pp *packedProgram) solve(ctx context.Context, s lp.Solver) error {
	p := pp.p
	n, nk := len(p.Jobs), len(p.Types)
	pp.m = lp.NewModel(lp.Maximize)
	type entries struct {
		idx []int
		val []float64
	}
	jobRows := make([]entries, n)
	epiRows := make([]entries, n)
	capRows := make([]entries, nk)
	pp.single = make([][]int, n)
	pp.t = pp.m.AddVar(0, lp.Inf, 1)
	for m := range p.Jobs {
		pp.single[m] = make([]int, nk)
		sf := float64(p.Jobs[m].ScaleFactor)
		for k := range p.Types {
			pp.single[m][k] = -1
			if !p.runnable(m, k, pp.real[m]) {
				continue
			}
			v := pp.m.AddVar(0, 1, 0)
			pp.single[m][k] = v
			jobRows[m].idx, jobRows[m].val = append(jobRows[m].idx, v), append(jobRows[m].val, 1)
			capRows[k].idx, capRows[k].val = append(capRows[k].idx, v), append(capRows[k].val, sf)
			if pp.tput[m][k] != 0 && pp.scale[m] != 0 {
				epiRows[m].idx, epiRows[m].val = append(epiRows[m].idx, v), append(epiRows[m].val, -pp.scale[m]*pp.tput[m][k])
			}
		}
	}
	pp.pairVar = make([]int, len(pp.columns))
	for c, col := range pp.columns {
		v := pp.m.AddVar(0, 1, 0)
		pp.pairVar[c] = v
		sf := float64(p.Jobs[col.a].ScaleFactor)
		for _, j := range []struct {
			m int
			t float64
		}{{col.a, col.ta}, {col.b, col.tb}} {
			jobRows[j.m].idx, jobRows[j.m].val = append(jobRows[j.m].idx, v), append(jobRows[j.m].val, 1)
			if j.t != 0 && pp.scale[j.m] != 0 {
				epiRows[j.m].idx, epiRows[j.m].val = append(epiRows[j.m].idx, v), append(epiRows[j.m].val, -pp.scale[j.m]*j.t)
			}
		}
		capRows[col.k].idx, capRows[col.k].val = append(capRows[col.k].idx, v), append(capRows[col.k].val, sf)
	}
	pp.jobRow, pp.epiRow, pp.capRow = make([]int, n), make([]int, n), make([]int, nk)
	anyLevel := false
	for m := range p.Jobs {
		pp.jobRow[m], pp.epiRow[m] = -1, -1
		if len(jobRows[m].idx) > 1 {
			pp.jobRow[m] = pp.m.AddRow(-lp.Inf, 1, jobRows[m].idx, jobRows[m].val)
		}
		if len(epiRows[m].idx) > 0 {
			anyLevel = true
			pp.epiRow[m] = pp.m.AddRow(-lp.Inf, 0, append([]int{pp.t}, epiRows[m].idx...), append([]float64{1}, epiRows[m].val...))
		}
	}
	if !anyLevel {
		pp.m.SetVarBounds(pp.t, 0, 0)
	}
	for k := range p.Types {
		pp.capRow[k] = -1
		if len(capRows[k].idx) > 0 {
			pp.capRow[k] = pp.m.AddRow(-lp.Inf, float64(p.Capacity[k]), capRows[k].idx, capRows[k].val)
		}
	}
	sol, err := solveLP(ctx, s, pp.m)
	if err != nil {
		return solveError(err)
	}
	dual := func(r int) float64 {
		if r < 0 {
			return 0
		}
		return sol.Duals[r]
	}
	pp.jobDual, pp.epiDual, pp.capDual = make([]float64, n), make([]float64, n), make([]float64, nk)
	for m := range p.Jobs {
		pp.jobDual[m], pp.epiDual[m] = dual(pp.jobRow[m]), dual(pp.epiRow[m])
	}
	for k := range p.Types {
		pp.capDual[k] = dual(pp.capRow[k])
		if pp.capRow[k] < 0 {
			// No column uses the type yet: its capacity is free.
			pp.capDual[k] = 0
		}
	}
	pp.objective = sol.X[pp.t]
	pp.singleX, pp.pairX = sol.X, sol.X
	return nil
}

// value is the part of a pair column's reduced cost that belongs to job m
// running at rate t: gamma_m s_m t - alpha_m.
func (pp *packedProgram) value(m int, t float64) float64 {
	return pp.epiDual[m]*pp.scale[m]*t - pp.jobDual[m]
}

// price adds the pair columns with positive reduced cost and returns how
// many it added.
func (pp *packedProgram) price() int {
	if cp, ok := pp.p.Pairs.(ClassPairRates); ok {
		return pp.priceByClass(cp)
	}
	return pp.priceAll()
}

func (pp *packedProgram) add(a, b, k int, ta, tb float64) bool {
	if a > b {
		a, b, ta, tb = b, a, tb, ta
	}
	key := [3]int{a, b, k}
	if pp.known[key] {
		return false
	}
	pp.known[key] = true
	pp.columns = append(pp.columns, pairColumn{a, b, k, ta, tb})
	return true
}

// shareable reports whether jobs a and b may share type k at rates ta, tb.
func (pp *packedProgram) shareable(a, b, k int, ta, tb float64) bool {
	p := pp.p
	return a != b && p.Jobs[a].ScaleFactor == p.Jobs[b].ScaleFactor && ta+tb > 0 &&
		p.Capacity[k] >= p.Jobs[a].ScaleFactor && ta >= 0 && tb >= 0
}

// priceAll prices every pair, O(N^2 K), and adds the best ones: each
// job's best pair, so that the LP stays sparse.
func (pp *packedProgram) priceAll() int {
	p := pp.p
	type cand struct {
		a, b, k int
		ta, tb  float64
		d       float64
	}
	best := make([]cand, len(p.Jobs))
	for m := range best {
		best[m].d = pricingTolerance
		best[m].a = -1
	}
	for k := range p.Types {
		for a := range p.Jobs {
			for b := a + 1; b < len(p.Jobs); b++ {
				ta, tb := p.Pairs.Rates(a, b, k)
				if !pp.shareable(a, b, k, ta, tb) || pp.known[[3]int{a, b, k}] {
					continue
				}
				d := pp.value(a, ta) + pp.value(b, tb) - float64(p.Jobs[a].ScaleFactor)*pp.capDual[k]
				c := cand{a, b, k, ta, tb, d}
				if d > best[a].d {
					best[a] = c
				}
				if d > best[b].d {
					best[b] = c
				}
			}
		}
	}
	added := 0
	for _, c := range best {
		if c.a >= 0 && pp.add(c.a, c.b, c.k, c.ta, c.tb) {
			added++
		}
	}
	return added
}

// priceByClass prices all pairs group by group: for two groups of jobs
// (same class and scale factor) the reduced cost of a pair is a sum of a
// term of each job, so the best pairs match the best jobs of each group.
func (pp *packedProgram) priceByClass(cp ClassPairRates) int {
	p := pp.p
	type group struct{ class, sf int }
	index := map[group]int{}
	var groups [][]int
	var keys []group
	for m := range p.Jobs {
		g := group{cp.Class(m), p.Jobs[m].ScaleFactor}
		i, ok := index[g]
		if !ok {
			i = len(groups)
			index[g] = i
			groups = append(groups, nil)
			keys = append(keys, g)
		}
		groups[i] = append(groups[i], m)
	}
	type scored struct {
		m int
		v float64
	}
	added := 0
	var as, bs []scored
	for k := range p.Types {
		for gi := range groups {
			for gj := gi; gj < len(groups); gj++ {
				if keys[gi].sf != keys[gj].sf || p.Capacity[k] < keys[gi].sf {
					continue
				}
				ta, tb := cp.ClassRates(keys[gi].class, keys[gj].class, k)
				if !(ta+tb > 0) || ta < 0 || tb < 0 {
					continue
				}
				as, bs = as[:0], bs[:0]
				for _, m := range groups[gi] {
					as = append(as, scored{m, pp.value(m, ta)})
				}
				for _, m := range groups[gj] {
					bs = append(bs, scored{m, pp.value(m, tb)})
				}
				desc := func(x, y scored) int { return cmp.Or(cmp.Compare(y.v, x.v), cmp.Compare(x.m, y.m)) }
				slices.SortFunc(as, desc)
				slices.SortFunc(bs, desc)
				capCost := float64(keys[gi].sf) * pp.capDual[k]
				if gi == gj {
					// Pair the best with the second best, the third with the
					// fourth, and so on.
					for i := 0; i+1 < len(as) && i/2 < maxPairsPerGroup; i += 2 {
						if as[i].v+as[i+1].v-capCost <= pricingTolerance {
							break
						}
						if pp.add(as[i].m, as[i+1].m, k, ta, tb) {
							added++
						}
					}
					continue
				}
				for i := 0; i < len(as) && i < len(bs) && i < maxPairsPerGroup; i++ {
					if as[i].v+bs[i].v-capCost <= pricingTolerance {
						break
					}
					if pp.add(as[i].m, bs[i].m, k, ta, tb) {
						added++
					}
				}
			}
		}
	}
	return added
}

// allocation reads the last solution.
func (pp *packedProgram) allocation() *Allocation {
	a := newAllocation(pp.p)
	for m, row := range pp.single {
		for k, v := range row {
			if v >= 0 {
				a.X[m][k] = clip(pp.singleX[v])
			}
		}
	}
	byPair := map[[2]int]int{}
	for c, col := range pp.columns {
		x := clip(pp.pairX[pp.pairVar[c]])
		if x <= 1e-9 {
			continue
		}
		key := [2]int{col.a, col.b}
		i, ok := byPair[key]
		if !ok {
			i = len(a.Pairs)
			byPair[key] = i
			a.Pairs = append(a.Pairs, Pair{A: col.a, B: col.b, X: make([]float64, len(pp.p.Types))})
		}
		a.Pairs[i].X[col.k] += x
	}
	a.Objective = pp.objective
	return a.fit(pp.p)
}
