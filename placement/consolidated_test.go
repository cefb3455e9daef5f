package placement

import (
	"fmt"
	"testing"

	"github.com/gpusched/gpusched/topology"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func freeMask(c *topology.Cluster, used map[int]int) [][]bool {
	free := make([][]bool, len(c.Servers))
	for s := range c.Servers {
		free[s] = make([]bool, len(c.Servers[s].GPUs))
		for i := range free[s] {
			free[s][i] = i >= used[s]
		}
	}
	return free
}

// Fewest servers, the rest on the tightest: 10 GPUs with 8, 8 and 2 free
// take 8 + 2 and leave the other 8 whole; 4 GPUs go to the server with 4
// free (best fit) rather than to an empty one.
func TestConsolidatedFewestServers(t *testing.T) {
	c := servers(t, 8, 8, 8)
	place := func(p Consolidated, free [][]bool, gt topology.GPUType, n int) GPUSet {
		t.Helper()
		set, err := p.Place(c, free, gt, n)
		require.NoError(t, err)
		return set
	}
	free := freeMask(c, map[int]int{2: 6}) // 8, 8, 2 free
	set := place(Consolidated{}, free, topology.V100, 10)
	assert.Equal(t, GPUSet{0: {0, 1, 2, 3, 4, 5, 6, 7}, 2: {6, 7}}, set)
	assert.Equal(t, 2, set.Servers())
	free = freeMask(c, map[int]int{1: 4})
	assert.Equal(t, GPUSet{1: {4, 5, 6, 7}}, place(Consolidated{}, free, topology.V100, 4))
	// 20 needs three servers: 8 + 8 + 4.
	free = freeMask(c, map[int]int{2: 4})
	set = place(Consolidated{}, free, topology.V100, 20)
	assert.Equal(t, 20, set.Count())
	assert.Equal(t, 3, set.Servers())
	// Not enough, wrong type: nil, no error.
	assert.Nil(t, place(Consolidated{}, free, topology.V100, 21))
	assert.Nil(t, place(Consolidated{}, free, topology.K80, 1))
	// Strict: a job that fits a server waits rather than split.
	free = freeMask(c, map[int]int{0: 4, 1: 4, 2: 4})
	assert.Nil(t, place(Consolidated{Strict: true}, free, topology.V100, 6))
	assert.Equal(t, 2, place(Consolidated{}, free, topology.V100, 6).Servers())
}

// A request that makes no sense is an error, never a panic (a short free
// list used to index out of range).
func TestConsolidatedBadRequests(t *testing.T) {
	c := servers(t, 8, 8)
	for _, tc := range []struct {
		name string
		free [][]bool
		n    int
		msg  string
	}{
		{"nothing asked", freeMask(c, nil), 0, "0 GPUs asked for"},
		{"negative", freeMask(c, nil), -3, "-3 GPUs asked for"},
		{"short list", [][]bool{{true}}, 2, "free GPUs given for 1 servers, the cluster has 2"},
		{"short server", [][]bool{make([]bool, 8), {true}}, 2, "server 1: 1 free flags for 8 GPUs"},
		{"nil", nil, 1, "free GPUs given for 0 servers"},
	} {
		set, err := Consolidated{}.Place(c, tc.free, topology.V100, tc.n)
		require.ErrorIs(t, err, ErrBadRequest, tc.name)
		assert.ErrorContains(t, err, tc.msg, tc.name)
		assert.Nil(t, set, tc.name)
	}
}

// servers builds a cluster of V100 servers of the given sizes.
func servers(t testing.TB, sizes ...int) *topology.Cluster {
	c := &topology.Cluster{}
	for s, g := range sizes {
		one, err := topology.Homogeneous(1, topology.ServerTemplate{Type: topology.V100, GPUs: g})
		require.NoError(t, err)
		one.Servers[0].ID = fmt.Sprintf("s%d", s)
		c.Servers = append(c.Servers, one.Servers[0])
	}
	require.NoError(t, c.Validate())
	return c
}
