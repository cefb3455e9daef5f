package progress

import (
	"errors"
	"net/http"
)

// Errors of this package; test them with errors.Is. Each report the
// [Server] refuses is an [*Error] that wraps one of them and carries the
// HTTP status it is answered with.
var (
	// ErrConfig: a Config the server cannot run with (no client, resolver
	// or sink; a bound out of range).
	ErrConfig = errors.New("progress: invalid configuration")
	// ErrMethod: a request that is not a POST to [Path] (405, or 404 for
	// another path).
	ErrMethod = errors.New("progress: method or path not served")
	// ErrContentType: a body that is not declared as JSON (415).
	ErrContentType = errors.New("progress: body not declared as application/json")
	// ErrUnauthenticated: no bearer token, a malformed one, or one the
	// API server does not accept for the server's audience (401).
	ErrUnauthenticated = errors.New("progress: token not accepted")
	// ErrForbidden: an authenticated caller that is not a service account
	// token bound to a pod of the account's namespace (403).
	ErrForbidden = errors.New("progress: caller is not a pod's service account")
	// ErrUnknownPod: the pod the token is bound to is part of no workload
	// the controller schedules (404).
	ErrUnknownPod = errors.New("progress: pod of no scheduled workload")
	// ErrRateLimited: the pod reports more often than its token bucket
	// allows, or the server reviews too many new tokens at once (429,
	// with Retry-After).
	ErrRateLimited = errors.New("progress: too many reports")
	// ErrTooLarge: a body over [MaxBody] bytes (413).
	ErrTooLarge = errors.New("progress: body too large")
	// ErrMalformed: a body that is not one JSON object with a number
	// "steps" and at most a number "total" (400).
	ErrMalformed = errors.New("progress: malformed body")
	// ErrOutOfRange: steps or total negative or above [MaxSteps] (422).
	ErrOutOfRange = errors.New("progress: value out of range")
	// ErrNotMonotone: steps lower than the pod's last accepted report
	// (409).
	ErrNotMonotone = errors.New("progress: steps went back")
	// ErrNotRunning: the sink says the workload holds no GPUs now
	// (scheduler.ErrNotRunning; 409).
	ErrNotRunning = errors.New("progress: workload not running")
	// ErrRefused: the sink refused the report for another reason (the
	// scheduler's ErrInvalid or ErrUnknownJob; 422).
	ErrRefused = errors.New("progress: report refused by the scheduler")
	// ErrUnavailable: the TokenReview API or the sink failed (503, with
	// Retry-After); the report may be sent again.
	ErrUnavailable = errors.New("progress: service unavailable")
)

// codes are the short names of the kinds in a response body.
var codes = map[error]string{
	ErrMethod:          "method",
	ErrContentType:     "content_type",
	ErrUnauthenticated: "unauthenticated",
	ErrForbidden:       "forbidden",
	ErrUnknownPod:      "unknown_pod",
	ErrRateLimited:     "rate_limited",
	ErrTooLarge:        "too_large",
	ErrMalformed:       "malformed",
	ErrOutOfRange:      "out_of_range",
	ErrNotMonotone:     "not_monotone",
	ErrNotRunning:      "not_running",
	ErrRefused:         "refused",
	ErrUnavailable:     "unavailable",
}

// statuses are the HTTP statuses of the kinds.
var statuses = map[error]int{
	ErrMethod:          http.StatusMethodNotAllowed,
	ErrContentType:     http.StatusUnsupportedMediaType,
	ErrUnauthenticated: http.StatusUnauthorized,
	ErrForbidden:       http.StatusForbidden,
	ErrUnknownPod:      http.StatusNotFound,
	ErrRateLimited:     http.StatusTooManyRequests,
	ErrTooLarge:        http.StatusRequestEntityTooLarge,
	ErrMalformed:       http.StatusBadRequest,
	ErrOutOfRange:      http.StatusUnprocessableEntity,
	ErrNotMonotone:     http.StatusConflict,
	ErrNotRunning:      http.StatusConflict,
	ErrRefused:         http.StatusUnprocessableEntity,
	ErrUnavailable:     http.StatusServiceUnavailable,
}

// Error is a refused report: its kind (one of the Err values of this
// package), what was wrong in words that are safe to send back to the
// caller, and the underlying cause (a TokenReview's or the sink's error),
// which is only for the server's log and never sent. An Error is a value:
// safe for concurrent use once made.
type Error struct {
	// Kind is one of the Err values of this package.
	Kind error
	// Detail says what was wrong; it never holds the token or the cause.
	Detail string
	// Status is the HTTP status the report is answered with.
	Status int
	// RetryAfter is, for ErrRateLimited and ErrUnavailable, the whole
	// seconds after which a report may succeed (the Retry-After header).
	RetryAfter int
	// Cause is the underlying error, if any (logged, never sent).
	Cause error
}

func newError(kind error, detail string) *Error {
	status, ok := statuses[kind]
	if !ok {
		status = http.StatusInternalServerError
	}
	return &Error{Kind: kind, Detail: detail, Status: status}
}

// Error is the kind's text and the detail, one line; the cause is left
// out (use Unwrap).
func (e *Error) Error() string {
	if e.Detail == "" {
		return e.Kind.Error()
	}
	return e.Kind.Error() + ": " + e.Detail
}

// Unwrap returns the kind and the cause, for errors.Is and errors.As.
func (e *Error) Unwrap() []error {
	if e.Cause == nil {
		return []error{e.Kind}
	}
	return []error{e.Kind, e.Cause}
}

// Code is the kind's short name, as in a response's "error" field
// ("not_monotone", "rate_limited", ...).
func (e *Error) Code() string {
	if c, ok := codes[e.Kind]; ok {
		return c
	}
	return "internal"
}
