package lp

import (
	"context"
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

func newNormalEq(ctx context.Context, sf *stdForm) (*normalEq, error) {
	m, n := sf.m, sf.n
	ne := &normalEq{sf: sf}
	// The pattern of the upper triangle: every diagonal and every pair of
	// rows that share a column. Pairs are bucketed by their larger row (the
	// column of M they fall in), then deduplicated with a stamp per row.
	numPairs := 0
	bucket := make([]int, m+1)
	for j := range n {
		if j&4095 == 0 && ctx.Err() != nil {
			return nil, ctx.Err()
		}
		for a := sf.colPtr[j]; a < sf.colPtr[j+1]; a++ {
			for b := a; b < sf.colPtr[j+1]; b++ {
				bucket[max(sf.rowIdx[a], sf.rowIdx[b])+1]++
				numPairs++
			}
		}
	}
	for i := range m {
		bucket[i+1] += bucket[i]
	}
	pairLo := make([]int, numPairs)
	pairID := make([]int, numPairs)
	next := slices.Clone(bucket[:m])
	q := 0
	for j := range n {
		for a := sf.colPtr[j]; a < sf.colPtr[j+1]; a++ {
			for b := a; b < sf.colPtr[j+1]; b++ {
				ra, rb := sf.rowIdx[a], sf.rowIdx[b]
				hi := max(ra, rb)
				pairLo[next[hi]], pairID[next[hi]] = min(ra, rb), q
				next[hi]++
				q++
			}
		}
	}
	ne.pairPos = make([]int, numPairs)
	ne.diagPos = make([]int, m)
	colPtr := make([]int, m+1)
	rowIdx := make([]int, 0, m+numPairs)
	stamp := make([]int, m)
	at := make([]int, m)
	for hi := range m {
		ne.diagPos[hi] = len(rowIdx)
		stamp[hi], at[hi] = hi+1, len(rowIdx)
		rowIdx = append(rowIdx, hi)
		for k := bucket[hi]; k < bucket[hi+1]; k++ {
			lo := pairLo[k]
			if stamp[lo] != hi+1 {
				stamp[lo], at[lo] = hi+1, len(rowIdx)
				rowIdx = append(rowIdx, lo)
			}
			ne.pairPos[pairID[k]] = at[lo]
		}
		colPtr[hi+1] = len(rowIdx)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	chol, err := sparse.AnalyzeContext(ctx, m, colPtr, rowIdx)
	if err != nil {
		return nil, err
	}
	chol.Regularize = true
	ne.chol = chol
	ne.mvals = make([]float64, len(rowIdx))
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
