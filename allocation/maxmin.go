package allocation

import (
	"context"
	"errors"
	"fmt"

	"github.com/gpusched/gpusched/allocation/lp"
)

// MaxMinFairness is Gavel's max-min fairness policy (Narayanan et al.,
// OSDI 2020, section 4.1, equation 1; max_min_fairness.py):
//
//	maximise  min_m  (1 / w_m) (sf_m / T^prop_m) sum_k T_mk X_mk
//
// over the base constraints, where T^prop_m is the job's rate under the
// proportional allocation ([Proportional]). With Agnostic it is the
// heterogeneity-agnostic LAS policy: every T_mk is taken as 1. Weights come
// from Job.Weight. Jobs that cannot run on any type get nothing and do not
// count in the minimum. The Allocation's Objective is the max-min level.
// It holds no state: one value is safe for concurrent use by several
// goroutines (with a Solver set, as safe as the Solver; lp.InteriorPoint
// is).
type MaxMinFairness struct {
	// Agnostic ignores throughputs (Gavel's max_min_fairness, "LAS").
	Agnostic bool
	// SpaceSharing lets pairs of jobs of equal scale factor share GPUs at
	// the rates of Problem.Pairs (Gavel's max_min_fairness_packed), solved
	// exactly: with a ClassPairRates, by an LP over groups of
	// interchangeable jobs whose answer is turned back into pairs;
	// otherwise by column generation, each pair priced with the duals
	// (Dantzig and Wolfe 1960, Gilmore and Gomory 1961).
	SpaceSharing bool
	// Solver solves the LP; nil means lp.InteriorPoint.
	Solver lp.Solver
	// Vertex asks the default solver for a vertex of the optimal face (a
	// basic solution, by crossover: lp.InteriorPoint.Crossover) instead of
	// its centre, which spreads jobs evenly over the allocations that tie;
	// ignored when Solver is set. docs/simulator.md in the repository measures
	// what it changes.
	Vertex bool
	// Extension, if set, changes the LP before it is solved (extra
	// bounds, rows, objective terms); not with SpaceSharing.
	Extension Extension
}

// Allocate implements Policy.
func (pol *MaxMinFairness) Allocate(ctx context.Context, p *Problem) (a *Allocation, err error) {
	ctx, lps := trackLP(ctx)
	defer func() {
		lps.attach(a)
		err = policyError("max-min fairness", p, err)
	}()
	if err := p.Validate(); err != nil {
		return nil, err
	}
	tput := p.matrix()
	if pol.Agnostic {
		tput = p.ones()
	}
	if pol.SpaceSharing {
		if pol.Extension != nil {
			return nil, invalid("an Extension with space sharing (only the LP without pairs takes one)")
		}
		if p.Pairs == nil {
			return nil, invalid("space sharing needs Problem.Pairs")
		}
		if cp, ok := p.Pairs.(ClassPairRates); ok {
			if groups := groupJobs(p, cp, tput, normalisers(p, tput), nil); groups != nil {
				return pol.allocateGrouped(ctx, p, tput, cp, groups)
			}
		}
		return pol.allocatePacked(ctx, p, tput)
	}
	scale := normalisers(p, tput)
	// Interchangeable jobs (same scale factor, weight and rates) can share
	// one set of variables: the LP is symmetric in them, so some optimum
	// treats them alike. This makes large traces of a few job types cheap.
	var key func(m int) string
	if pol.Extension != nil {
		key = func(m int) string { return pol.Extension.Key(p, m) }
	}
	if groups := groupJobs(p, nil, tput, scale, key); groups != nil && len(groups) < len(p.Jobs) {
		return pol.allocateGrouped(ctx, p, tput, nil, groups)
	}
	g := newProgram(p, lp.Maximize, p.matrix())
	t := -1
	for m := range p.Jobs {
		if !g.runs(m) || scale[m] == 0 {
			continue
		}
		if t < 0 {
			t = g.m.AddVar(0, lp.Inf, 1)
		}
		// t - scale_m sum_k T_mk X_mk <= 0.
		g.idx, g.val = append(g.idx[:0], t), append(g.val[:0], 1)
		g.rate(m, tput[m], -scale[m])
		g.m.AddRow(-lp.Inf, 0, g.idx, g.val)
	}
	if t < 0 {
		return newAllocation(p), nil
	}
	if pol.Extension != nil {
		units := make([][]int, len(p.Jobs))
		for m := range units {
			units[m] = []int{m}
		}
		if err := extend(pol.Extension, &Program{p: p, m: g.m, units: units, x: g.x, level: t, scale: scale, rates: tput}); err != nil {
			return nil, err
		}
	}
	a, sol, err := g.solve(ctx, lpSolver(pol.Solver, pol.Vertex))
	if err != nil {
		return nil, solveError(err)
	}
	a.Objective = sol.X[t]
	return a, nil
}

// normalisers returns sf_m / (w_m T^prop_m) for each job, 0 where the
// proportional rate is 0.
func normalisers(p *Problem, tput [][]float64) []float64 {
	prop := proportionalRates(p, tput)
	out := make([]float64, len(p.Jobs))
	for m := range p.Jobs {
		if prop[m] > 0 {
			out[m] = float64(p.Jobs[m].ScaleFactor) / (p.Jobs[m].weight() * prop[m])
		}
	}
	return out
}

// solveError turns an LP failure into this package's error.
func solveError(err error) error {
	if errors.Is(err, lp.ErrInfeasible) || errors.Is(err, lp.ErrUnbounded) {
		return fmt.Errorf("%w: %w", ErrNoSolution, err)
	}
	return err
}
