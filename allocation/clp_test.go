//go:build clp

package allocation

import (
	"context"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gpusched/gpusched/allocation/lp/clp"
	"github.com/gpusched/gpusched/topology"
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

// MinMakespan over remaining steps from 1 to 1e10 agrees with CLP to 1e-6.
func TestMakespanWideRangesCLP(t *testing.T) {
	rng := rand.New(rand.NewPCG(16, 17))
	for _, jobs := range []int{163, 1000} {
		p := &Problem{Types: []topology.GPUType{topology.V100, topology.P100, topology.K80}, Capacity: []int{16, 24, 32}}
		for m := range jobs {
			j := Job{ID: m, ScaleFactor: []int{1, 1, 2, 4, 8}[rng.IntN(5)], RemainingSteps: math.Pow(10, 10*rng.Float64())}
			for k := range 3 {
				v := math.Pow(10, 3*rng.Float64()-1)
				if k > 0 && rng.IntN(10) == 0 {
					v = 0
				}
				j.Throughput = append(j.Throughput, v)
			}
			p.Jobs = append(p.Jobs, j)
		}
		a := allocate(t, &MinMakespan{}, p)
		b := allocate(t, &MinMakespan{Solver: &clp.Solver{}}, p)
		assert.InDelta(t, b.Objective, a.Objective, 1e-6*b.Objective, "jobs=%d", jobs)
		t.Logf("%d jobs: makespan %.9e s, CLP %.9e s (relative difference %.1e)", jobs, a.Objective, b.Objective, math.Abs(a.Objective-b.Objective)/b.Objective)
	}
}
