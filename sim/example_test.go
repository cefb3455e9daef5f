package sim_test

import (
	"context"
	"fmt"

	"github.com/gpusched/gpusched/allocation"
	"github.com/gpusched/gpusched/sim"
	"github.com/gpusched/gpusched/topology"
)

// Fifty jobs of Gavel's workload generator on 4 K80 + 4 P100 + 4 V100
// under heterogeneity-aware max-min fairness.
func ExampleRun() {
	jobs, err := (&sim.GavelWorkload{Rate: 10, Seed: 1}).Generate(50)
	if err != nil {
		panic(err)
	}
	cfg := sim.Config{
		Types:    []topology.GPUType{topology.K80, topology.P100, topology.V100},
		Capacity: []int{4, 4, 4},
		Policy:   &allocation.MaxMinFairness{},
	}
	res, err := sim.Run(context.Background(), cfg, jobs)
	if err != nil {
		panic(err)
	}
	s := res.Summarise(0, 0)
	fmt.Printf("%d jobs, mean JCT %.1f h\n", s.Jobs, s.MeanJCT/3600)
	// Output:
	// 50 jobs, mean JCT 17.4 h
}
