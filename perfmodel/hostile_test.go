package perfmodel

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// negative is a degradation that speeds links up with contention.
type negative struct{}

func (negative) Factor(k float64) float64 { return 1 - k }

// Ring-model parameters out of range are errors naming the value, never a
// negative or infinite iteration time (alpha -5 used to give -12.2).
func TestRingModelHostile(t *testing.T) {
	good := RingModel{IntraBandwidth: 100, InterBandwidth: 10, ReduceSpeed: 1000, Xi1: 1, Xi2: 0.1, Alpha: 0.5}
	j := RingJob{Workers: 8, GradientSize: 1, Backward: 0.01}
	tests := []struct {
		name    string
		modify  func(m *RingModel, j *RingJob)
		servers int
		msg     string
	}{
		{"alpha negative", func(m *RingModel, _ *RingJob) { m.Alpha = -5 }, 2, "alpha -5, want finite and >= 0"},
		{"alpha NaN", func(m *RingModel, _ *RingJob) { m.Alpha = math.NaN() }, 2, "alpha NaN"},
		{"alpha Inf", func(m *RingModel, _ *RingJob) { m.Alpha = math.Inf(1) }, 1, "alpha +Inf"},
		{"degradation below 1", func(m *RingModel, _ *RingJob) { m.Degradation = negative{} }, 2, "degradation factor -2 for 3 contenders, want finite and >= 1"},
		{"bandwidth 0", func(m *RingModel, _ *RingJob) { m.InterBandwidth = 0 }, 2, "inter-server bandwidth 0, want positive and finite"},
		{"bandwidth Inf", func(m *RingModel, _ *RingJob) { m.IntraBandwidth = math.Inf(1) }, 1, "intra-server bandwidth +Inf"},
		{"reduce NaN", func(m *RingModel, _ *RingJob) { m.ReduceSpeed = math.NaN() }, 1, "reduction speed NaN"},
		{"xi1", func(m *RingModel, _ *RingJob) { m.Xi1 = 2 }, 1, "xi1 2 in (0, 1]"},
		{"overflow", func(m *RingModel, _ *RingJob) { m.InterBandwidth = 1e-310 }, 2, "overflows"},
		{"gradient Inf", func(_ *RingModel, j *RingJob) { j.GradientSize = math.Inf(1) }, 1, "job sizes and times must be finite and non-negative"},
		{"servers above workers", func(*RingModel, *RingJob) {}, 9, "8 workers on 9 servers"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m, jj := good, j
			tc.modify(&m, &jj)
			tau, err := m.IterationTime(jj, tc.servers, 3)
			require.ErrorIs(t, err, ErrInvalidRing, "tau %v", tau)
			assert.ErrorContains(t, err, tc.msg)
		})
	}
	// A slow network is slow, not an error, while the time is finite.
	m := good
	m.InterBandwidth = 1e-200
	tau, err := m.IterationTime(j, 2, 3)
	require.NoError(t, err)
	assert.InDelta(t, 2*7/8.0*4e200, tau, 1e188) // f = 3 + 0.5 (3 - 1) = 4
}

// Contention never allocates by the largest server index (1<<40 used to
// run out of memory, MaxInt to panic) and counts a job listing one server
// twice as on one server (it used to count it as spanning).
func TestContentionHostile(t *testing.T) {
	p, err := Contention([][]ServerShare{
		{{Server: 1 << 40, GPUs: 1}, {Server: 0, GPUs: 1}},
		{{Server: math.MaxInt, GPUs: 2}, {Server: 1 << 40, GPUs: 2}},
		{{Server: math.MaxInt, GPUs: 4}},
	})
	require.NoError(t, err)
	// Server 1<<40 holds two spanning jobs; MaxInt one spanning and one not.
	assert.Equal(t, []int{2, 2, 0}, p)

	p, err = Contention([][]ServerShare{
		{{Server: 0, GPUs: 2}, {Server: 0, GPUs: 2}}, // one server, listed twice
		{{Server: 0, GPUs: 1}, {Server: 1, GPUs: 1}, {Server: 1, GPUs: 1}},
		{{Server: 1, GPUs: 1}, {Server: 2, GPUs: 1}},
	})
	require.NoError(t, err)
	assert.Equal(t, []int{0, 2, 2}, p)

	for _, tc := range []struct {
		pl  [][]ServerShare
		msg string
	}{
		{[][]ServerShare{{{Server: math.MinInt, GPUs: 1}}}, "job 0 has 1 GPUs on server -9223372036854775808"},
		{[][]ServerShare{{}, {{Server: 3, GPUs: -1}}}, "job 1 has -1 GPUs on server 3"},
	} {
		_, err := Contention(tc.pl)
		require.ErrorIs(t, err, ErrInvalidRing)
		assert.ErrorContains(t, err, tc.msg)
	}
}

// Sparse server indices give the answer dense ones do.
func TestContentionSparseMatchesDense(t *testing.T) {
	dense := [][]ServerShare{{{0, 1}, {1, 1}}, {{1, 2}, {2, 2}}, {{2, 1}, {3, 1}}, {{3, 4}}, {{0, 1}, {3, 1}}}
	sparse := make([][]ServerShare, len(dense))
	for j, pl := range dense {
		for _, s := range pl {
			sparse[j] = append(sparse[j], ServerShare{Server: s.Server<<50 + 7, GPUs: s.GPUs})
		}
	}
	want, err := Contention(dense)
	require.NoError(t, err)
	got, err := Contention(sparse)
	require.NoError(t, err)
	assert.Equal(t, want, got)
	assert.Equal(t, []int{2, 2, 2, 0, 2}, want)
}
