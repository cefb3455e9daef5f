package scheduler

import (
	"encoding/json"
	"math"
	"slices"
	"testing"

	"github.com/gpusched/gpusched/allocation"
	"github.com/gpusched/gpusched/perfmodel"
	"github.com/gpusched/gpusched/topology"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// newTyped returns a max-min scheduler on a compact cluster description.
func newTyped(t *testing.T, compact string) *Scheduler {
	t.Helper()
	c, err := topology.ParseCompact(compact, 4)
	require.NoError(t, err)
	s, err := New(Config{Policy: &allocation.MaxMinFairness{}, Cluster: c})
	require.NoError(t, err)
	return s
}

// Changing the cluster's GPU types between a round and its credit (a
// report, or the next round crediting it in full) credits each job's time
// to the type it ran on, by name; time on a type that has since left the
// cluster is dropped, as the attained time of a vanished type is. Before,
// the last round's units kept their type index from before the change:
// removing every K80 panicked (index 1 of a one-type list), and with three
// types a P100 job's time was credited to V100.
func TestTypeChangeBetweenRoundAndCredit(t *testing.T) {
	spec := JobSpec{GPUs: 1, Throughput: map[topology.GPUType]float64{"v100": 2, "k80": 1}}
	eight := []string{"a", "b", "c", "d", "e", "f", "g", "h"}
	cases := []struct {
		name    string
		compact string
		submit  func(t *testing.T, s *Scheduler)
		change  func(t *testing.T, s *Scheduler)
		report  bool   // report that job key ran 360 s instead of the next round crediting it
		key     string // the job to check; "" for the first that ran on pick
		pick    topology.GPUType
		want    map[topology.GPUType]float64 // key's attained time after the credit
	}{{
		name: "remove every k80, next round", compact: "v100:4,k80:4",
		submit: func(t *testing.T, s *Scheduler) {
			for _, k := range eight {
				require.NoError(t, s.Submit(k, spec, 0))
			}
		},
		change: func(t *testing.T, s *Scheduler) {
			ev, err := s.RemoveServer("k80-0")
			require.NoError(t, err)
			require.Len(t, ev, 4)
		},
		pick: "k80", // its time on a type that left is dropped
		want: map[topology.GPUType]float64{},
	}, {
		name: "remove every k80, report", compact: "v100:4,k80:4",
		submit: func(t *testing.T, s *Scheduler) {
			for _, k := range eight {
				require.NoError(t, s.Submit(k, spec, 0))
			}
		},
		change: func(t *testing.T, s *Scheduler) {
			_, err := s.RemoveServer("k80-0")
			require.NoError(t, err)
		},
		report: true, pick: "v100",
		want: map[topology.GPUType]float64{"v100": 360},
	}, {
		name: "three types, p100 job", compact: "k80:4,p100:4,v100:4",
		submit: func(t *testing.T, s *Scheduler) {
			require.NoError(t, s.Submit("p", JobSpec{GPUs: 4, Throughput: map[topology.GPUType]float64{"p100": 1}}, 0))
		},
		change: func(t *testing.T, s *Scheduler) {
			_, err := s.RemoveServer("k80-0")
			require.NoError(t, err)
		},
		key:  "p",
		want: map[topology.GPUType]float64{"p100": 360},
	}, {
		name: "three types, p100 job, report", compact: "k80:4,p100:4,v100:4",
		submit: func(t *testing.T, s *Scheduler) {
			require.NoError(t, s.Submit("p", JobSpec{GPUs: 4, Throughput: map[topology.GPUType]float64{"p100": 1}}, 0))
		},
		change: func(t *testing.T, s *Scheduler) {
			_, err := s.RemoveServer("k80-0")
			require.NoError(t, err)
		},
		report: true, key: "p",
		want: map[topology.GPUType]float64{"p100": 360},
	}, {
		name: "add a type sorted first", compact: "k80:4,v100:4",
		submit: func(t *testing.T, s *Scheduler) {
			require.NoError(t, s.Submit("k", JobSpec{GPUs: 4, Throughput: map[topology.GPUType]float64{"k80": 1}}, 0))
		},
		change: func(t *testing.T, s *Scheduler) {
			addA100(t, s)
		},
		report: true, key: "k",
		want: map[topology.GPUType]float64{"k80": 360},
	}, {
		name: "add a type sorted first, next round", compact: "k80:4,v100:4",
		submit: func(t *testing.T, s *Scheduler) {
			require.NoError(t, s.Submit("k", JobSpec{GPUs: 4, Throughput: map[topology.GPUType]float64{"k80": 1}}, 0))
		},
		change: func(t *testing.T, s *Scheduler) {
			addA100(t, s)
		},
		key:  "k",
		want: map[topology.GPUType]float64{"k80": 360},
	}, {
		name: "fail every k80 GPU", compact: "k80:4,v100:4",
		submit: func(t *testing.T, s *Scheduler) {
			require.NoError(t, s.Submit("k", JobSpec{GPUs: 4, Throughput: map[topology.GPUType]float64{"k80": 1}}, 0))
			require.NoError(t, s.Submit("v", JobSpec{GPUs: 4, Throughput: map[topology.GPUType]float64{"v100": 1}}, 0))
		},
		change: func(t *testing.T, s *Scheduler) {
			ev, err := s.FailGPUs("k80-0")
			require.NoError(t, err)
			require.Equal(t, []string{"k"}, ev)
		},
		report: true, key: "k",
		want: map[topology.GPUType]float64{"k80": 360},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := newTyped(t, tc.compact)
			tc.submit(t, s)
			r, err := s.Round(ctx, 0)
			require.NoError(t, err)
			key := tc.key
			if key == "" {
				for _, as := range r.Assignments {
					if as.Type == tc.pick && key == "" {
						key = as.Jobs[0]
					}
				}
			}
			require.NotEmpty(t, key)
			tc.change(t, s)
			if tc.report {
				require.NoError(t, s.Report(RoundReport{Start: 0, Ran: []Ran{{Job: key, Seconds: 360}}}))
				// The mechanism's counters are credited by type name too.
				var typ topology.GPUType
				for _, as := range r.Assignments {
					if as.Jobs[0] == key {
						typ = as.Type
					}
				}
				assert.Equal(t, 360.0, mechReceived(t, s, key, typ))
			}
			r2, err := s.Round(ctx, 360)
			require.NoError(t, err)
			checkRound(t, s, r2)
			st, err := s.Status(key)
			require.NoError(t, err)
			assert.Equal(t, tc.want, st.Attained)
			assert.Equal(t, 1, st.Rounds)
		})
	}
}

// addA100 adds a server of A100s, a type sorted before every other.
func addA100(t *testing.T, s *Scheduler) {
	t.Helper()
	c, err := topology.Homogeneous(1, topology.ServerTemplate{Type: topology.A100, GPUs: 2, Interconnect: topology.NVSwitch})
	require.NoError(t, err)
	require.NoError(t, s.AddServer(c.Servers[0]))
}

// Values a round's problem refuses are refused at the door, by Submit,
// Update and Restore, with errors naming the job and the field, so that a
// scheduler never stops: before, Submit accepted a rate of 1e308 or
// 1e-300, a weight or remaining steps of 1e308, a deadline of 1e300, and
// every later Round failed on "job 1".
func TestSpecOutOfAllocationRanges(t *testing.T) {
	good := func() JobSpec { return JobSpec{GPUs: 1, Throughput: rates(2, 1)} }
	cases := []struct {
		name  string
		mod   func(*JobSpec)
		field string
	}{
		{"rate 1e308", func(j *JobSpec) { j.Throughput[topology.V100] = 1e308 }, "Throughput 1e+308 on v100"},
		{"rate 1e-300", func(j *JobSpec) { j.Throughput[topology.K80] = 1e-300 }, "Throughput 1e-300 on k80"},
		{"rate NaN", func(j *JobSpec) { j.Throughput[topology.K80] = math.NaN() }, "Throughput NaN on k80"},
		{"weight 1e308", func(j *JobSpec) { j.Weight = 1e308 }, "Weight 1e+308"},
		{"weight 1e-300", func(j *JobSpec) { j.Weight = 1e-300 }, "Weight 1e-300"},
		{"weight -1", func(j *JobSpec) { j.Weight = -1 }, "Weight -1"},
		{"steps 1e308", func(j *JobSpec) { j.RemainingSteps = 1e308 }, "RemainingSteps 1e+308"},
		{"deadline 1e300", func(j *JobSpec) { j.Deadline = 1e300 }, "Deadline 1e+300"},
		{"deadline -1", func(j *JobSpec) { j.Deadline = -1 }, "Deadline -1"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := newSched(t, nil)
			spec := good()
			tc.mod(&spec)
			err := s.Submit("bad", spec, 0)
			require.ErrorIs(t, err, ErrInvalid)
			assert.ErrorContains(t, err, `job "bad": `)
			assert.ErrorContains(t, err, tc.field)

			require.NoError(t, s.Submit("ok", good(), 0))
			err = s.Update("ok", spec)
			require.ErrorIs(t, err, ErrInvalid)
			assert.ErrorContains(t, err, `job "ok": `)
			assert.ErrorContains(t, err, tc.field)

			// A snapshot that carries the value is refused too (JSON
			// carries no NaN).
			snap, err := s.Snapshot()
			require.NoError(t, err)
			s.jobs["ok"].spec = spec
			bad, err := s.Snapshot()
			s.jobs["ok"].spec = good()
			if err == nil {
				err = newSched(t, nil).Restore(bad)
				require.ErrorIs(t, err, ErrInvalid)
				assert.ErrorContains(t, err, `snapshot job "ok": `)
				assert.ErrorContains(t, err, tc.field)
			}
			require.NoError(t, newSched(t, nil).Restore(snap))

			// The scheduler goes on.
			r, err := s.Round(ctx, 0)
			require.NoError(t, err)
			assert.Len(t, r.Assignments, 1)
		})
	}
	// The bounds themselves are accepted and make rounds.
	s := newSched(t, nil)
	require.NoError(t, s.Submit("edge", JobSpec{GPUs: 1, Throughput: rates(allocation.MaxRate, 0),
		Weight: allocation.MaxWeight, RemainingSteps: allocation.MaxSteps, Deadline: allocation.MaxTime}, 0))
	require.NoError(t, s.Submit("low", JobSpec{GPUs: 1, Throughput: rates(0, allocation.MinRate), Weight: allocation.MinWeight}, 0))
	_, err := s.Round(ctx, 0)
	require.NoError(t, err)
	// Times past allocation.MaxTime are refused as arrivals and rounds.
	assert.ErrorIs(t, s.Submit("late", JobSpec{GPUs: 1, Throughput: rates(1, 1)}, 2*allocation.MaxTime), ErrInvalid)
	_, err = s.Round(ctx, 2*allocation.MaxTime)
	assert.ErrorIs(t, err, ErrInvalid)
}

// A model whose rates are out of range leaves the job off those types
// only, and a round that still fails on a job names its key, not its
// internal number.
func TestRoundErrorNamesJobKey(t *testing.T) {
	s := newSched(t, func(c *Config) {
		c.Throughput = tputFunc(func(_ perfmodel.JobKey, typ topology.GPUType) (float64, error) {
			if typ == topology.K80 {
				return 1e308, nil
			}
			return 1, nil
		})
	})
	k := perfmodel.JobKey{Model: "M", BatchSize: 1}
	err := s.Submit("m", JobSpec{GPUs: 1, Model: &k}, 0)
	require.ErrorIs(t, err, ErrInvalid)
	assert.ErrorContains(t, err, `job "m": the model gives a rate of 1e+308 on k80`)

	require.NoError(t, s.Submit("a", JobSpec{GPUs: 1, Throughput: rates(1, 1)}, 0))
	require.NoError(t, s.Submit("b", JobSpec{GPUs: 1, Throughput: rates(1, 1)}, 0))
	s.jobs["b"].spec.Weight = 1e308 // what no check lets in
	s.jobs["b"].tier.dirty = true
	_, err = s.Round(ctx, 0)
	require.ErrorIs(t, err, allocation.ErrInvalidProblem)
	assert.ErrorContains(t, err, `job "b": `)
}

// New names the setting it refuses, and Update checks the key before the
// spec: an unknown key is ErrUnknownJob whatever the spec says.
func TestConfigAndUpdateErrorsName(t *testing.T) {
	for _, tc := range []struct {
		cfg   Config
		field string
	}{
		{Config{Mechanism: allocation.Mechanism{RoundLength: math.NaN()}}, "Config.Mechanism: allocation: invalid problem: round length NaN s"},
		{Config{MigrationCost: math.NaN()}, "Config.MigrationCost NaN"},
		{Config{Mechanism: allocation.Mechanism{MinResetInterval: math.Inf(1)}}, "Config.Mechanism: allocation: invalid problem: minimum reset interval +Inf s"},
		{Config{SpreadPenalty: math.NaN()}, "Config.SpreadPenalty NaN"},
		{Config{Mechanism: allocation.Mechanism{RoundLength: -1}}, "Config.Mechanism: allocation: invalid problem: round length -1 s, outside [0, 1e+15] (0 means 360)"},
		{Config{SpreadPenalty: 2}, "Config.SpreadPenalty 2"},
	} {
		tc.cfg.Policy = &allocation.MaxMinFairness{}
		_, err := New(tc.cfg)
		require.ErrorIs(t, err, ErrInvalid)
		assert.ErrorContains(t, err, tc.field)
	}
	s := newSched(t, nil)
	err := s.Update("nope", JobSpec{})
	assert.ErrorIs(t, err, ErrUnknownJob)
	assert.NotErrorIs(t, err, ErrInvalid)
}

// mechReceived returns the time the job's tier's mechanism credited the
// job alone with on a type, from its snapshot.
func mechReceived(t *testing.T, s *Scheduler, key string, typ topology.GPUType) float64 {
	t.Helper()
	v, ok := mechUnitReceived(t, s, typ, key)
	require.True(t, ok, "no unit of job %s", key)
	return v
}

// mechUnitReceived returns the time the first job's tier's mechanism
// credited the unit of the jobs (one, or a pair) with on a type, from its
// snapshot, and whether it has such a unit.
func mechUnitReceived(t *testing.T, s *Scheduler, typ topology.GPUType, keys ...string) (float64, bool) {
	t.Helper()
	var ids []int
	for _, k := range keys {
		ids = append(ids, s.jobs[k].id)
	}
	slices.Sort(ids)
	data, err := s.jobs[keys[0]].tier.mech.Snapshot()
	require.NoError(t, err)
	var snap struct {
		Types []topology.GPUType `json:"types"`
		Units []struct {
			JobIDs   []int     `json:"job_ids"`
			Received []float64 `json:"received"`
		} `json:"units"`
	}
	require.NoError(t, json.Unmarshal(data, &snap))
	k := slices.Index(snap.Types, typ)
	require.GreaterOrEqual(t, k, 0, "type %s in %v", typ, snap.Types)
	for _, u := range snap.Units {
		if slices.Equal(u.JobIDs, ids) {
			return u.Received[k], true
		}
	}
	return 0, false
}

// The mechanism's settings are one struct, allocation.Mechanism, that
// scheduler.Config embeds and hands to every tier's allocation.Rounds
// whole, as sim.Config hands it to the scheduler.
func TestMechanismShared(t *testing.T) {
	m := allocation.Mechanism{RoundLength: 120, MinResetInterval: -1, GlobalQueue: true, TypeOrder: []topology.GPUType{topology.K80},
		ShuffleTypes: true, Seed: 9, LeaveIdle: true, Compat: allocation.CompatNone}
	s := newSched(t, func(c *Config) { c.Mechanism = m })
	assert.Equal(t, m, s.newMechanism().Mechanism)
	assert.InDelta(t, 120, s.roundLength(), 0)
	assert.InDelta(t, 0, m.EffectiveResetInterval(), 0)
	assert.InDelta(t, 360, (&allocation.Mechanism{}).EffectiveRoundLength(), 0)
	assert.InDelta(t, 1920, (&allocation.Mechanism{}).EffectiveResetInterval(), 0)
	_, err := New(Config{Policy: &allocation.MaxMinFairness{}, Mechanism: allocation.Mechanism{Compat: 7}})
	assert.ErrorContains(t, err, "Config.Mechanism: allocation: invalid problem: compatibility mode Compat(7)")
}
