package allocation

import (
	"slices"

	"github.com/gpusched/gpusched/internal/pyrand"
	"github.com/gpusched/gpusched/topology"
)

// gavelFIFO is the state of fifo.py's FIFOPolicy: its allocation (kept
// across calls in base mode) in order of insertion, and its random.Random.
type gavelFIFO struct {
	alloc map[unit]topology.GPUType
	seq   []unit
	rng   *pyrand.Rand
}

func (g *gavelFIFO) set(u unit, t topology.GPUType) {
	if _, ok := g.alloc[u]; !ok {
		g.seq = append(g.seq, u)
	}
	g.alloc[u] = t
}

func (g *gavelFIFO) drop(u unit) {
	delete(g.alloc, u)
	g.seq = slices.DeleteFunc(g.seq, func(v unit) bool { return v == u })
}

// allocateGavel is Gavel's FIFOPolicy.get_allocation (policies/fifo.py at
// c4fa400), with its modes: base (neither Perf nor SpaceSharing), perf
// (Perf) and packing (SpaceSharing, which chooses types as perf does).
// The types are those with GPUs, in order of name (the order in which
// Gavel's simulator registers them). Each call:
//
//   - perf and packing start afresh; base keeps its allocation, and a job
//     that left hands its type to the head of the queue if it fits there;
//   - the queue holds the jobs without a type, in order of ID; the head is
//     taken off the queue, and if no type has room for it the loop stops
//     (the jobs behind wait, and the head is not offered to packing);
//   - perf takes the type with room where the job is fastest (the first in
//     order of name on ties). Base draws an index among the types with
//     room (random.Random(Seed).randrange) but assigns the last type of
//     the list of types with free GPUs, whether or not it has room (a
//     variable left over from a loop), and when that type fills it removes
//     the drawn index from the list, not the type: on 36 V100 + 36 P100 +
//     36 K80 most jobs go to V100, whose count can go below zero. A job
//     with no rate on the type it is given gets nothing this call;
//   - packing then pairs each job left in the queue, in order, with the
//     running job of equal scale factor that gives the largest normalised
//     co-located throughput above PackingThreshold, and stops at the first
//     job that finds none.
//
// The allocation can thus exceed capacity (base mode), as Gavel's does;
// the round mechanism runs what fits.
func (pol *FIFO) allocateGavel(p *Problem) *Allocation {
	g := pol.gavel
	if g == nil {
		g = &gavelFIFO{alloc: map[unit]topology.GPUType{}, rng: pyrand.New(pol.Seed)}
		pol.gavel = g
	}
	base, packing := !pol.Perf && !pol.SpaceSharing, pol.SpaceSharing
	if !base {
		g.alloc, g.seq = map[unit]topology.GPUType{}, nil
	}
	kOf := map[topology.GPUType]int{}
	var names []topology.GPUType
	avail := map[topology.GPUType]int{}
	for k, t := range p.Types {
		if p.Capacity[k] > 0 {
			kOf[t] = k
			names = append(names, t)
			avail[t] = p.Capacity[k]
		}
	}
	slices.Sort(names)
	index := make(map[int]int, len(p.Jobs))
	ids := make([]int, 0, len(p.Jobs))
	for m := range p.Jobs {
		index[p.Jobs[m].ID] = m
		ids = append(ids, p.Jobs[m].ID)
	}
	slices.Sort(ids)
	// A type that left the cluster frees its jobs.
	for _, u := range slices.Clone(g.seq) {
		if _, ok := kOf[g.alloc[u]]; !ok {
			g.drop(u)
		}
	}
	var queue []int
	for _, id := range ids {
		if _, ok := g.alloc[unit{id, -1}]; !ok {
			queue = append(queue, id)
		}
	}
	rate := func(id int, t topology.GPUType) float64 { return p.Jobs[index[id]].Throughput[kOf[t]] }
	sf := func(id int) int { return p.Jobs[index[id]].ScaleFactor }
	// Jobs that left hand their type to the head of the queue (base mode;
	// the others start empty).
	keys := slices.Clone(g.seq)
	slices.SortFunc(keys, func(a, b unit) int { ra, rb := gavelRank(a), gavelRank(b); return slices.Compare(ra[:], rb[:]) })
	for _, u := range keys {
		t := g.alloc[u]
		if _, present := index[u.a]; !present {
			if len(queue) > 0 {
				head := queue[0]
				if sf(head) <= avail[t] && rate(head, t) > 0 {
					queue = queue[1:]
					g.set(unit{head, -1}, t)
					avail[t] -= sf(head)
				}
			}
			g.drop(u)
			continue
		}
		avail[t] -= sf(u.a)
	}
	var open []topology.GPUType
	for _, t := range names {
		if avail[t] > 0 {
			open = append(open, t)
		}
	}
	for len(queue) > 0 && len(open) > 0 {
		head := queue[0]
		queue = queue[1:]
		var room []topology.GPUType
		var mapping []int
		for i, t := range open {
			if avail[t] >= sf(head) {
				room = append(room, t)
				mapping = append(mapping, i)
			}
		}
		if len(room) == 0 {
			break
		}
		t := open[len(open)-1] // the loop variable left over from the scan above
		var idx int
		if base {
			idx = g.rng.IntN(len(room))
		} else {
			best := -1.0
			for i, c := range room {
				if v := rate(head, c); v > best {
					best, t, idx = v, c, i
				}
			}
		}
		if rate(head, t) > 0 {
			g.set(unit{head, -1}, t)
			avail[t] -= sf(head)
			if avail[t] == 0 {
				open = slices.Delete(open, mapping[idx], mapping[idx]+1)
			}
		}
	}
	if packing && p.Pairs != nil {
		pol.packGavel(p, g, queue, index, kOf)
	}
	a := newAllocation(p)
	for _, u := range g.seq {
		k := kOf[g.alloc[u]]
		if u.b < 0 {
			a.X[index[u.a]][k] = 1
			continue
		}
		a.Pairs = append(a.Pairs, pairOn(p, index[u.a], index[u.b], k))
	}
	return a
}

// packGavel is FIFOPolicy._pack: the queue's jobs, in order, join the
// running single job of equal scale factor with the largest normalised
// co-located throughput above the threshold (the first found on ties, in
// order of insertion), until one finds none.
func (pol *FIFO) packGavel(p *Problem, g *gavelFIFO, queue []int, index map[int]int, kOf map[topology.GPUType]int) {
	threshold := pol.PackingThreshold
	if threshold == 0 {
		threshold = 1.5
	}
	for _, id := range queue {
		m := index[id]
		best, with := threshold, unit{-1, -1}
		for _, u := range g.seq {
			o := index[u.a]
			if u.b >= 0 || p.Jobs[o].ScaleFactor != p.Jobs[m].ScaleFactor {
				continue
			}
			k := kOf[g.alloc[u]]
			ta, tb := p.Pairs.Rates(m, o, k)
			norm := 0.0
			for _, c := range []struct {
				packed float64
				job    int
			}{{ta, m}, {tb, o}} {
				if iso := p.Jobs[c.job].Throughput[k]; c.packed > 0 && iso > 0 {
					norm += c.packed / iso
				}
			}
			if norm > best {
				best, with = norm, u
			}
		}
		if with.a < 0 {
			return
		}
		t := g.alloc[with]
		g.drop(with)
		g.set(unitOf([]int{with.a, id}), t)
	}
}
