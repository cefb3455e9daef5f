package allocation

import (
	"context"
	"fmt"

	"github.com/gpusched/gpusched/allocation/lp"
	"github.com/gpusched/gpusched/topology"
)

// MinMakespan minimises the time until every job has finished at its
// allocated rate (Gavel's min_total_duration.py; Narayanan et al., OSDI
// 2020, section 4.2). Gavel bisects over the makespan T with a feasibility
// LP; the exact form is one LP:
//
//	maximise z  subject to  sum_k T_mk X_mk >= R_m z  for every job m
//
// over the base constraints; the makespan is 1/z. The LP is solved in units
// of a lower bound T0 on the makespan (the longest time any job needs on
// its fastest type), z' = T0 z, so that z' is near 1 whatever the scale of
// the work: remaining steps from 1 to 1e10 and makespans up to 1e10 s come
// out exact to the solver's relative tolerance, where 1/z of 1e-9 would be
// lost below its absolute floor. With Agnostic every type
// is taken to run at the job's rate on Reference (V100 by default), as in
// Gavel. The Allocation's Objective is the makespan in seconds. A job with
// remaining steps that can run nowhere makes the makespan infinite:
// ErrNoSolution.
// It holds no state: one value is safe for concurrent use by several
// goroutines (with a Solver set, as safe as the Solver; lp.InteriorPoint
// is).
type MinMakespan struct {
	Agnostic  bool
	Reference topology.GPUType
	// Solver solves the LP; nil means lp.InteriorPoint.
	Solver lp.Solver
	// Vertex asks the default solver for a vertex of the optimal face (a
	// basic solution, by crossover: lp.InteriorPoint.Crossover) instead of
	// its centre, which spreads jobs evenly over the allocations that tie;
	// ignored when Solver is set. docs/simulator.md in the repository measures
	// what it changes.
	Vertex bool
}

// Allocate implements Policy.
func (pol *MinMakespan) Allocate(ctx context.Context, p *Problem) (a *Allocation, err error) {
	ctx, lps := trackLP(ctx)
	defer func() {
		lps.attach(a)
		err = policyError("min makespan", p, err)
	}()
	actual, tput, err := planRates(p, pol.Agnostic, pol.Reference)
	if err != nil {
		return nil, err
	}
	g := newProgram(p, lp.Maximize, actual)
	// T0: no allocation finishes job m before R_m / (its best rate).
	t0 := 0.0
	for m := range p.Jobs {
		j := &p.Jobs[m]
		if j.RemainingSteps == 0 {
			continue
		}
		if !g.runs(m) {
			return nil, fmt.Errorf("%w: job %d has %v steps left and can run on no type", ErrNoSolution, j.ID, j.RemainingSteps)
		}
		best := 0.0
		for k, v := range g.x[m] {
			if v >= 0 {
				best = max(best, tput[m][k])
			}
		}
		if best <= 0 {
			return nil, fmt.Errorf("%w: no job can progress", ErrNoSolution)
		}
		t0 = max(t0, j.RemainingSteps/best)
	}
	z := -1
	for m := range p.Jobs {
		j := &p.Jobs[m]
		if j.RemainingSteps == 0 {
			continue
		}
		if z < 0 {
			z = g.m.AddVar(0, lp.Inf, 1)
		}
		// (R_m / T0) z' - sum_k T_mk X_mk <= 0.
		g.idx, g.val = append(g.idx[:0], z), append(g.val[:0], j.RemainingSteps/t0)
		g.rate(m, tput[m], -1)
		g.m.AddRow(-lp.Inf, 0, g.idx, g.val)
	}
	if z < 0 {
		return newAllocation(p), nil
	}
	a, sol, err := g.solve(ctx, lpSolver(pol.Solver, pol.Vertex))
	if err != nil {
		return nil, solveError(err)
	}
	if sol.X[z] <= 0 {
		return nil, fmt.Errorf("%w: no job can progress", ErrNoSolution)
	}
	a.Objective = t0 / sol.X[z]
	return a, nil
}

// planRates validates p and returns its throughput matrix and the one a
// policy plans with: the same matrix, or, when agnostic, every type at the
// reference type's rate (referenceRates).
func planRates(p *Problem, agnostic bool, ref topology.GPUType) (actual, plan [][]float64, err error) {
	if err := p.Validate(); err != nil {
		return nil, nil, err
	}
	actual = p.matrix()
	if !agnostic {
		return actual, actual, nil
	}
	plan, err = referenceRates(p, ref)
	if err != nil {
		return nil, nil, err
	}
	return actual, plan, nil
}

// referenceRates returns the matrix in which every type runs each job at
// its rate on ref (V100 if empty): Gavel's heterogeneity-agnostic view for
// makespan and finish-time fairness.
func referenceRates(p *Problem, ref topology.GPUType) ([][]float64, error) {
	if ref == "" {
		ref = topology.V100
	}
	r := -1
	for k, t := range p.Types {
		if t == ref {
			r = k
		}
	}
	if r < 0 {
		return nil, invalid("the heterogeneity-agnostic policy needs the reference type %s among the problem's types", ref)
	}
	t := make([][]float64, len(p.Jobs))
	for m := range t {
		t[m] = make([]float64, len(p.Types))
		for k := range t[m] {
			t[m][k] = p.Jobs[m].Throughput[r]
		}
	}
	return t, nil
}
