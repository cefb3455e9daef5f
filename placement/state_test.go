package placement

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/gpusched/gpusched/cluster"
	"github.com/gpusched/gpusched/topology"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func setOf(refs []cluster.GPURef) GPUSet {
	if refs == nil {
		return nil
	}
	set := GPUSet{}
	for _, r := range refs {
		set[r.Server] = append(set[r.Server], r.GPU)
	}
	return set
}

// On random live states, PlaceOn through the state's index gives exactly
// the placement of Place scanning the free masks, strict or not.
func TestPlaceOnMatchesPlace(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for trial := range 200 {
		c := &topology.Cluster{}
		for s := range 3 + rng.IntN(20) {
			srv := topology.Server{ID: fmt.Sprint("s", s)}
			n := []int{2, 4, 8}[rng.IntN(3)]
			for i := range n {
				typ := topology.V100
				if s%5 == 4 && i%2 == 1 {
					typ = topology.K80 // a few mixed servers
				}
				srv.GPUs = append(srv.GPUs, topology.GPU{Index: i, Type: typ, MemoryMiB: 1024})
			}
			c.Servers = append(c.Servers, srv)
		}
		st, err := cluster.New(c)
		require.NoError(t, err)
		for s := range st.NumServers() {
			for i := range st.Server(s).GPUs {
				if rng.IntN(3) == 0 {
					require.NoError(t, st.Bind(fmt.Sprint("h", s, i), []cluster.GPURef{{Server: s, GPU: i}}))
				}
			}
		}
		for _, strict := range []bool{false, true} {
			p := Consolidated{Strict: strict}
			for n := 1; n <= 20; n++ {
				want, err := p.Place(st.Topology(), st.FreeMasks(), topology.V100, n)
				require.NoError(t, err)
				refs, err := p.PlaceOn(st, topology.V100, n, nil)
				require.NoError(t, err)
				got := setOf(refs)
				require.Equal(t, want, got, "trial %d strict %v n %d", trial, strict, n)
			}
		}
	}
}

// With a chooser, a 2-GPU job on a DGX-1 whose GPU 0 is taken gets an
// NVLink pair with two links (NV2), not the first two free GPUs.
func TestPlaceOnChooser(t *testing.T) {
	c, err := topology.Homogeneous(1, topology.ServerTemplate{Type: topology.V100, GPUs: 8, Interconnect: topology.HybridCubeMesh})
	require.NoError(t, err)
	st, err := cluster.New(c)
	require.NoError(t, err)
	require.NoError(t, st.Bind("x", []cluster.GPURef{{Server: 0, GPU: 0}}))
	plain, err := Consolidated{}.PlaceOn(st, topology.V100, 2, nil)
	require.NoError(t, err)
	assert.Equal(t, []cluster.GPURef{{Server: 0, GPU: 1}, {Server: 0, GPU: 2}}, plain)
	chosen, err := Consolidated{Chooser: &GPUChooser{}}.PlaceOn(st, topology.V100, 2, nil)
	require.NoError(t, err)
	require.Len(t, chosen, 2)
	link := st.Server(0).Link(chosen[0].GPU, chosen[1].GPU)
	assert.Equal(t, topology.LinkNVLink, link.Class)
	assert.Equal(t, 2, link.NVLinks)
	// Requests that make no sense are errors; too many GPUs or an unknown
	// type place nothing.
	for _, bad := range []struct {
		c Consolidated
		n int
	}{{Consolidated{}, 0}, {Consolidated{}, -1}, {Consolidated{Chooser: &GPUChooser{ExactLimit: -1}}, 1}, {Consolidated{Chooser: &GPUChooser{ExactLimit: MaxExactLimit + 1}}, 1}} {
		refs, err := bad.c.PlaceOn(st, topology.V100, bad.n, nil)
		assert.ErrorIs(t, err, ErrBadRequest, "n %d", bad.n)
		assert.Nil(t, refs)
	}
	for _, none := range []struct {
		t topology.GPUType
		n int
	}{{topology.V100, 8}, {topology.A100, 1}} {
		refs, err := Consolidated{}.PlaceOn(st, none.t, none.n, nil)
		assert.NoError(t, err)
		assert.Nil(t, refs, "%d %s", none.n, none.t)
	}
}
