package allocation

import (
	"encoding/binary"
	"math"
)

// Water filling over groups of identical jobs. Jobs of one entity with the
// same scale factor, weight and rates are interchangeable in the programs
// of WaterFilling and QuotaFairness: every row treats them alike (their
// own rows the same, the capacity, entity and objective rows by their
// sum), so the programs are invariant under permuting them, and averaging
// an optimal solution over those permutations gives an optimal solution in
// which every job of a group gets the same allocation. A reduced problem
// keeps one job per group, standing for its members (Job.members): its
// variables are one member's time on each type, its sums over jobs count
// each member (newProgramOn's capacity rows, fit, the quota rows and
// objectives, the hierarchical shares).
//
// The bottlenecks of water filling survive the reduction: if a member can
// rise above a level in some optimal solution of the full program, the
// average over permutations of that solution is a symmetric optimal
// solution in which every member of its group is above it, so the group
// rises in some optimal solution of the reduced program, and so at the
// centre of its optimal face. Answers can differ from the full program's
// only where its optimal face holds several allocations (which one the
// centre picks); the levels are the same.

// reduction maps a problem onto its reduced problem.
type reduction struct {
	// p is the reduced problem; of[m] is the reduced job of the original
	// job m.
	p  *Problem
	of []int
}

// reduce merges the interchangeable jobs of p (same Entity, ScaleFactor,
// weight and Throughput, bit for bit); nil when fewer than a quarter of
// the jobs would go, where the smaller program does not pay for the
// change of answer within ties.
func reduce(p *Problem) *reduction {
	index := make(map[string]int, len(p.Jobs))
	r := &reduction{of: make([]int, len(p.Jobs))}
	var reps []Job
	var b []byte
	for m := range p.Jobs {
		j := &p.Jobs[m]
		b = binary.LittleEndian.AppendUint64(b[:0], uint64(j.ScaleFactor))
		b = binary.LittleEndian.AppendUint64(b, math.Float64bits(j.weight()))
		for _, v := range j.Throughput {
			b = binary.LittleEndian.AppendUint64(b, math.Float64bits(v))
		}
		b = append(b, j.Entity...)
		g, ok := index[string(b)]
		if !ok {
			g = len(reps)
			index[string(b)] = g
			rep := *j
			rep.members = 0
			reps = append(reps, rep)
		}
		reps[g].members = max(reps[g].members, 1) + btoi(ok)
		r.of[m] = g
	}
	if len(reps) > len(p.Jobs)*3/4 {
		return nil
	}
	q := *p
	q.Jobs = reps
	q.Pairs = nil
	r.p = &q
	return r
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// expand turns an allocation of the reduced problem into one of orig:
// every member gets its group's shares.
func (r *reduction) expand(orig *Problem, a *Allocation) *Allocation {
	out := newAllocation(orig)
	for m, g := range r.of {
		copy(out.X[m], a.X[g])
	}
	out.Objective, out.Note = a.Objective, a.Note
	return out
}

// count is how many jobs j stands for: 1, or its members in a reduced
// problem.
func (j *Job) count() float64 {
	if j.members > 1 {
		return float64(j.members)
	}
	return 1
}

// reduceFor is reduce unless some entity shares its weight first come,
// first served (EntityFIFO), which tells identical jobs apart by arrival.
func reduceFor(p *Problem, within map[string]Reweighting) *reduction {
	for _, rw := range within {
		if rw == EntityFIFO {
			return nil
		}
	}
	return reduce(p)
}
