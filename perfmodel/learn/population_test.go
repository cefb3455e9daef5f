package learn

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// planted returns a rows x cols matrix y = m_t + a_j + u_j . v_t of rank
// 2 (m in [-1, 1], a ~ N(2, 1), u ~ N(0, 0.3^2) and v ~ N(0, 1) in each
// of 2 dimensions) and a copy with each entry kept with probability keep
// (at least 3 per row), the others NaN.
func planted(rows, cols int, keep float64, seed uint64) (truth, observed []float64) {
	rng := rand.New(rand.NewPCG(seed, 2))
	m := make([]float64, cols)
	v := make([][2]float64, cols)
	for t := range cols {
		m[t] = 2*rng.Float64() - 1
		v[t] = [2]float64{rng.NormFloat64(), rng.NormFloat64()}
	}
	truth = make([]float64, rows*cols)
	observed = make([]float64, rows*cols)
	for j := range rows {
		a := 2 + rng.NormFloat64()
		u := [2]float64{0.3 * rng.NormFloat64(), 0.3 * rng.NormFloat64()}
		kept := 0
		for t := range cols {
			y := m[t] + a + u[0]*v[t][0] + u[1]*v[t][1]
			truth[j*cols+t] = y
			observed[j*cols+t] = math.NaN()
			if rng.Float64() < keep || cols-t <= 3-kept {
				observed[j*cols+t] = y
				kept++
			}
		}
	}
	return truth, observed
}

// plantedInput is planted's observed matrix as a fit's input, its rows
// ranked in order.
func plantedInput(rows, cols int, keep float64, seed uint64) (truth []float64, in *popInput) {
	truth, obs := planted(rows, cols, keep, seed)
	in = &popInput{y: obs, rows: rows, cols: cols, rank: make([]uint64, rows)}
	for j := range in.rank {
		in.rank[j] = uint64(j)
	}
	return truth, in
}

// TestCompletionRecoversPlantedRank2: 400 jobs by 8 types of rank 2, half
// the entries seen (at least 3 per row): the rank-2 fit completes the
// other half within 0.03 in log rate (3%) RMS, 95% of them within 0.05,
// and every entry of the rows with 4 entries or more within 0.1 (a row
// of 3 entries has as many as its level and factors, and is as good as
// the 3 types' factors are apart); a rank-0 fit (one multiplier per type)
// misses by more than 10 times as much.
func TestCompletionRecoversPlantedRank2(t *testing.T) {
	const rows, cols = 400, 8
	truth, in := plantedInput(rows, cols, 0.5, 7)
	obs := in.y
	rms := func(r int) (rms, p95, worst4 float64) {
		p := fitPopulation(in, fitParams{rank: r, huber: DefaultHuber, iterations: DefaultIterations, references: rows}, nil)
		require.Equal(t, rows, p.refs)
		ss := 0.0
		var errs []float64
		for ref, j := range p.refRow {
			seen := 0
			for tt := range cols {
				if !math.IsNaN(obs[j*cols+tt]) {
					seen++
				}
			}
			for tt := range cols {
				if !math.IsNaN(obs[j*cols+tt]) {
					assert.Equal(t, obs[j*cols+tt], p.refVal[ref*cols+tt], "a measured entry is kept as it is")
					continue
				}
				d := math.Abs(p.refVal[ref*cols+tt] - truth[j*cols+tt])
				ss += d * d
				errs = append(errs, d)
				if seen >= 4 {
					worst4 = max(worst4, d)
				}
			}
		}
		slices.Sort(errs)
		return math.Sqrt(ss / float64(len(errs))), errs[len(errs)*95/100], worst4
	}
	r2, p95, worst4 := rms(2)
	r0, _, _ := rms(0)
	t.Logf("completion error in log rate: rank 2 RMS %.4f, p95 %.4f, worst with 4+ entries %.4f; rank 0 RMS %.4f", r2, p95, worst4, r0)
	assert.Less(t, r2, 0.03)
	assert.Less(t, p95, 0.05)
	assert.Less(t, worst4, 0.1)
	assert.Greater(t, r0, 10*r2)
}

// TestWeightedMedian: the quickselect gives what a sort and a running sum
// give, on ties and skewed weights too.
func TestWeightedMedian(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for n := 1; n < 300; n += 7 {
		buf := make([]weighted, n)
		sw := 0.0
		for i := range buf {
			buf[i] = weighted{v: float64(rng.IntN(n/3 + 1)), w: rng.ExpFloat64()}
			if i%5 == 0 {
				buf[i].w *= 1e-6
			}
			sw += buf[i].w
		}
		sorted := slices.Clone(buf)
		slices.SortStableFunc(sorted, func(a, b weighted) int { return cmpFloat(a.v, b.v) })
		want, acc := sorted[n-1].v, 0.0
		for _, x := range sorted {
			acc += x.w
			if acc >= sw/2 {
				want = x.v
				break
			}
		}
		assert.Equal(t, want, weightedMedian(buf, sw), "n=%d", n)
	}
	assert.Equal(t, 2.0, weightedMedian([]weighted{{1, 1}, {2, 1}, {3, 1}}, 3))
	assert.Equal(t, 3.0, weightedMedian([]weighted{{1, 1}, {2, 1}, {3, 5}}, 7))
}

func cmpFloat(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
