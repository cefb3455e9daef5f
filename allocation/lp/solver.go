package lp

import (
	"context"
	"errors"
	"fmt"
)

// Status is the outcome of a solve.
type Status int

// Outcomes of a solve.
const (
	// Optimal: the solution is optimal within the solver's tolerances.
	Optimal Status = iota
	// Infeasible: no point satisfies the constraints.
	Infeasible
	// Unbounded: the objective can be improved without limit.
	Unbounded
	// IterationLimit: the solver stopped at its iteration limit.
	IterationLimit
	// TimeLimit: the solver stopped at its time limit.
	TimeLimit
	// Cancelled: the context was cancelled or its deadline passed.
	Cancelled
	// Failed: the solver gave up for numerical reasons.
	Failed
)

var statusNames = [...]string{"optimal", "infeasible", "unbounded", "iteration limit", "time limit", "cancelled", "failed"}

func (s Status) String() string {
	if s >= 0 && int(s) < len(statusNames) {
		return statusNames[s]
	}
	return fmt.Sprintf("Status(%d)", int(s))
}

// Errors returned with a non-optimal [Solution]; test them with errors.Is.
// A cancelled solve also matches the context's error (context.Canceled or
// context.DeadlineExceeded).
var (
	ErrInfeasible     = errors.New("lp: problem is infeasible")
	ErrUnbounded      = errors.New("lp: problem is unbounded")
	ErrIterationLimit = errors.New("lp: iteration limit reached")
	ErrTimeLimit      = errors.New("lp: time limit reached")
	ErrCancelled      = errors.New("lp: solve cancelled")
	ErrNumerical      = errors.New("lp: numerical failure")
	ErrInvalidModel   = errors.New("lp: invalid model")
)

// Errors of [ReadMPS]: every error it returns for bad input is an
// *[MPSError] matching ErrMPS, and also ErrMPSLimit when a size cap was
// exceeded.
var (
	ErrMPS      = errors.New("lp: bad MPS file")
	ErrMPSLimit = errors.New("lp: MPS file exceeds a size cap")
)

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalidModel, fmt.Sprintf(format, args...))
}

// StatusError returns the error that goes with a non-optimal status (nil for
// Optimal), wrapping cause where there is one (a context error for
// Cancelled, a solver message for Failed).
func StatusError(s Status, cause error) error {
	var kind error
	switch s {
	case Optimal:
		return nil
	case Infeasible:
		kind = ErrInfeasible
	case Unbounded:
		kind = ErrUnbounded
	case IterationLimit:
		kind = ErrIterationLimit
	case TimeLimit:
		kind = ErrTimeLimit
	case Cancelled:
		kind = ErrCancelled
	default:
		kind = ErrNumerical
	}
	if cause == nil {
		return kind
	}
	return fmt.Errorf("%w: %w", kind, cause)
}

// Solution is what a solver found.
//
// Duals follow one convention whatever the sense: the reduced costs are
// d = c - A'y, and Duals[i] = y_i is the rate at which the optimal objective
// changes as the active bound of row i moves (a shadow price). So for
// maximise x + y subject to x + 2y <= 4 and 3x + y <= 6, the duals are
// (0.4, 0.2), and for a minimisation with binding >= rows they are >= 0.
type Solution struct {
	Status Status
	// Objective is c'x at X, plus the model's objective constant.
	Objective float64
	// X holds the values of the variables.
	X []float64
	// Duals holds one value per row (see above).
	Duals []float64
	// ReducedCosts holds c - A'y, one value per variable.
	ReducedCosts []float64
	// Iterations is the solver's iteration count (simplex pivots or
	// interior-point steps).
	Iterations int
	// Residuals says how far X and Duals are from optimal, for solvers that
	// measure it (InteriorPoint does): zero for an exact optimum.
	Residuals Residuals
	// ModelResiduals measures X and Duals on the model as given, unscaled
	// ([ModelResiduals]), for solvers that check it (InteriorPoint does
	// before it reports Optimal, against its ModelTolerance).
	ModelResiduals Residuals
	// Vertex says that X is a basic solution, a vertex of the feasible set
	// (InteriorPoint with Crossover; the simplex methods of the clp
	// package).
	Vertex bool
}

// Residuals are the relative distances of a point from optimality that an
// interior-point method measures on its scaled problem: the largest
// violation of the rows and bounds relative to 1 + the largest right-hand
// side or bound, the largest violation of the dual constraints relative to
// 1 + the largest cost, and the duality gap relative to 1 + the objective;
// or the same measures on the model as given ([ModelResiduals]).
type Residuals struct {
	Primal, Dual, Gap float64
}

// Solver solves linear programs. Implementations return a Solution with
// Status Optimal and a nil error, or an error wrapping one of this
// package's Err values (and, when the context ended, the context's error),
// with a Solution holding the status when there is one. Invalid models
// yield an error wrapping [ErrInvalidModel] and no Solution.
type Solver interface {
	Solve(ctx context.Context, m *Model) (*Solution, error)
}

// Options are settings that solvers share. The zero value means the
// solver's defaults.
type Options struct {
	// MaxIterations bounds the iterations; 0 means the solver's default.
	MaxIterations int
	// MaxSeconds bounds the wall-clock time of a solve; 0 means none.
	MaxSeconds float64
}

// CheckFeasible returns the largest violation by x of the model's variable
// bounds and rows (0 when x satisfies them all exactly). It helps tests and
// cross-checks between backends.
func CheckFeasible(m *Model, x []float64) float64 {
	worst := 0.0
	viol := func(v, lo, up float64) {
		worst = max(worst, lo-v, v-up)
	}
	for j := range m.obj {
		viol(x[j], m.colLo[j], m.colUp[j])
	}
	for i := range m.rowLo {
		idx, val := m.Row(i)
		s := 0.0
		for k, j := range idx {
			s += val[k] * x[j]
		}
		viol(s, m.rowLo[i], m.rowUp[i])
	}
	return worst
}

// ObjectiveValue returns c'x plus the objective constant.
func (m *Model) ObjectiveValue(x []float64) float64 {
	s := m.objConst
	for j, c := range m.obj {
		s += c * x[j]
	}
	return s
}
