package scheduler

import (
	"context"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/gpusched/gpusched/allocation"
	"github.com/gpusched/gpusched/cluster"
	"github.com/gpusched/gpusched/perfmodel"
	"github.com/gpusched/gpusched/perfmodel/gavel"
	"github.com/gpusched/gpusched/topology"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// panicPolicy panics in Allocate, as a buggy policy or a restored state
// that slipped through once did inside the mechanism.
type panicPolicy struct{}

func (panicPolicy) Allocate(context.Context, *allocation.Problem) (*allocation.Allocation, error) {
	panic("policy bug")
}

// A panic inside a round (here a policy's) leaves the scheduler usable:
// Round used to unlock only on its normal paths, so every later call
// blocked for ever.
func TestRoundPanicReleasesLock(t *testing.T) {
	s := newSched(t, func(c *Config) { c.Policy = panicPolicy{} })
	require.NoError(t, s.Submit("a", JobSpec{GPUs: 1, Throughput: rates(1, 1)}, 0))
	require.Panics(t, func() { _, _ = s.Round(ctx, 0) })
	done := make(chan []string)
	go func() { done <- s.Jobs() }()
	select {
	case jobs := <-done:
		assert.Equal(t, []string{"a"}, jobs)
	case <-time.After(10 * time.Second):
		t.Fatal("the scheduler's lock is held after a round panicked")
	}
}

// A cancelled context fails a round whether or not a policy solves: a
// steady round used to ignore it.
func TestRoundHonoursContext(t *testing.T) {
	s := newSched(t, nil)
	require.NoError(t, s.Submit("a", JobSpec{GPUs: 1, Throughput: rates(1, 1)}, 0))
	_, err := s.Round(ctx, 0)
	require.NoError(t, err)
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	_, err = s.Round(cancelled, 360) // steady: the allocation stands
	require.ErrorIs(t, err, context.Canceled)
	assert.ErrorContains(t, err, "scheduler: round at 360")
	r, err := s.Round(ctx, 360)
	require.NoError(t, err, "a refused round changes nothing")
	assert.False(t, r.Reset)
}

// A round may not start before the last one ended: at its Start plus
// Length, or at the longest time its report gives. It used to be
// accepted.
func TestRoundBeforeLastEnd(t *testing.T) {
	s := newSched(t, nil)
	require.NoError(t, s.Submit("a", JobSpec{GPUs: 1, Throughput: rates(1, 1)}, 0))
	_, err := s.Round(ctx, 0)
	require.NoError(t, err)
	_, err = s.Round(ctx, 100)
	require.ErrorIs(t, err, ErrInvalid)
	assert.ErrorContains(t, err, "round at 100 before the last one ended (it started at 0 and ran until 360)")
	r, err := s.Round(ctx, 360)
	require.NoError(t, err)
	require.NoError(t, s.Report(RoundReport{Start: r.Start, Ran: []Ran{{Job: "a", Seconds: 50}}}))
	_, err = s.Round(ctx, 400)
	require.ErrorIs(t, err, ErrInvalid, "the report says a ran until 410")
	_, err = s.Round(ctx, 410)
	require.NoError(t, err)
}

// Two jobs of keys of MaxKeyLen bytes share a GPU: their holder used to be
// 1,025 bytes, over cluster.MaxHolderLen, and the bind failed every round.
func TestLongKeysShareGPUs(t *testing.T) {
	table := gavel.Simulation()
	s := newSched(t, func(c *Config) {
		c.Cluster, _ = topology.ParseCompact("v100:1:1", 1)
		c.Policy = &allocation.MaxMinFairness{SpaceSharing: true}
		c.Throughput, c.Colocation = table, table
	})
	a, b := strings.Repeat("a", MaxKeyLen), strings.Repeat("b", MaxKeyLen)
	require.NoError(t, s.Submit(a, JobSpec{GPUs: 1, Model: &perfmodel.JobKey{Model: "ResNet-18", BatchSize: 64}}, 0))
	require.NoError(t, s.Submit(b, JobSpec{GPUs: 1, Model: &perfmodel.JobKey{Model: "A3C"}}, 0))
	pairs := 0
	for i := range 6 {
		r, err := s.Round(ctx, float64(i)*360)
		require.NoError(t, err)
		checkRound(t, s, r)
		assert.Zero(t, r.Stats.Unplaced, "round %d: a unit found no GPUs", i)
		for _, as := range r.Assignments {
			if len(as.Jobs) == 2 {
				pairs++
			}
		}
	}
	require.Positive(t, pairs, "the policy pairs the two jobs")
	s.View(func(v *ClusterView) {
		for _, h := range v.Holders() {
			assert.LessOrEqual(t, len(h), cluster.MaxHolderLen)
		}
	})
	// The holders of pairs are distinct: a with b, and a with another
	// long key.
	j := func(id int, key string) *job { return &job{id: id, key: key} }
	c := strings.Repeat("c", MaxKeyLen)
	assert.NotEqual(t, pairHolder(j(0, a), j(1, b)), pairHolder(j(0, a), j(2, c)))
	assert.Equal(t, pairHolder(j(0, a), j(1, b)), pairHolder(j(1, b), j(0, a)))
	assert.Equal(t, "x\x00y", pairHolder(j(0, "x"), j(1, "y")))
}

// View lends read-only access: no method of the view changes the state,
// what it returns is a copy, and a view kept after View returns panics
// rather than race with the scheduler. It used to hand out the mutable
// *cluster.State.
func TestViewIsReadOnly(t *testing.T) {
	vt := reflect.TypeFor[*ClusterView]()
	for i := range vt.NumMethod() {
		name := vt.Method(i).Name
		for _, verb := range []string{"Bind", "Release", "Fail", "Recover", "Add", "Remove", "Set"} {
			assert.False(t, strings.HasPrefix(name, verb) && name != "Failed", "ClusterView.%s", name)
		}
	}
	s := newSched(t, nil)
	require.NoError(t, s.Submit("a", JobSpec{GPUs: 2, Throughput: rates(1, 0)}, 0))
	_, err := s.Round(ctx, 0)
	require.NoError(t, err)
	var kept *ClusterView
	s.View(func(v *ClusterView) {
		held := v.Held("a")
		require.Len(t, held, 2)
		held[0] = cluster.GPURef{Server: 99}
		srv := v.Server(held[1].Server)
		srv.GPUs[0].Type = "x"
		mask := v.FreeMask(0)
		mask[0] = !mask[0]
		types := v.Types()
		types[0] = "x"
		kept = v
	})
	s.View(func(v *ClusterView) {
		require.NoError(t, v.Check())
		assert.NotEqual(t, 99, v.Held("a")[0].Server)
		assert.NotContains(t, v.Types(), topology.GPUType("x"))
		for p := range v.NumServers() {
			assert.NotEqual(t, topology.GPUType("x"), v.Server(p).GPUs[0].Type)
		}
	})
	assert.PanicsWithValue(t, "scheduler: ClusterView used after View returned", func() { kept.NumServers() })
}
