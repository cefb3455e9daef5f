package scheduler

import (
	"math"
	"testing"

	"github.com/gpusched/gpusched/topology"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// heldPair is one server of 4 V100s and two 4-GPU jobs, a and b, under
// max-min fairness: each is owed half the GPU time (x = 0.5), so the
// rounds alternate. Round 0 (t=0) runs a, round 1 (t=360) b, a preempted.
func heldPair(t *testing.T) *Scheduler {
	t.Helper()
	s := newSched(t, func(c *Config) { c.Cluster, _ = topology.ParseCompact("v100:4:4", 4) })
	for _, k := range []string{"a", "b"} {
		require.NoError(t, s.Submit(k, JobSpec{GPUs: 4, Throughput: rates(1, 0)}, 0))
	}
	r, err := s.Round(ctx, 0)
	require.NoError(t, err)
	require.Equal(t, []string{"a"}, r.Assignments[0].Jobs)
	require.NoError(t, s.Report(RoundReport{Start: 0, Ran: []Ran{{Job: "a", Seconds: 360}}}))
	r, err = s.Round(ctx, 360)
	require.NoError(t, err)
	require.Equal(t, []string{"b"}, r.Assignments[0].Jobs)
	require.Equal(t, []string{"a"}, r.Preempted)
	return s
}

// nextJob runs the round at t and returns the job it runs.
func nextJob(t *testing.T, s *Scheduler, at float64) string {
	t.Helper()
	r, err := s.Round(ctx, at)
	require.NoError(t, err)
	require.Len(t, r.Assignments, 1)
	return r.Assignments[0].Jobs[0]
}

// A job preempted at a round's start whose pods held its 4 GPUs for 35 s
// of the 360 s round is charged 35 s (140 GPU-seconds / 4 GPUs): in its
// attained time and in the mechanism's received time, which decides who
// runs next. At t=720 each is owed 0.5 x 720 = 360 s. Without the charge
// both received 360 s: a tie, and a (the lower ID) runs again. With it a
// received 395 s, 35 s more than it is owed, b 360 s: b runs.
func TestHeldCharged(t *testing.T) {
	plain, charged := heldPair(t), heldPair(t)
	require.NoError(t, plain.Report(RoundReport{Start: 360, Ran: []Ran{{Job: "b", Seconds: 360}}}))
	require.NoError(t, charged.Report(RoundReport{Start: 360, Ran: []Ran{{Job: "b", Seconds: 360}},
		Held: []Held{{Job: "a", Type: topology.V100, GPUSeconds: 4 * 35}}}))

	for _, c := range []struct {
		s    *Scheduler
		want float64
	}{{plain, 360}, {charged, 395}} {
		st, err := c.s.Status("a")
		require.NoError(t, err)
		assert.InDelta(t, c.want, st.Attained[topology.V100], 1e-9, "a's attained time")
		assert.Equal(t, 1, st.Rounds, "held time is no round run")
		got, ok := mechUnitReceived(t, c.s, topology.V100, "a")
		require.True(t, ok)
		assert.InDelta(t, c.want, got, 1e-9, "a's received time in the mechanism")
	}
	assert.Equal(t, "a", nextJob(t, plain, 720), "a tie: a runs")
	assert.Equal(t, "b", nextJob(t, charged, 720), "a received 35 s more than it is owed: b runs")
}

// A job charged for fewer GPUs than its size is charged in proportion:
// 2 of a 4-GPU job's GPUs for 35 s are 70 GPU-seconds, 17.5 s of the job;
// two types are charged each on its own.
func TestHeldProportional(t *testing.T) {
	s := heldPair(t)
	require.NoError(t, s.Report(RoundReport{Start: 360, Ran: []Ran{{Job: "b", Seconds: 360}},
		Held: []Held{{Job: "a", Type: topology.V100, GPUSeconds: 2 * 35}}}))
	st, err := s.Status("a")
	require.NoError(t, err)
	assert.InDelta(t, 360+17.5, st.Attained[topology.V100], 1e-9)
	got, _ := mechUnitReceived(t, s, topology.V100, "a")
	assert.InDelta(t, 360+17.5, got, 1e-9)

	// A job of the round that did not run (not in Ran) may hold GPUs too;
	// each type is charged on its own.
	s = newSched(t, nil) // 8 V100s, 4 K80s
	require.NoError(t, s.Submit("x", JobSpec{GPUs: 2, Throughput: rates(1, 1)}, 0))
	r, err := s.Round(ctx, 0)
	require.NoError(t, err)
	require.Len(t, r.Assignments, 1)
	require.NoError(t, s.Report(RoundReport{Start: 0, Held: []Held{
		{Job: "x", Type: topology.V100, GPUSeconds: 100}, {Job: "x", Type: topology.K80, GPUSeconds: 20}}}))
	st, err = s.Status("x")
	require.NoError(t, err)
	assert.InDelta(t, 50, st.Attained[topology.V100], 1e-9, "100 GPU-seconds of a 2-GPU job")
	assert.InDelta(t, 10, st.Attained[topology.K80], 1e-9, "20 GPU-seconds of a 2-GPU job")
	got, _ = mechUnitReceived(t, s, r.Assignments[0].Type, "x")
	assert.InDelta(t, st.Attained[r.Assignments[0].Type], got, 1e-9)
}

// A job that was not in its tier's problem at the round (submitted after
// it) cannot be credited to the mechanism, which takes only jobs of the
// round's problem: it is charged attained time only, and the report
// (its Ran included) is taken.
func TestHeldJobNotInTheRound(t *testing.T) {
	s := heldPair(t)
	require.NoError(t, s.Submit("c", JobSpec{GPUs: 4, Throughput: rates(1, 0)}, 400))
	require.NoError(t, s.Report(RoundReport{Start: 360, Ran: []Ran{{Job: "b", Seconds: 360}},
		Held: []Held{{Job: "c", Type: topology.V100, GPUSeconds: 40}}}))
	st, err := s.Status("c")
	require.NoError(t, err)
	assert.InDelta(t, 10, st.Attained[topology.V100], 1e-9)
	_, ok := mechUnitReceived(t, s, topology.V100, "c")
	assert.False(t, ok, "the mechanism has no unit for c")
	st, err = s.Status("b")
	require.NoError(t, err)
	assert.InDelta(t, 360, st.Attained[topology.V100], 1e-9, "the report's runs are credited")
}

// Bad Held entries are refused with a typed error naming the job and
// what is wrong, and nothing of the report is credited; the report can
// then be sent right.
func TestHeldErrors(t *testing.T) {
	s := heldPair(t)
	ran := []Ran{{Job: "b", Seconds: 360}}
	v100 := topology.V100
	for _, c := range []struct {
		held []Held
		want error
		says string
	}{
		{[]Held{{Job: "nope", Type: v100, GPUSeconds: 1}}, ErrStaleReport, `"nope"`},
		{[]Held{{Job: "nope", Type: v100, GPUSeconds: 1}}, ErrUnknownJob, `"nope"`},
		{[]Held{{Job: "a", Type: "H100", GPUSeconds: 1}}, ErrInvalid, `"H100", which the cluster has none of`},
		{[]Held{{Job: "a", Type: v100, GPUSeconds: 1}, {Job: "a", Type: v100, GPUSeconds: 1}}, ErrInvalid, `job "a" held v100 GPUs reported twice`},
		{[]Held{{Job: "a", Type: v100, GPUSeconds: -1}}, ErrInvalid, `job "a" held -1 GPU-seconds`},
		{[]Held{{Job: "a", Type: v100, GPUSeconds: math.NaN()}}, ErrInvalid, `job "a" held NaN GPU-seconds`},
		{[]Held{{Job: "a", Type: v100, GPUSeconds: math.Inf(1)}}, ErrInvalid, `job "a" held +Inf GPU-seconds`},
		// 4 GPUs for the 360 s round are 1440 GPU-seconds at most.
		{[]Held{{Job: "a", Type: v100, GPUSeconds: 1441}}, ErrInvalid, `want 0 to 1440 in all: its 4 GPUs for the round of 360 s`},
	} {
		err := s.Report(RoundReport{Start: 360, Ran: ran, Held: c.held})
		require.ErrorIs(t, err, c.want, "%+v", c.held)
		assert.Contains(t, err.Error(), c.says)
		st, err := s.Status("b")
		require.NoError(t, err)
		assert.InDelta(t, 0, st.Attained[v100], 1e-9, "%+v: nothing credited", c.held)
	}
	require.NoError(t, s.Report(RoundReport{Start: 360, Ran: ran, Held: []Held{{Job: "a", Type: v100, GPUSeconds: 1440}}}))
	st, err := s.Status("a")
	require.NoError(t, err)
	assert.InDelta(t, 720, st.Attained[v100], 1e-9, "the whole round held: charged the round")

	// Two types: the bound is on the sum.
	s = newSched(t, nil)
	require.NoError(t, s.Submit("x", JobSpec{GPUs: 4, Throughput: rates(1, 1)}, 0))
	require.NoError(t, s.Submit("y", JobSpec{GPUs: 4, Throughput: rates(1, 1)}, 0))
	r, err := s.Round(ctx, 0)
	require.NoError(t, err)
	require.Len(t, r.Assignments, 2)
	require.NoError(t, s.Submit("z", JobSpec{GPUs: 4, Throughput: rates(1, 1)}, 0))
	err = s.Report(RoundReport{Start: 0, Held: []Held{{Job: "z", Type: v100, GPUSeconds: 1000}, {Job: "z", Type: topology.K80, GPUSeconds: 441}}})
	require.ErrorIs(t, err, ErrInvalid)
	assert.Contains(t, err.Error(), "want 0 to 1440 in all")
}

// Held time survives a restart: what a report charged is in the snapshot
// (attained and the mechanism's received times), and a report sent after
// a Restore is charged to the restored mechanism as well.
func TestHeldAcrossRestore(t *testing.T) {
	restore := func(s *Scheduler) *Scheduler {
		data, err := s.Snapshot()
		require.NoError(t, err)
		s2 := newSched(t, func(c *Config) { c.Cluster, _ = topology.ParseCompact("v100:4:4", 4) })
		require.NoError(t, s2.Restore(data))
		return s2
	}
	held := RoundReport{Start: 360, Ran: []Ran{{Job: "b", Seconds: 360}}, Held: []Held{{Job: "a", Type: topology.V100, GPUSeconds: 4 * 35}}}
	after := heldPair(t)
	require.NoError(t, after.Report(held))
	after = restore(after)
	before := restore(heldPair(t))
	require.NoError(t, before.Report(held))
	for name, s := range map[string]*Scheduler{"reported, then restored": after, "restored, then reported": before} {
		st, err := s.Status("a")
		require.NoError(t, err)
		assert.InDelta(t, 395, st.Attained[topology.V100], 1e-9, name)
		got, _ := mechUnitReceived(t, s, topology.V100, "a")
		assert.InDelta(t, 395, got, 1e-9, name)
		assert.Equal(t, "b", nextJob(t, s, 720), name)
	}
}

// A job that ran may also have held GPUs beyond its lease (review of
// #40: an admitted Job whose tenant deleted its pods, replaced at once
// while the old ones still held their GPUs): it is charged both, its run
// and the held time. b runs the round at 360 s, and its old pods held its
// 4 GPUs for 35 s more: 395 s, in its attained time and in the
// mechanism's received time. Before, the report was refused (ErrInvalid:
// "reported both as run and as holding GPUs").
func TestHeldBeyondARun(t *testing.T) {
	s := heldPair(t)
	require.NoError(t, s.Report(RoundReport{Start: 360, Ran: []Ran{{Job: "b", Seconds: 360}},
		Held: []Held{{Job: "b", Type: topology.V100, GPUSeconds: 4 * 35}}}))
	st, err := s.Status("b")
	require.NoError(t, err)
	assert.InDelta(t, 395, st.Attained[topology.V100], 1e-9)
	assert.Equal(t, 1, st.Rounds, "held time is no round run")
	got, ok := mechUnitReceived(t, s, topology.V100, "b")
	require.True(t, ok)
	assert.InDelta(t, 395, got, 1e-9)
}
