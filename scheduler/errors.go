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
