package placement_test

import (
	"fmt"

	"github.com/gpusched/gpusched/cluster"
	"github.com/gpusched/gpusched/placement"
	"github.com/gpusched/gpusched/topology"
)

// On a DGX-1 (hybrid cube-mesh) with GPUs 0 and 5 taken, a 4-GPU job gets
// the four GPUs with the most NVLinks among them, not the first four free.
func ExampleGPUChooser() {
	c, err := topology.Homogeneous(1, topology.ServerTemplate{Type: topology.V100, GPUs: 8, Interconnect: topology.HybridCubeMesh})
	if err != nil {
		panic(err)
	}
	s := &c.Servers[0]
	free := []bool{false, true, true, true, true, false, true, true}
	gpus, err := placement.GPUChooser{}.Choose(s, free, 4)
	if err != nil {
		panic(err)
	}
	fmt.Println("chosen:", gpus, "score:", placement.Score(s, gpus))
	fmt.Println("first four free:", []int{1, 2, 3, 4}, "score:", placement.Score(s, []int{1, 2, 3, 4}))
	// Output:
	// chosen: [1 2 3 6] score: 620
	// first four free: [1 2 3 4] score: 530
}

// Consolidation: a 4-GPU job goes to the server with 4 free (best fit),
// not to an empty one; a 10-GPU job takes a whole server and the tightest
// one that holds the rest.
func ExampleConsolidated() {
	c, err := topology.ParseCompact("v100:24:8", 8) // v100-0 ... v100-2
	if err != nil {
		panic(err)
	}
	free := [][]bool{
		{true, true, true, true, true, true, true, true},
		{false, false, false, false, true, true, true, true},
		{false, false, false, false, false, false, true, true},
	}
	place := func(p placement.Consolidated, n int) {
		set, err := p.Place(c, free, topology.V100, n)
		if err != nil {
			panic(err)
		}
		fmt.Println(set)
	}
	place(placement.Consolidated{}, 4)
	place(placement.Consolidated{}, 10)
	place(placement.Consolidated{Strict: true}, 6)
	// Output:
	// map[1:[4 5 6 7]]
	// map[0:[0 1 2 3 4 5 6 7] 2:[6 7]]
	// map[0:[0 1 2 3 4 5]]
}

// The same rule on the live cluster state, topology-aware inside the
// server: the state's index finds the best fit without scanning servers.
func ExampleConsolidated_PlaceOn() {
	c, err := topology.Homogeneous(2, topology.ServerTemplate{Type: topology.V100, GPUs: 8, Interconnect: topology.HybridCubeMesh})
	if err != nil {
		panic(err)
	}
	st, err := cluster.New(c)
	if err != nil {
		panic(err)
	}
	if err := st.Bind("other", []cluster.GPURef{{Server: 1, GPU: 0}, {Server: 1, GPU: 5}}); err != nil {
		panic(err)
	}
	p := placement.Consolidated{Chooser: &placement.GPUChooser{}}
	gpus, err := p.PlaceOn(st, topology.V100, 2, nil)
	if err != nil {
		panic(err)
	}
	fmt.Println(gpus, st.Server(1).Link(gpus[0].GPU, gpus[1].GPU))
	if err := st.Bind("job", gpus); err != nil {
		panic(err)
	}
	fmt.Println("free on", st.Server(1).ID+":", st.ServerFree(1))
	// Output:
	// [{1 1} {1 2}] NV2
	// free on v100-1: 4
}

// HiveD's buddy cells: a 2-GPU job gets an NVLink pair; a 3-GPU job takes
// a cell of 4; released cells merge back.
func ExampleBuddy() {
	c, err := topology.Homogeneous(2, topology.ServerTemplate{Type: topology.V100, GPUs: 8, Interconnect: topology.HybridCubeMesh})
	if err != nil {
		panic(err)
	}
	b, err := placement.NewBuddy(c)
	if err != nil {
		panic(err)
	}
	pair, _ := b.Allocate(1, 2)
	four, _ := b.Allocate(2, 3)
	fmt.Println("job 1:", pair, c.Servers[0].Link(pair[0].GPU, pair[1].GPU))
	fmt.Println("job 2:", len(four), "GPUs:", four)
	fmt.Println("free:", b.FreeGPUs(), "largest cell:", b.Largest())
	_ = b.Release(1)
	_ = b.Release(2)
	fmt.Println("free:", b.FreeGPUs(), "largest cell:", b.Largest())
	// Output:
	// job 1: [{0 0} {0 3}] NV2
	// job 2: 4 GPUs: [{0 4} {0 7} {0 5} {0 6}]
	// free: 10 largest cell: 8
	// free: 16 largest cell: 16
}
