package multires

import (
	"errors"
	"fmt"
)

// Errors of this package; test them with errors.Is.
var (
	// ErrInvalidSurface: a throughput surface that cannot be used (a grid
	// that is empty, too large, not ascending or not positive; a rate that
	// is negative, not finite, above MaxRate, or that falls when a job is
	// given more CPUs or memory).
	ErrInvalidSurface = errors.New("multires: invalid surface")
	// ErrInvalidProfile: a profile without a name, an iteration time or a
	// surface, or whose ideal share is not positive and finite.
	ErrInvalidProfile = errors.New("multires: invalid profile")
	// ErrInvalidCluster: servers with no GPUs, or CPUs or memory that are
	// not positive and finite, or more servers than MaxServers.
	ErrInvalidCluster = errors.New("multires: invalid cluster")
	// ErrInvalidJob: a job with no profile, fewer than one GPU or more
	// GPUs than the cluster has, or bounds out of range or crossed.
	ErrInvalidJob = errors.New("multires: invalid job")
	// ErrMalformedProfiles: a profile file that cannot be read.
	ErrMalformedProfiles = errors.New("multires: malformed profiles")
	// ErrNoSolution: Opt's program could not be solved.
	ErrNoSolution = errors.New("multires: no solution")
)

// Bounds on the values this package accepts, so that a profile written by
// a tenant or read from a file stays a hint of physical size.
const (
	// MaxGrid is the most grid points on each axis of a Surface.
	MaxGrid = 64
	// MaxCPUs and MaxMemGB bound a grid point, a share and a server.
	MaxCPUs  = 1 << 16
	MaxMemGB = 1 << 24
	// MaxRate bounds a surface's rates (relative to the proportional
	// share, where a rate is 1).
	MaxRate = 1e3
	// MaxServers and MaxJobs bound an allocation problem.
	MaxServers = 1 << 20
	MaxJobs    = 1 << 22
)

// Error is a problem with an input, naming the kind (one of the Err values
// above), where it is (a path such as "models[3].rate[2][1]" or
// "servers[7]") and what is wrong. It is not changed after it is returned:
// safe for concurrent reads.
type Error struct {
	// Kind is one of the Err values of this package.
	Kind error
	// Where is the path of the offending value; Msg says what is wrong.
	Where string
	Msg   string
}

func (e *Error) Error() string {
	if e.Where == "" {
		return e.Kind.Error() + ": " + e.Msg
	}
	return e.Kind.Error() + ": " + e.Where + ": " + e.Msg
}

// Unwrap returns the kind.
func (e *Error) Unwrap() error { return e.Kind }

func errorf(kind error, where, format string, args ...any) *Error {
	return &Error{Kind: kind, Where: where, Msg: fmt.Sprintf(format, args...)}
}
