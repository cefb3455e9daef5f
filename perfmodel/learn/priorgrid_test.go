package learn

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestPriorGridError: the grid's prior (interpolated between points
// LevelWidth/32 apart) against the exact match to the reference rows, on
// a planted rank-2 population of 2,000 jobs by 8 types (256 reference
// rows), for evidence on each type at 2,000 levels across the rows'
// values and beyond: the means differ by at most 0.003 in log rate
// (0.3%) at the 99th percentile and 0.006 at worst, the sigmas by 1.5%
// at worst; beyond the grid, and across a step of the weighted median,
// the prior is the exact one.
func TestPriorGridError(t *testing.T) {
	const rows, cols = 2000, 8
	_, in := plantedInput(rows, cols, 0.4, 11)
	p := fitPopulation(in, fitParams{rank: 2, huber: DefaultHuber, iterations: DefaultIterations, references: DefaultReferences}, nil)
	kn := kernel{level: DefaultLevelWidth, shape: DefaultShapeWidth, minSigma: DefaultMinPriorSigma}
	g := newPriorGrid(p, kn)
	rng := rand.New(rand.NewPCG(3, 4))
	var dm []float64
	worstSigma, beyond := 0.0, 0
	for range 2000 {
		m := rng.IntN(cols)
		e := g.lo[m] - 1 + rng.Float64()*(float64(len(g.pts[m]))*g.h+2)
		ev := []evidence{{typ: m, mean: e, vari: 0.01}}
		ws := p.refWeights(ev, -1, kn, nil)
		for ti := range cols {
			if ti == m {
				continue
			}
			want, wantVar, ok := p.fromWeights(ws, ti, kn, nil)
			if !ok {
				t.Fatalf("no exact prior at %v on %d", e, m)
			}
			got, gotVar, ok := g.prior(m, e, ti)
			if !ok {
				beyond++
				continue
			}
			dm = append(dm, math.Abs(got-want))
			worstSigma = max(worstSigma, math.Abs(math.Sqrt(gotVar/wantVar)-1))
		}
	}
	slices.Sort(dm)
	p99, worst := dm[len(dm)*99/100], dm[len(dm)-1]
	t.Logf("%d priors from the grid, %d exact (beyond it or a step): mean error p50 %.4f, p99 %.4f, worst %.4f; sigma worst %.2f%%", len(dm), beyond, dm[len(dm)/2], p99, worst, 100*worstSigma)
	assert.Less(t, p99, 0.003)
	assert.Less(t, worst, 0.006)
	assert.Less(t, worstSigma, 0.015)
	assert.Positive(t, beyond)
	// Without evidence: one value per type, exact.
	ws := p.refWeights(nil, -1, kn, nil)
	for ti := range cols {
		want, wantVar, _ := p.fromWeights(ws, ti, kn, nil)
		got, gotVar, ok := g.prior(-1, 0, ti)
		assert.True(t, ok)
		assert.Equal(t, want, got)
		assert.Equal(t, wantVar, gotVar)
	}
}
