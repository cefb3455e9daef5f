//go:build clp

package allocation

import (
	"context"
	"math/rand/v2"
	"testing"

	"github.com/gpusched/gpusched/allocation/lp"
	"github.com/gpusched/gpusched/allocation/lp/clp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gonum.org/v1/gonum/floats"
)

// QuotaFairness reaches the same level and total and computes the same
// guarantees with CLP as with the pure-Go solver.
func TestQuotaAgreesWithCLP(t *testing.T) {
	rng := rand.New(rand.NewPCG(26, 2))
	problems := []*Problem{quotaBenchProblem(200, 6, 3)}
	for range 8 {
		p := randomProblem(rng, 5+rng.IntN(30), 1+rng.IntN(3))
		randomTenants(rng, p)
		problems = append(problems, p)
	}
	for i, p := range problems {
		// Water filling needs the centre of each optimal face, which CLP
		// (a vertex) is not: only the one-level form takes any solver.
		a := allocate(t, &QuotaFairness{}, p)
		b := allocate(t, &QuotaFairness{Solver: &clp.Solver{}}, p)
		assert.InDelta(t, a.Objective, b.Objective, 1e-6*max(1, b.Objective), "problem %d", i)
		// The second stage's total is unique too.
		ra, rb := normRates(p, a), normRates(p, b)
		assert.InDelta(t, floats.Sum(ra), floats.Sum(rb), 1e-5*max(1, floats.Sum(rb)), "problem %d", i)
		// The guarantees are the optima of the slices' programs.
		pa, pb := newQuotaPlan(p), newQuotaPlan(p)
		require.NoError(t, pa.guarantee(context.Background(), &lp.InteriorPoint{}))
		require.NoError(t, pb.guarantee(context.Background(), &clp.Solver{}))
		for j, qe := range pa.ents {
			assert.InDelta(t, qe.level, pb.ents[j].level, 1e-6*max(1, qe.level), "problem %d, entity %s", i, qe.name)
			assert.InDelta(t, qe.total, pb.ents[j].total, 1e-6*max(1, qe.total), "problem %d, entity %s", i, qe.name)
		}
	}
}
