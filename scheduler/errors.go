package scheduler

import "errors"

// Errors of this package; test them with errors.Is. Errors about the
// cluster (an unknown server, a GPU out of range or already held) wrap the
// cluster package's kinds as well.
var (
	// ErrInvalid: an argument that cannot be acted on: a job spec out of
	// range (no GPUs, a NaN weight, no throughput), an empty or overlong
	// key, a configuration without a policy, a round that starts before
	// the last one ended, a snapshot that does not parse, fails a check,
	// or was taken on another cluster or configuration (*MismatchError).
	ErrInvalid = errors.New("scheduler: invalid argument")
	// ErrUnknownJob: no job has the given key.
	ErrUnknownJob = errors.New("scheduler: unknown job")
	// ErrDuplicateJob: a job of the given key is already submitted.
	ErrDuplicateJob = errors.New("scheduler: duplicate job")
	// ErrStaleReport: a report for a round other than the last one, or for
	// a job that was not in it.
	ErrStaleReport = errors.New("scheduler: report does not match the last round")
)

// ReportField names a field of RoundReport, for ReportError. Its values
// are constants, safe for concurrent use.
type ReportField string

// The fields of RoundReport whose entries Report checks.
const (
	FieldRan    ReportField = "Ran"
	FieldFailed ReportField = "Failed"
	FieldHeld   ReportField = "Held"
)

// ReportError is Report's error for an entry of a RoundReport that it
// refuses: Field is the report's field and Index the entry's index in it,
// so that a caller can tell a refused Held part (which it may send again
// without) from a refused run. It wraps the error's kind: ErrInvalid, or
// ErrStaleReport (and ErrUnknownJob for a Held entry of a job not
// submitted). It is a plain value, safe for concurrent reads.
type ReportError struct {
	Field ReportField
	Index int
	Err   error
}

// Error returns the message of the error it wraps, which names the job
// and what is wrong.
func (e *ReportError) Error() string { return e.Err.Error() }

// Unwrap returns the error's kind.
func (e *ReportError) Unwrap() error { return e.Err }
