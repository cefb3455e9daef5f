package perfmodel

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Eq. 6 by hand: A spans servers 0 and 1, B spans 1 and 2, C sits on
// server 1 alone. Server 1 holds two multi-server jobs, so p_A = p_B = 2;
// C spans one server and has no contention; D alone across 3 and 4 has
// p = 1 (itself).
func TestContentionByHand(t *testing.T) {
	p, err := Contention([][]ServerShare{
		{{0, 2}, {1, 2}},
		{{1, 1}, {2, 3}},
		{{1, 1}},
		{{3, 4}, {4, 4}},
		{{5, 4}, {6, 0}}, // a zero share does not make a job span servers
	})
	require.NoError(t, err)
	assert.Equal(t, []int{2, 2, 0, 1, 0}, p)
	_, err = Contention([][]ServerShare{{{-1, 2}}})
	assert.ErrorIs(t, err, ErrInvalidRing)
	_, err = Contention([][]ServerShare{{{0, -2}}})
	assert.ErrorIs(t, err, ErrInvalidRing)
}

// Eq. 8 by hand: w = 4, m = 100, b_e = 10, C = 1000, xi1 = 1, xi2 = 0.1,
// alpha = 0.5, p = 2: f = 2 + 0.5 = 2.5, B = 4;
// tau = 2*3*100/(4*4) + 3*100/(4*1000) + 0.1*2 + 0.001*32 + 0.05
// = 37.5 + 0.075 + 0.2 + 0.032 + 0.05 = 37.857.
// On one server B = b_i = 100: 600/400 + 0.075 + 0.1 + 0.032 + 0.05 = 1.757.
func TestIterationTimeByHand(t *testing.T) {
	m := RingModel{IntraBandwidth: 100, InterBandwidth: 10, ReduceSpeed: 1000, Xi1: 1, Xi2: 0.1, Alpha: 0.5}
	j := RingJob{Workers: 4, GradientSize: 100, MiniBatch: 32, ForwardPerSample: 0.001, Backward: 0.05}
	tau, err := m.IterationTime(j, 2, 2)
	require.NoError(t, err)
	assert.InDelta(t, 37.857, tau, 1e-9)
	tau, err = m.IterationTime(j, 1, 0)
	require.NoError(t, err)
	assert.InDelta(t, 1.757, tau, 1e-9)
	// Alone across servers (p = 1): B = b_e undivided, 2*3*100/40 = 15.
	tau, err = m.IterationTime(j, 2, 1)
	require.NoError(t, err)
	assert.InDelta(t, 15+0.075+0.2+0.032+0.05, tau, 1e-9)
	// xi1 = 0.5 with p = 1 is still b_e, not more.
	m.Xi1 = 0.5
	tau2, err := m.IterationTime(j, 2, 1)
	require.NoError(t, err)
	assert.Equal(t, tau, tau2)
	// More contenders, slower; a custom degradation is used.
	slow, _ := m.IterationTime(j, 2, 8)
	assert.Greater(t, slow, tau)
	m.Degradation = LinearDegradation{Alpha: 0}
	tau3, err := m.IterationTime(j, 2, 8) // k = 4, B = 2.5
	require.NoError(t, err)
	assert.InDelta(t, 60+0.075+0.2+0.032+0.05, tau3, 1e-9)
}

func TestIterationTimeErrors(t *testing.T) {
	good := RingModel{IntraBandwidth: 100, InterBandwidth: 10, ReduceSpeed: 1000, Xi1: 1, Xi2: 0.1}
	j := RingJob{Workers: 4, GradientSize: 100}
	for _, c := range []struct {
		m       RingModel
		j       RingJob
		servers int
	}{
		{RingModel{InterBandwidth: 10, ReduceSpeed: 1, Xi1: 1}, j, 1},
		{RingModel{IntraBandwidth: 1, InterBandwidth: 10, ReduceSpeed: 1, Xi1: 0}, j, 1},
		{good, RingJob{Workers: 0}, 1},
		{good, j, 5},
		{good, j, 0},
		{good, RingJob{Workers: 2, GradientSize: -1}, 1},
	} {
		_, err := c.m.IterationTime(c.j, c.servers, 0)
		assert.ErrorIs(t, err, ErrInvalidRing, "%+v", c)
	}
}
