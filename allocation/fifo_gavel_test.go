package allocation

import (
	"context"
	"testing"

	"github.com/gpusched/gpusched/topology"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func fifoTypes(t *testing.T, a *Allocation) map[int]topology.GPUType {
	t.Helper()
	out := map[int]topology.GPUType{}
	for m, row := range a.X {
		for k, x := range row {
			if x == 1 {
				out[a.JobIDs[m]] = a.Types[k]
			}
		}
	}
	return out
}

// The expected allocations were computed by Gavel's own policies/fifo.py
// (c4fa400) on the same inputs.
func TestFIFOGavel(t *testing.T) {
	ctx := context.Background()
	// 80 identical jobs on 36 + 36 + 36: the drawn index decides which
	// type leaves the list; the job always goes to the last listed, V100.
	types := []topology.GPUType{topology.K80, topology.P100, topology.V100}
	p := &Problem{Types: types, Capacity: []int{36, 36, 36}}
	for m := range 80 {
		p.Jobs = append(p.Jobs, Job{ID: m, ScaleFactor: 1, Throughput: []float64{1, 2, 3}})
	}
	for seed, want := range []map[topology.GPUType]int{
		{topology.V100: 36, topology.P100: 36, topology.K80: 8}, {topology.V100: 80},
		{topology.V100: 36, topology.P100: 36, topology.K80: 8}, {topology.V100: 36, topology.P100: 36, topology.K80: 8},
		{topology.V100: 36, topology.P100: 36, topology.K80: 8}, {topology.V100: 80}, {topology.V100: 80}, {topology.V100: 80},
	} {
		a, err := (&FIFO{Compat: CompatGavel, Seed: uint64(seed)}).Allocate(ctx, p)
		require.NoError(t, err)
		got := map[topology.GPUType]int{}
		for _, typ := range fifoTypes(t, a) {
			got[typ]++
		}
		assert.Equal(t, want, got, "seed %d", seed)
	}

	// Mixed scale factors on k80:4, p100:2, v100:3 (job 4 cannot run on
	// V100), then job 0 leaves: base mode keeps every type.
	types = []topology.GPUType{topology.V100, topology.P100, topology.K80} // any order: Gavel sorts by name
	p = &Problem{Types: types, Capacity: []int{3, 2, 4}}
	for m, sf := range []int{1, 2, 1, 4, 1, 1, 2, 1} {
		v := 3.0
		if m == 4 {
			v = 0
		}
		p.Jobs = append(p.Jobs, Job{ID: m, ScaleFactor: sf, Throughput: []float64{v, 2, 1}})
	}
	pol := &FIFO{Compat: CompatGavel, Seed: 3}
	a, err := pol.Allocate(ctx, p)
	require.NoError(t, err)
	v, pp := topology.V100, topology.P100
	assert.Equal(t, map[int]topology.GPUType{0: v, 1: v, 2: pp, 3: pp, 4: pp, 5: pp, 6: pp, 7: pp}, fifoTypes(t, a))
	p.Jobs = p.Jobs[1:]
	a, err = pol.Allocate(ctx, p)
	require.NoError(t, err)
	assert.Equal(t, map[int]topology.GPUType{1: v, 2: pp, 3: pp, 4: pp, 5: pp, 6: pp, 7: pp}, fifoTypes(t, a))

	// Perf: the fastest type with room; the queue stops at job 5, which
	// fits nowhere, so 6 and 7 wait although they would fit.
	p.Jobs = nil
	for m, sf := range []int{1, 2, 1, 4, 1, 1, 2, 1} {
		p.Jobs = append(p.Jobs, Job{ID: m, ScaleFactor: sf, Throughput: []float64{3, 2 + float64(m%3), 1}})
	}
	a, err = (&FIFO{Compat: CompatGavel, Perf: true}).Allocate(ctx, p)
	require.NoError(t, err)
	assert.Equal(t, map[int]topology.GPUType{0: v, 1: pp, 2: v, 3: topology.K80, 4: v}, fifoTypes(t, a))
}

// Packing: a job that finds no GPUs joins the running job it gains most
// with, and the queue stops at the first job that finds no partner.
func TestFIFOGavelPacking(t *testing.T) {
	types := []topology.GPUType{topology.V100}
	p := &Problem{Types: types, Capacity: []int{2}, Pairs: tablePairs{
		{0, 2}: {0.9, 0.9}, {1, 2}: {0.5, 0.5}, {0, 3}: {0.1, 0.1}, {1, 3}: {0.2, 0.2},
	}}
	for m := range 4 {
		p.Jobs = append(p.Jobs, Job{ID: m, ScaleFactor: 1, Throughput: []float64{1}})
	}
	a, err := (&FIFO{Compat: CompatGavel, SpaceSharing: true}).Allocate(context.Background(), p)
	require.NoError(t, err)
	assert.Equal(t, map[int]topology.GPUType{1: topology.V100}, fifoTypes(t, a))
	require.Len(t, a.Pairs, 1, "job 2 joins job 0 (1.8 > 1.5); job 3 finds no partner")
	assert.Equal(t, []int{0, 2}, []int{a.Pairs[0].A, a.Pairs[0].B})
}

// tablePairs gives co-located rates by job index pair.
type tablePairs map[[2]int][2]float64

func (tp tablePairs) Rates(a, b, k int) (float64, float64) {
	if v, ok := tp[[2]int{a, b}]; ok {
		return v[0], v[1]
	}
	if v, ok := tp[[2]int{b, a}]; ok {
		return v[1], v[0]
	}
	return 0, 0
}
