package scheduler

import (
	"context"
	"math"
	"testing"

	"github.com/gpusched/gpusched/perfmodel/learn"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// auditWork is the work of the audited job: five rounds on a V100.
const auditWork = 3 * 360 * 5

// auditRun runs job a (4 GPUs, 3 steps/s on a V100, 1 on a K80, its work
// declared, of group g) to its end, its reports of its cumulative steps
// scaled by lie, each round's true steps reported; it returns the
// scheduler and the jobs each round's stats name as failing the audit.
// The job reports at the start and the end of each run and every 60 s
// between; sparse, only every 150 s from its run's start, not at its
// start nor its end.
func auditRun(t *testing.T, explore Explore, lie float64, sparse ...bool) (*Scheduler, [][]string) {
	t.Helper()
	explore.Refit = -1 // refit every round
	s := newSched(t, func(c *Config) { c.Estimator, c.Explore = newLearner(t), explore })
	require.NoError(t, s.Submit("a", JobSpec{GPUs: 4, Learn: true, Group: "g", RemainingSteps: auditWork, TotalSteps: auditWork}, 0))
	truth := rates(3, 1)
	var failed [][]string
	done := 0.0
	for r := 0; r < 40; r++ {
		now := float64(r) * 360
		rd, err := s.Round(context.Background(), now)
		require.NoError(t, err)
		failed = append(failed, rd.Stats.AuditFailed)
		st, err := s.Status("a")
		require.NoError(t, err)
		if st.State == Finished {
			return s, failed
		}
		rep := RoundReport{Start: now}
		for _, a := range rd.Assignments {
			if a.Jobs[0] != "a" {
				continue
			}
			rate := truth[a.Type]
			ran := math.Min(360, (auditWork-done)/rate)
			if len(sparse) > 0 {
				for at := 150.0; at <= ran; at += 150 {
					require.NoError(t, s.Progress("a", lie*(done+rate*at), now+at))
				}
			} else {
				for i := 0; float64(i)*60 <= ran; i++ {
					require.NoError(t, s.Progress("a", lie*(done+rate*60*float64(i)), now+60*float64(i)))
				}
				require.NoError(t, s.Progress("a", lie*(done+rate*ran), now+ran))
			}
			done += rate * ran
			rep.Ran = append(rep.Ran, Ran{Job: "a", Seconds: ran, Steps: rate * ran})
		}
		require.NoError(t, s.Report(rep))
	}
	t.Fatal("job a did not finish")
	return nil, nil
}

func names(failed [][]string) []string {
	var out []string
	for _, f := range failed {
		out = append(out, f...)
	}
	return out
}

// groupSource says whether a new job of group g has g's estimates.
func groupSource(t *testing.T, s *Scheduler) bool {
	t.Helper()
	require.NoError(t, s.Remove("a"))
	require.NoError(t, s.Submit("b", JobSpec{GPUs: 4, Learn: true, Group: "g"}, 1e5))
	_, err := s.Round(context.Background(), 1e5)
	require.NoError(t, err)
	st, err := s.Status("b")
	require.NoError(t, err)
	for _, e := range st.Estimates {
		if e.Source == learn.SourceGroup {
			return true
		}
	}
	return false
}

// Steps must add up (issue #41's trust rules): a job that declares its
// work (JobSpec.TotalSteps) and reports it honestly passes the audit,
// its reports adding up to its work, and its runs reach the next run of
// its program (its group); one that inflates its reports three times
// fails as soon as they pass its total by the slack (10%), before it
// finishes, and one that deflates them by half fails when its work is
// done: either way the round's stats name it once, and what it measured
// reaches no other job. With the audit off (Audit -1) an inflating job
// is not audited.
func TestAuditStepsAddUp(t *testing.T) {
	s, failed := auditRun(t, Explore{}, 1)
	st, err := s.Status("a")
	require.NoError(t, err)
	assert.Equal(t, AuditPassed, st.Audit)
	assert.InDelta(t, auditWork, st.ReportedSteps, 1e-6)
	assert.Empty(t, names(failed))
	assert.True(t, groupSource(t, s), "honest: its group carries what it measured")

	// Reports every 150 s, none at a run's start or end: what the job did
	// between its runs' reports counts at its next report; only the tail
	// after its last report is not reported (within the slack).
	s, failed = auditRun(t, Explore{}, 1, true)
	st, err = s.Status("a")
	require.NoError(t, err)
	assert.Equal(t, AuditPassed, st.Audit, "sparse reports: %v of %v", st.ReportedSteps, float64(auditWork))
	assert.Empty(t, names(failed))
	assert.Greater(t, st.ReportedSteps, 0.9*auditWork)

	s, failed = auditRun(t, Explore{}, 3)
	st, err = s.Status("a")
	require.NoError(t, err)
	assert.Equal(t, AuditFailed, st.Audit)
	assert.Equal(t, []string{"a"}, names(failed), "named once")
	assert.Empty(t, failed[len(failed)-1], "named before it finished")
	assert.Greater(t, st.ReportedSteps, 1.1*auditWork)
	assert.False(t, groupSource(t, s), "inflated: its measurements reach no other job")

	s, failed = auditRun(t, Explore{}, 0.5)
	st, err = s.Status("a")
	require.NoError(t, err)
	assert.Equal(t, AuditFailed, st.Audit)
	assert.Equal(t, []string{"a"}, failed[len(failed)-1], "named at the round after its work was done")
	assert.InDelta(t, 0.5*auditWork, st.ReportedSteps, 1e-6)
	assert.False(t, groupSource(t, s), "deflated: its measurements reach no other job")

	s, failed = auditRun(t, Explore{Audit: -1}, 3)
	st, err = s.Status("a")
	require.NoError(t, err)
	assert.Equal(t, AuditNone, st.Audit)
	assert.Empty(t, names(failed))
}

// The audit's state is in the snapshot (a job that failed, restored
// into an estimator that does not know it, is registered private again);
// bad values are refused.
func TestAuditSnapshotAndValidation(t *testing.T) {
	s, _ := auditRun(t, Explore{}, 3)
	data, err := s.Snapshot()
	require.NoError(t, err)
	s2 := newSched(t, func(c *Config) { c.Estimator, c.Explore = newLearner(t), Explore{Refit: -1} })
	require.NoError(t, s2.Restore(data))
	st, err := s2.Status("a")
	require.NoError(t, err)
	assert.Equal(t, AuditFailed, st.Audit)
	assert.Greater(t, st.ReportedSteps, 1.1*auditWork)
	assert.False(t, groupSource(t, s2), "restored into a new estimator, it stays out of the population")

	for _, e := range []Explore{{Audit: 1.5}, {Audit: -2}, {Audit: math.NaN()}} {
		_, err := New(Config{Policy: s.cfg.Policy, Estimator: newLearner(t), Explore: e})
		require.ErrorIs(t, err, ErrInvalid, "%+v", e)
		assert.Contains(t, err.Error(), "Audit")
	}
	s = newSched(t, func(c *Config) { c.Estimator = newLearner(t) })
	for _, v := range []float64{-1, math.NaN(), math.Inf(1), 2 * learn.MaxSteps} {
		err := s.Submit("x", JobSpec{GPUs: 1, Learn: true, TotalSteps: v}, 0)
		require.ErrorIs(t, err, ErrInvalid, "%v", v)
		assert.Contains(t, err.Error(), "TotalSteps")
	}
}
