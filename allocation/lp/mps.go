package lp

import (
	"bufio"
	"io"
	"math"
	"strconv"
	"strings"
	"unicode"
)

// WriteMPS writes the model in free MPS format, as read by [ReadMPS], CLP,
// HiGHS, CPLEX, Gurobi and GLPK (glpsol --freemps), for debugging and for
// cross-checking with other solvers. A maximisation gets an OBJSENSE MAX
// section, which CLP 1.17's reader ignores ("Coin ignores"): set the
// direction after reading there. Ranged rows become G (or L) rows with a
// RANGES entry, free rows N rows after the objective, and the objective constant is
// minus the RHS of the objective row (COIN-OR's and CPLEX's convention).
// White space in names becomes underscores (and names that then clash get
// a suffix ~k); unnamed variables and rows are written
// as x<j> and r<i>. The model must be valid.
func (m *Model) WriteMPS(w io.Writer) error {
	if err := m.Validate(); err != nil {
		return err
	}
	b := bufio.NewWriter(w)
	// A bufio.Writer keeps its first error and Flush returns it.
	put := func(s string) { _, _ = b.WriteString(s) }
	name := m.name
	if name == "" {
		name = "gpusched"
	}
	num := func(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }
	line := func(fields ...string) {
		put("    ")
		put(strings.Join(fields, "  "))
		put("\n")
	}
	// COIN-OR's reader (CLP, CBC) takes free format only with FREE on the
	// NAME line; other readers take it as part of the name.
	put("NAME " + mpsName(name) + " FREE\n")
	if m.sense == Maximize {
		put("OBJSENSE\n    MAX\n")
	}
	taken := make(map[string]bool, len(m.rowLo)+1)
	objRow := "obj"
	for i := range m.rowLo {
		taken[mpsName(m.RowName(i))] = true
	}
	for taken[objRow] {
		objRow += "_"
	}
	clear(taken)
	taken[objRow] = true
	rows := make([]string, len(m.rowLo))
	for i := range m.rowLo {
		rows[i] = uniqueName(mpsName(m.RowName(i)), taken)
	}
	clear(taken)
	cols := make([]string, len(m.obj))
	for j := range m.obj {
		cols[j] = uniqueName(mpsName(m.VarName(j)), taken)
	}
	put("ROWS\n")
	line("N", objRow)
	for i := range m.rowLo {
		lo, up := m.rowLo[i], m.rowUp[i]
		t := "G"
		switch {
		case lo == up:
			t = "E"
		case math.IsInf(lo, -1) && math.IsInf(up, 1):
			t = "N"
		case math.IsInf(lo, -1), rangedAsL(lo, up):
			t = "L"
		}
		line(t, rows[i])
	}
	put("COLUMNS\n")
	start, ri, rv := m.Columns()
	for j := range m.obj {
		col := cols[j]
		if m.obj[j] != 0 || start[j] == start[j+1] {
			line(col, objRow, num(m.obj[j]))
		}
		for k := start[j]; k < start[j+1]; k++ {
			line(col, rows[ri[k]], num(rv[k]))
		}
	}
	put("RHS\n")
	if m.objConst != 0 {
		// The RHS of the objective row is minus the constant.
		line("RHS", objRow, num(-m.objConst))
	}
	for i := range m.rowLo {
		lo, up := m.rowLo[i], m.rowUp[i]
		rhs := lo
		if math.IsInf(lo, -1) || rangedAsL(lo, up) {
			rhs = up
		}
		if !math.IsInf(rhs, 0) && rhs != 0 {
			line("RHS", rows[i], num(rhs))
		}
	}
	wroteRanges := false
	for i := range m.rowLo {
		lo, up := m.rowLo[i], m.rowUp[i]
		if lo != up && !math.IsInf(lo, 0) && !math.IsInf(up, 0) {
			if !wroteRanges {
				put("RANGES\n")
				wroteRanges = true
			}
			line("RNG", rows[i], num(up-lo))
		}
	}
	put("BOUNDS\n")
	for j := range m.obj {
		col := cols[j]
		lo, up := m.colLo[j], m.colUp[j]
		switch {
		case lo == up:
			line("FX", "BND", col, num(lo))
		case math.IsInf(lo, -1) && math.IsInf(up, 1):
			line("FR", "BND", col)
		case math.IsInf(lo, -1):
			line("MI", "BND", col)
			line("UP", "BND", col, num(up))
		default:
			if lo != 0 || !math.IsInf(up, 1) {
				line("LO", "BND", col, num(lo))
			}
			if !math.IsInf(up, 1) {
				line("UP", "BND", col, num(up))
			}
		}
	}
	put("ENDATA\n")
	return b.Flush()
}

// uniqueName returns name, or name with a suffix ~k if it is taken (two
// names that differed only in white space), and marks it taken.
func uniqueName(name string, taken map[string]bool) string {
	out := name
	for k := 1; taken[out]; k++ {
		out = name + "~" + strconv.Itoa(k)
	}
	taken[out] = true
	return out
}

// rangedAsL reports whether the ranged row lo <= a x <= up is written as an
// L row with RHS up: when up - (up - lo) gives lo back exactly and
// lo + (up - lo) does not give up, so that the bounds read back unchanged.
func rangedAsL(lo, up float64) bool {
	if lo == up || math.IsInf(lo, 0) || math.IsInf(up, 0) {
		return false
	}
	r := up - lo
	return lo+r != up && up-r == lo
}

func mpsName(s string) string {
	if s == "" {
		return "_"
	}
	return strings.Map(func(r rune) rune {
		if unicode.IsSpace(r) || r == 0 {
			return '_'
		}
		return r
	}, s)
}
