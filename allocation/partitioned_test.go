package allocation

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gpusched/gpusched/perfmodel"
	"github.com/gpusched/gpusched/topology"
)

const partitionedSpec = `{"servers": [
  {"id": "h", "devices": [
    {"type": "h100", "mig": {"instances": [{"profile": "3g.40gb", "start": 0}, {"profile": "3g.40gb", "start": 4}]}},
    {"type": "h100"}]},
  {"id": "a", "gpu_type": "a100", "gpus": 2, "memory_mib": 81920}
]}`

// fixedRates is a model with fixed rates per type and an unknown job.
type fixedRates map[topology.GPUType]float64

func (r fixedRates) Throughput(k perfmodel.JobKey, t topology.GPUType) (float64, error) {
	if k.Model == "unknown" {
		return 0, &perfmodel.JobError{Job: k, Kind: perfmodel.ErrUnknownJob}
	}
	v, ok := r[t]
	if !ok {
		return 0, &perfmodel.JobError{Job: k, Type: t, Kind: perfmodel.ErrUnknownGPUType}
	}
	return v * float64(k.ScaleFactor), nil
}

func TestPartitionedCapacity(t *testing.T) {
	c, err := topology.ParseJSON([]byte(partitionedSpec))
	require.NoError(t, err)
	types, capacity, err := PartitionedCapacity(c, map[topology.GPUType]int{topology.A100: 2})
	require.NoError(t, err)
	assert.Equal(t, []topology.GPUType{"a100-frac0.5", topology.H100, "h100-80gb-3g.40gb"}, types)
	assert.Equal(t, []int{4, 1, 2}, capacity)
	types, capacity, err = PartitionedCapacity(c, nil)
	require.NoError(t, err)
	assert.Equal(t, []topology.GPUType{topology.A100, topology.H100, "h100-80gb-3g.40gb"}, types)
	assert.Equal(t, []int{2, 1, 2}, capacity)
	_, _, err = PartitionedCapacity(c, map[topology.GPUType]int{topology.A100: -2})
	assert.ErrorIs(t, err, ErrInvalidProblem)
	_, _, err = PartitionedCapacity(c, map[topology.GPUType]int{topology.A100: 1 << 20})
	assert.ErrorContains(t, err, "want 1 to 1024")
}

// Two alike jobs on one H100 and two 3g.40gb slices at half its rate: each
// gets half its time on the whole H100 and half on a slice, 0.75 of an
// H100's rate, the max-min optimum (the H100 is the bottleneck; a slice
// adds at most 0.5 per unit of time). The two-GPU job cannot use slices.
func TestMaxMinOverSlices(t *testing.T) {
	c, err := topology.ParseJSON([]byte(`{"servers": [{"id": "h", "devices": [
	    {"type": "h100", "mig": {"instances": [{"profile": "3g.40gb", "start": 0}, {"profile": "3g.40gb", "start": 4}]}},
	    {"type": "h100"}]}]}`))
	require.NoError(t, err)
	model := fixedRates{topology.H100: 1, "h100-80gb-3g.40gb": 0.5}
	jobs := []Job{{ID: 1, ScaleFactor: 1}, {ID: 2, ScaleFactor: 1}}
	keys := []perfmodel.JobKey{{Model: "a", ScaleFactor: 1}, {Model: "b", ScaleFactor: 1}}
	p, err := PartitionedProblem(c, nil, jobs, keys, model)
	require.NoError(t, err)
	assert.Equal(t, []float64{1, 0.5}, p.Jobs[0].Throughput)
	a, err := (&MaxMinFairness{}).Allocate(context.Background(), p)
	require.NoError(t, err)
	require.NoError(t, a.Check(p, 1e-6))
	for m := range p.Jobs {
		assert.InDelta(t, 0.75, a.EffectiveThroughput(p, m), 1e-5)
		assert.InDelta(t, 0.5, a.X[m][0], 1e-5)
		assert.InDelta(t, 0.5, a.X[m][1], 1e-5)
	}

	p, err = PartitionedProblem(c, nil, []Job{{ID: 3, ScaleFactor: 2}}, keys[:1], model)
	require.NoError(t, err)
	assert.Equal(t, []float64{2, 0}, p.Jobs[0].Throughput)

	_, err = PartitionedProblem(c, nil, jobs, []perfmodel.JobKey{{Model: "unknown", ScaleFactor: 1}, keys[1]}, model)
	assert.ErrorIs(t, err, perfmodel.ErrUnknownJob)
	_, err = PartitionedProblem(c, nil, jobs, keys[:1], model)
	assert.ErrorIs(t, err, ErrInvalidProblem)
	// A type the model does not know: the job cannot run there.
	p, err = PartitionedProblem(c, nil, jobs[:1], keys[:1], fixedRates{topology.H100: 1})
	require.NoError(t, err)
	assert.Equal(t, []float64{1, 0}, p.Jobs[0].Throughput)
}
