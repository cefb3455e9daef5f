// Package lp is gpusched's linear-programming layer: a sparse model builder
// (variables with bounds, rows with lower and upper bounds, minimise or
// maximise, an objective constant), a one-method [Solver] interface, typed
// errors, and MPS input ([ReadMPS]: fixed and free format) and output
// ([Model.WriteMPS]).
//
// Gavel's policies (Narayanan et al., OSDI 2020, section 4) are linear
// programs over jobs x GPU types, and over job pairs with space sharing.
// Gavel solves them with cvxpy and ECOS, Gurobi or MOSEK; gpusched solves
// them with its own backends:
//
//   - [InteriorPoint], the default: pure Go, sparse, no cgo;
//   - the subpackage clp binds COIN-OR CLP (build tag clp, cgo, Debian's
//     coinor-libclp-dev), for vertex solutions and cross-checks.
//
// Why an interior-point method rather than a simplex. The max-min
// allocation LPs are massively degenerate: each job's epigraph row
// t <= sum_k T_jk x_jk is tight at the optimum for every bottleneck job, so
// a simplex method pivots through thousands of degenerate vertices (CLP's
// dual simplex: 14,888 iterations and 8.6 s for 10,000 jobs x 3 types). An
// interior-point method takes 10 to 20 iterations whatever the degeneracy,
// each a sparse Cholesky factorisation of A Theta A' with a pattern fixed
// in advance; the allocation LPs are block-angular (a job's rows touch only
// its own variables, plus a few capacity rows), so the factor stays sparse
// once the one dense column, the level t, is split (Vanderbei 1991). It
// solves 10,000 x 3 in about 0.3 s. Its solution is the analytic centre of
// the optimal face rather than a vertex, which is what water-filling needs:
// a job whose level cannot rise has a strictly positive dual there, where a
// vertex may show a zero. InteriorPoint.Crossover moves it to a vertex when
// one is wanted. The method is the homogeneous self-dual one, so
// an infeasible problem ends with a Farkas certificate and an unbounded one
// with a ray rather than with diverging iterates; two auxiliary LPs
// ([InfeasibilityModel], [RayModel]) tell unbounded from infeasible when a
// ray is found, and classify a solve that stops making progress. Equality
// rows that are combinations of others are found by a Cholesky
// factorisation of A_eq A_eq' and set aside. The problem is scaled and every
// stopping rule is relative, so the units of a model do not change its
// answer; a solve that stops short returns its best point, its residuals and
// a [SolveError] naming the phase. No point is reported optimal before it
// passes a final check on the model as given ([ModelResiduals], unscaled):
// subnormal and negligible entries, which scaling cannot bring near 1,
// are left out, and the check makes sure they did not matter.
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
