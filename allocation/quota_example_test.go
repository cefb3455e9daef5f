package allocation_test

import (
	"context"
	"fmt"

	"github.com/gpusched/gpusched/allocation"
	"github.com/gpusched/gpusched/topology"
)

// Team A is guaranteed half the cluster's throughput: one K80 and one
// V100, A's job 4x faster on the V100, team B's two jobs 2x. Plain
// max-min fairness gives all three jobs 12/17 = 0.706 in normalised
// throughput (GPUs of the cluster's mix), A less than the 1 its half of
// each GPU would give it alone. With the quota A gets its 1, on 62.5% of
// the V100 (where it gains most), and B's jobs share the rest at 0.583
// each; without A's job, B's borrow everything.
func ExampleQuotaFairness() {
	p := &allocation.Problem{
		Types:    []topology.GPUType{topology.K80, topology.V100},
		Capacity: []int{1, 1},
		Jobs: []allocation.Job{
			{ID: 1, ScaleFactor: 1, Throughput: []float64{1, 4}, Entity: "A"},
			{ID: 2, ScaleFactor: 1, Throughput: []float64{1, 2}, Entity: "B"},
			{ID: 3, ScaleFactor: 1, Throughput: []float64{1, 2}, Entity: "B"},
		},
		EntityQuotas: map[string]allocation.Quota{"A": {GuaranteedShare: 0.5}},
	}
	show := func(name string, pol allocation.Policy, p *allocation.Problem) {
		a, err := pol.Allocate(context.Background(), p)
		if err != nil {
			panic(err)
		}
		use := a.Usage(p)
		fmt.Printf("%s: A %.3f, B %.3f\n", name, use["A"].Normalised, use["B"].Normalised)
		for m, row := range a.X {
			fmt.Printf("  job %d: k80 %.3f v100 %.3f\n", a.JobIDs[m], row[0], row[1])
		}
	}
	show("max-min", &allocation.MaxMinFairness{}, p)
	show("quota", &allocation.QuotaFairness{}, p)
	idle := *p
	idle.Jobs = p.Jobs[1:]
	show("quota, A idle", &allocation.QuotaFairness{}, &idle)
	// Output:
	// max-min: A 0.706, B 1.412
	//   job 1: k80 0.000 v100 0.441
	//   job 2: k80 0.500 v100 0.279
	//   job 3: k80 0.500 v100 0.279
	// quota: A 1.000, B 1.167
	//   job 1: k80 0.000 v100 0.625
	//   job 2: k80 0.500 v100 0.188
	//   job 3: k80 0.500 v100 0.188
	// quota, A idle: A 0.000, B 2.000
	//   job 2: k80 0.500 v100 0.500
	//   job 3: k80 0.500 v100 0.500
}
