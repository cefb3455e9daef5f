package allocation

import (
	"math/rand/v2"
	"slices"

	"github.com/gpusched/gpusched/internal/pyrand"
)

// checkpoint is the state Checkpoint recorded: the state's fields as they
// were, and copies of what Next and Report change in place (the units'
// counters, Gavel's worker times, the random generators), in memory
// reused from one checkpoint to the next.
type checkpoint struct {
	ok     bool
	st     roundsState
	units  map[unit]*unitState
	pool   []unitState
	floats []float64
	worker []float64
	pcg    rand.PCG
	py     pyrand.State
	spare  map[int]bool
	cur    int
}

// Checkpoint records the mechanism's state, so that Rollback can return
// to it: a caller that runs several mechanisms in one step (the
// scheduling core, one per priority tier) and must leave them all as they
// were when one of them fails checkpoints each before, and rolls back
// those it has run. It costs a copy of the units' counters (O(units x
// types)), in memory reused from one call to the next. The policy's own
// state (FIFO with Sticky or Compat, FinishTimeFairness) is not recorded.
func (r *Rounds) Checkpoint() {
	c := &r.saved
	c.st = r.st
	if c.units == nil {
		c.units = make(map[unit]*unitState, len(r.st.units))
	}
	clear(c.units)
	need := 0
	for _, us := range r.st.units {
		need += len(us.x) + len(us.received) + len(us.deficit)
	}
	c.floats = slices.Grow(c.floats[:0], need)[:need]
	c.pool = slices.Grow(c.pool[:0], len(r.st.units))[:len(r.st.units)]
	i, off := 0, 0
	take := func(v []float64) []float64 {
		out := c.floats[off : off+len(v) : off+len(v)]
		copy(out, v)
		off += len(v)
		return out
	}
	for u, us := range r.st.units {
		cp := &c.pool[i]
		i++
		*cp = *us
		cp.x, cp.received, cp.deficit = take(us.x), take(us.received), take(us.deficit)
		c.units[u] = cp
	}
	c.worker = append(c.worker[:0], r.st.worker...)
	if r.st.pcg != nil {
		c.pcg = *r.st.pcg
	}
	if r.st.py != nil && r.Compat == CompatGavel { // only Gavel's mode draws from it
		c.py = r.st.py.State()
	}
	c.spare, c.cur = r.scratch.spare, r.scratch.cur
	c.ok = true
}

// Rollback returns the mechanism to the state of the last Checkpoint,
// undoing the calls of Next and Report since (the rounds they returned
// are no longer the mechanism's: Last is the one before them). It does
// nothing without a checkpoint, and a checkpoint serves one Rollback.
func (r *Rounds) Rollback() {
	c := &r.saved
	if !c.ok {
		return
	}
	units := make(map[unit]*unitState, len(c.units))
	for u, us := range c.units {
		cp := *us
		cp.x, cp.received, cp.deficit = slices.Clone(us.x), slices.Clone(us.received), slices.Clone(us.deficit)
		units[u] = &cp
	}
	r.st = c.st
	r.st.units = units
	r.st.list = nil // derived from the units: built again
	if c.st.worker != nil {
		r.st.worker = slices.Clone(c.worker)
	}
	if r.st.pcg != nil {
		*r.st.pcg = c.pcg // rng draws from it
	}
	if r.st.py != nil && r.Compat == CompatGavel {
		_ = r.st.py.SetState(c.py) // a state it gave
	}
	r.scratch.spare, r.scratch.cur = c.spare, c.cur
	c.ok = false
	c.st = roundsState{}
}
