package topology

import (
	"context"
	"encoding/json"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A Cluster is read concurrently by schedulers and simulators, and a
// Static discoverer may be shared, as their docs say: 8 goroutines query
// one cluster (whose servers share a link matrix) and discover from one
// Static, and each gets the answers a single goroutine gets. Run under
// -race (CI does).
func TestClusterConcurrentReads(t *testing.T) {
	c, err := Homogeneous(4, ServerTemplate{Type: V100, GPUs: 8, Interconnect: HybridCubeMesh})
	require.NoError(t, err)
	spec, err := json.Marshal(c.Spec())
	require.NoError(t, err)
	static := Static{Spec: spec}
	type answer struct {
		valid    error
		gpus     int
		capacity map[GPUType]int
		types    []GPUType
		links    []Link
		bw       []float64
		spec     *ClusterSpec
		found    int
	}
	ask := func() (answer, error) {
		a := answer{valid: c.Validate(), gpus: c.NumGPUs(), capacity: c.Capacity(), types: c.GPUTypes(), spec: c.Spec()}
		for s := range c.Servers {
			for i := range 8 {
				a.links = append(a.links, c.Servers[s].Link(i, (i+3)%8))
				a.bw = append(a.bw, c.Servers[s].PairBandwidth(i, (i+5)%8))
			}
		}
		d, err := static.Discover(context.Background())
		if err != nil {
			return a, err
		}
		a.found = d.NumGPUs()
		return a, nil
	}
	want, err := ask()
	require.NoError(t, err)
	got := make([]answer, 8)
	errs := make([]error, 8)
	var wg sync.WaitGroup
	for i := range got {
		wg.Go(func() { got[i], errs[i] = ask() })
	}
	wg.Wait()
	for i := range got {
		require.NoError(t, errs[i])
		assert.Equal(t, want, got[i], "goroutine %d", i)
	}
	assert.Equal(t, 32, want.found)
	assert.NoError(t, want.valid)
}
