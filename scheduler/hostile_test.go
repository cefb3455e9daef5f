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

// An elastic job's GPUs on a server after one that leaves used to keep
// their old positions in the lease: the next round could not release
// them (the release failed silently), the lease no longer matched the
// job's size, and the job lost its GPUs (not kept) for no reason.
func TestElasticAfterServerLeaves(t *testing.T) {
	c, err := topology.ParseCompact("k80:4:4,v100:8:4", 4)
	require.NoError(t, err)
	s, err := New(Config{Policy: &allocation.MaxMinFairness{}, Cluster: c})
	require.NoError(t, err)
	require.NoError(t, s.Submit("e", JobSpec{GPUs: 4, MaxGPUs: 8, Throughput: map[topology.GPUType]float64{topology.V100: 1}}, 0))
	r, err := s.Round(ctx, 0)
	require.NoError(t, err)
	as := byJob(r)["e"]
	require.Equal(t, 4, as.Extra, "the other V100 server's GPUs")
	base := devNames(as.Devices[:4])
	_, err = s.RemoveServer("k80-0") // the servers after it move down
	require.NoError(t, err)
	r, err = s.Round(ctx, 360)
	require.NoError(t, err)
	checkRound(t, s, r)
	as = byJob(r)["e"]
	assert.True(t, as.Kept, "e keeps its GPUs")
	assert.Equal(t, base, devNames(as.Devices[:4]))
	assert.Equal(t, 4, as.Extra)
}

// mechPairReceived returns the time a tier's mechanism credited a pair of
// jobs with on a type (0 before it has a unit).
func mechPairReceived(t *testing.T, s *Scheduler, a, b string, typ topology.GPUType) float64 {
	t.Helper()
	v, _ := mechUnitReceived(t, s, typ, a, b)
	return v
}

// A pair of which a report lists one job is credited with that job's
// time: it used to be credited with the other's seconds from an older
// report as well (the larger of the two).
func TestPairCreditFromThisReport(t *testing.T) {
	table := gavel.Simulation()
	s := newSched(t, func(c *Config) {
		c.Cluster, _ = topology.ParseCompact("v100:1:1", 1)
		c.Policy = &allocation.MaxMinFairness{SpaceSharing: true}
		c.Throughput, c.Colocation = table, table
	})
	require.NoError(t, s.Submit("a", JobSpec{GPUs: 1, Model: &perfmodel.JobKey{Model: "ResNet-18", BatchSize: 64}}, 0))
	require.NoError(t, s.Submit("b", JobSpec{GPUs: 1, Model: &perfmodel.JobKey{Model: "A3C"}}, 0))
	paired := 0
	for i := 0; i < 20 && paired < 2; i++ {
		r, err := s.Round(ctx, float64(i)*360)
		require.NoError(t, err)
		if len(r.Assignments) != 1 || len(r.Assignments[0].Jobs) != 2 {
			continue
		}
		paired++
		before := mechPairReceived(t, s, "a", "b", topology.V100)
		rep := RoundReport{Start: r.Start, Ran: []Ran{{Job: "a", Seconds: 300}, {Job: "b", Seconds: 300}}}
		want := 300.0
		if paired == 2 {
			rep.Ran = rep.Ran[1:2]
			rep.Ran[0].Seconds = 10 // a is not listed: it did not run
			want = 10
		}
		require.NoError(t, s.Report(rep))
		assert.InDelta(t, want, mechPairReceived(t, s, "a", "b", topology.V100)-before, 1e-9, "pairing %d", paired)
	}
	require.Equal(t, 2, paired, "two rounds of the pair")
}

// Under CompatGavel a report may credit more than a round, but at most
// allocation.MaxTime seconds: two reports of 1e308 s used to push a
// counter to +Inf, after which Snapshot failed for good. However many
// reports of MaxTime come, the snapshot stays valid and restores.
func TestGavelReportsBounded(t *testing.T) {
	s := newSched(t, func(c *Config) { c.Compat = allocation.CompatGavel })
	require.NoError(t, s.Submit("a", JobSpec{GPUs: 1, Throughput: rates(1, 1)}, 0))
	for i := range 30 {
		r, err := s.Round(ctx, float64(i)*360)
		require.NoError(t, err)
		rep := RoundReport{Start: r.Start, Ran: []Ran{{Job: "a", Seconds: 1e308}}}
		err = s.Report(rep)
		require.ErrorIs(t, err, ErrInvalid)
		assert.ErrorContains(t, err, `job "a" ran 1e+308 s`)
		rep.Ran[0].Seconds = allocation.MaxTime
		require.NoError(t, s.Report(rep))
	}
	data, err := s.Snapshot()
	require.NoError(t, err)
	st, err := s.Status("a")
	require.NoError(t, err)
	for _, v := range st.Attained {
		assert.LessOrEqual(t, v, maxAttained)
	}
	require.NoError(t, newSched(t, func(c *Config) { c.Compat = allocation.CompatGavel }).Restore(data))
}
