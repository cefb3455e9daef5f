package ring_test

import (
	"context"
	"fmt"

	"github.com/gpusched/gpusched/cluster"
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

// The executor on a live cluster state shared with other work: a training
// job holds two GPUs of the first server and one GPU of the second has
// failed, so the 4-GPU ring spans the five GPUs left only as it must and
// the three 1-GPU jobs wait for it. While a job runs it holds its GPUs in
// the state under ring.HolderKey; afterwards the state is as it was.
func ExampleExecutor_RunOn() {
	c, _ := topology.Homogeneous(2, topology.ServerTemplate{Type: topology.V100, GPUs: 4})
	live, _ := cluster.New(c)
	_ = live.Bind("train/a", []cluster.GPURef{{Server: 0, GPU: 0}, {Server: 0, GPU: 1}})
	_, _ = live.Fail(cluster.GPURef{Server: 1, GPU: 3})
	model := perfmodel.RingModel{IntraBandwidth: 10, InterBandwidth: 1, ReduceSpeed: 100, Xi1: 1, Alpha: 0.5}
	rj := perfmodel.RingJob{GradientSize: 0.002, Backward: 0.02}
	jobs := []ring.Job{{ID: 1, GPUs: 4, Iterations: 2000, Ring: rj}, {ID: 2, GPUs: 1, Iterations: 2000, Ring: rj}, {ID: 3, GPUs: 1, Iterations: 2000, Ring: rj}, {ID: 4, GPUs: 1, Iterations: 2000, Ring: rj}}
	ex := ring.Executor{Model: model, Placer: ring.FirstFit{}, Strict: true}
	s, err := ex.RunOn(context.Background(), live, jobs, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, o := range s.Jobs {
		fmt.Printf("job %d: slots %d-%d on GPUs %v\n", o.ID, o.Start, o.Finish, o.GPUs)
	}
	fmt.Println("holders after the run", live.Holders(), "free", live.Free(topology.V100))
	// Output:
	// job 1: slots 0-47 on GPUs map[0:[2 3] 1:[0 1]]
	// job 2: slots 0-40 on GPUs map[1:[2]]
	// job 3: slots 40-80 on GPUs map[1:[2]]
	// job 4: slots 47-87 on GPUs map[0:[2]]
	// holders after the run [train/a] free 5
}
