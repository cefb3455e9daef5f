package gang

import (
	"math/rand/v2"
	"slices"

	"github.com/stretchr/testify/require"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
)

// By hand, samples 1000, 2000 and 5000 GPU-s, quantum 3250: at 0 two of
// three finish within the quantum, E[min(S, D)] = (1000 + 2000 + 3250)/3,
// so G = (2/3)/2083.33; past 3250 only 5000 is left, finishing within the
// quantum for sure after 1750 more: G = 1/1750.
func TestGittinsIndexByHand(t *testing.T) {
	g, err := NewGittins2D([]float64{5000, 1000, 2000}, 3250)
	require.NoError(t, err)
	assert.InDelta(t, (2.0/3)/((1000.0+2000+3250)/3), g.Index(0), 1e-12)
	assert.InDelta(t, 1.0/1750, g.Index(3250), 1e-12)
	assert.True(t, math.IsInf(g.Index(6000), 1))
	// Keys: a job past the first quantum ranks before a fresh one here.
	fresh := JobView{ScaleFactor: 1}
	old := JobView{ScaleFactor: 1, Attained: 4000}
	assert.Less(t, g.Key(old, 0), g.Key(fresh, 0))
}

func TestLAS2DQueues(t *testing.T) {
	l := LAS2D{}
	assert.Equal(t, 0, queueOf(nil, 0))
	assert.Equal(t, 1, queueOf(nil, 4000))
	assert.Equal(t, 3, queueOf(nil, 20000))
	a := JobView{Arrival: 5, Attained: 4000, ScaleFactor: 2, Type: 0}
	b := JobView{Arrival: 9, Attained: 100, ScaleFactor: 1, Type: -1}
	assert.Less(t, l.Key(b, 0), l.Key(a, 0), "the job with less service first")
	// Starvation guard: waiting at least 10 x its executed time (4000/2 s).
	waiting := JobView{Arrival: 5, Attained: 4000, ScaleFactor: 2, Type: -1, Queued: 100}
	guard := LAS2D{Starvation: 10}
	assert.Equal(t, float64(1)*1e12+5, guard.Key(waiting, 100+19999))
	assert.Equal(t, float64(5), guard.Key(waiting, 100+20000))
}

func TestPriorityDecide(t *testing.T) {
	// One type of 4 GPUs: a running 4-GPU job with much service, and a
	// fresh 2-GPU job: LAS preempts the old one; FIFO does not.
	running := []JobView{{ID: 1, Arrival: 0, ScaleFactor: 4, Throughput: []float64{1}, Attained: 50000, Type: 0}}
	waiting := []JobView{{ID: 2, Arrival: 10, ScaleFactor: 2, Throughput: []float64{1}, Type: -1, Steps: 10, Remaining: 10}}
	d := decided(t)(Priority{Order: LAS2D{}, Backfill: NoBackfill}.Decide(100, []int{0}, waiting, running))
	assert.Equal(t, Decision{Start: []Start{{JobID: 2, Type: 0}}, Preempt: []int{1}}, d)
	d = decided(t)(Priority{Order: ByArrival{}, Backfill: NoBackfill}.Decide(100, []int{0}, waiting, running))
	assert.Empty(t, d.Start)
	assert.Empty(t, d.Preempt)
	// Strict order blocks behind a job that does not fit; backfill passes.
	waiting = []JobView{
		{ID: 3, Arrival: 1, ScaleFactor: 8, Throughput: []float64{1}, Type: -1},
		{ID: 4, Arrival: 2, ScaleFactor: 1, Throughput: []float64{1}, Type: -1},
	}
	d = decided(t)(Priority{Order: ByArrival{}, NoPreemption: true, Backfill: NoBackfill}.Decide(0, []int{4}, waiting, nil))
	assert.Empty(t, d.Start)
	d = decided(t)(Priority{Order: ByArrival{}, NoPreemption: true, Backfill: Greedy}.Decide(0, []int{4}, waiting, nil))
	assert.Equal(t, []Start{{JobID: 4, Type: 0}}, d.Start)
}

// EASY backfilling never delays the reservation of the first blocked job:
// on random queues, the GPUs of the reserved type free at the reserved
// time, after the decision's starts, still hold the blocked job.
func TestEASYNeverDelaysReservation(t *testing.T) {
	rng := rand.New(rand.NewPCG(41, 42))
	checked := 0
	for range 2000 {
		types := 1 + rng.IntN(2)
		capacity := make([]int, types)
		for k := range capacity {
			capacity[k] = 4 << rng.IntN(2)
		}
		free := slices.Clone(capacity)
		var running, waiting []JobView
		for i := range 1 + rng.IntN(6) {
			k := rng.IntN(types)
			sf := 1 << rng.IntN(3)
			if free[k] < sf {
				continue
			}
			free[k] -= sf
			running = append(running, JobView{ID: 100 + i, ScaleFactor: sf, Type: k, Throughput: rates(rng, types), Remaining: 10 + rng.Float64()*1000})
		}
		for i := range 1 + rng.IntN(8) {
			waiting = append(waiting, JobView{ID: i, Arrival: float64(i), ScaleFactor: 1 << rng.IntN(3), Type: -1, Throughput: rates(rng, types), Remaining: 10 + rng.Float64()*1000})
		}
		p := Priority{Order: ByArrival{}, NoPreemption: true, Backfill: EASY}
		d := decided(t)(p.Decide(0, slices.Clone(free), waiting, running))
		started := map[int]int{}
		for _, s := range d.Start {
			started[s.JobID] = s.Type
		}
		// The first waiting job (in order) not started is the blocked one.
		var head *JobView
		for i := range waiting {
			if _, ok := started[waiting[i].ID]; !ok {
				head = &waiting[i]
				break
			}
		}
		if head == nil {
			continue
		}
		// Its reservation, computed before any backfill.
		before := slices.Clone(free)
		for _, w := range waiting {
			if w.ID == head.ID {
				break
			}
			before[started[w.ID]] -= w.ScaleFactor
		}
		k, at, _ := reserve(*head, before, running, nil, false, 0)
		if k < 0 {
			continue
		}
		avail := free[k]
		for _, r := range running {
			if r.Type == k && estimate(r, k) <= at {
				avail += r.ScaleFactor
			}
		}
		for _, w := range waiting {
			if s, ok := started[w.ID]; ok && s == k {
				avail -= w.ScaleFactor
				if estimate(w, k) <= at {
					avail += w.ScaleFactor
				}
			}
		}
		require.GreaterOrEqual(t, avail, head.ScaleFactor, "reservation delayed: %+v", d)
		checked++
	}
	assert.Greater(t, checked, 500)
}

func rates(rng *rand.Rand, types int) []float64 {
	r := make([]float64, types)
	for k := range r {
		r[k] = 0.5 + rng.Float64()
	}
	return r
}
