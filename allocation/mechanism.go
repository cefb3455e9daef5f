package allocation

import (
	"fmt"

	"github.com/gpusched/gpusched/topology"
)

// Mechanism is the settings of Gavel's round mechanism: one vocabulary for
// the three places that run it, which embed it (Rounds, scheduler.Config,
// sim.Config), so that a setting means the same wherever it is given. The
// zero value is Gavel's mechanism as this package runs it by default:
// rounds of 360 s, a new allocation at most every 1,920 s, a queue per
// type, types fastest first, work-conserving. A Mechanism is a plain
// value, safe for concurrent reads.
type Mechanism struct {
	// RoundLength is the length of a round in seconds; 0 means 360.
	RoundLength float64
	// MinResetInterval is the least time between two allocations; 0 means
	// 1920 s, and a negative value recomputes at every change.
	MinResetInterval float64
	// GlobalQueue puts every (unit, type) entry in one queue (Gavel's global
	// queue option), which lets a job run first on the type where it is
	// furthest behind; by default each type has its own queue, visited in
	// type order (Gavel's default).
	GlobalQueue bool
	// TypeOrder gives the order in which types are visited: the types it
	// lists, in its order, then the others. Without it (and for the types
	// it does not list) types are visited fastest first: by the mean over
	// the jobs of the type's rate relative to the job's best rate, as of
	// the last reset (on Gavel's table: V100, P100, K80), ties in the order
	// of Problem.Types.
	TypeOrder []topology.GPUType
	// ShuffleTypes visits the types in an order drawn from Seed each round
	// (Gavel does so for policies that ignore throughputs). It breaks ties
	// in the global queue.
	ShuffleTypes bool
	Seed         uint64
	// LeaveIdle leaves idle the GPUs that the priority pass did not fill
	// (Rounds before it was work-conserving).
	LeaveIdle bool
	// Compat selects Gavel's exact behaviour (CompatGavel) instead of ours.
	Compat Compat
}

// EffectiveRoundLength returns the length of a round in seconds:
// RoundLength, or 360 when it is 0.
func (m *Mechanism) EffectiveRoundLength() float64 {
	if m.RoundLength > 0 {
		return m.RoundLength
	}
	return 360
}

// EffectiveResetInterval returns the least time between two allocations
// in seconds: MinResetInterval, 1920 when it is 0, and 0 (every change)
// when it is negative.
func (m *Mechanism) EffectiveResetInterval() float64 {
	switch {
	case m.MinResetInterval > 0:
		return m.MinResetInterval
	case m.MinResetInterval < 0:
		return 0
	}
	return 1920
}

// ValidateMechanism checks the settings (named so that it reads right
// where Mechanism is embedded): RoundLength 0 or in (0, MaxTime],
// MinResetInterval in [-MaxTime, MaxTime], TypeOrder's types valid and
// each listed once, Compat a known mode. The error wraps
// ErrInvalidProblem and names the setting.
func (m *Mechanism) ValidateMechanism() error {
	switch {
	case !inRange(m.RoundLength, 0, MaxTime):
		return invalid("round length %v s, outside [0, %g] (0 means 360)", m.RoundLength, MaxTime)
	case !inRange(m.MinResetInterval, -MaxTime, MaxTime):
		return invalid("minimum reset interval %v s, outside [%g, %g] (0 means 1920, negative every change)", m.MinResetInterval, -MaxTime, MaxTime)
	case m.Compat > CompatGavel:
		return invalid("compatibility mode %v", m.Compat)
	case len(m.TypeOrder) > maxSnapshotTypes:
		return invalid("type order of %d types", len(m.TypeOrder))
	}
	seen := make(map[topology.GPUType]bool, len(m.TypeOrder))
	for _, t := range m.TypeOrder {
		if err := t.Validate(); err != nil {
			return fmt.Errorf("%w: type order: %w", ErrInvalidProblem, err)
		}
		if seen[t] {
			return invalid("TypeOrder lists %s twice", t)
		}
		seen[t] = true
	}
	return nil
}
