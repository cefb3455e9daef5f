package learn

import (
	"errors"
	"strconv"
)

// Kinds of error. Every error of this package wraps one of them, so that
// errors.Is(err, ErrOutOfOrder) and the like tell what went wrong.
var (
	// ErrInvalidObservation: a field of an observation is not a number,
	// out of range, or inconsistent with its segment (a segment runs on
	// one type and GPU count).
	ErrInvalidObservation = errors.New("invalid observation")
	// ErrOutOfOrder: steps that went down within a segment, time that
	// went backwards, or a segment number lower than the current one.
	ErrOutOfOrder = errors.New("out of order")
	// ErrInvalidJob: a job name or JobInfo out of range.
	ErrInvalidJob = errors.New("invalid job")
	// ErrLimit: a bound of Config (jobs, types, tracks of a job) reached.
	ErrLimit = errors.New("limit reached")
	// ErrUnknownType: a GPU type outside Config.Types, when it is set.
	ErrUnknownType = errors.New("unknown GPU type")
	// ErrInvalidConfig: a Config value out of range.
	ErrInvalidConfig = errors.New("invalid configuration")
	// ErrMalformedSnapshot: a snapshot that Restore cannot take.
	ErrMalformedSnapshot = errors.New("malformed snapshot")
)

// Error reports what was wrong and where: the job and the field, when
// there are.
// An Error is not changed after it is returned: safe for concurrent
// reads.
type Error struct {
	// Job is the job's name, if the error concerns one.
	Job string
	// Field names the field at fault: "Steps", "Time", "GPUs", "Type",
	// "Segment" of an Observation, a JobInfo or Config field, or the path
	// of a snapshot's value.
	Field string
	// Kind is one of the Err values of this package.
	Kind error
	// Msg says more: the value and what was wanted.
	Msg string
}

func (e *Error) Error() string {
	s := "learn: "
	if e.Job != "" {
		s += "job " + strconv.Quote(e.Job) + ": "
	}
	if e.Field != "" {
		s += e.Field + ": "
	}
	s += e.Kind.Error()
	if e.Msg != "" {
		s += ": " + e.Msg
	}
	return s
}

// Unwrap returns the kind.
func (e *Error) Unwrap() error { return e.Kind }

// fail returns an *Error.
func fail(job, field string, kind error, msg string) error {
	if len(job) > 64 {
		job = job[:64] + "..."
	}
	return &Error{Job: job, Field: field, Kind: kind, Msg: msg}
}
