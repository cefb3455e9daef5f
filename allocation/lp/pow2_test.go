package lp

import (
	"math"
	"math/rand/v2"
	"testing"
)

// pow2 equals the power of 2 nearest in the logarithm, as the formula
// it replaced computed it, across the range and near every boundary.
func TestPow2(t *testing.T) {
	ref := func(v float64) float64 { return math.Ldexp(1, int(math.Round(math.Log2(v)))) }
	rng := rand.New(rand.NewPCG(1, 2))
	check := func(v float64) {
		if got, want := pow2(v), ref(v); got != want {
			t.Fatalf("pow2(%v) = %v, want %v", v, got, want)
		}
	}
	for range 200000 {
		check(math.Ldexp(0.5+rng.Float64()/2, rng.IntN(2000)-1000))
	}
	for e := -1000; e <= 1000; e += 7 {
		for _, f := range []float64{0.5, math.Sqrt2 / 2, 0.7070, 0.7072, 1 - 1e-16} {
			for d := -20; d <= 20; d++ {
				check(math.Ldexp(f+float64(d)*1e-17, e))
			}
		}
	}
	for _, v := range []float64{0, -1, math.Inf(1), math.NaN()} {
		if got := pow2(v); got != 1 {
			t.Fatalf("pow2(%v) = %v, want 1", v, got)
		}
	}
	if got := pow2(math.SmallestNonzeroFloat64); got != ref(math.SmallestNonzeroFloat64) {
		t.Fatalf("pow2(smallest) = %v, want %v", got, ref(math.SmallestNonzeroFloat64))
	}
}

// frexp and ldexp1 equal math.Frexp and math.Ldexp(1, k) bit for bit,
// normal, subnormal and at the ends of the range.
func TestFrexpLdexp1(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	vals := []float64{math.SmallestNonzeroFloat64, 1e-310, math.MaxFloat64, 1, 0.5, 0.75, math.Nextafter(1, 0), 2.2250738585072014e-308}
	for range 100000 {
		vals = append(vals, math.Float64frombits(rng.Uint64()&(1<<63-1)))
	}
	for _, v := range vals {
		if math.IsNaN(v) || math.IsInf(v, 0) || v == 0 {
			continue
		}
		f, e := frexp(v)
		wf, we := math.Frexp(v)
		if math.Float64bits(f) != math.Float64bits(wf) || e != we {
			t.Fatalf("frexp(%v) = %v, %d, want %v, %d", v, f, e, wf, we)
		}
	}
	for k := -1100; k <= 1100; k++ {
		if got, want := ldexp1(k), math.Ldexp(1, k); math.Float64bits(got) != math.Float64bits(want) {
			t.Fatalf("ldexp1(%d) = %v, want %v", k, got, want)
		}
	}
}
