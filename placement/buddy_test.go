package placement

import (
	"math/rand/v2"
	"testing"

	"github.com/gpusched/gpusched/topology"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Four DGX-1 servers in two racks.
func dgx1Cluster(t testing.TB) *topology.Cluster {
	c, err := topology.Homogeneous(4, topology.ServerTemplate{Type: topology.V100, GPUs: 8, Interconnect: topology.HybridCubeMesh})
	require.NoError(t, err)
	for i := range c.Servers {
		c.Servers[i].Rack = []string{"r0", "r1"}[i/2]
	}
	return c
}

func TestBuddyCellsFollowTopology(t *testing.T) {
	c := dgx1Cluster(t)
	b, err := NewBuddy(c)
	require.NoError(t, err)
	assert.Equal(t, 32, b.FreeGPUs())
	assert.Equal(t, 32, b.Largest())

	two, err := b.Allocate(1, 2)
	require.NoError(t, err)
	s := &c.Servers[two[0].Server]
	assert.Equal(t, two[0].Server, two[1].Server)
	assert.Equal(t, "NV2", s.Link(two[0].GPU, two[1].GPU).String())

	four, err := b.Allocate(2, 4)
	require.NoError(t, err)
	for _, g := range four {
		assert.Equal(t, four[0].Server, g.Server)
		assert.Equal(t, c.Servers[g.Server].GPUs[four[0].GPU].NUMANode, c.Servers[g.Server].GPUs[g.GPU].NUMANode, "one socket")
	}
	// 3 GPUs take a cell of 4.
	three, err := b.Allocate(3, 3)
	require.NoError(t, err)
	assert.Len(t, three, 4)

	sixteen, err := b.Allocate(4, 16)
	require.NoError(t, err)
	racks := map[string]bool{}
	for _, g := range sixteen {
		racks[c.Servers[g.Server].Rack] = true
	}
	assert.Len(t, racks, 1, "16 GPUs in one rack")
	assert.Equal(t, 32-2-4-4-16, b.FreeGPUs())

	_, err = b.Allocate(5, 16)
	assert.ErrorIs(t, err, ErrNoCell)
	// Releasing everything merges back into one cell.
	for _, j := range []int{3, 1, 4, 2} {
		require.NoError(t, b.Release(j))
	}
	assert.Equal(t, 32, b.Largest())
	assert.ErrorIs(t, b.Release(1), ErrUnknownJob)
	_, err = b.Allocate(6, 0)
	assert.ErrorIs(t, err, ErrBadRequest)
	_, err = b.Allocate(7, 1)
	require.NoError(t, err)
	_, err = b.Allocate(7, 1)
	assert.ErrorIs(t, err, ErrBadRequest)
}

// Random arrivals and departures: GPUs are never shared, accounting holds,
// and everything merges back at the end.
func TestBuddyInvariants(t *testing.T) {
	c, err := topology.ParseCompact("v100:24:8,k80:12:4", 4)
	require.NoError(t, err)
	b, err := NewBuddy(c)
	require.NoError(t, err)
	total := b.FreeGPUs()
	require.Equal(t, 36, total)
	largest := b.Largest()
	assert.Equal(t, 16, largest, "two V100 servers; cells never mix types")
	big, err := b.Allocate(-1, 16)
	require.NoError(t, err)
	for _, g := range big {
		assert.Equal(t, topology.V100, c.Servers[g.Server].GPUs[g.GPU].Type)
	}
	require.NoError(t, b.Release(-1))
	rng := rand.New(rand.NewPCG(5, 6))
	held := map[int][]GPURef{}
	for step := range 2000 {
		if len(held) > 0 && rng.IntN(2) == 0 {
			for j := range held {
				require.NoError(t, b.Release(j))
				delete(held, j)
				break
			}
		} else {
			n := 1 << rng.IntN(4)
			gpus, err := b.Allocate(step, n)
			if err != nil {
				require.ErrorIs(t, err, ErrNoCell)
				continue
			}
			require.Len(t, gpus, n)
			held[step] = gpus
		}
		used := map[GPURef]bool{}
		n := 0
		for _, gpus := range held {
			for _, g := range gpus {
				require.False(t, used[g], "GPU %v held twice", g)
				used[g] = true
				n++
			}
		}
		require.Equal(t, total, n+b.FreeGPUs())
	}
	for j := range held {
		require.NoError(t, b.Release(j))
	}
	assert.Equal(t, total, b.FreeGPUs())
	assert.Equal(t, largest, b.Largest())
}

func BenchmarkBuddy(b *testing.B) {
	c, err := topology.Homogeneous(1024, topology.ServerTemplate{Type: topology.A100, GPUs: 8, Interconnect: topology.NVSwitch})
	if err != nil {
		b.Fatal(err)
	}
	b.Run("build/gpus=8192", func(b *testing.B) {
		for b.Loop() {
			if _, err := NewBuddy(c); err != nil {
				b.Fatal(err)
			}
		}
	})
	bd, err := NewBuddy(c)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("allocate+release/gpus=8192", func(b *testing.B) {
		job := 0
		for b.Loop() {
			if _, err := bd.Allocate(job, 1<<(job%4)); err != nil {
				b.Fatal(err)
			}
			if job >= 500 {
				if err := bd.Release(job - 500); err != nil {
					b.Fatal(err)
				}
			}
			job++
		}
	})
}
