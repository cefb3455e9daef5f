package allocation

import (
	"testing"

	"github.com/gpusched/gpusched/topology"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// rateTable gives pair rates from a function of the two jobs' IDs.
type rateTable struct {
	p *Problem
	f func(a, b int) (float64, float64)
}

func (r rateTable) Rates(a, b, k int) (float64, float64) {
	return r.f(r.p.Jobs[a].ID, r.p.Jobs[b].ID)
}

func TestGandiva(t *testing.T) {
	p := &Problem{Types: []topology.GPUType{"a"}, Capacity: []int{2}}
	for i := range 4 {
		p.Jobs = append(p.Jobs, Job{ID: i, ScaleFactor: 1, Throughput: []float64{1}})
	}
	p.Pairs = rateTable{p, func(a, b int) (float64, float64) { return 0.7, 0.7 }}
	pol := &Gandiva{Seed: 1}
	a := allocate(t, pol, p)
	// 4 jobs on 2 GPUs: two random pairs, each half of the time on the
	// type (units share the 2 GPUs equally).
	require.Len(t, a.Pairs, 2)
	for _, pr := range a.Pairs {
		assert.InDelta(t, 1.0, pr.X[0], 1e-12)
	}
	first := a.Pairs
	// Pairs persist.
	a = allocate(t, pol, p)
	assert.Equal(t, first, a.Pairs)
	// They are split when sharing stops paying off (0.4 + 0.4 < 1), and the
	// four jobs share the two GPUs.
	p.Pairs = rateTable{p, func(a, b int) (float64, float64) { return 0.4, 0.4 }}
	a = allocate(t, pol, p)
	assert.Empty(t, a.Pairs)
	for m := range p.Jobs {
		assert.InDelta(t, 0.5, a.X[m][0], 1e-12)
	}
	// Not oversubscribed: no pairs at all.
	p.Jobs = p.Jobs[:2]
	p.Pairs = rateTable{p, func(a, b int) (float64, float64) { return 0.9, 0.9 }}
	a = allocate(t, &Gandiva{}, p)
	assert.Empty(t, a.Pairs)
}

func TestFIFOPacked(t *testing.T) {
	p := &Problem{Types: []topology.GPUType{"a"}, Capacity: []int{1}}
	for i := range 3 {
		p.Jobs = append(p.Jobs, Job{ID: i, ScaleFactor: 1, Throughput: []float64{1}, Arrival: float64(i)})
	}
	// Job 1 gains 0.9 + 0.8 = 1.7 > 1.5 with job 0; job 2 would gain 1.2.
	p.Pairs = rateTable{p, func(a, b int) (float64, float64) {
		if a == 2 || b == 2 {
			return 0.6, 0.6
		}
		if a == 1 {
			return 0.8, 0.9
		}
		return 0.9, 0.8
	}}
	pol := &FIFO{Perf: true, SpaceSharing: true, Sticky: true}
	a := allocate(t, pol, p)
	require.Len(t, a.Pairs, 1)
	assert.Equal(t, Pair{A: 0, B: 1, X: []float64{1}}, a.Pairs[0])
	assert.Zero(t, a.X[0][0])
	assert.Zero(t, a.X[2][0])
	// The pair survives the next call; when job 0 leaves, job 1 keeps the GPU.
	a = allocate(t, pol, p)
	require.Len(t, a.Pairs, 1)
	p.Jobs = p.Jobs[1:]
	a = allocate(t, pol, p)
	assert.Empty(t, a.Pairs)
	assert.Equal(t, 1.0, a.X[0][0])
}
