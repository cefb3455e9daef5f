package allocation

import (
	"errors"
	"fmt"
	"math"

	"github.com/gpusched/gpusched/topology"
)

// Job is one job of a Problem.
type Job struct {
	// ID identifies the job; IDs are unique within a Problem.
	ID int
	// Weight is the job's priority weight (Gavel's w_m); 0 means 1.
	Weight float64
	// ScaleFactor is the number of GPUs the job uses at once (>= 1).
	ScaleFactor int
	// RemainingSteps is the work left, in steps (> 0 for policies that
	// use it: makespan, finish-time fairness, SLOs).
	RemainingSteps float64
	// Throughput holds the job's rate on each type of Problem.Types, in
	// steps per second with ScaleFactor GPUs; 0 where it cannot run.
	Throughput []float64
	// Deadline is the absolute time (seconds, same clock as Problem.Now) by
	// which the job should finish; 0 means none.
	Deadline float64
	// Arrival is the job's arrival time (FIFO order; ties by ID).
	Arrival float64
	// Entity names the job's owner for hierarchical policies.
	Entity string
}

func (j *Job) weight() float64 {
	if j.Weight == 0 {
		return 1
	}
	return j.Weight
}

// PairRates gives the rates of two jobs sharing GPUs of one type (space
// sharing). Implementations return (0, 0) for pairs that cannot share.
type PairRates interface {
	// Rates returns the steps per second of jobs a and b (indices into
	// Problem.Jobs) when they share GPUs of type k (an index into
	// Problem.Types).
	Rates(a, b, k int) (ta, tb float64)
}

// Problem is what an allocation policy decides over: jobs, their
// throughput on each GPU type, and the GPUs of each type.
type Problem struct {
	// Types are the GPU types, and Capacity the number of GPUs of each.
	Types    []topology.GPUType
	Capacity []int
	// Prices are the costs of one GPU of each type per hour (optional;
	// cost-aware policies default to Gavel's GCP prices, DefaultPrices).
	Prices []float64
	// Jobs are the jobs to allocate.
	Jobs []Job
	// Now is the current time in seconds (for deadlines).
	Now float64
	// Pairs gives co-located rates for space sharing (optional).
	Pairs PairRates
	// EntityWeights weights the entities of hierarchical policies.
	EntityWeights map[string]float64
}

// Errors of this package; test them with errors.Is.
var (
	// ErrInvalidProblem: a problem that cannot be allocated as given
	// (negative capacities, throughput rows of the wrong length, duplicate
	// IDs, NaN values, ...).
	ErrInvalidProblem = errors.New("allocation: invalid problem")
	// ErrNoSolution: the policy's program has no solution (for instance
	// SLOs that cannot all be met, when the policy does not fall back).
	ErrNoSolution = errors.New("allocation: no solution")
)

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalidProblem, fmt.Sprintf(format, args...))
}

// Validate checks the problem and returns an error wrapping
// ErrInvalidProblem that names the first problem found.
func (p *Problem) Validate() error {
	k := len(p.Types)
	if len(p.Capacity) != k {
		return invalid("%d GPU types but %d capacities", k, len(p.Capacity))
	}
	if p.Prices != nil && len(p.Prices) != k {
		return invalid("%d GPU types but %d prices", k, len(p.Prices))
	}
	seenType := map[topology.GPUType]bool{}
	for i, t := range p.Types {
		if seenType[t] {
			return invalid("GPU type %s appears twice", t)
		}
		seenType[t] = true
		if p.Capacity[i] < 0 {
			return invalid("capacity of %s is %d", t, p.Capacity[i])
		}
		if p.Prices != nil && !(p.Prices[i] > 0) || p.Prices != nil && math.IsInf(p.Prices[i], 0) {
			return invalid("price of %s is %v (want a finite number > 0)", t, p.Prices[i])
		}
	}
	if !finite(p.Now) {
		return invalid("now is %v", p.Now)
	}
	seen := map[int]bool{}
	for m := range p.Jobs {
		j := &p.Jobs[m]
		switch {
		case seen[j.ID]:
			return invalid("job ID %d appears twice", j.ID)
		case j.ScaleFactor < 1:
			return invalid("job %d: scale factor %d (want >= 1)", j.ID, j.ScaleFactor)
		case len(j.Throughput) != k:
			return invalid("job %d: %d throughputs for %d GPU types", j.ID, len(j.Throughput), k)
		case !finite(j.Weight) || j.Weight < 0:
			return invalid("job %d: weight %v", j.ID, j.Weight)
		case !finite(j.RemainingSteps) || j.RemainingSteps < 0:
			return invalid("job %d: remaining steps %v", j.ID, j.RemainingSteps)
		case !finite(j.Deadline) || !finite(j.Arrival):
			return invalid("job %d: deadline %v, arrival %v", j.ID, j.Deadline, j.Arrival)
		}
		seen[j.ID] = true
		for i, v := range j.Throughput {
			if !finite(v) || v < 0 {
				return invalid("job %d: throughput %v on %s", j.ID, v, p.Types[i])
			}
		}
	}
	for e, w := range p.EntityWeights {
		if !finite(w) || w <= 0 {
			return invalid("entity %q: weight %v", e, w)
		}
	}
	return nil
}

func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

// runnable reports whether job m can use type k: it has a rate there and
// the type has at least ScaleFactor GPUs.
func (p *Problem) runnable(m, k int, tput []float64) bool {
	return tput[k] > 0 && p.Capacity[k] >= p.Jobs[m].ScaleFactor
}

// DefaultPrices are Gavel's GCP on-demand prices per GPU-hour
// (scheduler/utils.py): v100 0.74, p100 0.43, k80 0.135 dollars.
var DefaultPrices = map[topology.GPUType]float64{topology.V100: 0.74, topology.P100: 0.43, topology.K80: 0.135}

// prices returns the problem's prices, or the defaults for its types.
func (p *Problem) prices() ([]float64, error) {
	if p.Prices != nil {
		return p.Prices, nil
	}
	out := make([]float64, len(p.Types))
	for k, t := range p.Types {
		v, ok := DefaultPrices[t]
		if !ok {
			return nil, invalid("no price for GPU type %s (set Problem.Prices)", t)
		}
		out[k] = v
	}
	return out, nil
}
