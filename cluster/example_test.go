package cluster_test

import (
	"errors"
	"fmt"

	"github.com/gpusched/gpusched/cluster"
	"github.com/gpusched/gpusched/topology"
)

// A job takes two GPUs on the tightest V100 server, another job is refused
// a GPU that is taken, a server fails and then leaves, and a new node joins.
func ExampleState() {
	c, err := topology.ParseCompact("v100:8:4,k80:4:4", 4) // v100-0, v100-1, k80-0
	if err != nil {
		panic(err)
	}
	st, err := cluster.New(c)
	if err != nil {
		panic(err)
	}
	s, _ := st.BestFit(topology.V100, 2)
	if err := st.Bind("job-a", []cluster.GPURef{{Server: s, GPU: 0}, {Server: s, GPU: 1}}); err != nil {
		panic(err)
	}
	fmt.Println("job-a on", st.Server(s).ID, "V100 free:", st.Free(topology.V100))

	err = st.Bind("job-b", []cluster.GPURef{{Server: s, GPU: 2}, {Server: s, GPU: 1}})
	fmt.Println("job-b refused:", errors.Is(err, cluster.ErrBusy), "V100 free:", st.Free(topology.V100))

	affected, _ := st.FailServer("v100-0")
	fmt.Println("v100-0 failed; holders to evict:", affected, "V100 healthy:", st.Capacity(topology.V100))
	st.Release("job-a")
	fmt.Println("after release, V100 free:", st.Free(topology.V100))

	if _, err := st.RemoveServer("v100-0"); err != nil {
		panic(err)
	}
	h100, _ := topology.Homogeneous(1, topology.ServerTemplate{Type: topology.H100, GPUs: 8, Interconnect: topology.NVSwitch})
	if _, err := st.AddServer(h100.Servers[0]); err != nil {
		panic(err)
	}
	fmt.Println(st.Types(), "capacity changes:", st.CapacityGeneration(), "consistent:", st.Check() == nil)
	// Output:
	// job-a on v100-0 V100 free: 6
	// job-b refused: true V100 free: 6
	// v100-0 failed; holders to evict: [job-a] V100 healthy: 4
	// after release, V100 free: 4
	// [h100 k80 v100] capacity changes: 3 consistent: true
}
