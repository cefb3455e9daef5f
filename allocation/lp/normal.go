package lp

import (
	"context"
	"math"
	"slices"

	"github.com/gpusched/gpusched/internal/sparse"
)

// normalEq solves the normal equations (A Theta A') dy = r of the
// interior-point method with a sparse Cholesky factorisation whose pattern
// is analysed once. Dense columns (such as the level variable of a max-min
// epigraph, which appears in every job's row) would make A Theta A' dense;
// they are left out of the sparse matrix S and added back by the
// Sherman-Morrison-Woodbury formula with a small dense capacitance matrix:
// with V = A_D Theta_D^(1/2),
//
//	(S + V V')^-1 = S^-1 - S^-1 V (I + V'S^-1 V)^-1 V'S^-1
//
// (the "Schur complement" treatment of dense columns; E. D. Andersen, "A
// modified Schur complement method for handling dense columns in
// interior-point methods for linear programming", ACM TOMS 22(3), 1996).
// A row that only dense columns cover would make S singular; its pivot is
// kept at a small fraction of the row's full diagonal, and the solver's
// conjugate-gradient refinement (hsd.refine) removes the error that makes.
type normalEq struct {
	sf      *stdForm
	chol    *sparse.Cholesky
	mvals   []float64
	diagPos []int
	// pairPos lists, for each sparse column in order, the position in mvals
	// of each pair (a, b >= a) of its entries.
	pairPos []int
	// isDense marks the dense columns, dense lists them.
	isDense []bool
	dense   []int
	// For the dense columns, per factorisation: u[d] = S^-1 v_d, the
	// Cholesky factor of the capacitance matrix I + V'S^-1 V (row-major
	// k x k, lower triangle), and the floor of each pivot of S.
	u         [][]float64
	sqrtTheta []float64
	capL      []float64
	floor     []float64
	work      []float64
}

// Dense-column detection: a column with more than max(denseMin,
// denseFraction * m) entries is dense, the densest maxDense at most.
const (
	denseMin      = 40
	denseFraction = 0.1
	maxDense      = 64
	// pivotFloor is the fraction of a row's full diagonal below which a
	// pivot of S does not fall.
	pivotFloor = 1e-8
)

// findDense returns the dense columns of sf, densest first.
func findDense(sf *stdForm) []int {
	limit := max(denseMin, int(denseFraction*float64(sf.m)))
	var dense []int
	for j := range sf.n {
		if sf.colPtr[j+1]-sf.colPtr[j] > limit {
			dense = append(dense, j)
		}
	}
	slices.SortStableFunc(dense, func(a, b int) int {
		return (sf.colPtr[b+1] - sf.colPtr[b]) - (sf.colPtr[a+1] - sf.colPtr[a])
	})
	if len(dense) > maxDense {
		dense = dense[:maxDense]
	}
	return dense
}

func newNormalEq(ctx context.Context, sf *stdForm) (*normalEq, error) {
	m, n := sf.m, sf.n
	ne := &normalEq{sf: sf, isDense: make([]bool, n)}
	ne.dense = findDense(sf)
	for _, j := range ne.dense {
		ne.isDense[j] = true
	}
	// The pattern of the upper triangle: every diagonal and every pair of
	// rows that share a sparse column. Pairs are bucketed by their larger
	// row (the column of M they fall in), then deduplicated with a stamp
	// per row.
	numPairs := 0
	bucket := make([]int, m+1)
	for j := range n {
		if j&checkEvery == 0 && ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if ne.isDense[j] {
			continue
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
		if j&checkEvery == 0 && ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if ne.isDense[j] {
			continue
		}
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
		if hi&checkEvery == 0 && ctx.Err() != nil {
			return nil, ctx.Err()
		}
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
	if k := len(ne.dense); k > 0 {
		ne.u = make([][]float64, k)
		for d := range ne.u {
			ne.u[d] = make([]float64, m)
		}
		ne.capL = make([]float64, k*k)
		ne.sqrtTheta = make([]float64, k)
		ne.floor = make([]float64, m)
		ne.work = make([]float64, k)
		chol.PivotFloor = ne.floor
	}
	return ne, nil
}

// factor prepares solves with the scaling theta.
func (ne *normalEq) factor(theta []float64) error {
	sf := ne.sf
	mvals, pairPos := ne.mvals, ne.pairPos
	clear(mvals)
	q := 0
	colPtr := sf.colPtr[:sf.n+1]
	for j, dense := range ne.isDense[:sf.n] {
		if dense {
			continue
		}
		th := theta[j]
		vals := sf.vals[colPtr[j]:colPtr[j+1]] // the column, cut out: unchecked
		for a, va := range vals {
			va *= th
			for _, vb := range vals[a:] {
				mvals[pairPos[q]] += va * vb
				q++
			}
		}
	}
	if len(ne.dense) == 0 {
		return ne.chol.Factor(ne.mvals)
	}
	// Pivot floors from each row's full diagonal.
	for i, p := range ne.diagPos {
		ne.floor[i] = ne.mvals[p]
	}
	for _, j := range ne.dense {
		for a := sf.colPtr[j]; a < sf.colPtr[j+1]; a++ {
			v := sf.vals[a]
			ne.floor[sf.rowIdx[a]] += theta[j] * v * v
		}
	}
	for i := range ne.floor {
		ne.floor[i] *= pivotFloor
	}
	if err := ne.chol.Factor(ne.mvals); err != nil {
		return err
	}
	// u_d = S^-1 v_d, v_d = sqrt(theta_d) a_d.
	k := len(ne.dense)
	for d, j := range ne.dense {
		u := ne.u[d]
		clear(u)
		st := math.Sqrt(theta[j])
		ne.sqrtTheta[d] = st
		for a := sf.colPtr[j]; a < sf.colPtr[j+1]; a++ {
			u[sf.rowIdx[a]] = st * sf.vals[a]
		}
		ne.chol.Solve(u)
	}
	// C = I + V'U, lower triangle, then its Cholesky factor in place.
	c := ne.capL
	for d, j := range ne.dense {
		st := math.Sqrt(theta[j])
		for e := 0; e <= d; e++ {
			s := 0.0
			u := ne.u[e]
			for a := sf.colPtr[j]; a < sf.colPtr[j+1]; a++ {
				s += sf.vals[a] * u[sf.rowIdx[a]]
			}
			c[d*k+e] = st * s
		}
		c[d*k+d]++
	}
	for d := range k {
		for e := 0; e <= d; e++ {
			s := c[d*k+e]
			for f := range e {
				s -= c[d*k+f] * c[e*k+f]
			}
			if e == d {
				c[d*k+d] = math.Sqrt(max(s, 1e-300))
			} else {
				c[d*k+e] = s / c[e*k+e]
			}
		}
	}
	return nil
}

// solve overwrites r with (A Theta A')^-1 r, as accurate as the factor;
// the caller refines it against the equation it needs to hold.
func (ne *normalEq) solve(r []float64) {
	ne.chol.Solve(r)
	k := len(ne.dense)
	if k == 0 {
		return
	}
	// r -= U C^-1 V'r, with r = S^-1 r0 here and (V'r)_d = sqrt(theta_d)
	// a_d'r.
	sf, w, c := ne.sf, ne.work, ne.capL
	for d, j := range ne.dense {
		s := 0.0
		for a := sf.colPtr[j]; a < sf.colPtr[j+1]; a++ {
			s += sf.vals[a] * r[sf.rowIdx[a]]
		}
		w[d] = s * ne.sqrtTheta[d]
	}
	// C w' = w: forward then backward with the lower factor.
	for d := range k {
		s := w[d]
		for f := range d {
			s -= c[d*k+f] * w[f]
		}
		w[d] = s / c[d*k+d]
	}
	for d := k - 1; d >= 0; d-- {
		s := w[d]
		for f := d + 1; f < k; f++ {
			s -= c[f*k+d] * w[f]
		}
		w[d] = s / c[d*k+d]
	}
	for d, u := range ne.u {
		axpy(-w[d], u, r)
	}
}

func dot(a, b []float64) float64 {
	s := 0.0
	b = b[:len(a)]
	for i, v := range a {
		s += v * b[i]
	}
	return s
}

func axpy(alpha float64, x, y []float64) {
	y = y[:len(x)]
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
