package allocation

import (
	"context"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// goroutines is how many goroutines the concurrency tests run at once.
const goroutines = 8

// Every policy is safe for concurrent use, as its doc says: one value
// shared by 8 goroutines on one Problem (with space sharing through a
// shared TablePairs). Run under -race (CI does), this proves the claim;
// stateless policies must also give every goroutine the answer they give
// alone.
func TestPoliciesConcurrent(t *testing.T) {
	p, _ := gavelProblem(t, 3, 12)
	stateless := []Policy{&MaxMinFairness{}, &MaxMinFairness{Agnostic: true}, &MaxMinFairness{SpaceSharing: true},
		&MaxThroughput{}, &MinMakespan{}, &WaterFilling{}, Proportional{}, Isolated{}, &QuotaFairness{}, &QuotaFairness{WaterFilling: true}}
	for m := range p.Jobs {
		p.Jobs[m].RemainingSteps = float64(1000 * (m + 1))
		p.Jobs[m].Entity = []string{"e0", "e1", "e2"}[m%3]
	}
	// Quotas, which only QuotaFairness reads.
	p.EntityQuotas = map[string]Quota{"e0": {GuaranteedShare: 0.5}, "e1": {MaxShare: 0.3}}
	for _, pol := range stateless {
		want, err := pol.Allocate(context.Background(), p)
		require.NoError(t, err, "%T", pol)
		got := make([]*Allocation, goroutines)
		run(t, pol, p, got)
		for _, a := range got {
			require.NotNil(t, a)
			for m := range want.X {
				assert.InDeltaSlice(t, want.X[m], a.X[m], 1e-9, "%T job %d", pol, m)
			}
		}
	}
	for _, pol := range []Policy{&FinishTimeFairness{}, &FIFO{Seed: 1}, &FIFO{SpaceSharing: true, Sticky: true}, &Gandiva{Seed: 2}} {
		got := make([]*Allocation, goroutines)
		run(t, pol, p, got)
		for _, a := range got {
			require.NotNil(t, a)
			require.NoError(t, a.Check(p, 1e-7), "%T", pol)
		}
	}
}

// run calls pol.Allocate(p) from len(out) goroutines at once.
func run(t *testing.T, pol Policy, p *Problem, out []*Allocation) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make([]error, len(out))
	for g := range out {
		wg.Go(func() { out[g], errs[g] = pol.Allocate(context.Background(), p) })
	}
	wg.Wait()
	for _, err := range errs {
		require.NoError(t, err, "%T", pol)
	}
}

// Rounds is not safe for concurrent use, but distinct Rounds over one
// shared policy and problem are.
func TestRoundsShareAPolicy(t *testing.T) {
	p, _ := gavelProblem(t, 4, 16)
	pol := &MaxMinFairness{}
	var wg sync.WaitGroup
	rounds := make([][]*Round, goroutines)
	errs := make([]error, goroutines)
	for g := range goroutines {
		wg.Go(func() {
			r := &Rounds{Policy: pol, Mechanism: Mechanism{Seed: 9}}
			for i := range 5 {
				rd, err := r.Next(context.Background(), p, float64(i)*360)
				if err != nil {
					errs[g] = err
					return
				}
				rounds[g] = append(rounds[g], rd)
			}
		})
	}
	wg.Wait()
	for g := range goroutines {
		require.NoError(t, errs[g])
		for i, rd := range rounds[g] {
			assert.Equal(t, rounds[0][i].Assignments, rd.Assignments, "goroutine %d round %d", g, i)
		}
	}
}
