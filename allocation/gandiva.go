package allocation

import (
	"cmp"
	"context"
	"math/rand/v2"
	"slices"
	"sync"
)

// Gandiva is the space-sharing baseline Gavel compares against
// (gandiva.py, after Xiao et al., "Gandiva: Introspective Cluster
// Scheduling for Deep Learning", OSDI 2018): heterogeneity-agnostic equal
// time shares, and, when the jobs ask for more GPUs than the cluster has,
// random pairs of jobs of equal scale factor that share GPUs. Pairs persist
// between calls (Gandiva's introspection) and are split when their
// normalised throughput, sum over the two jobs of co-located rate divided
// by isolated rate, is below 1. Every unit (job or pair) gets
// X_uk = n_k / max(N, sum_u sf_u) on each type, like Proportional over
// units. Pairs are drawn from Seed.
//
// It is safe for concurrent use: a mutex guards its state, though its
// answers then depend on the order of the calls. It must not be copied
// after first use.
type Gandiva struct {
	Seed uint64

	mu    sync.Mutex
	rng   *rand.Rand
	pairs map[[2]int]bool // job ID pairs, a < b
}

// Allocate implements Policy.
func (pol *Gandiva) Allocate(_ context.Context, p *Problem) (*Allocation, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	pol.mu.Lock()
	defer pol.mu.Unlock()
	if pol.rng == nil {
		pol.rng = rand.New(rand.NewPCG(pol.Seed, 0x3c6ef372fe94f82b))
	}
	index := map[int]int{}
	for m := range p.Jobs {
		index[p.Jobs[m].ID] = m
	}
	total := 0
	for _, n := range p.Capacity {
		total += n
	}
	share := proportionalShare(p)
	// Keep the pairs that still exist and still pay off.
	paired := map[int]bool{}
	kept := map[[2]int]bool{}
	keys := make([][2]int, 0, len(pol.pairs))
	for k := range pol.pairs {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(x, y [2]int) int { return cmp.Or(cmp.Compare(x[0], y[0]), cmp.Compare(x[1], y[1])) })
	for _, key := range keys {
		a, okA := index[key[0]]
		b, okB := index[key[1]]
		if !okA || !okB || p.Pairs == nil || pol.gain(p, a, b, share) < 1 {
			continue
		}
		kept[key] = true
		paired[a], paired[b] = true, true
	}
	demand := 0
	for m := range p.Jobs {
		if !paired[m] {
			demand += p.Jobs[m].ScaleFactor
		}
	}
	for key := range kept {
		demand += p.Jobs[index[key[0]]].ScaleFactor
	}
	// Oversubscribed: pair random jobs of equal scale factor.
	if p.Pairs != nil && demand > total {
		bySF := map[int][]int{}
		var sfs []int
		for m := range p.Jobs {
			if paired[m] {
				continue
			}
			sf := p.Jobs[m].ScaleFactor
			if _, ok := bySF[sf]; !ok {
				sfs = append(sfs, sf)
			}
			bySF[sf] = append(bySF[sf], m)
		}
		slices.Sort(sfs)
		for _, sf := range sfs {
			jobs := bySF[sf]
			pol.rng.Shuffle(len(jobs), func(i, j int) { jobs[i], jobs[j] = jobs[j], jobs[i] })
			for i := 0; i+1 < len(jobs) && demand > total; i += 2 {
				a, b := jobs[i], jobs[i+1]
				if pol.gain(p, a, b, share) < 1 {
					continue
				}
				key := [2]int{min(p.Jobs[a].ID, p.Jobs[b].ID), max(p.Jobs[a].ID, p.Jobs[b].ID)}
				kept[key] = true
				paired[a], paired[b] = true, true
				demand -= sf
			}
		}
	}
	pol.pairs = kept
	scale := 1.0
	if demand > total {
		scale = float64(total) / float64(demand)
	}
	a := newAllocation(p)
	for m := range p.Jobs {
		if paired[m] {
			continue
		}
		for k, x := range share {
			if p.runnable(m, k, p.Jobs[m].Throughput) {
				a.X[m][k] = x * scale
			}
		}
	}
	keys = keys[:0]
	for k := range kept {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(x, y [2]int) int { return cmp.Or(cmp.Compare(x[0], y[0]), cmp.Compare(x[1], y[1])) })
	for _, key := range keys {
		pa, pb := index[key[0]], index[key[1]]
		pr := Pair{A: pa, B: pb, X: make([]float64, len(p.Types))}
		for k, x := range share {
			if ta, tb := p.Pairs.Rates(pa, pb, k); ta+tb > 0 && p.Capacity[k] >= p.Jobs[pa].ScaleFactor {
				pr.X[k] = x * scale
			}
		}
		a.Pairs = append(a.Pairs, pr)
	}
	return a, nil
}

// gain is the pair's normalised throughput, averaged over the types by
// their share of the cluster: sum_k share_k (ta/T_a,k + tb/T_b,k).
func (pol *Gandiva) gain(p *Problem, a, b int, share []float64) float64 {
	if p.Jobs[a].ScaleFactor != p.Jobs[b].ScaleFactor {
		return 0
	}
	g, w := 0.0, 0.0
	for k, s := range share {
		ta, tb := p.Pairs.Rates(a, b, k)
		ia, ib := p.Jobs[a].Throughput[k], p.Jobs[b].Throughput[k]
		if ia <= 0 || ib <= 0 || s == 0 {
			continue
		}
		g += s * (ta/ia + tb/ib)
		w += s
	}
	if w == 0 {
		return 0
	}
	return g / w
}
