package sim

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"

	"github.com/gpusched/gpusched/perfmodel"
)

// Job is one job of a trace.
// It is a plain value, safe for concurrent use.
type Job struct {
	// ID identifies the job; loaders number jobs from 0 in file order.
	ID int
	// Arrival is the submission time in seconds.
	Arrival float64
	// Key names what the job trains and on how many GPUs (its scale
	// factor), for throughput lookups.
	Key perfmodel.JobKey
	// Steps is the total work in steps (iterations).
	Steps float64
	// Weight is the job's priority weight (1 if unset).
	Weight float64
	// SLO is the job's deadline relative to its arrival, in seconds; 0
	// means none.
	SLO float64
	// Duration is the run time the trace gives (seconds), for traces that
	// give durations rather than steps; 0 if unknown.
	Duration float64
	// Name keeps a trace's own label for the job (its model or
	// application name, or its ID), when it has one.
	Name string
}

// ErrMalformedTrace is wrapped by every trace parsing error.
var ErrMalformedTrace = errors.New("malformed trace")

// ParseError locates a bad row of a trace.
// It is not changed after it is returned: safe for concurrent reads.
type ParseError struct {
	File string
	Line int
	Msg  string
}

func (e *ParseError) Error() string {
	return fmt.Sprintf("sim: %s:%d: %v: %s", e.File, e.Line, ErrMalformedTrace, e.Msg)
}

// Unwrap returns ErrMalformedTrace.
func (e *ParseError) Unwrap() error { return ErrMalformedTrace }

// maxLine bounds a trace line, so that a corrupt file cannot ask for
// unbounded memory.
const maxLine = 1 << 20

// lines calls f for each non-empty line of r with its 1-based number.
func lines(r io.Reader, f func(n int, line string) error) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), maxLine)
	n := 0
	for sc.Scan() {
		n++
		line := strings.TrimRight(sc.Text(), "\r")
		if strings.TrimSpace(line) == "" {
			continue
		}
		if err := f(n, line); err != nil {
			return err
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("sim: reading line %d: %w", n+1, err)
	}
	return nil
}

// number parses a finite float.
func number(s string) (float64, error) {
	v, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
		return 0, fmt.Errorf("%q is not a finite number", s)
	}
	return v, nil
}

// ReadGavelTrace reads a trace in Gavel's format (utils.parse_trace): ten
// tab-separated columns, job_type, command, working_directory,
// num_steps_arg, needs_data_dir, total_steps, scale_factor,
// priority_weight, SLO (-1 for none) and arrival_time (seconds). name
// labels errors, which give the line.
func ReadGavelTrace(r io.Reader, name string) ([]Job, error) {
	var jobs []Job
	err := lines(r, func(n int, line string) error {
		bad := func(format string, args ...any) error {
			return &ParseError{File: name, Line: n, Msg: fmt.Sprintf(format, args...)}
		}
		f := strings.Split(line, "\t")
		if len(f) != 10 {
			return bad("%d tab-separated columns, want 10 (job_type, command, working_directory, num_steps_arg, needs_data_dir, total_steps, scale_factor, priority_weight, SLO, arrival_time)", len(f))
		}
		steps, err := number(f[5])
		if err != nil || steps <= 0 {
			return bad("total_steps: %q (want a number > 0)", f[5])
		}
		sf, err := strconv.Atoi(strings.TrimSpace(f[6]))
		if err != nil || sf < 1 {
			return bad("scale_factor: %q (want an integer >= 1)", f[6])
		}
		key, err := perfmodel.ParseJobType(f[0], sf)
		if err != nil {
			return bad("job_type: %v", err)
		}
		w, err := number(f[7])
		if err != nil || w <= 0 {
			return bad("priority_weight: %q (want a number > 0)", f[7])
		}
		slo, err := number(f[8])
		if err != nil || (slo < 0 && slo != -1) {
			return bad("SLO: %q (want -1 or a number >= 0)", f[8])
		}
		at, err := number(f[9])
		if err != nil || at < 0 {
			return bad("arrival_time: %q (want a number >= 0)", f[9])
		}
		j := Job{ID: len(jobs), Arrival: at, Key: key, Steps: steps, Weight: w}
		if slo > 0 {
			j.SLO = slo
		}
		jobs = append(jobs, j)
		return nil
	})
	return jobs, err
}
