package allocation

import (
	"fmt"
)

// answerTolerance is the slack Rounds allows in a policy's answer: X a
// little outside [0, 1], rows and capacities a little over, as solvers'
// residues leave them.
const answerTolerance = 1e-6

// fitSlack is how far over its bound solver residues may leave a job's
// share of time or a type's GPUs in use before fit scales them back.
// Well-scaled problems leave residues far below it, so their answers are
// untouched; rates and weights at the ends of their ranges (1e9 against
// 1e-9) leave residues of a few 1e-6, over answerTolerance.
const fitSlack = 1e-7

// fit scales an LP policy's answer back onto its bounds where solver
// residues leave a job's share of time over 1 or a type's GPUs in use over
// its capacity by more than fitSlack: a job's shares alone by f = 1/sum,
// a pair's by the product of its jobs' f, a type's by capacity/used.
// Scaling only lowers shares, so one pass over the jobs, then one over the
// types, suffices.
func (a *Allocation) fit(p *Problem) *Allocation {
	var f []float64 // per job, allocated only when a row is over
	sums := make([]float64, len(a.X))
	for m, row := range a.X {
		for _, x := range row {
			sums[m] += x
		}
	}
	for _, pr := range a.Pairs {
		for _, x := range pr.X {
			sums[pr.A] += x
			sums[pr.B] += x
		}
	}
	for m, s := range sums {
		if s > 1+fitSlack {
			if f == nil {
				f = make([]float64, len(a.X))
				for i := range f {
					f[i] = 1
				}
			}
			f[m] = 1 / s
			for k := range a.X[m] {
				a.X[m][k] *= f[m]
			}
		}
	}
	if f != nil {
		for _, pr := range a.Pairs {
			if g := f[pr.A] * f[pr.B]; g != 1 {
				for k := range pr.X {
					pr.X[k] *= g
				}
			}
		}
	}
	for k := range p.Types {
		used := 0.0
		for m := range a.X {
			used += float64(p.Jobs[m].ScaleFactor) * p.Jobs[m].count() * a.X[m][k]
		}
		for _, pr := range a.Pairs {
			used += float64(p.Jobs[pr.A].ScaleFactor) * pr.X[k]
		}
		if c := float64(p.Capacity[k]); used > c*(1+fitSlack)+fitSlack {
			g := c / used
			for m := range a.X {
				a.X[m][k] *= g
			}
			for _, pr := range a.Pairs {
				pr.X[k] *= g
			}
		}
	}
	return a
}

// checkAnswer checks a policy's answer to p before Rounds acts on it: an
// allocation must be given and fit p (Allocation.Check). The error wraps
// ErrInvalidAllocation and names the policy. An answer without Types gets
// p's. With capacity false the GPUs used of a type may exceed its
// capacity: Gavel's fifo.py gives such answers (its type-assignment quirk
// puts more jobs on a type than it has GPUs) and its mechanism runs what
// fits, so CompatGavel accepts them.
func checkAnswer(pol Policy, p *Problem, a *Allocation, capacity bool) error {
	if a == nil {
		return fmt.Errorf("%w: policy %T returned no allocation and no error", ErrInvalidAllocation, pol)
	}
	if err := a.check(p, answerTolerance, capacity); err != nil {
		return fmt.Errorf("%w: policy %T: %w", ErrInvalidAllocation, pol, err)
	}
	if a.Types == nil {
		a.Types = p.Types // the types the allocation is in force for
	}
	return nil
}

// checkConfig checks the mechanism's settings and the time of a round;
// errors wrap ErrInvalidProblem. (A change of GPU types or capacities is
// not an error: Rounds re-solves.)
func (r *Rounds) checkConfig(p *Problem, now float64) error {
	switch {
	case r.Policy == nil:
		return invalid("Rounds has no policy")
	case !inRange(now, -MaxTime, MaxTime):
		return invalid("round at %v s, outside [%g, %g]", now, -MaxTime, MaxTime)
	}
	if err := r.ValidateMechanism(); err != nil {
		return err
	}
	for k, g := range r.GPUsPerServer {
		if g < 0 || g > MaxCapacity {
			return invalid("GPUs per server of type %d: %d, outside [0, %d]", k, g, MaxCapacity)
		}
	}
	return nil
}
