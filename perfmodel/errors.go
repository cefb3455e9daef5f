package perfmodel

import (
	"errors"
	"fmt"

	"github.com/gpusched/gpusched/topology"
)

// Kinds of error. Every error of this package wraps one of them, so that
// errors.Is(err, ErrUnknownJob) and the like tell what went wrong.
var (
	// ErrUnknownJob: the model has no entry for the job (its model, batch
	// size or scale factor).
	ErrUnknownJob = errors.New("unknown job")
	// ErrUnknownGPUType: the model has no entry for the GPU type.
	ErrUnknownGPUType = errors.New("unknown GPU type")
	// ErrInvalidJob: a job key out of range (no model name, a negative batch
	// size, a scale factor below 1).
	ErrInvalidJob = errors.New("invalid job")
	// ErrMalformedTable: a throughput file that cannot be read.
	ErrMalformedTable = errors.New("malformed throughput table")
	// ErrSpecFit: FitSpecModel was given bad specs or measurements, or too
	// few to fit.
	ErrSpecFit = errors.New("cannot fit the hardware-spec model")
)

// JobError reports a job that a model cannot answer for.
// A JobError is not changed after it is returned: safe for concurrent
// reads.
type JobError struct {
	// Job is the job asked about, and Other its partner in a co-location
	// lookup, if any.
	Job   JobKey
	Other *JobKey
	// Type is the GPU type asked about, if any.
	Type topology.GPUType
	// Kind is one of the Err values of this package.
	Kind error
	// Msg says more, such as which values the model does have.
	Msg string
}

func (e *JobError) Error() string {
	s := "perfmodel: " + e.Job.String()
	if e.Other != nil {
		s += " with " + e.Other.String()
	}
	if e.Type != "" {
		s += fmt.Sprintf(" on %s", e.Type)
	}
	s += ": " + e.Kind.Error()
	if e.Msg != "" {
		s += ": " + e.Msg
	}
	return s
}

// Unwrap returns the kind.
func (e *JobError) Unwrap() error { return e.Kind }
