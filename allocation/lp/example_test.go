package lp_test

import (
	"context"
	"fmt"

	"github.com/gpusched/gpusched/allocation/lp"
)

// Maximise x + y subject to x + 2y <= 4 and 3x + y <= 6, with the default
// pure-Go solver.
func ExampleInteriorPoint() {
	m := lp.NewModel(lp.Maximize)
	x := m.AddVar(0, lp.Inf, 1)
	y := m.AddVar(0, lp.Inf, 1)
	m.AddRow(-lp.Inf, 4, []int{x, y}, []float64{1, 2})
	m.AddRow(-lp.Inf, 6, []int{x, y}, []float64{3, 1})
	sol, err := (&lp.InteriorPoint{}).Solve(context.Background(), m)
	if err != nil {
		panic(err)
	}
	fmt.Printf("objective %.4f at x=%.4f y=%.4f, duals %.4f %.4f\n", sol.Objective, sol.X[x], sol.X[y], sol.Duals[0], sol.Duals[1])
	// Output: objective 2.8000 at x=1.6000 y=1.2000, duals 0.4000 0.2000
}

// An infeasible model gives a typed error.
func ExampleInteriorPoint_infeasible() {
	m := lp.NewModel(lp.Minimize)
	x := m.AddVar(0, 1, 1)
	m.AddRow(2, lp.Inf, []int{x}, []float64{1})
	sol, err := (&lp.InteriorPoint{}).Solve(context.Background(), m)
	fmt.Println(sol.Status, err)
	// Output: infeasible lp: problem is infeasible
}
