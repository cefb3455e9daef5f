package placement

import (
	"context"
	"math/bits"
	"strconv"
	"strings"
)

// migCand is one layout a GPU may take, reduced to what the plan needs.
type migCand struct {
	// newOff and keepOff count, per demand, the new instances the layout
	// creates (all of which must be used) and the idle instances it keeps
	// that could serve the demand.
	newOff, keepOff []int
	busy            bool
	// cost holds BusyReconfigured, Reconfigured and Stranded; GPUs depends
	// on what the plan takes.
	cost   MIGCost
	layout []migSlot
}

// candidates enumerates the valid layouts of GPU g that keep its busy
// instances and create only instances some demand asks for, keeping for
// each distinct offer the cheapest layout.
func (in *migInput) candidates(g int) []migCand {
	p := in.gpus[g].Product
	nd := len(in.demands)
	var used uint32
	count := make([]int, len(p.Profiles))
	idle := map[[2]int]bool{}
	busy := false
	for _, s := range in.current[g] {
		if s.busy {
			used |= p.Profiles[s.pi].Mask(s.start)
			count[s.pi]++
			busy = true
		} else {
			idle[[2]int{s.pi, s.start}] = true
		}
	}
	byKey := map[string]int{}
	var out []migCand
	var layout []migSlot
	var rec func(s int, used uint32)
	rec = func(s int, used uint32) {
		for s < p.MemorySlices && used>>s&1 == 1 {
			s++
		}
		if s >= p.MemorySlices {
			c := in.evaluate(g, layout, used, count, idle, busy, nd)
			key := offerKey(c.newOff, c.keepOff)
			if i, ok := byKey[key]; !ok {
				c.layout = append([]migSlot(nil), layout...)
				byKey[key] = len(out)
				out = append(out, c)
			} else if c.cost.Less(out[i].cost) {
				c.layout = append([]migSlot(nil), layout...)
				out[i] = c
			}
			return
		}
		rec(s+1, used)
		for pi := range p.Profiles {
			if !p.Placeable(used, count, pi, s) || !idle[[2]int{pi, s}] && in.serves[g][pi] < 0 {
				continue
			}
			count[pi]++
			layout = append(layout, migSlot{pi, s, false})
			rec(s+p.Profiles[pi].MemorySlices, used|p.Profiles[pi].Mask(s))
			layout = layout[:len(layout)-1]
			count[pi]--
		}
	}
	rec(0, used)
	for i := range out {
		for _, s := range in.current[g] {
			if s.busy {
				out[i].layout = append(out[i].layout, s)
			}
		}
	}
	return out
}

// evaluate computes a layout's offers and cost; layout holds the non-busy
// instances, used and count include the busy ones.
func (in *migInput) evaluate(g int, layout []migSlot, used uint32, count []int, idle map[[2]int]bool, busy bool, nd int) migCand {
	p := in.gpus[g].Product
	c := migCand{newOff: make([]int, nd), keepOff: make([]int, nd), busy: busy}
	kept := 0
	for _, s := range layout {
		d := in.serves[g][s.pi]
		switch {
		case idle[[2]int{s.pi, s.start}]:
			kept++
			if d >= 0 {
				c.keepOff[d]++
			}
		default:
			c.newOff[d]++
		}
	}
	if kept < len(idle) || kept < len(layout) {
		c.cost.Reconfigured = 1
		if busy {
			c.cost.BusyReconfigured = 1
		}
	}
	c.cost.Stranded = p.Stranded(used, count)
	return c
}

func offerKey(a, b []int) string {
	var sb strings.Builder
	for _, v := range append(append([]int(nil), a...), b...) {
		sb.WriteString(strconv.Itoa(v))
		sb.WriteByte(',')
	}
	return sb.String()
}

// exact runs the dynamic program, or returns nil when its work would pass
// limit.
func (in *migInput) exact(ctx context.Context, limit int) (*MIGPlan, error) {
	nd := len(in.demands)
	radix := make([]int, nd)
	states := 1
	for d, dm := range in.demands {
		radix[d] = dm.Count + 1
		hi, lo := bits.Mul64(uint64(states), uint64(radix[d]))
		if hi != 0 || lo > uint64(limit) {
			return nil, nil
		}
		states = int(lo)
	}
	cands := make([][]migCand, len(in.gpus))
	work := 0
	for g := range in.gpus {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		cands[g] = in.candidates(g)
		work += states * len(cands[g])
		if work > limit {
			return nil, nil
		}
	}
	// cost[s] is the cheapest way to leave demand s unserved after the GPUs
	// seen so far; from[g][s] and pick[g][s] lead back.
	start := states - 1 // every demand unserved: all digits at their maximum
	cost := make([]MIGCost, states)
	reached := make([]bool, states)
	reached[start] = true
	from := make([][]int32, len(in.gpus))
	pick := make([][]int32, len(in.gpus))
	rem, keep := make([]int, nd), make([]int, nd)
	for g := range in.gpus {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		next := make([]MIGCost, states)
		nreached := make([]bool, states)
		from[g], pick[g] = make([]int32, states), make([]int32, states)
		for s := range states {
			if !reached[s] {
				continue
			}
			decode(s, radix, rem)
			for ci := range cands[g] {
				in.transitions(&cands[g][ci], rem, radix, keep, func(t int, step MIGCost) {
					c := cost[s].add(step)
					ns := s - t
					if !nreached[ns] || c.Less(next[ns]) {
						next[ns], nreached[ns] = c, true
						from[g][ns], pick[g][ns] = int32(s), int32(ci)
					}
				})
			}
		}
		cost, reached = next, nreached
	}
	best := -1
	var bestCost MIGCost
	for s := range states {
		if !reached[s] {
			continue
		}
		decode(s, radix, rem)
		c := cost[s]
		for _, r := range rem {
			c.Unplaced += r
		}
		if best < 0 || c.Less(bestCost) {
			best, bestCost = s, c
		}
	}
	plan := &MIGPlan{Layouts: make([][]MIGSlot, len(in.gpus)), Exact: true}
	after := make([]int, nd)
	for g, s := len(in.gpus)-1, best; g >= 0; g-- {
		prev := int(from[g][s])
		decode(prev, radix, rem)
		decode(s, radix, after)
		c := &cands[g][pick[g][s]]
		for d := range keep {
			keep[d] = rem[d] - after[d] - c.newOff[d]
		}
		plan.Layouts[g] = in.build(g, c, keep)
		s = prev
	}
	return in.finish(plan)
}

// transitions calls fn for every way candidate c can serve the unserved
// demand rem: all its new instances (it may not create more than a demand
// still needs) and any number of its idle instances that serve a demand
// (using fewer can pay: a new instance elsewhere may strand less). fn gets
// the drop in the state's index and the step's cost. keep is scratch.
func (in *migInput) transitions(c *migCand, rem, radix, keep []int, fn func(drop int, step MIGCost)) {
	for d := range rem {
		if c.newOff[d] > rem[d] {
			return
		}
		keep[d] = 0
	}
	for {
		drop, place, taken := 0, 1, false
		for d := range rem {
			t := c.newOff[d] + keep[d]
			drop += t * place
			place *= radix[d]
			taken = taken || t > 0
		}
		step := c.cost
		if c.busy || taken {
			step.GPUs = 1
		}
		fn(drop, step)
		d := 0
		for ; d < len(rem); d++ {
			if keep[d] < min(c.keepOff[d], rem[d]-c.newOff[d]) {
				keep[d]++
				break
			}
			keep[d] = 0
		}
		if d == len(rem) {
			return
		}
	}
}

// decode writes the digits of state s (the unserved count of each demand).
func decode(s int, radix, rem []int) {
	for d := range radix {
		rem[d] = s % radix[d]
		s /= radix[d]
	}
}

// build turns candidate c, using keep[d] of its idle instances for demand
// d, into slots.
func (in *migInput) build(g int, c *migCand, keep []int) []MIGSlot {
	p := in.gpus[g].Product
	idle := map[[2]int]bool{}
	for _, s := range in.current[g] {
		if !s.busy {
			idle[[2]int{s.pi, s.start}] = true
		}
	}
	out := make([]MIGSlot, 0, len(c.layout))
	for _, s := range c.layout {
		slot := MIGSlot{MIGInstance: in.instance(p, s), Busy: s.busy, Demand: -1}
		d := in.serves[g][s.pi]
		switch {
		case s.busy:
		case !idle[[2]int{s.pi, s.start}]:
			slot.New, slot.Demand = true, d
		case d >= 0 && keep[d] > 0:
			slot.Demand = d
			keep[d]--
		}
		out = append(out, slot)
	}
	return out
}
