// Package sparse holds a sparse Cholesky factorisation for gpusched's
// interior-point LP solver: an approximate-minimum-degree fill-reducing
// ordering, the elimination tree, and a supernodal left-looking numeric
// factorisation that can be repeated on new values with the same pattern.
//
// The symbolic algorithms are those of T. A. Davis, "Direct Methods for
// Sparse Linear Systems", SIAM 2006: elimination tree (section 4.1), row
// patterns by ereach (4.2) and column counts from them; the ordering and
// the numeric factorisation cite their papers where they are defined.
package sparse

import (
	"context"
	"errors"
	"fmt"
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
	dest   []int
	// colCount[j] is the number of entries of column j of L.
	colCount []int
	// Supernodes (supernodal.go): supernode s holds columns
	// [snStart[s], snStart[s+1]) and the rows snRows[snRowPtr[s]:
	// snRowPtr[s+1]] (its own columns first), as a dense column-major block
	// at blocks[snOff[s]:]; snOf[j] is the supernode of column j.
	snStart, snOf    []int
	snRowPtr, snRows []int
	snOff            []int
	blocks           []float64
	destL            []int // block position of each input entry
	diagPos          []int // block position of each diagonal entry
	diag0            []float64
	snPtr, snLink    []int // left-looking update lists
	snHead, rowPos   []int
	tmp              []float64
	// Work space.
	x          []float64
	stack, mrk []int
	next       []int // ereach's path
	// Regularize replaces a pivot below Tiny times the largest diagonal
	// entry by Huge, which in an interior-point method drops the
	// corresponding direction instead of failing (as LIPSOL and PCx do).
	// Dropped lists the rows whose pivots it replaced in the last Factor.
	Regularize bool
	// RelativePivot, with Regularize, also drops a pivot below this
	// fraction of its row's diagonal entry: such a row is numerically a
	// combination of earlier ones (a dependent row of an LP).
	RelativePivot float64
	// PivotFloor, when not nil, holds for each row (original numbering) a
	// value below which its pivot is raised to it instead of being
	// dropped (a regularisation of rows the caller knows to be covered
	// elsewhere). Factor reads it; the caller may change it between calls.
	PivotFloor []float64
	dropped    []int
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
	perm, err := approximateMinimumDegree(ctx, n, colPtr, rowIdx)
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
	// The passes after the ordering are each linear or near it in the
	// size of the pattern; ctx is checked between them.
	for _, pass := range [...]func(){func() { c.permuteUpper(colPtr, rowIdx) }, c.etree, c.symbolic, c.supernodes} {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		pass()
	}
	c.x = make([]float64, n)
	c.diag0 = make([]float64, n)
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

// symbolic counts the entries of each column of L, from the row patterns
// (ereach).
func (c *Cholesky) symbolic() {
	n := c.n
	c.stack, c.mrk, c.next = make([]int, n), make([]int, n), make([]int, n)
	c.colCount = make([]int, n)
	for k := range n {
		c.colCount[k]++ // diagonal
		for top := c.ereach(k); top < n; top++ {
			c.colCount[c.stack[top]]++
		}
	}
	c.stack, c.mrk, c.next = nil, nil, nil
}

// Dropped returns the rows (in the original numbering) whose pivots
// Regularize dropped in the last Factor. The slice is reused by Factor.
func (c *Cholesky) Dropped() []int { return c.dropped }

// N returns the order of the matrix.
func (c *Cholesky) N() int { return c.n }

// FactorFlops returns the multiply-adds of a factorisation, sum of the
// squared column counts of L.
func (c *Cholesky) FactorFlops() float64 {
	s := 0.0
	for _, k := range c.colCount {
		s += float64(k) * float64(k)
	}
	return s
}

// NonzerosL returns the number of entries of L (explicit zeros of merged
// supernodes left out).
func (c *Cholesky) NonzerosL() int {
	s := 0
	for _, k := range c.colCount {
		s += k
	}
	return s
}
