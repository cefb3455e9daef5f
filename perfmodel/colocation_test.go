package perfmodel

import (
	"testing"

	"github.com/gpusched/gpusched/topology"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Leave-one-out on Gavel's tables: each measured pair predicted by a fit to
// all the others. Measured (2026-11-29): simulation MAE 0.084 of the
// normalised rate (a constant guess: 0.145), 70% within 0.10; physical
// 0.069 (0.180), 78%.
func TestFittedColocationLeaveOneOut(t *testing.T) {
	if testing.Short() {
		t.Skip("the leave-one-out refits take half a minute under -race; they run without -short")
	}
	for _, tc := range []struct {
		name     string
		table    *Table
		mae      float64
		within10 float64
	}{{"simulation", gavelSimulation(), 0.09, 0.65}, {"physical", gavelPhysical(), 0.075, 0.75}} {
		f, err := FitColocation(tc.table)
		require.NoError(t, err)
		rep, err := f.LeaveOneOut()
		require.NoError(t, err)
		t.Logf("%s: %+v", tc.name, rep)
		assert.Equal(t, 976, rep.Pairs, tc.name)
		assert.Less(t, rep.MAE, tc.mae, tc.name)
		assert.Less(t, rep.MAE, 0.65*rep.BaselineMAE, tc.name)
		assert.Greater(t, rep.Within10, tc.within10, tc.name)
	}
}

func TestFittedColocationAnswers(t *testing.T) {
	g := gavelSimulation()
	f, err := FitColocation(g)
	require.NoError(t, err)
	a := JobKey{Model: "ResNet-18", BatchSize: 16, ScaleFactor: 1}
	b := JobKey{Model: "Transformer", BatchSize: 64, ScaleFactor: 1}
	// Measured pairs come from the table, infeasible ones included.
	for _, pair := range [][2]JobKey{{a, b}, {b, a}, {a, a}} {
		for _, gt := range g.GPUTypes() {
			wa, wb, err := g.Colocated(pair[0], pair[1], gt)
			require.NoError(t, err)
			ta, tb, err := f.Colocated(pair[0], pair[1], gt)
			require.NoError(t, err)
			assert.Equal(t, [2]float64{wa, wb}, [2]float64{ta, tb})
		}
	}
	// The prediction for a measured pair is close to the measurement.
	ra, rb, err := f.Normalised(a, b, topology.V100)
	require.NoError(t, err)
	ta, tb, _ := g.Colocated(a, b, topology.V100)
	ia, _ := g.Throughput(a, topology.V100)
	ib, _ := g.Throughput(b, topology.V100)
	assert.InDelta(t, ta/ia, ra, 0.25)
	assert.InDelta(t, tb/ib, rb, 0.25)
	// Different scale factors never share.
	ta, tb, err = f.Colocated(a, b.WithScaleFactor(2), topology.V100)
	require.NoError(t, err)
	assert.Zero(t, ta+tb)
	// Pairs the table lacks: 16-GPU jobs, with rates from the linear
	// extrapolation. The table says nothing (0, 0); the fit predicts a
	// slowdown, each rate within (0, isolated].
	ex := Extrapolated{Table: g}
	f.Isolated = ex
	a16, b16 := a.WithScaleFactor(16), JobKey{Model: "ResNet-50", BatchSize: 64, ScaleFactor: 16}
	_, _, err = g.Colocated(a16, b16, topology.V100)
	require.Error(t, err) // the table does not know 16 GPUs at all
	ta, tb, err = f.Colocated(a16, b16, topology.V100)
	require.NoError(t, err)
	ia, _ = ex.Throughput(a16, topology.V100)
	ib, _ = ex.Throughput(b16, topology.V100)
	assert.Positive(t, ta)
	assert.Positive(t, tb)
	assert.LessOrEqual(t, ta, ia)
	assert.LessOrEqual(t, tb, ib)
	// Unknown jobs are the isolated model's errors.
	_, _, err = f.Colocated(JobKey{Model: "GPT-9", BatchSize: 1, ScaleFactor: 1}, a, topology.V100)
	assert.ErrorIs(t, err, ErrUnknownJob)
	f.Isolated = nil
	_, _, err = f.Colocated(a16, b16, topology.V100)
	assert.ErrorIs(t, err, ErrFit)
}

func TestFitColocationNeedsPairs(t *testing.T) {
	tb, err := ParseGavelJSON([]byte(`{"v100": {"('ResNet-18 (batch size 16)', 1)": {"null": 10}}}`))
	require.NoError(t, err)
	_, err = FitColocation(tb)
	assert.ErrorIs(t, err, ErrFit)
}
