// Package clp solves gpusched's linear programs with COIN-OR CLP
// (https://github.com/coin-or/Clp), through a small cgo binding of CLP's C
// interface (coin/Clp_C_Interface.h) of our own.
//
// The binding is built only with the build tag clp and needs CLP's headers
// and library, on Debian and Ubuntu the package coinor-libclp-dev:
//
//	apt-get install coinor-libclp-dev
//	go test -tags clp ./allocation/lp/...
//
// Without the tag the package is empty, so that nothing in gpusched needs
// cgo by default. [Solver] implements [lp.Solver]; each solve loads the whole
// column-major matrix in one Clp_loadProblem call and frees the CLP model
// before returning.
//
// Measured here: CLP 1.17.6 (Debian 12) reports some feasible, unbounded
// problems with free variables as primal infeasible (Clp_status 1, with
// every algorithm): 12 of 500 random small LPs in this package's tests,
// where the auxiliary LPs of lp.InfeasibilityModel and lp.RayModel, solved
// by CLP itself, show the problem feasible and unbounded.
package clp
