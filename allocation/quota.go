package allocation

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/gpusched/gpusched/topology"
)

// Quota is an entity's (a tenant's: Job.Entity) guaranteed share of the
// cluster and its limits, heterogeneity-aware: stated per GPU type, in
// GPUs, or as a fraction of every type, and measured in normalised
// throughput. [QuotaFairness] enforces it; the other policies ignore it
// (Problem.Validate checks it for all).
//
// The guarantee is a slice of the cluster, in GPUs of each type k:
//
//	slice_k = max(GuaranteedGPUs[k], GuaranteedShare x Capacity[k]),
//
// at most MaxGPUs[k] where set. An entity with jobs is guaranteed what
// its jobs would get with that slice to themselves (DRF's "sharing
// incentive", Ghodsi et al., NSDI 2011, section 3): each of its jobs at
// least the max-min level of the entity's jobs on the slice alone, and the
// entity in total at least the largest normalised throughput they reach on
// the slice while keeping that level. An entity with no jobs holds nothing:
// its slice is lent to the others, and given back at the next solve in
// which its jobs are present. Guarantees that over-commit a type (the
// slices of the entities with jobs sum to more than its capacity) are
// scaled down in proportion on that type, and the Allocation's Note says
// so; a round never fails for it.
//
// Normalised throughput is Gavel's (Narayanan et al., OSDI 2020, section
// 4.1; max_min_fairness.py): job m's is sf_m x rate_m / T^prop_m, where
// rate_m = sum_k T_mk X_mk and T^prop_m = sum_k T_mk n_k / N is its rate
// with an equal share of every type (the proportional allocation
// X_mk = n_k / N, N = sum_k n_k). Its unit is GPUs of the cluster's
// mix: a job on g GPUs that spends its time across the types in
// proportion to their counts scores g, whatever its rates, so the
// cluster's total under any type-neutral allocation is N, and
// GuaranteedShare 0.25 ("a quarter of the cluster's throughput") is
// worth N/4 to an entity whose jobs fill the slice with the cluster's
// mix (more when its jobs gain from some types, as Gavel's policies make
// them).
//
// A Quota is a plain value: safe for concurrent reads, not for writes
// while others read it.
type Quota struct {
	// GuaranteedGPUs is the entity's reserved GPUs of each type: GPUs,
	// averaged over a round (2.5 is two GPUs and half of a third's
	// time), each in [0, MaxCapacity]. Types not in the problem are
	// ignored (none are there to reserve).
	GuaranteedGPUs map[topology.GPUType]float64
	// GuaranteedShare is the entity's reserved fraction of every type, in
	// [0, 1]: a slice of GuaranteedShare x Capacity[k] GPUs of each type
	// k. With GuaranteedGPUs too, the larger of the two counts per type.
	GuaranteedShare float64
	// MaxGPUs caps the entity's GPUs of each type it names: the GPU-time
	// of its jobs on type k, sum over them of sf_m X_mk (pairs counted
	// once, at their scale factor), at most MaxGPUs[k] GPUs, in [0,
	// MaxCapacity]; at least GuaranteedGPUs[k]. A type it does not name
	// is not capped; 0 keeps the entity off that type.
	MaxGPUs map[topology.GPUType]float64
	// MaxShare caps the entity's normalised throughput at MaxShare x N
	// (N the cluster's GPUs), in [0, 1] and at least GuaranteedShare;
	// 0 means no cap.
	MaxShare float64
}

// Bounds on quotas.
const (
	// MaxEntityQuotas bounds the entities of Problem.EntityQuotas.
	MaxEntityQuotas = 1 << 16
	// MaxQuotaTypes bounds the GPU types a Quota's maps name.
	MaxQuotaTypes = 1 << 10
)

// validateQuotas checks Problem.EntityQuotas: at most MaxEntityQuotas
// entities, and each Quota in range (see Quota), its guarantees within its
// limits. The entities are checked in name order, so that the error names
// the same one every time.
func (p *Problem) validateQuotas() error {
	if len(p.EntityQuotas) == 0 {
		return nil
	}
	if n := len(p.EntityQuotas); n > MaxEntityQuotas {
		return invalid("%d entity quotas, more than %d", n, MaxEntityQuotas)
	}
	names := make([]string, 0, len(p.EntityQuotas))
	for e := range p.EntityQuotas {
		names = append(names, e)
	}
	slices.Sort(names)
	for _, e := range names {
		q := p.EntityQuotas[e]
		if err := q.validate(); err != nil {
			return invalid("entity %q: quota: %s", e, err)
		}
	}
	return nil
}

// validate checks q's ranges and that its guarantees lie within its
// limits.
func (q *Quota) validate() error {
	if !inRange(q.GuaranteedShare, 0, 1) {
		return fmt.Errorf("guaranteed share %v, outside [0, 1]", q.GuaranteedShare)
	}
	if !inRange(q.MaxShare, 0, 1) {
		return fmt.Errorf("maximum share %v, outside [0, 1] (0 means no cap)", q.MaxShare)
	}
	if q.MaxShare > 0 && q.GuaranteedShare > q.MaxShare {
		return fmt.Errorf("guaranteed share %v above its maximum share %v", q.GuaranteedShare, q.MaxShare)
	}
	for _, m := range []struct {
		name string
		gpus map[topology.GPUType]float64
	}{{"guaranteed", q.GuaranteedGPUs}, {"maximum", q.MaxGPUs}} {
		if len(m.gpus) > MaxQuotaTypes {
			return fmt.Errorf("%s GPUs name %d types, more than %d", m.name, len(m.gpus), MaxQuotaTypes)
		}
		for _, t := range sortedTypes(m.gpus) {
			if v := m.gpus[t]; !inRange(v, 0, MaxCapacity) {
				return fmt.Errorf("%s GPUs of %s: %v, outside [0, %d]", m.name, t, v, MaxCapacity)
			}
		}
	}
	for _, t := range sortedTypes(q.GuaranteedGPUs) {
		if hi, ok := q.MaxGPUs[t]; ok && q.GuaranteedGPUs[t] > hi {
			return fmt.Errorf("guaranteed GPUs of %s: %v, above its maximum %v", t, q.GuaranteedGPUs[t], hi)
		}
	}
	return nil
}

// sortedTypes returns the keys of m in order.
func sortedTypes(m map[topology.GPUType]float64) []topology.GPUType {
	out := make([]topology.GPUType, 0, len(m))
	for t := range m {
		out = append(out, t)
	}
	slices.SortFunc(out, func(a, b topology.GPUType) int { return cmp.Compare(a, b) })
	return out
}
