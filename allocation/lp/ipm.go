package lp

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"
)

// InteriorPoint is gpusched's pure-Go LP solver and the default backend: the
// homogeneous self-dual interior-point method (Ye, Todd and Mizuno, Math.
// Oper. Res. 19, 1994; Xu, Hung and Ye, Annals Oper. Res. 62, 1996; upper
// bounds as in Andersen and Andersen's MOSEK optimizer, 2000) with
// Mehrotra's predictor-corrector, on a scaled standard form, solving
// its normal equations with a sparse Cholesky factorisation refined by
// preconditioned conjugate gradients.
//
// It stops when the relative primal and dual residuals and the relative
// duality gap of the scaled problem are all below Tolerance (row by row
// and column by column, relative to the sizes of the data and of the
// terms, the gap in the model's units), or when a Farkas certificate proves
// the problem infeasible, or a ray proves the dual infeasible (then a
// phase-1 check of the constraints tells unbounded from infeasible). When the iterates stop making progress, a best point
// within ten times the tolerance is accepted as optimal (Solution.Residuals
// says how near it is), and otherwise the phase-1 and ray LPs classify the
// problem. A solve that stops short (iteration limit, time limit, no
// progress) returns its best point with its residuals and a *[SolveError]
// that names the phase. MaxSeconds is checked between iterations and
// through the analysis that comes before them.
//
// Before it reports Optimal, a solve checks its point on the model as
// given ([ModelResiduals], unscaled, against ModelTolerance): a point
// that passes the scaled problem's stopping rules but not the model's
// ends Failed with a SolveError of phase "final check on the model as
// given". Subnormal entries of A, and entries at most 1e-15 of both the
// largest of their row and of their column, are left out (scaling cannot
// bring them near 1: 5e-324 x <= 1 beside x + 2y <= 4 gave a point
// violating x + 2y <= 4 by 2.8 reported optimal); a row whose entries are
// all far from 1 has its slack scaled with it; a side of a row beyond
// 1e20 (in units of its entries, as CLP reads bounds) is left open, its
// dual 0. The final check is what makes these safe.
//
// A solve takes the analysis of its normal equations and its work vectors
// from one of the last solves of the same sparsity pattern when there is
// one: exactly what a fresh solve computes, at less cost when a policy
// solves LPs of one shape round after round.
//
// The zero value is ready to use. An InteriorPoint holds only settings: it
// is safe for concurrent use by several goroutines (the recent workspaces
// are in a sync.Pool; a solve holds its own).
type InteriorPoint struct {
	// Options bound iterations (default 200) and time.
	Options Options
	// Tolerance is the relative accuracy; 0 means 1e-9.
	Tolerance float64
	// ModelTolerance bounds the residuals of the returned point on the
	// model as given, unscaled (ModelResiduals), which a solve checks
	// before it reports Optimal: beyond, the solve fails with a
	// SolveError (ErrNumerical) whose Residuals are the model's, and the
	// point in Solution.X. 0 means DefaultModelTolerance (1e-5).
	ModelTolerance float64
	// Crossover asks for a vertex: the interior solution, the analytic
	// centre of the optimal face, is moved to a basic optimal solution (a
	// vertex of that face) by Megiddo's crossover (ORSA J. Computing 3(1),
	// 1991) and a primal simplex cleanup, and Solution.Vertex says so. The duals stay the interior ones, which are
	// optimal for the vertex too. If the crossover fails numerically, the
	// centre is returned with Vertex false.
	Crossover bool
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
		return s.fail(ctx, err, res, m)
	}
	switch res.status {
	case Optimal:
		sol := res.solution(m)
		if !res.sf.removedRowsHold(m, sol.X) {
			// A dependent equality set aside contradicts the others.
			return &Solution{Status: Infeasible, Iterations: res.iters}, ErrInfeasible
		}
		sol.ModelResiduals = ModelResiduals(m, sol.X, sol.Duals)
		if s.Crossover {
			xs := make([]float64, len(res.x))
			for j, v := range res.x {
				xs[j] = v / res.tau
			}
			ys := make([]float64, len(res.y))
			for i, v := range res.y {
				ys[i] = v / res.tau
			}
			if vx, err := vertex(ctx, res.sf, xs, ys); err == nil {
				x := res.sf.modelX(res.sf.unscaleX(vx, 1))
				for j, v := range x {
					x[j] = min(max(v, m.colLo[j]), m.colUp[j])
				}
				// The vertex is kept if it passes the final check; else
				// the centre, if it does (as when crossover fails).
				if r := ModelResiduals(m, x, sol.Duals); s.passes(r) || !s.passes(sol.ModelResiduals) {
					sol.X, sol.Vertex, sol.ModelResiduals = x, true, r
					sol.Objective = m.ObjectiveValue(x)
				}
			}
		}
		if !s.passes(sol.ModelResiduals) {
			// The scaled problem's stopping rules passed, the model's
			// residuals do not: never an optimum.
			sol.Status = Failed
			return sol, &SolveError{Phase: "final check on the model as given", Iteration: res.iters, Residuals: sol.ModelResiduals, kind: ErrNumerical}
		}
		return sol, nil
	case Infeasible:
		return &Solution{Status: Infeasible, Iterations: res.iters}, ErrInfeasible
	case Unbounded:
		return s.unbounded(ctx, m, res)
	case Failed:
		// No progress: the iterates of an infeasible or unbounded problem
		// can crawl towards their certificate. Decide with the auxiliary
		// LPs, which are feasible and bounded.
		if st, iters, err := s.classify(ctx, m); err == nil && st != Optimal {
			return &Solution{Status: st, Iterations: res.iters + iters}, StatusError(st, nil)
		}
	}
	sol := res.solution(m)
	kind := StatusError(res.status, nil)
	phase := "interior point"
	if res.status == Failed {
		phase = "interior point (no progress)"
	}
	return sol, &SolveError{Phase: phase, Iteration: res.iters, Residuals: res.best, kind: kind}
}

// unbounded decides a solve that ended with a ray, a proof that the dual
// is infeasible: the primal is unbounded if it is feasible (a phase-1
// LP). When a row side beyond infiniteBound was left open, that side may
// be what bounds the objective: the ray LP of the model as given decides,
// and a model it finds bounded ends Failed (no optimum was found).
func (s *InteriorPoint) unbounded(ctx context.Context, m *Model, res *ipmResult) (*Solution, error) {
	var st Status
	var iters int
	var err error
	if res.sf.opened != nil {
		st, iters, err = s.classify(ctx, m)
	} else {
		var feasible bool
		feasible, iters, err = s.feasible(ctx, m)
		st = Infeasible
		if feasible {
			st = Unbounded
		}
	}
	iters += res.iters
	switch {
	case err != nil:
		sol := res.solution(m)
		sol.Status, sol.Iterations = Failed, iters
		return s.failWith(ctx, sol, err)
	case st == Optimal:
		return &Solution{Status: Failed, Iterations: iters}, &SolveError{Phase: fmt.Sprintf("interior point (a row bound beyond %g left open bounds the objective)", infiniteBound),
			Iteration: res.iters, Residuals: res.best, kind: ErrNumerical}
	}
	return &Solution{Status: st, Iterations: iters}, StatusError(st, nil)
}

// DefaultModelTolerance is InteriorPoint's default ModelTolerance: the
// clipping of an interior point into its bounds moves its rows by a few
// 1e-6 at most on the netlib set (czprob: 2.5e-6; its scaled residuals
// are below 1e-9), and a point that is wrong is wrong by far more (the
// 5e-324 x <= 1 case violated a row by 0.36 of its size).
const DefaultModelTolerance = 1e-5

// passes reports whether the model's residuals of a point are within
// ModelTolerance.
func (s *InteriorPoint) passes(r Residuals) bool {
	tol := s.ModelTolerance
	if tol <= 0 {
		tol = DefaultModelTolerance
	}
	return r.Primal <= tol && r.Dual <= tol && r.Gap <= tol
}

// auxTolerance is the accuracy of the auxiliary LPs, which only decide a
// sign.
const auxTolerance = 1e-7

// feasible solves m's phase-1 LP and reports whether the least total
// violation of m's rows, each relative to the size of its row, is 0 (to
// 1e-6). The phase-1 LP is InfeasibilityModel with each row's violation
// measured in units of the row's largest coefficient and bound, so that
// rows of very different scales (steps of 1 and of 1e10) weigh alike.
func (s *InteriorPoint) feasible(ctx context.Context, m *Model) (bool, int, error) {
	aux := &InteriorPoint{Tolerance: max(s.tol(), auxTolerance)}
	a := NewModel(Minimize)
	for j := range m.obj {
		a.AddVar(m.colLo[j], m.colUp[j], 0)
	}
	var idx []int
	var val []float64
	for i := range m.rowLo {
		ri, rv := m.Row(i)
		w := 1.0
		for _, v := range rv {
			w = max(w, math.Abs(v))
		}
		for _, b := range []float64{m.rowLo[i], m.rowUp[i]} {
			if !math.IsInf(b, 0) {
				w = max(w, math.Abs(b))
			}
		}
		p := a.AddVar(0, Inf, 1)
		n := a.AddVar(0, Inf, 1)
		idx = append(append(idx[:0], ri...), p, n)
		val = append(append(val[:0], rv...), w, -w)
		a.AddRow(m.rowLo[i], m.rowUp[i], idx, val)
	}
	res, err := aux.run(ctx, a, defaultMaxIter)
	iters := 0
	if res != nil {
		iters = res.iters
	}
	if err != nil {
		return false, iters, err
	}
	if res.status != Optimal {
		return false, iters, &SolveError{Phase: "phase-1 LP (least total violation of the rows)", Iteration: res.iters, Residuals: res.best, kind: ErrNumerical}
	}
	return res.objective() <= 1e-6, iters, nil
}

// classify decides with the auxiliary LPs whether m is infeasible,
// unbounded, or neither (Optimal: feasible and bounded).
func (s *InteriorPoint) classify(ctx context.Context, m *Model) (Status, int, error) {
	feasible, iters, err := s.feasible(ctx, m)
	if err != nil || !feasible {
		return Infeasible, iters, err
	}
	aux := &InteriorPoint{Tolerance: max(s.tol(), auxTolerance)}
	res, err := aux.run(ctx, RayModel(m), defaultMaxIter)
	if res != nil {
		iters += res.iters
	}
	if err != nil {
		return Optimal, iters, err
	}
	if res.status != Optimal {
		return Optimal, iters, &SolveError{Phase: "ray LP (best direction of improvement)", Iteration: res.iters, Residuals: res.best, kind: ErrNumerical}
	}
	if res.objective() < -1e-6*(1+normInf(m.obj)) {
		return Unbounded, iters, nil
	}
	return Optimal, iters, nil
}

// failWith returns sol with the status and error of err: a context's end,
// or a numerical failure.
func (s *InteriorPoint) failWith(ctx context.Context, sol *Solution, err error) (*Solution, error) {
	if ctx.Err() != nil {
		if errors.Is(context.Cause(ctx), errTimeLimit) {
			sol.Status = TimeLimit
			return sol, fmt.Errorf("%w: %w", ErrTimeLimit, err)
		}
		sol.Status = Cancelled
		return sol, StatusError(Cancelled, ctx.Err())
	}
	sol.Status = Failed
	if errors.Is(err, ErrNumerical) {
		return sol, err
	}
	return sol, StatusError(Failed, err)
}

var errTimeLimit = errors.New("time limit")

// traceIPM, when set (by tests), receives a line per iteration.
var traceIPM func(format string, args ...any)

// SolveError reports a solve that stopped without an answer: the phase
// that stopped, its iteration, and the residuals of the best point it
// found (which the Solution returned with the error holds). It matches
// the package's Err value of the outcome (ErrNumerical when the iterates
// made no more progress, ErrIterationLimit, ErrTimeLimit) with errors.Is.
type SolveError struct {
	Phase     string
	Iteration int
	Residuals Residuals
	kind      error
}

func (e *SolveError) Error() string {
	return fmt.Sprintf("%v: %s stopped at iteration %d (relative primal residual %.2g, dual residual %.2g, gap %.2g)",
		e.kind, e.Phase, e.Iteration, e.Residuals.Primal, e.Residuals.Dual, e.Residuals.Gap)
}

// Unwrap returns the outcome's Err value.
func (e *SolveError) Unwrap() error { return e.kind }

func (s *InteriorPoint) tol() float64 {
	if s.Tolerance > 0 {
		return s.Tolerance
	}
	return 1e-9
}

// defaultMaxIter bounds the interior-point iterations; a well-posed
// problem needs 10 to 60.
const defaultMaxIter = 200

func (s *InteriorPoint) maxIter() int {
	if s.Options.MaxIterations > 0 {
		return s.Options.MaxIterations
	}
	return defaultMaxIter
}

// fail turns a context or factorisation error into a status, with the best
// point when there is one.
func (s *InteriorPoint) fail(ctx context.Context, err error, res *ipmResult, m *Model) (*Solution, error) {
	sol := &Solution{Status: Failed}
	if res != nil && res.point {
		sol = res.solution(m)
	}
	if ctx.Err() != nil {
		if errors.Is(context.Cause(ctx), errTimeLimit) {
			sol.Status = TimeLimit
			if res != nil {
				return sol, &SolveError{Phase: res.phase(), Iteration: res.iters, Residuals: res.best, kind: ErrTimeLimit}
			}
			return sol, ErrTimeLimit
		}
		sol.Status = Cancelled
		return sol, StatusError(Cancelled, ctx.Err())
	}
	sol.Status = Failed
	return sol, StatusError(Failed, err)
}

// InfeasibilityModel returns the LP that minimises the total violation
// p + n of m's rows over m's variable bounds. It is always feasible and
// bounded; m is feasible exactly when its optimum is 0. InteriorPoint uses
// it to tell an unbounded problem from one that is infeasible and has a
// ray, and tests use it to check any backend's verdict.
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
// when the optimum is negative. Tests use it to check any backend's
// verdict.
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
	// The best point (scaled std form) and its residuals.
	x, y  []float64
	tau   float64
	best  Residuals
	point bool // x, y and tau hold a point
	// started says whether the iterations began (else the time went to the
	// analysis).
	started bool
}

func (r *ipmResult) phase() string {
	if r.started {
		return "interior point"
	}
	return "analysis (standard form, ordering)"
}

// objective returns the minimisation objective c'x of the std form in
// model units (fixed variables left out).
func (r *ipmResult) objective() float64 {
	sf := r.sf
	x := sf.unscaleX(r.x, r.tau)
	v := 0.0
	for j, xj := range x {
		v += sf.c[j] * sf.cScale / sf.colScale[j] * xj
	}
	return v
}

func (r *ipmResult) solution(m *Model) *Solution {
	sol := &Solution{Status: r.status, Iterations: r.iters, Residuals: r.best}
	if !r.point {
		return sol
	}
	sol.X = r.sf.modelX(r.sf.unscaleX(r.x, r.tau))
	// Interior iterates meet the bounds up to the tolerance; put them
	// exactly inside.
	for j, v := range sol.X {
		sol.X[j] = min(max(v, m.colLo[j]), m.colUp[j])
	}
	sol.Duals = r.sf.modelDuals(r.sf.unscaleY(r.y, r.tau))
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

// stallIterations is how many iterations without a better point make a
// solve give up.
const stallIterations = 30

// nearTolerance is how far above the tolerance the best point of a solve
// whose iterates stop improving may be and still count as optimal: near
// the optimum the normal equations grow as ill-conditioned as the
// complementarity is small, and the last digit the tolerance asks for is
// sometimes out of reach of double precision. Solution.Residuals reports
// what was reached.
const nearTolerance = 10

// run is one interior-point solve of m in at most maxIter iterations. It
// returns status Optimal, Infeasible, Unbounded (a ray: the dual is
// infeasible), IterationLimit, or Failed when the iterates stopped making
// progress; res.x is then the best point.
func (s *InteriorPoint) run(ctx context.Context, mod *Model, maxIter int) (*ipmResult, error) {
	sf, err := newStdForm(ctx, mod)
	if err != nil {
		// Only a context's end stops newStdForm; the result says where.
		return &ipmResult{status: IterationLimit}, err
	}
	res := &ipmResult{sf: sf, status: IterationLimit}
	ws, err := acquireWorkspace(ctx, sf)
	if err != nil {
		return res, err
	}
	defer releaseWorkspace(ws)
	if err := ctx.Err(); err != nil {
		return res, err
	}
	h := newHSD(sf, ws.ne, s.tol(), ws.vecs)
	if err := h.start(); err != nil {
		return res, err
	}
	if err := ctx.Err(); err != nil {
		return res, err
	}
	res.started = true
	tol := s.tol()
	bestMerit := math.Inf(1)
	bestIter := 0
	keep := func(mm measures) {
		res.point = true
		res.x = append(res.x[:0], h.x...)
		res.y = append(res.y[:0], h.y...)
		res.tau = h.tau
		res.best = Residuals{Primal: mm.primal, Dual: mm.dual, Gap: mm.gap}
	}
	small := 0
	for res.iters = 0; ; res.iters++ {
		h.residuals()
		mm := h.measure()
		if merit := mm.worst(); merit < bestMerit || !res.point {
			if merit < 0.9*bestMerit {
				bestIter = res.iters
			}
			bestMerit = min(bestMerit, merit)
			keep(mm)
		}
		if mm.worst() <= tol {
			res.status = Optimal
			return res, nil
		}
		if st := h.infeasibility(max(tol, 1e-8)); st != Optimal {
			res.status = st
			return res, nil
		}
		if res.iters >= maxIter {
			res.status = IterationLimit
			return res, nil
		}
		// A direction that wrecks a near-optimal point means the normal
		// equations have lost their accuracy: stop at once.
		wrecked := bestMerit <= nearTolerance*tol && mm.worst() > 1e3*bestMerit
		if res.iters-bestIter > stallIterations || small >= 5 || wrecked {
			res.status = Failed
			if bestMerit <= nearTolerance*tol {
				res.status = Optimal
			}
			return res, nil
		}
		if err := ctx.Err(); err != nil {
			return res, err
		}
		alpha, err := h.step()
		if err != nil {
			return res, err
		}
		if traceIPM != nil {
			p, d := h.objectives()
			traceIPM("it %3d  p %.6e d %.6e  tau %.2e kappa %.2e mu %.2e  alpha %.3f  primal %.1e dual %.1e gap %.1e  |rp| %.1e |rl| %.1e |ru| %.1e |rd| %.1e\n",
				res.iters, p/h.tau, d/h.tau, h.tau, h.kappa, h.mu(), alpha, mm.primal, mm.dual, mm.gap, normInf(h.rp), normInf(h.rl), normInf(h.ru), normInf(h.rd))
		}
		if alpha < 1e-8 {
			small++
		} else {
			small = 0
		}
	}
}
