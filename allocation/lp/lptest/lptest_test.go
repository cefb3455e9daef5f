package lptest

import (
	"testing"

	"github.com/gpusched/gpusched/allocation/lp"
)

// DualGap must reject feasible points that are not optimal, and duals that
// are wrong, and accept the known optimum.
func TestDualGapDetectsNonOptimal(t *testing.T) {
	m := Cases()[0].Build() // max x + y, optimum 2.8 at (1.6, 1.2), duals (0.4, 0.2)
	good := &lp.Solution{Objective: 2.8, X: []float64{1.6, 1.2}, Duals: []float64{0.4, 0.2}, ReducedCosts: []float64{0, 0}}
	if gap, inf := DualGap(m, good); gap > 1e-12 || inf > 1e-12 {
		t.Fatalf("optimum rejected: gap %g, infeasibility %g", gap, inf)
	}
	feasible := &lp.Solution{Objective: 2, X: []float64{1, 1}, Duals: []float64{0.4, 0.2}, ReducedCosts: []float64{0, 0}}
	if gap, _ := DualGap(m, feasible); gap < 0.1 {
		t.Errorf("suboptimal point accepted: gap %g", gap)
	}
	wrongDuals := &lp.Solution{Objective: 2.8, X: []float64{1.6, 1.2}, Duals: []float64{1, 0}, ReducedCosts: []float64{0, -1}}
	if gap, inf := DualGap(m, wrongDuals); gap < 0.1 && inf < 0.1 {
		t.Errorf("wrong duals accepted: gap %g, infeasibility %g", gap, inf)
	}
	negative := &lp.Solution{Objective: 2.8, X: []float64{1.6, 1.2}, Duals: []float64{-0.4, 0.2}, ReducedCosts: []float64{0.8, 1.8}}
	if _, inf := DualGap(m, negative); inf < 0.1 {
		t.Errorf("dual of the wrong sign accepted: infeasibility %g", inf)
	}
}

func TestAllocationIsDeterministic(t *testing.T) {
	a, b := Allocation(3, 20, 4), Allocation(3, 20, 4)
	if a.NumVars() != 20*4+1 || a.NumRows() != 2*20+4 {
		t.Fatalf("shape %d x %d", a.NumRows(), a.NumVars())
	}
	for i := range a.NumRows() {
		ia, va := a.Row(i)
		ib, vb := b.Row(i)
		if len(ia) != len(ib) {
			t.Fatalf("row %d differs", i)
		}
		for k := range ia {
			if ia[k] != ib[k] || va[k] != vb[k] {
				t.Fatalf("row %d differs", i)
			}
		}
	}
}
