// Command embed is the README's first look at the scheduling core: jobs
// submitted, a round planned and reported, the state saved and restored.
package main

import (
	"context"
	"fmt"
	"log"

	"github.com/gpusched/gpusched/allocation"
	"github.com/gpusched/gpusched/scheduler"
	"github.com/gpusched/gpusched/topology"
)

func main() {
	ctx := context.Background()
	c, err := topology.ParseCompact("v100:8,k80:4", 4) // servers v100-0, v100-1, k80-0 of 4 GPUs
	check(err)
	cfg := scheduler.Config{Cluster: c, Policy: &allocation.MaxMinFairness{}} // Gavel's max-min fairness
	s, err := scheduler.New(cfg)
	check(err)
	rates := map[topology.GPUType]float64{topology.V100: 3, topology.K80: 1} // steps/s on each type
	check(s.Submit("resnet", scheduler.JobSpec{GPUs: 4, Throughput: rates}, 0))
	check(s.Submit("bert", scheduler.JobSpec{GPUs: 2, Throughput: rates}, 0))

	r, err := s.Round(ctx, 0) // what runs where for the next r.Length seconds
	check(err)
	report := scheduler.RoundReport{Start: r.Start}
	for _, a := range r.Assignments {
		fmt.Println(a.Jobs, "on", len(a.Devices), a.Type, "GPUs of", a.Devices[0].Server)
		report.Ran = append(report.Ran, scheduler.Ran{Job: a.Jobs[0], Seconds: r.Length})
	}
	check(s.Report(report)) // only what really ran is credited

	snap, err := s.Snapshot() // JSON to keep across a restart
	check(err)
	restarted, err := scheduler.New(cfg) // same Config, same servers in the same order
	check(err)
	check(restarted.Restore(snap)) // exact, or a *scheduler.MismatchError (then see Adopt)
	r, err = restarted.Round(ctx, r.Start+r.Length)
	check(err)
	for _, a := range r.Assignments {
		fmt.Println(a.Jobs, "kept its GPUs:", a.Kept)
	}
	fmt.Println("stop:", r.Preempted, "waiting:", len(r.Waiting)) // stop what lost its GPUs
}

func check(err error) {
	if err != nil {
		log.Fatal(err)
	}
}
