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

	// Random FIFO is deterministic for a seed and uses only types with room.
	q := &Problem{Types: []topology.GPUType{"a", "b", "c"}, Capacity: []int{4, 4, 4}}
	for i := range 10 {
		q.Jobs = append(q.Jobs, Job{ID: i, ScaleFactor: 1, Throughput: []float64{1, 1, 1}, Arrival: float64(i)})
	}
	x1 := allocate(t, &FIFO{Seed: 5, Random: true}, q).X
	x2 := allocate(t, &FIFO{Seed: 5, Random: true}, q).X
	assert.Equal(t, x1, x2)
	placed := 0
	for _, row := range x1 {
		for _, v := range row {
			placed += int(v)
		}
	}
	assert.Equal(t, 10, placed)
}

// The default FIFO fills the cluster's fastest type first, the same order
// for every job (the sum over jobs of rate over best rate: "fast" 3.5,
// "mid" 2.5, "slow" 1), even for job 2, which is
// fastest on "mid": it is not Perf. Job 0 (2 GPUs) takes both fast GPUs;
// job 1 finds fast full and takes mid; job 2 the other mid GPU; job 3
// slow. Random spreads the same jobs over the types.
func TestFIFOFastestTypeFirst(t *testing.T) {
	p := &Problem{Types: []topology.GPUType{"slow", "mid", "fast"}, Capacity: []int{2, 2, 2}, Jobs: []Job{
		{ID: 0, ScaleFactor: 2, Throughput: []float64{1, 2, 4}, Arrival: 0},
		{ID: 1, ScaleFactor: 1, Throughput: []float64{1, 2, 4}, Arrival: 1},
		{ID: 2, ScaleFactor: 1, Throughput: []float64{1, 4, 2}, Arrival: 2},
		{ID: 3, ScaleFactor: 1, Throughput: []float64{1, 2, 4}, Arrival: 3},
	}}
	a := allocate(t, &FIFO{}, p)
	assertX(t, [][]float64{{0, 0, 1}, {0, 1, 0}, {0, 1, 0}, {1, 0, 0}}, a.X)
	perf := allocate(t, &FIFO{Perf: true}, p)
	assertX(t, [][]float64{{0, 0, 1}, {0, 1, 0}, {0, 1, 0}, {1, 0, 0}}, perf.X)
	// A job that fits nowhere does not block the ones behind it.
	p.Jobs = append(p.Jobs, Job{ID: 4, ScaleFactor: 2, Throughput: []float64{1, 2, 4}, Arrival: 4}, Job{ID: 5, ScaleFactor: 1, Throughput: []float64{1, 2, 4}, Arrival: 5})
	a = allocate(t, &FIFO{}, p)
	assertX(t, [][]float64{{0, 0, 1}, {0, 1, 0}, {0, 1, 0}, {1, 0, 0}, {0, 0, 0}, {1, 0, 0}}, a.X)
	// Random with a seed draws among the types with room.
	q := &Problem{Types: p.Types, Capacity: []int{8, 8, 8}}
	for i := range 12 {
		q.Jobs = append(q.Jobs, Job{ID: i, ScaleFactor: 1, Throughput: []float64{1, 2, 4}, Arrival: float64(i)})
	}
	used := func(x [][]float64) (n [3]int) {
		for _, row := range x {
			for k, v := range row {
				n[k] += int(v)
			}
		}
		return n
	}
	assert.Equal(t, [3]int{0, 4, 8}, used(allocate(t, &FIFO{}, q).X))
	r := used(allocate(t, &FIFO{Random: true, Seed: 1}, q).X)
	assert.Positive(t, r[0]+r[1], "random FIFO puts some jobs on slower types: %v", r)
}
