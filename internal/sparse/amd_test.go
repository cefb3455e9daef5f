package sparse

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
)

// pattern is an upper-triangle pattern with its diagonal.
type pattern struct {
	n      int
	cp, ri []int
}

func fromEdges(n int, edges [][2]int) pattern {
	cols := make([][]int, n)
	seen := map[[2]int]bool{}
	for j := range n {
		cols[j] = append(cols[j], j)
	}
	for _, e := range edges {
		i, j := min(e[0], e[1]), max(e[0], e[1])
		if i == j || seen[[2]int{i, j}] {
			continue
		}
		seen[[2]int{i, j}] = true
		cols[j] = append(cols[j], i)
	}
	p := pattern{n: n, cp: []int{0}}
	for j := range n {
		p.ri = append(p.ri, cols[j]...)
		p.cp = append(p.cp, len(p.ri))
	}
	return p
}

func randomGraph(rng *rand.Rand, n, m int) pattern {
	var edges [][2]int
	for range m {
		edges = append(edges, [2]int{rng.IntN(n), rng.IntN(n)})
	}
	return fromEdges(n, edges)
}

func grid(k int) pattern {
	var edges [][2]int
	for r := range k {
		for c := range k {
			v := r*k + c
			if c+1 < k {
				edges = append(edges, [2]int{v, v + 1})
			}
			if r+1 < k {
				edges = append(edges, [2]int{v, v + k})
			}
		}
	}
	return fromEdges(k*k, edges)
}

// fill returns the entries of L under the order perm.
func fill(t *testing.T, p pattern, perm []int) int {
	t.Helper()
	c := &Cholesky{n: p.n, perm: perm, iperm: make([]int, p.n)}
	seen := make([]bool, p.n)
	for k, i := range perm {
		if i < 0 || i >= p.n || seen[i] {
			t.Fatalf("order %v is not a permutation", perm)
		}
		seen[i] = true
		c.iperm[i] = k
	}
	if len(perm) != p.n {
		t.Fatalf("order of %d nodes for %d", len(perm), p.n)
	}
	c.permuteUpper(p.cp, p.ri)
	c.etree()
	c.symbolic()
	return c.NonzerosL()
}

// The approximate minimum degree order is a permutation whose fill is close
// to the exact minimum degree's (Amestoy, Davis and Duff report the same
// quality on their test set).
func TestAMDFillNearMinimumDegree(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	cases := []pattern{grid(3), grid(10), grid(30)}
	for _, n := range []int{1, 2, 10, 50, 200, 800} {
		for _, avg := range []int{1, 3, 8} {
			cases = append(cases, randomGraph(rng, n, n*avg/2))
		}
	}
	for k, p := range cases {
		t.Run(fmt.Sprint(k), func(t *testing.T) {
			amd, err := approximateMinimumDegree(context.Background(), p.n, p.cp, p.ri)
			if err != nil {
				t.Fatal(err)
			}
			md, err := minimumDegree(context.Background(), p.n, p.cp, p.ri)
			if err != nil {
				t.Fatal(err)
			}
			identity := make([]int, p.n)
			for i := range identity {
				identity[i] = i
			}
			fa, fm, fi := fill(t, p, amd), fill(t, p, md), fill(t, p, identity)
			if float64(fa) > 1.25*float64(fm)+10 {
				t.Errorf("n=%d: AMD fill %d, minimum degree %d, natural order %d", p.n, fa, fm, fi)
			}
		})
	}
}

// A node adjacent to everything (an LP's capacity row) is ordered last
// and causes no fill.
func TestAMDDenseNodeLast(t *testing.T) {
	n := 2000
	var edges [][2]int
	for i := 0; i+1 < n-1; i += 2 {
		edges = append(edges, [2]int{i, i + 1}, [2]int{i, n - 1}, [2]int{i + 1, n - 1})
	}
	p := fromEdges(n, edges)
	perm, err := approximateMinimumDegree(context.Background(), n, p.cp, p.ri)
	if err != nil {
		t.Fatal(err)
	}
	if perm[n-1] != n-1 {
		t.Errorf("dense node at position %d", len(perm)-1)
	}
	if got, want := fill(t, p, perm), n+len(edges); got != want {
		t.Errorf("L has %d entries, want %d (no fill)", got, want)
	}
}

func TestAMDCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	p := grid(10)
	if _, err := approximateMinimumDegree(ctx, p.n, p.cp, p.ri); err == nil {
		t.Fatal("no error from a cancelled context")
	}
}
