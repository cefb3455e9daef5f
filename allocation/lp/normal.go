package lp

import (
	"cmp"
	"math"
	"slices"

	"github.com/gpusched/gpusched/internal/sparse"
)

// normalEq solves the normal equations (A Theta A') dy = r of the
// interior-point method with a sparse Cholesky factorisation whose pattern
// is analysed once. Dense columns were split by the stdForm, so the
// factor stays sparse.
type normalEq struct {
	sf      *stdForm
	chol    *sparse.Cholesky
	mvals   []float64
	diagPos []int
	// pairPos lists, for each sparse column in order, the position in mvals
	// of each pair (a, b >= a) of its entries.
	pairPos []int
}

func newNormalEq(sf *stdForm) (*normalEq, error) {
	m, n := sf.m, sf.n
	ne := &normalEq{sf: sf}
	// The pattern of the upper triangle: every diagonal and every pair of
	// rows that share a sparse column.
	type key struct{ lo, hi int }
	pos := map[key]int{}
	var keys []key
	add := func(k key) int {
		if p, ok := pos[k]; ok {
			return p
		}
		pos[k] = len(keys)
		keys = append(keys, k)
		return len(keys) - 1
	}
	for i := range m {
		add(key{i, i})
	}
	var pairKey []int
	for j := range n {
		for a := sf.colPtr[j]; a < sf.colPtr[j+1]; a++ {
			for b := a; b < sf.colPtr[j+1]; b++ {
				ra, rb := sf.rowIdx[a], sf.rowIdx[b]
				pairKey = append(pairKey, add(key{min(ra, rb), max(ra, rb)}))
			}
		}
	}
	order := make([]int, len(keys))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int {
		return cmp.Or(cmp.Compare(keys[a].hi, keys[b].hi), cmp.Compare(keys[a].lo, keys[b].lo))
	})
	where := make([]int, len(keys))
	colPtr := make([]int, m+1)
	rowIdx := make([]int, len(keys))
	for p, k := range order {
		where[k] = p
		rowIdx[p] = keys[k].lo
		colPtr[keys[k].hi+1]++
	}
	for i := range m {
		colPtr[i+1] += colPtr[i]
	}
	ne.pairPos = make([]int, len(pairKey))
	for q, k := range pairKey {
		ne.pairPos[q] = where[k]
	}
	ne.diagPos = make([]int, m)
	for i := range m {
		ne.diagPos[i] = where[pos[key{i, i}]]
	}
	chol, err := sparse.Analyze(m, colPtr, rowIdx)
	if err != nil {
		return nil, err
	}
	chol.Regularize = true
	ne.chol = chol
	ne.mvals = make([]float64, len(keys))
	return ne, nil
}

// factor prepares solves with the scaling theta.
func (ne *normalEq) factor(theta []float64) error {
	sf := ne.sf
	clear(ne.mvals)
	q := 0
	for j := range sf.n {
		th := theta[j]
		for a := sf.colPtr[j]; a < sf.colPtr[j+1]; a++ {
			va := sf.vals[a] * th
			for b := a; b < sf.colPtr[j+1]; b++ {
				ne.mvals[ne.pairPos[q]] += va * sf.vals[b]
				q++
			}
		}
	}
	return ne.chol.Factor(ne.mvals)
}

// solve overwrites r with (A Theta A')^-1 r, as accurate as the factor;
// the caller refines it against the equation it needs to hold.
func (ne *normalEq) solve(r []float64) { ne.chol.Solve(r) }

func dot(a, b []float64) float64 {
	s := 0.0
	for i, v := range a {
		s += v * b[i]
	}
	return s
}

func axpy(alpha float64, x, y []float64) {
	for i, v := range x {
		y[i] += alpha * v
	}
}

func normInf(v []float64) float64 {
	m := 0.0
	for _, x := range v {
		m = max(m, math.Abs(x))
	}
	return m
}
