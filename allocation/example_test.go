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

// A scheduler loop around Rounds: each round it tells the mechanism what
// really ran. Job 1 crashes at once in its first two rounds, so it is
// credited nothing and catches up afterwards; the state is saved after
// three rounds, and a restarted scheduler continues where this one stopped.
func ExampleRounds() {
	p := &allocation.Problem{
		Types:    []topology.GPUType{topology.V100},
		Capacity: []int{1},
		Jobs: []allocation.Job{
			{ID: 1, ScaleFactor: 1, Throughput: []float64{2}},
			{ID: 2, ScaleFactor: 1, Throughput: []float64{2}},
		},
	}
	ctx := context.Background()
	crashes := 2
	round := func(r *allocation.Rounds, i int) {
		rd, err := r.Next(ctx, p, float64(i)*360)
		if err != nil {
			panic(err)
		}
		rep := allocation.RoundReport{Start: rd.Start}
		for _, as := range rd.Assignments {
			seconds := rd.Length
			if as.JobIDs[0] == 1 && crashes > 0 {
				crashes--
				seconds = 0
			}
			fmt.Printf("t=%4.0f: job %d on %s for %.0f s\n", rd.Start, as.JobIDs[0], as.Type, seconds)
			rep.Ran = append(rep.Ran, allocation.UnitRun{JobIDs: as.JobIDs, Type: as.Type, Seconds: seconds})
		}
		if err := r.Report(rep); err != nil {
			panic(err)
		}
	}
	r := &allocation.Rounds{Policy: &allocation.MaxMinFairness{}}
	for i := range 3 {
		round(r, i)
	}
	state, err := r.Snapshot()
	if err != nil {
		panic(err)
	}
	// A new process: the same settings, the saved state.
	restarted := &allocation.Rounds{Policy: &allocation.MaxMinFairness{}}
	if err := restarted.Restore(state); err != nil {
		panic(err)
	}
	for i := 3; i < 6; i++ {
		round(restarted, i)
	}
	// Output:
	// t=   0: job 1 on v100 for 0 s
	// t= 360: job 2 on v100 for 360 s
	// t= 720: job 1 on v100 for 0 s
	// t=1080: job 1 on v100 for 360 s
	// t=1440: job 1 on v100 for 360 s
	// t=1800: job 2 on v100 for 360 s
}
