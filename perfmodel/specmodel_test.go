package perfmodel

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gpusched/gpusched/topology"
)

var testSpecs = []HardwareSpec{
	{Type: "slow", Name: "Slow", FP16TFLOPS: 10, FP32TFLOPS: 5, MemoryGB: 16, BandwidthGBps: 300},
	{Type: "mid", Name: "Mid", FP16TFLOPS: 100, FP32TFLOPS: 10, MemoryGB: 40, BandwidthGBps: 1000},
	{Type: "fast", Name: "Fast", FP16TFLOPS: 400, FP32TFLOPS: 40, MemoryGB: 80, BandwidthGBps: 2000},
	{Type: topology.H100, Name: "H100", FP16TFLOPS: 989, FP32TFLOPS: 67, MemoryGB: 80, BandwidthGBps: 3350},
}

// cobbDouglas gives exact rates a_j * C^0.6 * BW^0.3.
func cobbDouglas(job JobKey, scale float64, p Precision, types ...topology.GPUType) []Observation {
	var out []Observation
	for _, t := range types {
		for _, s := range testSpecs {
			if s.Type == t {
				out = append(out, Observation{Job: job, Type: t, Precision: p, Source: "synthetic",
					Rate: scale * math.Pow(s.compute(p), 0.6) * math.Pow(s.BandwidthGBps, 0.3)})
			}
		}
	}
	return out
}

func TestSpecModelRecoversExactData(t *testing.T) {
	a, b, c := JobKey{Model: "a", ScaleFactor: 1}, JobKey{Model: "b", ScaleFactor: 1}, JobKey{Model: "c", ScaleFactor: 1}
	var obs []Observation
	obs = append(obs, cobbDouglas(a, 1, Mixed, "slow", "mid", "fast")...)
	obs = append(obs, cobbDouglas(b, 3, FP32, "slow", "mid", "fast", topology.H100)...)
	obs = append(obs, cobbDouglas(c, 2, Mixed, "mid")...)
	m, err := FitSpecModel(testSpecs, obs)
	require.NoError(t, err)
	el := m.Elasticities()
	assert.InDeltaSlice(t, []float64{0.6, 0.3}, el[:], 1e-9)
	assert.InDelta(t, 2.0/3, m.ComputeShare(), 1e-9)

	// Measured values come back as measured.
	e, err := m.Estimate(a, "mid")
	require.NoError(t, err)
	assert.False(t, e.Predicted)
	assert.Equal(t, "measured: synthetic", e.Basis)
	// Job c, measured on one type, is predicted on the others exactly.
	want := cobbDouglas(c, 2, Mixed, topology.H100)[0].Rate
	e, err = m.Estimate(c, topology.H100)
	require.NoError(t, err)
	assert.True(t, e.Predicted)
	assert.InDelta(t, want, e.Rate, 1e-9*want)
	assert.Contains(t, e.Basis, "predicted from the specs of H100")

	// A 3g.40gb slice of an H100: 3/7 of the compute, 4/8 of the memory.
	p, _ := topology.LookupMIGProduct("h100-80gb")
	e, err = m.Estimate(c, topology.MIGSliceType(p, "3g.40gb"))
	require.NoError(t, err)
	share := 1 / ((2.0/3)/(3.0/7) + (1.0/3)/0.5)
	assert.InDelta(t, want*share, e.Rate, 1e-9*want)
	assert.InDelta(t, share, SliceShare(m.ComputeShare(), 3.0/7, 0.5), 1e-12)
	assert.True(t, e.Predicted)
	assert.Contains(t, e.Basis, "MIG 3g.40gb of h100-80gb")
	// The whole GPU as a 7g.80gb instance is the whole GPU.
	e, _ = m.Estimate(c, topology.MIGSliceType(p, "7g.80gb"))
	assert.InDelta(t, want, e.Rate, 1e-9*want)
	// A slice lies between its compute and memory shares.
	assert.Greater(t, share, 3.0/7)
	assert.Less(t, share, 0.5)
	// A quarter of a time-sliced H100.
	ft, _ := topology.FractionType(topology.H100, 0.25)
	e, err = m.Estimate(c, ft)
	require.NoError(t, err)
	assert.InDelta(t, want/4, e.Rate, 1e-9*want)
	assert.True(t, e.Predicted)

	loo, err := m.LeaveOneTypeOut()
	require.NoError(t, err)
	require.NotEmpty(t, loo)
	for _, te := range loo {
		assert.InDelta(t, 0, te.MAPE, 1e-6, "%s", te.Type)
	}

	_, err = m.Estimate(JobKey{Model: "never", ScaleFactor: 1}, "mid")
	assert.ErrorIs(t, err, ErrUnknownJob)
	_, err = m.Estimate(a, "a100")
	assert.ErrorIs(t, err, ErrUnknownGPUType)
	var _ ThroughputModel = m
}

// More compute that slows jobs down is not believed: the elasticity is
// held at 0.
func TestSpecModelNonNegative(t *testing.T) {
	var obs []Observation
	for i, name := range []string{"a", "b", "c"} {
		k := JobKey{Model: name, ScaleFactor: 1}
		for _, s := range testSpecs[:3] {
			obs = append(obs, Observation{Job: k, Type: s.Type, Rate: float64(i+1) * math.Pow(s.BandwidthGBps, 0.5) / math.Pow(s.FP16TFLOPS, 0.2)})
		}
	}
	m, err := FitSpecModel(testSpecs, obs)
	require.NoError(t, err)
	assert.Equal(t, 0.0, m.Elasticities()[0])
	assert.Greater(t, m.Elasticities()[1], 0.0)
}

func TestSpecModelErrors(t *testing.T) {
	k := JobKey{Model: "a", ScaleFactor: 1}
	ok := cobbDouglas(k, 1, Mixed, "slow", "mid", "fast")
	for _, c := range []struct {
		specs []HardwareSpec
		obs   []Observation
		msg   string
	}{
		{testSpecs, append(ok[:1:1], Observation{Job: k, Type: "mid", Rate: math.NaN()}), "rate NaN"},
		{testSpecs, append(ok[:1:1], Observation{Job: k, Type: "mid", Rate: -1}), "rate -1"},
		{testSpecs, append(ok, ok[0]), "two measurements"},
		{testSpecs, append(ok[:1:1], Observation{Job: k, Type: "mid", Rate: 1, Precision: FP32}), "two precisions"},
		{testSpecs, append(ok[:1:1], Observation{Job: k, Type: "mid", Rate: 1, Precision: 7}), "unknown precision"},
		{append(testSpecs[:1:1], testSpecs[0]), ok, "two specs"},
		{[]HardwareSpec{{Type: "x", FP16TFLOPS: 1, FP32TFLOPS: 0, MemoryGB: 1, BandwidthGBps: 1}}, ok, "finite and > 0"},
		{testSpecs, ok[:1], "within-job deviations"},
	} {
		_, err := FitSpecModel(c.specs, c.obs)
		require.ErrorIs(t, err, ErrSpecFit, c.msg)
		assert.ErrorContains(t, err, c.msg)
	}
}

// A job's own elasticities: its exact ones without shrinkage, the pooled
// ones with a huge penalty.
func TestSpecModelShrinkage(t *testing.T) {
	a, b := JobKey{Model: "a", ScaleFactor: 1}, JobKey{Model: "b", ScaleFactor: 1}
	var obs []Observation
	obs = append(obs, cobbDouglas(a, 1, Mixed, "slow", "mid", "fast")...)
	for _, s := range testSpecs[:3] {
		obs = append(obs, Observation{Job: b, Type: s.Type, Rate: math.Pow(s.FP16TFLOPS, 0.1) * math.Pow(s.BandwidthGBps, 0.2)})
	}
	own, err := FitSpecModelWith(testSpecs, obs, SpecOptions{Shrinkage: 0})
	require.NoError(t, err)
	el := own.JobElasticities(b)
	assert.InDeltaSlice(t, []float64{0.1, 0.2}, el[:], 1e-9)
	el = own.JobElasticities(a)
	assert.InDeltaSlice(t, []float64{0.6, 0.3}, el[:], 1e-9)
	pooled, err := FitSpecModelWith(testSpecs, obs, SpecOptions{Shrinkage: 1e12})
	require.NoError(t, err)
	el, pel := pooled.JobElasticities(b), pooled.Elasticities()
	assert.InDeltaSlice(t, pel[:], el[:], 1e-6)
	_, err = FitSpecModelWith(testSpecs, obs, SpecOptions{Shrinkage: math.Inf(1)})
	assert.ErrorIs(t, err, ErrSpecFit)
}
