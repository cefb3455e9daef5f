package allocation

import (
	"context"
	"errors"
	"fmt"

	"github.com/gpusched/gpusched/allocation/lp"
)

// MaxThroughput is Gavel's total-throughput family (max_sum_throughput.py;
// Narayanan et al., OSDI 2020, section 4.2):
//
//	maximise  sum_m sum_k T_mk X_mk / c_k
//
// over the base constraints, with c_k = 1, or with Cost the price of a GPU
// of type k per hour (throughput per dollar; Problem.Prices, or Gavel's GCP
// prices). With SLOs, each job with a deadline must also get
// sum_k T_mk X_mk >= R_m / (deadline_m - now); if that cannot be met, the
// program is solved again without SLOs and the Allocation's Note says so
// (as Gavel does), unless Strict is set, which returns ErrNoSolution
// instead. The Allocation's Objective is the optimum.
// It holds no state: one value is safe for concurrent use by several
// goroutines (with a Solver set, as safe as the Solver; lp.InteriorPoint
// is).
type MaxThroughput struct {
	Cost   bool
	SLOs   bool
	Strict bool
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
func (pol *MaxThroughput) Allocate(ctx context.Context, p *Problem) (a *Allocation, err error) {
	ctx, lps := trackLP(ctx)
	defer func() {
		lps.attach(a)
		err = policyError("max throughput", p, err)
	}()
	if err := p.Validate(); err != nil {
		return nil, err
	}
	if pol.SLOs {
		a, err := pol.solve(ctx, p, true)
		if err == nil || !errors.Is(err, ErrNoSolution) {
			return a, err
		}
		if pol.Strict {
			return nil, err
		}
		a, err2 := pol.solve(ctx, p, false)
		if err2 != nil {
			return nil, err2
		}
		a.Note = fmt.Sprintf("SLOs cannot all be met (%v); allocated without them", err)
		return a, nil
	}
	return pol.solve(ctx, p, false)
}

func (pol *MaxThroughput) solve(ctx context.Context, p *Problem, slos bool) (*Allocation, error) {
	price := make([]float64, len(p.Types))
	for k := range price {
		price[k] = 1
	}
	if pol.Cost {
		var err error
		if price, err = p.prices(); err != nil {
			return nil, err
		}
	}
	g := newProgram(p, lp.Maximize, p.matrix())
	for m := range p.Jobs {
		for k, v := range g.x[m] {
			if v >= 0 {
				g.m.SetObjective(v, p.Jobs[m].Throughput[k]/price[k])
			}
		}
		j := &p.Jobs[m]
		if !slos || j.Deadline == 0 || j.RemainingSteps == 0 {
			continue
		}
		left := j.Deadline - p.Now
		if left <= 0 || !g.runs(m) {
			return nil, fmt.Errorf("%w: job %d cannot meet its deadline %v (now %v)", ErrNoSolution, j.ID, j.Deadline, p.Now)
		}
		g.idx, g.val = g.idx[:0], g.val[:0]
		g.rate(m, j.Throughput, 1)
		g.m.AddRow(j.RemainingSteps/left, lp.Inf, g.idx, g.val)
	}
	a, sol, err := g.solve(ctx, lpSolver(pol.Solver, pol.Vertex))
	if err != nil {
		return nil, solveError(err)
	}
	a.Objective = sol.Objective
	return a, nil
}
