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
// enough GPUs of a type are free; a job keeps its type for as long as it is
// in the problem, as in Gavel, which keeps the allocation between calls.
// With Perf the job takes the fastest type with room (fifo_perf);
// otherwise a random type with room, drawn from Seed (Gavel's base fifo,
// which means to pick a random type: its code always picks the last of the
// sorted available types, a quirk not reproduced here). A job that fits
// nowhere waits without blocking the jobs behind it.
//
// A FIFO must not be copied after first use.
type FIFO struct {
	Perf bool
	Seed uint64

	mu       sync.Mutex
	assigned map[int]int // job ID -> type index
	rng      *rand.Rand
}

// Allocate implements Policy.
func (pol *FIFO) Allocate(_ context.Context, p *Problem) (*Allocation, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	pol.mu.Lock()
	defer pol.mu.Unlock()
	if pol.rng == nil {
		pol.rng = rand.New(rand.NewPCG(pol.Seed, 0x6a09e667f3bcc909))
	}
	free := slices.Clone(p.Capacity)
	keep := map[int]int{}
	a := newAllocation(p)
	order := make([]int, len(p.Jobs))
	for m := range order {
		order[m] = m
	}
	slices.SortFunc(order, func(x, y int) int {
		return cmp.Or(cmp.Compare(p.Jobs[x].Arrival, p.Jobs[y].Arrival), cmp.Compare(p.Jobs[x].ID, p.Jobs[y].ID))
	})
	real := p.matrix()
	// Jobs keep their types.
	for _, m := range order {
		j := &p.Jobs[m]
		if k, ok := pol.assigned[j.ID]; ok && k < len(p.Types) && free[k] >= j.ScaleFactor && p.runnable(m, k, real[m]) {
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
	pol.assigned = keep
	return a, nil
}
