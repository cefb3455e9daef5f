package learn_test

import (
	"context"
	"math"
	"strconv"
	"testing"

	"github.com/gpusched/gpusched/allocation"
	"github.com/gpusched/gpusched/perfmodel/learn"
	"github.com/gpusched/gpusched/sim"
	"github.com/gpusched/gpusched/topology"
	"github.com/stretchr/testify/require"
)

// The population's fit stays finite where the data do not pin it: a type
// that no job has measured yet, and one that a single job has, refitted
// from the last fit (a warm start) at every round of a scheduler. Before
// the fix, the unmeasured type's factor was rescaled with the measured
// ones at every sweep and grew to +Inf, and the factors' variance with
// it: every completed rate, and every prior and estimate drawn from it,
// was NaN, 151 rounds into the simulator's hidden-truth mode on Gavel's
// trace (issue #41). The run here is that one, each job's estimates
// checked after every round.
func TestFitFiniteOnUnpinnedTypes(t *testing.T) {
	types := []topology.GPUType{topology.V100, topology.P100, topology.K80}
	l, err := learn.New(learn.Config{Types: types})
	require.NoError(t, err)
	jobs, err := (&sim.GavelWorkload{Rate: 1.6}).Generate(120)
	require.NoError(t, err)
	var ids []int
	for _, j := range jobs[:40] {
		ids = append(ids, j.ID)
	}
	rounds := 0
	cfg := sim.Config{
		Types: types, Capacity: []int{12, 12, 12}, Policy: &allocation.MaxMinFairness{}, JobsToComplete: ids,
		Hidden: &sim.Hidden{Estimator: l},
		Progress: func(int, int) {
			rounds++
			fit := l.Refresh()
			require.False(t, math.IsNaN(fit.ResidualSigma) || math.IsInf(fit.ResidualSigma, 0), "round %d: %+v", rounds, fit)
			for _, j := range jobs {
				for _, e := range l.Estimates(strconv.Itoa(j.ID), nil) {
					for _, v := range []float64{e.Mean, e.LogMean, e.Sigma, e.PriorMean, e.PriorSigma} {
						require.False(t, math.IsNaN(v) || math.IsInf(v, 0), "round %d, job %d: %+v", rounds, j.ID, e)
					}
				}
			}
		},
	}
	_, err = sim.Run(context.Background(), cfg, jobs)
	require.NoError(t, err)
	t.Logf("%d rounds", rounds)
}
