package allocation

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
)

// Compat selects a compatibility mode for Rounds and FIFO. It is a number:
// safe for concurrent use.
type Compat uint8

const (
	// CompatNone is gpusched's own behaviour, the default.
	CompatNone Compat = iota
	// CompatGavel reproduces Gavel's code (stanford-futuredata/gavel at
	// c4fa400, scheduler.py and policies/fifo.py), quirks included, so that
	// a simulation matches Gavel's job for job. In Rounds:
	//
	//   - time counters are seeded with half a round for every job and type
	//     (at a job's arrival and at each reset), whatever its share, and
	//     the priority of (unit, type) is X / (time on the type / time of
	//     all units on the type), X * 1e9 only while a counter is 0, 0 where
	//     X is 0 or the rate is 0 (_update_priorities);
	//   - every present job is in the queues, with priority 0 while the
	//     allocation does not know it (it arrived after the last reset) or
	//     gives it nothing on the type; after the entries with a share, GPUs
	//     go to these by deficit, then X, then order of arrival (no 1e-6
	//     floor, no work-conserving pass of ours). A job the allocation does
	//     not know that wins GPUs this way holds them idle for the round
	//     (_schedule_jobs_on_workers skips jobs not in the allocation). For
	//     FIFO policies entries of priority 0 are skipped (when Policy is a
	//     *FIFO);
	//   - with space sharing (Problem.Pairs set) every pair of present jobs
	//     of equal scale factor is a unit, in the allocation with X = 0 when
	//     the policy does not pair them; a pair's counters start at 0 and its
	//     deficit gains half a round at its first reset, so unpaired pairs
	//     come before single jobs without a share;
	//   - ties are broken by order of insertion (a job, then its pairs with
	//     earlier jobs), as Python's stable sort does;
	//   - types are visited v100, p100, k80 (those with GPUs; other types
	//     after them, which Gavel would never use), shuffled each round with
	//     CPython's random.shuffle seeded with Seed+5 when ShuffleTypes is
	//     set (Gavel shuffles for policies without "Perf" or "Packing" in
	//     their names);
	//   - a reset is allowed whenever the last one happened at time 0;
	//   - LeaveIdle has no effect.
	//
	// For FIFO, see FIFO.Compat.
	CompatGavel
)

// String returns the mode's name: "none" or "gavel".
func (c Compat) String() string {
	switch c {
	case CompatNone:
		return "none"
	case CompatGavel:
		return "gavel"
	}
	return fmt.Sprintf("Compat(%d)", uint8(c))
}

// ParseCompat reads a mode's name ("", "none" or "gavel").
func ParseCompat(s string) (Compat, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "", "none":
		return CompatNone, nil
	case "gavel":
		return CompatGavel, nil
	}
	return 0, fmt.Errorf("%w: compatibility mode %q (want none or gavel)", ErrInvalidProblem, s)
}

// gavelAdmit keeps a unit for every present job (Gavel's add_job seeds its
// counters with half a round) and drops those of jobs that left, with
// their pairs (_remove_job).
func (r *Rounds) gavelAdmit(p *Problem, present map[int]bool) {
	if r.st.units == nil {
		r.st.units = map[unit]*unitState{}
	}
	for u := range r.st.units {
		if !present[u.a] || (u.b >= 0 && !present[u.b]) {
			delete(r.st.units, u)
		}
	}
	n := len(p.Types)
	if r.st.started {
		n = len(r.st.types)
	}
	half := r.roundLength() / 2
	for m := range p.Jobs {
		u := unit{p.Jobs[m].ID, -1}
		if r.st.units[u] == nil {
			r.st.units[u] = &unitState{x: make([]float64, n), received: fill(n, half), deficit: make([]float64, n)}
		}
	}
}

func fill(n int, v float64) []float64 {
	out := make([]float64, n)
	for i := range out {
		out[i] = v
	}
	return out
}

// gavelDeficits is _reset_time_run_so_far's deficit update, before the new
// allocation: deficit += X_old * elapsed - (counter - half a round), X_old
// being 0 for units the old allocation did not know.
func (r *Rounds) gavelDeficits(p *Problem, now float64) {
	elapsed := now - r.st.lastReset
	half := r.roundLength() / 2
	for _, st := range r.st.units {
		for k := range st.deficit {
			should := 0.0
			if st.inAlloc {
				should = st.x[k] * elapsed
			}
			st.deficit[k] = addCounter(st.deficit[k], should-(st.received[k]-half))
		}
	}
}

// gavelReset installs the new allocation: every counter restarts at half a
// round, and the time of all units on a type at half a round per unit
// (pairs included with space sharing).
func (r *Rounds) gavelReset(p *Problem, a *Allocation, now float64) {
	half := r.roundLength() / 2
	n := len(p.Types)
	oldIndex := typeIndex(r.st.types)
	if !r.st.started {
		oldIndex = typeIndex(p.Types)
	}
	remap := func(old []float64, zero float64) []float64 {
		out := fill(n, zero)
		for k, t := range p.Types {
			if j, ok := oldIndex[t]; ok && j < len(old) {
				out[k] = old[j]
			}
		}
		return out
	}
	index := make(map[int]int, len(p.Jobs))
	for m := range p.Jobs {
		index[p.Jobs[m].ID] = m
	}
	packing := p.Pairs != nil
	for u, st := range r.st.units {
		st.deficit = remap(st.deficit, 0)
		st.received = fill(n, half)
		st.x = make([]float64, n)
		st.inAlloc = u.b < 0 || (packing && p.Jobs[index[u.a]].ScaleFactor == p.Jobs[index[u.b]].ScaleFactor)
	}
	for m, row := range a.X {
		if st := r.st.units[unit{p.Jobs[m].ID, -1}]; st != nil {
			copy(st.x, row)
		}
	}
	for _, pr := range a.Pairs {
		u := unitOf([]int{p.Jobs[pr.A].ID, p.Jobs[pr.B].ID})
		st := r.st.units[u]
		if st == nil {
			// Every pair's deficit is half a round after its first reset.
			st = &unitState{x: make([]float64, n), received: fill(n, half), deficit: fill(n, half), inAlloc: true}
			r.st.units[u] = st
		}
		copy(st.x, pr.X)
	}
	// A pair that looks like any pair never run needs no state.
	for u, st := range r.st.units {
		if u.b >= 0 && st.inAlloc && allEqual(st.x, 0) && allEqual(st.deficit, half) {
			delete(r.st.units, u)
		}
	}
	units := len(p.Jobs)
	if packing {
		bySF := map[int]int{}
		for m := range p.Jobs {
			bySF[p.Jobs[m].ScaleFactor]++
		}
		for _, c := range bySF {
			units += c * (c - 1) / 2
		}
	}
	r.st.worker = fill(n, half*float64(units))
	r.remember(p, a, now)
}

func allEqual(v []float64, x float64) bool {
	for _, y := range v {
		if y != x {
			return false
		}
	}
	return true
}

// gavelCredit adds d seconds on type k to unit u and to the type's total
// (_done_callback).
func (r *Rounds) gavelCredit(u unit, k int, d float64) {
	if k < 0 || k >= len(r.st.worker) {
		return
	}
	st := r.st.units[u]
	if st == nil {
		if u.b < 0 {
			return
		}
		st = r.lazyPair(u)
		r.st.units[u] = st
	}
	st.received[k] = addCounter(st.received[k], d)
	st.ran = true
	r.st.worker[k] = addCounter(r.st.worker[k], d)
}

// lazyPair is the state of a pair that has none yet: in the allocation
// (counters and deficits at half a round) if both jobs were present at the
// last reset, else new (counters and deficits at 0).
func (r *Rounds) lazyPair(u unit) *unitState {
	n := len(r.st.worker)
	if r.st.jobs[u.a] && r.st.jobs[u.b] {
		half := r.roundLength() / 2
		return &unitState{x: make([]float64, n), received: fill(n, half), deficit: fill(n, half), inAlloc: true}
	}
	return &unitState{x: make([]float64, n), received: make([]float64, n), deficit: make([]float64, n)}
}

// gavelKey is an entry's sort key, compared in decreasing order.
type gavelKey struct{ prio, deficit, x float64 }

func (a gavelKey) cmp(b gavelKey) int {
	return cmp.Or(cmp.Compare(b.prio, a.prio), cmp.Compare(b.deficit, a.deficit), cmp.Compare(b.x, a.x))
}

// gavelEntry is one (unit, type) entry of Gavel's queues.
type gavelEntry struct {
	key   gavelKey
	tr    int    // rank of the type in this round's order
	rank  [3]int // order of insertion: a job (id, 0, 0), a pair (later id, 1, earlier id)
	u     unit
	k     int
	place bool // in the allocation: gets workers if picked
}

func gavelRank(u unit) [3]int {
	if u.b < 0 {
		return [3]int{u.a, 0, 0}
	}
	return [3]int{u.b, 1, u.a}
}

func (e *gavelEntry) after(f *gavelEntry) int {
	return cmp.Or(e.key.cmp(f.key), cmp.Compare(e.tr, f.tr), slices.Compare(e.rank[:], f.rank[:]))
}

// gavelSelect is _schedule_jobs_on_workers_helper: per type (or one global
// queue), entries sorted by (priority, deficit, X) decreasing, taken while
// GPUs remain.
func (r *Rounds) gavelSelect(p *Problem, order []int) [][]chosenUnit {
	index := make(map[int]int, len(p.Jobs))
	for m := range p.Jobs {
		index[p.Jobs[m].ID] = m
	}
	tr := make([]int, len(p.Types))
	for i, k := range order {
		tr[k] = i
	}
	rateOK := func(u unit, k int) bool {
		if u.b < 0 {
			return p.Jobs[index[u.a]].Throughput[k] > 0
		}
		if p.Pairs == nil {
			return false
		}
		ta, tb := p.Pairs.Rates(index[u.a], index[u.b], k)
		return ta > 0 && tb > 0
	}
	// One heap per type (or one for all, with the global queue).
	heaps := make([]*heapOf[gavelEntry], len(p.Types))
	var global *heapOf[gavelEntry]
	before := func(a, b *gavelEntry) bool { return a.after(b) < 0 }
	for _, k := range order {
		if r.GlobalQueue {
			if global == nil {
				global = &heapOf[gavelEntry]{s: make([]gavelEntry, 0, len(r.st.units)*len(order)), before: before}
			}
			heaps[k] = global
		} else {
			heaps[k] = &heapOf[gavelEntry]{s: make([]gavelEntry, 0, len(r.st.units)), before: before}
		}
	}
	for u, st := range r.st.units {
		for _, k := range order {
			x := 0.0
			if st.inAlloc {
				x = st.x[k]
			}
			prio := 0.0
			if x != 0 && rateOK(u, k) {
				frac := 0.0
				if r.st.worker[k] != 0 {
					frac = st.received[k] / r.st.worker[k]
				}
				if frac > 0 {
					prio = x / frac
				} else {
					prio = x * 1e9
				}
			}
			h := heaps[k]
			h.s = append(h.s, gavelEntry{key: gavelKey{prio, st.deficit[k], x}, tr: tr[k], rank: gavelRank(u), u: u, k: k, place: st.inAlloc})
		}
	}
	_, fifo := r.Policy.(*FIFO)
	free := slices.Clone(p.Capacity)
	busy := map[int]bool{}
	chosen := make([][]chosenUnit, len(p.Types))
	consider := func(e *gavelEntry) {
		k, u := e.k, e.u
		if free[k] == 0 || busy[u.a] || (u.b >= 0 && busy[u.b]) || !rateOK(u, k) || (fifo && e.key.prio <= 0) {
			return
		}
		sf := p.Jobs[index[u.a]].ScaleFactor
		if u.b >= 0 && p.Jobs[index[u.b]].ScaleFactor != sf {
			return
		}
		if sf > free[k] {
			return
		}
		free[k] -= sf
		busy[u.a] = true
		if u.b >= 0 {
			busy[u.b] = true
		}
		if e.place {
			chosen[k] = append(chosen[k], chosenUnit{u, sf})
		}
	}
	var lazy *lazyPairs
	if p.Pairs != nil {
		lazy = newLazyPairs(r, p, busy)
	}
	full := func(k int) bool { return free[k] == 0 }
	if global != nil {
		global.init()
		r.gavelWalk(global, order, tr, lazy, full, consider)
		return chosen
	}
	for _, k := range order {
		heaps[k].init()
		r.gavelWalk(heaps[k], []int{k}, tr, lazy, full, consider)
	}
	return chosen
}

// gavelWalk takes the explicit entries in order (a heap), with the pairs
// that have no state of their own merged in where their keys fall: those
// in the allocation at (0, half a round, 0), the others at (0, 0, 0). It
// stops when the types are full.
func (r *Rounds) gavelWalk(h *heapOf[gavelEntry], types []int, tr []int, lazy *lazyPairs, full func(int) bool, consider func(*gavelEntry)) {
	done := func() bool {
		for _, k := range types {
			if !full(k) {
				return false
			}
		}
		return true
	}
	take := func() {
		e, _ := h.pop()
		consider(&e)
	}
	if lazy != nil {
		half := r.roundLength() / 2
		for class, key := range []gavelKey{{0, half, 0}, {0, 0, 0}} {
			for top, ok := h.peek(); ok && top.key.cmp(key) < 0 && !done(); top, ok = h.peek() {
				take()
			}
			// Merge the entries of this key with the lazy pairs of this
			// class, type by type in visiting order, by (type rank,
			// insertion rank).
			for _, k := range types {
				it := lazy.iter(k, class == 0)
				for !full(k) {
					e, ok := it.peek()
					if !ok {
						break
					}
					e.key, e.tr = key, tr[k]
					for top, ok := h.peek(); ok && top.key.cmp(key) == 0 && top.after(&e) < 0; top, ok = h.peek() {
						take()
					}
					consider(&e)
					it.next()
				}
			}
		}
	}
	for _, ok := h.peek(); ok && !done(); _, ok = h.peek() {
		take()
	}
}

// lazyPairs enumerates the pairs of present jobs of equal scale factor that
// have no state, in order of insertion, skipping those with a running job.
type lazyPairs struct {
	r    *Rounds
	p    *Problem
	ids  []int // present job IDs, increasing
	sf   map[int]int
	busy map[int]bool
}

func newLazyPairs(r *Rounds, p *Problem, busy map[int]bool) *lazyPairs {
	l := &lazyPairs{r: r, p: p, sf: make(map[int]int, len(p.Jobs)), busy: busy}
	for m := range p.Jobs {
		l.ids = append(l.ids, p.Jobs[m].ID)
		l.sf[p.Jobs[m].ID] = p.Jobs[m].ScaleFactor
	}
	slices.Sort(l.ids)
	return l
}

type lazyIter struct {
	l       *lazyPairs
	k       int
	inAlloc bool
	bi, ai  int
}

func (l *lazyPairs) iter(k int, inAlloc bool) *lazyIter {
	return &lazyIter{l: l, k: k, inAlloc: inAlloc, bi: 1, ai: 0}
}

// peek returns the next pair that could run, without moving past it.
func (it *lazyIter) peek() (gavelEntry, bool) {
	l := it.l
	for it.bi < len(l.ids) {
		b := l.ids[it.bi]
		if l.busy[b] {
			it.bi, it.ai = it.bi+1, 0
			continue
		}
		for it.ai < it.bi {
			a := l.ids[it.ai]
			u := unit{a, b}
			if !l.busy[a] && l.sf[a] == l.sf[b] && l.r.st.units[u] == nil && (l.r.st.jobs[a] && l.r.st.jobs[b]) == it.inAlloc {
				return gavelEntry{rank: gavelRank(u), u: u, k: it.k, place: it.inAlloc}, true
			}
			it.ai++
		}
		it.bi, it.ai = it.bi+1, 0
	}
	return gavelEntry{}, false
}

func (it *lazyIter) next() { it.ai++ }
