// Command ownpolicy is a policy of one's own, in a module of its own, run
// beside gpusched's baselines by the benchmark suite (docs/compare.md): a
// fair share of GPUs per job, each job's share placed on the types where
// it runs fastest relative to its slowest type, the jobs that gain most
// placed first ("best fit").
//
//	go run . -only kueue-flavor-walk,tiresias
//
// From a clone, as here, go.mod replaces gpusched with the clone; in a
// module of your own, `go get github.com/gpusched/gpusched` instead.
package main

import (
	"cmp"
	"context"
	"os"
	"slices"

	"github.com/gpusched/gpusched/allocation"
	"github.com/gpusched/gpusched/compare"
)

// BestFit gives each job the same share of the cluster's GPUs (at most
// all of its time) and fills the types in the order of the job's speed-up
// there, the jobs that gain most from their best type first. It keeps no
// state: safe for concurrent use.
type BestFit struct{}

// Allocate implements allocation.Policy.
func (BestFit) Allocate(_ context.Context, p *allocation.Problem) (*allocation.Allocation, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	a := &allocation.Allocation{Types: p.Types, JobIDs: make([]int, len(p.Jobs)), X: make([][]float64, len(p.Jobs))}
	gpus, demand := 0, 0
	for _, c := range p.Capacity {
		gpus += c
	}
	for m, j := range p.Jobs {
		a.JobIDs[m] = j.ID
		a.X[m] = make([]float64, len(p.Types))
		demand += j.ScaleFactor
	}
	if demand == 0 {
		return a, nil
	}
	share := min(1, float64(gpus)/float64(demand)) // each job's time share
	order := indices(len(p.Jobs))
	slices.SortStableFunc(order, func(x, y int) int { return cmp.Compare(gain(p.Jobs[y]), gain(p.Jobs[x])) })
	free := make([]float64, len(p.Capacity))
	for k, c := range p.Capacity {
		free[k] = float64(c)
	}
	for _, m := range order {
		fill(p.Jobs[m], a.X[m], free, share)
	}
	return a, nil
}

// gain is a job's best rate over its worst where it runs (0 if nowhere).
func gain(j allocation.Job) float64 {
	best, worst := 0.0, 0.0
	for _, r := range j.Throughput {
		if r > 0 {
			best = max(best, r)
			if worst == 0 || r < worst {
				worst = r
			}
		}
	}
	if worst == 0 {
		return 0
	}
	return best / worst
}

// fill gives a job its share on its types from the fastest, within the
// free GPUs.
func fill(j allocation.Job, x, free []float64, share float64) {
	types := indices(len(x))
	slices.SortStableFunc(types, func(a, b int) int { return cmp.Compare(j.Throughput[b], j.Throughput[a]) })
	left := share
	for _, k := range types {
		if left <= 0 || j.Throughput[k] <= 0 {
			return
		}
		x[k] = min(left, free[k]/float64(j.ScaleFactor))
		free[k] -= x[k] * float64(j.ScaleFactor)
		left -= x[k]
	}
}

// indices returns 0, 1, ..., n-1.
func indices(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out
}

func main() {
	mine := compare.Entrant{
		Name:        "bestfit",
		Description: "a fair share per job, placed on its fastest types, the jobs that gain most first",
		Policy:      func(compare.Setup) allocation.Policy { return BestFit{} },
	}
	os.Exit(compare.Main(os.Args[1:], os.Stdout, os.Stderr, mine))
}
