package elastic

import (
	"context"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/gpusched/gpusched/gang"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The policies (Sia, Unaware and Tiresias too), Reclaim, MultipleChoiceKnapsack, Goodput and FitPerfParams
// are safe for concurrent use, as their docs say: 8 goroutines share one
// value of each policy, one job list with Table and Linear curves, one
// loan, and each gets the answers a single goroutine gets. Run under -race
// (CI does). Cluster is not safe and is not shared.
func TestPoliciesConcurrent(t *testing.T) {
	jobs := benchJobs(60, 256)
	loan := randomLoan(rand.New(rand.NewPCG(3, 4)), 12)
	policies := []Policy{FIFO{}, Lyra{}, AFS{}, Optimus{}, Pollux{}, Tiresias{Order: gang.LAS2D{}}}
	// The typed policies on two pools of 128 GPUs, the same jobs.
	pools := []Pool{{Nodes: 16, GPUsPerNode: 8}, {Nodes: 32, GPUsPerNode: 4}}
	typed := []TypedPolicy{Sia{}, Sia{Oracle: true}, Unaware{Policy: Pollux{}}}
	g := &Goodput{Perf: PerfParams{AlphaC: 0.05, BetaC: 0.002, AlphaN: 0.3, BetaN: 0.01, AlphaR: 0.08, BetaR: 0.005, Gamma: 2},
		Grad: GradStats{Sqr: 1, Var: 20}, InitBatch: 128, MaxBatch: 4096, MinAtomic: 16, MaxAtomic: 256, Accumulation: true}
	samples := []PerfSample{{Nodes: 1, Replicas: 1, Atomic: 16, ComputeTime: 0.08, StepTime: 0.08},
		{Nodes: 1, Replicas: 2, Atomic: 32, ComputeTime: 0.11, StepTime: 0.2}, {Nodes: 2, Replicas: 4, Atomic: 32, ComputeTime: 0.11, StepTime: 0.5}}
	type answer struct {
		workers [][]int
		typed   [][]Assignment
		reclaim *ReclaimResult
		best    Config
		rate    float64
		fit     PerfParams
	}
	ask := func() (answer, error) {
		var a answer
		for _, p := range policies {
			w, err := p.Allocate(jobs, 256)
			if err != nil {
				return a, err
			}
			a.workers = append(a.workers, w)
		}
		for _, p := range typed {
			w, err := p.AllocateTyped(jobs, pools)
			if err != nil {
				return a, err
			}
			a.typed = append(a.typed, w)
		}
		var err error
		if a.reclaim, err = Reclaim(loan, 5); err != nil {
			return a, err
		}
		a.best, a.rate, _ = g.Best(2, 8)
		a.fit, err = FitPerfParams(context.Background(), samples)
		return a, err
	}
	want, err := ask()
	require.NoError(t, err)
	got := make([]answer, 8)
	errs := make([]error, 8)
	var wg sync.WaitGroup
	for i := range got {
		wg.Go(func() { got[i], errs[i] = ask() })
	}
	wg.Wait()
	for i := range got {
		require.NoError(t, errs[i])
		assert.Equal(t, want, got[i], "goroutine %d", i)
	}
}
