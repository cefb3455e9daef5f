package elastic

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// randomLoan places jobs on ns servers of 8 GPUs: each job has base
// workers on 1 to 3 servers, and elastic ones flexible workers on others.
func randomLoan(rng *rand.Rand, ns int) [][]Worker {
	servers := make([][]Worker, ns)
	used := make([]int, ns)
	for j := 0; j < 3*ns; j++ {
		spread := 1 + rng.IntN(3)
		for _, s := range rng.Perm(ns)[:min(spread, ns)] {
			g := 1 + rng.IntN(4)
			if used[s]+g > 8 {
				continue
			}
			used[s] += g
			servers[s] = append(servers[s], Worker{Job: j, GPUs: g})
		}
		if rng.IntN(2) == 0 {
			s := rng.IntN(ns)
			if used[s] < 8 {
				used[s]++
				servers[s] = append(servers[s], Worker{Job: j, GPUs: 1, Flexible: true})
			}
		}
	}
	return servers
}

// checkReclaim: n distinct servers, none holding base workers of a job
// not preempted.
func checkReclaim(t *testing.T, servers [][]Worker, n int, r *ReclaimResult) {
	t.Helper()
	require.Len(t, r.Servers, n)
	for _, s := range r.Servers {
		for _, w := range servers[s] {
			if !w.Flexible {
				assert.True(t, slices.Contains(r.Preempted, w.Job), "server %d keeps job %d", s, w.Job)
			}
		}
	}
}

// Below 10 servers the heuristic matches the exhaustive oracle's
// preemption count on most seeded instances (Lyra reports the same count
// as exhaustive search below 60 servers on its traces); it never beats it.
func TestReclaimAgainstOracle(t *testing.T) {
	match, total, extra, _ := compareOracle(t, rand.New(rand.NewPCG(11, 12)), 300, 2, 9)
	t.Logf("heuristic = oracle on %d of %d instances below 10 servers; %d extra preemptions in all", match, total, extra)
	assert.GreaterOrEqual(t, float64(match)/float64(total), 0.9)
}

// compareOracle runs the heuristic and the oracle on seeded instances of
// lo to hi servers: how often they agree, the heuristic's extra
// preemptions, and the oracle's total. The heuristic must free the
// servers it names and never beat the oracle.
func compareOracle(t *testing.T, rng *rand.Rand, trials, lo, hi int) (match, total, extra, oracle int) {
	t.Helper()
	for trial := 0; trial < trials; trial++ {
		ns := lo + rng.IntN(hi-lo+1)
		servers := randomLoan(rng, ns)
		n := 1 + rng.IntN(ns)
		r, err := Reclaim(servers, n)
		require.NoError(t, err)
		checkReclaim(t, servers, n, r)
		best, err := ReclaimOracle(servers, n)
		require.NoError(t, err)
		require.GreaterOrEqual(t, len(r.Preempted), best)
		total++
		if len(r.Preempted) == best {
			match++
		}
		extra += len(r.Preempted) - best
		oracle += best
	}
	return match, total, extra, oracle
}

// Flexible-only servers go first: reclaiming them preempts nothing.
func TestReclaimFlexibleFirst(t *testing.T) {
	servers := [][]Worker{
		{{Job: 1, GPUs: 4}},
		{{Job: 2, GPUs: 2, Flexible: true}},
		{{Job: 1, GPUs: 4}, {Job: 3, GPUs: 4}},
		{},
	}
	r, err := Reclaim(servers, 2)
	require.NoError(t, err)
	assert.Equal(t, []int{1, 3}, r.Servers)
	assert.Empty(t, r.Preempted)
	assert.Equal(t, []int{2}, r.ScaledIn)
	// A third server: server 0 costs 1/2 (job 1 spans 2), server 2 costs
	// 1/2 + 1: preempt job 1, which frees server 0 (server 2 keeps job 3).
	r, err = Reclaim(servers, 3)
	require.NoError(t, err)
	assert.Equal(t, []int{0, 1, 3}, r.Servers)
	assert.Equal(t, []int{1}, r.Preempted)
	_, err = Reclaim(servers, 5)
	assert.ErrorIs(t, err, ErrInvalid)
}

// Lyra's scale: reclaim 100 of 500 loaned servers (Lyra reports 1-3 ms).
func BenchmarkReclaim500(b *testing.B) {
	servers := randomLoan(rand.New(rand.NewPCG(5, 6)), 500)
	for b.Loop() {
		if _, err := Reclaim(servers, 100); err != nil {
			b.Fatal(err)
		}
	}
}

// Above 10 servers (12 to 24, the oracle's reach) the issue
// asks how the heuristic does: it is never better than the oracle, and it
// matches it on most instances (the counts are logged; docs/reproduction.md
// keeps them).
func TestReclaimAbove10(t *testing.T) {
	if testing.Short() {
		t.Skip("exhaustive search over up to 2^24 server sets")
	}
	match, total, extra, preempted := compareOracle(t, rand.New(rand.NewPCG(13, 14)), 200, 12, 24)
	t.Logf("12 to 24 servers: heuristic = oracle on %d of %d instances; %d extra preemptions over the oracle's %d", match, total, extra, preempted)
	assert.GreaterOrEqual(t, float64(match)/float64(total), 0.6)
}
