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
// With Perf the job takes the fastest type with room (fifo_perf);
// otherwise a random type with room, drawn from Seed (Gavel's base fifo,
// which means to pick a random type: its code always picks the last of the
// sorted available types, a quirk not reproduced here). A job that fits
// nowhere waits without blocking the jobs behind it.
//
// With SpaceSharing (Gavel's fifo_packed), a job that finds no free GPUs
// joins a running job of equal scale factor on its type when their
// normalised co-located throughput, ta/T_a + tb/T_b, exceeds
// PackingThreshold (1.5 by default, as in Gavel); the best such partner is
// chosen, and the pair keeps running together while both jobs remain.
//
// With Compat set to CompatGavel it is fifo.py exactly (see allocateGavel):
// jobs in order of ID, the queue stopping at the first job that fits
// nowhere, and in base mode the type-assignment quirk.
//
// It is safe for concurrent use: a mutex guards its state, though its
// answers then depend on the order of the calls. It must not be copied
// after first use.
type FIFO struct {
	Perf             bool
	Seed             uint64
	Sticky           bool
	SpaceSharing     bool
	PackingThreshold float64
	Compat           Compat

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
	order := make([]int, len(p.Jobs))
	for m := range order {
		order[m] = m
	}
	slices.SortFunc(order, func(x, y int) int {
		return cmp.Or(cmp.Compare(p.Jobs[x].Arrival, p.Jobs[y].Arrival), cmp.Compare(p.Jobs[x].ID, p.Jobs[y].ID))
	})
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
		if pol.Perf {
			for _, c := range room {
				if j.Throughput[c] > j.Throughput[k] {
					k = c
				}
			}
		} else {
			k = room[pol.rng.IntN(len(room))]
		}
		free[k] -= j.ScaleFactor
		keep[j.ID] = k
		a.X[m][k] = 1
	}
	pol.assigned, pol.partner = keep, partner
	return a, nil
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
