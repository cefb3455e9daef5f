package allocation

import (
	"errors"
	"fmt"
)

// Errors of this package; test them with errors.Is.
var (
	// ErrInvalidProblem: a problem that cannot be allocated as given
	// (negative capacities, throughput rows of the wrong length, duplicate
	// IDs, NaN values, values outside the ranges below, ...).
	ErrInvalidProblem = errors.New("allocation: invalid problem")
	// ErrNoSolution: the policy's program has no solution (for instance
	// SLOs that cannot all be met, when the policy does not fall back).
	ErrNoSolution = errors.New("allocation: no solution")
	// ErrInvalidAllocation: a policy's answer that does not fit its
	// problem (no allocation, rows of the wrong length, an X that is NaN,
	// negative or above 1, more time or GPUs than there are).
	ErrInvalidAllocation = errors.New("allocation: invalid allocation")
	// ErrInvalidReport: a RoundReport that does not describe the last round
	// (another round's start, a second report, unknown jobs or types,
	// negative or non-finite seconds).
	ErrInvalidReport = errors.New("allocation: invalid round report")
	// ErrInvalidSnapshot: state given to Rounds.Restore that no Rounds
	// wrote (malformed JSON, another version, inconsistent lengths).
	ErrInvalidSnapshot = errors.New("allocation: invalid snapshot")
)

// Ranges of a Problem's values. Values outside them make no physical sense
// for GPU training jobs and only push the linear programs out of the range
// where floating point can solve them, so Problem.Validate rejects them
// with an error wrapping ErrInvalidProblem that names the value.
const (
	// MinRate and MaxRate bound a positive throughput, in steps per
	// second (0 means the job cannot run on the type): from a step every
	// 30 years to a billion steps per second.
	MinRate, MaxRate = 1e-9, 1e9
	// MaxSteps bounds a job's remaining steps.
	MaxSteps = 1e18
	// MaxCapacity bounds the GPUs of one type and a job's scale factor, so
	// that sums over types and jobs cannot overflow an int.
	MaxCapacity = 1 << 30
	// MinWeight and MaxWeight bound a positive job weight (0 means 1) and
	// an entity weight.
	MinWeight, MaxWeight = 1e-9, 1e9
	// MinPrice and MaxPrice bound a GPU's price per hour.
	MinPrice, MaxPrice = 1e-9, 1e9
	// MaxTime bounds the magnitude of times (Now, arrivals, deadlines), in
	// seconds: about 31 million years, within which float64 keeps times to
	// a fraction of a second.
	MaxTime = 1e15
)

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalidProblem, fmt.Sprintf(format, args...))
}

// policyError names the policy and the problem's size in an error from
// inside a policy (an LP failure, a cancellation), so that a caller sees
// which policy failed on what; errors about the problem itself already say
// what was wrong and are returned as they are.
func policyError(name string, p *Problem, err error) error {
	if err == nil || errors.Is(err, ErrInvalidProblem) {
		return err
	}
	return fmt.Errorf("allocation: %s on %d jobs and %d GPU types: %w", name, len(p.Jobs), len(p.Types), err)
}
