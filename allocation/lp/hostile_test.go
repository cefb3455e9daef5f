package lp_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/gpusched/gpusched/allocation/lp"
)

// Tiny, subnormal and huge numbers beside the textbook max (x + 2y <= 4,
// 3x + y <= 6): every such LP is solved, its point checked on the model as
// given. Before, 5e-324 x <= 1 and rows in units of 1e-160 to 1e-300 gave
// points violating x + 2y <= 4 by a third of its size reported Optimal,
// and a row x <= 1e20 (or 1e-30 x <= 1) stalled.
func TestTinyCoefficients(t *testing.T) {
	for _, a := range []float64{5e-324, 1e-310, 1e-300, 1e-200, 1e-160, 1e-100, 1e-30, 1e-20, 1e-12} {
		for _, tc := range []struct {
			shape string
			row   func(m *lp.Model)
			want  float64
		}{
			{"a x <= 1 (x <= 1/a)", func(m *lp.Model) { m.AddRow(-lp.Inf, 1, []int{0}, []float64{a}) }, 2.8},
			{"a x + y <= 1 (y <= 1)", func(m *lp.Model) { m.AddRow(-lp.Inf, 1, []int{0, 1}, []float64{a, 1}) }, 8.0 / 3},
			{"a x <= a (x <= 1 in units of a)", func(m *lp.Model) { m.AddRow(-lp.Inf, a, []int{0}, []float64{a}) }, 2.5},
			{"a x + a y <= a (x + y <= 1 in units of a)", func(m *lp.Model) { m.AddRow(-lp.Inf, a, []int{0, 1}, []float64{a, a}) }, 1},
			{"x <= 1/a as a row", func(m *lp.Model) { m.AddRow(-lp.Inf, min(1/a, lp.Inf), []int{0}, []float64{1}) }, 2.8},
		} {
			want := tc.want
			if a < 0x1p-1022 && (tc.shape == "a x <= a (x <= 1 in units of a)" || tc.shape == "a x + a y <= a (x + y <= 1 in units of a)") {
				// A subnormal row is below every tolerance: it is left out.
				want = 2.8
			}
			for _, cross := range []bool{false, true} {
				name := fmt.Sprintf("%g/%s/crossover=%v", a, tc.shape, cross)
				m := lp.NewModel(lp.Maximize)
				x, y := m.AddVar(0, lp.Inf, 1), m.AddVar(0, lp.Inf, 1)
				m.AddRow(-lp.Inf, 4, []int{x, y}, []float64{1, 2})
				m.AddRow(-lp.Inf, 6, []int{x, y}, []float64{3, 1})
				tc.row(m)
				sol, err := (&lp.InteriorPoint{Crossover: cross}).Solve(context.Background(), m)
				if err != nil {
					t.Errorf("%s: %v", name, err)
					continue
				}
				if sol.Objective < want-1e-6 || sol.Objective > want+1e-6 {
					t.Errorf("%s: objective %.9g, want %.9g", name, sol.Objective, want)
				}
				r := lp.ModelResiduals(m, sol.X, sol.Duals)
				if r != sol.ModelResiduals || r.Primal > 1e-7 || r.Dual > 1e-7 || r.Gap > 1e-7 {
					t.Errorf("%s: model residuals %+v (reported %+v)", name, r, sol.ModelResiduals)
				}
			}
		}
	}
}

// The final check: a point whose residuals on the model exceed
// ModelTolerance is never reported Optimal, whatever the scaled problem's
// residuals say (here a tolerance no point can meet stands in for a
// scaled problem that hides the model's residuals).
func TestFinalCheck(t *testing.T) {
	m := lp.NewModel(lp.Maximize)
	x, y := m.AddVar(0, lp.Inf, 1), m.AddVar(0, lp.Inf, 1)
	m.AddRow(-lp.Inf, 4, []int{x, y}, []float64{1, 2})
	m.AddRow(-lp.Inf, 6, []int{x, y}, []float64{3, 1})
	for _, cross := range []bool{false, true} {
		sol, err := (&lp.InteriorPoint{ModelTolerance: 1e-300, Crossover: cross}).Solve(context.Background(), m)
		if !errors.Is(err, lp.ErrNumerical) || sol == nil || sol.Status != lp.Failed {
			t.Fatalf("crossover %v: %v, %+v: want a numerical failure", cross, err, sol)
		}
		var se *lp.SolveError
		if !errors.As(err, &se) || se.Phase != "final check on the model as given" || se.Residuals != sol.ModelResiduals {
			t.Errorf("crossover %v: error %v", cross, err)
		}
		if len(sol.X) != 2 {
			t.Errorf("the point comes with the error: %v", sol.X)
		}
	}
	sol, err := (&lp.InteriorPoint{}).Solve(context.Background(), m)
	if err != nil || sol.ModelResiduals.Primal > 1e-9 || sol.ModelResiduals.Gap > 1e-9 {
		t.Errorf("%v %+v", err, sol)
	}
}

// ModelResiduals by hand: a row violated by 1 of a size of 4 (relative
// 1/(1+4)), a wrong-signed reduced cost, a gap.
func TestModelResiduals(t *testing.T) {
	m := lp.NewModel(lp.Maximize)
	x, y := m.AddVar(0, lp.Inf, 1), m.AddVar(0, lp.Inf, 1)
	m.AddRow(-lp.Inf, 4, []int{x, y}, []float64{1, 2})
	m.AddRow(-lp.Inf, 6, []int{x, y}, []float64{3, 1})
	r := lp.ModelResiduals(m, []float64{1.6, 1.2}, []float64{0.4, 0.2})
	if r.Primal > 1e-15 || r.Dual > 1e-15 || r.Gap > 1e-15 {
		t.Errorf("the optimum: %+v", r)
	}
	r = lp.ModelResiduals(m, []float64{0, 2.5}, nil) // x + 2y = 5: 1 over 4, terms of 5
	if want := 1.0 / 6; r.Primal < want-1e-15 || r.Primal > want+1e-15 || r.Dual != 0 || r.Gap != 0 {
		t.Errorf("row violation: %+v, want primal %g", r, want)
	}
	// Duals (1, 0) are feasible (as a minimisation, reduced costs 0 and
	// 1 for x, y >= 0) but price the objective at 4, not 2.8: a gap of
	// 1.2 / 3.8.
	r = lp.ModelResiduals(m, []float64{1.6, 1.2}, []float64{1, 0})
	if want := 1.2 / 3.8; r.Primal > 1e-15 || r.Dual != 0 || r.Gap < want-1e-12 || r.Gap > want+1e-12 {
		t.Errorf("gap: %+v", r)
	}
	r = lp.ModelResiduals(m, []float64{1.6, 1.2}, []float64{-1, 0})
	if r.Dual < 0.4 {
		t.Errorf("a dual of the wrong sign: %+v", r)
	}
}
