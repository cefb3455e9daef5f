package elastic_test

import (
	"fmt"

	"github.com/gpusched/gpusched/cluster"
	"github.com/gpusched/gpusched/elastic"
	"github.com/gpusched/gpusched/perfmodel"
	"github.com/gpusched/gpusched/perfmodel/gavel"
	"github.com/gpusched/gpusched/topology"
)

// Lyra's two phases on 8 GPUs: the inelastic job and the elastic job's
// base demand first (shortest first), then the spare GPUs go to the
// elastic job, where they save the most time (Lyra's worked example: 4
// extra workers save 40 of its 60 s).
func ExampleLyra() {
	elasticJob := &elastic.Job{ID: 1, MinWorkers: 2, MaxWorkers: 6, GPUsPerWorker: 1, Work: 120, Curve: elastic.Linear{PerWorker: 1}}
	rigid := &elastic.Job{ID: 2, MinWorkers: 2, MaxWorkers: 2, GPUsPerWorker: 1, Work: 50, Curve: elastic.Linear{PerWorker: 1}}
	jobs := []elastic.State{{Job: elasticJob, Remaining: 120}, {Job: rigid, Remaining: 50}}
	workers, err := elastic.Lyra{}.Allocate(jobs, 8)
	if err != nil {
		panic(err)
	}
	fmt.Println(workers)
	// Output: [6 2]
}

// A scaling curve from Gavel's measured throughputs: ResNet-50 (batch 64)
// on 1 to 4 V100s. Gavel measured 1, 2 and 4 GPUs; 3 is extrapolated
// linearly from 2 (perfmodel.Extrapolated), so the curve is not concave:
// the measured 4-GPU rate is below the extrapolated 3-GPU one. Lyra's
// knapsack takes such curves as they are; greedy policies may stop early.
func ExampleNewTable() {
	model := perfmodel.Extrapolated{Table: gavel.Simulation()}
	curve, err := elastic.NewTable(4, func(w int) (float64, error) {
		return model.Throughput(perfmodel.JobKey{Model: "ResNet-50", BatchSize: 64, ScaleFactor: w}, topology.V100)
	})
	if err != nil {
		panic(err)
	}
	for w := 1; w <= 4; w++ {
		fmt.Printf("%d workers: %.2fx\n", w, curve.Throughput(w)/curve.Throughput(1))
	}
	// Output:
	// 1 workers: 1.00x
	// 2 workers: 1.80x
	// 3 workers: 2.70x
	// 4 workers: 2.15x
}

// The orchestrator: loan two inference servers, place an elastic job (its
// base on one loaned server, its flexible workers on the other), then
// reclaim one server: the job only shrinks, nobody is preempted.
func ExampleCluster() {
	c, err := elastic.NewCluster(1, 8)
	if err != nil {
		panic(err)
	}
	if _, err := c.Loan(2); err != nil {
		panic(err)
	}
	job := &elastic.Job{ID: 7, MinWorkers: 4, MaxWorkers: 12, GPUsPerWorker: 1, Work: 1, Curve: elastic.Linear{PerWorker: 1}}
	if _, err := c.Place(job, 12); err != nil {
		panic(err)
	}
	r, err := c.Reclaim(1)
	if err != nil {
		panic(err)
	}
	fmt.Println("returned", r.Servers, "preempted", r.Preempted, "scaled in", r.ScaledIn, "workers left", c.Workers(7))
	// Output: returned [2] preempted [] scaled in [7] workers left 4
}

// Lyra's cluster on the live cluster state the other packages share:
// inference holds three GPUs of the training server. The elastic job's
// base and first flexible workers fill the loaned server (Lyra's server
// groups), the rest take four of the five GPUs inference left; all twelve
// are held in the state under the job's holder key. Reclaiming the loaned
// server preempts the job (its base was there) and removes the server
// from the state.
func ExampleNewClusterOn() {
	shape := topology.ServerTemplate{Type: topology.A100, GPUs: 8, Interconnect: topology.NVSwitch}
	topo, err := topology.Homogeneous(1, shape)
	if err != nil {
		panic(err)
	}
	live, err := cluster.New(topo)
	if err != nil {
		panic(err)
	}
	if err := live.Bind("inference/pod-1", []cluster.GPURef{{Server: 0, GPU: 0}, {Server: 0, GPU: 1}, {Server: 0, GPU: 2}}); err != nil {
		panic(err)
	}
	c, err := elastic.NewClusterOn(live, []string{topo.Servers[0].ID}, shape)
	if err != nil {
		panic(err)
	}
	if _, err := c.Loan(1); err != nil {
		panic(err)
	}
	job := &elastic.Job{ID: 7, MinWorkers: 2, MaxWorkers: 12, GPUsPerWorker: 1, Work: 1, Curve: elastic.Linear{PerWorker: 1}}
	n, err := c.Place(job, 12)
	if err != nil {
		panic(err)
	}
	fmt.Println("workers", n, "GPUs held in the state", len(live.Held(elastic.HolderKey(7))), "servers", live.NumServers(), "free", live.Free(topology.A100))
	r, err := c.Reclaim(1)
	if err != nil {
		panic(err)
	}
	fmt.Println("returned", r.Servers, "preempted", r.Preempted, "workers left", c.Workers(7), "servers", live.NumServers(), "free", live.Free(topology.A100))
	// Output:
	// workers 12 GPUs held in the state 12 servers 2 free 1
	// returned [1] preempted [7] workers left 0 servers 1 free 5
}
