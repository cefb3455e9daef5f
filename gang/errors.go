package gang

import "errors"

// Errors of this package; test them with errors.Is.
var (
	// ErrInvalid: input a scheduler cannot decide on (job views that
	// disagree with the free counts, duplicate job IDs, scale factors
	// below 1, rates that are negative or not finite, a running job on a
	// type that does not exist), settings out of range, or a coscheduling
	// group without a name or with fewer than one member.
	ErrInvalid = errors.New("gang: invalid input")
	// ErrConflict: a group declared again with another number of members
	// (members that disagree on their gang's size).
	ErrConflict = errors.New("gang: group declared with another size")
	// ErrRejected: the member's group timed out, was rejected, or is in its
	// backoff window after a rejection.
	ErrRejected = errors.New("gang: group rejected")
	// ErrUnknownMember: Wait for a member that is not waiting.
	ErrUnknownMember = errors.New("gang: unknown member")
)
