package allocation

import (
	"context"
	"fmt"
	"math"
	"sync"

	"github.com/gpusched/gpusched/allocation/lp"
	"github.com/gpusched/gpusched/topology"
)

// FinishTimeFairness is Themis's finish-time fairness as Gavel states it
// (Mahajan et al., NSDI 2020; Gavel finish_time_fairness.py, Narayanan et
// al., OSDI 2020, section 4.1): minimise the largest ratio
//
//	rho_m(X) = (t_m + R_m / sum_k T_mk X_mk) / (T^iso,cum_m + R_m / T^iso_m)
//
// of a job's finish time under X to its finish time had it always had an
// isolated 1/M share of the cluster ([Isolated]), where t_m is the time
// since the job arrived, R_m its remaining steps, T^iso_m its rate under
// the isolated allocation and T^iso,cum_m the isolated-equivalent time of
// the progress it has made so far. The policy is stateful: each call
// credits every job known from the previous call with the progress it made
// since, at the isolated rate it had then.
//
// Gavel solves an SOCP. For a fixed rho the condition rho_m(X) <= rho is
// linear in X (sum_k T_mk X_mk >= R_m / (rho D_m - t_m)), so the optimum is
// found exactly by a bisection on rho over LP feasibility; each feasible
// LP's own ratio tightens the upper end (a Dinkelbach step), which makes
// the bisection converge in a handful of LPs. With Agnostic every type runs
// at the job's rate on Reference (V100 by default), as in Gavel. When no
// allocation exists, it falls back to Isolated and says so in Note.
//
// It is safe for concurrent use: a mutex guards its state, though its
// answers then depend on the order of the calls. It must not be copied
// after first use.
type FinishTimeFairness struct {
	Agnostic  bool
	Reference topology.GPUType
	// Tolerance is the relative accuracy on rho; 0 means 1e-6.
	Tolerance float64
	// Solver solves the LPs; nil means lp.InteriorPoint.
	Solver lp.Solver
	// Vertex asks the default solver for a vertex of the optimal face (a
	// basic solution, by crossover: lp.InteriorPoint.Crossover) instead of
	// its centre, which spreads jobs evenly over the allocations that tie;
	// ignored when Solver is set. docs/simulator.md in the repository measures
	// what it changes.
	Vertex bool

	mu    sync.Mutex
	state map[int]ftfState
}

type ftfState struct {
	remaining, isoRate, cumulative float64
}

// Allocate implements Policy. The Allocation's Objective is the largest
// ratio rho.
func (pol *FinishTimeFairness) Allocate(ctx context.Context, p *Problem) (a *Allocation, err error) {
	ctx, lps := trackLP(ctx)
	defer func() {
		lps.attach(a)
		err = policyError("finish-time fairness", p, err)
	}()
	actual, tput, err := planRates(p, pol.Agnostic, pol.Reference)
	if err != nil {
		return nil, err
	}
	iso := isolated(p)
	isoRate := rates(iso, tput)
	denom := pol.credit(p, isoRate)
	since := make([]float64, len(p.Jobs))
	for m := range p.Jobs {
		since[m] = max(0, p.Now-p.Jobs[m].Arrival)
	}
	probe := newProgram(p, lp.Maximize, actual)
	var jobs []int
	for m := range p.Jobs {
		if p.Jobs[m].RemainingSteps > 0 && probe.runs(m) && isoRate[m] > 0 {
			jobs = append(jobs, m)
		}
	}
	ratio := func(a *Allocation) float64 {
		r := rates(a, tput)
		worst := 0.0
		for _, m := range jobs {
			worst = max(worst, (since[m]+p.Jobs[m].RemainingSteps/r[m])/denom[m])
		}
		return worst
	}
	if len(jobs) == 0 {
		return iso, nil
	}
	// best achieves bestRatio; the optimum lies in [lo, hi].
	best, bestRatio := iso, ratio(iso)
	hi, lo := bestRatio, 0.0
	for _, m := range jobs {
		lo = max(lo, since[m]/denom[m])
	}
	tol := pol.Tolerance
	if tol == 0 {
		tol = 1e-6
	}
	for range 200 {
		if hi-lo <= tol*hi {
			break
		}
		rho := (lo + hi) / 2
		a, z, err := pol.feasible(ctx, p, actual, tput, jobs, since, denom, rho)
		if err != nil && ctx.Err() != nil {
			return nil, err // cancelled: no fallback, the caller asked to stop
		}
		if err != nil {
			a := isolated(p)
			a.Objective = ratio(a)
			a.Note = fmt.Sprintf("finish-time fairness: %v; fell back to the isolated allocation", err)
			return a, nil
		}
		if z >= 1 {
			r := ratio(a)
			if r < bestRatio {
				best, bestRatio = a, r
			}
			hi = min(rho, r)
			continue
		}
		lo = rho
	}
	best.Objective = bestRatio
	return best, nil
}

// credit updates the per-job state with the progress since the last call
// and returns each job's denominator T^iso,cum_m + R_m / T^iso_m.
func (pol *FinishTimeFairness) credit(p *Problem, isoRate []float64) []float64 {
	pol.mu.Lock()
	defer pol.mu.Unlock()
	next := make(map[int]ftfState, len(p.Jobs))
	denom := make([]float64, len(p.Jobs))
	for m := range p.Jobs {
		j := &p.Jobs[m]
		st := ftfState{remaining: j.RemainingSteps, isoRate: isoRate[m]}
		if old, ok := pol.state[j.ID]; ok {
			st.cumulative = old.cumulative
			if done := old.remaining - j.RemainingSteps; done > 0 && old.isoRate > 0 {
				st.cumulative += done / old.isoRate
			}
		}
		next[j.ID] = st
		if isoRate[m] > 0 {
			denom[m] = st.cumulative + j.RemainingSteps/isoRate[m]
		}
	}
	pol.state = next
	return denom
}

// feasible solves max z s.t. rate_m >= z R_m / (rho D_m - t_m) for the
// jobs, and returns the allocation and z (z >= 1: rho is achievable).
func (pol *FinishTimeFairness) feasible(ctx context.Context, p *Problem, actual, tput [][]float64, jobs []int, since, denom []float64, rho float64) (*Allocation, float64, error) {
	g := newProgram(p, lp.Maximize, actual)
	z := g.m.AddVar(0, lp.Inf, 1)
	for _, m := range jobs {
		slack := rho*denom[m] - since[m]
		if slack <= 0 {
			return nil, 0, nil
		}
		need := p.Jobs[m].RemainingSteps / slack
		// need z - rate_m <= 0.
		g.idx, g.val = append(g.idx[:0], z), append(g.val[:0], need)
		g.rate(m, tput[m], -1)
		g.m.AddRow(-lp.Inf, 0, g.idx, g.val)
	}
	a, sol, err := g.solve(ctx, lpSolver(pol.Solver, pol.Vertex))
	if err != nil {
		return nil, 0, err
	}
	zv := sol.X[z]
	if math.IsNaN(zv) {
		return nil, 0, fmt.Errorf("no solution at rho %v", rho)
	}
	return a, zv, nil
}
