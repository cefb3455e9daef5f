package placement

import (
	"cmp"
	"context"
	"slices"

	"github.com/gpusched/gpusched/topology"
)

func (in *migInput) instance(p *topology.MIGProduct, s migSlot) topology.MIGInstance {
	return topology.MIGInstance{Profile: p.Profiles[s.pi].Name, Start: s.start}
}

// hGPU is a GPU's state during the heuristic.
type hGPU struct {
	slots   []MIGSlot
	pis     []int // profile index of each slot
	used    uint32
	count   []int
	busy    bool
	changed bool
	taken   bool
}

func (h *hGPU) inUse() bool { return h.busy || h.taken }

// hChoice is a candidate placement of one instance: a new one, or the
// idle instance slot (reuse >= 0).
type hChoice struct {
	g, pi, start, reuse int
	evict               bool
	key                 [6]int
}

// heuristic is first-fit decreasing with reuse and eviction (see
// MIGPlanner), run over three orders of the demands; the cheapest plan
// wins.
func (in *migInput) heuristic(ctx context.Context) (*MIGPlan, error) {
	var best *MIGPlan
	for _, order := range in.orders() {
		plan, err := in.greedy(ctx, order)
		if err != nil {
			return nil, err
		}
		if best == nil || plan.Cost.Less(best.Cost) {
			best = plan
		}
	}
	return best, nil
}

func (in *migInput) greedy(ctx context.Context, order []int) (*MIGPlan, error) {
	st := make([]hGPU, len(in.gpus))
	for g := range in.gpus {
		p := in.gpus[g].Product
		h := &st[g]
		h.count = make([]int, len(p.Profiles))
		for _, s := range in.current[g] {
			h.add(p, s.pi, MIGSlot{MIGInstance: in.instance(p, s), Busy: s.busy, Demand: -1})
			h.busy = h.busy || s.busy
		}
	}
	for _, d := range order {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		for range in.demands[d].Count {
			if !in.place(st, d) {
				break // nothing fits this demand any more
			}
		}
	}
	plan := &MIGPlan{Layouts: make([][]MIGSlot, len(in.gpus))}
	for g := range st {
		plan.Layouts[g] = st[g].slots
	}
	return in.finish(plan)
}

func (h *hGPU) add(p *topology.MIGProduct, pi int, s MIGSlot) {
	h.slots = append(h.slots, s)
	h.pis = append(h.pis, pi)
	h.used |= p.Profiles[pi].Mask(s.Start)
	h.count[pi]++
}

// orders lists the demands largest first (memory slices, then compute
// slices, over the products that have the profile), then by compute slices
// first, then scarcest first (fewest instances per GPU).
func (in *migInput) orders() [][]int {
	size := make([][3]int, len(in.demands))
	for d, dm := range in.demands {
		size[d][2] = 1 << 30
		for _, p := range topology.MIGProducts() {
			if pi, err := p.Profile(dm.Profile); err == nil && (dm.Product == "" || dm.Product == p.Name) {
				pf := &p.Profiles[pi]
				size[d] = [3]int{max(size[d][0], pf.MemorySlices*8/p.MemorySlices), max(size[d][1], pf.ComputeSlices), min(size[d][2], pf.MaxInstances)}
			}
		}
	}
	by := func(keys ...func(d int) int) []int {
		ord := make([]int, len(in.demands))
		for d := range ord {
			ord[d] = d
		}
		slices.SortStableFunc(ord, func(a, b int) int {
			for _, k := range keys {
				if c := cmp.Compare(k(a), k(b)); c != 0 {
					return c
				}
			}
			return 0
		})
		return ord
	}
	mem := func(d int) int { return -size[d][0] }
	compute := func(d int) int { return -size[d][1] }
	scarce := func(d int) int { return size[d][2] }
	return [][]int{by(mem, compute), by(compute, mem), by(scarce, mem, compute)}
}

// place gives demand d an instance: an idle one of its profile or a new
// one, whichever ranks first (see score).
func (in *migInput) place(st []hGPU, d int) bool {
	var best *hChoice
	consider := func(c hChoice) {
		if best == nil || slices.Compare(c.key[:], best.key[:]) < 0 {
			best = &c
		}
	}
	if in.seen == nil {
		in.seen = map[hSig]bool{}
	}
	seen := in.seen
	clear(seen)
	for g := range st {
		p := in.gpus[g].Product
		h := &st[g]
		// GPUs in the same state score alike: look at the first only.
		if sig := h.signature(p); seen[sig] {
			continue
		} else {
			seen[sig] = true
		}
		for i, s := range h.slots {
			if !s.Busy && s.Demand < 0 && !s.New && in.serves[g][h.pis[i]] == d {
				c := hChoice{g: g, reuse: i}
				if !h.inUse() {
					c.key[0] = 1
				}
				c.key[3], c.key[5] = p.Stranded(h.used, h.count), p.Free(h.count)
				consider(c)
			}
		}
		for pi := range p.Profiles {
			if in.serves[g][pi] != d {
				continue
			}
			for _, evict := range []bool{false, true} {
				used, count := h.used, h.count
				if evict {
					used, count = h.withoutIdle(p)
				}
				for _, s := range p.Profiles[pi].Starts {
					if p.Placeable(used, count, pi, s) {
						consider(in.score(h, p, g, pi, s, used, count, evict))
					}
				}
			}
		}
	}
	if best == nil {
		return false
	}
	h := &st[best.g]
	h.taken = true
	if best.reuse >= 0 {
		h.slots[best.reuse].Demand = d
		return true
	}
	p := in.gpus[best.g].Product
	if best.evict {
		h.evictIdle(p)
	}
	h.add(p, best.pi, MIGSlot{MIGInstance: topology.MIGInstance{Profile: p.Profiles[best.pi].Name, Start: best.start}, New: true, Demand: d})
	h.changed = true
	return true
}

// score ranks placing profile pi at start on GPU g: GPUs opened, busy GPUs
// reconfigured, GPUs reconfigured, stranded slices after, idle instances
// destroyed, free slices after (tightest first).
func (in *migInput) score(h *hGPU, p *topology.MIGProduct, g, pi, start int, used uint32, count []int, evict bool) hChoice {
	c := hChoice{g: g, pi: pi, start: start, reuse: -1, evict: evict}
	if !h.inUse() {
		c.key[0] = 1
	}
	if !h.changed {
		c.key[2] = 1
		if h.busy {
			c.key[1] = 1
		}
	}
	count = slices.Clone(count)
	count[pi]++
	after := used | p.Profiles[pi].Mask(start)
	c.key[3] = p.Stranded(after, count)
	if evict && used != h.used {
		c.key[4] = 1
	}
	c.key[5] = p.Free(count)
	return c
}

// withoutIdle returns the GPU's occupancy without its unassigned idle
// instances.
func (h *hGPU) withoutIdle(p *topology.MIGProduct) (uint32, []int) {
	var used uint32
	count := make([]int, len(h.count))
	for i, s := range h.slots {
		if s.Busy || s.Demand >= 0 || s.New {
			used |= p.Profiles[h.pis[i]].Mask(s.Start)
			count[h.pis[i]]++
		}
	}
	return used, count
}

// evictIdle destroys the GPU's unassigned idle instances.
func (h *hGPU) evictIdle(p *topology.MIGProduct) {
	slots, pis := h.slots, h.pis
	h.slots, h.pis, h.used = nil, nil, 0
	clear(h.count)
	for i, s := range slots {
		if s.Busy || s.Demand >= 0 || s.New {
			h.add(p, pis[i], s)
		}
	}
	h.changed = true
}

// hSig is what a GPU's scores depend on.
type hSig struct {
	p                 *topology.MIGProduct
	used, idle        uint32
	counts, idleCount uint64
	flags             uint8
}

// signature packs the GPU's state; counts are at most 8 (4 bits each) and
// products have at most 8 profiles.
func (h *hGPU) signature(p *topology.MIGProduct) hSig {
	sig := hSig{p: p, used: h.used}
	for i, s := range h.slots {
		sig.counts += 1 << (4 * h.pis[i])
		if !s.Busy && s.Demand < 0 && !s.New {
			sig.idle |= p.Profiles[h.pis[i]].Mask(s.Start)
			sig.idleCount += 1 << (4 * h.pis[i])
		}
	}
	for i, f := range []bool{h.busy, h.changed, h.taken} {
		if f {
			sig.flags |= 1 << i
		}
	}
	return sig
}
