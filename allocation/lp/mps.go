package lp

import (
	"io"
	"math"
	"strconv"
	"strings"
)

// WriteMPS writes the model in free MPS format, as read by CLP, HiGHS,
// CPLEX, Gurobi and GLPK (glpsol --freemps), for debugging and for
// cross-checking with other solvers. A maximisation gets an OBJSENSE MAX
// section, which CLP 1.17's reader ignores ("Coin ignores"): set the
// direction after reading there. Ranged rows become G rows with a RANGES entry, free rows N rows
// after the objective. Spaces in names become underscores; unnamed variables
// and rows are written as x<j> and r<i>. The model must be valid.
func (m *Model) WriteMPS(w io.Writer) error {
	if err := m.Validate(); err != nil {
		return err
	}
	var b strings.Builder
	name := m.name
	if name == "" {
		name = "gpusched"
	}
	num := func(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }
	line := func(fields ...string) {
		b.WriteString("    ")
		b.WriteString(strings.Join(fields, "  "))
		b.WriteByte('\n')
	}
	// COIN-OR's reader (CLP, CBC) takes free format only with FREE on the
	// NAME line; other readers take it as part of the name.
	b.WriteString("NAME " + mpsName(name) + " FREE\n")
	if m.sense == Maximize {
		b.WriteString("OBJSENSE\n    MAX\n")
	}
	b.WriteString("ROWS\n")
	line("N", "obj")
	rows := make([]string, len(m.rowLo))
	for i := range m.rowLo {
		rows[i] = mpsName(m.RowName(i))
		lo, up := m.rowLo[i], m.rowUp[i]
		t := "G"
		switch {
		case lo == up:
			t = "E"
		case math.IsInf(lo, -1) && math.IsInf(up, 1):
			t = "N"
		case math.IsInf(lo, -1):
			t = "L"
		}
		line(t, rows[i])
	}
	b.WriteString("COLUMNS\n")
	start, ri, rv := m.Columns()
	for j := range m.obj {
		col := mpsName(m.VarName(j))
		if m.obj[j] != 0 || start[j] == start[j+1] {
			line(col, "obj", num(m.obj[j]))
		}
		for k := start[j]; k < start[j+1]; k++ {
			line(col, rows[ri[k]], num(rv[k]))
		}
	}
	b.WriteString("RHS\n")
	for i := range m.rowLo {
		lo, up := m.rowLo[i], m.rowUp[i]
		rhs := lo
		if math.IsInf(lo, -1) {
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
				b.WriteString("RANGES\n")
				wroteRanges = true
			}
			line("RNG", rows[i], num(up-lo))
		}
	}
	b.WriteString("BOUNDS\n")
	for j := range m.obj {
		col := mpsName(m.VarName(j))
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
	b.WriteString("ENDATA\n")
	_, err := io.WriteString(w, b.String())
	return err
}

func mpsName(s string) string {
	if s == "" {
		return "_"
	}
	return strings.Map(func(r rune) rune {
		if r == ' ' || r == '\t' || r == '\n' || r == '\r' {
			return '_'
		}
		return r
	}, s)
}
