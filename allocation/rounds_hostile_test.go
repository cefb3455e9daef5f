package allocation

import (
	"context"
	"encoding/json"
	"math"
	"testing"

	"github.com/gpusched/gpusched/topology"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// hostileBase is a mechanism after two rounds on 2 GPUs of a and 2 of b,
// with three jobs and space sharing, and its snapshot.
func hostileBase(t testing.TB, compat Compat) (*Problem, []byte) {
	t.Helper()
	p := &Problem{Types: []topology.GPUType{"a", "b"}, Capacity: []int{2, 2}, Jobs: []Job{
		{ID: 1, ScaleFactor: 1, Throughput: []float64{4, 1}},
		{ID: 2, ScaleFactor: 1, Throughput: []float64{2, 1}},
		{ID: 3, ScaleFactor: 2, Throughput: []float64{3, 1}},
	}}
	r := &Rounds{Policy: &MaxMinFairness{}, Mechanism: Mechanism{Compat: compat}}
	for i := range 2 {
		_, err := r.Next(context.Background(), p, float64(i)*360)
		require.NoError(t, err)
	}
	data, err := r.Snapshot()
	require.NoError(t, err)
	return p, data
}

// Hostile snapshots: every one used to be accepted, and the first four
// then panicked in Next (a worker out of range) or made every other round
// fail (a unit pairing a job with itself); each is now refused by Restore
// with an error that names the field, and leaves the mechanism unchanged.
func TestRoundsRestoreHostile(t *testing.T) {
	_, good := hostileBase(t, CompatNone)
	mutate := func(f func(m map[string]any)) []byte {
		var m map[string]any
		require.NoError(t, json.Unmarshal(good, &m))
		f(m)
		b, err := json.Marshal(m)
		require.NoError(t, err)
		return b
	}
	assignment := func(m map[string]any) map[string]any {
		return m["last_round"].(map[string]any)["Assignments"].([]any)[0].(map[string]any)
	}
	unit := func(m map[string]any) map[string]any { return m["units"].([]any)[0].(map[string]any) }
	for _, tc := range []struct {
		name string
		data []byte
		msg  string
	}{
		{"worker -1", mutate(func(m map[string]any) { assignment(m)["Workers"] = []int{-1} }), "worker -1 of"},
		{"worker above capacity", mutate(func(m map[string]any) { assignment(m)["Workers"] = []int{2} }), "worker 2 of"},
		{"worker twice", mutate(func(m map[string]any) {
			as := m["last_round"].(map[string]any)["Assignments"].([]any)
			as[1].(map[string]any)["Workers"] = as[0].(map[string]any)["Workers"]
			as[1].(map[string]any)["TypeIndex"] = as[0].(map[string]any)["TypeIndex"]
			as[1].(map[string]any)["Type"] = as[0].(map[string]any)["Type"]
		}), "taken twice"},
		{"unit pairs a job with itself", mutate(func(m map[string]any) { unit(m)["job_ids"] = []int{1, 1} }), "job IDs [1 1] (want one job or two distinct ones)"},
		{"round pairs a job with itself", mutate(func(m map[string]any) { assignment(m)["JobIDs"] = []int{2, 2} }), "job IDs [2 2]"},
		{"job twice in the round", mutate(func(m map[string]any) {
			as := m["last_round"].(map[string]any)["Assignments"].([]any)
			as[1].(map[string]any)["JobIDs"] = as[0].(map[string]any)["JobIDs"]
		}), "runs job"},
		{"allocation 1e308", mutate(func(m map[string]any) { m["allocation"].(map[string]any)["X"].([]any)[0].([]any)[0] = 1e308 }), "share 1e+308 on type 0, outside [0, 1]"},
		{"allocation pair of one job", mutate(func(m map[string]any) {
			m["allocation"].(map[string]any)["Pairs"] = []any{map[string]any{"A": 0, "B": 0, "X": []float64{0, 0}}}
		}), "allocation pair (0, 0)"},
		{"received 1e300", mutate(func(m map[string]any) { unit(m)["received"] = []float64{1e300, 0} }), "time received: 1e+300 s on type 0"},
		{"deficit -1e300", mutate(func(m map[string]any) { unit(m)["deficit"] = []float64{0, -1e300} }), "deficit: -1e+300 s on type 1"},
		{"share 2", mutate(func(m map[string]any) { unit(m)["x"] = []float64{2, 0} }), "share 2 on type 0"},
		{"negative job", mutate(func(m map[string]any) { m["present"] = []int{-4} }), "job ID -4 is negative"},
		{"type twice", mutate(func(m map[string]any) { m["types"] = []string{"a", "a"} }), "type a twice"},
		{"empty type", mutate(func(m map[string]any) { m["types"] = []string{"", "b"} }), "empty GPU type name"},
		{"capacity -1", mutate(func(m map[string]any) { m["capacity"] = []int{-1, 2} }), "capacity -1 of a"},
		{"order twice", mutate(func(m map[string]any) { m["order"] = []int{0, 0} }), "type index 0 in the order"},
		{"last reset 1e300", mutate(func(m map[string]any) { m["last_reset"] = 1e300 }), "last reset at 1e+300 s"},
		{"round length -1", mutate(func(m map[string]any) { m["last_round"].(map[string]any)["Length"] = -1 }), "of -1 s"},
		{"started without allocation", mutate(func(m map[string]any) { delete(m, "allocation") }), "without an allocation"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &Rounds{Policy: &MaxMinFairness{}}
			err := r.Restore(tc.data)
			require.ErrorIs(t, err, ErrInvalidSnapshot)
			assert.ErrorContains(t, err, tc.msg)
			assert.False(t, r.st.started, "state unchanged")
		})
	}
}

// Under CompatGavel a report may credit more than a round, but not more
// than MaxTime; two reports of 1e308 s used to make a counter +Inf, after
// which Snapshot failed for good. Reports of MaxTime, however many, leave
// the counters finite and the snapshot valid.
func TestRoundsCountersBounded(t *testing.T) {
	p, _ := hostileBase(t, CompatGavel)
	r := &Rounds{Policy: &MaxMinFairness{}, Mechanism: Mechanism{Compat: CompatGavel}}
	for i := range 40 {
		rd, err := r.Next(context.Background(), p, float64(i)*360)
		require.NoError(t, err)
		rep := RoundReport{Start: rd.Start}
		for _, as := range rd.Assignments {
			rep.Ran = append(rep.Ran, UnitRun{JobIDs: as.JobIDs, Type: as.Type, Seconds: 1e308})
		}
		if len(rep.Ran) > 0 {
			err := r.Report(rep)
			require.ErrorIs(t, err, ErrInvalidReport)
			assert.ErrorContains(t, err, "1e+308 seconds, outside [0, 1e+15]")
			for i := range rep.Ran {
				rep.Ran[i].Seconds = MaxTime
			}
			require.NoError(t, r.Report(rep))
		}
	}
	data, err := r.Snapshot()
	require.NoError(t, err)
	for _, st := range r.st.units {
		for k := range st.received {
			assert.False(t, math.IsInf(st.received[k], 0) || math.IsInf(st.deficit[k], 0))
		}
	}
	require.NoError(t, (&Rounds{Policy: &MaxMinFairness{}, Mechanism: Mechanism{Compat: CompatGavel}}).Restore(data))
}

// FuzzRoundsRestore restores arbitrary bytes, then runs rounds on a
// problem, reports them and snapshots: nothing panics, and what Restore
// accepts runs, reports and snapshots again.
func FuzzRoundsRestore(f *testing.F) {
	p, native := hostileBase(f, CompatNone)
	_, gavel := hostileBase(f, CompatGavel)
	f.Add(native, false)
	f.Add(gavel, true)
	f.Add([]byte(`{"version":1,"compat":"none","started":true,"types":["a"],"capacity":[1],"allocation":{"X":[],"JobIDs":[]},"last_round":{"Start":0,"Length":360,"Assignments":[{"JobIDs":[1],"Type":"a","TypeIndex":0,"Workers":[-1]}]}}`), false)
	f.Fuzz(func(t *testing.T, data []byte, gavelMode bool) {
		compat := CompatNone
		if gavelMode {
			compat = CompatGavel
		}
		r := &Rounds{Policy: &MaxMinFairness{}, Mechanism: Mechanism{Compat: compat}, GPUsPerServer: []int{2, 1}}
		if r.Restore(data) != nil {
			return
		}
		start := 0.0
		if last := r.Last(); last != nil {
			start = last.Start + last.Length
		}
		for i := range 3 {
			rd, err := r.Next(context.Background(), p, start+float64(i)*360)
			if err != nil {
				continue // a time out of range, a policy's error: not a panic
			}
			rep := RoundReport{Start: rd.Start}
			for _, as := range rd.Assignments {
				rep.Ran = append(rep.Ran, UnitRun{JobIDs: as.JobIDs, Type: as.Type, Seconds: MaxTime})
			}
			require.NoError(t, r.Report(rep))
		}
		again, err := r.Snapshot()
		require.NoError(t, err)
		require.NoError(t, (&Rounds{Policy: &MaxMinFairness{}, Mechanism: Mechanism{Compat: compat}}).Restore(again))
	})
}
