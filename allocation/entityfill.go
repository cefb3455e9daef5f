package allocation

import (
	"cmp"
	"context"
	"errors"
	"math"
	"slices"

	"github.com/gpusched/gpusched/allocation/lp"
)

// Water filling over entities (WaterFilling.PerEntity). The entity's level
// is its jobs' total normalised rate over its weight,
//
//	L_e = (1 / W_e) sum_{m in e} sf_m rate_m / T^prop_m,
//
// and the levels are water-filled as WaterFilling fills the jobs' (Gavel's
// max_min_fairness_water_filling.py; Narayanan et al., OSDI 2020, section
// 4.1, "hierarchical policies"; Radunovic and Le Boudec, IEEE/ACM ToN
// 15(5), 2007): raise the lowest as far as it goes, freeze the entities
// that cannot rise further (those left at the level at the centre of the
// optimal face), raise the rest. Then, keeping every entity's total, the
// jobs share it: one max-min level over all jobs, each job's level being
// its normalised rate over its share of its entity's weight (as
// Hierarchical shares it), and a last program that keeps those and
// maximises the total normalised rate, so that no GPU a job could use is
// left idle. An entity's total depends on its weight, its jobs' rates and
// what they can use, not on how many jobs carry its work: splitting a job
// into several gains its entity nothing.
//
// The programs number the entities' distinct levels plus two, where job
// water filling needs one per distinct job level: with heterogeneous
// rates a job can often rise by trading types with another, so that
// thousands of jobs take hundreds of levels.

// entityFill water-fills the entities' levels of a valid problem, then
// shares them among their jobs; extra, when set, adds its rows to every
// program (QuotaFairness's guarantees and limits).
func (pol *WaterFilling) entityFill(ctx context.Context, p *Problem, extra func(g *program)) (*Allocation, error) {
	ef := newEntityFill(pol, p, extra)
	if len(ef.ents) == 0 {
		return newAllocation(p), nil
	}
	var last *Allocation
	first := math.NaN()
	for ef.active() > 0 {
		a, level, err := ef.stage(ctx)
		if err != nil {
			if last != nil && errors.Is(err, lp.ErrNumerical) && ctx.Err() == nil {
				break // keep the stage before, as WaterFilling does
			}
			return nil, solveError(err)
		}
		if math.IsNaN(first) {
			first = level
		}
		last = a
		ef.freeze(a, level)
	}
	if last == nil {
		return newAllocation(p), nil
	}
	a, err := ef.share(ctx, last)
	if err != nil {
		return nil, err
	}
	a.Objective = first
	return a, nil
}

// entityFill is the state of entity water filling.
type entityFill struct {
	pol   *WaterFilling
	p     *Problem
	extra func(g *program)
	tput  [][]float64
	scale []float64 // sf_m / T^prop_m (0: the job cannot run)
	tol   float64
	ents  []*fillEntity
}

// fillEntity is one entity with jobs that can run.
type fillEntity struct {
	name   string
	weight float64
	jobs   []int
	frozen bool
	floor  float64 // the total normalised rate a frozen entity keeps
	row    int     // its level row in the current stage, -1 if none
}

func newEntityFill(pol *WaterFilling, p *Problem, extra func(g *program)) *entityFill {
	ef := &entityFill{pol: pol, p: p, extra: extra, tput: p.matrix(), tol: pol.BottleneckTolerance}
	if pol.Agnostic {
		ef.tput = p.ones()
	}
	if ef.tol == 0 {
		ef.tol = 1e-6
	}
	ef.scale = normalisers(p, ef.tput)
	probe := newProgram(p, lp.Maximize, p.matrix())
	byName := map[string]*fillEntity{}
	for m := range p.Jobs {
		ef.scale[m] *= p.Jobs[m].weight()
		if !probe.runs(m) || ef.scale[m] == 0 {
			ef.scale[m] = 0
			continue
		}
		e := p.Jobs[m].Entity
		fe := byName[e]
		if fe == nil {
			fe = &fillEntity{name: e, weight: 1, row: -1}
			if w, ok := p.EntityWeights[e]; ok {
				fe.weight = w
			}
			byName[e] = fe
			ef.ents = append(ef.ents, fe)
		}
		fe.jobs = append(fe.jobs, m)
	}
	entityOrder(ef.ents)
	return ef
}

func (ef *entityFill) active() int {
	n := 0
	for _, fe := range ef.ents {
		if !fe.frozen {
			n++
		}
	}
	return n
}

// program is the base program with extra's rows and the frozen entities'
// floors.
func (ef *entityFill) program() *program {
	g := newProgram(ef.p, lp.Maximize, ef.p.matrix())
	if ef.extra != nil {
		ef.extra(g)
	}
	for _, fe := range ef.ents {
		fe.row = -1
		if fe.frozen && fe.floor > 0 {
			ef.total(g, fe)
			g.m.AddRow(fe.floor, lp.Inf, g.idx, g.val)
		}
	}
	return g
}

// total puts the entity's total normalised rate in g's scratch row,
// times f (1 if 0).
func (ef *entityFill) total(g *program, fe *fillEntity) {
	g.idx, g.val = g.idx[:0], g.val[:0]
	for _, m := range fe.jobs {
		g.rate(m, ef.tput[m], ef.scale[m]*ef.p.Jobs[m].count())
	}
}

// stage maximises the lowest level of the entities not yet frozen.
func (ef *entityFill) stage(ctx context.Context) (*Allocation, float64, error) {
	g := ef.program()
	t := g.m.AddVar(0, lp.Inf, 1)
	for _, fe := range ef.ents {
		if fe.frozen {
			continue
		}
		// t - total_e / W_e <= 0.
		ef.total(g, fe)
		for i := range g.val {
			g.val[i] = -g.val[i] / fe.weight
		}
		g.idx, g.val = append(g.idx, t), append(g.val, 1)
		fe.row = g.m.AddRow(-lp.Inf, 0, g.idx, g.val)
	}
	a, sol, err := g.solve(ctx, ef.pol.Solver)
	if err != nil {
		return nil, 0, err
	}
	return a, sol.X[t], nil
}

// levels returns each entity's level under a.
func (ef *entityFill) levels(a *Allocation) []float64 {
	r := rates(a, ef.tput)
	out := make([]float64, len(ef.ents))
	for i, fe := range ef.ents {
		for _, m := range fe.jobs {
			out[i] += ef.scale[m] * ef.p.Jobs[m].count() * r[m]
		}
		out[i] /= fe.weight
	}
	return out
}

// freeze freezes the entities a stage left at its level (the lowest, if
// numerically none is), and lowers every floor by a hair so that the next
// program stays feasible despite the solver's tolerance.
func (ef *entityFill) freeze(a *Allocation, level float64) {
	lv := ef.levels(a)
	froze := false
	lowest := -1
	for i, fe := range ef.ents {
		if fe.frozen {
			continue
		}
		if lowest < 0 || lv[i] < lv[lowest] {
			lowest = i
		}
		if lv[i]-level <= ef.tol*max(1, level) {
			fe.frozen, fe.floor = true, level*fe.weight
			froze = true
		}
	}
	if !froze && lowest >= 0 {
		fe := ef.ents[lowest]
		fe.frozen, fe.floor = true, level*fe.weight
	}
	for _, fe := range ef.ents {
		fe.floor *= 1 - 1e-9
	}
}

// share divides each entity's total among its jobs: the largest max-min
// level of the jobs' normalised rates over their shares of their entity's
// weight, then, keeping it, the largest total normalised rate. A program
// the solver cannot finish keeps the answer before it.
func (ef *entityFill) share(ctx context.Context, last *Allocation) (*Allocation, error) {
	w := ef.pol.shares(ef.p, make([]bool, len(ef.p.Jobs)))
	g := ef.program()
	t := g.m.AddVar(0, lp.Inf, 1)
	for m := range ef.p.Jobs {
		if ef.scale[m] == 0 || w[m] == 0 {
			continue
		}
		// t - r_m / share_m <= 0.
		g.idx, g.val = append(g.idx[:0], t), append(g.val[:0], 1)
		g.rate(m, ef.tput[m], -ef.scale[m]/w[m])
		g.m.AddRow(-lp.Inf, 0, g.idx, g.val)
	}
	a, sol, err := g.solve(ctx, ef.pol.Solver)
	if err != nil {
		if ctx.Err() != nil {
			return nil, err
		}
		return last, nil
	}
	g.m.SetVarBounds(t, sol.X[t]*(1-1e-9), lp.Inf)
	g.m.SetObjective(t, 0)
	for m, row := range g.x {
		for k, v := range row {
			if v >= 0 {
				g.m.SetObjective(v, ef.scale[m]*ef.p.Jobs[m].count()*ef.tput[m][k])
			}
		}
	}
	b, _, err := g.solve(ctx, ef.pol.Solver)
	if err != nil {
		if ctx.Err() != nil {
			return nil, err
		}
		return a, nil
	}
	return b, nil
}

// entityOrder sorts entities by name, for answers that do not depend on
// the order of the jobs' first appearance.
func entityOrder(ents []*fillEntity) {
	slices.SortFunc(ents, func(a, b *fillEntity) int { return cmp.Compare(a.name, b.name) })
}
