package lp

import "math"

// stdForm is a model rewritten for the interior-point method as
//
//	minimise c'x  subject to  A x = b,  0 <= x,  x_j <= u_j for j in ub
//
// with a slack column for each inequality row, variables shifted to a zero
// lower bound (or reflected when only their upper bound is finite), free
// variables split in two, fixed variables substituted, and free rows
// dropped. The maps below take a solution back to the model.
type stdForm struct {
	m, n int
	// A in compressed sparse column form.
	colPtr, rowIdx []int
	vals           []float64
	b, c, u        []float64 // u[j] = +Inf where x_j has no upper bound
	// Back to the model: x_orig[j] = shift[j] + sum over the std columns k
	// of variable j of sign[k] * x[k].
	colVar  []int     // model variable of each std column, -1 for a slack
	colSign []float64 // +1 or -1
	shift   []float64 // per model variable
	rowOf   []int     // std row of each model row, -1 if dropped
	// objSign is -1 for a maximisation (c was negated).
	objSign float64
}

// newStdForm rewrites a valid model.
func newStdForm(mod *Model) *stdForm {
	s := &stdForm{objSign: 1}
	if mod.sense == Maximize {
		s.objSign = -1
	}
	nv := len(mod.obj)
	s.shift = make([]float64, nv)
	type colRef struct{ first, count int }
	cols := make([]colRef, nv)
	for j := range nv {
		lo, up := mod.colLo[j], mod.colUp[j]
		c := s.objSign * mod.obj[j]
		switch {
		case lo == up:
			s.shift[j] = lo
			cols[j] = colRef{first: -1}
		case !math.IsInf(lo, -1):
			s.shift[j] = lo
			cols[j] = colRef{len(s.c), 1}
			s.addCol(j, 1, c, up-lo)
		case !math.IsInf(up, 1):
			s.shift[j] = up
			cols[j] = colRef{len(s.c), 1}
			s.addCol(j, -1, -c, math.Inf(1))
		default:
			cols[j] = colRef{len(s.c), 2}
			s.addCol(j, 1, c, math.Inf(1))
			s.addCol(j, -1, -c, math.Inf(1))
		}
	}
	// Rows: count entries per std column first.
	s.rowOf = make([]int, len(mod.rowLo))
	colEntries := make([][]entry, len(s.c))
	for i := range mod.rowLo {
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
		for k, j := range idx {
			shift += val[k] * s.shift[j]
			ref := cols[j]
			for q := ref.first; q >= 0 && q < ref.first+ref.count; q++ {
				colEntries[q] = append(colEntries[q], entry{r, val[k] * s.colSign[q]})
			}
		}
		lo, up = lo-shift, up-shift
		switch {
		case lo == up:
			s.b = append(s.b, lo)
		case !math.IsInf(lo, -1):
			// a x - s = lo + ..., with s' = s - lo in [0, up - lo].
			s.b = append(s.b, lo)
			colEntries = append(colEntries, []entry{{r, -1}})
			s.addCol(-1, 1, 0, up-lo)
		default:
			// a x + s' = up, s' >= 0.
			s.b = append(s.b, up)
			colEntries = append(colEntries, []entry{{r, 1}})
			s.addCol(-1, 1, 0, math.Inf(1))
		}
	}
	colEntries = s.splitDense(colEntries)
	s.n = len(s.c)
	s.colPtr = make([]int, s.n+1)
	for j, es := range colEntries {
		s.colPtr[j+1] = s.colPtr[j] + len(es)
	}
	s.rowIdx = make([]int, s.colPtr[s.n])
	s.vals = make([]float64, s.colPtr[s.n])
	for j, es := range colEntries {
		for k, e := range es {
			s.rowIdx[s.colPtr[j]+k] = e.row
			s.vals[s.colPtr[j]+k] = e.val
		}
	}
	return s
}

// entry is one nonzero of a column.
type entry struct {
	row int
	val float64
}

// Dense columns, such as the level variable of a max-min epigraph that
// appears in every job's row, would make A Theta A' dense. splitDense
// replaces each column of more than denseThreshold entries by copies of at
// most splitChunk entries each, chained by equality rows x_1 - x_2 = 0, ...
// (R. J. Vanderbei, "Splitting dense columns in sparse linear systems",
// Linear Algebra Appl. 152, 1991). The first copy keeps the cost and maps
// back to the model; the others carry no cost.
const (
	denseThreshold = 64
	splitChunk     = 2
)

func (s *stdForm) splitDense(cols [][]entry) [][]entry {
	nCols := len(cols)
	for j := range nCols {
		es := cols[j]
		if len(es) <= denseThreshold {
			continue
		}
		cols[j] = es[:splitChunk]
		prev := j
		for start := splitChunk; start < len(es); start += splitChunk {
			chunk := es[start:min(start+splitChunk, len(es))]
			k := len(s.c)
			s.addCol(-1, 1, 0, s.u[j])
			row := s.m
			s.m++
			s.b = append(s.b, 0)
			// x_prev - x_k = 0.
			cols[prev] = append(cols[prev][:len(cols[prev]):len(cols[prev])], entry{row, 1})
			cols = append(cols, append(append([]entry(nil), chunk...), entry{row, -1}))
			prev = k
		}
	}
	return cols
}

func (s *stdForm) addCol(v int, sign, c, u float64) {
	s.colVar = append(s.colVar, v)
	s.colSign = append(s.colSign, sign)
	s.c = append(s.c, c)
	s.u = append(s.u, u)
}

// modelX maps a std solution back to the model's variables.
func (s *stdForm) modelX(x []float64) []float64 {
	out := make([]float64, len(s.shift))
	copy(out, s.shift)
	for k, v := range s.colVar {
		if v >= 0 {
			out[v] += s.colSign[k] * x[k]
		}
	}
	return out
}

// modelDuals maps std row duals back to the model's rows, in the sign
// convention of Solution.
func (s *stdForm) modelDuals(y []float64) []float64 {
	out := make([]float64, len(s.rowOf))
	for i, r := range s.rowOf {
		if r >= 0 {
			out[i] = s.objSign * y[r]
		}
	}
	return out
}
