package cluster

import (
	"errors"
	"fmt"
	"strings"

	"github.com/gpusched/gpusched/topology"
)

// Kinds of error of this package. An [*Error] wraps exactly one of them, so
// errors.Is(err, ErrBusy) and the like tell what went wrong.
var (
	// ErrInvalid: an argument that cannot be acted on: an empty or overlong
	// holder key, a GPU position out of range, the same GPU twice in one
	// call, a server that does not validate.
	ErrInvalid = errors.New("invalid argument")
	// ErrUnknownServer: no server has the given id.
	ErrUnknownServer = errors.New("unknown server")
	// ErrDuplicateServer: a server id (or a GPU UUID) that the state
	// already has.
	ErrDuplicateServer = errors.New("duplicate server")
	// ErrBusy: a GPU that another holder (or the same one) already holds.
	ErrBusy = errors.New("GPU already held")
	// ErrFailed: a GPU that is marked failed cannot be bound.
	ErrFailed = errors.New("GPU failed")
	// ErrNotHeld: a release of a GPU that the holder does not hold.
	ErrNotHeld = errors.New("GPU not held by this holder")
	// ErrInconsistent: Check found the state's counts or indexes out of
	// step with its GPUs (a bug in this package, or a caller that wrote to
	// a view it was handed read-only).
	ErrInconsistent = errors.New("inconsistent state")
)

// Error describes one problem: the operation, where (server, GPU, holder,
// when known) and which kind of problem it is.
type Error struct {
	// Op is the method that failed ("bind", "release", "add server", ...).
	Op string
	// Server is the server's id and GPU the GPU's position in it, when the
	// problem is about one GPU (GPU is -1 otherwise).
	Server string
	GPU    int
	// Holder is the holder involved, if any.
	Holder string
	// Msg says what is wrong, in words, beyond what Kind says; it may be
	// empty.
	Msg string
	// Kind is one of the Err values of this package.
	Kind error

	cause error // the topology error behind an ErrInvalid, if any
}

func (e *Error) Error() string {
	where := ""
	if e.Server != "" {
		// "remove server "a"", not "remove server server "a"".
		if !strings.HasSuffix(e.Op, "server") {
			where = " server"
		}
		where += " " + quote(e.Server, topology.MaxIDLen)
		if e.GPU >= 0 {
			where += fmt.Sprintf(" gpu %d", e.GPU)
		}
	}
	if e.Holder != "" {
		where += " holder " + quote(e.Holder, MaxHolderLen)
	}
	msg := fmt.Sprintf("cluster: %s%s: %s", e.Op, where, e.Kind)
	if e.Msg != "" {
		msg += ": " + e.Msg
	}
	if e.cause != nil {
		msg += ": " + e.cause.Error()
	}
	return msg
}

// Unwrap returns the kind and, for a server that does not validate, the
// topology error, so that errors.Is works on both.
func (e *Error) Unwrap() []error {
	if e.cause != nil {
		return []error{e.Kind, e.cause}
	}
	return []error{e.Kind}
}

// quote quotes a server id or holder key for a message, cut to 64 bytes
// when it is longer than limit (a key refused for its length).
func quote(s string, limit int) string {
	if len(s) <= limit {
		return fmt.Sprintf("%q", s)
	}
	return fmt.Sprintf("%q... (%d bytes)", s[:64], len(s))
}

func newErr(kind error, op, format string, args ...any) *Error {
	return &Error{Op: op, GPU: -1, Msg: fmt.Sprintf(format, args...), Kind: kind}
}
