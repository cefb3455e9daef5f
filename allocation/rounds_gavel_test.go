package allocation

import (
	"context"
	"testing"

	"github.com/gpusched/gpusched/topology"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseCompat(t *testing.T) {
	for s, want := range map[string]Compat{"": CompatNone, "none": CompatNone, "Gavel": CompatGavel} {
		got, err := ParseCompat(s)
		require.NoError(t, err)
		assert.Equal(t, want, got)
	}
	_, err := ParseCompat("tiresias")
	assert.ErrorIs(t, err, ErrInvalidProblem)
	assert.Equal(t, "gavel", CompatGavel.String())
	assert.Equal(t, "Compat(7)", Compat(7).String())
}

// Ours puts a unit that never ran first (X * 1e9); Gavel seeds every
// counter with half a round, so after a reset the larger share goes first.
func TestGavelPrioritySeeding(t *testing.T) {
	types := []topology.GPUType{topology.V100}
	one := &Problem{Types: types, Capacity: []int{1}, Jobs: []Job{{ID: 1, ScaleFactor: 1, Throughput: []float64{1}}}}
	two := &Problem{Types: types, Capacity: []int{1}, Jobs: append(one.Jobs, Job{ID: 2, ScaleFactor: 1, Throughput: []float64{1}})}
	pol := fixedPolicy{1: {0.75}, 2: {0.25}}
	for _, tc := range []struct {
		compat Compat
		first  int
	}{{CompatNone, 2}, {CompatGavel, 1}} {
		r := &Rounds{Policy: pol, Mechanism: Mechanism{Compat: tc.compat, MinResetInterval: -1, LeaveIdle: true}}
		ctx := context.Background()
		for i := range 3 {
			_, err := r.Next(ctx, one, 100+float64(i)*360)
			require.NoError(t, err)
		}
		rd, err := r.Next(ctx, two, 100+3*360)
		require.NoError(t, err)
		require.True(t, rd.Reset)
		assert.Equal(t, map[int]topology.GPUType{tc.first: topology.V100}, jobsOf(rd), "compat %v", tc.compat)
	}
}

// Gavel hands GPUs left after the shares to jobs without a share, by
// deficit, then X, then arrival; except under FIFO.
func TestGavelLeftovers(t *testing.T) {
	types := []topology.GPUType{topology.V100}
	p := &Problem{Types: types, Capacity: []int{2}, Jobs: []Job{
		{ID: 1, ScaleFactor: 1, Throughput: []float64{1}},
		{ID: 2, ScaleFactor: 1, Throughput: []float64{1}},
		{ID: 3, ScaleFactor: 1, Throughput: []float64{1}},
	}}
	r := &Rounds{Policy: fixedPolicy{1: {1}}, Mechanism: Mechanism{Compat: CompatGavel}}
	rd, err := r.Next(context.Background(), p, 100)
	require.NoError(t, err)
	assert.Equal(t, map[int]topology.GPUType{1: topology.V100, 2: topology.V100}, jobsOf(rd))

	// FIFO: jobs 1 and 2 get a V100 each; when job 1 leaves between
	// resets, job 3 (X = 0) waits under Gavel, runs under ours.
	for _, tc := range []struct {
		compat Compat
		ran    map[int]topology.GPUType
	}{
		{CompatGavel, map[int]topology.GPUType{2: topology.V100}},
		{CompatNone, map[int]topology.GPUType{2: topology.V100, 3: topology.V100}},
	} {
		r := &Rounds{Policy: &FIFO{Compat: tc.compat}, Mechanism: Mechanism{Compat: tc.compat}}
		rd, err := r.Next(context.Background(), p, 100)
		require.NoError(t, err)
		require.Equal(t, map[int]topology.GPUType{1: topology.V100, 2: topology.V100}, jobsOf(rd))
		later := &Problem{Types: types, Capacity: []int{2}, Jobs: p.Jobs[1:]}
		rd, err = r.Next(context.Background(), later, 460)
		require.NoError(t, err)
		require.False(t, rd.Reset)
		assert.Equal(t, tc.ran, jobsOf(rd), "compat %v", tc.compat)
	}
}

// A job that arrived after the last reset is in Gavel's queues with
// priority 0; if it wins GPUs it holds them idle for the round, as
// _schedule_jobs_on_workers skips jobs the allocation does not know. And a
// job with no share on a type runs there when nothing else claims it: the
// V100 queue, visited first, takes job 1 although its share is on K80.
func TestGavelNewJobHoldsGPUs(t *testing.T) {
	types := []topology.GPUType{topology.K80, topology.V100}
	first := &Problem{Types: types, Capacity: []int{1, 1}, Jobs: []Job{{ID: 1, ScaleFactor: 1, Throughput: []float64{1, 1}}}}
	both := &Problem{Types: types, Capacity: []int{1, 1}, Jobs: append(first.Jobs, Job{ID: 2, ScaleFactor: 1, Throughput: []float64{1, 3}})}
	pol := fixedPolicy{1: {0, 1}, 2: {1, 0}}
	for _, tc := range []struct {
		compat Compat
		ran    map[int]topology.GPUType
	}{
		{CompatGavel, map[int]topology.GPUType{1: topology.V100}},
		{CompatNone, map[int]topology.GPUType{1: topology.V100, 2: topology.K80}},
	} {
		r := &Rounds{Policy: pol, Mechanism: Mechanism{Compat: tc.compat}}
		_, err := r.Next(context.Background(), first, 100)
		require.NoError(t, err)
		rd, err := r.Next(context.Background(), both, 460)
		require.NoError(t, err)
		require.False(t, rd.Reset)
		assert.Equal(t, tc.ran, jobsOf(rd), "compat %v", tc.compat)
	}
	r := &Rounds{Policy: fixedPolicy{1: {1, 0}}, Mechanism: Mechanism{Compat: CompatGavel}}
	rd, err := r.Next(context.Background(), first, 100)
	require.NoError(t, err)
	assert.Equal(t, map[int]topology.GPUType{1: topology.V100}, jobsOf(rd))
}

// With space sharing every pair of present jobs is a unit; unpaired pairs
// come before jobs without a share (their deficit is half a round).
func TestGavelLeftoverPairs(t *testing.T) {
	types := []topology.GPUType{topology.V100}
	p := &Problem{Types: types, Capacity: []int{2}, Pairs: constPairs{}, Jobs: []Job{
		{ID: 1, ScaleFactor: 1, Throughput: []float64{1}},
		{ID: 2, ScaleFactor: 1, Throughput: []float64{1}},
		{ID: 3, ScaleFactor: 1, Throughput: []float64{1}},
		{ID: 4, ScaleFactor: 2, Throughput: []float64{1}},
	}}
	r := &Rounds{Policy: fixedPolicy{1: {1}}, Mechanism: Mechanism{Compat: CompatGavel}}
	rd, err := r.Next(context.Background(), p, 100)
	require.NoError(t, err)
	require.Len(t, rd.Assignments, 2)
	got := map[int][]int{}
	for _, as := range rd.Assignments {
		got[len(as.JobIDs)] = as.JobIDs
	}
	assert.Equal(t, map[int][]int{1: {1}, 2: {2, 3}}, got)
	// The pair is credited: it now has state of its own.
	rd2, err := r.Next(context.Background(), p, 460)
	require.NoError(t, err)
	assert.NotNil(t, r.st.units[unit{2, 3}])
	assert.NotEmpty(t, rd2.Assignments)
}

type constPairs struct{}

func (constPairs) Rates(a, b, k int) (float64, float64) { return 0.6, 0.6 }

// While the last reset happened at time 0, Gavel resets at every change.
func TestGavelResetAtZero(t *testing.T) {
	types := []topology.GPUType{topology.V100}
	one := &Problem{Types: types, Capacity: []int{2}, Jobs: []Job{{ID: 1, ScaleFactor: 1, Throughput: []float64{1}}}}
	two := &Problem{Types: types, Capacity: []int{2}, Jobs: append(one.Jobs, Job{ID: 2, ScaleFactor: 1, Throughput: []float64{1}})}
	for _, tc := range []struct {
		compat Compat
		reset  bool
	}{{CompatGavel, true}, {CompatNone, false}} {
		r := &Rounds{Policy: &MaxMinFairness{}, Mechanism: Mechanism{Compat: tc.compat}}
		_, err := r.Next(context.Background(), one, 0)
		require.NoError(t, err)
		rd, err := r.Next(context.Background(), two, 360)
		require.NoError(t, err)
		assert.Equal(t, tc.reset, rd.Reset, "compat %v", tc.compat)
	}
}

// The type shuffle follows CPython's random.shuffle seeded with seed+5
// (expected orders printed by CPython 3.11 for random.Random(8)).
func TestGavelShuffle(t *testing.T) {
	three := &Problem{Types: []topology.GPUType{topology.K80, topology.P100, topology.V100}, Capacity: []int{1, 1, 1}}
	r := &Rounds{Mechanism: Mechanism{Compat: CompatGavel, ShuffleTypes: true, Seed: 3}}
	r.seedRNG()
	name := map[int]string{0: "k80", 1: "p100", 2: "v100"}
	var got [][]string
	for range 6 {
		var o []string
		for _, k := range r.visitOrder(three) {
			o = append(o, name[k])
		}
		got = append(got, o)
	}
	assert.Equal(t, [][]string{{"k80", "p100", "v100"}, {"k80", "v100", "p100"}, {"p100", "k80", "v100"},
		{"p100", "k80", "v100"}, {"p100", "k80", "v100"}, {"k80", "v100", "p100"}}, got)
	// Types without GPUs are not in Gavel's list, and do not consume draws.
	two := &Problem{Types: []topology.GPUType{topology.K80, topology.P100, topology.V100}, Capacity: []int{1, 0, 1}}
	r = &Rounds{Mechanism: Mechanism{Compat: CompatGavel, ShuffleTypes: true, Seed: 3}}
	r.seedRNG()
	got = got[:0]
	for range 4 {
		var o []string
		for _, k := range r.visitOrder(two) {
			o = append(o, name[k])
		}
		got = append(got, o)
	}
	assert.Equal(t, [][]string{{"k80", "v100"}, {"v100", "k80"}, {"v100", "k80"}, {"k80", "v100"}}, got)
}
