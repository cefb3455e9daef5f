package allocation

import (
	"testing"

	"github.com/gpusched/gpusched/topology"
	"github.com/stretchr/testify/assert"
)

func TestFIFO(t *testing.T) {
	p := &Problem{Types: []topology.GPUType{"slow", "fast"}, Capacity: []int{2, 2}, Jobs: []Job{
		{ID: 3, ScaleFactor: 2, Throughput: []float64{1, 5}, Arrival: 30},
		{ID: 1, ScaleFactor: 1, Throughput: []float64{1, 3}, Arrival: 10},
		{ID: 2, ScaleFactor: 2, Throughput: []float64{1, 2}, Arrival: 20},
		{ID: 4, ScaleFactor: 1, Throughput: []float64{1, 1}, Arrival: 40},
	}}
	pol := &FIFO{Perf: true, Sticky: true}
	a := allocate(t, pol, p)
	// Job 1 (first) takes a fast GPU; job 2 needs 2 and only slow has 2 free;
	// job 3 fits nowhere; job 4 takes the last fast GPU.
	assertX(t, [][]float64{{0, 0}, {0, 1}, {1, 0}, {0, 1}}, a.X)

	// Job 1 finishes: job 3 still cannot have 2 fast GPUs while job 4 keeps
	// its GPU, so nothing moves (jobs keep their types).
	p.Jobs = append(p.Jobs[:1], p.Jobs[2:]...)
	a = allocate(t, pol, p)
	assertX(t, [][]float64{{0, 0}, {1, 0}, {0, 1}}, a.X)

	// Without Sticky the order starts afresh: job 2 (the oldest) moves to
	// the two fast GPUs, job 3 takes the slow ones and job 4 waits.
	a = allocate(t, &FIFO{Perf: true}, p)
	assertX(t, [][]float64{{1, 0}, {0, 1}, {0, 0}}, a.X)

	// Agnostic FIFO is deterministic for a seed and uses only types with room.
	q := &Problem{Types: []topology.GPUType{"a", "b", "c"}, Capacity: []int{4, 4, 4}}
	for i := range 10 {
		q.Jobs = append(q.Jobs, Job{ID: i, ScaleFactor: 1, Throughput: []float64{1, 1, 1}, Arrival: float64(i)})
	}
	x1 := allocate(t, &FIFO{Seed: 5}, q).X
	x2 := allocate(t, &FIFO{Seed: 5}, q).X
	assert.Equal(t, x1, x2)
	placed := 0
	for _, row := range x1 {
		for _, v := range row {
			placed += int(v)
		}
	}
	assert.Equal(t, 10, placed)
}
