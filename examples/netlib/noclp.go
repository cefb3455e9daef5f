//go:build !clp

package main

import (
	"errors"

	"github.com/gpusched/gpusched/allocation/lp"
)

// haveCLP says whether the command was built with -tags clp.
const haveCLP = false

func newCLP(string) (lp.Solver, error) {
	return nil, errors.New("CLP needs a build with -tags clp")
}
