package allocation

import (
	"cmp"
	"context"
	"errors"
	"math"
	"slices"

	"github.com/gpusched/gpusched/allocation/lp"
)

// Reweighting says how an entity's weight is shared among its jobs in a
// hierarchical policy (Gavel's priority_reweighting_policies).
// Its values are constants, safe for concurrent use.
type Reweighting int

const (
	// EntityFairness splits the entity's weight over its jobs that are not yet
	// frozen, in proportion to their own weights.
	EntityFairness Reweighting = iota
	// EntityFIFO gives the entity's whole weight to its oldest job that is not
	// yet frozen (by Arrival, then ID); the others wait for a later level.
	EntityFIFO
)

// WaterFilling is max-min fairness iterated to the end (Gavel's
// max_min_fairness_water_filling.py; Narayanan et al., OSDI 2020,
// section 4.1 "hierarchical policies"): raise the lowest level as far as it
// goes, freeze the jobs that cannot rise further (the bottlenecks), and
// raise the rest, until every job is frozen. Every job ends with the
// largest level it can have given the levels of the jobs below it.
//
// Gavel finds bottlenecks with a MILP per level. Here they come from the LP
// itself: the interior-point solution is the analytic centre of the optimal
// face, so a job whose level can exceed the optimum in some optimal
// solution exceeds it there too; the jobs left at the optimum level (within
// BottleneckTolerance) are exactly the bottlenecks.
//
// With Hierarchical, jobs belong to entities (Job.Entity) weighted by
// Problem.EntityWeights (1 if absent), and at each level an entity's weight
// is shared among its unfrozen jobs by Within[entity] (EntityFairness by
// default); a job's level is its normalised rate divided by its share.
// Without it, weights are Job.Weight, and the first level equals
// MaxMinFairness's optimum.
// It holds no state: one value is safe for concurrent use by several
// goroutines (with a Solver set, as safe as the Solver; lp.InteriorPoint
// is).
type WaterFilling struct {
	Agnostic     bool
	Hierarchical bool
	Within       map[string]Reweighting
	// PerEntity, with Hierarchical, water-fills the entities' levels
	// (each entity's total normalised rate over its weight) instead of
	// the jobs', then shares each entity's total among its jobs by one
	// max-min level over their shares of its weight and fills what is left
	// by total normalised rate. It solves as many programs as the entities
	// have distinct levels, plus two, where job water filling solves one
	// per distinct job level (hundreds for thousands of heterogeneous
	// jobs); the entities' totals are the same whenever each entity's jobs
	// freeze together. Splitting an entity's work into more jobs gains it
	// nothing under either.
	PerEntity bool
	// BottleneckTolerance is the relative slack below which a job counts
	// as stuck at the level; 0 means 1e-6.
	BottleneckTolerance float64
	// Solver solves the LPs; nil means lp.InteriorPoint. Water-filling
	// needs the centre of each optimal face (a bottleneck job has a
	// strictly positive dual there): it has no Vertex option.
	Solver lp.Solver
}

// Allocate implements Policy. The Allocation's Objective is the first
// (lowest) level.
func (pol *WaterFilling) Allocate(ctx context.Context, p *Problem) (a *Allocation, err error) {
	ctx, lps := trackLP(ctx)
	defer func() {
		lps.attach(a)
		err = policyError("water filling", p, err)
	}()
	if err := p.Validate(); err != nil {
		return nil, err
	}
	if r := reduceFor(p, pol.Within); r != nil {
		a, err := pol.fill(ctx, r.p, nil)
		if err != nil {
			return nil, err
		}
		return r.expand(p, a), nil
	}
	return pol.fill(ctx, p, nil)
}

// fill is water filling on a valid problem; extra, when set, adds its rows
// to every stage's program (QuotaFairness's guarantees and limits).
func (pol *WaterFilling) fill(ctx context.Context, p *Problem, extra func(g *program)) (*Allocation, error) {
	if pol.Hierarchical && pol.PerEntity {
		return pol.entityFill(ctx, p, extra)
	}
	tput := p.matrix()
	if pol.Agnostic {
		tput = p.ones()
	}
	tol := pol.BottleneckTolerance
	if tol == 0 {
		tol = 1e-6
	}
	// sf_m / T^prop_m, without the weight, which shares supply.
	scale := normalisers(p, tput)
	for m := range scale {
		scale[m] *= p.Jobs[m].weight()
	}
	n := len(p.Jobs)
	frozen := make([]bool, n)
	floor := make([]float64, n) // normalised rate a frozen job keeps
	probe := newProgram(p, lp.Maximize, p.matrix())
	for m := range p.Jobs {
		if !probe.runs(m) || scale[m] == 0 {
			frozen[m] = true
		}
	}
	var last *Allocation
	first := math.NaN()
	for {
		weights := pol.shares(p, frozen)
		active := 0
		for m := range p.Jobs {
			if !frozen[m] && weights[m] > 0 {
				active++
			}
		}
		if active == 0 {
			break
		}
		g := newProgram(p, lp.Maximize, p.matrix())
		if extra != nil {
			extra(g)
		}
		t := g.m.AddVar(0, lp.Inf, 1)
		rows := make([]int, n)
		for m := range p.Jobs {
			rows[m] = -1
			switch {
			case frozen[m] && floor[m] > 0:
				// scale_m rate_m >= floor_m.
				g.idx, g.val = g.idx[:0], g.val[:0]
				g.rate(m, tput[m], scale[m])
				g.m.AddRow(floor[m], lp.Inf, g.idx, g.val)
			case !frozen[m] && weights[m] > 0:
				// t <= scale_m rate_m / share_m.
				g.idx, g.val = append(g.idx[:0], t), append(g.val[:0], 1)
				g.rate(m, tput[m], -scale[m]/weights[m])
				rows[m] = g.m.AddRow(-lp.Inf, 0, g.idx, g.val)
			}
		}
		a, sol, err := g.solve(ctx, pol.Solver)
		if err != nil {
			if last != nil && errors.Is(err, lp.ErrNumerical) && ctx.Err() == nil {
				// A later stage the solver cannot finish (rates and
				// weights at the ends of their ranges) keeps the stage
				// before: every frozen job has its level there, and the
				// rest at least the last level.
				break
			}
			return nil, solveError(err)
		}
		level := sol.X[t]
		if math.IsNaN(first) {
			first = level
		}
		last = a
		// Bottlenecks: active jobs left at the level.
		r := rates(a, tput)
		type slack struct {
			m int
			s float64
		}
		var slacks []slack
		froze := 0
		for m := range p.Jobs {
			if rows[m] < 0 {
				continue
			}
			own := scale[m] * r[m] / weights[m]
			s := own - level
			slacks = append(slacks, slack{m, s})
			if s <= tol*max(1, level) {
				frozen[m], floor[m] = true, level*weights[m]
				froze++
			}
		}
		if froze == 0 {
			// Numerically no job sits at the level: freeze the lowest.
			lowest := slices.MinFunc(slacks, func(x, y slack) int { return cmp.Compare(x.s, y.s) })
			frozen[lowest.m], floor[lowest.m] = true, level*weights[lowest.m]
		}
		// Frozen floors lose a hair of slack so that the next LP stays
		// feasible despite the solver's tolerance.
		for m := range floor {
			if frozen[m] {
				floor[m] *= 1 - 1e-9
			}
		}
	}
	if last == nil {
		return newAllocation(p), nil
	}
	last.Objective = first
	return last, nil
}

// shares returns each job's weight at this level: Job.Weight, or with
// Hierarchical its share of its entity's weight among the unfrozen jobs.
func (pol *WaterFilling) shares(p *Problem, frozen []bool) []float64 {
	w := make([]float64, len(p.Jobs))
	if !pol.Hierarchical {
		for m := range p.Jobs {
			w[m] = p.Jobs[m].weight()
		}
		return w
	}
	members := map[string][]int{}
	var entities []string
	for m := range p.Jobs {
		e := p.Jobs[m].Entity
		if _, ok := members[e]; !ok {
			entities = append(entities, e)
		}
		if !frozen[m] {
			members[e] = append(members[e], m)
		} else if _, ok := members[e]; !ok {
			members[e] = nil
		}
	}
	for _, e := range entities {
		ew := 1.0
		if v, ok := p.EntityWeights[e]; ok {
			ew = v
		}
		jobs := members[e]
		if len(jobs) == 0 {
			continue
		}
		if pol.Within[e] == EntityFIFO {
			oldest := slices.MinFunc(jobs, func(a, b int) int {
				return cmp.Or(cmp.Compare(p.Jobs[a].Arrival, p.Jobs[b].Arrival), cmp.Compare(p.Jobs[a].ID, p.Jobs[b].ID))
			})
			w[oldest] = ew
			continue
		}
		total := 0.0
		for _, m := range jobs {
			total += p.Jobs[m].weight() * p.Jobs[m].count()
		}
		for _, m := range jobs {
			w[m] = ew * p.Jobs[m].weight() / total
		}
	}
	return w
}
