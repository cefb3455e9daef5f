package lp

import (
	"context"
	"math"
)

// stdForm is a model rewritten for the interior-point method as
//
//	minimise c'x  subject to  A x = b,  l <= x <= u
//
// with a slack column for each inequality row (a x - s = 0 with the row's
// bounds on s), fixed variables substituted, and free rows dropped
// (l = -Inf or u = +Inf where a side is open; free variables stay free and
// are regularised by the solver, see hsd.go). Bounds
// are kept as they are rather than shifted to zero, so that a huge bound
// far from the optimum does not cost precision in b. The problem is then
// scaled (see scale.go). The maps below take a solution back to the model.
type stdForm struct {
	m, n int
	// A in compressed sparse column form.
	colPtr, rowIdx []int
	vals           []float64
	b, c, l, u     []float64
	hasL, hasU     []bool
	// Back to the model: x_model[v] = fixed[v] + sum over the std columns k
	// of variable v of colSign[k] * x[k] (x unscaled).
	colVar  []int     // model variable of each std column, -1 for a slack or a copy
	colSign []float64 // +1 (kept for copies and future reflections)
	fixed   []float64 // per model variable
	rowOf   []int     // std row of each model row, -1 if dropped
	// removed lists the model rows dropped as dependent equalities; the
	// solution must be checked against them.
	removed []int
	// objSign is -1 for a maximisation (c was negated).
	objSign float64
	// Scaling: the solver sees R A S, R b, S c / cScale and S^-1 l,
	// S^-1 u (see scale.go).
	rowScale, colScale []float64
	cScale             float64
	// Dense columns split by splitDense: the std form before splitting had
	// mOrig rows and nOrig columns; the chain rows and copies come after,
	// and splitFrom[k-nOrig] is the original column of copy k.
	mOrig, nOrig int
	splitFrom    []int
	// opened marks, by model row, the sides beyond infiniteBound left
	// open (openLower, openUpper); nil when there are none.
	opened []int8
}

// Sides of a row left open (stdForm.opened).
const (
	openLower int8 = 1 << iota
	openUpper
)

// open marks a side of model row i (of rows) as left open.
func (s *stdForm) open(i, rows int, side int8) {
	if s.opened == nil {
		s.opened = make([]int8, rows)
	}
	s.opened[i] |= side
}

// entry is one nonzero of a column.
type entry struct {
	row int
	val float64
}

// checkEvery+1 is the number of rows or columns (a power of 2) a pass over
// a model handles between two checks of its context, so that MaxSeconds and
// a cancelled context stop even the analysis of a huge model within a few
// milliseconds.
const checkEvery = 1<<12 - 1

// newStdForm rewrites a valid model. It checks ctx between its passes and
// within the long ones.
func newStdForm(ctx context.Context, mod *Model) (*stdForm, error) {
	s := &stdForm{objSign: 1}
	if mod.sense == Maximize {
		s.objSign = -1
	}
	nv := len(mod.obj)
	// Room for every variable and a slack per row, so that addCol does not
	// grow its slices one by one on a large model.
	s.reserve(nv + len(mod.rowLo))
	s.fixed = make([]float64, nv)
	first := make([]int, nv) // first std column of each variable, -1 if fixed
	for j := range nv {
		lo, up := mod.colLo[j], mod.colUp[j]
		c := s.objSign * mod.obj[j]
		first[j] = len(s.c)
		if lo == up {
			s.fixed[j] = lo
			first[j] = -1
			continue
		}
		s.addCol(j, 1, c, lo, up)
	}
	s.rowOf = make([]int, len(mod.rowLo))
	tiny := tinyEntries(mod)
	keep := func(i, j int, v float64) bool { return v != 0 && (tiny == nil || !tiny(i, j, v)) }
	// The columns share one backing array sized by a counting pass, so
	// that filling them allocates nothing.
	count := make([]int, len(s.c))
	slacks := 0
	for i := range mod.rowLo {
		if i&checkEvery == 0 && ctx.Err() != nil {
			return nil, ctx.Err()
		}
		lo, up := mod.rowLo[i], mod.rowUp[i]
		if math.IsInf(lo, -1) && math.IsInf(up, 1) {
			continue
		}
		if lo != up {
			slacks++
		}
		idx, val := mod.Row(i)
		for k, j := range idx {
			if first[j] >= 0 && keep(i, j, val[k]) {
				count[first[j]]++
			}
		}
	}
	total := slacks
	for _, c := range count {
		total += c
	}
	backing := make([]entry, total)
	cols := make([][]entry, len(s.c), len(s.c)+slacks)
	off := 0
	for j, c := range count {
		cols[j] = backing[off : off : off+c]
		off += c
	}
	var eqRows []int // std rows without a slack
	for i := range mod.rowLo {
		if i&checkEvery == 0 && ctx.Err() != nil {
			return nil, ctx.Err()
		}
		idx, val := mod.Row(i)
		lo, up := mod.rowLo[i], mod.rowUp[i]
		if math.IsInf(lo, -1) && math.IsInf(up, 1) {
			s.rowOf[i] = -1
			continue
		}
		r := s.m
		s.rowOf[i] = r
		s.m++
		shift := 0.0
		amax, amin := 0.0, math.Inf(1)
		for k, j := range idx {
			if !keep(i, j, val[k]) {
				continue
			}
			f := first[j]
			if f < 0 {
				shift += val[k] * s.fixed[j]
				continue
			}
			cols[f] = append(cols[f], entry{r, val[k]})
			a := math.Abs(val[k])
			amax, amin = max(amax, a), min(amin, a)
		}
		lo, up = lo-shift, up-shift
		if lo == up {
			s.b = append(s.b, lo)
			eqRows = append(eqRows, r)
			continue
		}
		// a x - sigma s = 0 with lo/sigma <= s <= up/sigma, sigma 1 or,
		// for a row of entries far from 1, a power of 2 near their size
		// (exact), so that scaling sees the row whole: a slack of -1
		// beside entries of 1e-200 held the row's scale halfway.
		sigma := 1.0
		if amax > 0 {
			if g := geoMean(amax, amin); g < 0x1p-60 || g > 0x1p60 {
				sigma = pow2(g)
			}
		}
		s.b = append(s.b, 0)
		backing[off] = entry{r, -sigma}
		cols = append(cols, backing[off:off+1:off+1])
		off++
		lo, up = lo/sigma, up/sigma
		// A side of a row beyond infiniteBound (in units of its entries)
		// is left open (see infiniteBound).
		if lo <= -infiniteBound && !math.IsInf(lo, -1) {
			lo = math.Inf(-1)
			s.open(i, len(mod.rowLo), openLower)
		}
		if up >= infiniteBound && !math.IsInf(up, 1) {
			up = math.Inf(1)
			s.open(i, len(mod.rowLo), openUpper)
		}
		s.addCol(-1, 1, 0, lo, up)
	}
	if err := s.scale(ctx, cols); err != nil {
		return nil, err
	}
	cols, err := s.dropDependentRows(ctx, cols, eqRows)
	if err != nil {
		return nil, err
	}
	if cols, err = s.splitDense(ctx, cols); err != nil {
		return nil, err
	}
	s.n = len(s.c)
	s.colPtr = make([]int, s.n+1)
	for j, es := range cols {
		s.colPtr[j+1] = s.colPtr[j] + len(es)
	}
	s.rowIdx = make([]int, s.colPtr[s.n])
	s.vals = make([]float64, s.colPtr[s.n])
	for j, es := range cols {
		if j&checkEvery == 0 && ctx.Err() != nil {
			return nil, ctx.Err()
		}
		for k, e := range es {
			s.rowIdx[s.colPtr[j]+k] = e.row
			s.vals[s.colPtr[j]+k] = e.val
		}
	}
	s.hasL = make([]bool, s.n)
	s.hasU = make([]bool, s.n)
	for j := range s.n {
		s.hasL[j] = !math.IsInf(s.l[j], -1)
		s.hasU[j] = !math.IsInf(s.u[j], 1)
	}
	return s, nil
}

// infiniteBound is the size, in units of a row's entries, beyond which a
// side of the row is left open: x <= 1e20 as a row, or 1e-30 x <= 1, made
// the iterates stall (HiGHS treats bounds beyond 1e20 as infinite,
// infinite_bound). The solution is checked on the model as given, and an
// unbounded verdict is checked with the ray LP of the model as given.
const infiniteBound = 1e20

// Entries of A the solver leaves out (tinyEntries).
const (
	// smallestNormal is the smallest normal float64, 2^-1022.
	smallestNormal = 0x1p-1022
	// dropRelative is how small an entry is, relative to the largest of
	// its row and the largest of its column, to be left out.
	dropRelative = 1e-15
)

// tinyEntries returns a test of the entries of A the solver leaves out,
// or nil when there are none: entries below the smallest normal float64
// (subnormal: 5e-324 x <= 1 is x <= 2e323, and no power-of-2 scaling can
// bring such an entry near 1), and entries at most dropRelative of both
// the largest entry of their row and the largest of their column (below
// the rounding of the terms beside them in either). Geometric-mean
// scaling would otherwise spread the other entries of such a column over
// hundreds of orders of magnitude, until the residuals of the scaled
// problem, which the stopping rules measure, no longer showed the
// model's: 5e-324 x <= 1 beside x + 2y <= 4 gave a point violating
// x + 2y <= 4 by 2.8 reported optimal. CLP drops elements below 1e-20
// (ClpModel's small element value), HiGHS below 1e-9 (small_matrix_value),
// both absolutely; the relative rule keeps a row or a model written in
// small units whole. The solution is checked on the model as given (see
// InteriorPoint), so an entry that mattered fails the check rather than
// passing unseen.
func tinyEntries(m *Model) func(i, j int, v float64) bool {
	lo, hi := math.Inf(1), 0.0
	for _, v := range m.val {
		if a := math.Abs(v); a > 0 {
			lo, hi = min(lo, a), max(hi, a)
		}
	}
	if hi == 0 || lo >= smallestNormal && lo > dropRelative*hi {
		return nil
	}
	rowMax := make([]float64, len(m.rowLo))
	colMax := make([]float64, len(m.obj))
	for i := range m.rowLo {
		idx, val := m.Row(i)
		for k, j := range idx {
			a := math.Abs(val[k])
			rowMax[i], colMax[j] = max(rowMax[i], a), max(colMax[j], a)
		}
	}
	return func(i, j int, v float64) bool {
		a := math.Abs(v)
		return a < smallestNormal || a <= dropRelative*rowMax[i] && a <= dropRelative*colMax[j]
	}
}

// dependentPivot is the relative Cholesky pivot of A_eq A_eq' below which
// an equality row counts as a combination of the others.
const dependentPivot = 1e-9

// dropDependentRows removes equality rows that are numerically combinations
// of other equality rows, found as the dropped pivots of a Cholesky
// factorisation of A_eq A_eq' of the scaled matrix (rows with a slack are
// independent of everything). Such rows would make the normal equations singular. A
// dropped row is either redundant or contradicts the others; the solver
// checks the solution against it.
func (s *stdForm) dropDependentRows(ctx context.Context, cols [][]entry, eqRows []int) ([][]entry, error) {
	if len(eqRows) == 0 {
		return cols, nil
	}
	eqIndex := make([]int, s.m)
	for i := range eqIndex {
		eqIndex[i] = -1
	}
	for e, r := range eqRows {
		eqIndex[r] = e
	}
	t := &stdForm{m: len(eqRows), n: len(cols), colPtr: make([]int, len(cols)+1)}
	for j, es := range cols {
		for _, en := range es {
			if e := eqIndex[en.row]; e >= 0 {
				t.rowIdx = append(t.rowIdx, e)
				t.vals = append(t.vals, en.val)
			}
		}
		t.colPtr[j+1] = len(t.rowIdx)
	}
	ne, err := newNormalEq(ctx, t)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return cols, nil
	}
	ne.chol.RelativePivot = dependentPivot
	ones := make([]float64, t.n)
	for j := range ones {
		ones[j] = 1
	}
	if err := ne.factor(ones); err != nil || len(ne.chol.Dropped()) == 0 {
		return cols, ctx.Err()
	}
	drop := make([]bool, s.m)
	for _, e := range ne.chol.Dropped() {
		drop[eqRows[e]] = true
	}
	newRow := make([]int, s.m)
	k := 0
	for r := range s.m {
		newRow[r] = -1
		if !drop[r] {
			newRow[r] = k
			s.b[k] = s.b[r]
			s.rowScale[k] = s.rowScale[r]
			k++
		}
	}
	s.m, s.b, s.rowScale = k, s.b[:k], s.rowScale[:k]
	for j, es := range cols {
		kept := es[:0]
		for _, en := range es {
			if nr := newRow[en.row]; nr >= 0 {
				kept = append(kept, entry{nr, en.val})
			}
		}
		cols[j] = kept
	}
	for i, r := range s.rowOf {
		if r >= 0 {
			s.rowOf[i] = newRow[r]
			if newRow[r] < 0 {
				s.removed = append(s.removed, i)
			}
		}
	}
	return cols, ctx.Err()
}

// A column of more than splitThreshold entries, such as the level variable
// of a max-min epigraph that appears in every job's row, is split: replaced
// by copies of at most splitChunk entries each, chained by equality rows
// x_1 - x_2 = 0, ... (R. J. Vanderbei, "Splitting dense columns in sparse
// linear systems", Linear Algebra Appl. 152, 1991). The first copy keeps
// the cost and maps back to the model; the others carry no cost. Shorter
// dense columns (tens to hundreds of entries) are left to the normal
// equations' Sherman-Morrison-Woodbury treatment (normal.go), which is
// cheaper but unstable when the column is all that holds its rows
// together, as the level column is once the bottleneck jobs' rows are
// tight: splitting is stable whatever the iterate. Short chunks measured
// best on allocation LPs (2 entries: 0.26 s at 10,000 jobs x 3 types; 32:
// 0.58 s).
const (
	splitThreshold = 1000
	splitChunk     = 2
)

func (s *stdForm) splitDense(ctx context.Context, cols [][]entry) ([][]entry, error) {
	nCols := len(cols)
	s.mOrig, s.nOrig = s.m, nCols
	for j := range nCols {
		if j&checkEvery == 0 && ctx.Err() != nil {
			return nil, ctx.Err()
		}
		es := cols[j]
		if len(es) <= splitThreshold {
			continue
		}
		cols[j] = es[:splitChunk:splitChunk]
		prev := j
		// The copies share one backing array: each holds its chunk and
		// the -1 of its chain row, and its predecessor's +1 goes in the
		// slot after (cols[prev] is appended to in place).
		copies := (len(es) - 1) / splitChunk
		backing := make([]entry, 0, copies*(splitChunk+2))
		for start := splitChunk; start < len(es); start += splitChunk {
			if start&checkEvery < splitChunk && ctx.Err() != nil {
				return nil, ctx.Err()
			}
			chunk := es[start:min(start+splitChunk, len(es))]
			k := len(s.c)
			s.addCol(-1, 1, 0, s.l[j], s.u[j])
			s.colScale = append(s.colScale, s.colScale[j])
			s.splitFrom = append(s.splitFrom, j)
			row := s.m
			s.m++
			s.b = append(s.b, 0)
			s.rowScale = append(s.rowScale, 1)
			// x_prev - x_k = 0.
			cols[prev] = append(cols[prev], entry{row, 1})
			lo := len(backing)
			backing = append(append(backing, chunk...), entry{row, -1})
			cols = append(cols, backing[lo:len(backing):len(backing)+1])
			backing = backing[:len(backing)+1]
			prev = k
		}
	}
	return cols, nil
}

// reserve makes room for n columns.
func (s *stdForm) reserve(n int) {
	s.colVar = make([]int, 0, n)
	s.colSign = make([]float64, 0, n)
	s.c = make([]float64, 0, n)
	s.l = make([]float64, 0, n)
	s.u = make([]float64, 0, n)
}

func (s *stdForm) addCol(v int, sign, c, l, u float64) {
	s.colVar = append(s.colVar, v)
	s.colSign = append(s.colSign, sign)
	s.c = append(s.c, c)
	s.l = append(s.l, l)
	s.u = append(s.u, u)
}

// unscaleX returns the std-form x in unscaled units.
func (s *stdForm) unscaleX(x []float64, tau float64) []float64 {
	out := make([]float64, s.n)
	for j, v := range x {
		out[j] = v * s.colScale[j] / tau
	}
	return out
}

// unscaleY returns the std-form row duals in unscaled units (minimisation
// sense).
func (s *stdForm) unscaleY(y []float64, tau float64) []float64 {
	out := make([]float64, s.m)
	for i, v := range y {
		out[i] = v * s.rowScale[i] * s.cScale / tau
	}
	return out
}

// modelX maps an unscaled std solution back to the model's variables.
func (s *stdForm) modelX(x []float64) []float64 {
	out := make([]float64, len(s.fixed))
	copy(out, s.fixed)
	for k, v := range s.colVar {
		if v >= 0 {
			out[v] += s.colSign[k] * x[k]
		}
	}
	return out
}

// modelDuals maps unscaled std row duals back to the model's rows, in the
// sign convention of Solution.
func (s *stdForm) modelDuals(y []float64) []float64 {
	out := make([]float64, len(s.rowOf))
	for i, r := range s.rowOf {
		if r < 0 {
			continue
		}
		v := y[r]
		// A side left open prices nothing: its dual is 0, not the
		// iterates' residue (which the bound of 1e20 would multiply).
		if s.opened != nil && (v > 0 && s.opened[i]&openLower != 0 || v < 0 && s.opened[i]&openUpper != 0) {
			v = 0
		}
		out[i] = s.objSign * v
	}
	return out
}

// removedRowsHold reports whether x satisfies the model rows that
// dropDependentRows removed, to a relative 1e-7.
func (s *stdForm) removedRowsHold(m *Model, x []float64) bool {
	for _, i := range s.removed {
		idx, val := m.Row(i)
		act, scale := 0.0, 1.0
		for k, j := range idx {
			act += val[k] * x[j]
			scale = max(scale, math.Abs(val[k]*x[j]))
		}
		if math.Abs(act-m.rowLo[i]) > 1e-7*scale {
			return false
		}
	}
	return true
}
