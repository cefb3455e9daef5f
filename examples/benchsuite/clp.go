//go:build clp

package main

import (
	"github.com/gpusched/gpusched/allocation/lp"
	"github.com/gpusched/gpusched/allocation/lp/clp"
)

// With -tags clp, -solver clp solves every LP with CLP's dual simplex,
// which returns a vertex of the optimal face (ipm returns its centre).
func init() {
	solvers["clp"] = func() lp.Solver { return &clp.Solver{} }
}
