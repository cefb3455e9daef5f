package placement

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gpusched/gpusched/topology"
)

const gib80 = 81920

func TestFragmentationHandChecked(t *testing.T) {
	gpus := []FractionGPU{{Type: topology.H100, MemoryMiB: gib80}, {Type: topology.H100, MemoryMiB: gib80}}
	workload := []FractionRequest{{Fraction: 0.5}, {Fraction: 0.25}}
	// GPU 0 has a quarter free (20480 MiB): a half does not fit, a
	// quarter does, so half of its free memory is fragmented in
	// expectation: 10240 MiB of 20480 + 81920 free.
	assert.InDelta(t, 0.1, Fragmentation(gpus, []int{61440, 0}, workload), 1e-12)
	assert.Equal(t, 0.0, Fragmentation(gpus, []int{0, 0}, workload))
	assert.Equal(t, 0.0, Fragmentation(gpus, []int{gib80, gib80}, workload))
	// Nothing fits anywhere: all free memory is fragmented.
	assert.Equal(t, 1.0, Fragmentation(gpus, []int{61441, 61441}, []FractionRequest{{Fraction: 0.5}}))
	// A request for another type cannot use these GPUs.
	assert.Equal(t, 0.5, Fragmentation(gpus, []int{0, 0}, []FractionRequest{{Fraction: 0.5}, {Fraction: 0.5, Type: topology.A100}}))
}

func TestFractionPlaceHandChecked(t *testing.T) {
	gpus := []FractionGPU{
		{Ref: GPURef{0, 0}, Type: topology.H100, MemoryMiB: gib80, UsedMiB: gib80 / 2},
		{Ref: GPURef{0, 1}, Type: topology.H100, MemoryMiB: gib80, UsedMiB: gib80 / 4},
		{Ref: GPURef{1, 0}, Type: topology.A100, MemoryMiB: 40960},
	}
	reqs := []FractionRequest{{Fraction: 0.25}, {Fraction: 0.5}, {MemoryMiB: 30000, Type: topology.A100}, {Fraction: 1}}
	// Best fit, largest first: the whole GPU takes the empty A100, so the
	// 30000 MiB A100 request fits nowhere; the half fills GPU 0 (0 left),
	// the quarter goes to GPU 1 (half left).
	bfd, err := FractionPlacer{Policy: BestFitDecreasing}.Place(gpus, reqs)
	require.NoError(t, err)
	assert.Equal(t, []int{1, 0, -1, 2}, bfd.GPU)
	assert.Equal(t, []int{gib80, gib80 / 2, 40960}, bfd.UsedMiB)
	// Left: 40960 MiB on GPU 1, where a quarter and a half fit but the
	// A100 request and the whole GPU do not: half of it fragmented.
	assert.InDelta(t, 0.5, bfd.After, 1e-12)
	// The gradient, in the given order: the quarter lowers GPU 1's
	// fragmentation most (by 10240 MiB: 2/4 of 61440 before, 2/4 of 40960
	// after), the half ties GPUs 0 and 1 (-20480 each; lowest index), the
	// A100 request takes the A100 and the whole GPU fits nowhere.
	fgd, err := FractionPlacer{Policy: FragmentationGradient}.Place(gpus, reqs)
	require.NoError(t, err)
	assert.Equal(t, []int{1, 0, 2, -1}, fgd.GPU)
	assert.Equal(t, []int{gib80, gib80 / 2, 30000}, fgd.UsedMiB)
	// Left: 40960 MiB on GPU 1 (20480 fragmented) and 10960 on the A100,
	// where only the quarter fits (3/4 of 10960 fragmented).
	assert.InDelta(t, (20480+0.75*10960)/(40960+10960), fgd.After, 1e-12)
	for _, res := range []*FractionResult{bfd, fgd} {
		assert.Equal(t, 1, res.Unplaced)
		assert.Equal(t, 2, res.Shared)
		// Before: GPU 0 (40960 free) and GPU 1 (61440) lose the A100 and
		// whole-GPU requests, the empty A100 loses none.
		assert.InDelta(t, (0.5*40960+0.5*61440)/(40960+61440+40960), res.Before, 1e-12)
	}
}

func TestFractionPlaceErrors(t *testing.T) {
	gpus := []FractionGPU{{MemoryMiB: gib80}}
	for _, c := range []struct {
		gpus []FractionGPU
		reqs []FractionRequest
		msg  string
	}{
		{gpus, []FractionRequest{{Fraction: 0}}, "GPU fraction 0 (want 0 < fraction <= 1)"},
		{gpus, []FractionRequest{{Fraction: 1.5}}, "GPU fraction 1.5"},
		{gpus, []FractionRequest{{Fraction: math.NaN()}}, "GPU fraction NaN"},
		{gpus, []FractionRequest{{Fraction: -0.1}}, "GPU fraction -0.1"},
		{gpus, []FractionRequest{{Fraction: 0.5, MemoryMiB: 10}}, "not both"},
		{gpus, []FractionRequest{{MemoryMiB: -10}}, "memory -10 MiB"},
		{[]FractionGPU{{MemoryMiB: 10, UsedMiB: 11}}, nil, "gpus[0]: 11 MiB used of 10"},
		{[]FractionGPU{{}}, nil, "gpus[0]: 0 MiB used of 0"},
	} {
		_, err := FractionPlacer{}.Place(c.gpus, c.reqs)
		require.ErrorIs(t, err, ErrBadRequest)
		assert.ErrorContains(t, err, c.msg)
	}
}

// No GPU holds more than its memory, and a request left out fits nowhere
// at the end; the gradient policy fragments no more than best fit on
// average (go test -v -run Compare).
func TestFractionPlaceProperties(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	sizes := []float64{0.125, 0.25, 0.25, 0.5, 0.5, 0.75, 1}
	var fragBFD, fragFGD float64
	var unBFD, unFGD int
	const trials = 200
	for range trials {
		gpus := make([]FractionGPU, 2+rng.IntN(10))
		for g := range gpus {
			gpus[g] = FractionGPU{Type: topology.H100, MemoryMiB: gib80}
			if rng.IntN(2) == 0 {
				gpus[g] = FractionGPU{Type: topology.A100, MemoryMiB: 40960}
			}
			gpus[g].UsedMiB = rng.IntN(3) * gpus[g].MemoryMiB / 4
		}
		reqs := make([]FractionRequest, 1+rng.IntN(3*len(gpus)))
		for i := range reqs {
			reqs[i] = FractionRequest{Fraction: sizes[rng.IntN(len(sizes))]}
			if rng.IntN(5) == 0 {
				reqs[i] = FractionRequest{MemoryMiB: 1 + rng.IntN(40000)}
			}
		}
		for _, pol := range []FractionPolicy{BestFitDecreasing, FragmentationGradient} {
			res, err := FractionPlacer{Policy: pol}.Place(gpus, reqs)
			require.NoError(t, err)
			placed := 0
			for g := range gpus {
				require.LessOrEqual(t, res.UsedMiB[g], gpus[g].MemoryMiB)
				placed += res.UsedMiB[g] - gpus[g].UsedMiB
			}
			want := 0
			for r, g := range res.GPU {
				if g < 0 {
					for h := range gpus {
						require.False(t, fits(&gpus[h], res.UsedMiB[h], &reqs[r]), "request %d fits GPU %d", r, h)
					}
					continue
				}
				want += reqs[r].need(gpus[g].MemoryMiB)
			}
			require.Equal(t, want, placed)
			if pol == BestFitDecreasing {
				fragBFD += res.After
				unBFD += res.Unplaced
			} else {
				fragFGD += res.After
				unFGD += res.Unplaced
			}
		}
	}
	t.Logf("over %d random packings: mean fragmentation after, best fit decreasing %.3f, gradient %.3f; requests left out %d and %d",
		trials, fragBFD/trials, fragFGD/trials, unBFD, unFGD)
}
