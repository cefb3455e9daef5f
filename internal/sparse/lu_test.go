package sparse

import (
	"math"
	"math/rand/v2"
	"testing"
)

// column is a sparse column.
type column struct {
	rows []int
	vals []float64
}

func randomColumns(rng *rand.Rand, n, perCol int) []column {
	cols := make([]column, n)
	for k := range cols {
		seen := map[int]bool{}
		for range perCol {
			r := rng.IntN(n)
			if seen[r] {
				continue
			}
			seen[r] = true
			cols[k].rows = append(cols[k].rows, r)
			cols[k].vals = append(cols[k].vals, rng.NormFloat64())
		}
	}
	return cols
}

// The LU solves B x = b for random sparse nonsingular B (made so by a
// diagonal), whatever the order of the columns.
func TestLUSolves(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 9))
	for _, n := range []int{1, 5, 40, 300} {
		cols := randomColumns(rng, n, 4)
		for k := range cols {
			cols[k].rows = append(cols[k].rows, k)
			cols[k].vals = append(cols[k].vals, 10)
		}
		f := NewLU(n)
		for k := range cols {
			if !f.Add(cols[k].rows, cols[k].vals, 1e-12) {
				t.Fatalf("n=%d: column %d refused", n, k)
			}
		}
		want := make([]float64, n)
		b := make([]float64, n)
		for k := range want {
			want[k] = rng.NormFloat64()
			for e, r := range cols[k].rows {
				b[r] += cols[k].vals[e] * want[k]
			}
		}
		if err := f.Solve(b); err != nil {
			t.Fatal(err)
		}
		for k := range want {
			if math.Abs(b[k]-want[k]) > 1e-9 {
				t.Fatalf("n=%d: x[%d] = %v, want %v", n, k, b[k], want[k])
			}
		}
	}
}

// SolveT solves the transposed system.
func TestLUSolveT(t *testing.T) {
	rng := rand.New(rand.NewPCG(4, 10))
	n := 60
	cols := randomColumns(rng, n, 4)
	for k := range cols {
		cols[k].rows = append(cols[k].rows, (k*7)%n)
		cols[k].vals = append(cols[k].vals, 10)
	}
	f := NewLU(n)
	for k := range cols {
		if !f.Add(cols[k].rows, cols[k].vals, 1e-12) {
			t.Fatalf("column %d refused", k)
		}
	}
	y := make([]float64, n)
	for i := range y {
		y[i] = rng.NormFloat64()
	}
	// c_k = a_k'y.
	c := make([]float64, n)
	for k := range cols {
		for e, r := range cols[k].rows {
			c[k] += cols[k].vals[e] * y[r]
		}
	}
	if err := f.SolveT(c); err != nil {
		t.Fatal(err)
	}
	for i := range y {
		if math.Abs(c[i]-y[i]) > 1e-9 {
			t.Fatalf("y[%d] = %v, want %v", i, c[i], y[i])
		}
	}
}

// A column that is a combination of earlier ones is refused; unit columns
// complete the basis; a solve before completion fails.
func TestLURankRevealing(t *testing.T) {
	f := NewLU(3)
	if !f.Add([]int{0, 1}, []float64{1, 2}, 1e-9) || !f.Add([]int{1, 2}, []float64{1, 1}, 1e-9) {
		t.Fatal("independent columns refused")
	}
	if f.Add([]int{0, 1, 2}, []float64{2, 5, 1}, 1e-9) {
		t.Fatal("2 a0 + a1 accepted")
	}
	if err := f.Solve(make([]float64, 3)); err == nil {
		t.Fatal("solve with rank 2 succeeded")
	}
	for i := range 3 {
		if !f.Pivotal(i) {
			if !f.Add([]int{i}, []float64{1}, 1e-9) {
				t.Fatalf("unit column %d refused", i)
			}
		}
	}
	if f.Rank() != 3 {
		t.Fatalf("rank %d", f.Rank())
	}
	// B = [a0 a1 e_k]; solve B x = a0 + a1.
	b := []float64{1, 3, 1}
	if err := f.Solve(b); err != nil {
		t.Fatal(err)
	}
	if math.Abs(b[0]-1) > 1e-12 || math.Abs(b[1]-1) > 1e-12 || math.Abs(b[2]) > 1e-12 {
		t.Fatalf("x = %v, want (1, 1, 0)", b)
	}
}
