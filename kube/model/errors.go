package model

import (
	"errors"
	"fmt"
)

// Errors of this package; test them with errors.Is.
var (
	// ErrInvalid: a label, annotation or resource that cannot be read (not a
	// number, out of range, malformed link matrix, unknown GPU type).
	ErrInvalid = errors.New("invalid input")
	// ErrNoGPUs: a node that has no whole GPUs for gpusched to manage (no
	// GPU labels or capacity, or MIG devices only).
	ErrNoGPUs = errors.New("no GPUs")
)

// maxShown bounds how much of a bad value an error repeats.
const maxShown = 64

// FieldError is bad input in one label, annotation or resource of an
// object. It wraps ErrInvalid and, when there is one, the underlying error
// (a topology.SpecError for a link matrix that does not validate). It is
// not changed after it is returned, so it is safe for concurrent use.
type FieldError struct {
	// Field names the label, annotation or resource.
	Field string
	// Value is the value read, cut to 64 bytes.
	Value string
	// Msg says what is wrong.
	Msg string
	// Err is the underlying error, if any.
	Err error
}

func (e *FieldError) Error() string {
	s := fmt.Sprintf("%s %q: %s", e.Field, e.Value, e.Msg)
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

// Unwrap returns ErrInvalid and the underlying error.
func (e *FieldError) Unwrap() []error {
	if e.Err == nil {
		return []error{ErrInvalid}
	}
	return []error{ErrInvalid, e.Err}
}

func fieldErr(field, value string, err error, format string, args ...any) *FieldError {
	return &FieldError{Field: field, Value: cutShown(value), Msg: fmt.Sprintf(format, args...), Err: err}
}
