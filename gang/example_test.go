package gang_test

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/gpusched/gpusched/gang"
	"github.com/gpusched/gpusched/topology"
)

// Three workers of one pod group ask to bind; the first two wait, the third
// completes the group and all three go. A group that cannot complete is
// rejected, and during its backoff a late member fails at once.
func ExampleCoscheduler() {
	c := &gang.Coscheduler{Timeout: time.Minute, Backoff: time.Minute}
	if err := c.SetGroup("train-a", 3); err != nil {
		panic(err)
	}
	var wg sync.WaitGroup
	for _, m := range []string{"worker-0", "worker-1"} {
		st, _ := c.Permit("train-a", m)
		fmt.Println(m, st)
		wg.Go(func() {
			if err := c.Wait(context.Background(), "train-a", m); err != nil {
				panic(err)
			}
		})
	}
	st, _ := c.Permit("train-a", "worker-2")
	fmt.Println("worker-2", st)
	wg.Wait()
	fmt.Println("all three bound")

	if err := c.SetGroup("train-b", 2); err != nil {
		panic(err)
	}
	st, _ = c.Permit("train-b", "worker-0")
	fmt.Println("train-b worker-0", st)
	c.Reject("train-b") // say worker-1 found no node
	st, _ = c.Permit("train-b", "worker-1")
	fmt.Println("train-b worker-1", st, "(backoff)")
	// Output:
	// worker-0 wait
	// worker-1 wait
	// worker-2 allow
	// all three bound
	// train-b worker-0 wait
	// train-b worker-1 reject (backoff)
}

// Tiresias's 2D-LAS with preemption: the job that has received the least
// GPU service goes first; a long-running job is preempted for a newcomer.
func ExamplePriority() {
	p := gang.Priority{Order: gang.LAS2D{}}
	running := []gang.JobView{{ID: 1, ScaleFactor: 4, Throughput: []float64{1}, Type: 0, Attained: 40000, Remaining: 500}}
	waiting := []gang.JobView{{ID: 2, ScaleFactor: 4, Throughput: []float64{1}, Type: -1, Arrival: 100, Remaining: 50}}
	d, err := p.Decide(100, []int{0}, waiting, running)
	if err != nil {
		panic(err)
	}
	fmt.Printf("start %v, preempt %v\n", d.Start, d.Preempt)
	// Output:
	// start [{2 0}], preempt [1]
}

// FIFO with server-level gang admission: a 4-GPU job goes whole onto one
// server or waits; the 2-GPU job behind it passes (greedy backfilling).
// The GPUs are bound in the live cluster state.
func ExampleOnServers() {
	c, err := topology.Homogeneous(2, topology.ServerTemplate{Type: topology.V100, GPUs: 4})
	if err != nil {
		panic(err)
	}
	o := &gang.OnServers{
		Inner:   gang.Priority{Order: gang.ByArrival{}, NoPreemption: true, Backfill: gang.Greedy},
		Cluster: c,
		Placer:  gang.Consolidated{Strict: true},
	}
	job := func(id, gpus int) gang.JobView {
		return gang.JobView{ID: id, Arrival: float64(id), ScaleFactor: gpus, Throughput: []float64{1}, Type: -1, Remaining: 1}
	}
	d, err := o.Decide(0, []int{8}, []gang.JobView{job(1, 3), job(2, 2), job(3, 4), job(4, 2)}, nil)
	if err != nil {
		panic(err)
	}
	for _, s := range d.Start {
		fmt.Println("job", s.JobID, "on", o.Placement(s.JobID))
	}
	fmt.Println("free V100:", o.State.Free(topology.V100))
	// Output:
	// job 1 on map[0:[0 1 2]]
	// job 2 on map[1:[0 1]]
	// job 4 on map[1:[2 3]]
	// free V100: 1
}
