package sparse

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"
)

// dense is a test matrix with its upper-triangle CSC form.
type dense struct {
	n      int
	a      [][]float64
	cp, ri []int
	vals   []float64
}

func fromDense(a [][]float64) *dense {
	n := len(a)
	d := &dense{n: n, a: a, cp: []int{0}}
	for j := range n {
		for i := 0; i <= j; i++ {
			if a[i][j] != 0 || i == j {
				d.ri = append(d.ri, i)
				d.vals = append(d.vals, a[i][j])
			}
		}
		d.cp = append(d.cp, len(d.ri))
	}
	return d
}

// randomSPD returns B B' + I for a sparse random B.
func randomSPD(rng *rand.Rand, n int, density float64) [][]float64 {
	b := make([][]float64, n)
	for i := range b {
		b[i] = make([]float64, n)
		b[i][i] = 1 + rng.Float64()
		for j := range n {
			if j != i && rng.Float64() < density {
				b[i][j] = rng.NormFloat64()
			}
		}
	}
	a := make([][]float64, n)
	for i := range a {
		a[i] = make([]float64, n)
		for j := range n {
			for k := range n {
				a[i][j] += b[i][k] * b[j][k]
			}
		}
		a[i][i] += 1
	}
	return a
}

func residual(a [][]float64, x, b []float64) float64 {
	worst := 0.0
	for i := range a {
		s := -b[i]
		for j := range a {
			s += a[i][j] * x[j]
		}
		worst = max(worst, math.Abs(s))
	}
	return worst
}

func solveAndCheck(t *testing.T, d *dense, rng *rand.Rand) {
	t.Helper()
	c, err := Analyze(d.n, d.cp, d.ri)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Factor(d.vals); err != nil {
		t.Fatal(err)
	}
	b := make([]float64, d.n)
	for i := range b {
		b[i] = rng.NormFloat64()
	}
	x := append([]float64(nil), b...)
	c.Solve(x)
	if r := residual(d.a, x, b); r > 1e-9 {
		t.Fatalf("residual %g", r)
	}
}

func TestRandomSPD(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{1, 2, 5, 20, 60} {
		for _, density := range []float64{0.02, 0.1, 0.5} {
			solveAndCheck(t, fromDense(randomSPD(rng, n, density)), rng)
		}
	}
}

// An arrow matrix: a dense first row and column. Minimum degree must
// eliminate the hub among the last two, so that L has no fill.
func TestArrowNoFill(t *testing.T) {
	n := 50
	a := make([][]float64, n)
	for i := range a {
		a[i] = make([]float64, n)
		a[i][i] = 4
	}
	for i := 1; i < n; i++ {
		a[0][i], a[i][0] = 1, 1
	}
	a[0][0] = float64(n)
	d := fromDense(a)
	c, err := Analyze(n, d.cp, d.ri)
	if err != nil {
		t.Fatal(err)
	}
	if c.iperm[0] < n-2 {
		t.Errorf("hub eliminated at position %d, want one of the last two", c.iperm[0])
	}
	if got, want := c.NonzerosL(), 2*n-1; got != want {
		t.Errorf("L has %d entries, want %d (no fill)", got, want)
	}
	solveAndCheck(t, d, rand.New(rand.NewPCG(3, 4)))
}

func TestRefactorSamePattern(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	d := fromDense(randomSPD(rng, 30, 0.1))
	c, err := Analyze(d.n, d.cp, d.ri)
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		for i := range d.a {
			d.a[i][i] *= 2
		}
		d2 := fromDense(d.a)
		if err := c.Factor(d2.vals); err != nil {
			t.Fatal(err)
		}
		b := make([]float64, d.n)
		b[3] = 1
		x := append([]float64(nil), b...)
		c.Solve(x)
		if r := residual(d.a, x, b); r > 1e-9 {
			t.Fatalf("residual %g", r)
		}
	}
}

func TestNotPositiveDefinite(t *testing.T) {
	d := fromDense([][]float64{{1, 2}, {2, 1}})
	c, err := Analyze(2, d.cp, d.ri)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Factor(d.vals); !errors.Is(err, ErrNotPositiveDefinite) {
		t.Fatalf("got %v", err)
	}
	c.Regularize = true
	if err := c.Factor(d.vals); err != nil || len(c.Dropped()) != 1 {
		t.Fatalf("got %v, dropped %v", err, c.Dropped())
	}
}

func TestAnalyzeErrors(t *testing.T) {
	if _, err := Analyze(2, []int{0, 1}, []int{0}); err == nil {
		t.Error("short column pointers accepted")
	}
	if _, err := Analyze(2, []int{0, 1, 2}, []int{0, 0}); err == nil {
		t.Error("missing diagonal accepted")
	}
	if _, err := Analyze(2, []int{0, 2, 3}, []int{0, 1, 1}); err == nil {
		t.Error("lower-triangle entry accepted")
	}
}

// A dependent row (the third is the sum of the first two) is found and
// dropped with RelativePivot, and the consistent system still solves.
func TestDependentRowDropped(t *testing.T) {
	// A = B B' with B's third row = first + second.
	b := [][]float64{{1, 0, 2}, {0, 1, 1}, {1, 1, 3}, {0, 0, 1}}
	a := make([][]float64, 4)
	for i := range a {
		a[i] = make([]float64, 4)
		for j := range a[i] {
			for k := range 3 {
				a[i][j] += b[i][k] * b[j][k]
			}
		}
	}
	d := fromDense(a)
	c, err := Analyze(4, d.cp, d.ri)
	if err != nil {
		t.Fatal(err)
	}
	c.Regularize, c.RelativePivot = true, 1e-10
	if err := c.Factor(d.vals); err != nil {
		t.Fatal(err)
	}
	if got := c.Dropped(); len(got) != 1 || got[0] > 2 {
		t.Fatalf("dropped %v, want one of rows 0, 1, 2", got)
	}
	// b in the range of A: A x = A (1, 1, 1, 1).
	rhs := make([]float64, 4)
	for i := range a {
		for j := range a[i] {
			rhs[i] += a[i][j]
		}
	}
	x := append([]float64(nil), rhs...)
	c.Solve(x)
	if r := residual(a, x, rhs); r > 1e-9 {
		t.Fatalf("residual %g", r)
	}
}
