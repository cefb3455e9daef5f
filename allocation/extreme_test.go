package allocation

import (
	"context"
	"fmt"
	"testing"

	"github.com/gpusched/gpusched/topology"
	"github.com/stretchr/testify/assert"
)

// Rates and weights at the ends of their ranges (a job of rates 1e9 and
// 1e-9 weighted 1e9 beside one weighted 1e-9) are valid, so every policy's
// answer must pass the mechanism's check: max-min fairness gave job 0
// 1.0000026 of the time from the solver's residues, and a scheduler with
// two such jobs failed every round. fit scales such residues back.
func TestExtremeValuesAnswerFits(t *testing.T) {
	for _, cap2 := range []int{1, 2, 4, 1000} {
		for _, w := range [][2]float64{{MaxWeight, MinWeight}, {MinWeight, MaxWeight}, {1, 1}} {
			p := &Problem{Types: []topology.GPUType{"a", "b"}, Capacity: []int{cap2, cap2}, Jobs: []Job{
				{ID: 0, ScaleFactor: 1, Throughput: []float64{MaxRate, MinRate}, Weight: w[0], RemainingSteps: MaxSteps},
				{ID: 1, ScaleFactor: 1, Throughput: []float64{1, 1}, Weight: w[1], RemainingSteps: 1},
				{ID: 2, ScaleFactor: 1, Throughput: []float64{MinRate, MaxRate}, Weight: 1, RemainingSteps: 1e6},
			}}
			for _, pol := range allPolicies() {
				name := fmt.Sprintf("capacity %d weights %v %T", cap2, w, pol)
				a, err := pol.Allocate(context.Background(), p)
				if !assert.NoError(t, err, name) {
					continue
				}
				assert.NoError(t, checkAnswer(pol, p, a, true), name)
			}
		}
	}
}

// fit scales rows over 1 (a job's shares alone and in pairs) and types
// over capacity back onto their bounds, and leaves residues within
// fitSlack as they are, to the bit.
func TestFit(t *testing.T) {
	p := &Problem{Types: []topology.GPUType{"a"}, Capacity: []int{1}, Jobs: []Job{
		{ID: 0, ScaleFactor: 1, Throughput: []float64{1}}, {ID: 1, ScaleFactor: 1, Throughput: []float64{1}},
	}}
	a := &Allocation{X: [][]float64{{0.6}, {0.5}}, Pairs: []Pair{{A: 0, B: 1, X: []float64{0.5}}}}
	a.fit(p)
	assert.NoError(t, a.check(p, 1e-12, true))
	assert.InDelta(t, 1.0, a.X[0][0]+a.Pairs[0].X[0]+a.X[1][0], 1e-12, "capacity 1 used whole")
	assert.Less(t, a.X[0][0], 0.6)

	within := &Allocation{X: [][]float64{{1 + fitSlack/2}, {0}}}
	within.fit(p)
	assert.Equal(t, 1+fitSlack/2, within.X[0][0], "a residue within fitSlack is left as it is")
}
