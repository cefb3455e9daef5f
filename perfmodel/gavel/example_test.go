package gavel_test

import (
	"fmt"

	"github.com/gpusched/gpusched/perfmodel"
	"github.com/gpusched/gpusched/perfmodel/gavel"
)

func ExampleSimulation() {
	tab := gavel.Simulation()
	k := perfmodel.JobKey{Model: "Recommendation", BatchSize: 1024, ScaleFactor: 1}
	for _, gt := range tab.GPUTypes() {
		v, err := tab.Throughput(k, gt)
		if err != nil {
			panic(err)
		}
		fmt.Printf("%s on %s: %.2f steps/s\n", k.Name(), gt, v)
	}
	// Output:
	// Recommendation (batch size 1024) on k80: 20.05 steps/s
	// Recommendation (batch size 1024) on p100: 30.74 steps/s
	// Recommendation (batch size 1024) on v100: 13.28 steps/s
}
