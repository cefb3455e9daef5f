package scheduler

import (
	"context"
	"errors"
	"testing"

	"github.com/gpusched/gpusched/allocation"
	"github.com/gpusched/gpusched/cluster"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Keys, tenants and gangs are valid UTF-8 without a NUL byte, checked
// where they come in: a key "a\xffb" was accepted by Submit and written by
// Snapshot as "a\ufffdb" (JSON replaces invalid bytes), so that Restore
// brought back another key, and two keys could become one.
func TestNamesAreUTF8(t *testing.T) {
	s := newSched(t, nil)
	spec := JobSpec{GPUs: 1, Throughput: rates(1, 1)}
	for _, tc := range []struct {
		key, tenant, gang, want string
	}{
		{"a\xffb", "", "", `job key "a\xffb" is not valid UTF-8`},
		{"a", "t\xff", "", `tenant "t\xff" is not valid UTF-8`},
		{"a", "", "g\xc3", `gang "g\xc3" is not valid UTF-8`},
		{"a", "t\x00u", "", `tenant "t\x00u" holds a NUL byte`},
		{"a", "", "g\x00h", `gang "g\x00h" holds a NUL byte`},
	} {
		sp := spec
		sp.Tenant, sp.Gang = tc.tenant, tc.gang
		err := s.Submit(tc.key, sp, 0)
		require.ErrorIs(t, err, ErrInvalid, "%q", tc.key)
		assert.ErrorContains(t, err, tc.want)
	}
	assert.Empty(t, s.Jobs())

	// Update checks them as Submit does, and changes nothing when it refuses.
	require.NoError(t, s.Submit("a", spec, 0))
	bad := spec
	bad.Tenant = "t\xff"
	err := s.Update("a", bad)
	require.ErrorIs(t, err, ErrInvalid)
	assert.ErrorContains(t, err, "tenant")
	bad = spec
	bad.Gang = "\x00"
	require.ErrorIs(t, s.Update("a", bad), ErrInvalid)
	st, err := s.Status("a")
	require.NoError(t, err)
	assert.Empty(t, st.Spec.Tenant)
	assert.Empty(t, st.Spec.Gang)

	// The configuration's tenants as well.
	_, err = New(Config{Policy: &allocation.MaxMinFairness{}, TenantWeights: map[string]float64{"t\xff": 1}})
	require.ErrorIs(t, err, ErrInvalid)
	assert.ErrorContains(t, err, "Config.TenantWeights")
	_, err = New(Config{Policy: &allocation.MaxMinFairness{}, TenantQuotas: map[string]allocation.Quota{"t\x00": {}}})
	require.ErrorIs(t, err, ErrInvalid)
	assert.ErrorContains(t, err, "Config.TenantQuotas")
}

// Names of any valid UTF-8 come back from a snapshot as they went in.
func TestUnicodeNamesSurviveRestore(t *testing.T) {
	s := newSched(t, nil)
	keys := []string{"ключ", "作业-1", "🚀", "a\u00a0b"}
	for i, k := range keys {
		sp := JobSpec{GPUs: 1, Throughput: rates(1, 1), Tenant: "équipe", Gang: ""}
		if i < 2 {
			sp.Gang = "群"
		}
		require.NoError(t, s.Submit(k, sp, 0))
	}
	_, err := s.Round(ctx, 0)
	require.NoError(t, err)
	data, err := s.Snapshot()
	require.NoError(t, err)
	s2 := newSched(t, nil)
	require.NoError(t, s2.Restore(data))
	assert.Equal(t, s.Jobs(), s2.Jobs())
	for _, k := range keys {
		st, err := s2.Status(k)
		require.NoError(t, err)
		assert.Equal(t, "équipe", st.Spec.Tenant)
	}
}

// A report names a job at most once, in Ran or in Failed: a job in both,
// or failed twice, was accepted (and credited, then evicted).
func TestReportNamesAJobOnce(t *testing.T) {
	s := newSched(t, nil)
	require.NoError(t, s.Submit("a", JobSpec{GPUs: 1, Throughput: rates(1, 1)}, 0))
	require.NoError(t, s.Submit("b", JobSpec{GPUs: 1, Throughput: rates(1, 1)}, 0))
	r, err := s.Round(ctx, 0)
	require.NoError(t, err)
	require.Len(t, r.Assignments, 2)
	before, err := s.Snapshot()
	require.NoError(t, err)
	for _, tc := range []struct {
		rep  RoundReport
		want string
	}{
		{RoundReport{Start: 0, Ran: []Ran{{Job: "a", Seconds: 10}}, Failed: []string{"a"}}, `job "a" is reported both as run and as failed`},
		{RoundReport{Start: 0, Failed: []string{"b", "b"}}, `job "b" reported failed twice`},
	} {
		err := s.Report(tc.rep)
		require.ErrorIs(t, err, ErrInvalid)
		assert.ErrorContains(t, err, tc.want)
		after, err := s.Snapshot()
		require.NoError(t, err)
		assert.JSONEq(t, string(before), string(after), "a refused report changes nothing")
	}
	require.NoError(t, s.Report(RoundReport{Start: 0, Ran: []Ran{{Job: "a", Seconds: 10}}, Failed: []string{"b"}}))
}

// Bind's refusals all wrap ErrInvalid (a device named twice returned the
// cluster's error alone), and FailGPUs names the index it cannot find (an
// index of -1 was left out of the message).
func TestBindAndFailErrors(t *testing.T) {
	s := newSched(t, nil)
	require.NoError(t, s.Submit("a", JobSpec{GPUs: 2, Throughput: rates(1, 1)}, 0))
	err := s.Bind("a", []Device{{Server: "v100-0", Index: 1}, {Server: "v100-0", Index: 1}})
	require.ErrorIs(t, err, ErrInvalid)
	assert.ErrorIs(t, err, cluster.ErrInvalid)
	assert.ErrorContains(t, err, `job "a"`)
	err = s.Bind("a", []Device{{Server: "v100-0", Index: 1}, {Server: "v100-0", Index: 9}})
	require.ErrorIs(t, err, ErrInvalid)
	assert.ErrorIs(t, err, cluster.ErrInvalid)
	err = s.Bind("a", []Device{{Server: "v100-0", Index: 1}, {Server: "nope", Index: 0}})
	require.ErrorIs(t, err, ErrInvalid)
	assert.ErrorIs(t, err, cluster.ErrUnknownServer)
	st, err := s.Status("a")
	require.NoError(t, err)
	assert.Empty(t, st.Devices, "a refused bind binds nothing")

	_, err = s.FailGPUs("v100-0", -1)
	require.ErrorIs(t, err, cluster.ErrInvalid)
	assert.ErrorContains(t, err, "no GPU of NVML index -1")
	_, err = s.FailGPUs("v100-0", 7)
	assert.ErrorContains(t, err, "no GPU of NVML index 7")
}

// lowFails is max-min fairness that fails, while fail is set, on a
// problem holding the job of ID id (a policy error, or a solve cancelled
// by its context, in one tier of a round).
type lowFails struct {
	allocation.MaxMinFairness
	fail bool
	id   int
}

func (p *lowFails) Allocate(ctx context.Context, pr *allocation.Problem) (*allocation.Allocation, error) {
	for _, j := range pr.Jobs {
		if p.fail && j.ID == p.id {
			return nil, errors.New("solver failed")
		}
	}
	return p.MaxMinFairness.Allocate(ctx, pr)
}

// A round that fails changes nothing: when the lower tier's policy failed,
// the upper tier's mechanism had already advanced and the last round had
// been credited (its report then refused), so that the rounds after
// differed from those of a scheduler whose round never failed.
func TestFailedRoundChangesNothing(t *testing.T) {
	run := func(failOnce bool) []*Round {
		pol := &lowFails{id: 1}
		s := newSched(t, func(c *Config) { c.Policy = pol })
		require.NoError(t, s.Submit("hi", JobSpec{GPUs: 4, Throughput: rates(2, 1), Priority: 1}, 0))
		require.NoError(t, s.Submit("lo", JobSpec{GPUs: 8, Throughput: rates(2, 1)}, 0))
		require.NoError(t, s.Submit("lo2", JobSpec{GPUs: 2, Throughput: rates(1, 1)}, 0))
		var out []*Round
		now := 0.0
		for i := range 4 {
			if i == 2 {
				s.ForceReset() // every tier solves
			}
			if failOnce && i == 2 {
				before, err := s.Snapshot()
				require.NoError(t, err)
				pol.fail = true
				_, err = s.Round(ctx, now)
				require.ErrorContains(t, err, "priority 0: solver failed")
				pol.fail = false
				after, err := s.Snapshot()
				require.NoError(t, err)
				assert.JSONEq(t, string(before), string(after), "a failed round changes nothing")
			}
			r, err := s.Round(ctx, now)
			require.NoError(t, err)
			r.Stats.Took, r.Stats.SolveTime = 0, 0
			out = append(out, r)
			if i == 0 { // round 1 is left unreported: the next credits it
				require.NoError(t, s.Report(RoundReport{Start: r.Start, Ran: []Ran{{Job: "hi", Seconds: 200, Steps: 5}}}))
			}
			now += 360
		}
		return out
	}
	assert.Equal(t, run(false), run(true))
}
