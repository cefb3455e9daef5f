package allocation

import (
	"context"
	"math"
	"testing"

	"github.com/gpusched/gpusched/topology"
	"github.com/stretchr/testify/assert"
)

// By hand: one GPU, job A (100 steps left, arrived 100 s ago) and job B
// (300 steps, just arrived), both at 1 step/s. Isolated shares are 1/2, so
// the denominators are 200 and 600 s, and the ratios (100 + 100/x)/200 and
// 0.5/(1 - x). They are equal at x^2 + x - 1 = 0: x = (sqrt(5) - 1)/2 and
// rho = 0.5/(1 - x) = 1.309017.
func TestFinishTimeFairnessByHand(t *testing.T) {
	p := &Problem{Types: []topology.GPUType{"a"}, Capacity: []int{1}, Now: 100, Jobs: []Job{
		{ID: 1, ScaleFactor: 1, Throughput: []float64{1}, RemainingSteps: 100, Arrival: 0},
		{ID: 2, ScaleFactor: 1, Throughput: []float64{1}, RemainingSteps: 300, Arrival: 100},
	}}
	pol := &FinishTimeFairness{}
	a := allocate(t, pol, p)
	x := (math.Sqrt(5) - 1) / 2
	assert.InDelta(t, 0.5/(1-x), a.Objective, 1e-5)
	assert.InDelta(t, x, a.X[0][0], 1e-4)

	// Job A makes 50 steps: at its isolated rate of 1/2 that is 100 s of
	// isolated time, so its denominator stays 100 + 50/0.5 = 200 and the
	// ratios are (100 + 50/x)/200 and 0.5/(1 - x): 2x^2 + x - 1 = 0, x = 0.5,
	// rho = 1.
	p.Jobs[0].RemainingSteps = 50
	a = allocate(t, pol, p)
	assert.InDelta(t, 1.0, a.Objective, 1e-5)
	assert.InDelta(t, 0.5, a.X[0][0], 1e-4)

	// A new policy has no history: the same problem gives a different
	// answer (denominator 100 instead of 200 for job A).
	fresh := allocate(t, &FinishTimeFairness{}, p)
	assert.Greater(t, fresh.Objective, 1.0+1e-3)
}

// Heterogeneity, by hand: one K80 and one V100; job 1 runs at 1 and 10,
// job 2 at 3 and 2, both with 1000 steps. Isolated rates are 5.5 and 2.5
// (denominators 181.8 and 400 s). Job 2's best rate is 3, all of the K80
// (its time sums to at most 1), so rho >= (1000/3)/400 = 0.8333; job 1 on
// the V100 has rho 0.55, so 0.8333 is the optimum. The agnostic policy,
// which sees V100 rates everywhere, does worse.
func TestFinishTimeFairnessHeterogeneous(t *testing.T) {
	p := &Problem{Types: []topology.GPUType{topology.K80, topology.V100}, Capacity: []int{1, 1}, Jobs: []Job{
		{ID: 1, ScaleFactor: 1, Throughput: []float64{1, 10}, RemainingSteps: 1000},
		{ID: 2, ScaleFactor: 1, Throughput: []float64{3, 2}, RemainingSteps: 1000},
	}}
	aware := allocate(t, &FinishTimeFairness{}, p)
	assert.InDelta(t, 2.5/3, aware.Objective, 1e-5)
	assert.InDelta(t, 1, aware.X[1][0], 1e-4)

	agnostic := allocate(t, &FinishTimeFairness{Agnostic: true}, p)
	r := rates(agnostic, p.matrix())
	worst := max((1000/r[0])/(1000/5.5), (1000/r[1])/400)
	assert.Greater(t, worst, aware.Objective*1.05)
	_, err := (&FinishTimeFairness{Agnostic: true, Reference: "a100"}).Allocate(context.Background(), p)
	assert.ErrorIs(t, err, ErrInvalidProblem)
}
