package gang

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// By hand, 4 GPUs, A runs on 2 until 100. B (3 GPUs, 100 s) is reserved
// at 100, with 1 GPU to spare; C (4 GPUs, 100 s) at 200. D (1 GPU, 250 s)
// fits the spare GPU, so EASY starts it, but it would still run at 200
// when C needs all four: conservative backfilling reserves it at 300
// instead. E (2 GPUs, 50 s) then fits the 2 free GPUs until 100 and starts.
func TestConservativeByHand(t *testing.T) {
	one := []float64{1}
	running := []JobView{{ID: 1, ScaleFactor: 2, Type: 0, Throughput: one, Remaining: 100}}
	waiting := []JobView{
		{ID: 2, Arrival: 1, ScaleFactor: 3, Type: -1, Throughput: one, Remaining: 100},
		{ID: 3, Arrival: 2, ScaleFactor: 4, Type: -1, Throughput: one, Remaining: 100},
		{ID: 4, Arrival: 3, ScaleFactor: 1, Type: -1, Throughput: one, Remaining: 250},
		{ID: 5, Arrival: 4, ScaleFactor: 2, Type: -1, Throughput: one, Remaining: 50},
	}
	p := Priority{Order: ByArrival{}, NoPreemption: true, Backfill: Conservative}
	d, plan := p.conservative(0, []int{2}, waiting, running)
	assert.Equal(t, []Start{{JobID: 5, Type: 0}}, d.Start)
	assert.Equal(t, []reservation{{2, 0, 100}, {3, 0, 200}, {4, 0, 300}, {5, 0, 0}}, plan)
	assert.Equal(t, d, decided(t)(p.Decide(0, []int{2}, waiting, running)))
	easy := decided(t)(Priority{Order: ByArrival{}, NoPreemption: true, Backfill: EASY}.Decide(0, []int{2}, waiting, running))
	assert.Equal(t, []Start{{JobID: 4, Type: 0}}, easy.Start)
	// With a depth of 3, E is not planned and does not start.
	p.Depth = 3
	d, plan = p.conservative(0, []int{2}, waiting, running)
	assert.Empty(t, d.Start)
	assert.Len(t, plan, 3)
}

// On random queues the conservative plan never exceeds any type's GPUs at
// any time, places every job at the earliest time it fits given the
// running jobs and the jobs ahead of it (checked by brute force over the
// times GPUs free up), starts exactly the jobs planned for now, and starts
// every job strict order would.
func TestConservativePlanProperties(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	type span struct {
		from, to float64
		gpus     int
	}
	// fits says whether gpus more GPUs fit on [from, from+dur) beside the
	// spans, within capacity.
	fits := func(spans []span, capacity int, from, dur float64, gpus int) bool {
		points := []float64{from}
		for _, s := range spans {
			if s.from > from && s.from < from+dur {
				points = append(points, s.from)
			}
		}
		for _, x := range points {
			used := gpus
			for _, s := range spans {
				if s.from <= x && x < s.to {
					used += s.gpus
				}
			}
			if used > capacity {
				return false
			}
		}
		return true
	}
	reserved := 0
	for range 1500 {
		types := 1 + rng.IntN(2)
		capacity := make([]int, types)
		for k := range capacity {
			capacity[k] = 4 << rng.IntN(2)
		}
		free := slices.Clone(capacity)
		spans := make([][]span, types)
		var running, waiting []JobView
		for i := range rng.IntN(6) {
			k := rng.IntN(types)
			sf := 1 << rng.IntN(3)
			if free[k] < sf {
				continue
			}
			free[k] -= sf
			r := JobView{ID: 100 + i, ScaleFactor: sf, Type: k, Throughput: rates(rng, types), Remaining: 10 + rng.Float64()*1000}
			running = append(running, r)
			spans[k] = append(spans[k], span{0, estimate(r, k), sf})
		}
		for i := range 1 + rng.IntN(8) {
			waiting = append(waiting, JobView{ID: i, Arrival: float64(i), ScaleFactor: 1 << rng.IntN(4), Type: -1, Throughput: rates(rng, types), Remaining: 10 + rng.Float64()*1000})
		}
		p := Priority{Order: ByArrival{}, NoPreemption: true, Backfill: Conservative}
		d, plan := p.conservative(0, slices.Clone(free), waiting, running)
		at := map[int]reservation{}
		for _, r := range plan {
			at[r.JobID] = r
		}
		var starts []Start
		for _, w := range waiting {
			r, ok := at[w.ID]
			if !ok {
				for k := range capacity {
					require.Greater(t, w.ScaleFactor, capacity[k], "job %d left out though it fits type %d", w.ID, k)
				}
				continue
			}
			if r.At == 0 {
				starts = append(starts, Start{w.ID, r.Type})
			} else {
				reserved++
			}
			// No earlier start on any type, given the jobs ahead of it.
			for k := range capacity {
				dur := estimate(w, k)
				candidates := []float64{0}
				for _, s := range spans[k] {
					candidates = append(candidates, s.to)
				}
				for _, c := range candidates {
					if c < r.At && fits(spans[k], capacity[k], c, dur, w.ScaleFactor) {
						t.Fatalf("job %d planned at %v on type %d, but fits type %d at %v", w.ID, r.At, r.Type, k, c)
					}
				}
			}
			require.True(t, fits(spans[r.Type], capacity[r.Type], r.At, estimate(w, r.Type), w.ScaleFactor), "plan exceeds capacity")
			spans[r.Type] = append(spans[r.Type], span{r.At, r.At + estimate(w, r.Type), w.ScaleFactor})
		}
		require.Equal(t, starts, d.Start)
		strict := decided(t)(Priority{Order: ByArrival{}, NoPreemption: true, Backfill: NoBackfill}.Decide(0, slices.Clone(free), waiting, running))
		for _, s := range strict.Start {
			require.Contains(t, d.Start, s)
		}
	}
	assert.Greater(t, reserved, 1000)
}

// With preemption, running jobs ranked behind a job that fits are
// preempted as under strict order; kept ones hold their GPUs in the plan
// until they finish or a job ranked ahead of them is reserved their GPUs.
func TestConservativePreemptive(t *testing.T) {
	one := []float64{1}
	running := []JobView{
		{ID: 1, Arrival: 0, ScaleFactor: 2, Type: 0, Throughput: one, Remaining: 100},
		{ID: 2, Arrival: 1, ScaleFactor: 2, Type: 0, Throughput: one, Remaining: 500, Attained: 1e6},
	}
	waiting := []JobView{{ID: 3, Arrival: 2, ScaleFactor: 2, Type: -1, Throughput: one, Remaining: 50}}
	p := Priority{Order: LAS2D{}, Backfill: Conservative}
	d, plan := p.conservative(10, []int{0}, waiting, running)
	assert.Equal(t, Decision{Start: []Start{{JobID: 3, Type: 0}}, Preempt: []int{2}}, d)
	assert.Equal(t, []reservation{{3, 0, 10}}, plan)
	// A 4-GPU job 3 waits for job 1 to end at 110; job 2, ranked last,
	// keeps its GPUs until then, so a 4-GPU job 4 ranked after it is
	// reserved when job 3 ends, at 160, not when job 2 would end, at 510.
	waiting[0].ScaleFactor = 4
	waiting = append(waiting, JobView{ID: 4, Arrival: 3, ScaleFactor: 4, Type: -1, Throughput: one, Remaining: 50, Attained: 2e6})
	d, plan = p.conservative(10, []int{0}, waiting, running)
	assert.Empty(t, d.Preempt)
	assert.Empty(t, d.Start)
	assert.Equal(t, []reservation{{3, 0, 110}, {4, 0, 160}}, plan)
}
