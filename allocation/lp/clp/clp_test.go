//go:build clp

package clp

import (
	"context"
	"errors"
	"fmt"
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
