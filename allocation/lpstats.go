package allocation

import (
	"context"

	"github.com/gpusched/gpusched/allocation/lp"
)

// LPStats describes the linear programs a policy solved to produce an
// allocation: how many, the size of the largest, and the solver's
// iterations (interior-point steps or simplex pivots) over all of them.
// The LP-based policies of this package fill Allocation.LP with it; a
// policy of your own may too. Rounds copies it into Round.Stats.
//
// An LPStats is a plain value: safe for concurrent reads, not for writes
// while others read it.
type LPStats struct {
	// Solves counts the LPs solved (finish-time fairness and water-filling
	// solve several, space sharing one per pricing round).
	Solves int `json:"solves"`
	// Rows, Columns and Nonzeros give the size of the largest LP solved
	// (by nonzeros) as the model holds it, before any presolve.
	Rows     int `json:"rows"`
	Columns  int `json:"columns"`
	Nonzeros int `json:"nonzeros"`
	// Iterations is the total over all solves.
	Iterations int `json:"iterations"`
}

type lpStatsKey struct{}

// trackLP returns a context carrying a collector for the LPs solved under
// it, reusing one already there (a policy calling another counts once).
func trackLP(ctx context.Context) (context.Context, *LPStats) {
	if st, ok := ctx.Value(lpStatsKey{}).(*LPStats); ok {
		return ctx, st
	}
	st := &LPStats{}
	return context.WithValue(ctx, lpStatsKey{}, st), st
}

// attach puts the collected statistics on the allocation, if any LP was
// solved and the allocation has none yet.
func (st *LPStats) attach(a *Allocation) {
	if a != nil && a.LP == nil && st.Solves > 0 {
		cp := *st
		a.LP = &cp
	}
}

// solveLP solves m with s and records it in the context's collector.
func solveLP(ctx context.Context, s lp.Solver, m *lp.Model) (*lp.Solution, error) {
	sol, err := s.Solve(ctx, m)
	if st, ok := ctx.Value(lpStatsKey{}).(*LPStats); ok {
		st.Solves++
		if nz := m.NumNonzeros(); nz >= st.Nonzeros {
			st.Rows, st.Columns, st.Nonzeros = m.NumRows(), m.NumVars(), nz
		}
		if sol != nil {
			st.Iterations += sol.Iterations
		}
	}
	return sol, err
}
