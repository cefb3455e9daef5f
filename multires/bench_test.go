package multires

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
)

// benchJobs returns n jobs of Synergy's mix (20% image, 70% language, 10%
// speech; 1, 2, 4 or 8 GPUs with probabilities 0.7, 0.1, 0.15, 0.05) and
// a cluster of Synergy's servers with as many GPUs as the jobs ask for:
// the round of a loaded cluster.
func benchJobs(n int) ([]Server, []Job) {
	rng := rand.New(rand.NewPCG(7, 7))
	z := Zoo()
	var byTask = map[string][]*Profile{}
	for _, p := range z.Models {
		byTask[p.Task] = append(byTask[p.Task], p)
	}
	jobs := make([]Job, n)
	gpus := 0
	for i := range jobs {
		task := "lang"
		switch r := rng.Float64(); {
		case r < 0.2:
			task = "image"
		case r >= 0.9:
			task = "speech"
		}
		g := 1
		switch r := rng.Float64(); {
		case r >= 0.95:
			g = 8
		case r >= 0.8:
			g = 4
		case r >= 0.7:
			g = 2
		}
		ms := byTask[task]
		jobs[i] = Job{ID: i, GPUs: g, Profile: ms[rng.IntN(len(ms))]}
		gpus += g
	}
	return Homogeneous((gpus+7)/8, Server{GPUs: 8, CPUs: 24, MemGB: 500}), jobs
}

// BenchmarkAllocate: one round of each allocator with every job present
// (docs/benchmarks.md).
func BenchmarkAllocate(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		servers, jobs := benchJobs(n)
		for _, a := range []struct {
			name string
			a    Allocator
		}{{"proportional", Proportional{}}, {"greedy", Greedy{}}, {"tune", Tune{}}, {"opt", Opt{}}, {"opt-round", Opt{Round: true}}} {
			b.Run(fmt.Sprintf("%s/jobs=%d", a.name, n), func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					if _, err := a.a.Allocate(context.Background(), servers, jobs); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
