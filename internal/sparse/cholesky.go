// Package sparse holds a sparse Cholesky factorisation for gpusched's
// interior-point LP solver: a minimum-degree fill-reducing ordering, the
// elimination tree, and an up-looking numeric factorisation that can be
// repeated on new values with the same pattern.
//
// The algorithms are those of T. A. Davis, "Direct Methods for Sparse Linear
// Systems", SIAM 2006: elimination tree (section 4.1), row patterns by
// ereach (4.2), column counts from the row patterns, and the up-looking
// Cholesky (4.8, cs_chol); the ordering is the classic minimum-degree
// heuristic (Tinney and Walker 1967; George and Liu 1989) on an explicit
// elimination graph, which is enough for the block-angular matrices of
// allocation LPs.
package sparse

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
)

// ErrNotPositiveDefinite is returned by Factor when a pivot is not
// positive and Cholesky.Regularize is off.
var ErrNotPositiveDefinite = errors.New("sparse: matrix is not positive definite")

// Cholesky is the factorisation P A P' = L L' of a symmetric positive
// definite matrix A with a fixed pattern.
type Cholesky struct {
	n      int
	perm   []int // perm[k] = original index of pivot k
	iperm  []int // iperm[i] = pivot position of original index i
	parent []int // elimination tree of P A P'
	// Upper triangle of P A P' in CSC, and where each input entry goes.
	cp, ci []int
	cx     []float64
	dest   []int
	// L in CSC, diagonal first in each column.
	lp, li []int
	lx     []float64
	// Work space.
	x          []float64
	stack, mrk []int
	next       []int // ereach's path
	colNext    []int // next free slot of each column of L
	// Regularize replaces a pivot below Tiny times the largest diagonal
	// entry by Huge, which in an interior-point method drops the
	// corresponding direction instead of failing (as LIPSOL and PCx do).
	// Dropped lists the rows whose pivots it replaced in the last Factor.
	Regularize bool
	// RelativePivot, with Regularize, also drops a pivot below this
	// fraction of its row's diagonal entry: such a row is numerically a
	// combination of earlier ones (a dependent row of an LP).
	RelativePivot float64
	dropped       []int
}

// Tiny and Huge are the thresholds of Cholesky.Regularize.
const (
	Tiny = 1e-30
	Huge = 1e128
)

// Analyze prepares the factorisation of the n x n symmetric matrix whose
// upper triangle (row <= column, diagonal included) has the pattern given in
// compressed sparse column form: column j holds rows rowIdx[colPtr[j]:colPtr[j+1]].
// Every diagonal entry must be present. Factor then takes values in the
// same order.
func Analyze(n int, colPtr, rowIdx []int) (*Cholesky, error) {
	return AnalyzeContext(context.Background(), n, colPtr, rowIdx)
}

// AnalyzeContext is Analyze that stops with ctx's error when ctx ends (the
// ordering of a large matrix can take seconds).
func AnalyzeContext(ctx context.Context, n int, colPtr, rowIdx []int) (*Cholesky, error) {
	if len(colPtr) != n+1 || colPtr[n] != len(rowIdx) {
		return nil, fmt.Errorf("sparse: pattern of %d columns has %d column pointers and %d entries", n, len(colPtr), len(rowIdx))
	}
	hasDiag := make([]bool, n)
	for j := range n {
		for p := colPtr[j]; p < colPtr[j+1]; p++ {
			i := rowIdx[p]
			if i < 0 || i > j {
				return nil, fmt.Errorf("sparse: entry (%d, %d) is not in the upper triangle", i, j)
			}
			if i == j {
				hasDiag[j] = true
			}
		}
	}
	for j, ok := range hasDiag {
		if !ok {
			return nil, fmt.Errorf("sparse: diagonal entry %d is missing", j)
		}
	}
	c := &Cholesky{n: n}
	perm, err := minimumDegree(ctx, n, colPtr, rowIdx)
	if err != nil {
		return nil, err
	}
	c.perm = perm
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	c.iperm = make([]int, n)
	for k, i := range c.perm {
		c.iperm[i] = k
	}
	c.permuteUpper(colPtr, rowIdx)
	c.etree()
	c.symbolic()
	c.x = make([]float64, n)
	return c, nil
}

// permuteUpper builds the pattern of the upper triangle of P A P' and the
// map from input entries to its positions.
func (c *Cholesky) permuteUpper(colPtr, rowIdx []int) {
	n := c.n
	count := make([]int, n+1)
	for j := range n {
		for p := colPtr[j]; p < colPtr[j+1]; p++ {
			a, b := c.iperm[rowIdx[p]], c.iperm[j]
			count[max(a, b)+1]++
		}
	}
	for j := range n {
		count[j+1] += count[j]
	}
	c.cp = slices.Clone(count)
	c.ci = make([]int, len(rowIdx))
	c.cx = make([]float64, len(rowIdx))
	c.dest = make([]int, len(rowIdx))
	for j := range n {
		for p := colPtr[j]; p < colPtr[j+1]; p++ {
			a, b := c.iperm[rowIdx[p]], c.iperm[j]
			col, row := max(a, b), min(a, b)
			q := count[col]
			count[col]++
			c.ci[q] = row
			c.dest[p] = q
		}
	}
}

// etree computes the elimination tree of the upper triangle (cs_etree).
func (c *Cholesky) etree() {
	n := c.n
	c.parent = make([]int, n)
	ancestor := make([]int, n)
	for k := range n {
		c.parent[k], ancestor[k] = -1, -1
		for p := c.cp[k]; p < c.cp[k+1]; p++ {
			for i := c.ci[p]; i != -1 && i < k; {
				inext := ancestor[i]
				ancestor[i] = k
				if inext == -1 {
					c.parent[i] = k
				}
				i = inext
			}
		}
	}
}

// ereach puts the pattern of row k of L (without the diagonal) in
// c.stack[top:n] and returns top (cs_ereach).
func (c *Cholesky) ereach(k int) int {
	n := c.n
	top := n
	c.mrk[k] = k + 1
	for p := c.cp[k]; p < c.cp[k+1]; p++ {
		i := c.ci[p]
		if i > k {
			continue
		}
		length := 0
		for ; c.mrk[i] != k+1; i = c.parent[i] {
			c.next[length] = i
			length++
			c.mrk[i] = k + 1
		}
		for length > 0 {
			top--
			length--
			c.stack[top] = c.next[length]
		}
	}
	return top
}

// symbolic counts the entries of each column of L and lays L out.
func (c *Cholesky) symbolic() {
	n := c.n
	c.stack, c.mrk, c.next, c.colNext = make([]int, n), make([]int, n), make([]int, n), make([]int, n)
	counts := make([]int, n)
	for k := range n {
		counts[k]++ // diagonal
		for top := c.ereach(k); top < n; top++ {
			counts[c.stack[top]]++
		}
	}
	c.lp = make([]int, n+1)
	for j := range n {
		c.lp[j+1] = c.lp[j] + counts[j]
	}
	c.li = make([]int, c.lp[n])
	c.lx = make([]float64, c.lp[n])
	clear(c.mrk)
}

// Dropped returns the rows (in the original numbering) whose pivots
// Regularize dropped in the last Factor. The slice is reused by Factor.
func (c *Cholesky) Dropped() []int { return c.dropped }

// N returns the order of the matrix.
func (c *Cholesky) N() int { return c.n }

// NonzerosL returns the number of entries of L.
func (c *Cholesky) NonzerosL() int { return c.lp[c.n] }

// Factor computes L for the values vals, given in the order of the pattern
// passed to Analyze. It returns ErrNotPositiveDefinite on a non-positive
// pivot unless Regularize is set.
func (c *Cholesky) Factor(vals []float64) error {
	n := c.n
	if len(vals) != len(c.dest) {
		return fmt.Errorf("sparse: %d values for a pattern of %d entries", len(vals), len(c.dest))
	}
	clear(c.cx)
	maxDiag := 0.0
	for p, q := range c.dest {
		c.cx[q] += vals[p]
	}
	for k := range n {
		for p := c.cp[k]; p < c.cp[k+1]; p++ {
			if c.ci[p] == k {
				maxDiag = max(maxDiag, math.Abs(c.cx[p]))
			}
		}
	}
	colNext := c.colNext
	copy(colNext, c.lp[:n])
	clear(c.mrk)
	c.dropped = c.dropped[:0]
	x := c.x
	for k := range n {
		top := c.ereach(k)
		x[k] = 0
		for p := c.cp[k]; p < c.cp[k+1]; p++ {
			x[c.ci[p]] += c.cx[p]
		}
		d := x[k]
		diag := d
		x[k] = 0
		for ; top < n; top++ {
			i := c.stack[top]
			lki := x[i] / c.lx[c.lp[i]]
			x[i] = 0
			for p := c.lp[i] + 1; p < colNext[i]; p++ {
				x[c.li[p]] -= c.lx[p] * lki
			}
			d -= lki * lki
			p := colNext[i]
			colNext[i]++
			c.li[p], c.lx[p] = k, lki
		}
		if !(d > Tiny*max(maxDiag, 1)) || d <= c.RelativePivot*diag {
			if !c.Regularize {
				return fmt.Errorf("%w: pivot %d is %g", ErrNotPositiveDefinite, k, d)
			}
			d = Huge
			c.dropped = append(c.dropped, c.perm[k])
		}
		p := colNext[k]
		colNext[k]++
		c.li[p], c.lx[p] = k, math.Sqrt(d)
	}
	return nil
}

// Solve overwrites b with the solution of A x = b, using the last Factor.
func (c *Cholesky) Solve(b []float64) {
	n := c.n
	x := c.x
	for k := range n {
		x[k] = b[c.perm[k]]
	}
	// L y = x, by columns.
	for j := range n {
		x[j] /= c.lx[c.lp[j]]
		for p := c.lp[j] + 1; p < c.lp[j+1]; p++ {
			x[c.li[p]] -= c.lx[p] * x[j]
		}
	}
	// L' z = y.
	for j := n - 1; j >= 0; j-- {
		for p := c.lp[j] + 1; p < c.lp[j+1]; p++ {
			x[j] -= c.lx[p] * x[c.li[p]]
		}
		x[j] /= c.lx[c.lp[j]]
	}
	for k := range n {
		b[c.perm[k]] = x[k]
	}
	clear(x)
}
