package sim

import (
	"errors"
	"fmt"
	"io"
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

// interner shares one copy of each of the first maxInterned distinct
// strings it is given, and copies the others.
type interner map[string]string

const maxInterned = 4096

func (in *interner) get(s string) string {
	if v, ok := (*in)[s]; ok {
		return v
	}
	c := strings.Clone(s)
	if *in == nil {
		*in = interner{}
	}
	if len(*in) < maxInterned {
		(*in)[c] = c
	}
	return c
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

// ReadGavelTrace reads a trace in Gavel's format (utils.parse_trace): ten
// tab-separated columns, job_type, command, working_directory,
// num_steps_arg, needs_data_dir, total_steps, scale_factor,
// priority_weight, SLO (-1 for none) and arrival_time (seconds). name
// labels errors, which give the line. It reads through the limits of
// ReadPhilly; total_steps is from 1 to 1e15, priority_weight above 0 and
// at most 1e6, SLO -1 or from 0 to MaxSeconds.
func ReadGavelTrace(r io.Reader, name string) ([]Job, error) {
	var jobs []Job
	var models interner
	err := lines(r, name, func(n int, line string) error {
		bad := func(format string, args ...any) error {
			return &ParseError{File: name, Line: n, Msg: fmt.Sprintf(format, args...)}
		}
		f := strings.Split(line, "\t")
		if len(f) != 10 {
			return bad("%d tab-separated columns, want 10 (job_type, command, working_directory, num_steps_arg, needs_data_dir, total_steps, scale_factor, priority_weight, SLO, arrival_time)", len(f))
		}
		steps, err := number(f[5])
		if err != nil || steps < 1 || steps > maxJobSteps {
			return bad("total_steps: %q (want a number of steps from 1 to %g)", f[5], float64(maxJobSteps))
		}
		sf, err := strconv.Atoi(strings.TrimSpace(f[6]))
		if err != nil || sf < 1 || sf > maxGPUs {
			return bad("scale_factor: %q (want an integer from 1 to %d)", f[6], maxGPUs)
		}
		key, err := perfmodel.ParseJobType(f[0], sf)
		if err != nil {
			return bad("job_type: %v", err)
		}
		// The name is part of the line: a copy shared by the jobs of the
		// model keeps the line from being retained with each job.
		key.Model = models.get(key.Model)
		w, err := number(f[7])
		if err != nil || w <= 0 || w > maxWeight {
			return bad("priority_weight: %q (want a number above 0 and at most %g)", f[7], float64(maxWeight))
		}
		slo, err := number(f[8])
		if err != nil || (slo < 0 && slo != -1) || slo > MaxSeconds {
			return bad("SLO: %q (want -1 or seconds from 0 to %g)", f[8], float64(MaxSeconds))
		}
		at, err := number(f[9])
		if err != nil || at < 0 || at > MaxSeconds {
			return bad("arrival_time: %q (want seconds from 0 to %g)", f[9], float64(MaxSeconds))
		}
		j := Job{ID: len(jobs), Arrival: at, Key: key, Steps: steps, Weight: w}
		if slo > 0 {
			j.SLO = slo
		}
		jobs = append(jobs, j)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return jobs, nil
}
