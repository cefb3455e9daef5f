package flavor_test

import (
	"context"
	"testing"

	"github.com/gpusched/gpusched/allocation"
	"github.com/gpusched/gpusched/flavor"
	"github.com/gpusched/gpusched/topology"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var v100Only = []topology.GPUType{"v100"}

// evenPolicy shares each type's capacity evenly over the GPUs of the jobs
// that can run there (at most all of a job's time): a policy cheap enough
// for problems of thousands of jobs, whose shares are all alike, so that
// the tests below see the selection and the starts, not a policy's
// preferences.
type evenPolicy struct{}

func (evenPolicy) Allocate(_ context.Context, p *allocation.Problem) (*allocation.Allocation, error) {
	a := &allocation.Allocation{Types: p.Types, X: make([][]float64, len(p.Jobs))}
	for k := range p.Types {
		gpus := 0
		for _, j := range p.Jobs {
			if j.Throughput[k] > 0 {
				gpus += j.ScaleFactor
			}
		}
		for m, j := range p.Jobs {
			if a.X[m] == nil {
				a.X[m] = make([]float64, len(p.Types))
			}
			if j.Throughput[k] > 0 {
				a.X[m][k] = min(1, float64(p.Capacity[k])/float64(gpus))
			}
		}
	}
	for _, j := range p.Jobs {
		a.JobIDs = append(a.JobIDs, j.ID)
	}
	return a, nil
}

// v100Queue is a ClusterQueue with nominal V100s.
func v100Queue(name, cohort string, weight float64, nominal int) flavor.Queue {
	return flavor.Queue{Name: name, Cohort: cohort, Weight: weight, Flavors: []flavor.Flavor{fl("v100", 0, nominal, none, none)}}
}

// pendingIn returns n pending 1-GPU workloads of a queue, IDs from id,
// arriving a second apart from arrival.
func pendingIn(id, queue, n int, arrival float64) []flavor.Workload {
	var out []flavor.Workload
	for i := range n {
		out = append(out, flavor.Workload{ID: id + i, Queue: queue, GPUs: 1, Rates: []float64{1}, Arrival: arrival + float64(i), Flavor: -1})
	}
	return out
}

// started counts the starts by queue.
func started(pending []flavor.Workload, res *flavor.Result) map[int]int {
	n := map[int]int{}
	for i, d := range res.Decisions {
		if d.Why == flavor.Start {
			n[pending[i].Queue]++
		}
	}
	return n
}

// The attack on the global cut: queue a has 2,048 older pending
// workloads (and 8 V100s, all its own), queue b one new workload and an
// idle V100. With one cut of 2,048 places over all queues by age, b's
// workload waited Outside for as long as a's backlog lasted, its quota
// idle; with places per queue it starts at once.
func TestSteerBacklogKeepsNoQueueOut(t *testing.T) {
	q, err := flavor.NewQuotas([]flavor.Queue{v100Queue("a", "", 0, 8), v100Queue("b", "", 0, 1)}, 1)
	require.NoError(t, err)
	pending := append(pendingIn(0, 0, 2048, 0), pendingIn(2048, 1, 1, 10_000)...)
	res, err := (&flavor.Steerer{Types: v100Only, Policy: evenPolicy{}}).Steer(context.Background(), 20_000, q, nil, pending)
	require.NoError(t, err)
	assert.Equal(t, flavor.Start, res.Decisions[2048].Why, "b's workload starts on its own idle V100")
	assert.Equal(t, map[int]int{0: 8, 1: 1}, started(pending, res))
	assert.Equal(t, []int{2047, 1}, res.Places, "b's place is its own; a keeps the rest")
	assert.Equal(t, []int{2048, 1}, res.Queued)
	assert.Equal(t, 2048, res.Considered)
	last := res.Decisions[2047]
	assert.Equal(t, flavor.Outside, last.Why, "a's youngest waits, behind its own queue only")
	assert.Equal(t, 2048, last.Rank)
}

// Running workloads beyond MaxJobs never keep a pending one out: with 10
// running and MaxJobs 8, the old cut left no place for pending workloads
// (8 - 10 < 0) and nothing started; now the running ones are aggregated
// (one problem job per queue and type) and the pending ones start where
// their quota is idle.
func TestSteerRunningBeyondMaxJobs(t *testing.T) {
	q, err := flavor.NewQuotas([]flavor.Queue{v100Queue("a", "", 0, 12), v100Queue("b", "", 0, 2)}, 1)
	require.NoError(t, err)
	var running []flavor.Workload
	for i := range 10 {
		running = append(running, flavor.Workload{ID: i, Queue: 0, GPUs: 1, Rates: []float64{1}, Flavor: 0, Arrival: float64(i)})
		require.NoError(t, q.Add(0, 0, 1))
	}
	pending := append(pendingIn(10, 0, 1, 100), pendingIn(11, 1, 1, 100)...)
	for _, pol := range []allocation.Policy{nil, evenPolicy{}} {
		res, err := (&flavor.Steerer{Types: v100Only, Policy: pol, MaxJobs: 8}).Steer(context.Background(), 200, q, running, pending)
		require.NoError(t, err)
		assert.Equal(t, flavor.Start, res.Decisions[0].Why, "a's pending workload on a's idle V100s (%T)", pol)
		assert.Equal(t, flavor.Start, res.Decisions[1].Why, "b's on b's (%T)", pol)
		assert.Equal(t, 3, res.Considered, "one aggregate of a's 10 running, and the two pending")
	}
}

// The places are shared by fair-sharing weight, water filled: weights 3
// and 1 share 16 places 12 and 4 (each queue first gets one; D'Hondt's
// rule then gives a's 12th and b's 4th place at the same cost, 4); a
// queue that needs fewer leaves the rest to the others.
func TestSteerPlacesByWeight(t *testing.T) {
	q, err := flavor.NewQuotas([]flavor.Queue{v100Queue("a", "", 3, 4), v100Queue("b", "", 1, 4)}, 1)
	require.NoError(t, err)
	pending := append(pendingIn(0, 0, 40, 100), pendingIn(40, 1, 40, 0)...)
	s := flavor.Steerer{Types: v100Only, Policy: evenPolicy{}, MaxJobs: 16}
	res, err := s.Steer(context.Background(), 500, q, nil, pending)
	require.NoError(t, err)
	assert.Equal(t, []int{12, 4}, res.Places)
	assert.Equal(t, map[int]int{0: 4, 1: 4}, started(pending, res), "each its own 4 V100s")
	assert.Equal(t, flavor.Outside, res.Decisions[12].Why)
	assert.Equal(t, 13, res.Decisions[12].Rank, "a's 13th waits behind its own 12")
	assert.Equal(t, flavor.Outside, res.Decisions[44].Why)
	assert.Equal(t, 5, res.Decisions[44].Rank)

	pending = append(pendingIn(0, 0, 40, 100), pendingIn(40, 1, 3, 0)...)
	res, err = s.Steer(context.Background(), 500, q, nil, pending)
	require.NoError(t, err)
	assert.Equal(t, []int{13, 3}, res.Places, "b needs 3: a gets the rest")

	// Within a queue, priority first: a's youngest, of priority 5, is in.
	pending = append(pendingIn(0, 0, 40, 100), pendingIn(40, 1, 40, 0)...)
	pending[39].Priority = 5
	res, err = s.Steer(context.Background(), 500, q, nil, pending)
	require.NoError(t, err)
	assert.NotEqual(t, flavor.Outside, res.Decisions[39].Why)
	assert.Equal(t, flavor.Outside, res.Decisions[11].Why, "a's 12th oldest makes room for it")
	assert.Equal(t, 13, res.Decisions[11].Rank)
}

// More queues than places: each place goes to one queue, oldest first,
// so a queue left out this time is among the oldest next time, once the
// workloads before it start.
func TestSteerPlacesFewerThanQueues(t *testing.T) {
	var queues []flavor.Queue
	var pending []flavor.Workload
	for e := range 6 {
		queues = append(queues, v100Queue(string(rune('a'+e)), "", 0, 1))
		pending = append(pending, pendingIn(e, e, 1, float64(10-e))...)
	}
	q, err := flavor.NewQuotas(queues, 1)
	require.NoError(t, err)
	res, err := (&flavor.Steerer{Types: v100Only, Policy: evenPolicy{}, MaxJobs: 4}).Steer(context.Background(), 500, q, nil, pending)
	require.NoError(t, err)
	assert.Equal(t, []int{0, 0, 1, 1, 1, 1}, res.Places, "the four oldest queues")
	assert.Equal(t, flavor.Outside, res.Decisions[0].Why)
	assert.Equal(t, 1, res.Decisions[0].Rank, "first in its own queue")
}

// The fairness numbers in a cohort: queue a has 32 older pending
// workloads, queue b 4 newer ones, 8 V100s between them (4 nominal each).
// Per-job max-min fairness gives every workload 8/36 of a GPU: a's
// workloads hold 7.1 GPUs of the policy's split, b's 0.9, and a starts 7
// (the global order by share and age, before, started a's 8 and none of
// b's). Per-queue water filling with the nominal quotas as guarantees
// (allocation.QuotaFairness, gpusched-kueue's quota-water-filling) gives
// each queue 4. Weights share only what lies beyond the guarantees: with
// nominal 0 each and the 8 V100s lent by a third queue, weights 3 and 1
// give a 6 and b 2; b's weight 3 would give it 6, but it has 4 workloads,
// and a gets the rest.
func TestSteerQueueShares(t *testing.T) {
	steer := func(pol allocation.Policy, queues ...flavor.Queue) map[int]int {
		t.Helper()
		q, err := flavor.NewQuotas(queues, 1)
		require.NoError(t, err)
		pending := append(pendingIn(0, 0, 32, 0), pendingIn(32, 1, 4, 100)...)
		res, err := (&flavor.Steerer{Types: v100Only, Policy: pol}).Steer(context.Background(), 200, q, nil, pending)
		require.NoError(t, err)
		return started(pending, res)
	}
	qwf := &allocation.QuotaFairness{WaterFilling: true, Hierarchical: true}
	nominal := []flavor.Queue{v100Queue("a", "co", 0, 4), v100Queue("b", "co", 0, 4)}
	assert.Equal(t, map[int]int{0: 7, 1: 1}, steer(&allocation.MaxMinFairness{}, nominal...), "per job: a's 32 outweigh b's 4")
	assert.Equal(t, map[int]int{0: 4, 1: 4}, steer(qwf, nominal...), "per queue: half each")
	nominal[0].Weight = 3
	assert.Equal(t, map[int]int{0: 4, 1: 4}, steer(qwf, nominal...), "b's nominal 4 is guaranteed whatever a's weight")

	lent := func(wa, wb float64) []flavor.Queue {
		return []flavor.Queue{v100Queue("a", "co", wa, 0), v100Queue("b", "co", wb, 0), v100Queue("pool", "co", 0, 8)}
	}
	assert.Equal(t, map[int]int{0: 4, 1: 4}, steer(qwf, lent(1, 1)...))
	assert.Equal(t, map[int]int{0: 6, 1: 2}, steer(qwf, lent(3, 1)...), "weights 3:1")
	assert.Equal(t, map[int]int{0: 4, 1: 4}, steer(qwf, lent(1, 3)...), "b's 6 capped at its 4 workloads")
}
