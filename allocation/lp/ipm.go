package lp

import (
	"context"
	"errors"
	"math"
	"time"
)

// InteriorPoint is gpusched's pure-Go LP solver and the default backend: a
// primal-dual interior-point method with Mehrotra's predictor-corrector
// (S. Mehrotra, "On the implementation of a primal-dual interior point
// method", SIAM J. Optim. 2(4), 1992; the bounded-variable form of
// S. J. Wright, "Primal-Dual Interior-Point Methods", SIAM 1997, chapter
// 11), solving its normal equations with a sparse Cholesky factorisation
// and treating dense columns by the Sherman-Morrison-Woodbury formula.
//
// It stops when the relative primal and dual residuals and the relative
// duality gap are all below Tolerance. When it cannot converge it decides
// between infeasible and unbounded with two auxiliary LPs that are always
// feasible and bounded: the least total violation of the rows, and the
// best objective over recession directions in a unit box.
//
// The zero value is ready to use.
type InteriorPoint struct {
	// Options bound iterations (default 200 per phase) and time.
	Options Options
	// Tolerance is the relative accuracy; 0 means 1e-9.
	Tolerance float64
}

// Solve implements [Solver].
func (s *InteriorPoint) Solve(ctx context.Context, m *Model) (*Solution, error) {
	if err := m.Validate(); err != nil {
		return nil, err
	}
	if s.Options.MaxSeconds > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeoutCause(ctx, time.Duration(s.Options.MaxSeconds*float64(time.Second)), errTimeLimit)
		defer cancel()
	}
	res, err := s.run(ctx, m, s.maxIter())
	if err != nil {
		return s.fail(ctx, err, res)
	}
	if res.status == Optimal {
		sol := res.solution(m)
		if res.sf.removedRowsHold(m, sol.X) {
			return sol, nil
		}
		// A dependent equality dropped by the presolve contradicts the
		// others: let the certificates below say so.
	}
	if res.status == IterationLimit && s.Options.MaxIterations > 0 {
		sol := res.solution(m)
		sol.Status = IterationLimit
		return sol, ErrIterationLimit
	}
	// No convergence: find out why.
	iters := res.iters
	infeasibility, auxIters, err := s.aux(ctx, InfeasibilityModel(m))
	iters += auxIters
	if err != nil {
		return s.fail(ctx, err, res)
	}
	if infeasibility > s.tol()*100*(1+rowScale(m)) {
		return &Solution{Status: Infeasible, Iterations: iters}, ErrInfeasible
	}
	ray, auxIters, err := s.aux(ctx, RayModel(m))
	iters += auxIters
	if err != nil {
		return s.fail(ctx, err, res)
	}
	if ray < -s.tol()*100*(1+normInf(m.obj)) {
		return &Solution{Status: Unbounded, Iterations: iters}, ErrUnbounded
	}
	sol := res.solution(m)
	sol.Iterations = iters
	if res.status == IterationLimit {
		sol.Status = IterationLimit
		return sol, ErrIterationLimit
	}
	sol.Status = Failed
	return sol, StatusError(Failed, errors.New("interior-point iterates diverged on a feasible, bounded problem"))
}

var errTimeLimit = errors.New("time limit")

func (s *InteriorPoint) tol() float64 {
	if s.Tolerance > 0 {
		return s.Tolerance
	}
	return 1e-9
}

// defaultMaxIter bounds each interior-point run; a well-posed problem needs
// 10 to 50 iterations.
const defaultMaxIter = 200

func (s *InteriorPoint) maxIter() int {
	if s.Options.MaxIterations > 0 {
		return s.Options.MaxIterations
	}
	return defaultMaxIter
}

// fail turns a context or factorisation error into a status.
func (s *InteriorPoint) fail(ctx context.Context, err error, res *ipmResult) (*Solution, error) {
	iters := 0
	if res != nil {
		iters = res.iters
	}
	if ctx.Err() != nil {
		if errors.Is(context.Cause(ctx), errTimeLimit) {
			return &Solution{Status: TimeLimit, Iterations: iters}, ErrTimeLimit
		}
		return &Solution{Status: Cancelled, Iterations: iters}, StatusError(Cancelled, ctx.Err())
	}
	return &Solution{Status: Failed, Iterations: iters}, StatusError(Failed, err)
}

// aux solves an auxiliary LP and returns its objective.
func (s *InteriorPoint) aux(ctx context.Context, m *Model) (float64, int, error) {
	res, err := s.run(ctx, m, defaultMaxIter)
	if err != nil {
		return 0, 0, err
	}
	if res.status != Optimal {
		return 0, res.iters, errors.New("auxiliary problem did not converge")
	}
	return m.ObjectiveValue(res.sf.modelX(res.x)), res.iters, nil
}

func rowScale(m *Model) float64 {
	s := 0.0
	for i := range m.rowLo {
		for _, v := range []float64{m.rowLo[i], m.rowUp[i]} {
			if !math.IsInf(v, 0) {
				s = max(s, math.Abs(v))
			}
		}
	}
	return s
}

// InfeasibilityModel returns the LP that minimises the total violation
// p + n of m's rows over m's variable bounds. It is always feasible and
// bounded; m is feasible exactly when its optimum is 0. InteriorPoint uses
// it to certify infeasibility, and tests use it to check any backend's
// verdict.
func InfeasibilityModel(m *Model) *Model {
	a := NewModel(Minimize)
	for j := range m.obj {
		a.AddVar(m.colLo[j], m.colUp[j], 0)
	}
	for i := range m.rowLo {
		idx, val := m.Row(i)
		p := a.AddVar(0, Inf, 1)
		n := a.AddVar(0, Inf, 1)
		a.AddRow(m.rowLo[i], m.rowUp[i], append(append([]int(nil), idx...), p, n), append(append([]float64(nil), val...), 1, -1))
	}
	return a
}

// RayModel returns the LP that minimises c'r (m's objective, as a
// minimisation) over the recession directions r of m's feasible set with
// -1 <= r <= 1. It is always feasible and bounded; a negative optimum is a
// direction of unbounded improvement, so a feasible m is unbounded exactly
// when the optimum is negative.
func RayModel(m *Model) *Model {
	a := NewModel(Minimize)
	for j := range m.obj {
		lo, up := -1.0, 1.0
		if !math.IsInf(m.colLo[j], -1) {
			lo = 0
		}
		if !math.IsInf(m.colUp[j], 1) {
			up = 0
		}
		a.AddVar(lo, up, float64(m.sense)*m.obj[j])
	}
	for i := range m.rowLo {
		idx, val := m.Row(i)
		lo, up := -Inf, Inf
		if !math.IsInf(m.rowLo[i], -1) {
			lo = 0
		}
		if !math.IsInf(m.rowUp[i], 1) {
			up = 0
		}
		a.AddRow(lo, up, idx, val)
	}
	return a
}

// ipmResult is the end state of one interior-point run.
type ipmResult struct {
	sf     *stdForm
	status Status
	iters  int
	x, y   []float64
}

func (r *ipmResult) solution(m *Model) *Solution {
	sol := &Solution{Status: r.status, Iterations: r.iters}
	sol.X = r.sf.modelX(r.x)
	// Interior iterates meet the bounds up to the tolerance; put them
	// exactly inside.
	for j, v := range sol.X {
		sol.X[j] = min(max(v, m.colLo[j]), m.colUp[j])
	}
	sol.Duals = r.sf.modelDuals(r.y)
	sol.ReducedCosts = make([]float64, len(m.obj))
	copy(sol.ReducedCosts, m.obj)
	for i := range m.rowLo {
		idx, val := m.Row(i)
		for k, j := range idx {
			sol.ReducedCosts[j] -= val[k] * sol.Duals[i]
		}
	}
	sol.Objective = m.ObjectiveValue(sol.X)
	return sol
}

// run is one interior-point solve of m in at most maxIter iterations. It
// returns status Optimal, IterationLimit when it ran out of iterations, or
// Failed when the iterates diverged (the problem is infeasible or
// unbounded).
func (s *InteriorPoint) run(ctx context.Context, mod *Model, maxIter int) (*ipmResult, error) {
	sf := newStdForm(mod)
	ne, err := newNormalEq(sf)
	if err != nil {
		return nil, err
	}
	it := newIterate(sf, ne)
	res := &ipmResult{sf: sf, status: IterationLimit}
	if err := it.start(); err != nil {
		return res, err
	}
	tol := s.tol()
	for res.iters = 0; res.iters < maxIter; res.iters++ {
		if err := ctx.Err(); err != nil {
			return res, err
		}
		if it.converged(tol) {
			res.status = Optimal
			break
		}
		if it.diverged() {
			res.status = Failed
			break
		}
		if err := it.step(); err != nil {
			return res, err
		}
	}
	res.x, res.y = it.x, it.y
	return res, nil
}
