package sparse

import (
	"errors"
	"math"
)

// ErrSingular is returned by LU.Solve when the factored columns do not yet
// make a nonsingular matrix.
var ErrSingular = errors.New("sparse: LU of a singular or incomplete matrix")

// LU is the sparse LU factorisation P B = L U of a square matrix B built
// one column at a time, left-looking with partial pivoting (J. R. Gilbert
// and T. Peierls, "Sparse partial pivoting in time proportional to
// arithmetic operations", SIAM J. Sci. Stat. Comput. 9(5), 1988; Davis
// 2006, section 6.3, cs_lu): each new column is reduced by a sparse
// triangular solve with the L so far, whose nonzero pattern a depth-first
// search finds, and pivots on its largest entry among the rows not yet
// pivotal. A column whose largest such entry is below tol times its size
// depends on the earlier ones and is refused, which makes Add a
// rank-revealing crash for simplex bases. Not safe for concurrent use.
type LU struct {
	// RowCount, when set, holds a cost for pivoting on each row (typically
	// its number of entries in the matrix): among the candidate pivots
	// within a factor 0.1 of the largest, the cheapest row is
	// chosen, so that dense rows are pivoted last and L stays sparse (the
	// threshold partial pivoting of sparse codes).
	RowCount []int
	n        int
	rank     int
	pinv     []int // pinv[row] = step that pivoted on row, -1 if none
	perm     []int // perm[k] = row of step k
	// L by steps: strictly lower entries with original row indices (the
	// unit diagonal is implicit). U by steps: entries (step, value) above
	// the diagonal, and the diagonal separately.
	lp, li []int
	lx     []float64
	up, ui []int
	ux     []float64
	udiag  []float64
	// Work space.
	x          []float64
	stack, out []int
	iters      []int
	mark       []int
	stamp      int
}

// luThreshold is the threshold of the pivot choice with RowCount.
const luThreshold = 0.1

// NewLU prepares the factorisation of an n x n matrix.
func NewLU(n int) *LU {
	f := &LU{n: n, pinv: make([]int, n), perm: make([]int, 0, n), lp: []int{0}, up: []int{0},
		x: make([]float64, n), stack: make([]int, 0, n), out: make([]int, 0, n), mark: make([]int, n)}
	for i := range f.pinv {
		f.pinv[i] = -1
	}
	return f
}

// Rank returns the number of columns accepted so far.
func (f *LU) Rank() int { return f.rank }

// Pivotal reports whether row i has been pivoted on.
func (f *LU) Pivotal(i int) bool { return f.pinv[i] >= 0 }

// reach puts in f.out the rows that the solve with column (rows) touches,
// in topological order (a row before the rows its L column updates).
func (f *LU) reach(rows []int) {
	f.stamp++
	f.out = f.out[:0]
	for _, r := range rows {
		if f.mark[r] == f.stamp {
			continue
		}
		// Iterative depth-first search from r; a node is emitted after its
		// descendants, so f.out is in reverse topological order.
		f.stack = append(f.stack[:0], r)
		f.mark[r] = f.stamp
		// iters[k] is the next L entry of stacked node k to visit.
		iters := append(f.iters[:0], 0)
		for len(f.stack) > 0 {
			top := f.stack[len(f.stack)-1]
			it := &iters[len(iters)-1]
			j := f.pinv[top]
			pushed := false
			if j >= 0 {
				for p := f.lp[j] + *it; p < f.lp[j+1]; p++ {
					*it++
					c := f.li[p]
					if f.mark[c] != f.stamp {
						f.mark[c] = f.stamp
						f.stack = append(f.stack, c)
						iters = append(iters, 0)
						pushed = true
						break
					}
				}
			}
			if !pushed {
				f.stack = f.stack[:len(f.stack)-1]
				iters = iters[:len(iters)-1]
				f.out = append(f.out, top)
			}
		}
		f.iters = iters
	}
	// Reverse into topological order.
	for a, b := 0, len(f.out)-1; a < b; a, b = a+1, b-1 {
		f.out[a], f.out[b] = f.out[b], f.out[a]
	}
}

// Add factors the column with entries vals at rows as the next column if it
// is independent of the columns accepted so far (its largest entry among
// the rows not yet pivotal is above tol times its largest entry), and
// reports whether it was accepted.
func (f *LU) Add(rows []int, vals []float64, tol float64) bool {
	if f.rank == f.n {
		return false
	}
	f.reach(rows)
	x := f.x
	size := 0.0
	for k, r := range rows {
		x[r] += vals[k]
		size = max(size, math.Abs(vals[k]))
	}
	for _, i := range f.out {
		j := f.pinv[i]
		if j < 0 || x[i] == 0 {
			continue
		}
		xi := x[i]
		for p := f.lp[j]; p < f.lp[j+1]; p++ {
			x[f.li[p]] -= f.lx[p] * xi
		}
	}
	piv, best := -1, 0.0
	for _, i := range f.out {
		if f.pinv[i] < 0 {
			if a := math.Abs(x[i]); a > best {
				piv, best = i, a
			}
		}
	}
	if piv >= 0 && f.RowCount != nil {
		for _, i := range f.out {
			if f.pinv[i] < 0 && math.Abs(x[i]) >= luThreshold*best && f.RowCount[i] < f.RowCount[piv] {
				piv = i
			}
		}
	}
	if piv < 0 || best <= tol*max(size, 1e-300) {
		for _, i := range f.out {
			x[i] = 0
		}
		return false
	}
	k := f.rank
	pv := x[piv]
	for _, i := range f.out {
		v := x[i]
		x[i] = 0
		if v == 0 || i == piv {
			continue
		}
		if j := f.pinv[i]; j >= 0 {
			f.ui = append(f.ui, j)
			f.ux = append(f.ux, v)
		} else {
			f.li = append(f.li, i)
			f.lx = append(f.lx, v/pv)
		}
	}
	f.up = append(f.up, len(f.ui))
	f.lp = append(f.lp, len(f.li))
	f.udiag = append(f.udiag, pv)
	f.pinv[piv] = k
	f.perm = append(f.perm, piv)
	f.rank++
	return true
}

// Solve overwrites b (indexed by row) with the solution x of B x = b
// (indexed by column: x[k] is the weight of the k-th accepted column).
func (f *LU) Solve(b []float64) error {
	if f.rank < f.n {
		return ErrSingular
	}
	x := f.x
	// L z = P b: forward in step order over rows.
	copy(x, b)
	for k := range f.n {
		v := x[f.perm[k]]
		if v == 0 {
			continue
		}
		for p := f.lp[k]; p < f.lp[k+1]; p++ {
			x[f.li[p]] -= f.lx[p] * v
		}
	}
	// U y = z: z_k sits at row perm[k].
	for k := range f.n {
		b[k] = x[f.perm[k]]
	}
	for k := f.n - 1; k >= 0; k-- {
		v := b[k] / f.udiag[k]
		b[k] = v
		if v == 0 {
			continue
		}
		for p := f.up[k]; p < f.up[k+1]; p++ {
			b[f.ui[p]] -= f.ux[p] * v
		}
	}
	clear(x)
	return nil
}

// SolveT overwrites c (indexed by column) with the solution y of B'y = c
// (indexed by row).
func (f *LU) SolveT(c []float64) error {
	if f.rank < f.n {
		return ErrSingular
	}
	// U'z = c, forward over steps: z_k = (c_k - sum_{j<k} U_jk z_j) / U_kk.
	for k := range f.n {
		v := c[k]
		for p := f.up[k]; p < f.up[k+1]; p++ {
			v -= f.ux[p] * c[f.ui[p]]
		}
		c[k] = v / f.udiag[k]
	}
	// L'w = z, backward over steps; w at row perm[k] is
	// z_k - sum over L's column k of L_ik w_i.
	x := f.x
	for k := f.n - 1; k >= 0; k-- {
		v := c[k]
		for p := f.lp[k]; p < f.lp[k+1]; p++ {
			v -= f.lx[p] * x[f.li[p]]
		}
		x[f.perm[k]] = v
	}
	copy(c, x)
	clear(x)
	return nil
}

// Nonzeros returns the entries of L and U.
func (f *LU) Nonzeros() int { return len(f.li) + len(f.ui) + f.rank }
