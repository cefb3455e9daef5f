package multires_test

import (
	"context"
	"fmt"

	"github.com/gpusched/gpusched/multires"
)

// Two AlexNets, which run 2.94x faster with 12 CPUs and 125 GB per GPU,
// and six GNMTs, which need 1 CPU, on one of Synergy's servers: GPU-
// proportional gives everyone 3 CPUs; GREEDY gives the AlexNets their best
// case and leaves six GPUs idle for want of CPUs; TUNE takes back what the
// first AlexNet holds above its proportional share so that every GNMT
// runs; OPT's bound splits the CPUs best.
func Example() {
	zoo := multires.Zoo()
	servers := []multires.Server{{GPUs: 8, CPUs: 24, MemGB: 500}}
	var jobs []multires.Job
	for i, name := range []string{"alexnet", "alexnet", "gnmt", "gnmt", "gnmt", "gnmt", "gnmt", "gnmt"} {
		jobs = append(jobs, multires.Job{ID: i, GPUs: 1, Profile: zoo.Lookup(name)})
	}
	for _, a := range []struct {
		name string
		a    multires.Allocator
	}{{"proportional", multires.Proportional{}}, {"greedy", multires.Greedy{}}, {"tune", multires.Tune{}}, {"opt", multires.Opt{}}} {
		plan, err := a.a.Allocate(context.Background(), servers, jobs)
		if err != nil {
			fmt.Println(err)
			return
		}
		total := 0.0
		for _, p := range plan.Placements {
			total += p.Rate
		}
		fmt.Printf("%-12s %d jobs run, %d demoted, throughput %.2f\n", a.name, plan.Placed, plan.Demoted, total)
	}
	// Output:
	// proportional 8 jobs run, 0 demoted, throughput 8.00
	// greedy       2 jobs run, 0 demoted, throughput 5.88
	// tune         8 jobs run, 1 demoted, throughput 9.94
	// opt          8 jobs run, 2 demoted, throughput 10.69
}
