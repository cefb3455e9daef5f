package lp_test

import (
	"context"
	"errors"
	"math"
	"testing"
	"time"

	"github.com/gpusched/gpusched/allocation/lp"
	"github.com/gpusched/gpusched/allocation/lp/lptest"
)

func TestInteriorPointConformance(t *testing.T) {
	lptest.Run(t, &lp.InteriorPoint{})
}

// Random allocation-shaped LPs: the interior-point solution must be
// feasible and certified optimal by its own duals.
func TestInteriorPointAllocation(t *testing.T) {
	for _, size := range []struct{ jobs, types int }{{5, 3}, {50, 3}, {200, 3}, {100, 8}, {1000, 3}} {
		for seed := range uint64(3) {
			m := lptest.Allocation(seed, size.jobs, size.types)
			sol, err := (&lp.InteriorPoint{}).Solve(context.Background(), m)
			if err != nil {
				t.Fatalf("jobs=%d types=%d seed=%d: %v", size.jobs, size.types, seed, err)
			}
			lptest.Check(t, m, sol, sol.Objective)
			lptest.CheckDuals(t, m, sol, 1e-6)
			if sol.Objective <= 0 || sol.Objective > 1 {
				t.Errorf("max-min level %v outside (0, 1]", sol.Objective)
			}
		}
	}
}

// Random feasible, bounded LPs of every bound and row type: optimal,
// feasible and certified by the solver's own duals.
func TestInteriorPointRandom(t *testing.T) {
	for seed := range uint64(300) {
		rows, cols := 1+int(seed%23), 1+int(seed*7%31)
		m := lptest.Random(seed, rows, cols)
		sol, err := (&lp.InteriorPoint{}).Solve(context.Background(), m)
		if err != nil {
			t.Fatalf("seed %d (%d x %d): %v", seed, rows, cols, err)
		}
		lptest.Check(t, m, sol, sol.Objective)
		gap, inf := lptest.DualGap(m, sol)
		if gap > 1e-6 || inf > 1e-6 {
			t.Errorf("seed %d: relative gap %g, dual infeasibility %g", seed, gap, inf)
		}
	}
}

func TestInteriorPointRandomLarger(t *testing.T) {
	for seed := range uint64(20) {
		rows, cols := 50+int(seed*37%200), 50+int(seed*53%250)
		m := lptest.Random(1000+seed, rows, cols)
		sol, err := (&lp.InteriorPoint{}).Solve(context.Background(), m)
		if err != nil {
			t.Fatalf("seed %d (%d x %d): %v", seed, rows, cols, err)
		}
		lptest.Check(t, m, sol, sol.Objective)
		lptest.CheckDuals(t, m, sol, 1e-6)
	}
}

func TestInteriorPointLimits(t *testing.T) {
	m := lptest.Allocation(1, 300, 3)
	sol, err := (&lp.InteriorPoint{Options: lp.Options{MaxIterations: 2}}).Solve(context.Background(), m)
	if !errors.Is(err, lp.ErrIterationLimit) || sol.Status != lp.IterationLimit || len(sol.X) != m.NumVars() {
		t.Fatalf("got %v, %v", sol, err)
	}
	var se *lp.SolveError
	if !errors.As(err, &se) || se.Phase != "interior point" || se.Iteration != 2 || se.Residuals != sol.Residuals || sol.Residuals.Primal <= 0 {
		t.Fatalf("error %#v, residuals %+v", err, sol.Residuals)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	sol, err = (&lp.InteriorPoint{}).Solve(ctx, m)
	if !errors.Is(err, context.Canceled) || !errors.Is(err, lp.ErrCancelled) || sol.Status != lp.Cancelled {
		t.Fatalf("got %v, %v", sol, err)
	}
	sol, err = (&lp.InteriorPoint{Options: lp.Options{MaxSeconds: 1e-9}}).Solve(context.Background(), m)
	if !errors.Is(err, lp.ErrTimeLimit) || sol.Status != lp.TimeLimit {
		t.Fatalf("got %v, %v", sol, err)
	}
	// The limit struck before the first iteration: the error says so.
	if !errors.As(err, &se) || se.Phase != "analysis (standard form, ordering)" || se.Iteration != 0 || sol.Iterations != 0 {
		t.Fatalf("error %#v after %d iterations", err, sol.Iterations)
	}
	bad := lp.NewModel(lp.Minimize)
	bad.AddVar(0, 1, math.NaN())
	if sol, err := (&lp.InteriorPoint{}).Solve(context.Background(), bad); !errors.Is(err, lp.ErrInvalidModel) || sol != nil {
		t.Fatalf("got %v, %v", sol, err)
	}
}

// A tolerance below what rounding allows: the solve stops when its iterates
// make no more progress and returns its best point, its residuals and the
// phase that stalled.
func TestInteriorPointStall(t *testing.T) {
	m := lptest.Random(1001, 120, 150)
	ref, err := (&lp.InteriorPoint{}).Solve(context.Background(), m)
	if err != nil {
		t.Fatal(err)
	}
	sol, err := (&lp.InteriorPoint{Tolerance: 1e-18}).Solve(context.Background(), m)
	var se *lp.SolveError
	if !errors.As(err, &se) || !errors.Is(err, lp.ErrNumerical) || sol.Status != lp.Failed {
		t.Fatalf("got status %v, %v", sol.Status, err)
	}
	if se.Phase != "interior point (no progress)" || se.Residuals != sol.Residuals || se.Iteration != sol.Iterations {
		t.Errorf("error %+v, solution residuals %+v after %d iterations", se, sol.Residuals, sol.Iterations)
	}
	// The best point is as good as the converged one.
	if r := sol.Residuals; max(r.Primal, r.Dual, r.Gap) > 1e-9 || !lptest.RelClose(sol.Objective, ref.Objective, 1e-8) {
		t.Errorf("best point: objective %v (converged %v), residuals %+v", sol.Objective, ref.Objective, r)
	}
	if v := lp.CheckFeasible(m, sol.X); v > 1e-7 {
		t.Errorf("best point violates the constraints by %g", v)
	}
}

// MaxSeconds stops a long solve at an iteration boundary after the limit,
// with the best point so far.
func TestInteriorPointTimeLimit(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a 20,000-job LP")
	}
	m := lptest.Allocation(2, 20000, 8)
	const limit = 0.3
	start := time.Now()
	sol, err := (&lp.InteriorPoint{Options: lp.Options{MaxSeconds: limit}}).Solve(context.Background(), m)
	elapsed := time.Since(start).Seconds()
	if !errors.Is(err, lp.ErrTimeLimit) || sol == nil || sol.Status != lp.TimeLimit {
		t.Fatalf("got %v, %v", sol, err)
	}
	// Within 10% plus one iteration: an iteration of this size takes well
	// under a second even on a loaded machine.
	t.Logf("%.2f s, %d iterations", elapsed, sol.Iterations)
	if elapsed > 1.1*limit+1 {
		t.Errorf("returned after %.2f s with a limit of %v s (%d iterations)", elapsed, limit, sol.Iterations)
	}
	var se *lp.SolveError
	if !errors.As(err, &se) || se.Iteration != sol.Iterations || se.Phase == "" {
		t.Errorf("error %#v after %d iterations", err, sol.Iterations)
	}
	if sol.Iterations > 0 && len(sol.X) != m.NumVars() {
		t.Errorf("%d iterations but no point", sol.Iterations)
	}
}

// An InteriorPoint and a Model may be shared by goroutines that solve at
// the same time (run with -race).
func TestInteriorPointConcurrent(t *testing.T) {
	m := lptest.Allocation(4, 300, 3)
	s := &lp.InteriorPoint{}
	want, err := s.Solve(context.Background(), m)
	if err != nil {
		t.Fatal(err)
	}
	errs := make(chan error, 4)
	for range 4 {
		go func() {
			sol, err := s.Solve(context.Background(), m)
			if err == nil && sol.Objective != want.Objective {
				err = errors.New("a concurrent solve gave another objective")
			}
			errs <- err
		}()
	}
	for range 4 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}
