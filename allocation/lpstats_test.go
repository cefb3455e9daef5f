package allocation

import (
	"context"
	"testing"

	"github.com/gpusched/gpusched/topology"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The max-min LP of J jobs on K types (all runnable, no two alike) has
// J*K + 1 columns, J time rows + K capacity rows + J epigraph rows, and
// J*K + J*K + J*(K+1) nonzeros.
func TestLPStats(t *testing.T) {
	p := &Problem{Types: []topology.GPUType{"a", "b", "c"}, Capacity: []int{2, 3, 4}}
	for m := range 5 {
		p.Jobs = append(p.Jobs, Job{ID: m, ScaleFactor: 1, Throughput: []float64{1 + float64(m), 2 + float64(m)/3, 3}, RemainingSteps: 1000})
	}
	a, err := (&MaxMinFairness{}).Allocate(context.Background(), p)
	require.NoError(t, err)
	require.NotNil(t, a.LP)
	assert.Equal(t, LPStats{Solves: 1, Rows: 5 + 3 + 5, Columns: 5*3 + 1, Nonzeros: 15 + 15 + 20, Iterations: a.LP.Iterations}, *a.LP)
	assert.Positive(t, a.LP.Iterations)

	ftf, err := (&FinishTimeFairness{}).Allocate(context.Background(), p)
	require.NoError(t, err)
	require.NotNil(t, ftf.LP)
	assert.Greater(t, ftf.LP.Solves, 1, "a bisection")

	for _, pol := range []Policy{&MinMakespan{}, &MaxThroughput{}, &WaterFilling{}} {
		a, err := pol.Allocate(context.Background(), p)
		require.NoError(t, err)
		require.NotNil(t, a.LP, "%T", pol)
		assert.Positive(t, a.LP.Solves, "%T", pol)
	}
	fifo, err := (&FIFO{}).Allocate(context.Background(), p)
	require.NoError(t, err)
	assert.Nil(t, fifo.LP, "no LP")
}
