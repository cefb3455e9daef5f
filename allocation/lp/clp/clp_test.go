//go:build clp

package clp

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/gpusched/gpusched/allocation/lp"
	"github.com/gpusched/gpusched/allocation/lp/lptest"
)

func TestConformance(t *testing.T) {
	for _, alg := range []Algorithm{Dual, Primal, Auto} {
		t.Run(fmt.Sprint(alg), func(t *testing.T) { lptest.Run(t, &Solver{Algorithm: alg}) })
	}
}

func TestAllocationAlgorithmsAgree(t *testing.T) {
	for seed := range uint64(5) {
		m := lptest.Allocation(seed, 200, 3)
		dual, err := (&Solver{}).Solve(context.Background(), m)
		if err != nil {
			t.Fatal(err)
		}
		lptest.Check(t, m, dual, dual.Objective)
		primal, err := (&Solver{Algorithm: Primal}).Solve(context.Background(), m)
		if err != nil {
			t.Fatal(err)
		}
		lptest.Check(t, m, primal, dual.Objective)
	}
}

func TestInvalidModel(t *testing.T) {
	m := lp.NewModel(lp.Minimize)
	m.AddVar(2, 1, 0)
	sol, err := (&Solver{}).Solve(context.Background(), m)
	if !errors.Is(err, lp.ErrInvalidModel) || sol != nil {
		t.Fatalf("got %v, %v", sol, err)
	}
}

// A bounded problem with huge finite bounds is refused, not called
// unbounded (CLP reads bounds of 1e20 or more as no bound); just below, it
// is solved.
func TestHugeBounds(t *testing.T) {
	build := func(b float64) *lp.Model {
		m := lp.NewModel(lp.Maximize)
		x := m.AddVar(-b, b, 1)
		y := m.AddVar(0, 1, 1)
		m.AddRow(-lp.Inf, b, []int{x, y}, []float64{1, 1})
		return m
	}
	for _, alg := range []Algorithm{Dual, Primal, Auto, Barrier} {
		_, err := (&Solver{Algorithm: alg}).Solve(context.Background(), build(1e308))
		if !errors.Is(err, lp.ErrInvalidModel) || !strings.Contains(err.Error(), "variable 0 has bound -1e+308, which CLP reads as no bound") {
			t.Errorf("%v: bounds of 1e308: %v", alg, err)
		}
		sol, err := (&Solver{Algorithm: alg}).Solve(context.Background(), build(9e19))
		if err != nil || sol.Objective < 8.99e19 {
			t.Errorf("%v: bounds of 9e19: %v, %+v", alg, err, sol)
		}
	}
	m := lp.NewModel(lp.Minimize)
	x := m.AddVar(0, 1, 1)
	m.AddRow(-1e20, 1, []int{x}, []float64{1})
	if _, err := (&Solver{}).Solve(context.Background(), m); !errors.Is(err, lp.ErrInvalidModel) || !strings.Contains(err.Error(), "row 0 has bound -1e+20") {
		t.Errorf("row bound -1e20: %v", err)
	}
}

func TestCancelledAndLimits(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	m := lptest.Allocation(1, 50, 3)
	sol, err := (&Solver{}).Solve(ctx, m)
	if !errors.Is(err, context.Canceled) || !errors.Is(err, lp.ErrCancelled) || sol.Status != lp.Cancelled {
		t.Fatalf("got %v, %v", sol, err)
	}
	sol, err = (&Solver{Options: lp.Options{MaxIterations: 3}}).Solve(context.Background(), lptest.Allocation(1, 500, 3))
	if !errors.Is(err, lp.ErrIterationLimit) || sol.Status != lp.IterationLimit {
		t.Fatalf("got status %v, %v", sol.Status, err)
	}
}

func BenchmarkAllocation(b *testing.B) {
	for _, types := range []int{3, 8} {
		for _, jobs := range []int{100, 1000, 10000} {
			m := lptest.Allocation(1, jobs, types)
			b.Run(fmt.Sprintf("jobs=%d/types=%d", jobs, types), func(b *testing.B) {
				for b.Loop() {
					if _, err := (&Solver{}).Solve(context.Background(), m); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

func BenchmarkThroughput(b *testing.B) {
	for _, jobs := range []int{1000, 10000} {
		m := lptest.Throughput(1, jobs, 3)
		b.Run(fmt.Sprintf("jobs=%d/types=3", jobs), func(b *testing.B) {
			for b.Loop() {
				if _, err := (&Solver{}).Solve(context.Background(), m); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestMPSRoundTrip writes each conformance model as MPS, reads it back with
// CLP's own reader and checks that CLP finds the same optimum.
func TestMPSRoundTrip(t *testing.T) {
	for _, c := range lptest.Cases() {
		if c.Err != nil {
			continue
		}
		t.Run(c.Name, func(t *testing.T) {
			m := c.Build()
			obj, err := solveMPS(t, m)
			if err != nil {
				t.Fatal(err)
			}
			if !lptest.RelClose(obj, c.Objective, 1e-9) {
				t.Fatalf("objective from MPS %v, want %v", obj, c.Objective)
			}
		})
	}
}

func TestMPSRoundTripAllocation(t *testing.T) {
	m := lptest.Allocation(7, 40, 3)
	direct, err := (&Solver{}).Solve(context.Background(), m)
	if err != nil {
		t.Fatal(err)
	}
	obj, err := solveMPS(t, m)
	if err != nil {
		t.Fatal(err)
	}
	if !lptest.RelClose(obj, direct.Objective, 1e-9) {
		t.Fatalf("objective from MPS %v, direct %v", obj, direct.Objective)
	}
}

// TestCrossCheckInteriorPoint: the pure-Go backend and CLP agree on seeded
// allocation-shaped problems, objective to 1e-6 relative, both feasible to
// 1e-7.
func TestCrossCheckInteriorPoint(t *testing.T) {
	for _, size := range []struct{ jobs, types int }{{10, 3}, {100, 3}, {300, 8}, {2000, 3}} {
		for seed := range uint64(6) {
			m := lptest.Allocation(seed, size.jobs, size.types)
			if seed >= 3 {
				m = lptest.Throughput(seed, size.jobs, size.types)
			}
			ref, err := (&Solver{}).Solve(context.Background(), m)
			if err != nil {
				t.Fatal(err)
			}
			got, err := (&lp.InteriorPoint{}).Solve(context.Background(), m)
			if err != nil {
				t.Fatal(err)
			}
			lptest.Check(t, m, ref, ref.Objective)
			lptest.Check(t, m, got, ref.Objective)
		}
	}
	for _, c := range lptest.Cases() {
		if c.Err != nil {
			continue
		}
		ref, err := (&Solver{}).Solve(context.Background(), c.Build())
		if err != nil {
			t.Fatal(err)
		}
		got, err := (&lp.InteriorPoint{}).Solve(context.Background(), c.Build())
		if err != nil {
			t.Fatal(err)
		}
		if !lptest.RelClose(got.Objective, ref.Objective, 1e-6) {
			t.Errorf("%s: interior point %v, CLP %v", c.Name, got.Objective, ref.Objective)
		}
	}
}

// TestCrossCheckRandom: both backends agree on random LPs of every bound
// and row type.
func TestCrossCheckRandom(t *testing.T) {
	for seed := range uint64(200) {
		rows, cols := 1+int(seed%60), 1+int(seed*7%80)
		m := lptest.Random(seed, rows, cols)
		ref, err := (&Solver{}).Solve(context.Background(), m)
		if err != nil {
			t.Fatalf("seed %d: CLP: %v", seed, err)
		}
		got, err := (&lp.InteriorPoint{}).Solve(context.Background(), m)
		if err != nil {
			t.Fatalf("seed %d: interior point: %v", seed, err)
		}
		lptest.Check(t, m, ref, ref.Objective)
		lptest.Check(t, m, got, ref.Objective)
	}
}

// randomAny is a random LP that may be infeasible or unbounded.
func randomAny(seed uint64) *lp.Model {
	rng := rand.New(rand.NewPCG(seed, 77))
	m := lp.NewModel(lp.Minimize)
	cols, rows := 1+rng.IntN(6), rng.IntN(6)
	for range cols {
		lo, up := -lp.Inf, lp.Inf
		if rng.IntN(3) > 0 {
			lo = float64(rng.IntN(5) - 2)
		}
		if rng.IntN(3) == 0 {
			up = max(lo, 0) + float64(rng.IntN(4))
		}
		m.AddVar(lo, up, float64(rng.IntN(7)-3))
	}
	for range rows {
		k := 1 + rng.IntN(cols)
		idx := rng.Perm(cols)[:k]
		val := make([]float64, k)
		for e := range val {
			val[e] = float64(rng.IntN(7) - 3)
			if val[e] == 0 {
				val[e] = 2
			}
		}
		lo, up := -lp.Inf, lp.Inf
		switch rng.IntN(3) {
		case 0:
			lo = float64(rng.IntN(9) - 4)
		case 1:
			up = float64(rng.IntN(9) - 4)
		default:
			lo = float64(rng.IntN(9) - 4)
			up = lo
		}
		m.AddRow(lo, up, idx, val)
	}
	return m
}

// TestCrossCheckStatus: on random LPs that may be infeasible or unbounded,
// the interior-point method reports what CLP reports.
func TestCrossCheckStatus(t *testing.T) {
	counts := map[lp.Status]int{}
	clpWrong := 0
	for seed := range uint64(3000) {
		m := randomAny(seed)
		ref, _ := (&Solver{}).Solve(context.Background(), m)
		got, err := (&lp.InteriorPoint{}).Solve(context.Background(), m)
		counts[ref.Status]++
		if got == nil {
			t.Fatalf("seed %d: no solution, error %v", seed, err)
		}
		if got.Status != ref.Status {
			// Decide with CLP on the two auxiliary LPs, which are always
			// feasible and bounded.
			truth := verdict(t, m)
			if got.Status != truth {
				t.Errorf("seed %d: interior point %v (%v), CLP %v, auxiliary LPs say %v", seed, got.Status, err, ref.Status, truth)
			} else {
				clpWrong++
			}
			continue
		}
		if ref.Status == lp.Optimal && !lptest.RelClose(got.Objective, ref.Objective, 1e-6) {
			t.Errorf("seed %d: objective %v, CLP %v", seed, got.Objective, ref.Objective)
		}
	}
	t.Logf("CLP statuses: %v; CLP's status contradicted by the auxiliary LPs: %d", counts, clpWrong)
	if counts[lp.Optimal] < 50 || counts[lp.Infeasible] < 50 || counts[lp.Unbounded] < 20 {
		t.Errorf("the generator should produce every status: %v", counts)
	}
}

// verdict classifies m with CLP on lp.InfeasibilityModel and lp.RayModel.
func verdict(t *testing.T, m *lp.Model) lp.Status {
	t.Helper()
	inf, err := (&Solver{}).Solve(context.Background(), lp.InfeasibilityModel(m))
	if err != nil {
		t.Fatalf("infeasibility model: %v", err)
	}
	if inf.Objective > 1e-7 {
		return lp.Infeasible
	}
	ray, err := (&Solver{}).Solve(context.Background(), lp.RayModel(m))
	if err != nil {
		t.Fatalf("ray model: %v", err)
	}
	if ray.Objective < -1e-7 {
		return lp.Unbounded
	}
	return lp.Optimal
}
