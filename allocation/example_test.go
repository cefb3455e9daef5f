package allocation_test

import (
	"context"
	"fmt"

	"github.com/gpusched/gpusched/allocation"
	"github.com/gpusched/gpusched/topology"
)

// Two jobs, one K80 and one V100. Job 1 gains 4x on the V100, job 2 only
// 2x; normalised by their proportional-share rates (2.5 and 1.5), the
// levels 0.4 (1 + 3y) and (2/3)(2 - y) meet at y = 0.5: each job gets half
// of each GPU, and the mechanism alternates them round by round, visiting
// the faster V100 first.
func ExampleMaxMinFairness() {
	p := &allocation.Problem{
		Types:    []topology.GPUType{topology.K80, topology.V100},
		Capacity: []int{1, 1},
		Jobs: []allocation.Job{
			{ID: 1, ScaleFactor: 1, Throughput: []float64{1, 4}},
			{ID: 2, ScaleFactor: 1, Throughput: []float64{1, 2}},
		},
	}
	a, err := (&allocation.MaxMinFairness{}).Allocate(context.Background(), p)
	if err != nil {
		panic(err)
	}
	fmt.Printf("level %.3f\n", a.Objective)
	for m, row := range a.X {
		fmt.Printf("job %d: k80 %.3f v100 %.3f\n", a.JobIDs[m], row[0], row[1])
	}
	r := &allocation.Rounds{Policy: &allocation.MaxMinFairness{}}
	for i := range 3 {
		rd, err := r.Next(context.Background(), p, float64(i)*360)
		if err != nil {
			panic(err)
		}
		for _, as := range rd.Assignments {
			fmt.Printf("round %d: job %d on %s %v\n", i, as.JobIDs[0], as.Type, as.Workers)
		}
	}
	// Output:
	// level 1.000
	// job 1: k80 0.500 v100 0.500
	// job 2: k80 0.500 v100 0.500
	// round 0: job 2 on k80 [0]
	// round 0: job 1 on v100 [0]
	// round 1: job 1 on k80 [0]
	// round 1: job 2 on v100 [0]
	// round 2: job 2 on k80 [0]
	// round 2: job 1 on v100 [0]
}
