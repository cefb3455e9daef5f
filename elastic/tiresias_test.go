package elastic

import (
	"math"
	"testing"

	"github.com/gpusched/gpusched/gang"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// rigid is a job of g one-GPU workers at one unit of work per second.
func rigid(id int, arrival float64, g int) *Job {
	return &Job{ID: id, Arrival: arrival, MinWorkers: g, MaxWorkers: g, GPUsPerWorker: 1, Work: 1000, Curve: Linear{PerWorker: 1}}
}

// 2D-LAS by hand on 4 GPUs with one threshold of 100 GPU-seconds, now =
// 300 s: A (2 GPUs, running, 200 GPU-s attained: queue 1), B (4 GPUs,
// waiting since 250 s, nothing attained: queue 0), C (1 GPU, waiting,
// queue 0, arrived after B). B ranks first and takes all 4 GPUs, so A is
// preempted and C, which does not fit, waits. With B's 4 GPUs taken by a
// 5th GPU's worth of demand elsewhere (B needs 5), B is skipped, A keeps
// its 2 GPUs and C backfills one of the 2 left.
func TestTiresiasByHand(t *testing.T) {
	las := Tiresias{Order: gang.LAS2D{Thresholds: []float64{100}}}
	jobs := []State{
		{Job: rigid(1, 0, 2), Remaining: 500, Workers: 2, Age: 300, Attained: 200},
		{Job: rigid(2, 250, 4), Remaining: 1000, Age: 50, Waiting: 50},
		{Job: rigid(3, 260, 1), Remaining: 1000, Age: 40, Waiting: 40},
	}
	w, err := las.Allocate(jobs, 4)
	require.NoError(t, err)
	assert.Equal(t, []int{0, 4, 0}, w)
	jobs[1].Job = rigid(2, 250, 5)
	w, err = las.Allocate(jobs, 4)
	require.NoError(t, err)
	assert.Equal(t, []int{2, 0, 1}, w)
	// Without the threshold (one queue: FIFO by arrival) A keeps its GPUs.
	w, err = Tiresias{Order: gang.LAS2D{Thresholds: []float64{1e9}}}.Allocate(jobs, 4)
	require.NoError(t, err)
	assert.Equal(t, []int{2, 0, 1}, w)
}

// Tiresias's starvation guard: a job demoted to queue 1 that has waited
// at least Starvation times its executed time (attained / GPUs) goes back
// to queue 0, ahead of a later queue-0 job.
func TestTiresiasStarvation(t *testing.T) {
	jobs := []State{
		// Executed 100 s on 2 GPUs (200 GPU-s: queue 1), waited 150 s.
		{Job: rigid(1, 0, 2), Remaining: 500, Age: 400, Attained: 200, Waiting: 150, Restarts: 1},
		{Job: rigid(2, 390, 2), Remaining: 500, Age: 10, Waiting: 10},
	}
	w, err := Tiresias{Order: gang.LAS2D{Thresholds: []float64{100}}}.Allocate(jobs, 2)
	require.NoError(t, err)
	assert.Equal(t, []int{0, 2}, w, "no guard: the fresh job goes first")
	w, err = Tiresias{Order: gang.LAS2D{Thresholds: []float64{100}, Starvation: 1.5}}.Allocate(jobs, 2)
	require.NoError(t, err)
	assert.Equal(t, []int{2, 0}, w, "150 s >= 1.5 x 100 s: back to queue 0, the earlier arrival")
}

// 2D-Gittins: with service times 100 or 10,000 GPU-s (half each) and
// quantum 100, a job that attained nothing has index P(S <= 100) / E[min(S,
// 100)] = 0.5 / 100; one that attained 100 (so S = 10,000) has 0 / 100 = 0:
// the fresh job goes first even though it arrived later.
func TestTiresiasGittins(t *testing.T) {
	g, err := gang.NewGittins2D([]float64{100, 10000}, 100)
	require.NoError(t, err)
	jobs := []State{
		{Job: rigid(1, 0, 1), Remaining: 500, Workers: 1, Age: 200, Attained: 150},
		{Job: rigid(2, 100, 1), Remaining: 500, Age: 100, Waiting: 100},
	}
	w, err := Tiresias{Order: g}.Allocate(jobs, 1)
	require.NoError(t, err)
	assert.Equal(t, []int{0, 1}, w)
}

func TestTiresiasErrors(t *testing.T) {
	jobs := []State{{Job: rigid(1, 0, 1), Remaining: 5}}
	_, err := Tiresias{}.Allocate(jobs, 1)
	assert.ErrorIs(t, err, ErrInvalid)
	for _, s := range []State{
		{Job: rigid(1, 0, 1), Remaining: 5, Attained: -1},
		{Job: rigid(1, 0, 1), Remaining: 5, Waiting: math.NaN()},
	} {
		_, err := Tiresias{Order: gang.LAS2D{}}.Allocate([]State{s}, 1)
		assert.ErrorIs(t, err, ErrInvalid)
	}
	_, err = Tiresias{Order: gang.LAS2D{Thresholds: []float64{5, 1}}}.Allocate(jobs, 1)
	assert.ErrorIs(t, err, gang.ErrInvalid)
	_, err = Tiresias{Order: gang.LAS2D{}}.Allocate([]State{{Job: rigid(1, 0, 2), Remaining: 5, Workers: 2}}, 1)
	assert.ErrorIs(t, err, ErrInvalid)
	w, err := Tiresias{Order: gang.LAS2D{}}.Allocate(nil, 4)
	require.NoError(t, err)
	assert.Empty(t, w)
}
