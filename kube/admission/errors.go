package admission

import "errors"

// Errors of this package; test them with errors.Is.
var (
	// ErrConfig: a Config that cannot run (no client, no policy, a round
	// length or default rate out of range, an unknown policy name).
	ErrConfig = errors.New("admission: invalid configuration")
	// ErrMalformed: a workload (a gated pod, a pod group or a Job) whose
	// labels, annotations or resources cannot be read, or that can never
	// be admitted (no GPUs, members of a group that disagree). It is
	// reported by an event on the object and skipped; the others go on.
	ErrMalformed = errors.New("admission: malformed workload")
	// ErrState: the state ConfigMap holds something this controller did
	// not write (bad JSON, another version, a snapshot the scheduler
	// refuses).
	ErrState = errors.New("admission: bad saved state")
)
