package sim

import (
	"bufio"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"unicode"

	"github.com/gpusched/gpusched/internal/safeio"
	"github.com/gpusched/gpusched/topology"
)

// Limits on what a trace may ask for. Every loader of this package reads
// through them, so a corrupt or hostile file costs bounded memory and time
// and never yields a job the simulators cannot run.
const (
	// MaxTraceBytes bounds the bytes one loader reads from its reader.
	MaxTraceBytes = 512 << 20
	// MaxTraceRows bounds the rows (jobs, samples) of one file.
	MaxTraceRows = 1 << 22
	// maxLine bounds a line of a trace (a CSV record, quoted newlines
	// included), maxField one CSV field.
	maxLine  = 1 << 20
	maxField = 4 << 10
	// MaxSeconds bounds every time and duration read (about 317 years, so
	// that Unix timestamps pass).
	MaxSeconds = 1e10
	// maxJobSteps bounds a job's steps, below 2^53 so that steps stay
	// exact integers in a float64.
	maxJobSteps = 1e15
	// maxGPUs bounds a job's GPUs (topology's bound on a whole cluster),
	// maxBatch its batch size, maxWeight its priority weight.
	maxGPUs   = topology.MaxClusterGPUs
	maxBatch  = 1 << 30
	maxWeight = 1e6
)

// limits are the bounds a loader reads through: the defaults, or smaller
// ones in tests.
type limits struct {
	bytes int64
	rows  int
}

var defaultLimits = limits{bytes: MaxTraceBytes, rows: MaxTraceRows}

// input reads a trace through the limits: at most lim.bytes in all, at
// most maxLine (plus a read-ahead buffer) between two calls of newRecord
// when records is set.
type input struct {
	r              io.Reader
	lim            limits
	total, current int64
	errTotal       error
	records        bool // count the bytes of each record
}

var errLongLine = fmt.Errorf("a line longer than %s", safeio.Size(maxLine))

func newInput(r io.Reader, lim limits) *input { return &input{r: r, lim: lim} }

func (in *input) Read(p []byte) (int, error) {
	if in.errTotal != nil {
		return 0, in.errTotal
	}
	if in.records && in.current > maxLine+csvReadAhead {
		return 0, errLongLine
	}
	n, err := in.r.Read(p)
	in.total += int64(n)
	in.current += int64(n)
	if in.total > in.lim.bytes {
		in.errTotal = fmt.Errorf("more than %s of trace", safeio.Size(in.lim.bytes))
		return n, in.errTotal
	}
	return n, err
}

// newRecord starts counting the bytes of the next record.
func (in *input) newRecord() { in.current = 0 }

// csvReadAhead is how far encoding/csv's buffer reads past a record.
const csvReadAhead = 4096

// row is one row of a CSV file being read. Its accessors parse a named
// column and keep the first problem found, so that a loader reads all its
// fields and then checks err once.
type row struct {
	file  string
	line  int
	rec   []string
	index map[string]int
	err   error
}

// get returns a column, trimmed of spaces and of byte order marks (a
// spreadsheet's export, or files joined, leave them at a field's ends);
// a byte order mark inside the field fails the row.
func (r *row) get(c string) string {
	v := strings.TrimFunc(r.rec[r.index[c]], func(x rune) bool { return unicode.IsSpace(x) || x == '\ufeff' })
	if strings.ContainsRune(v, '\ufeff') {
		r.fail("column %s holds a byte order mark (U+FEFF) inside its value", c)
	}
	return v
}

// fail records a problem with the row unless one is recorded already.
func (r *row) fail(format string, args ...any) {
	if r.err == nil {
		r.err = &ParseError{File: r.file, Line: r.line, Msg: fmt.Sprintf(format, args...)}
	}
}

// seconds parses a time or duration: a finite number of seconds from 0 to
// MaxSeconds.
func (r *row) seconds(c string) float64 {
	v, err := number(r.get(c))
	if err != nil || v < 0 || v > MaxSeconds {
		r.fail("%s %q (want seconds from 0 to %g)", c, r.get(c), float64(MaxSeconds))
	}
	return v
}

// number parses a finite number from lo to hi; what names its unit.
func (r *row) number(c string, lo, hi float64, what string) float64 {
	v, err := number(r.get(c))
	if err != nil || v < lo || v > hi {
		r.fail("%s %q (want %s from %g to %g)", c, r.get(c), what, lo, hi)
	}
	return v
}

// integer parses an integer from lo to hi; what names what it counts.
func (r *row) integer(c string, lo, hi int, what string) int {
	v, err := strconv.Atoi(r.get(c))
	if err != nil || v < lo || v > hi {
		r.fail("%s %q (want %s from %d to %d)", c, r.get(c), what, lo, hi)
	}
	return v
}

// text returns a column that must not be empty.
func (r *row) text(c string) string {
	v := r.get(c)
	if v == "" {
		r.fail("empty %s", c)
	}
	return v
}

// csvRows reads a CSV file with a header and calls f for each row; the
// named columns must all be present, once. It stops at the first row f
// leaves with an error. A byte order mark is skipped, and the limits of
// this file hold: the file's size and rows, each record's length and each
// field's.
func csvRows(r io.Reader, name string, columns []string, f func(*row)) error {
	return csvRowsWithin(defaultLimits, r, name, columns, f)
}

// csvRowsWithin is csvRows with the given limits.
func csvRowsWithin(lim limits, r io.Reader, name string, columns []string, f func(*row)) error {
	in := newInput(r, lim)
	in.records = true
	cr := csv.NewReader(safeio.SkipBOM(in))
	cr.ReuseRecord = true
	cr.FieldsPerRecord = -1
	line := 1
	readErr := func(err error) error {
		var pe *csv.ParseError
		switch {
		case errors.As(err, &pe):
			return &ParseError{File: name, Line: pe.Line, Msg: pe.Err.Error()}
		case errors.Is(err, errLongLine):
			return &ParseError{File: name, Line: line + 1, Msg: err.Error()}
		case in.errTotal != nil && errors.Is(err, in.errTotal):
			return &ParseError{File: name, Line: line + 1, Msg: err.Error()}
		}
		return fmt.Errorf("sim: reading %s: %w", name, err)
	}
	header, err := cr.Read()
	if err != nil {
		if errors.Is(err, io.EOF) {
			return &ParseError{File: name, Line: 1, Msg: "empty file (want a header: " + strings.Join(columns, ",") + ")"}
		}
		line = 0
		return readErr(err)
	}
	index := map[string]int{}
	for i, h := range header {
		h = strings.TrimSpace(h)
		if len(h) > maxField {
			return &ParseError{File: name, Line: 1, Msg: fmt.Sprintf("column %d of the header is longer than %s", i+1, safeio.Size(maxField))}
		}
		if _, dup := index[h]; dup && h != "" {
			return &ParseError{File: name, Line: 1, Msg: fmt.Sprintf("column %q appears twice in the header", h)}
		}
		index[h] = i
	}
	for _, c := range columns {
		if _, ok := index[c]; !ok {
			return &ParseError{File: name, Line: 1, Msg: fmt.Sprintf("no column %q in the header (want %s)", c, strings.Join(columns, ","))}
		}
	}
	for rows := 0; ; rows++ {
		in.newRecord()
		rec, err := cr.Read()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return readErr(err)
		}
		line, _ = cr.FieldPos(0)
		if rows == lim.rows {
			return &ParseError{File: name, Line: line, Msg: fmt.Sprintf("more than %d rows", lim.rows)}
		}
		if len(rec) != len(header) {
			return &ParseError{File: name, Line: line, Msg: fmt.Sprintf("%d fields, the header has %d", len(rec), len(header))}
		}
		for i, field := range rec {
			if len(field) > maxField {
				_, col := cr.FieldPos(i)
				return &ParseError{File: name, Line: line, Msg: fmt.Sprintf("field %d (column %d) is longer than %s", i+1, col, safeio.Size(maxField))}
			}
		}
		rw := row{file: name, line: line, rec: rec, index: index}
		if f(&rw); rw.err != nil {
			return rw.err
		}
	}
}

// lines calls f for each non-empty line of r with its 1-based number,
// through the limits of csvRows (a line of at most maxLine bytes).
func lines(r io.Reader, name string, f func(n int, line string) error) error {
	return linesWithin(defaultLimits, r, name, f)
}

// linesWithin is lines with the given limits.
func linesWithin(lim limits, r io.Reader, name string, f func(n int, line string) error) error {
	in := newInput(r, lim)
	sc := bufio.NewScanner(safeio.SkipBOM(in))
	sc.Buffer(make([]byte, 64<<10), maxLine)
	n, rows := 0, 0
	for sc.Scan() {
		n++
		line := strings.TrimRight(sc.Text(), "\r")
		if strings.TrimSpace(line) == "" {
			continue
		}
		if rows++; rows > lim.rows {
			return &ParseError{File: name, Line: n, Msg: fmt.Sprintf("more than %d rows", lim.rows)}
		}
		if err := f(n, line); err != nil {
			return err
		}
	}
	switch err := sc.Err(); {
	case err == nil:
		return nil
	case errors.Is(err, bufio.ErrTooLong):
		return &ParseError{File: name, Line: n + 1, Msg: errLongLine.Error()}
	case in.errTotal != nil && errors.Is(err, in.errTotal):
		return &ParseError{File: name, Line: n + 1, Msg: err.Error()}
	default:
		return fmt.Errorf("sim: reading %s, line %d: %w", name, n+1, err)
	}
}

// number parses a finite float.
func number(s string) (float64, error) {
	v, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
		return 0, fmt.Errorf("%q is not a finite number", s)
	}
	return v, nil
}
