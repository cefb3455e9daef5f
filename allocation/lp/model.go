package lp

import (
	"fmt"
	"math"
	"slices"
)

// Sense says whether the objective is minimised or maximised.
type Sense int8

const (
	// Minimize the objective.
	Minimize Sense = 1
	// Maximize the objective.
	Maximize Sense = -1
)

func (s Sense) String() string {
	switch s {
	case Minimize:
		return "minimize"
	case Maximize:
		return "maximize"
	}
	return fmt.Sprintf("Sense(%d)", int8(s))
}

// Inf is an infinite bound: use -Inf for no lower bound and Inf for no
// upper bound.
var Inf = math.Inf(1)

// Model is a linear program
//
//	minimise or maximise  c'x
//	subject to            rowLo <= A x <= rowUp
//	                      colLo <=  x  <= colUp
//
// built one variable and one row at a time; A is stored by rows, sparse.
// Bounds may be infinite; a row with equal bounds is an equality. A Model is
// not safe for concurrent modification; solvers only read it.
type Model struct {
	sense Sense
	// Columns.
	obj, colLo, colUp []float64
	colNames          []string
	// Rows, in compressed sparse row form: row i holds the entries
	// idx[start[i]:start[i+1]] and val[start[i]:start[i+1]].
	rowLo, rowUp []float64
	start, idx   []int
	val          []float64
	rowNames     []string
	name         string
	// objConst is the objective constant.
	objConst float64
	// buildErr records the first misuse of the builder, for Validate.
	buildErr error
}

// NewModel returns an empty model with the given sense.
func NewModel(sense Sense) *Model {
	return &Model{sense: sense, start: []int{0}}
}

// SetName names the model (used by [Model.WriteMPS]).
func (m *Model) SetName(name string) { m.name = name }

// Name returns the model's name.
func (m *Model) Name() string { return m.name }

// SetObjectiveConstant sets a constant added to the objective: the
// objective is c'x + constant. Solvers report it in Solution.Objective; MPS
// files carry it as minus the RHS of the objective row.
func (m *Model) SetObjectiveConstant(c float64) { m.objConst = c }

// ObjectiveConstant returns the constant added to the objective.
func (m *Model) ObjectiveConstant() float64 { return m.objConst }

// Sense returns the objective sense.
func (m *Model) Sense() Sense { return m.sense }

// NumVars returns the number of variables.
func (m *Model) NumVars() int { return len(m.obj) }

// NumRows returns the number of rows.
func (m *Model) NumRows() int { return len(m.rowLo) }

// NumNonzeros returns the number of stored entries of A.
func (m *Model) NumNonzeros() int { return len(m.idx) }

// AddVar adds a variable with bounds lo <= x <= up and objective
// coefficient obj, and returns its index. Bounds may be -Inf and Inf.
// Bad values (NaN, crossed bounds) are reported by [Model.Validate] and by
// every solver, not here.
func (m *Model) AddVar(lo, up, obj float64) int {
	m.obj = append(m.obj, obj)
	m.colLo = append(m.colLo, lo)
	m.colUp = append(m.colUp, up)
	if m.colNames != nil {
		m.colNames = append(m.colNames, "")
	}
	return len(m.obj) - 1
}

// MaxGrow caps each argument of Model.Grow (1,048,576): a hint beyond it
// makes room for that many only, so a wrong hint cannot exhaust memory.
const MaxGrow = 1 << 20

// Grow makes room for vars more variables, rows more rows and nonzeros
// more entries of A, so that adding them does not grow the model's slices
// step by step. The arguments are hints: a negative one counts as 0, and
// each is capped at MaxGrow (the model still grows past them as variables,
// rows and entries are added). It changes nothing else.
func (m *Model) Grow(vars, rows, nonzeros int) {
	vars, rows, nonzeros = min(max(vars, 0), MaxGrow), min(max(rows, 0), MaxGrow), min(max(nonzeros, 0), MaxGrow)
	m.obj = slices.Grow(m.obj, vars)
	m.colLo = slices.Grow(m.colLo, vars)
	m.colUp = slices.Grow(m.colUp, vars)
	m.rowLo = slices.Grow(m.rowLo, rows)
	m.rowUp = slices.Grow(m.rowUp, rows)
	m.start = slices.Grow(m.start, rows)
	m.idx = slices.Grow(m.idx, nonzeros)
	m.val = slices.Grow(m.val, nonzeros)
}

// AddVars adds n variables with the same bounds and objective coefficient
// and returns the index of the first.
func (m *Model) AddVars(n int, lo, up, obj float64) int {
	first := len(m.obj)
	for range n {
		m.AddVar(lo, up, obj)
	}
	return first
}

// AddRow adds the row lo <= sum_k val[k] x[idx[k]] <= up and returns its
// index. The slices are copied. Use lo == up for an equality and -Inf or
// Inf for a one-sided row. Entries may come in any order; a variable may
// appear only once. Bad input is reported by [Model.Validate].
func (m *Model) AddRow(lo, up float64, idx []int, val []float64) int {
	n := min(len(idx), len(val))
	if len(idx) != len(val) && m.buildErr == nil {
		m.buildErr = invalid("row %d: AddRow got %d indices and %d values", len(m.rowLo), len(idx), len(val))
	}
	m.idx = append(m.idx, idx[:n]...)
	m.val = append(m.val, val[:n]...)
	m.start = append(m.start, len(m.idx))
	m.rowLo = append(m.rowLo, lo)
	m.rowUp = append(m.rowUp, up)
	if m.rowNames != nil {
		m.rowNames = append(m.rowNames, "")
	}
	return len(m.rowLo) - 1
}

// SetObjective sets the objective coefficient of variable j.
func (m *Model) SetObjective(j int, c float64) { m.obj[j] = c }

// SetVarBounds sets the bounds of variable j.
func (m *Model) SetVarBounds(j int, lo, up float64) { m.colLo[j], m.colUp[j] = lo, up }

// SetRowBounds sets the bounds of row i.
func (m *Model) SetRowBounds(i int, lo, up float64) { m.rowLo[i], m.rowUp[i] = lo, up }

// SetVarName names variable j (for MPS output and error messages).
func (m *Model) SetVarName(j int, name string) {
	if m.colNames == nil {
		m.colNames = make([]string, len(m.obj))
	}
	m.colNames[j] = name
}

// SetRowName names row i.
func (m *Model) SetRowName(i int, name string) {
	if m.rowNames == nil {
		m.rowNames = make([]string, len(m.rowLo))
	}
	m.rowNames[i] = name
}

// VarName returns the name of variable j, or "x<j>" if it has none.
func (m *Model) VarName(j int) string {
	if m.colNames != nil && m.colNames[j] != "" {
		return m.colNames[j]
	}
	return fmt.Sprintf("x%d", j)
}

// RowName returns the name of row i, or "r<i>" if it has none.
func (m *Model) RowName(i int) string {
	if m.rowNames != nil && m.rowNames[i] != "" {
		return m.rowNames[i]
	}
	return fmt.Sprintf("r%d", i)
}

// Objective returns the objective coefficients (not a copy: do not modify).
func (m *Model) Objective() []float64 { return m.obj }

// VarBounds returns the lower and upper bounds of the variables (not
// copies: do not modify).
func (m *Model) VarBounds() (lo, up []float64) { return m.colLo, m.colUp }

// RowBounds returns the lower and upper bounds of the rows (not copies).
func (m *Model) RowBounds() (lo, up []float64) { return m.rowLo, m.rowUp }

// Row returns the entries of row i (not copies: do not modify).
func (m *Model) Row(i int) (idx []int, val []float64) {
	return m.idx[m.start[i]:m.start[i+1]], m.val[m.start[i]:m.start[i+1]]
}

// Validate checks the model: a defined sense; finite objective
// coefficients and matrix entries; bounds that are not NaN, not +Inf below
// or -Inf above, and not crossed; variable indices in range and not repeated
// within a row. The error wraps [ErrInvalidModel] and names the first
// problem found.
func (m *Model) Validate() error {
	if m.buildErr != nil {
		return m.buildErr
	}
	if m.sense != Minimize && m.sense != Maximize {
		return invalid("objective sense %d is neither Minimize nor Maximize", int8(m.sense))
	}
	if !finite(m.objConst) {
		return invalid("objective constant is %v", m.objConst)
	}
	for j, c := range m.obj {
		if !finite(c) {
			return invalid("objective coefficient of %s is %v", m.VarName(j), c)
		}
		if err := checkBounds(m.colLo[j], m.colUp[j]); err != "" {
			return invalid("variable %s: %s", m.VarName(j), err)
		}
	}
	n := len(m.obj)
	seen := make([]int, n) // seen[j] = 1 + last row that used j
	for i := range m.rowLo {
		if err := checkBounds(m.rowLo[i], m.rowUp[i]); err != "" {
			return invalid("row %s: %s", m.RowName(i), err)
		}
		idx, val := m.Row(i)
		for k, j := range idx {
			switch {
			case j < 0 || j >= n:
				return invalid("row %s: variable index %d out of range [0, %d)", m.RowName(i), j, n)
			case seen[j] == i+1:
				return invalid("row %s: variable %s appears twice", m.RowName(i), m.VarName(j))
			case !finite(val[k]):
				return invalid("row %s: coefficient of %s is %v", m.RowName(i), m.VarName(j), val[k])
			}
			seen[j] = i + 1
		}
	}
	return nil
}

func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

func checkBounds(lo, up float64) string {
	switch {
	case math.IsNaN(lo) || math.IsNaN(up):
		return fmt.Sprintf("bounds [%v, %v] contain NaN", lo, up)
	case math.IsInf(lo, 1):
		return "lower bound is +Inf"
	case math.IsInf(up, -1):
		return "upper bound is -Inf"
	case lo > up:
		return fmt.Sprintf("crossed bounds: lower %v > upper %v", lo, up)
	}
	return ""
}

// Columns returns A in compressed sparse column form: column j holds the row
// indices rows[start[j]:start[j+1]], ascending, with values vals[...]. The
// model must be valid.
func (m *Model) Columns() (start, rows []int, vals []float64) {
	n := len(m.obj)
	start = make([]int, n+1)
	for _, j := range m.idx {
		start[j+1]++
	}
	for j := range n {
		start[j+1] += start[j]
	}
	next := slices.Clone(start[:n])
	rows = make([]int, len(m.idx))
	vals = make([]float64, len(m.idx))
	for i := range m.rowLo {
		for k := m.start[i]; k < m.start[i+1]; k++ {
			j := m.idx[k]
			rows[next[j]] = i
			vals[next[j]] = m.val[k]
			next[j]++
		}
	}
	return start, rows, vals
}
