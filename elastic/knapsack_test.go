package elastic

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Lyra's worked example (EuroSys 2023, Fig. 6): wMin 2, wMax 6, tMin 20.
func TestScalingItemsLyraExample(t *testing.T) {
	items, err := ScalingItems(2, 6, 1, 20)
	require.NoError(t, err)
	var values []float64
	for _, it := range items {
		values = append(values, it.Value)
	}
	assert.InDeltaSlice(t, []float64{20, 30, 36, 40}, values, 1e-12)
	assert.Equal(t, 4, items[3].Weight)
	for _, bad := range [][3]int{{0, 6, 1}, {3, 2, 1}, {2, 6, 0}} {
		_, err := ScalingItems(bad[0], bad[1], bad[2], 20)
		assert.ErrorIs(t, err, ErrInvalid)
	}
	_, err = ScalingItems(2, 6, 1, 0)
	assert.ErrorIs(t, err, ErrInvalid)
}

// Two jobs share 4 spare GPUs: the example's job (20, 30, 36, 40 for 1 to
// 4 extra workers) and one worth 25 for 1 worker. Best: 3 extra workers to
// the first and 1 to the second, 36 + 25 = 61 (4 to the first: 40; 2 + 1:
// 55).
func TestKnapsackByHand(t *testing.T) {
	a, _ := ScalingItems(2, 6, 1, 20)
	choice, v, err := MultipleChoiceKnapsack([][]Item{a, {{Weight: 1, Value: 25}}}, 4)
	require.NoError(t, err)
	assert.Equal(t, []int{2, 0}, choice)
	assert.InDelta(t, 61, v, 1e-12)
	// Capacity 0: nothing.
	choice, v, err = MultipleChoiceKnapsack([][]Item{a}, 0)
	require.NoError(t, err)
	assert.Equal(t, []int{-1}, choice)
	assert.Zero(t, v)
	_, _, err = MultipleChoiceKnapsack([][]Item{a}, -1)
	assert.ErrorIs(t, err, ErrInvalid)
	_, _, err = MultipleChoiceKnapsack([][]Item{{{Weight: -1, Value: 1}}}, 3)
	assert.ErrorIs(t, err, ErrInvalid)
}

// brute tries every combination of at most one item per group.
func brute(groups [][]Item, capacity int) float64 {
	var rec func(g, left int) float64
	rec = func(g, left int) float64 {
		if g == len(groups) {
			return 0
		}
		best := rec(g+1, left)
		for _, it := range groups[g] {
			if it.Weight <= left {
				best = max(best, it.Value+rec(g+1, left-it.Weight))
			}
		}
		return best
	}
	return rec(0, capacity)
}

// The DP equals brute force on 300 random small instances, and its choice
// is feasible and worth what it says.
func TestKnapsackMatchesBruteForce(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for trial := range 300 {
		groups := make([][]Item, 1+rng.IntN(5))
		for g := range groups {
			if rng.IntN(2) == 0 {
				items, err := ScalingItems(1+rng.IntN(3), 4+rng.IntN(3), 1+rng.IntN(2), 1+99*rng.Float64())
				require.NoError(t, err)
				groups[g] = items
				continue
			}
			for range rng.IntN(4) {
				groups[g] = append(groups[g], Item{Weight: rng.IntN(6), Value: 10 * rng.Float64()})
			}
		}
		capacity := rng.IntN(15)
		choice, v, err := MultipleChoiceKnapsack(groups, capacity)
		require.NoError(t, err)
		assert.InDelta(t, brute(groups, capacity), v, 1e-9, "trial %d", trial)
		w, got := 0, 0.0
		for g, i := range choice {
			if i >= 0 {
				w += groups[g][i].Weight
				got += groups[g][i].Value
			}
		}
		assert.LessOrEqual(t, w, capacity, "trial %d", trial)
		assert.InDelta(t, v, got, 1e-9, "trial %d", trial)
	}
}

// Lyra's scale: 500 items (100 elastic jobs of 5 extra workers) over 300
// spare GPUs; Lyra reports 0.02 s for 354 items and 245 GPUs.
func BenchmarkKnapsack500x300(b *testing.B) {
	rng := rand.New(rand.NewPCG(3, 4))
	groups := make([][]Item, 100)
	for g := range groups {
		wMin := 1 + rng.IntN(4)
		items, err := ScalingItems(wMin, wMin+5, 1+rng.IntN(2), 10+rng.Float64()*1000)
		if err != nil {
			b.Fatal(err)
		}
		groups[g] = items
	}
	for b.Loop() {
		if _, _, err := MultipleChoiceKnapsack(groups, 300); err != nil {
			b.Fatal(err)
		}
	}
}

// Ties go to the smaller total weight, then to the earlier item: with
// whole values (many ties), the choice is worth the optimum and weighs the
// least of the optimal combinations, and of equal items the first is
// taken.
func TestKnapsackTies(t *testing.T) {
	// lightest returns the best value and the least weight reaching it.
	var lightest func(groups [][]Item, left int) (float64, int)
	lightest = func(groups [][]Item, left int) (float64, int) {
		if len(groups) == 0 {
			return 0, 0
		}
		bv, bw := lightest(groups[1:], left)
		for _, it := range groups[0] {
			if it.Weight <= left {
				v, w := lightest(groups[1:], left-it.Weight)
				if v += it.Value; v > bv || v == bv && w+it.Weight < bw {
					bv, bw = v, w+it.Weight
				}
			}
		}
		return bv, bw
	}
	rng := rand.New(rand.NewPCG(3, 4))
	for trial := range 300 {
		groups := make([][]Item, 1+rng.IntN(5))
		for g := range groups {
			for range rng.IntN(5) {
				groups[g] = append(groups[g], Item{Weight: rng.IntN(5), Value: float64(rng.IntN(4))})
			}
		}
		capacity := rng.IntN(12)
		choice, v, err := MultipleChoiceKnapsack(groups, capacity)
		require.NoError(t, err)
		wantV, wantW := lightest(groups, capacity)
		w := 0
		for g, i := range choice {
			if i >= 0 {
				w += groups[g][i].Weight
			}
		}
		require.Equal(t, wantV, v, "trial %d", trial)
		require.Equal(t, wantW, w, "trial %d: %v", trial, groups)
	}
	choice, _, err := MultipleChoiceKnapsack([][]Item{{{Weight: 2, Value: 5}, {Weight: 2, Value: 5}, {Weight: 1, Value: 5}}, {{Weight: 3, Value: 1}, {Weight: 3, Value: 1}}}, 4)
	require.NoError(t, err)
	assert.Equal(t, []int{2, 0}, choice)
}
