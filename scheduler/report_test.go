package scheduler

import (
	"errors"
	"testing"

	"github.com/gpusched/gpusched/allocation"
	"github.com/gpusched/gpusched/topology"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// tieredRound runs the round at t=0 of three 4-GPU jobs on 3 servers of
// 4 V100s: hi of priority 1 (1000 steps of work left), lo and f of
// priority 0; all three run.
func tieredRound(t *testing.T) *Scheduler {
	t.Helper()
	s := newSched(t, func(c *Config) { c.Cluster, _ = topology.ParseCompact("v100:12:4", 4) })
	require.NoError(t, s.Submit("hi", JobSpec{GPUs: 4, Throughput: rates(1, 0), Priority: 1, RemainingSteps: 1000}, 0))
	require.NoError(t, s.Submit("lo", JobSpec{GPUs: 4, Throughput: rates(1, 0)}, 0))
	require.NoError(t, s.Submit("f", JobSpec{GPUs: 4, Throughput: rates(1, 0)}, 0))
	r, err := s.Round(ctx, 0)
	require.NoError(t, err)
	require.Len(t, r.Assignments, 3)
	require.Len(t, s.tiers, 2)
	return s
}

// A report that a tier's mechanism refuses changes nothing (review of
// #40). Report checked the entries, then credited the attained times, the
// round counts and the remaining work of Ran and Held, evicted the Failed
// jobs, and only then the tiers' mechanisms, which may still refuse (here
// the lower tier's, told of the round already): the report failed with
// all that done, and an embedder that sent it again (the admission
// controller, without its Held part) or left it to the next Round (which
// credits an unreported round in full) credited the runs twice. Before:
// after the refusal hi had 360 s attained, 1 round, 900 steps left, its
// tier's mechanism 360 s received, and f 100 s attained (its 400
// GPU-seconds held) and no GPUs; now the state
// is as before the report (its snapshot the same), and the report, sent
// again once the mechanism takes it, credits the runs once.
func TestReportRefusedByAMechanismChangesNothing(t *testing.T) {
	s := tieredRound(t)
	lo := s.jobs["lo"].tier.mech
	untold, err := lo.Snapshot()
	require.NoError(t, err)
	require.NoError(t, lo.Report(allocation.RoundReport{Start: 0}))
	before, err := s.Snapshot()
	require.NoError(t, err)
	rep := RoundReport{Start: 0, Ran: []Ran{{Job: "hi", Seconds: 360, Steps: 100}, {Job: "lo", Seconds: 360}}, Failed: []string{"f"},
		Held: []Held{{Job: "f", Type: topology.V100, GPUSeconds: 400}}}
	err = s.Report(rep)
	require.ErrorIs(t, err, allocation.ErrInvalidReport)
	var re *ReportError
	assert.False(t, errors.As(err, &re), "not an entry's fault: %v", err)
	after, err := s.Snapshot()
	require.NoError(t, err)
	assert.JSONEq(t, string(before), string(after), "a refused report changes nothing")
	st, err := s.Status("hi")
	require.NoError(t, err)
	assert.Zero(t, st.Attained[topology.V100]+st.Attained[topology.K80], "hi's attained time")
	assert.Zero(t, st.Rounds)
	assert.InDelta(t, 1000, st.Spec.RemainingSteps, 1e-9)
	got, ok := mechUnitReceived(t, s, st.Type, "hi")
	require.True(t, ok)
	assert.Zero(t, got, "hi's tier's mechanism, credited before the lower tier's refused, is rolled back")
	assert.Len(t, devicesOf(t, s, "f"), 4, "f keeps its GPUs")

	// Once the mechanism is as it was, it takes the report: each run is
	// credited once.
	require.NoError(t, lo.Restore(untold))
	require.NoError(t, s.Report(rep))
	st, err = s.Status("hi")
	require.NoError(t, err)
	assert.InDelta(t, 360, st.Attained[st.Type], 1e-9)
	assert.Equal(t, 1, st.Rounds)
	assert.InDelta(t, 900, st.Spec.RemainingSteps, 1e-9)
	assert.Empty(t, devicesOf(t, s, "f"), "f failed: its GPUs are released")
	got, _ = mechUnitReceived(t, s, st.Type, "hi")
	assert.InDelta(t, 360, got, 1e-9, "hi's tier's mechanism credited once")
}

// devicesOf returns the GPUs a job holds.
func devicesOf(t *testing.T, s *Scheduler, key string) []Device {
	t.Helper()
	st, err := s.Status(key)
	require.NoError(t, err)
	return st.Devices
}

// Report's refusals of an entry are *ReportError values naming the field
// and the entry, wrapping the error's kind, so that an embedder can tell
// a refused Held part (which it may send again without) from a refused
// run.
func TestReportErrorNamesTheField(t *testing.T) {
	s := tieredRound(t)
	v100 := topology.V100
	for _, c := range []struct {
		rep   RoundReport
		field ReportField
		index int
		kind  error
	}{
		{RoundReport{Ran: []Ran{{Job: "hi", Seconds: 1}, {Job: "nope", Seconds: 1}}}, FieldRan, 1, ErrStaleReport},
		{RoundReport{Ran: []Ran{{Job: "hi", Seconds: 1}, {Job: "nope", Seconds: 1}}}, FieldRan, 1, ErrUnknownJob},
		{RoundReport{Ran: []Ran{{Job: "hi", Seconds: 361}}}, FieldRan, 0, ErrInvalid},
		{RoundReport{Ran: []Ran{{Job: "hi", Seconds: 1}}, Failed: []string{"hi"}}, FieldFailed, 0, ErrInvalid},
		{RoundReport{Failed: []string{"f", "nope"}}, FieldFailed, 1, ErrStaleReport},
		{RoundReport{Failed: []string{"f", "nope"}}, FieldFailed, 1, ErrUnknownJob},
		{RoundReport{Held: []Held{{Job: "f", Type: v100, GPUSeconds: 1}, {Job: "nope", Type: v100, GPUSeconds: 1}}}, FieldHeld, 1, ErrUnknownJob},
		{RoundReport{Ran: []Ran{{Job: "hi", Seconds: 1}}, Held: []Held{{Job: "f", Type: v100, GPUSeconds: -1}}}, FieldHeld, 0, ErrInvalid},
	} {
		err := s.Report(c.rep)
		var re *ReportError
		require.ErrorAs(t, err, &re, "%+v", c.rep)
		assert.Equal(t, c.field, re.Field, "%+v", c.rep)
		assert.Equal(t, c.index, re.Index, "%+v", c.rep)
		assert.ErrorIs(t, err, c.kind, "%+v", c.rep)
	}
	var re *ReportError
	assert.False(t, errors.As(s.Report(RoundReport{Start: 9}), &re), "a stale round is no entry's fault")
	require.NoError(t, s.Report(RoundReport{Ran: []Ran{{Job: "hi", Seconds: 360}}}))
}
