//go:build clp

package allocation

import (
	"context"
	"math/rand/v2"
	"testing"

	"github.com/gpusched/gpusched/allocation/lp/clp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The policies reach the same optima with CLP as with the pure-Go solver.
func TestPoliciesAgreeWithCLP(t *testing.T) {
	rng := rand.New(rand.NewPCG(31, 32))
	for range 10 {
		p := randomProblem(rng, 5+rng.IntN(40), 1+rng.IntN(4))
		for _, pair := range [][2]Policy{
			{&MaxMinFairness{}, &MaxMinFairness{Solver: &clp.Solver{}}},
			{&MaxThroughput{}, &MaxThroughput{Solver: &clp.Solver{}}},
			{&MinMakespan{}, &MinMakespan{Solver: &clp.Solver{}}},
		} {
			a, errA := pair[0].Allocate(context.Background(), p)
			b, errB := pair[1].Allocate(context.Background(), p)
			if errA != nil || errB != nil {
				require.ErrorIs(t, errA, ErrNoSolution)
				require.ErrorIs(t, errB, ErrNoSolution)
				continue
			}
			require.NoError(t, b.Check(p, 1e-7))
			assert.InDelta(t, b.Objective, a.Objective, 1e-6*max(1, b.Objective), "%T", pair[0])
		}
	}
	pp, _ := gavelProblem(t, 5, 64)
	a := allocate(t, &MaxMinFairness{SpaceSharing: true}, pp)
	b := allocate(t, &MaxMinFairness{SpaceSharing: true, Solver: &clp.Solver{}}, pp)
	assert.InDelta(t, b.Objective, a.Objective, 1e-6*b.Objective)
}
