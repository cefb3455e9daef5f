package sim

import (
	"context"
	"testing"

	"github.com/gpusched/gpusched/placement/ring"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The ordering of Yu et al.'s Fig. 4 over ten seeds of their setup: mean
// makespan SJF-BCO < List-Scheduling < First-Fit < Random.
func TestRingPaperOrdering(t *testing.T) {
	if testing.Short() {
		t.Skip("ten seeds")
	}
	sum := map[string]float64{}
	for seed := uint64(1); seed <= 10; seed++ {
		setup, err := RingPaperSetup(RingPaperConfig{Seed: seed, Servers: 20})
		require.NoError(t, err)
		require.Len(t, setup.Jobs, 160)
		r, err := ring.SJFBCO{Model: setup.Model, Horizon: 1200}.Schedule(context.Background(), setup.Cluster, setup.Jobs)
		require.NoError(t, err)
		sum["sjf-bco"] += float64(r.Makespan)
		for name, ex := range map[string]ring.Executor{
			"ls":   {Model: setup.Model, Placer: &ring.ListScheduling{}},
			"ff":   {Model: setup.Model, Placer: ring.FirstFit{}, Strict: true},
			"rand": {Model: setup.Model, Placer: ring.NewRandom(seed)},
		} {
			s, err := ex.Run(context.Background(), setup.Cluster, setup.Jobs, nil)
			require.NoError(t, err)
			sum[name] += float64(s.Makespan)
		}
	}
	assert.Less(t, sum["sjf-bco"], sum["ls"])
	assert.Less(t, sum["ls"], sum["ff"])
	assert.Less(t, sum["ff"], sum["rand"])
	t.Logf("mean makespans: %v", sum)
}

func TestRingPaperSetupMix(t *testing.T) {
	setup, err := RingPaperSetup(RingPaperConfig{Seed: 3, Servers: 20})
	require.NoError(t, err)
	count := map[int]int{}
	for _, j := range setup.Jobs {
		count[j.GPUs]++
		assert.GreaterOrEqual(t, j.Iterations, 1000)
		assert.LessOrEqual(t, j.Iterations, 6000)
		assert.GreaterOrEqual(t, j.Ring.Backward, 0.01)
		assert.Less(t, j.Ring.Backward, 0.05)
		assert.Positive(t, j.Estimate)
	}
	assert.Equal(t, map[int]int{1: 80, 2: 14, 4: 26, 8: 30, 16: 8, 32: 2}, count)
	for _, s := range setup.Cluster.Servers {
		assert.Contains(t, []int{4, 8, 16, 32}, len(s.GPUs))
	}
	big, err := RingPaperSetup(RingPaperConfig{Seed: 1, Servers: 1250, GPUsPerServer: 8, Jobs: 5000})
	require.NoError(t, err)
	assert.InDelta(t, 5000, len(big.Jobs), 5)
	assert.Equal(t, 10000, big.Cluster.NumGPUs())
	_, err = RingPaperSetup(RingPaperConfig{Seed: 1})
	assert.Error(t, err)
}

// RingResult's summary agrees with the schedule: same makespan and mean
// JCT, utilisation within (0, 1].
func TestRingResultSummary(t *testing.T) {
	setup, err := RingPaperSetup(RingPaperConfig{Seed: 2, Servers: 10})
	require.NoError(t, err)
	s, err := (&ring.Executor{Model: setup.Model, Placer: &ring.ListScheduling{}}).Run(context.Background(), setup.Cluster, setup.Jobs, nil)
	require.NoError(t, err)
	res, err := RingResult(setup.Cluster, setup.Jobs, s)
	require.NoError(t, err)
	sum := res.Summarise(0, 0)
	assert.InDelta(t, float64(s.Makespan), sum.Makespan, 0)
	assert.InDelta(t, s.MeanJCT, sum.MeanJCT, 1e-9)
	assert.Greater(t, sum.Utilisation, 0.3)
	assert.LessOrEqual(t, sum.Utilisation, 1.0)
	assert.GreaterOrEqual(t, sum.MeanRho, 1.0) // never faster than alone
	_, err = RingResult(setup.Cluster, setup.Jobs[1:], s)
	assert.Error(t, err)
}
