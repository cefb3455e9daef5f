package gang

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// BenchmarkDecide times one decision with 2,000 running and 5,000 waiting
// jobs on 4 types of 1,024 GPUs each (a congested 4,096-GPU cluster).
func BenchmarkDecide(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 2))
	const types = 4
	free := make([]int, types)
	for k := range free {
		free[k] = 1024
	}
	var running, waiting []JobView
	for i := range 2000 {
		k, sf := rng.IntN(types), 1<<rng.IntN(3)
		if free[k] < sf {
			continue
		}
		free[k] -= sf
		running = append(running, JobView{ID: i, Arrival: float64(i), ScaleFactor: sf, Type: k, Throughput: rates(rng, types),
			Remaining: 100 + rng.Float64()*1e5, Attained: rng.Float64() * 1e5})
	}
	for i := range 5000 {
		waiting = append(waiting, JobView{ID: 10000 + i, Arrival: float64(2000 + i), ScaleFactor: 1 << rng.IntN(6), Type: -1,
			Throughput: rates(rng, types), Remaining: 100 + rng.Float64()*1e5, Attained: rng.Float64() * 1e4})
	}
	for _, c := range []struct {
		name string
		p    Priority
	}{
		{"fifo", Priority{Order: ByArrival{}, NoPreemption: true, Backfill: NoBackfill}},
		{"fifo-easy", Priority{Order: ByArrival{}, NoPreemption: true, Backfill: EASY}},
		{"fifo-conservative", Priority{Order: ByArrival{}, NoPreemption: true, Backfill: Conservative}},
		{"fifo-conservative-depth500", Priority{Order: ByArrival{}, NoPreemption: true, Backfill: Conservative, Depth: 500}},
		{"2d-las", Priority{Order: LAS2D{}, Backfill: Greedy}},
	} {
		b.Run(fmt.Sprintf("%s/jobs=7000", c.name), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := c.p.Decide(0, free, waiting, running); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
