package elastic_test

import (
	"fmt"

	"github.com/gpusched/gpusched/cluster"
	"github.com/gpusched/gpusched/elastic"
	"github.com/gpusched/gpusched/gang"
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

// Sia's worked example (SOSP 2023, section 3.3, Table 1): a node of 2
// GPUs of type A and one of 4 of type B, two jobs whose goodputs on each
// configuration are the table's. Maximising the sum of goodputs (P = 1)
// gives J1 the four B GPUs and J2 the two A GPUs. With Sia's defaults the
// scale-up rule starts each new job on one GPU, of the type where it is
// worth most.
func ExampleSia() {
	pools := []elastic.Pool{{Type: "a", Nodes: 1, GPUsPerNode: 2}, {Type: "b", Nodes: 1, GPUsPerNode: 4}}
	job := func(id int, a, b elastic.Table) *elastic.Job {
		return &elastic.Job{ID: id, MinWorkers: 1, MaxWorkers: 4, GPUsPerWorker: 1, Work: 1, Curves: []elastic.Curve{a, b}}
	}
	jobs := []elastic.State{
		{Job: job(1, elastic.Table{1, 1.5}, elastic.Table{1.5, 2.5, 2.5, 3.5}), Remaining: 1},
		{Job: job(2, elastic.Table{1.2, 2.1}, elastic.Table{1, 1.9, 1.9, 3.6}), Remaining: 1},
	}
	best, err := elastic.Sia{P: 1, Growth: -1}.AllocateTyped(jobs, pools)
	if err != nil {
		panic(err)
	}
	first, err := elastic.Sia{}.AllocateTyped(jobs, pools)
	if err != nil {
		panic(err)
	}
	for i, a := range best {
		fmt.Printf("J%d: %d GPUs of %s (new job: %d GPU of %s)\n", i+1, a.Workers, pools[a.Pool].Type, first[i].Workers, pools[first[i].Pool].Type)
	}
	// Output:
	// J1: 4 GPUs of b (new job: 1 GPU of b)
	// J2: 2 GPUs of a (new job: 1 GPU of a)
}

// Tiresias's 2D-LAS with one threshold of 100 GPU-seconds on 4 GPUs: the
// running job has attained 200 (the second queue), so the job that has
// attained nothing goes first and preempts it.
func ExampleTiresias() {
	rigid := func(id int, g int) *elastic.Job {
		return &elastic.Job{ID: id, MinWorkers: g, MaxWorkers: g, GPUsPerWorker: 1, Work: 1000, Curve: elastic.Linear{PerWorker: 1}}
	}
	jobs := []elastic.State{
		{Job: rigid(1, 2), Remaining: 500, Workers: 2, Age: 300, Attained: 200},
		{Job: rigid(2, 4), Remaining: 1000, Age: 50, Waiting: 50},
	}
	w, err := elastic.Tiresias{Order: gang.LAS2D{Thresholds: []float64{100}}}.Allocate(jobs, 4)
	if err != nil {
		panic(err)
	}
	fmt.Println(w)
	// Output: [0 4]
}
