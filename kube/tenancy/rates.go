package tenancy

import (
	"math"
	"strconv"

	"github.com/gpusched/gpusched/topology"
)

// Ratio returns the largest ratio allowed between a job's rates on two
// types (MaxRatio, or DefaultMaxRatio).
func (r RateRules) Ratio() float64 {
	if r.MaxRatio >= 1 {
		return r.MaxRatio
	}
	return DefaultMaxRatio
}

// Ref returns the rate of every job on its fastest type (Reference, or 1).
func (r RateRules) Ref() float64 {
	if r.Reference > 0 {
		return r.Reference
	}
	return 1
}

// Trusted turns a job's claimed rates (steps per second per type, from a
// throughput annotation or from the performance model's entry for the job
// kind the tenant names) into the rates the policies see, on the cluster's
// types: each claimed rate relative to the claim's largest on those types,
// at least 1/Ratio of it, times Ref, rounded to four significant digits.
// So a claim says only how much faster the job runs on one type than on
// another, within the admin's ratio: a claim of 1e9 steps/s weighs what a
// claim of 1 does. A type the claim omits or rates 0 (or not a finite
// positive number) stays off the map: the job does not run there. A nil
// claim gives Ref on every type (the job is heterogeneity-agnostic).
// clamped reports a rate raised to the ratio's floor.
//
// Trusted is what every policy's rates come from: max-min fairness and
// finish-time fairness are invariant to the scale of a job's rates, so
// they lose nothing; max-throughput, makespan and cost policies compare
// jobs in normalized throughput instead of claimed steps.
func (r RateRules) Trusted(claimed map[topology.GPUType]float64, types []topology.GPUType) (rates map[topology.GPUType]float64, clamped bool) {
	ref := r.Ref()
	rates = make(map[topology.GPUType]float64, len(types))
	if claimed == nil {
		for _, t := range types {
			rates[t] = ref
		}
		return rates, false
	}
	best := 0.0
	for _, t := range types {
		if v := claimed[t]; v > 0 && finite(v) {
			best = max(best, v)
		}
	}
	if best == 0 {
		return rates, false
	}
	floor := 1 / r.Ratio()
	for _, t := range types {
		v := claimed[t]
		if !(v > 0 && finite(v)) {
			continue
		}
		n := v / best
		if n < floor {
			n, clamped = floor, true
		}
		rates[t] = sig4(n * ref)
	}
	return rates, clamped
}

// sig4 rounds v to four significant digits, so that the saved state holds
// short numbers whatever a tenant claims.
func sig4(v float64) float64 {
	f, err := strconv.ParseFloat(strconv.FormatFloat(v, 'g', 4, 64), 64)
	if err != nil || math.IsInf(f, 0) {
		return v
	}
	return f
}
