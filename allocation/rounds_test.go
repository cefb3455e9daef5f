package allocation

import (
	"context"
	"math/rand/v2"
	"testing"

	"github.com/gpusched/gpusched/topology"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// checkRound: capacity never exceeded, workers distinct and in range, each
// job at most once.
func checkRound(t *testing.T, p *Problem, rd *Round) {
	t.Helper()
	usedJobs := map[int]bool{}
	usedWorkers := map[[2]int]bool{}
	for _, as := range rd.Assignments {
		for _, id := range as.JobIDs {
			require.False(t, usedJobs[id], "job %d twice in a round", id)
			usedJobs[id] = true
		}
		for _, w := range as.Workers {
			require.True(t, w >= 0 && w < p.Capacity[as.TypeIndex], "worker %d of %s", w, as.Type)
			require.False(t, usedWorkers[[2]int{as.TypeIndex, w}], "worker %d of %s twice", w, as.Type)
			usedWorkers[[2]int{as.TypeIndex, w}] = true
		}
	}
}

// Over 100 rounds on a fixed set of single-GPU jobs, each job's share of
// rounds on each type approaches its X: within 0.05 when the cluster is
// oversubscribed, with one global queue or a queue per type. When it is
// not, the mechanism is work-conserving and may give more: with the global
// queue never less than X - 0.05 on any type; with per-type queues a job
// can keep running on the type visited first and miss its share of a later
// one (Gavel's per-type queues do the same), but its total time is never
// less than its total share - 0.05.
func TestRoundsConverge(t *testing.T) {
	for _, global := range []bool{true, false} {
		rng := rand.New(rand.NewPCG(21, 22))
		for trial := range 8 {
			p := &Problem{Types: []topology.GPUType{"a", "b", "c"}, Capacity: []int{2, 3, 4}}
			jobs := 4 + trial*4 // 4 to 32 jobs on 9 GPUs
			for m := range jobs {
				j := Job{ID: m, ScaleFactor: 1}
				for range 3 {
					j.Throughput = append(j.Throughput, 0.5+rng.Float64()*4)
				}
				p.Jobs = append(p.Jobs, j)
			}
			r := &Rounds{Policy: &MaxMinFairness{}, Mechanism: Mechanism{GlobalQueue: global}}
			counts := make([][]float64, len(p.Jobs))
			for m := range counts {
				counts[m] = make([]float64, 3)
			}
			var a *Allocation
			const n = 100
			for i := range n {
				rd, err := r.Next(context.Background(), p, float64(i)*360)
				require.NoError(t, err)
				require.Equal(t, i == 0, rd.Reset, "round %d", i)
				checkRound(t, p, rd)
				a = rd.Allocation
				for _, as := range rd.Assignments {
					counts[as.JobIDs[0]][as.TypeIndex]++
				}
			}
			oversubscribed := jobs > 9
			for m := range counts {
				total, want := 0.0, 0.0
				for k := range counts[m] {
					share, x := counts[m][k]/n, a.X[m][k]
					total, want = total+share, want+x
					switch {
					case oversubscribed:
						assert.InDelta(t, x, share, 0.05, "global %v trial %d job %d type %d", global, trial, m, k)
					case global:
						assert.GreaterOrEqual(t, share, x-0.05, "trial %d job %d type %d", trial, m, k)
					}
				}
				assert.GreaterOrEqual(t, total, want-0.05, "global %v trial %d job %d", global, trial, m)
			}
		}
	}
}

// With mixed scale factors the LP's capacity is aggregate, and some
// allocations cannot be packed into whole rounds (a one-GPU job holding one
// of two GPUs all the time leaves no room for a two-GPU job there). The
// mechanism still never exceeds capacity and shares the shortfall.
func TestRoundsMixedScaleFactors(t *testing.T) {
	rng := rand.New(rand.NewPCG(23, 24))
	p := &Problem{Types: []topology.GPUType{"a", "b"}, Capacity: []int{4, 8}}
	for m := range 20 {
		j := Job{ID: m, ScaleFactor: []int{1, 1, 2, 4}[rng.IntN(4)]}
		for range 2 {
			j.Throughput = append(j.Throughput, 0.5+rng.Float64()*4)
		}
		p.Jobs = append(p.Jobs, j)
	}
	r := &Rounds{Policy: &MaxMinFairness{}, GPUsPerServer: []int{4, 4}}
	got := make([]float64, len(p.Jobs))
	var a *Allocation
	for i := range 100 {
		rd, err := r.Next(context.Background(), p, float64(i)*360)
		require.NoError(t, err)
		checkRound(t, p, rd)
		a = rd.Allocation
		for _, as := range rd.Assignments {
			got[as.JobIDs[0]] += 0.01
		}
	}
	for m := range got {
		want := a.X[m][0] + a.X[m][1]
		assert.GreaterOrEqual(t, got[m], want-0.15, "job %d (sf %d)", m, p.Jobs[m].ScaleFactor)
	}
}

func TestRoundsLeaseAndResets(t *testing.T) {
	p := &Problem{Types: []topology.GPUType{"a"}, Capacity: []int{4}, Jobs: []Job{
		{ID: 1, ScaleFactor: 2, Throughput: []float64{1}},
		{ID: 2, ScaleFactor: 2, Throughput: []float64{1}},
	}}
	r := &Rounds{Policy: &MaxMinFairness{}, GPUsPerServer: []int{2}}
	rd, err := r.Next(context.Background(), p, 0)
	require.NoError(t, err)
	require.Len(t, rd.Assignments, 2)
	for _, as := range rd.Assignments {
		assert.False(t, as.Extended)
		// Each job on one server of two GPUs.
		assert.Equal(t, as.Workers[0]/2, as.Workers[1]/2)
	}
	rd2, err := r.Next(context.Background(), p, 360)
	require.NoError(t, err)
	before := map[int][]int{}
	for _, as := range rd.Assignments {
		before[as.JobIDs[0]] = as.Workers
	}
	for _, as := range rd2.Assignments {
		assert.True(t, as.Extended)
		assert.Equal(t, before[as.JobIDs[0]], as.Workers)
	}
	// A new job: no reset before 1920 s since the last one.
	p.Jobs = append(p.Jobs, Job{ID: 3, ScaleFactor: 1, Throughput: []float64{1}})
	rd3, err := r.Next(context.Background(), p, 720)
	require.NoError(t, err)
	assert.False(t, rd3.Reset)
	for _, as := range rd3.Assignments {
		assert.NotEqual(t, 3, as.JobIDs[0], "job 3 has no allocation yet")
	}
	rd4, err := r.Next(context.Background(), p, 1920)
	require.NoError(t, err)
	assert.True(t, rd4.Reset)
	assert.Len(t, rd4.Allocation.X, 3)
}

func TestRoundsDeterministic(t *testing.T) {
	p, _ := gavelProblem(t, 3, 40)
	run := func() []*Round {
		r := &Rounds{Policy: &MaxMinFairness{SpaceSharing: true}, Mechanism: Mechanism{ShuffleTypes: true, Seed: 9}}
		var out []*Round
		for i := range 20 {
			rd, err := r.Next(context.Background(), p, float64(i)*360)
			require.NoError(t, err)
			checkRound(t, p, rd)
			out = append(out, rd)
		}
		return out
	}
	a, b := run(), run()
	for i := range a {
		assert.Equal(t, a[i].Assignments, b[i].Assignments, "round %d", i)
	}
	// Space sharing shows up as pairs in rounds.
	pairs := 0
	for _, rd := range a {
		for _, as := range rd.Assignments {
			if len(as.JobIDs) == 2 {
				pairs++
			}
		}
	}
	assert.Positive(t, pairs)
}
