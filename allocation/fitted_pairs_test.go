package allocation

import (
	"testing"

	"github.com/gpusched/gpusched/perfmodel"
	"github.com/gpusched/gpusched/perfmodel/gavel"
	"github.com/gpusched/gpusched/topology"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Space sharing for jobs Gavel never measured together: 16-GPU jobs, whose
// isolated rates come from linear extrapolation and whose pair rates from
// the fitted co-location model (the table knows neither). The pairs are
// built, the allocation is valid, and max-min with space sharing does at
// least as well as without.
func TestSpaceSharingWithFittedColocation(t *testing.T) {
	tab := gavel.Simulation()
	fit, err := perfmodel.FitColocation(tab)
	require.NoError(t, err)
	ex := perfmodel.Extrapolated{Table: tab}
	fit.Isolated = ex
	models := []perfmodel.JobKey{
		{Model: "ResNet-18", BatchSize: 64}, {Model: "ResNet-50", BatchSize: 64},
		{Model: "Transformer", BatchSize: 32}, {Model: "LM", BatchSize: 40},
		{Model: "Recommendation", BatchSize: 2048}, {Model: "CycleGAN"},
	}
	types := []topology.GPUType{topology.V100}
	p := &Problem{Types: types, Capacity: []int{32}}
	var keys []perfmodel.JobKey
	for m, k := range models {
		k.ScaleFactor = 16
		v, err := ex.Throughput(k, topology.V100)
		require.NoError(t, err)
		require.Positive(t, v, k.String())
		p.Jobs = append(p.Jobs, Job{ID: m, ScaleFactor: 16, Throughput: []float64{v}})
		keys = append(keys, k)
	}
	_, err = NewTablePairs(tab, keys, types)
	require.Error(t, err, "the table alone cannot answer for 16 GPUs")
	pairs, err := NewTablePairs(fit, keys, types)
	require.NoError(t, err)
	plain := allocate(t, &MaxMinFairness{}, p)
	assert.InDelta(t, 1.0/3, plain.X[0][0], 1e-6) // 6 jobs x 16 GPUs on 32
	p.Pairs = pairs
	shared := allocate(t, &MaxMinFairness{SpaceSharing: true}, p)
	assert.GreaterOrEqual(t, shared.Objective, plain.Objective*(1-1e-6))
	ta, tb := pairs.Rates(0, 1, 0)
	assert.Positive(t, ta)
	assert.Positive(t, tb)
	t.Logf("max-min level %.4f alone, %.4f with fitted pairs (%d pairs used)", plain.Objective, shared.Objective, len(shared.Pairs))
}
