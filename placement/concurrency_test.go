package placement

import (
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gpusched/gpusched/topology"
)

// GPUChooser and Consolidated are safe for concurrent use, as their docs
// say: 8 goroutines share one value, one server or cluster and one free
// list, and each gets the answer a single goroutine gets. Run under -race
// (CI does). Buddy is not safe and is not shared.
func TestChoosersConcurrent(t *testing.T) {
	s := server(t, topology.ServerTemplate{Type: topology.V100, GPUs: 8, Interconnect: topology.HybridCubeMesh})
	c := servers(t, 8, 8, 4, 2)
	free := freeMask(c, map[int]int{0: 3, 2: 1})
	inside := allFree(8)
	inside[1] = false
	chooser, placer := GPUChooser{}, Consolidated{}
	type answer struct {
		gpus [][]int
		sets []GPUSet
	}
	ask := func() (answer, error) {
		var a answer
		for k := 1; k <= 7; k++ {
			g, err := chooser.Choose(s, inside, k)
			if err != nil {
				return a, err
			}
			set, err := placer.Place(c, free, topology.V100, 2*k)
			if err != nil {
				return a, err
			}
			a.gpus, a.sets = append(a.gpus, g), append(a.sets, set)
		}
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
}
