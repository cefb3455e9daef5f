package learn_test

import (
	"encoding/binary"
	"errors"
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gpusched/gpusched/perfmodel/learn"
	"github.com/gpusched/gpusched/topology"
)

// FuzzObserve feeds a learner any sequence of reports (12 bytes each: the
// job, the type, the GPU count, the segment's step, the steps' and the
// time's steps, with a byte of flags for Forget, Register and Refresh):
// every call returns nil or an error of this package, never a panic; the
// estimates stay finite; the state snapshots and restores unchanged.
func FuzzObserve(f *testing.F) {
	f.Add([]byte("\x00\x00\x01\x00\x00\x10\x00\x00\x00\x40\x00\x00\x00\x00\x01\x00\x00\x10\x00\x00\x00\x40\x00\x00"))
	f.Add(make([]byte, 12*20))
	f.Add([]byte("\x01\x02\x03\x01\x05\x06\x07\x08\x09\x0a\x0b\xff"))
	f.Fuzz(runObserveFuzz)
}

// runObserveFuzz is FuzzObserve's body.
func runObserveFuzz(t *testing.T, data []byte) {
	types := []topology.GPUType{"a100", "h100", "v100", "k80"}
	l := newLearner(t, learn.Config{MaxJobs: 4, MaxTracks: 4, MaxWindows: 4, MaxHistory: 4, MaxTypes: 3, Window: 1, PhaseWindows: 2})
	jobs := []string{"a", "b", "c", "d", "e"}
	steps := map[string]float64{}
	now := map[string]float64{}
	seg := map[string]uint64{}
	for len(data) >= 12 {
		rec := data[:12]
		data = data[12:]
		job := jobs[int(rec[0])%len(jobs)]
		o := learn.Observation{Type: types[int(rec[1])%len(types)], GPUs: int(rec[2]%9) - 1}
		seg[job] += uint64(rec[3] % 3)
		o.Segment = seg[job] - uint64(rec[3]%5/4) // sometimes back
		steps[job] += float64(int16(binary.LittleEndian.Uint16(rec[4:6])))
		now[job] += float64(int16(binary.LittleEndian.Uint16(rec[6:8]))) / 8
		o.Steps, o.Time = steps[job], now[job]
		if rec[8] == 0xff {
			o.Steps = math.NaN()
		}
		checkErr(t, l.Observe(job, o))
		switch rec[11] % 16 {
		case 1:
			l.Forget(job)
		case 2:
			checkErr(t, l.Register(job, learn.JobInfo{GPUs: int(rec[9] % 4), Claims: map[topology.GPUType]float64{o.Type: float64(rec[10])}}))
		case 3:
			l.Refresh()
		}
	}
	l.Refresh()
	checkFinite(t, l)
	snap, err := l.Snapshot()
	require.NoError(t, err)
	m := newLearner(t, l.Config())
	require.NoError(t, m.Restore(snap))
	again, err := m.Snapshot()
	require.NoError(t, err)
	require.Equal(t, string(snap), string(again))
}

// checkErr fails on an error that is not of this package.
func checkErr(t *testing.T, err error) {
	t.Helper()
	var le *learn.Error
	if err != nil && !errors.As(err, &le) {
		t.Fatalf("an error of another kind: %v", err)
	}
	if err != nil && le.Kind == nil {
		t.Fatalf("an error with no kind: %v", err)
	}
}
