package allocation

import "github.com/gpusched/gpusched/topology"

// Job is one job of a Problem.
// A Job is a plain value: safe for concurrent reads, not for writes while
// others read it.
type Job struct {
	// ID identifies the job; IDs are unique within a Problem and 0 or
	// more (the round mechanisms mark a unit of one job, not a pair, with
	// a negative second ID).
	ID int
	// Weight is the job's priority weight (Gavel's w_m); 0 means 1, else
	// in [MinWeight, MaxWeight].
	Weight float64
	// ScaleFactor is the number of GPUs the job uses at once, in
	// [1, MaxCapacity].
	ScaleFactor int
	// RemainingSteps is the work left, in steps, at most MaxSteps (> 0
	// for policies that use it: makespan, finish-time fairness, SLOs).
	RemainingSteps float64
	// Throughput holds the job's rate on each type of Problem.Types, in
	// steps per second with ScaleFactor GPUs, in [MinRate, MaxRate]; 0
	// where it cannot run.
	Throughput []float64
	// Deadline is the absolute time (seconds, same clock as Problem.Now) by
	// which the job should finish; 0 means none.
	Deadline float64
	// Arrival is the job's arrival time (FIFO order; ties by ID).
	Arrival float64
	// Entity names the job's owner for hierarchical policies.
	Entity string

	// members is how many identical jobs this one stands for in a
	// reduced problem (reduce); 0 or 1 outside one.
	members int
}

func (j *Job) weight() float64 {
	if j.Weight == 0 {
		return 1
	}
	return j.Weight
}

// PairRates gives the rates of two jobs sharing GPUs of one type (space
// sharing). Implementations return (0, 0) for pairs that cannot share, and
// mirror: Rates(b, a, k) is (tb, ta) when Rates(a, b, k) is (ta, tb)
// (Problem.Validate checks it; policies ask for a pair in either order).
// Implementations must allow concurrent calls when one Problem is given
// to several policies at once (TablePairs does).
type PairRates interface {
	// Rates returns the steps per second of jobs a and b (indices into
	// Problem.Jobs) when they share GPUs of type k (an index into
	// Problem.Types).
	Rates(a, b, k int) (ta, tb float64)
}

// Problem is what an allocation policy decides over: jobs, their
// throughput on each GPU type, and the GPUs of each type.
//
// A Problem is a plain value: safe for concurrent reads (policies only
// read it, so several may share one if Pairs allows concurrent calls),
// not for writes while others read it.
type Problem struct {
	// Types are the GPU types, and Capacity the number of GPUs of each
	// (at most MaxCapacity).
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
	// EntityQuotas gives entities (Job.Entity) guaranteed shares and
	// limits per GPU type or in normalised throughput (see Quota), at most
	// MaxEntityQuotas; QuotaFairness enforces them, other policies ignore
	// them.
	EntityQuotas map[string]Quota
}

// Validate checks the problem and returns an error wrapping
// ErrInvalidProblem that names the first problem found: lengths that
// disagree, duplicate types or job IDs, negative job IDs, NaN or infinite
// values, and values outside the ranges of this package (MinRate to
// MaxRate, MaxSteps, MaxCapacity, MinWeight to MaxWeight, MinPrice to
// MaxPrice, MaxTime), quotas out of range or with guarantees above their
// limits (Quota), or space-sharing classes or co-located rates out
// of range. Co-located rates must be 0 or in [MinRate, MaxRate] and mirror
// each other: a CheckedPairRates checked its rates when it was built and
// is not looked up again; another ClassPairRates is checked over the
// classes of the problem's jobs; any other PairRates on every pair of jobs,
// asked both ways, at most MaxPairRates pairs (beyond that, use a
// CheckedPairRates).
func (p *Problem) Validate() error {
	k := len(p.Types)
	if len(p.Capacity) != k {
		return invalid("%d GPU types but %d capacities", k, len(p.Capacity))
	}
	if p.Prices != nil && len(p.Prices) != k {
		return invalid("%d GPU types but %d prices", k, len(p.Prices))
	}
	seenType := make(map[topology.GPUType]bool, k)
	for i, t := range p.Types {
		if seenType[t] {
			return invalid("GPU type %s appears twice", t)
		}
		seenType[t] = true
		if c := p.Capacity[i]; c < 0 || c > MaxCapacity {
			return invalid("capacity of %s is %d, outside [0, %d]", t, c, MaxCapacity)
		}
		if p.Prices != nil && !inRange(p.Prices[i], MinPrice, MaxPrice) {
			return invalid("price of %s is %v, outside [%g, %g] per GPU-hour", t, p.Prices[i], MinPrice, MaxPrice)
		}
	}
	if !inRange(p.Now, -MaxTime, MaxTime) {
		return invalid("now is %v, outside [%g, %g] s", p.Now, -MaxTime, MaxTime)
	}
	// IDs in increasing order (as the scheduler builds its problems) are
	// distinct: no set is needed to find a repeated one.
	var seen map[int]bool
	for m := 1; m < len(p.Jobs); m++ {
		if p.Jobs[m].ID <= p.Jobs[m-1].ID {
			seen = make(map[int]bool, len(p.Jobs))
			break
		}
	}
	for m := range p.Jobs {
		if err := p.validateJob(m, seen); err != nil {
			return err
		}
	}
	for e, w := range p.EntityWeights {
		if !inRange(w, MinWeight, MaxWeight) {
			return invalid("entity %q: weight %v, outside [%g, %g]", e, w, MinWeight, MaxWeight)
		}
	}
	if err := p.validateQuotas(); err != nil {
		return err
	}
	return p.validatePairs()
}

// validatePairs checks the co-located rates the policies may read: every
// rate 0 or in [MinRate, MaxRate]. A CheckedPairRates (TablePairs, the
// scheduler's class table) checked its rates when it was built and is not
// looked up again; another ClassPairRates is checked over the classes of
// the problem's jobs, any other PairRates over every pair of jobs (each
// asked both ways, to check that it mirrors), at most MaxPairRates pairs
// (beyond that, use a CheckedPairRates).
func (p *Problem) validatePairs() error {
	if p.Pairs == nil {
		return nil
	}
	types := len(p.Types)
	cp, isClass := p.Pairs.(ClassPairRates)
	if !isClass {
		n := len(p.Jobs)
		if types > 0 && n > 1 && int64(n)*int64(n-1)/2 > int64(MaxPairRates/types) {
			return invalid("space sharing: %d jobs on %d GPU types are more than %d co-located rates to check; use a CheckedPairRates such as TablePairs", n, types, MaxPairRates)
		}
		for a := range p.Jobs {
			for b := a + 1; b < n; b++ {
				for k := range types {
					ta, tb := p.Pairs.Rates(a, b, k)
					if badPairRate(ta) || badPairRate(tb) {
						return invalid("space sharing: jobs %d and %d on %s: co-located rates %v and %v, outside [%g, %g] steps/s (0 means they cannot share)",
							p.Jobs[a].ID, p.Jobs[b].ID, p.Types[k], ta, tb, MinRate, MaxRate)
					}
					if rb, ra := p.Pairs.Rates(b, a, k); ra != ta || rb != tb {
						return invalid("space sharing: jobs %d and %d on %s: co-located rates (%v, %v) asked one way but (%v, %v) the other",
							p.Jobs[a].ID, p.Jobs[b].ID, p.Types[k], ta, tb, ra, rb)
					}
				}
			}
		}
		return nil
	}
	n := cp.Classes()
	if n < 0 {
		return invalid("space sharing: %d job classes", n)
	}
	for m := range p.Jobs {
		if c := cp.Class(m); c < 0 || c >= n {
			return invalid("space sharing: job %d is in class %d of %d", p.Jobs[m].ID, c, n)
		}
	}
	if checked, ok := p.Pairs.(CheckedPairRates); ok && checked.RatesChecked() {
		return nil
	}
	var used []int
	seen := make(map[int]bool)
	for m := range p.Jobs {
		if c := cp.Class(m); !seen[c] {
			seen[c] = true
			used = append(used, c)
		}
	}
	if u := len(used); types > 0 && int64(u)*int64(u) > int64(MaxPairRates/types) {
		return invalid("space sharing: %d job classes on %d GPU types are more than %d co-located rates to check; use a CheckedPairRates such as TablePairs", u, types, MaxPairRates)
	}
	for _, ca := range used {
		for _, cb := range used {
			for k := range types {
				ta, tb := cp.ClassRates(ca, cb, k)
				if badPairRate(ta) || badPairRate(tb) {
					return invalid("space sharing: job classes %d and %d on %s: co-located rates %v and %v, outside [%g, %g] steps/s (0 means they cannot share)",
						ca, cb, p.Types[k], ta, tb, MinRate, MaxRate)
				}
				if rb, ra := cp.ClassRates(cb, ca, k); ra != ta || rb != tb {
					return invalid("space sharing: job classes %d and %d on %s: co-located rates (%v, %v) asked one way but (%v, %v) the other",
						ca, cb, p.Types[k], ta, tb, ra, rb)
				}
			}
		}
	}
	return nil
}

// ValidRate tells whether v is a rate this package accepts, for a job on a
// type or a job sharing GPUs: 0 (it cannot run there) or in [MinRate,
// MaxRate] steps per second. NaN is not.
func ValidRate(v float64) bool { return v == 0 || inRange(v, MinRate, MaxRate) }

// badPairRate tells whether v is neither 0 nor a rate in [MinRate, MaxRate].
func badPairRate(v float64) bool { return !ValidRate(v) }

// validateJob checks job m and records its ID in seen.
func (p *Problem) validateJob(m int, seen map[int]bool) error {
	j := &p.Jobs[m]
	switch {
	case j.ID < 0:
		return invalid("job ID %d is negative (IDs are 0 or more)", j.ID)
	case seen[j.ID]:
		return invalid("job ID %d appears twice", j.ID)
	case j.ScaleFactor < 1 || j.ScaleFactor > MaxCapacity:
		return invalid("job %d: scale factor %d, outside [1, %d]", j.ID, j.ScaleFactor, MaxCapacity)
	case len(j.Throughput) != len(p.Types):
		return invalid("job %d: %d throughputs for %d GPU types", j.ID, len(j.Throughput), len(p.Types))
	case j.Weight != 0 && !inRange(j.Weight, MinWeight, MaxWeight):
		return invalid("job %d: weight %v, outside [%g, %g] (0 means 1)", j.ID, j.Weight, MinWeight, MaxWeight)
	case !inRange(j.RemainingSteps, 0, MaxSteps):
		return invalid("job %d: remaining steps %v, outside [0, %g]", j.ID, j.RemainingSteps, MaxSteps)
	case !inRange(j.Arrival, -MaxTime, MaxTime):
		return invalid("job %d: arrival %v, outside [%g, %g] s", j.ID, j.Arrival, -MaxTime, MaxTime)
	case !inRange(j.Deadline, -MaxTime, MaxTime):
		return invalid("job %d: deadline %v, outside [%g, %g] s", j.ID, j.Deadline, -MaxTime, MaxTime)
	}
	if seen != nil {
		seen[j.ID] = true
	}
	for i, v := range j.Throughput {
		if !ValidRate(v) {
			return invalid("job %d: throughput %v on %s, outside [%g, %g] steps/s (0 means it cannot run there)", j.ID, v, p.Types[i], MinRate, MaxRate)
		}
	}
	return nil
}

// inRange reports whether lo <= v <= hi (false for NaN).
func inRange(v, lo, hi float64) bool { return v >= lo && v <= hi }

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
