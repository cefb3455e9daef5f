package learn_test

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gpusched/gpusched/perfmodel"
	"github.com/gpusched/gpusched/perfmodel/gavel"
	"github.com/gpusched/gpusched/perfmodel/learn"
	"github.com/gpusched/gpusched/topology"
)

// busy returns a learner with a bit of everything: jobs on several types
// and GPU counts, a phase change, a running segment in the middle of a
// window, claims, a kind, a private job, remembered jobs.
func busy(t testing.TB) *learn.Learner {
	l := newLearner(t, learn.Config{Model: gavel.Simulation()})
	kind := perfmodel.JobKey{Model: "ResNet-50", BatchSize: 64}
	require.NoError(t, l.Register("kind", learn.JobInfo{GPUs: 1, Kind: &kind, Claims: map[topology.GPUType]float64{"p100": 3}}))
	require.NoError(t, l.Register("private", learn.JobInfo{Private: true}))
	for i, name := range []string{"kind", "private", "a", "b", "c", "gone"} {
		r := newRunner(l, name)
		r.run(t, topology.V100, 1, 5+i, steady(float64(10+i)))
		r.run(t, topology.K80, 2, 4, steady(float64(2+i)))
		if i == 2 { // a phase change: down to a quarter
			r.run(t, topology.K80, 2, 8, func(w int) float64 { return []float64{4, 4, 4, 4, 4, 1, 1, 1}[w] })
		}
		r.run(t, topology.P100, 1, 3, steady(float64(5+i)))
		// Half a window more: the open window is part of the state.
		o := learn.Observation{Type: topology.P100, GPUs: 1, Segment: r.segment, Steps: r.steps + 30, Time: r.time + 30}
		require.NoError(t, l.Observe(name, o))
	}
	l.Forget("gone")
	return l
}

// TestSnapshotRoundTrip: a restored learner says the same, snapshots to
// the same bytes, and goes on as the original would.
func TestSnapshotRoundTrip(t *testing.T) {
	l := busy(t)
	data, err := l.Snapshot()
	require.NoError(t, err)
	m := newLearner(t, learn.Config{Model: gavel.Simulation()})
	require.NoError(t, m.Restore(data))
	again, err := m.Snapshot()
	require.NoError(t, err)
	assert.Equal(t, string(data), string(again))
	assert.Equal(t, l.Refresh(), m.Refresh())
	for _, name := range []string{"kind", "private", "a", "b", "c"} {
		assert.Equal(t, l.Estimates(name, nil), m.Estimates(name, nil), name)
		assert.Equal(t, l.Tracks(name), m.Tracks(name), name)
	}
	assert.Equal(t, 1, l.Tracks("a")[1].Resets, "job a's phase change is in the state")
	// Both go on alike: the open window closes in both.
	for _, x := range []*learn.Learner{l, m} {
		r := x.Tracks("a")
		require.NotEmpty(t, r)
		o := learn.Observation{Type: topology.P100, GPUs: 1, Segment: 4, Steps: 1e6, Time: 1e6}
		require.NoError(t, x.Observe("a", o))
	}
	assert.Equal(t, l.Tracks("a"), m.Tracks("a"))
	active, remembered := m.Jobs()
	assert.Equal(t, 5, active)
	assert.Equal(t, 1, remembered)
}

// TestRestoreErrors: a snapshot Restore cannot take is an error naming
// the value, and leaves the state as it was.
func TestRestoreErrors(t *testing.T) {
	l := busy(t)
	good, err := l.Snapshot()
	require.NoError(t, err)
	small := newLearner(t, learn.Config{MaxJobs: 2})
	target := newLearner(t, learn.Config{})
	for _, x := range []*learn.Learner{small, target} {
		observe(t, x, "x", learn.Observation{Type: "t4", GPUs: 1})
	}
	edit := func(old, new string) string {
		require.Contains(t, string(good), old)
		return strings.Replace(string(good), old, new, 1)
	}
	cases := []struct {
		name, data, where string
		into              *learn.Learner
	}{
		{"not JSON", "{", "line 1, column 2", nil},
		{"empty", "", "line 1, column 1", nil},
		{"version", edit(`"version":1`, `"version":2`), "version", nil},
		{"unknown key", edit(`"version":1`, `"version":1,"extra":0`), "line 1, column 14", nil},
		{"duplicate key", edit(`"version":1`, `"version":1,"version":1`), "line 1, column 14", nil},
		{"bad type", edit(`"types":["v100"`, `"types":["V100"`), "types[0]", nil},
		{"duplicate type", edit(`"types":["v100","k80"`, `"types":["v100","v100"`), "types[1]", nil},
		{"too many jobs", string(good), "jobs", small},
		{"a track's type out of range", edit(`"tracks":[{"type":0`, `"tracks":[{"type":7`), "jobs[0].tracks[0].type", nil},
		{"a mean out of range", edit(`"mean":2.4849066497880004`, `"mean":99`), "jobs[0].tracks[0].mean", nil},
		{"a negative variance", edit(`"var":0.0040`, `"var":-0.0040`), "jobs[0].tracks[0].var", nil},
		{"window steps after steps", edit(`"window_steps":8640`, `"window_steps":99999`), "jobs[0].segment.window_steps", nil},
		{"a segment's time after the job's", edit(`"time":1390`, `"time":2000`), "jobs[0].segment.time", nil},
		{"a negative claim", edit(`"claims":{"p100":3}`, `"claims":{"p100":-3}`), "jobs[3].info", nil},
		{"a history row without rates", edit(`"history":[{`, `"history":[{"types":[],"log_rates":[]},{`), "history[0]", nil},
		{"a job's seq after the learner's", edit(`"last":1390,"seq":10`, `"last":1390,"seq":999`), "jobs[0].seq", nil},
	}
	// Too long: the length is checked first (the pages are never touched).
	require.ErrorIs(t, target.Restore(make([]byte, learn.MaxSnapshotBytes+1)), learn.ErrMalformedSnapshot)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			into := c.into
			if into == nil {
				into = target
			}
			before, err := into.Snapshot()
			require.NoError(t, err)
			err = into.Restore([]byte(c.data))
			require.ErrorIs(t, err, learn.ErrMalformedSnapshot)
			var le *learn.Error
			require.True(t, errors.As(err, &le))
			assert.True(t, strings.HasPrefix(le.Field, c.where), "field %q, want %q: %v", le.Field, c.where, err)
			after, err := into.Snapshot()
			require.NoError(t, err)
			assert.Equal(t, string(before), string(after))
		})
	}
}

// FuzzRestore: Restore of any bytes returns an error or a state that
// snapshots to bytes Restore takes back unchanged; estimates are finite.
func FuzzRestore(f *testing.F) {
	good, err := busy(f).Snapshot()
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	f.Add([]byte(`{"version":1,"types":["a100"],"seq":1,"jobs":[{"name":"j","gpus":1,"info":{},"seen":true,"last":5,"seq":1,"tracks":[{"type":0,"gpus":1,"windows":1}],"segment":{"id":1,"track":0,"steps":4,"time":5,"window_steps":1,"window_time":2,"closed":3,"windows":[0.5]}}]}`))
	f.Add([]byte(`{"version":1,"types":[],"seq":0,"jobs":[],"history":[{"types":[0],"log_rates":[1]}]}`))
	f.Add([]byte(`{}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		l := newLearner(t, learn.Config{MaxJobs: 64, MaxTracks: 8, MaxWindows: 8, MaxHistory: 8, MaxTypes: 8})
		if l.Restore(data) != nil {
			return
		}
		snap, err := l.Snapshot()
		require.NoError(t, err)
		m := newLearner(t, learn.Config{MaxJobs: 64, MaxTracks: 8, MaxWindows: 8, MaxHistory: 8, MaxTypes: 8})
		require.NoError(t, m.Restore(snap), "%s", snap)
		again, err := m.Snapshot()
		require.NoError(t, err)
		require.Equal(t, string(snap), string(again))
		l.Refresh()
		checkFinite(t, l)
	})
}

// checkFinite checks every estimate of every job of l.
func checkFinite(t *testing.T, l *learn.Learner) {
	t.Helper()
	snap, err := l.Snapshot()
	require.NoError(t, err)
	for _, name := range jobNames(snap) {
		for _, e := range l.Estimates(name, nil) {
			for _, v := range []float64{e.Mean, e.LogMean, e.Sigma, e.PriorMean, e.PriorSigma, e.Scaling} {
				require.False(t, math.IsNaN(v) || math.IsInf(v, 0), "%s: %+v", name, e)
			}
			require.GreaterOrEqual(t, e.Sigma, 0.0)
		}
	}
}

// TestRestoreFixedTypes: with Config.Types, a snapshot's types must be
// those types in their order (a prefix of them is enough).
func TestRestoreFixedTypes(t *testing.T) {
	cfg := learn.Config{Types: []topology.GPUType{"v100", "k80", "a100"}}
	l := newLearner(t, cfg)
	newRunner(l, "a").run(t, "k80", 1, 4, steady(3))
	data, err := l.Snapshot()
	require.NoError(t, err)
	m := newLearner(t, cfg)
	require.NoError(t, m.Restore(data))
	assert.Equal(t, l.Estimates("a", nil), m.Estimates("a", nil))
	require.NoError(t, m.Restore([]byte(`{"version":1,"types":["v100"],"seq":0,"jobs":[]}`)), "a prefix")
	assert.ErrorIs(t, m.Observe("b", learn.Observation{Type: "t4", GPUs: 1}), learn.ErrUnknownType, "still fixed")
	observe(t, m, "b", learn.Observation{Type: "a100", GPUs: 1})
	err = m.Restore([]byte(`{"version":1,"types":["k80"],"seq":0,"jobs":[]}`))
	assert.ErrorIs(t, err, learn.ErrMalformedSnapshot)
	assert.EqualError(t, err, `learn: types[0]: malformed snapshot: k80 is not type 0 of Config.Types`)
}
