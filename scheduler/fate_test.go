package scheduler

import (
	"encoding/json"
	"fmt"
	"slices"
	"testing"

	"github.com/gpusched/gpusched/topology"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// everyJobOnce checks that a round says what became of every job: each
// submitted job is in exactly one of Assignments, Waiting and Finished,
// unless it finished in an earlier round.
func everyJobOnce(t *testing.T, s *Scheduler, r *Round, earlier map[string]bool) {
	t.Helper()
	seen := map[string]string{}
	note := func(k, where string) {
		require.Empty(t, seen[k], "job %s in %s and %s", k, seen[k], where)
		seen[k] = where
	}
	for _, as := range r.Assignments {
		for _, k := range as.Jobs {
			note(k, "assignments")
		}
	}
	for _, f := range r.Waiting {
		note(f.Job, "waiting")
		require.NotEqual(t, NoReason, f.Reason, f.Job)
		require.Contains(t, []JobState{Waiting, Unrunnable}, f.State, f.Job)
		require.Equal(t, f.State == Unrunnable, f.Reason.unrunnable(), "%s: %v %v", f.Job, f.State, f.Reason)
		st, err := s.Status(f.Job)
		require.NoError(t, err)
		require.Equal(t, f.State, st.State, f.Job)
		require.Equal(t, f.Reason, st.Reason, f.Job)
	}
	for _, k := range r.Finished {
		note(k, "finished")
		earlier[k] = true
	}
	for _, k := range s.Jobs() {
		if seen[k] == "" {
			require.True(t, earlier[k], "job %s is nowhere in the round", k)
		}
	}
}

func fateOf(r *Round, key string) (JobFate, bool) {
	for _, f := range r.Waiting {
		if f.Job == key {
			return f, true
		}
	}
	return JobFate{}, false
}

// Every job's fate is visible in Status and in each Round: jobs that can
// never run are unrunnable with the reason (they used to wait for ever,
// silently, and take a share of the policy's allocation), are looked at
// again when servers join or leave, and a job whose known steps run out
// finishes, leaves the rounds and is listed once (it used to be
// scheduled for ever, its RemainingSteps of 0 read as unknown).
func TestJobFates(t *testing.T) {
	s := newSched(t, nil) // 2 x 4 V100, 1 x 4 K80
	submit := func(key string, spec JobSpec) {
		t.Helper()
		require.NoError(t, s.Submit(key, spec, 0))
	}
	submit("big", JobSpec{GPUs: 1000, Throughput: rates(1, 1)})
	submit("single", JobSpec{GPUs: 8, SingleServer: true, Throughput: rates(1, 0)})
	submit("spread", JobSpec{GPUs: 8, Throughput: rates(1, 0)})
	submit("h100", JobSpec{GPUs: 1, Types: []topology.GPUType{topology.H100}, Throughput: rates(1, 1)})
	submit("norate", JobSpec{GPUs: 1, Throughput: map[topology.GPUType]float64{topology.H100: 1}})
	submit("g1", JobSpec{GPUs: 1, Gang: "g", Throughput: rates(1, 1)})
	submit("g2", JobSpec{GPUs: 100, Gang: "g", Throughput: rates(1, 1)})
	submit("done", JobSpec{GPUs: 1, RemainingSteps: 10, Throughput: rates(0, 1)})
	submit("unknown", JobSpec{GPUs: 1, Throughput: rates(0, 1)})
	want := map[string]Reason{"big": ReasonTooLarge, "single": ReasonServerTooSmall, "h100": ReasonNoType, "norate": ReasonNoRate,
		"g2": ReasonTooLarge, "g1": ReasonGangUnrunnable}
	for k, reason := range want {
		st, err := s.Status(k)
		require.NoError(t, err)
		assert.Equal(t, Unrunnable, st.State, k)
		assert.Equal(t, reason, st.Reason, k)
	}
	st, err := s.Status("spread")
	require.NoError(t, err)
	assert.Equal(t, Waiting, st.State)
	assert.Equal(t, ReasonNew, st.Reason)

	earlier := map[string]bool{}
	r, err := s.Round(ctx, 0)
	require.NoError(t, err)
	everyJobOnce(t, s, r, earlier)
	for k, reason := range want {
		f, ok := fateOf(r, k)
		require.True(t, ok, k)
		assert.Equal(t, JobFate{Job: k, State: Unrunnable, Reason: reason}, f)
	}
	run := byJob(r)
	require.Contains(t, run, "done")
	require.Contains(t, run, "spread", "8 V100 for the one job that can use them")
	// The unrunnable jobs take no share: the policy allocates the others
	// alone (a 1,000-GPU job used to be in the problem).
	for _, tr := range s.tiers {
		for _, j := range tr.problem.Jobs {
			assert.True(t, s.byID[j.ID].active(), s.byID[j.ID].key)
		}
	}

	// done's steps run out: it finishes, is listed once, leaves the rounds.
	require.NoError(t, s.Report(RoundReport{Start: 0, Ran: []Ran{{Job: "done", Seconds: 360, Steps: 10}, {Job: "unknown", Seconds: 360, Steps: 50}}}))
	st, err = s.Status("done")
	require.NoError(t, err)
	assert.Equal(t, Finished, st.State)
	assert.True(t, st.RemainingKnown)
	assert.Zero(t, st.Spec.RemainingSteps)
	st, err = s.Status("unknown")
	require.NoError(t, err)
	assert.False(t, st.RemainingKnown, "no steps given: unknown, not done")
	assert.Zero(t, st.Spec.RemainingSteps)
	r, err = s.Round(ctx, 360)
	require.NoError(t, err)
	everyJobOnce(t, s, r, earlier)
	assert.Equal(t, []string{"done"}, r.Finished)
	assert.NotContains(t, r.Preempted, "done", "a finished job is not preempted")
	assert.NotContains(t, byJob(r), "done")
	assert.Contains(t, byJob(r), "unknown")
	r, err = s.Round(ctx, 720)
	require.NoError(t, err)
	everyJobOnce(t, s, r, earlier)
	assert.Empty(t, r.Finished, "listed once")

	// A V100 server of 8 joins: single can run; g2 still cannot (100).
	c, err := topology.Homogeneous(1, topology.ServerTemplate{Type: topology.V100, GPUs: 8})
	require.NoError(t, err)
	srv := c.Servers[0]
	srv.ID = "big-v100"
	require.NoError(t, s.AddServer(srv))
	st, err = s.Status("single")
	require.NoError(t, err)
	assert.Equal(t, Waiting, st.State)
	assert.Equal(t, ReasonNew, st.Reason)
	r, err = s.Round(ctx, 1080)
	require.NoError(t, err)
	everyJobOnce(t, s, r, earlier)
	_, err = s.RemoveServer("big-v100")
	require.NoError(t, err)
	st, err = s.Status("single")
	require.NoError(t, err)
	assert.Equal(t, Unrunnable, st.State)
	assert.Equal(t, ReasonServerTooSmall, st.Reason)

	// g2 shrinks: the gang can run.
	g2, err := s.Status("g2")
	require.NoError(t, err)
	g2.Spec.GPUs = 1
	require.NoError(t, s.Update("g2", g2.Spec))
	for _, k := range []string{"g1", "g2"} {
		st, err := s.Status(k)
		require.NoError(t, err)
		assert.Equal(t, Waiting, st.State, k)
	}
	// Update gives done work again: back in the rounds.
	d, err := s.Status("done")
	require.NoError(t, err)
	d.Spec.RemainingSteps = 5
	require.NoError(t, s.Update("done", d.Spec))
	st, err = s.Status("done")
	require.NoError(t, err)
	assert.Equal(t, Waiting, st.State)
	assert.Equal(t, ReasonNew, st.Reason)
	r, err = s.Round(ctx, 1440)
	require.NoError(t, err)
	everyJobOnce(t, s, r, earlier)
}

// A job that loses its GPUs waits with ReasonPreempted, in Status at once
// and in the next round (unless it runs again).
func TestFatePreempted(t *testing.T) {
	s := newSched(t, nil)
	require.NoError(t, s.Submit("a", JobSpec{GPUs: 4, Throughput: rates(1, 0)}, 0))
	require.NoError(t, s.Submit("b", JobSpec{GPUs: 4, Priority: 1, Throughput: rates(1, 0)}, 0))
	r, err := s.Round(ctx, 0)
	require.NoError(t, err)
	require.Len(t, r.Assignments, 2)
	st, err := s.Status("a")
	require.NoError(t, err)
	assert.Equal(t, Running, st.State)
	_, err = s.FailGPUs(byJob(r)["a"].Devices[0].Server) // the whole server: b keeps the other
	require.NoError(t, err)
	st, err = s.Status("a")
	require.NoError(t, err)
	assert.Equal(t, Waiting, st.State)
	assert.Equal(t, ReasonPreempted, st.Reason)
	r, err = s.Round(ctx, 360)
	require.NoError(t, err)
	everyJobOnce(t, s, r, map[string]bool{})
	assert.Equal(t, []string{"a"}, r.Preempted)
	f, ok := fateOf(r, "a")
	require.True(t, ok)
	assert.Equal(t, JobFate{Job: "a", State: Waiting, Reason: ReasonPreempted}, f)
}

// States and reasons read and write as their names.
func TestFateJSON(t *testing.T) {
	b, err := json.Marshal(JobFate{Job: "x", State: Unrunnable, Reason: ReasonServerTooSmall})
	require.NoError(t, err)
	assert.JSONEq(t, `{"job":"x","state":"unrunnable","reason":"server-too-small"}`, string(b))
	var f JobFate
	require.NoError(t, json.Unmarshal(b, &f))
	assert.Equal(t, ReasonServerTooSmall, f.Reason)
	assert.ErrorIs(t, json.Unmarshal([]byte(`{"state":"gone"}`), &f), ErrInvalid)
	for r := NoReason; r <= ReasonGangUnrunnable; r++ {
		var back Reason
		text, err := r.MarshalText()
		require.NoError(t, err)
		require.NoError(t, back.UnmarshalText(text))
		assert.Equal(t, r, back)
	}
	assert.Equal(t, "Reason(99)", Reason(99).String())
	_, err = Reason(99).MarshalText()
	assert.ErrorIs(t, err, ErrInvalid)
	assert.True(t, slices.IsSorted([]int{int(ReasonNoType), int(ReasonNoRate), int(ReasonTooLarge)}))
	assert.Equal(t, "finished", fmt.Sprint(Finished))
}
