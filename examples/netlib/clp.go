//go:build clp

package main

import (
	"fmt"

	"github.com/gpusched/gpusched/allocation/lp"
	"github.com/gpusched/gpusched/allocation/lp/clp"
)

// haveCLP says whether the command was built with -tags clp.
const haveCLP = true

// newCLP returns CLP with the named algorithm and its default settings.
func newCLP(alg string) (lp.Solver, error) {
	algs := map[string]clp.Algorithm{"dual": clp.Dual, "primal": clp.Primal, "auto": clp.Auto, "barrier": clp.Barrier}
	a, ok := algs[alg]
	if !ok {
		return nil, fmt.Errorf("unknown CLP algorithm %q (dual, primal, auto, barrier)", alg)
	}
	return &clp.Solver{Algorithm: a}, nil
}
