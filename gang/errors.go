package gang

import "errors"

// Errors of this package; test them with errors.Is.
var (
	// ErrInvalid: input a scheduler cannot decide on (job views that
	// disagree with the free counts, duplicate job IDs, scale factors
	// below 1, rates that are negative or not finite, a running job on a
	// type that does not exist) or settings out of range.
	ErrInvalid = errors.New("gang: invalid input")
	// ErrRejected: the member's group timed out or was rejected.
	ErrRejected = errors.New("gang: group rejected")
	// ErrUnknownMember: Wait for a member that is not waiting.
	ErrUnknownMember = errors.New("gang: unknown member")
)
