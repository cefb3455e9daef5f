package allocation

import (
	"context"
	"fmt"
	"math"
	"slices"

	"github.com/gpusched/gpusched/topology"
)

// Policy decides an allocation for a problem. Every policy of this
// package is safe for concurrent use; the stateful ones (FIFO, Gandiva,
// FinishTimeFairness) serialise their calls. Allocate only reads the
// Problem.
type Policy interface {
	Allocate(ctx context.Context, p *Problem) (*Allocation, error)
}

// Pair is the time fractions of two jobs sharing GPUs (space sharing).
// A Pair is a plain value: safe for concurrent reads, not for writes
// while others read it.
type Pair struct {
	// A and B index Problem.Jobs.
	A, B int
	// X[k] is the fraction of time the pair runs together on type k.
	X []float64
}

// Allocation is a policy's answer: for each job m and type k, the fraction
// of time X[m][k] the job should run on that type (Gavel's X_mj), in the
// order of Problem.Jobs and Problem.Types; and, with space sharing, the
// fractions of time pairs of jobs share GPUs.
//
// An Allocation is a plain value: safe for concurrent reads, not for
// writes while others read it.
type Allocation struct {
	Types  []topology.GPUType
	JobIDs []int
	X      [][]float64
	Pairs  []Pair
	// Objective is the policy's optimum, in its own units (the max-min
	// level, total throughput, 1/makespan, ...), when it has one.
	Objective float64
	// Note says when the policy changed course, for instance falling back
	// from infeasible SLOs to the policy without them.
	Note string
	// LP describes the linear programs solved for this allocation; nil
	// when the policy solved none or does not say.
	LP *LPStats `json:",omitempty"`
}

func newAllocation(p *Problem) *Allocation {
	a := &Allocation{Types: p.Types, JobIDs: make([]int, len(p.Jobs)), X: make([][]float64, len(p.Jobs))}
	for m := range p.Jobs {
		a.JobIDs[m] = p.Jobs[m].ID
		a.X[m] = make([]float64, len(p.Types))
	}
	return a
}

// EffectiveThroughput returns job m's rate under a with throughputs tput
// (Gavel's throughput(m, X) = sum_k T_mk X_mk, plus its share of pairs).
func (a *Allocation) EffectiveThroughput(p *Problem, m int) float64 {
	s := 0.0
	for k, x := range a.X[m] {
		s += p.Jobs[m].Throughput[k] * x
	}
	for _, pr := range a.Pairs {
		if pr.A != m && pr.B != m {
			continue
		}
		for k, x := range pr.X {
			ta, tb := p.Pairs.Rates(pr.A, pr.B, k)
			if pr.A == m {
				s += ta * x
			} else {
				s += tb * x
			}
		}
	}
	return s
}

// Check verifies the invariants every allocation must meet: one row of
// len(p.Types) entries per job of p (JobIDs, when set, naming them in
// order; Types, when set, equal to p's), pairs of two distinct jobs of p,
// 0 <= X <= 1, each job's time (alone and in pairs) summing to at most 1,
// and the GPUs used of each type (scale factor times time) within its
// capacity, all within tol. It returns an error wrapping
// ErrInvalidAllocation for the first violation, naming the job and type.
// p must be valid (Problem.Validate).
func (a *Allocation) Check(p *Problem, tol float64) error {
	if err := a.check(p, tol, true); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidAllocation, err)
	}
	return nil
}

// check is Check without the error kind; capacity false skips the check
// of the GPUs used against each type's capacity.
func (a *Allocation) check(p *Problem, tol float64, capacity bool) error {
	if err := a.checkShape(p); err != nil {
		return err
	}
	k := len(p.Types)
	rowSum := make([]float64, len(p.Jobs))
	used := make([]float64, k)
	for m, row := range a.X {
		for j, x := range row {
			if !(x >= -tol && x <= 1+tol) {
				return fmt.Errorf("job %d on %s: X = %v outside [0, 1]", p.Jobs[m].ID, p.Types[j], x)
			}
			rowSum[m] += x
			used[j] += float64(p.Jobs[m].ScaleFactor) * x
		}
	}
	for _, pr := range a.Pairs {
		for j, x := range pr.X {
			if !(x >= -tol && x <= 1+tol) {
				return fmt.Errorf("pair (%d, %d) on %s: X = %v outside [0, 1]", p.Jobs[pr.A].ID, p.Jobs[pr.B].ID, p.Types[j], x)
			}
			rowSum[pr.A] += x
			rowSum[pr.B] += x
			used[j] += float64(p.Jobs[pr.A].ScaleFactor) * x
		}
	}
	for m, s := range rowSum {
		if s > 1+tol {
			return fmt.Errorf("job %d gets %v of the time (more than 1)", p.Jobs[m].ID, s)
		}
	}
	for j, u := range used {
		if capacity && u > float64(p.Capacity[j])*(1+tol)+tol {
			return fmt.Errorf("%s: %v GPUs used of %d", p.Types[j], u, p.Capacity[j])
		}
	}
	return nil
}

// checkShape checks that a has a row of the right length for every job of
// p, and pairs of jobs of p.
func (a *Allocation) checkShape(p *Problem) error {
	k := len(p.Types)
	if len(a.X) != len(p.Jobs) {
		return fmt.Errorf("%d rows for %d jobs", len(a.X), len(p.Jobs))
	}
	if a.Types != nil && !slices.Equal(a.Types, p.Types) {
		return fmt.Errorf("GPU types %v, the problem's are %v", a.Types, p.Types)
	}
	if a.JobIDs != nil {
		if len(a.JobIDs) != len(p.Jobs) {
			return fmt.Errorf("%d job IDs for %d jobs", len(a.JobIDs), len(p.Jobs))
		}
		for m, id := range a.JobIDs {
			if id != p.Jobs[m].ID {
				return fmt.Errorf("row %d is for job %d, the problem's job there is %d", m, id, p.Jobs[m].ID)
			}
		}
	}
	for m, row := range a.X {
		if len(row) != k {
			return fmt.Errorf("job %d: %d entries for %d GPU types", p.Jobs[m].ID, len(row), k)
		}
	}
	for i, pr := range a.Pairs {
		switch {
		case pr.A < 0 || pr.A >= len(p.Jobs) || pr.B < 0 || pr.B >= len(p.Jobs) || pr.A == pr.B:
			return fmt.Errorf("pair %d joins jobs %d and %d of %d", i, pr.A, pr.B, len(p.Jobs))
		case len(pr.X) != k:
			return fmt.Errorf("pair (%d, %d): %d entries for %d GPU types", p.Jobs[pr.A].ID, p.Jobs[pr.B].ID, len(pr.X), k)
		}
	}
	return nil
}

// clip puts x into [0, 1], as Gavel does with every solution.
func clip(x float64) float64 { return math.Min(1, math.Max(0, x)) }
