package sparse

import (
	"fmt"
	"math"
	"slices"
)

// The numeric factorisation is supernodal and left-looking (E. G. Ng and
// B. W. Peyton, "Block sparse Cholesky algorithms on advanced uniprocessor
// computers", SIAM J. Sci. Comput. 14(5), 1993; Davis 2006, section 9.1):
// consecutive columns of L with the same structure below the diagonal
// block (a chain in the elimination tree, each column's count one more
// than the next one's) form a supernode, stored as one dense column-major
// block, so that the work is dense block updates instead of scattered
// scalar ones. Supernodes of at most relaxWidth columns are merged into
// their parent when that adds at most relaxZeros explicit zeros per column
// (relaxed amalgamation, C. Ashcraft and R. Grimes, "The influence of
// relaxed supernode partitions on the multifrontal method", ACM TOMS 15(4),
// 1989), which helps the many tiny supernodes of LP normal equations.
const (
	relaxWidth = 16
	relaxZeros = 8
)

// supernodes partitions the columns of L into supernodes, computes their
// row structures, lays out their blocks and maps every input entry to its
// place in them. It needs perm, cp, ci, dest, parent and colCount.
func (c *Cholesky) supernodes() {
	n := c.n
	if n == 0 {
		c.snStart, c.snRowPtr, c.snOff = []int{0}, []int{0}, []int{0}
		return
	}
	// Children counts in the elimination tree.
	nchild := make([]int, n)
	for j := range n {
		if p := c.parent[j]; p >= 0 {
			nchild[p]++
		}
	}
	// Fundamental supernodes.
	start := make([]int, 0, n+1)
	for j := range n {
		if j == 0 || c.parent[j-1] != j || c.colCount[j-1] != c.colCount[j]+1 || nchild[j] != 1 {
			start = append(start, j)
		}
	}
	start = append(start, n)
	// Relaxed amalgamation: merge a supernode into the next one when it is
	// that one's only child in the tree (its last column's parent is the
	// next supernode's first column), it is narrow, and the explicit zeros
	// stay few.
	merged := make([]int, 1, len(start))
	for s := 1; s+1 < len(start); s++ {
		f0 := merged[len(merged)-1]
		last := start[s] - 1
		f1, l1 := start[s], start[s+1]
		w0, w1 := f1-f0, l1-f1
		if c.parent[last] == f1 && nchild[f1] == 1 && w0+w1 <= relaxWidth {
			// Rows of the merged block: the first column's count counts
			// them all; the zeros are what it adds to the columns of both.
			rows := max(c.colCount[f0], c.colCount[f1]+w0)
			zeros := 0
			for j := f0; j < l1; j++ {
				zeros += rows - (j - f0) - c.colCount[j]
			}
			if zeros <= relaxZeros*(w0+w1) {
				continue // f1 joins the current supernode
			}
		}
		merged = append(merged, f1)
	}
	merged = append(merged, n)
	start = merged
	ns := len(start) - 1
	c.snStart = start
	c.snOf = make([]int, n)
	for s := range ns {
		for j := start[s]; j < start[s+1]; j++ {
			c.snOf[j] = s
		}
	}
	// The lower triangle of C by columns: for column c, the rows r > c
	// with C(c, r) != 0, and the C position of each.
	lowCount := make([]int, n+1)
	for k := range n {
		for q := c.cp[k]; q < c.cp[k+1]; q++ {
			if i := c.ci[q]; i < k {
				lowCount[i+1]++
			}
		}
	}
	for j := range n {
		lowCount[j+1] += lowCount[j]
	}
	lowRow := make([]int, lowCount[n])
	lowPos := make([]int, lowCount[n])
	next := slices.Clone(lowCount[:n])
	for k := range n {
		for q := c.cp[k]; q < c.cp[k+1]; q++ {
			if i := c.ci[q]; i < k {
				lowRow[next[i]], lowPos[next[i]] = k, q
				next[i]++
			}
		}
	}
	// Row structures, children before parents (a supernode's parent has a
	// larger index).
	// The children of each supernode as linked lists (child, nextChild).
	child := make([]int, ns)
	nextChild := make([]int, ns)
	for s := range child {
		child[s] = -1
	}
	c.snRowPtr = make([]int, ns+1)
	// A supernode has about as many rows as its first column has entries.
	est := 0
	for s := range ns {
		est += c.colCount[start[s]]
	}
	c.snRows = make([]int, 0, est+est/8)
	mark := make([]int, n)
	for i := range mark {
		mark[i] = -1
	}
	var rows []int
	for s := range ns {
		f, l := start[s], start[s+1]
		rows = rows[:0]
		for j := f; j < l; j++ {
			mark[j] = s
		}
		add := func(r int) {
			if mark[r] != s {
				mark[r] = s
				rows = append(rows, r)
			}
		}
		for j := f; j < l; j++ {
			for q := lowCount[j]; q < lowCount[j+1]; q++ {
				if r := lowRow[q]; r >= l {
					add(r)
				}
			}
		}
		for t := child[s]; t >= 0; t = nextChild[t] {
			for q := c.snRowPtr[t]; q < c.snRowPtr[t+1]; q++ {
				if r := c.snRows[q]; r >= l {
					add(r)
				}
			}
		}
		slices.Sort(rows)
		for j := f; j < l; j++ {
			c.snRows = append(c.snRows, j)
		}
		c.snRows = append(c.snRows, rows...)
		c.snRowPtr[s+1] = len(c.snRows)
		if p := c.parent[l-1]; p >= 0 {
			ps := c.snOf[p]
			child[ps], nextChild[s] = s, child[ps]
		}
	}
	// Blocks and the map of C's entries into them.
	c.snOff = make([]int, ns+1)
	for s := range ns {
		nr := c.snRowPtr[s+1] - c.snRowPtr[s]
		c.snOff[s+1] = c.snOff[s] + nr*(start[s+1]-start[s])
	}
	c.blocks = make([]float64, c.snOff[ns])
	blockPos := make([]int, len(c.ci))
	rowPos := make([]int, n)
	for s := range ns {
		f, l := start[s], start[s+1]
		nr := c.snRowPtr[s+1] - c.snRowPtr[s]
		for q, r := range c.snRows[c.snRowPtr[s]:c.snRowPtr[s+1]] {
			rowPos[r] = q
		}
		for j := f; j < l; j++ {
			col := c.snOff[s] + (j-f)*nr
			// The diagonal sits in column j of C.
			for q := c.cp[j]; q < c.cp[j+1]; q++ {
				if c.ci[q] == j {
					blockPos[q] = col + rowPos[j]
				}
			}
			for q := lowCount[j]; q < lowCount[j+1]; q++ {
				blockPos[lowPos[q]] = col + rowPos[lowRow[q]]
			}
		}
	}
	c.destL = make([]int, len(c.dest))
	for p, q := range c.dest {
		c.destL[p] = blockPos[q]
	}
	c.diagPos = make([]int, n)
	for s := range ns {
		f, l := start[s], start[s+1]
		nr := c.snRowPtr[s+1] - c.snRowPtr[s]
		for j := f; j < l; j++ {
			c.diagPos[j] = c.snOff[s] + (j-f)*nr + (j - f)
		}
	}
	c.snPtr = make([]int, ns)
	c.snLink = make([]int, ns)
	c.snHead = make([]int, ns)
	c.rowPos = rowPos
	maxRows := 0
	for s := range ns {
		maxRows = max(maxRows, c.snRowPtr[s+1]-c.snRowPtr[s])
	}
	maxWidth := 0
	for s := range ns {
		maxWidth = max(maxWidth, start[s+1]-start[s])
	}
	c.tmp = make([]float64, 4*maxWidth+4)
}

// Factor computes L for the values vals, given in the order of the pattern
// passed to Analyze. It returns ErrNotPositiveDefinite on a non-positive
// pivot unless Regularize is set.
func (c *Cholesky) Factor(vals []float64) error {
	if len(vals) != len(c.destL) {
		return fmt.Errorf("sparse: %d values for a pattern of %d entries", len(vals), len(c.destL))
	}
	blocks := c.blocks
	clear(blocks)
	for p, q := range c.destL {
		blocks[q] += vals[p]
	}
	maxDiag := 0.0
	for j, q := range c.diagPos {
		maxDiag = max(maxDiag, math.Abs(blocks[q]))
		c.diag0[j] = blocks[q]
	}
	tiny := Tiny * max(maxDiag, 1)
	c.dropped = c.dropped[:0]
	ns := len(c.snStart) - 1
	for s := range ns {
		c.snHead[s] = -1
	}
	rowPos := c.rowPos
	for s := range ns {
		f, l := c.snStart[s], c.snStart[s+1]
		w := l - f
		rows := c.snRows[c.snRowPtr[s]:c.snRowPtr[s+1]]
		nr := len(rows)
		blk := blocks[c.snOff[s] : c.snOff[s]+nr*w]
		for q, r := range rows {
			rowPos[r] = q
		}
		// Updates from the supernodes whose next rows fall in [f, l).
		for d := c.snHead[s]; d >= 0; {
			nextD := c.snLink[d]
			c.update(d, s, f, l, nr, blk)
			d = nextD
		}
		// Dense factorisation of the block: the diagonal part, then the
		// rows below, column by column.
		for k := range w {
			col := blk[k*nr : (k+1)*nr]
			d := col[k]
			diag := c.origDiag(f+k, d)
			if c.PivotFloor != nil {
				if fl := c.PivotFloor[c.perm[f+k]]; d < fl {
					d = fl
				}
			}
			if !(d > tiny) || d <= c.RelativePivot*diag {
				if !c.Regularize {
					return fmt.Errorf("%w: pivot %d is %g", ErrNotPositiveDefinite, f+k, d)
				}
				d = Huge
				c.dropped = append(c.dropped, c.perm[f+k])
			}
			piv := math.Sqrt(d)
			col[k] = piv
			inv := 1 / piv
			below := col[k+1:]
			for i := range below {
				below[i] *= inv
			}
			// Right-looking update of the later columns of the block.
			for j := k + 1; j < w; j++ {
				a := col[j]
				if a == 0 {
					continue
				}
				dst := blk[j*nr+j : (j+1)*nr]
				src := col[j:]
				for i, v := range src {
					dst[i] -= v * a
				}
			}
		}
		// Link s to the supernode of its first row below the block.
		if w < nr {
			c.snPtr[s] = w
			t := c.snOf[rows[w]]
			c.snLink[s] = c.snHead[t]
			c.snHead[t] = s
		}
	}
	return nil
}

// origDiag returns the diagonal entry of column j before any update: the
// value the relative pivot test compares with. It is kept from the
// assembly.
func (c *Cholesky) origDiag(j int, cur float64) float64 {
	if c.RelativePivot == 0 {
		return cur
	}
	return c.diag0[j]
}

// update subtracts from supernode s (columns [f, l), block blk with nr
// rows, rowPos set for its rows) the contribution of the finished
// supernode d, whose rows from snPtr[d] on fall in [f, l) and below, and
// links d to the next supernode it updates.
func (c *Cholesky) update(d, s, f, l, nr int, blk []float64) {
	df, dl := c.snStart[d], c.snStart[d+1]
	wd := dl - df
	drows := c.snRows[c.snRowPtr[d]:c.snRowPtr[d+1]]
	nrd := len(drows)
	dblk := c.blocks[c.snOff[d] : c.snOff[d]+nrd*wd]
	q1 := c.snPtr[d]
	q2 := q1
	for q2 < nrd && drows[q2] < l {
		q2++
	}
	rowPos := c.rowPos
	// Four target columns at a time: for each row i, the four dot
	// products of row i of d's block with rows jj..jj+3, accumulated in
	// registers over d's columns (a register-blocked SYRK/GEMM kernel).
	ak := c.tmp[:4*wd]
	for jj := q1; jj < q2; jj += 4 {
		nb := min(4, q2-jj)
		clear(ak)
		for k := range wd {
			for cc := range nb {
				ak[4*k+cc] = dblk[k*nrd+jj+cc]
			}
		}
		t0 := (drows[jj] - f) * nr
		t1, t2, t3 := t0, t0, t0
		if nb > 1 {
			t1 = (drows[jj+1] - f) * nr
		}
		if nb > 2 {
			t2 = (drows[jj+2] - f) * nr
		}
		if nb > 3 {
			t3 = (drows[jj+3] - f) * nr
		}
		for i := jj; i < nrd; i++ {
			var s0, s1, s2, s3 float64
			idx := i
			for k := range wd {
				v := dblk[idx]
				idx += nrd
				a := ak[4*k : 4*k+4 : 4*k+4]
				s0 += v * a[0]
				s1 += v * a[1]
				s2 += v * a[2]
				s3 += v * a[3]
			}
			pos := rowPos[drows[i]]
			blk[t0+pos] -= s0
			if i > jj && nb > 1 {
				blk[t1+pos] -= s1
			}
			if i > jj+1 && nb > 2 {
				blk[t2+pos] -= s2
			}
			if i > jj+2 && nb > 3 {
				blk[t3+pos] -= s3
			}
		}
	}
	if q2 < nrd {
		c.snPtr[d] = q2
		t := c.snOf[drows[q2]]
		c.snLink[d] = c.snHead[t]
		c.snHead[t] = d
	}
}

// Solve overwrites b with the solution of A x = b, using the last Factor.
func (c *Cholesky) Solve(b []float64) {
	n := c.n
	x := c.x
	for k := range n {
		x[k] = b[c.perm[k]]
	}
	ns := len(c.snStart) - 1
	// L y = x.
	for s := range ns {
		f, l := c.snStart[s], c.snStart[s+1]
		rows := c.snRows[c.snRowPtr[s]:c.snRowPtr[s+1]]
		nr := len(rows)
		blk := c.blocks[c.snOff[s] : c.snOff[s]+nr*(l-f)]
		for k := range l - f {
			col := blk[k*nr : (k+1)*nr]
			xj := x[f+k] / col[k]
			x[f+k] = xj
			if xj == 0 {
				continue
			}
			for i := k + 1; i < nr; i++ {
				x[rows[i]] -= col[i] * xj
			}
		}
	}
	// L' z = y.
	for s := ns - 1; s >= 0; s-- {
		f, l := c.snStart[s], c.snStart[s+1]
		rows := c.snRows[c.snRowPtr[s]:c.snRowPtr[s+1]]
		nr := len(rows)
		blk := c.blocks[c.snOff[s] : c.snOff[s]+nr*(l-f)]
		for k := l - f - 1; k >= 0; k-- {
			col := blk[k*nr : (k+1)*nr]
			v := x[f+k]
			for i := k + 1; i < nr; i++ {
				v -= col[i] * x[rows[i]]
			}
			x[f+k] = v / col[k]
		}
	}
	for k := range n {
		b[c.perm[k]] = x[k]
	}
	clear(x)
}
