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
	"github.com/stretchr/testify/assert"
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

// A claim is evidence on its own type only: a job that claims 100 steps/s
// on V100 and 1 on K80, and has measured nothing, gets the population's
// prior on P100, not one moved to its claimed level (before, a claim of
// 100 on one type made its K80 estimate 27.5, issue #41's review); its
// K80 estimate is its claim there.
func TestClaimsSetNoLevel(t *testing.T) {
	types := []topology.GPUType{topology.V100, topology.P100, topology.K80}
	l, err := learn.New(learn.Config{Types: types})
	require.NoError(t, err)
	for i := range 12 {
		r := newRunner(l, "pop-"+strconv.Itoa(i))
		for k, typ := range types {
			r.run(t, typ, 1, 6, steady(float64(3-k)))
		}
	}
	l.Refresh()
	require.NoError(t, l.Register("liar", learn.JobInfo{GPUs: 1, Claims: map[topology.GPUType]float64{topology.V100: 100, topology.K80: 1}}))
	require.NoError(t, l.Register("plain", learn.JobInfo{GPUs: 1}))
	liar, plain := l.Estimate("liar", topology.P100), l.Estimate("plain", topology.P100)
	t.Logf("P100: liar %.2f, a job that claims nothing %.2f", liar.Mean, plain.Mean)
	assert.InDelta(t, plain.Mean, liar.Mean, 1e-9, "the claims on V100 and K80 do not move the prior on P100")
	k80 := l.Estimate("liar", topology.K80)
	assert.Equal(t, learn.SourceClaim, k80.Source)
	assert.Less(t, k80.Mean, 1.5, "its K80 estimate is near its claim there: %+v", k80)
}
