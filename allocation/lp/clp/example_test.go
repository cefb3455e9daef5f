//go:build clp

package clp_test

import (
	"context"
	"fmt"

	"github.com/gpusched/gpusched/allocation/lp"
	"github.com/gpusched/gpusched/allocation/lp/clp"
)

// Maximise x + y subject to x + 2y <= 4 and 3x + y <= 6.
func ExampleSolver() {
	m := lp.NewModel(lp.Maximize)
	x := m.AddVar(0, lp.Inf, 1)
	y := m.AddVar(0, lp.Inf, 1)
	m.AddRow(-lp.Inf, 4, []int{x, y}, []float64{1, 2})
	m.AddRow(-lp.Inf, 6, []int{x, y}, []float64{3, 1})
	sol, err := (&clp.Solver{}).Solve(context.Background(), m)
	if err != nil {
		panic(err)
	}
	fmt.Printf("objective %.1f at x=%.1f y=%.1f, duals %.1f %.1f\n", sol.Objective, sol.X[x], sol.X[y], sol.Duals[0], sol.Duals[1])
	// Output: objective 2.8 at x=1.6 y=1.2, duals 0.4 0.2
}
