package perfmodel

import (
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The models are safe for concurrent use, as their docs say: 8 goroutines
// share one Table, Extrapolated, FittedColocation and RingModel, and each
// gets the answers a single goroutine gets. Run under -race (CI does).
func TestModelsConcurrent(t *testing.T) {
	g := gavelSimulation()
	f, err := FitColocation(g)
	require.NoError(t, err)
	ex := Extrapolated{Table: g}
	ring := RingModel{IntraBandwidth: 100, InterBandwidth: 10, ReduceSpeed: 1000, Xi1: 1, Xi2: 0.1, Alpha: 0.5}
	jobs := g.Jobs()
	placements := [][]ServerShare{{{0, 2}, {1, 2}}, {{1, 1}, {2, 3}}, {{1, 1}}}
	answer := func() []float64 {
		var out []float64
		for i, k := range jobs {
			for _, gt := range g.GPUTypes() {
				v, _ := g.Throughput(k, gt)
				w, _ := ex.Throughput(k.WithScaleFactor(16), gt)
				ta, tb, _ := f.Colocated(k, jobs[(i+7)%len(jobs)], gt)
				out = append(out, v, w, ta, tb)
			}
		}
		tau, _ := ring.IterationTime(RingJob{Workers: 8, GradientSize: 1, Backward: 0.01}, 2, 3)
		p, _ := Contention(placements)
		out = append(out, tau, float64(p[0]+p[1]+p[2]))
		return out
	}
	want := answer()
	got := make([][]float64, 8)
	var wg sync.WaitGroup
	for i := range got {
		wg.Go(func() { got[i] = answer() })
	}
	wg.Wait()
	for i := range got {
		assert.Equal(t, want, got[i], "goroutine %d", i)
	}
	assert.NotZero(t, want[0])
}
