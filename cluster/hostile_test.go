package cluster

import (
	"fmt"
	"strings"
	"testing"

	"github.com/gpusched/gpusched/topology"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// handBuilt returns a hand-built server of n V100s without links.
func handBuilt(id string, n int) topology.Server {
	s := topology.Server{ID: id, GPUs: make([]topology.GPU, n)}
	for i := range s.GPUs {
		s.GPUs[i] = topology.GPU{Index: i, Type: topology.V100, MemoryMiB: 16384, NUMANode: -1}
	}
	return s
}

// The live state refuses what topology.ParseJSON refuses: a 10 MB id (it
// used to take it, and every error about the server then carried it), a
// server of 1,025 GPUs, a label over topology.MaxIDLen. Errors name the
// limit and quote at most the id's first 64 bytes.
func TestAddServerCaps(t *testing.T) {
	st, err := New(nil)
	require.NoError(t, err)
	for _, tc := range []struct {
		name string
		s    topology.Server
		msg  string
	}{
		{"10 MB id", handBuilt(strings.Repeat("x", 10<<20), 1), "server id of 10485760 bytes is longer than 253"},
		{"id of 254 bytes", handBuilt(strings.Repeat("y", 254), 1), "server id of 254 bytes is longer than 253"},
		{"1,025 GPUs", handBuilt("big", 1025), "1025 GPUs in one server, more than 1024"},
		{"rack", func() topology.Server { s := handBuilt("r", 1); s.Rack = strings.Repeat("r", 300); return s }(), "rack of 300 bytes"},
		{"uuid", func() topology.Server { s := handBuilt("u", 1); s.GPUs[0].UUID = strings.Repeat("u", 300); return s }(), "UUID of 300 bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := st.AddServer(tc.s)
			require.ErrorIs(t, err, ErrInvalid)
			assert.ErrorContains(t, err, tc.msg)
			assert.Less(t, len(err.Error()), 1000, "the error quotes a long id cut short")
			_, err = New(&topology.Cluster{Servers: []topology.Server{tc.s}})
			require.ErrorIs(t, err, ErrInvalid, "New refuses it too")
			assert.ErrorContains(t, err, tc.msg)
		})
	}
	assert.Equal(t, 0, st.NumServers())
	// At the limits, it is taken.
	_, err = st.AddServer(handBuilt(strings.Repeat("z", topology.MaxIDLen), topology.MaxGPUsPerServer))
	require.NoError(t, err)
	require.NoError(t, st.Check())
}

// Servers added one by one stop at topology.MaxClusterGPUs, as a spec
// does.
func TestAddServerClusterCap(t *testing.T) {
	if testing.Short() {
		t.Skip("a million GPUs")
	}
	st, err := New(nil)
	require.NoError(t, err)
	n := topology.MaxClusterGPUs / topology.MaxGPUsPerServer
	for i := range n {
		_, err := st.AddServer(handBuilt(fmt.Sprint("s", i), topology.MaxGPUsPerServer))
		require.NoError(t, err)
	}
	_, err = st.AddServer(handBuilt("one-more", 1))
	require.ErrorIs(t, err, ErrInvalid)
	assert.ErrorContains(t, err, "more than topology.MaxClusterGPUs (1048576)")
	assert.Equal(t, n, st.NumServers())
}
