package scheduler_test

import (
	"context"
	"fmt"

	"github.com/gpusched/gpusched/allocation"
	"github.com/gpusched/gpusched/scheduler"
	"github.com/gpusched/gpusched/topology"
)

// Three jobs on a DGX-1 and a K80 server under heterogeneity-aware max-min
// fairness: each round says which job runs on which GPUs; a report says
// what ran; a failed GPU evicts its job, which runs elsewhere next round.
func ExampleScheduler() {
	dgx, err := topology.Homogeneous(1, topology.ServerTemplate{Type: topology.V100, GPUs: 8, Interconnect: topology.HybridCubeMesh})
	if err != nil {
		panic(err)
	}
	k80, err := topology.Homogeneous(1, topology.ServerTemplate{Type: topology.K80, GPUs: 4})
	if err != nil {
		panic(err)
	}
	c := &topology.Cluster{Servers: append(dgx.Servers, k80.Servers...)}
	s, err := scheduler.New(scheduler.Config{Policy: &allocation.MaxMinFairness{}, Cluster: c})
	if err != nil {
		panic(err)
	}
	for _, j := range []struct {
		key  string
		gpus int
	}{{"resnet", 4}, {"bert", 2}, {"a3c", 1}} {
		spec := scheduler.JobSpec{GPUs: j.gpus, Throughput: map[topology.GPUType]float64{topology.V100: 3, topology.K80: 1}}
		if err := s.Submit(j.key, spec, 0); err != nil {
			panic(err)
		}
	}
	ctx := context.Background()
	r, err := s.Round(ctx, 0)
	if err != nil {
		panic(err)
	}
	report := scheduler.RoundReport{Start: r.Start}
	for _, as := range r.Assignments {
		fmt.Println(as.Jobs, as.Type, as.Devices[0].Server, devices(as))
		report.Ran = append(report.Ran, scheduler.Ran{Job: as.Jobs[0], Seconds: r.Length})
	}
	if err := s.Report(report); err != nil {
		panic(err)
	}
	evicted, err := s.FailGPUs("v100-0", 0)
	if err != nil {
		panic(err)
	}
	fmt.Println("GPU v100-0/0 failed, evicted:", evicted)
	r, err = s.Round(ctx, 360)
	if err != nil {
		panic(err)
	}
	for _, as := range r.Assignments {
		fmt.Println(as.Jobs, as.Type, devices(as), "kept:", as.Kept)
	}
	// Output:
	// [resnet] v100 v100-0 [0 1 2 3]
	// [bert] v100 v100-0 [4 7]
	// [a3c] v100 v100-0 [5]
	// GPU v100-0/0 failed, evicted: [resnet]
	// [a3c] v100 [5] kept: true
	// [bert] v100 [4 7] kept: true
	// [resnet] v100 [1 2 3 6] kept: false
}

func devices(as scheduler.Assignment) []int {
	out := make([]int, len(as.Devices))
	for i, d := range as.Devices {
		out[i] = d.Index
	}
	return out
}

// A restart: the state saved after a round is restored into a new
// scheduler built with the same configuration, and the jobs keep their
// GPUs at the next round, with the service they had received.
func ExampleScheduler_Restore_attained() {
	c, err := topology.ParseCompact("v100:8,k80:4", 4) // v100-0, v100-1, k80-0
	if err != nil {
		panic(err)
	}
	cfg := scheduler.Config{Policy: &allocation.MaxMinFairness{}, Cluster: c}
	s, err := scheduler.New(cfg)
	if err != nil {
		panic(err)
	}
	rates := map[topology.GPUType]float64{topology.V100: 3, topology.K80: 1}
	for _, key := range []string{"resnet", "bert"} {
		if err := s.Submit(key, scheduler.JobSpec{GPUs: 4, Throughput: rates}, 0); err != nil {
			panic(err)
		}
	}
	ctx := context.Background()
	r, err := s.Round(ctx, 0)
	if err != nil {
		panic(err)
	}
	report := scheduler.RoundReport{Start: r.Start}
	for _, as := range r.Assignments {
		report.Ran = append(report.Ran, scheduler.Ran{Job: as.Jobs[0], Seconds: r.Length})
	}
	if err := s.Report(report); err != nil {
		panic(err)
	}
	snap, err := s.Snapshot() // save it where the restarted process finds it
	if err != nil {
		panic(err)
	}

	restarted, err := scheduler.New(cfg)
	if err != nil {
		panic(err)
	}
	if err := restarted.Restore(snap); err != nil {
		panic(err)
	}
	st, err := restarted.Status("resnet")
	if err != nil {
		panic(err)
	}
	fmt.Printf("resnet has run %.0f s on V100s\n", st.Attained[topology.V100])
	r, err = restarted.Round(ctx, r.Start+r.Length)
	if err != nil {
		panic(err)
	}
	for _, as := range r.Assignments {
		fmt.Println(as.Jobs, as.Devices[0].Server, "kept:", as.Kept)
	}
	// Output:
	// resnet has run 360 s on V100s
	// [resnet] v100-0 kept: true
	// [bert] v100-1 kept: true
}
