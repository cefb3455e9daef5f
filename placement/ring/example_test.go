package ring_test

import (
	"context"
	"fmt"

	"github.com/gpusched/gpusched/perfmodel"
	"github.com/gpusched/gpusched/placement/ring"
	"github.com/gpusched/gpusched/topology"
)

// SJF-BCO on two 4-GPU servers: four 1-GPU jobs and two 4-GPU rings. The
// small jobs go first and fill one server; a ring takes the other whole
// (its 2000 iterations at 49 per slot: 41 slots), and the second ring
// takes the first server when the small jobs end: no ring spans servers.
func ExampleSJFBCO() {
	c, _ := topology.Homogeneous(2, topology.ServerTemplate{Type: topology.V100, GPUs: 4})
	model := perfmodel.RingModel{IntraBandwidth: 10, InterBandwidth: 1, ReduceSpeed: 100, Xi1: 1, Alpha: 0.5}
	rj := perfmodel.RingJob{GradientSize: 0.002, Backward: 0.02} // slots
	var jobs []ring.Job
	for i, g := range []int{4, 1, 1, 4, 1, 1} {
		jobs = append(jobs, ring.Job{ID: i, GPUs: g, Iterations: 2000, Ring: rj})
	}
	r, err := ring.SJFBCO{Model: model}.Schedule(context.Background(), c, jobs)
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, o := range r.Jobs {
		fmt.Printf("job %d: slots %d-%d on %d server(s), contention %d\n", o.ID, o.Start, o.Finish, o.Servers, o.MaxContention)
	}
	fmt.Println("makespan", r.Makespan)
	// Output:
	// job 0: slots 0-41 on 1 server(s), contention 0
	// job 1: slots 0-40 on 1 server(s), contention 0
	// job 2: slots 0-40 on 1 server(s), contention 0
	// job 3: slots 40-81 on 1 server(s), contention 0
	// job 4: slots 0-40 on 1 server(s), contention 0
	// job 5: slots 0-40 on 1 server(s), contention 0
	// makespan 81
}
