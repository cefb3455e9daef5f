package scheduler

import (
	"context"
	"testing"

	"github.com/gpusched/gpusched/perfmodel/learn"
	"github.com/gpusched/gpusched/topology"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// probeRun: five jobs measured 3 times faster on V100 than on K80 left
// their rows in the population; job a was measured on V100 only (3
// steps/s). It returns the type a's first round runs it on.
func probeRun(t *testing.T, explore Explore) topology.GPUType {
	t.Helper()
	l := newLearner(t)
	explore.Refit = -1
	s := newSched(t, func(c *Config) { c.Estimator, c.Explore = l, explore })
	observe := func(job string, seg uint64, typ topology.GPUType, rate, from float64) {
		for w := range 8 {
			o := learn.Observation{Type: typ, GPUs: 4, Segment: seg, Steps: rate * 60 * float64(w), Time: from + 60*float64(w)}
			require.NoError(t, l.Observe(job, o))
		}
	}
	for i := range 5 {
		key := "b" + string(rune('0'+i))
		require.NoError(t, l.Register(key, learn.JobInfo{GPUs: 4}))
		observe(key, 1, topology.V100, 3, 0)
		observe(key, 2, topology.K80, 1, 1000)
		l.Forget(key)
	}
	require.NoError(t, s.Submit("a", JobSpec{GPUs: 4, Learn: true}, 0))
	observe("a", 1, topology.V100, 3, 0)
	r, err := s.Round(context.Background(), 2000)
	require.NoError(t, err)
	for _, as := range r.Assignments {
		if as.Jobs[0] == "a" {
			return as.Type
		}
	}
	t.Fatal("a did not run")
	return ""
}

// With the population saying K80 is a third of V100, the value of
// information leaves a measured-on-V100 job on the V100 (measuring the
// K80 could not make it its best); Explore.Probe tries the K80 anyway,
// as Sia profiles every type.
func TestProbeTriesEveryType(t *testing.T) {
	assert.Equal(t, topology.V100, probeRun(t, Explore{}), "value of information: no probe")
	assert.Equal(t, topology.K80, probeRun(t, Explore{Probe: true}), "Probe: the K80 once")
}
