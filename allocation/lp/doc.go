// Package lp is gpusched's linear-programming layer: a sparse model builder
// (variables with bounds, rows with lower and upper bounds, minimise or
// maximise), a one-method [Solver] interface, typed errors, and MPS export.
//
// Gavel's policies (Narayanan et al., OSDI 2020, section 4) are linear
// programs over jobs x GPU types, and over job pairs with space sharing.
// Gavel solves them with cvxpy and ECOS, Gurobi or MOSEK; gpusched solves
// them with its own backends:
//
//   - the subpackage clp binds COIN-OR CLP (build tag clp, cgo, Debian's
//     coinor-libclp-dev);
//   - a pure-Go sparse backend, the default, is being built (issue #3 of the
//     project); until it lands, policies need the clp backend.
//
// The subpackage lptest holds a conformance suite (hand-solved problems with
// known optima and duals, infeasible, unbounded, degenerate, free-variable,
// equality and ranged cases) and a generator of seeded allocation-shaped
// problems, so that any [Solver] can be checked and benchmarked the same way.
//
// Duals follow one convention for both senses: reduced costs are c - A'y and
// y_i is the shadow price of row i, the change of the optimal objective per
// unit move of its active bound (see [Solution]).
package lp
