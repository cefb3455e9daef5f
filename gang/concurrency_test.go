package gang

import (
	"math/rand/v2"
	"slices"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// FIFO and Priority (with every order and backfilling) are safe for
// concurrent use, as their docs say: 8 goroutines share one value (and one
// Gittins2D), each deciding on its own copy of the input (Decide may sort
// it and change free), and each gets the decision a single goroutine
// gets. Run under -race (CI does). OnServers is not safe and not shared.
func TestSchedulersConcurrent(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	free := []int{6, 3}
	var waiting, running []JobView
	for i := range 40 {
		j := JobView{ID: i, Arrival: float64(i), ScaleFactor: 1 << rng.IntN(3), Type: -1, Throughput: rates(rng, 2),
			Remaining: 100 + rng.Float64()*1e4, Attained: rng.Float64() * 1e4}
		j.Steps = j.Remaining
		if i < 6 {
			j.Type = i % 2
			running = append(running, j)
			continue
		}
		waiting = append(waiting, j)
	}
	g, err := NewGittins2D([]float64{1000, 2000, 5000, 9000}, 0)
	require.NoError(t, err)
	var schedulers []Scheduler
	for _, o := range []Order{ByArrival{}, ShortestJob{}, ShortestRemaining{}, LAS2D{Starvation: 10}, g} {
		for _, b := range []Backfilling{NoBackfill, Greedy, EASY, Conservative} {
			schedulers = append(schedulers, Priority{Order: o, Backfill: b}, Priority{Order: o, Backfill: b, NoPreemption: true})
		}
	}
	schedulers = append(schedulers, FIFO{}, FIFO{Strict: true})
	decideAll := func() ([]Decision, error) {
		out := make([]Decision, len(schedulers))
		for i, s := range schedulers {
			d, err := s.Decide(500, slices.Clone(free), slices.Clone(waiting), slices.Clone(running))
			if err != nil {
				return nil, err
			}
			out[i] = d
		}
		return out, nil
	}
	want, err := decideAll()
	require.NoError(t, err)
	got := make([][]Decision, 8)
	errs := make([]error, 8)
	var wg sync.WaitGroup
	for i := range got {
		wg.Go(func() { got[i], errs[i] = decideAll() })
	}
	wg.Wait()
	for i := range got {
		require.NoError(t, errs[i])
		assert.Equal(t, want, got[i], "goroutine %d", i)
	}
	started := 0
	for _, d := range want {
		started += len(d.Start)
	}
	assert.Positive(t, started)
}
