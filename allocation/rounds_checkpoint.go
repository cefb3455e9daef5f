package allocation

import (
	"math/rand/v2"
	"slices"

	"github.com/gpusched/gpusched/internal/pyrand"
)

// checkpoint is the state Checkpoint recorded: the state's fields as they
// were, and what Next and Report change in place. Outside Gavel's mode
// that is only the units' received times and ran flags, which credit
// changes (reset builds new units): journal records each change, so that
// a checkpoint costs O(types), not O(units). Gavel's mode edits its units
// in many places: units holds a copy of them all, in memory reused from
// one checkpoint to the next.
type checkpoint struct {
	ok      bool
	st      roundsState
	journal []creditUndo
	units   map[unit]*unitState // Gavel's mode
	pool    []unitState
	floats  []float64
	worker  []float64
	pcg     rand.PCG
	py      pyrand.State
	spare   map[int]bool
	cur     int
}

// creditUndo is a unit's received time on type k and ran flag before a
// credit.
type creditUndo struct {
	st       *unitState
	k        int
	received float64
	ran      bool
}

// journalCredit records, under a checkpoint, what credit is about to
// change.
func (r *Rounds) journalCredit(st *unitState, k int) {
	if c := &r.saved; c.ok && c.units == nil {
		c.journal = append(c.journal, creditUndo{st, k, st.received[k], st.ran})
	}
}

// Checkpoint records the mechanism's state, so that Rollback can return
// to it: a caller that runs several mechanisms in one step (the
// scheduling core, one per priority tier) and must leave them all as they
// were when one of them fails checkpoints each before, rolls back those
// it has run when one fails, and commits them otherwise. It costs O(types)
// plus the credits of the calls that follow (Gavel's mode: a copy of the
// units' counters), in memory reused from one call to the next. The
// policy's own state (FIFO with Sticky or Compat, FinishTimeFairness) is
// not recorded.
func (r *Rounds) Checkpoint() {
	c := &r.saved
	c.st = r.st
	c.journal = c.journal[:0]
	c.units = nil
	if r.Compat == CompatGavel {
		c.copyUnits(r.st.units)
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

// copyUnits copies the units and their counters into the checkpoint's
// memory.
func (c *checkpoint) copyUnits(units map[unit]*unitState) {
	if c.units == nil {
		c.units = make(map[unit]*unitState, len(units))
	}
	clear(c.units)
	need := 0
	for _, us := range units {
		need += len(us.x) + len(us.received) + len(us.deficit)
	}
	c.floats = slices.Grow(c.floats[:0], need)[:need]
	c.pool = slices.Grow(c.pool[:0], len(units))[:len(units)]
	i, off := 0, 0
	take := func(v []float64) []float64 {
		out := c.floats[off : off+len(v) : off+len(v)]
		copy(out, v)
		off += len(v)
		return out
	}
	for u, us := range units {
		cp := &c.pool[i]
		i++
		*cp = *us
		cp.x, cp.received, cp.deficit = take(us.x), take(us.received), take(us.deficit)
		c.units[u] = cp
	}
}

// Commit drops the last checkpoint: the calls since stand.
func (r *Rounds) Commit() {
	c := &r.saved
	c.ok, c.st, c.journal = false, roundsState{}, c.journal[:0]
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
	for _, e := range slices.Backward(c.journal) {
		e.st.received[e.k], e.st.ran = e.received, e.ran
	}
	var units map[unit]*unitState
	if c.units != nil { // Gavel's mode: fresh copies of the copies
		units = make(map[unit]*unitState, len(c.units))
		for u, us := range c.units {
			cp := *us
			cp.x, cp.received, cp.deficit = slices.Clone(us.x), slices.Clone(us.received), slices.Clone(us.deficit)
			units[u] = &cp
		}
	}
	r.st = c.st
	if units != nil {
		r.st.units = units
	}
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
	r.Commit()
}
