package lp

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
)

// MPSFormat selects how [MPSReader] splits data lines into fields.
type MPSFormat int8

const (
	// MPSAuto splits on white space (free MPS) and falls back to the
	// fixed columns for a line that does not parse that way, so fixed-format
	// names with spaces in them still read. A NAME line ending in FREE (as
	// COIN-OR and [Model.WriteMPS] write) selects MPSFree.
	MPSAuto MPSFormat = iota
	// MPSFixed reads the fields at the fixed columns of the original MPS
	// format: 2-3, 5-12, 15-22, 25-36, 40-47 and 50-61.
	MPSFixed
	// MPSFree splits on white space; names cannot hold spaces.
	MPSFree
)

// Default caps of [MPSReader].
const (
	DefaultMPSMaxRows      = 1 << 24
	DefaultMPSMaxCols      = 1 << 24
	DefaultMPSMaxNonzeros  = 1 << 28
	DefaultMPSMaxLineBytes = 1 << 16
)

// MPSReader reads linear programs in MPS format. The zero value reads either
// format with the default caps. An MPSReader holds only settings and is safe
// for concurrent use.
//
// The format is IBM's MPS as CPLEX, COIN-OR and HiGHS read it: sections
// NAME, OBJSENSE (MAX, MAXIMIZE, MIN or MINIMIZE, on the same line or the
// next), OBJNAME, ROWS (N, E, L, G), COLUMNS, RHS, RANGES, BOUNDS and
// ENDATA; a line whose first character is '*' is a comment. The first N row
// is the objective (unless OBJNAME names another); other N rows become free
// rows. The RHS of the objective row is minus the objective constant
// ([Model.ObjectiveConstant]). Only the first RHS, RANGES and BOUNDS sets
// are read. RANGES follow the MPS rules: on an E row a positive range R
// gives [rhs, rhs + R] and a negative one [rhs + R, rhs]; on L and G rows
// |R| widens the row away from its RHS. Bound types: UP, LO, FX, FR, MI
// (no lower bound), PL (no upper bound), BV (binary: [0, 1]), LI and UI
// (integer lower and upper bounds). As the MPS rules say, an UP or UI bound
// below zero on a variable whose lower bound is still 0 makes the lower
// bound -Inf. Values of magnitude 1e30 and more are infinite. Integrality
// (BV, LI, UI, MARKER INTORG sections) is not kept: the model is the LP
// relaxation. Semi-continuous bounds (SC) are refused.
//
// Sizes are capped (rows, columns, nonzeros, line length) and every
// problem is an *[MPSError] wrapping [ErrMPS] (and [ErrMPSLimit] for a cap)
// with the line number; the reader never panics.
type MPSReader struct {
	Format MPSFormat
	// Caps; 0 means the Default value.
	MaxRows, MaxCols, MaxNonzeros, MaxLineBytes int
}

// MPSError is an error in an MPS file. It matches [ErrMPS] with errors.Is,
// and [ErrMPSLimit] when a size cap was exceeded.
type MPSError struct {
	// Line is the 1-based line number (0 when the error concerns the
	// whole file).
	Line int
	// Msg says what is wrong.
	Msg   string
	limit bool
}

func (e *MPSError) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("lp: MPS line %d: %s", e.Line, e.Msg)
	}
	return "lp: MPS: " + e.Msg
}

// Unwrap returns ErrMPS, and ErrMPSLimit for a cap.
func (e *MPSError) Unwrap() []error {
	if e.limit {
		return []error{ErrMPS, ErrMPSLimit}
	}
	return []error{ErrMPS}
}

// ReadMPS reads a model in fixed or free MPS format with the default caps
// (see [MPSReader]).
func ReadMPS(r io.Reader) (*Model, error) { return (&MPSReader{}).Read(r) }

// mpsInf is the magnitude from which MPS values are infinite.
const mpsInf = 1e30

type mpsParser struct {
	rd      *MPSReader
	format  MPSFormat
	line    int
	section string
	name    string
	sense   Sense
	objName string // from OBJNAME
	obj     int    // row index of the objective among all N/E/L/G rows, -1 until known

	rowIndex map[string]int
	rowNames []string
	rowType  []byte
	rhs      []float64
	rng      []float64
	hasRng   []bool

	colIndex map[string]int
	colNames []string
	colLo    []float64
	colUp    []float64
	objCoef  []float64
	// Entries by column: rows and values, and the last row per column to
	// spot repeats within the current column's lines.
	entRow []int
	entCol []int
	entVal []float64
	// seen[key] for repeats: a map on (row, col) only while the column is
	// open (a column's lines are contiguous in MPS).
	curCol   int
	curRows  map[int]struct{}
	rhsSet   string
	rngSet   string
	bndSet   string
	objConst float64
	sawEnd   bool
}

func (p *mpsParser) errf(format string, args ...any) error {
	return &MPSError{Line: p.line, Msg: fmt.Sprintf(format, args...)}
}

func (p *mpsParser) limitf(format string, args ...any) error {
	return &MPSError{Line: p.line, Msg: fmt.Sprintf(format, args...), limit: true}
}

func capOr(v, def int) int {
	if v > 0 {
		return v
	}
	return def
}

// Read reads one model.
func (rd *MPSReader) Read(r io.Reader) (*Model, error) {
	p := &mpsParser{
		rd: rd, format: rd.Format, sense: Minimize, obj: -1,
		rowIndex: map[string]int{}, colIndex: map[string]int{},
		curCol: -1, curRows: map[int]struct{}{},
	}
	maxLine := capOr(rd.MaxLineBytes, DefaultMPSMaxLineBytes)
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, min(maxLine, 4096)), maxLine)
	for sc.Scan() {
		p.line++
		if err := p.parseLine(sc.Text()); err != nil {
			return nil, err
		}
		if p.sawEnd {
			break
		}
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return nil, p.limitf("line longer than %d bytes", maxLine)
		}
		return nil, fmt.Errorf("lp: reading MPS: %w", err)
	}
	if !p.sawEnd {
		p.line = 0
		return nil, p.errf("no ENDATA line (file truncated?)")
	}
	return p.model()
}

func (p *mpsParser) parseLine(raw string) error {
	line := strings.TrimRight(raw, " \t\r")
	if line == "" || line[0] == '*' {
		return nil
	}
	if strings.ContainsRune(line, 0) {
		return p.errf("NUL byte in line")
	}
	if line[0] != ' ' && line[0] != '\t' {
		return p.header(line)
	}
	switch p.section {
	case "OBJSENSE":
		return p.objSense(strings.TrimSpace(line))
	case "OBJNAME":
		if p.objName != "" {
			return p.errf("OBJNAME given twice")
		}
		p.objName = strings.TrimSpace(line)
		return nil
	case "ROWS":
		return p.withFields(line, p.rowLine)
	case "COLUMNS":
		return p.withFields(line, p.columnLine)
	case "RHS":
		return p.withFields(line, p.rhsLine)
	case "RANGES":
		return p.withFields(line, p.rangeLine)
	case "BOUNDS":
		return p.withFields(line, p.boundLine)
	case "":
		return p.errf("data line before any section")
	}
	return p.errf("data line in section %s", p.section)
}

// header handles a section line.
func (p *mpsParser) header(line string) error {
	f := strings.Fields(line)
	if len(f) == 0 {
		return nil // white space only
	}
	sec := strings.ToUpper(f[0])
	if sec == "COLUMNS" || sec == "RHS" || sec == "RANGES" || sec == "BOUNDS" || sec == "ENDATA" {
		p.closeColumn()
	}
	switch sec {
	case "NAME":
		if p.section != "" {
			return p.errf("NAME after section %s", p.section)
		}
		if len(f) > 1 && strings.EqualFold(f[len(f)-1], "FREE") && p.format == MPSAuto {
			p.format = MPSFree
			f = f[:len(f)-1]
		}
		switch {
		case p.format == MPSFixed && len(line) > 14:
			p.name = strings.TrimSpace(line[14:min(len(line), 22)])
		case len(f) > 1:
			p.name = f[1]
		}
	case "OBJSENSE", "OBJSENCE":
		sec = "OBJSENSE"
		if len(f) > 1 {
			if err := p.objSense(strings.Join(f[1:], " ")); err != nil {
				return err
			}
		}
	case "OBJNAME":
		if len(f) > 1 {
			p.objName = f[1]
		}
	case "ROWS", "COLUMNS", "RHS", "RANGES", "BOUNDS":
		if len(f) > 1 {
			return p.errf("unexpected text after %s", sec)
		}
		order := map[string]int{"ROWS": 1, "COLUMNS": 2, "RHS": 3, "RANGES": 4, "BOUNDS": 5}
		if cur := order[p.section]; cur >= order[sec] {
			return p.errf("section %s after %s", sec, p.section)
		}
		if sec != "ROWS" && p.section == "" {
			return p.errf("section %s before ROWS", sec)
		}
		if sec == "COLUMNS" {
			if err := p.pickObjective(); err != nil {
				return err
			}
		}
	case "ENDATA":
		p.sawEnd = true
	case "SOS", "QUADOBJ", "QSECTION", "QMATRIX", "QCMATRIX", "CSECTION", "INDICATORS", "GENCONS", "PWLOBJ", "PWLNAM", "PWLCON":
		return p.errf("section %s is not supported (linear programs only)", sec)
	default:
		return p.errf("unknown section %q", f[0])
	}
	p.section = sec
	return nil
}

func (p *mpsParser) objSense(s string) error {
	switch strings.ToUpper(strings.TrimSpace(s)) {
	case "MAX", "MAXIMIZE", "MAXIMISE":
		p.sense = Maximize
	case "MIN", "MINIMIZE", "MINIMISE":
		p.sense = Minimize
	default:
		return p.errf("objective sense %q is none of MAX, MAXIMIZE, MIN, MINIMIZE", s)
	}
	return nil
}

// fixedFields splits a data line at the fixed MPS columns.
func fixedFields(line string) []string {
	bounds := [...][2]int{{1, 3}, {4, 12}, {14, 22}, {24, 36}, {39, 47}, {49, 61}}
	var out []string
	for _, b := range bounds {
		if b[0] >= len(line) {
			out = append(out, "")
			continue
		}
		out = append(out, strings.TrimSpace(line[b[0]:min(b[1], len(line))]))
	}
	return out
}

// withFields parses a data line with the section's handler, splitting it as
// the format says. fixed says whether fields are positional (empty fields
// kept) or free (only the non-empty ones).
func (p *mpsParser) withFields(line string, handle func(f []string, fixed bool) error) error {
	switch p.format {
	case MPSFixed:
		if len(line) > 61 && strings.TrimSpace(line[61:]) != "" {
			return p.errf("text beyond column 61 in fixed format")
		}
		return handle(fixedFields(line), true)
	case MPSFree:
		return handle(strings.Fields(line), false)
	}
	err := handle(strings.Fields(line), false)
	if err == nil || len(line) > 61 {
		return err
	}
	var me *MPSError
	if !errors.As(err, &me) || me.limit {
		return err
	}
	// A fixed-format line whose names hold spaces: try the columns.
	if err2 := handle(fixedFields(line), true); err2 == nil {
		return nil
	}
	return err
}

// trimFixed drops the empty fields of a fixed-format split, keeping the
// positions that matter: for the ROWS section (type, name).
func nonEmpty(f []string) []string {
	out := f[:0:0]
	for _, s := range f {
		if s != "" {
			out = append(out, s)
		}
	}
	return out
}

func (p *mpsParser) rowLine(f []string, fixed bool) error {
	var typ, name string
	if fixed {
		typ, name = f[0], f[1]
		if typ == "" || name == "" || strings.Join(nonEmpty(f[2:]), "") != "" {
			return p.errf("a ROWS line needs a type and a name")
		}
	} else {
		if len(f) != 2 {
			return p.errf("a ROWS line has a type and a name, got %d fields", len(f))
		}
		typ, name = f[0], f[1]
	}
	t := strings.ToUpper(typ)
	if len(t) != 1 || !strings.Contains("NELG", t) {
		return p.errf("row type %q is none of N, E, L, G", typ)
	}
	if _, dup := p.rowIndex[name]; dup {
		return p.errf("row %q defined twice", name)
	}
	if len(p.rowNames) >= capOr(p.rd.MaxRows, DefaultMPSMaxRows) {
		return p.limitf("more than %d rows", capOr(p.rd.MaxRows, DefaultMPSMaxRows))
	}
	p.rowIndex[name] = len(p.rowNames)
	p.rowNames = append(p.rowNames, name)
	p.rowType = append(p.rowType, t[0])
	p.rhs = append(p.rhs, 0)
	p.rng = append(p.rng, 0)
	p.hasRng = append(p.hasRng, false)
	return nil
}

// pickObjective fixes the objective row once ROWS is complete.
func (p *mpsParser) pickObjective() error {
	if p.objName != "" {
		i, ok := p.rowIndex[p.objName]
		if !ok || p.rowType[i] != 'N' {
			return p.errf("OBJNAME %q is not an N row", p.objName)
		}
		p.obj = i
		return nil
	}
	for i, t := range p.rowType {
		if t == 'N' {
			p.obj = i
			return nil
		}
	}
	return nil // no objective: minimise 0
}

// pairs reads (name, value) pairs from fields: free lines hold an optional
// set name then one or two pairs; fixed lines hold the set name in field 1
// and pairs in fields 2-3 and 4-5.
func (p *mpsParser) pairs(f []string, fixed bool, what string) (set string, names []string, vals []float64, err error) {
	if fixed {
		if f[0] != "" {
			return "", nil, nil, p.errf("unexpected text in columns 2-3 of a %s line", what)
		}
		set = f[1]
		for k := 2; k+1 < len(f); k += 2 {
			if f[k] == "" && f[k+1] == "" {
				continue
			}
			names = append(names, f[k])
			v, err := p.number(f[k+1])
			if err != nil {
				return "", nil, nil, err
			}
			vals = append(vals, v)
		}
		if len(names) == 0 {
			return "", nil, nil, p.errf("a %s line needs a name and a value", what)
		}
		return set, names, vals, nil
	}
	switch len(f) {
	case 2, 4:
	case 3, 5:
		set, f = f[0], f[1:]
	default:
		return "", nil, nil, p.errf("a %s line has 2 to 5 fields, got %d", what, len(f))
	}
	for k := 0; k < len(f); k += 2 {
		v, err := p.number(f[k+1])
		if err != nil {
			return "", nil, nil, err
		}
		names = append(names, f[k])
		vals = append(vals, v)
	}
	return set, names, vals, nil
}

func (p *mpsParser) number(s string) (float64, error) {
	if s == "" {
		return 0, p.errf("missing number")
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		// Fortran's D exponent.
		if t := strings.Map(func(r rune) rune {
			if r == 'd' || r == 'D' {
				return 'e'
			}
			return r
		}, s); t != s {
			v, err = strconv.ParseFloat(t, 64)
		}
	}
	var ne *strconv.NumError
	if err != nil && (!errors.As(err, &ne) || !errors.Is(ne.Err, strconv.ErrRange)) {
		return 0, p.errf("%q is not a number", s)
	}
	if math.IsNaN(v) {
		return 0, p.errf("NaN value")
	}
	if math.Abs(v) >= mpsInf {
		v = math.Copysign(math.Inf(1), v)
	}
	return v, nil
}

func (p *mpsParser) closeColumn() {
	p.curCol = -1
	clear(p.curRows)
}

func (p *mpsParser) columnLine(f []string, fixed bool) error {
	var col string
	var rows []string
	var vals []float64
	if fixed {
		if f[0] != "" {
			return p.errf("unexpected text in columns 2-3 of a COLUMNS line")
		}
		if strings.EqualFold(f[2], "'MARKER'") && (isMarker(f[3]) || isMarker(f[4])) {
			return nil // integrality markers: the LP relaxation is read
		}
		c, r, v, err := p.pairs(f, true, "COLUMNS")
		if err != nil {
			return err
		}
		col, rows, vals = c, r, v
		if col == "" {
			return p.errf("a COLUMNS line needs a column name")
		}
	} else {
		if len(f) == 3 && strings.EqualFold(f[1], "'MARKER'") && isMarker(f[2]) {
			return nil
		}
		if len(f) != 3 && len(f) != 5 {
			return p.errf("a COLUMNS line has 3 or 5 fields, got %d", len(f))
		}
		col = f[0]
		for k := 1; k < len(f); k += 2 {
			v, err := p.number(f[k+1])
			if err != nil {
				return err
			}
			rows = append(rows, f[k])
			vals = append(vals, v)
		}
	}
	// Check everything before changing anything: a line that fails may be
	// read again at the fixed columns.
	rowIdx := make([]int, len(rows))
	for k, rn := range rows {
		i, ok := p.rowIndex[rn]
		if !ok {
			return p.errf("column %q: unknown row %q", col, rn)
		}
		if math.IsInf(vals[k], 0) {
			return p.errf("column %q: infinite coefficient in row %q", col, rn)
		}
		_, dup := p.curRows[i]
		if j, ok := p.colIndex[col]; (ok && j == p.curCol && dup) || (k == 1 && i == rowIdx[0]) {
			return p.errf("column %q: row %q given twice", col, rn)
		}
		rowIdx[k] = i
	}
	j, ok := p.colIndex[col]
	if ok && j != p.curCol {
		return p.errf("column %q continues after other columns", col)
	}
	if !ok && len(p.colNames) >= capOr(p.rd.MaxCols, DefaultMPSMaxCols) {
		return p.limitf("more than %d columns", capOr(p.rd.MaxCols, DefaultMPSMaxCols))
	}
	if maxNZ := capOr(p.rd.MaxNonzeros, DefaultMPSMaxNonzeros); len(p.entVal)+len(rows) > maxNZ {
		return p.limitf("more than %d nonzeros", maxNZ)
	}
	if !ok {
		j = len(p.colNames)
		p.colIndex[col] = j
		p.colNames = append(p.colNames, col)
		p.colLo = append(p.colLo, 0)
		p.colUp = append(p.colUp, math.Inf(1))
		p.objCoef = append(p.objCoef, 0)
		p.closeColumn()
		p.curCol = j
	}
	for k, i := range rowIdx {
		p.curRows[i] = struct{}{}
		if i == p.obj {
			p.objCoef[j] = vals[k]
			continue
		}
		p.entRow = append(p.entRow, i)
		p.entCol = append(p.entCol, j)
		p.entVal = append(p.entVal, vals[k])
	}
	return nil
}

func (p *mpsParser) rhsLine(f []string, fixed bool) error {
	set, names, vals, err := p.pairs(f, fixed, "RHS")
	if err != nil {
		return err
	}
	if p.rhsSet != "" && p.rhsSet != set+"\x00" {
		return nil // a later RHS set
	}
	rows, err := p.lookupRows(names, "RHS")
	if err != nil {
		return err
	}
	for k := range rows {
		if math.IsInf(vals[k], 0) {
			return p.errf("infinite RHS for row %q", names[k])
		}
	}
	p.rhsSet = set + "\x00"
	for k, i := range rows {
		switch {
		case i == p.obj:
			p.objConst = -vals[k]
		case p.rowType[i] != 'N':
			p.rhs[i] = vals[k]
		}
	}
	return nil
}

func (p *mpsParser) lookupRows(names []string, what string) ([]int, error) {
	rows := make([]int, len(names))
	for k, rn := range names {
		i, ok := p.rowIndex[rn]
		if !ok {
			return nil, p.errf("%s for unknown row %q", what, rn)
		}
		if k == 1 && i == rows[0] {
			return nil, p.errf("%s of row %q given twice", what, rn)
		}
		rows[k] = i
	}
	return rows, nil
}

func (p *mpsParser) rangeLine(f []string, fixed bool) error {
	set, names, vals, err := p.pairs(f, fixed, "RANGES")
	if err != nil {
		return err
	}
	if p.rngSet != "" && p.rngSet != set+"\x00" {
		return nil
	}
	rows, err := p.lookupRows(names, "RANGES")
	if err != nil {
		return err
	}
	for k, i := range rows {
		if p.hasRng[i] && p.rowType[i] != 'N' {
			return p.errf("range of row %q given twice", names[k])
		}
	}
	p.rngSet = set + "\x00"
	for k, i := range rows {
		if p.rowType[i] != 'N' {
			p.rng[i], p.hasRng[i] = vals[k], true
		}
	}
	return nil
}

func (p *mpsParser) boundLine(f []string, fixed bool) error {
	var typ, set, col, val string
	if fixed {
		typ, set, col, val = f[0], f[1], f[2], f[3]
		if strings.Join(nonEmpty(f[4:]), "") != "" {
			return p.errf("unexpected fields after the value of a BOUNDS line")
		}
	} else {
		if len(f) == 0 {
			return p.errf("empty BOUNDS line")
		}
		typ = f[0]
		needs := boundNeedsValue(strings.ToUpper(typ))
		switch {
		case needs && len(f) == 4, !needs && len(f) == 3:
			set, col = f[1], f[2]
			if needs {
				val = f[3]
			}
		case needs && len(f) == 3, !needs && len(f) == 2:
			col = f[1]
			if needs {
				val = f[2]
			}
		case !needs && len(f) == 4 && strings.EqualFold(typ, "BV"):
			set, col = f[1], f[2] // BV with a value (ignored)
		default:
			return p.errf("a %s bound has %d fields", typ, len(f))
		}
	}
	t := strings.ToUpper(typ)
	switch t {
	case "UP", "UI", "LO", "LI", "FX", "FR", "MI", "PL", "BV":
	case "SC":
		return p.errf("semi-continuous bound on %q is not supported", col)
	default:
		return p.errf("bound type %q is none of UP, LO, FX, FR, MI, PL, BV, LI, UI", typ)
	}
	if p.bndSet != "" && p.bndSet != set+"\x00" {
		return nil
	}
	j, ok := p.colIndex[col]
	if !ok {
		return p.errf("bound on unknown column %q", col)
	}
	var v float64
	if boundNeedsValue(t) {
		var err error
		if v, err = p.number(val); err != nil {
			return err
		}
	}
	if t == "FX" && math.IsInf(v, 0) {
		return p.errf("column %q fixed at an infinite value", col)
	}
	p.bndSet = set + "\x00"
	switch t {
	case "UP", "UI":
		if v < 0 && p.colLo[j] == 0 {
			p.colLo[j] = math.Inf(-1)
		}
		p.colUp[j] = v
	case "LO", "LI":
		p.colLo[j] = v
	case "FX":
		p.colLo[j], p.colUp[j] = v, v
	case "FR":
		p.colLo[j], p.colUp[j] = math.Inf(-1), math.Inf(1)
	case "MI":
		p.colLo[j] = math.Inf(-1)
	case "PL":
		p.colUp[j] = math.Inf(1)
	case "BV":
		p.colLo[j], p.colUp[j] = 0, 1
	}
	return nil
}

func isMarker(s string) bool {
	return strings.EqualFold(s, "'INTORG'") || strings.EqualFold(s, "'INTEND'")
}

func boundNeedsValue(t string) bool {
	switch t {
	case "FR", "MI", "PL", "BV":
		return false
	}
	return true
}

// model assembles the Model.
func (p *mpsParser) model() (*Model, error) {
	p.line = 0
	m := NewModel(p.sense)
	m.name = p.name
	m.objConst = p.objConst
	for j, name := range p.colNames {
		if p.colLo[j] > p.colUp[j] {
			return nil, p.errf("column %q has crossed bounds [%v, %v]", name, p.colLo[j], p.colUp[j])
		}
		m.AddVar(p.colLo[j], p.colUp[j], p.objCoef[j])
		m.SetVarName(j, name)
	}
	// Rows in file order, the objective and other N rows left out except
	// as free rows.
	count := make([]int, len(p.rowNames)+1)
	for _, i := range p.entRow {
		count[i+1]++
	}
	for i := range p.rowNames {
		count[i+1] += count[i]
	}
	idx := make([]int, len(p.entRow))
	val := make([]float64, len(p.entRow))
	next := append([]int(nil), count[:len(p.rowNames)]...)
	for k, i := range p.entRow {
		idx[next[i]], val[next[i]] = p.entCol[k], p.entVal[k]
		next[i]++
	}
	for i, name := range p.rowNames {
		if i == p.obj {
			continue
		}
		lo, up := math.Inf(-1), math.Inf(1)
		b, r := p.rhs[i], p.rng[i]
		switch p.rowType[i] {
		case 'E':
			lo, up = b, b
			if p.hasRng[i] {
				if r >= 0 {
					up = b + r
				} else {
					lo = b + r
				}
			}
		case 'L':
			up = b
			if p.hasRng[i] {
				lo = b - math.Abs(r)
			}
		case 'G':
			lo = b
			if p.hasRng[i] {
				up = b + math.Abs(r)
			}
		}
		k := m.AddRow(lo, up, idx[count[i]:count[i+1]], val[count[i]:count[i+1]])
		m.SetRowName(k, name)
	}
	if err := m.Validate(); err != nil {
		return nil, &MPSError{Msg: err.Error()}
	}
	return m, nil
}
