package allocation

import (
	"cmp"
	"context"
	"math/rand/v2"
	"slices"
	"sync"
)

// FIFO is Gavel's first-in-first-out baseline (fifo.py): jobs are taken in
// order of arrival (then ID) and each gets a whole type, X = 1, while
// enough GPUs of a type are free. Each call starts afresh, so an older job
// moves to a faster type when one frees up (the round mechanism keeps its
// GPUs when the type does not change); with Sticky a job keeps its type for
// as long as it is in the problem.
//
// Which type with room a job gets: with Perf the one where the job is
// fastest (fifo_perf); by default the first in the cluster's order of
// speed, the same for every job (types by the sum over the problem's jobs
// of each job's rate there over its best rate, the order in which the
// round mechanism visits them), as an operator who fills the newest GPUs
// first would, and as Gavel's base fifo.py does in effect (its code
// assigns the last of its sorted list of types with free GPUs, v100 on
// Gavel's clusters, while the list has any); with Random a random type
// with room, drawn from Seed, which is what fifo.py means to do. A job
// that fits nowhere waits without blocking the jobs behind it.
//
// The default changed in #29: it was Random, which at low load puts a
// third of Gavel's jobs on K80s and made every comparison with this
// baseline look better than against Gavel's own FIFO (on Gavel's
// generated 300 jobs at 3 jobs/h, makespan 314 h against Gavel's 231 h;
// now 231 h).
//
// With SpaceSharing (Gavel's fifo_packed), a job that finds no free GPUs
// joins a running job of equal scale factor on its type when their
// normalised co-located throughput, ta/T_a + tb/T_b, exceeds
// PackingThreshold (1.5 by default, as in Gavel); the best such partner is
// chosen, and the pair keeps running together while both jobs remain.
//
// With Compat set to CompatGavel it is Gavel's FIFOPolicy.get_allocation
// exactly (policies/fifo.py at c4fa400): jobs in order of ID, the queue
// stopping at the first job that fits nowhere, and in base mode the
// type-assignment quirk (a job gets the last of the sorted types with free
// GPUs, v100 on Gavel's clusters, so V100s fill first).
//
// It is safe for concurrent use: a mutex guards its state, though its
// answers then depend on the order of the calls. It must not be copied
// after first use.
type FIFO struct {
	Perf             bool
	Random           bool
	Seed             uint64
	Sticky           bool
	SpaceSharing     bool
	PackingThreshold float64
	Compat           Compat
	// Key, if set, takes the jobs in increasing Key(p, m) (then arrival,
	// then ID) instead of arrival: a queue order on the round engine,
	// preemptive as FIFO is (compare.QueueOrder adapts a gang.Order). It
	// must be safe for concurrent use; not with Compat.
	Key func(p *Problem, m int) float64

	mu       sync.Mutex
	assigned map[int]int // job ID -> type index
	partner  map[int]int // job ID -> the job it shares with
	rng      *rand.Rand
	gavel    *gavelFIFO
}

// Allocate implements Policy.
func (pol *FIFO) Allocate(_ context.Context, p *Problem) (*Allocation, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	pol.mu.Lock()
	defer pol.mu.Unlock()
	if pol.Compat == CompatGavel {
		return pol.allocateGavel(p), nil
	}
	if pol.rng == nil {
		pol.rng = rand.New(rand.NewPCG(pol.Seed, 0x6a09e667f3bcc909))
	}
	free := slices.Clone(p.Capacity)
	keep := map[int]int{}
	partner := map[int]int{}
	a := newAllocation(p)
	index := map[int]int{}
	for m := range p.Jobs {
		index[p.Jobs[m].ID] = m
	}
	order := pol.order(p)
	real := p.matrix()
	// With Sticky, jobs keep their types, and pairs their partners.
	for _, m := range order {
		if !pol.Sticky {
			break
		}
		j := &p.Jobs[m]
		if _, done := keep[j.ID]; done {
			continue
		}
		k, ok := pol.assigned[j.ID]
		if !ok || k >= len(p.Types) || !p.runnable(m, k, real[m]) {
			continue
		}
		if other, ok := pol.partner[j.ID]; ok {
			if o, present := index[other]; present {
				if free[k] >= j.ScaleFactor {
					free[k] -= j.ScaleFactor
					keep[j.ID], keep[other] = k, k
					partner[j.ID], partner[other] = other, j.ID
					a.Pairs = append(a.Pairs, pairOn(p, m, o, k))
				}
				continue
			}
		}
		if free[k] >= j.ScaleFactor {
			free[k] -= j.ScaleFactor
			keep[j.ID] = k
			a.X[m][k] = 1
		}
	}
	speed := typeSpeed(p)
	var room []int
	for _, m := range order {
		j := &p.Jobs[m]
		if _, ok := keep[j.ID]; ok {
			continue
		}
		room = room[:0]
		for k := range p.Types {
			if free[k] >= j.ScaleFactor && p.runnable(m, k, real[m]) {
				room = append(room, k)
			}
		}
		if len(room) == 0 {
			if pol.SpaceSharing && p.Pairs != nil {
				pol.join(p, a, m, index, keep, partner)
			}
			continue
		}
		k := room[0]
		switch {
		case pol.Perf:
			for _, c := range room {
				if j.Throughput[c] > j.Throughput[k] {
					k = c
				}
			}
		case pol.Random:
			k = room[pol.rng.IntN(len(room))]
		default:
			for _, c := range room {
				if speed[c] > speed[k] {
					k = c
				}
			}
		}
		free[k] -= j.ScaleFactor
		keep[j.ID] = k
		a.X[m][k] = 1
	}
	pol.assigned, pol.partner = keep, partner
	return a, nil
}

// order returns the jobs (indices into p.Jobs) in the order FIFO takes
// them: by Key when set, then arrival, then ID.
func (pol *FIFO) order(p *Problem) []int {
	order := make([]int, len(p.Jobs))
	for m := range order {
		order[m] = m
	}
	var keys []float64
	if pol.Key != nil {
		keys = make([]float64, len(p.Jobs))
		for m := range keys {
			keys[m] = pol.Key(p, m)
		}
	}
	slices.SortFunc(order, func(x, y int) int {
		byKey := 0
		if keys != nil {
			byKey = cmp.Compare(keys[x], keys[y])
		}
		return cmp.Or(byKey, cmp.Compare(p.Jobs[x].Arrival, p.Jobs[y].Arrival), cmp.Compare(p.Jobs[x].ID, p.Jobs[y].ID))
	})
	return order
}

// typeSpeed ranks the types as the round mechanism does: the sum over the
// jobs of each job's rate on a type over its best rate (ties keep the
// problem's order).
func typeSpeed(p *Problem) []float64 {
	speed := make([]float64, len(p.Types))
	for m := range p.Jobs {
		best := slices.Max(append([]float64{0}, p.Jobs[m].Throughput...))
		if best <= 0 {
			continue
		}
		for k, v := range p.Jobs[m].Throughput {
			speed[k] += v / best
		}
	}
	return speed
}

// join pairs job m with the running single job it gains most with, if the
// gain passes the threshold.
func (pol *FIFO) join(p *Problem, a *Allocation, m int, index map[int]int, keep map[int]int, partner map[int]int) {
	threshold := pol.PackingThreshold
	if threshold == 0 {
		threshold = 1.5
	}
	best, bestGain := -1, threshold
	for id, k := range keep {
		o := index[id]
		if _, shared := partner[id]; shared || p.Jobs[o].ScaleFactor != p.Jobs[m].ScaleFactor || p.Jobs[m].Throughput[k] <= 0 {
			continue
		}
		ta, tb := p.Pairs.Rates(m, o, k)
		g := ta/p.Jobs[m].Throughput[k] + tb/p.Jobs[o].Throughput[k]
		if g > bestGain || (g == bestGain && best >= 0 && p.Jobs[o].ID < p.Jobs[best].ID) {
			best, bestGain = o, g
		}
	}
	if best < 0 {
		return
	}
	k := keep[p.Jobs[best].ID]
	a.X[best][k] = 0
	keep[p.Jobs[m].ID] = k
	partner[p.Jobs[m].ID], partner[p.Jobs[best].ID] = p.Jobs[best].ID, p.Jobs[m].ID
	a.Pairs = append(a.Pairs, pairOn(p, m, best, k))
}

// pairOn is a pair of jobs m and o sharing type k all the time.
func pairOn(p *Problem, m, o, k int) Pair {
	pr := Pair{A: min(m, o), B: max(m, o), X: make([]float64, len(p.Types))}
	pr.X[k] = 1
	return pr
}
