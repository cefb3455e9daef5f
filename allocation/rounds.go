package allocation

import (
	"cmp"
	"context"
	"math"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/gpusched/gpusched/internal/pyrand"
	"github.com/gpusched/gpusched/topology"
)

// Rounds is Gavel's round-based mechanism (Narayanan et al., OSDI 2020,
// section 5; scheduler.py): it turns a policy's fractional allocation into
// rounds in which each job (or pair of jobs, with space sharing) runs on a
// whole number of GPUs of one type, so that over many rounds each job's
// share of time on each type approaches X.
//
// Each round, the (unit, type) entries (units are jobs and pairs) are
// sorted and taken greedily while GPUs of the type remain; a job runs at
// most once per round. By default each type has its own queue and the
// types are visited fastest first (see TypeOrder); with GlobalQueue one
// queue holds every entry. The order:
//
//   - Units that never ran come first, by X, while their entity
//     (Job.Entity, the tenant; jobs without one form one group) is owed the
//     GPU-seconds they take this round: the sum over its units and types of
//     GPUs * (deficit + X * (time since the last reset, to the end of the
//     round) - time received). A pair needs both entities' budgets. A
//     single entity keeps Gavel's unbounded rule (X * 1e9 for a unit that
//     never ran).
//   - The others, and those beyond the budget, by their lag on the type:
//     deficit + X * (time since the last reset, to the middle of the
//     round) - time received, plus X times a round for a unit that never
//     ran; then by X.
//   - Shares below 1e-6 count as 0; a unit with X = 0 or no rate on the
//     type is not scheduled there by priority.
//   - GPUs left go to runnable jobs, fastest type first, the jobs that
//     received least time since the last reset first (then by arrival and
//     ID), unless LeaveIdle is set.
//
// Why the budget and the lag, instead of Gavel's X over time received, and
// what each alternative measured: docs/architecture.md, "The round
// mechanism".
//
// The allocation is recomputed by the policy when jobs have arrived or left
// and at least MinResetInterval has passed since the last reset (Gavel:
// 1920 s), at once when the problem's types or capacities differ from
// those of the last reset, and at the next round after ForceReset. At a
// reset every unit's shortfall X * elapsed - received is added to its
// deficit (so lags carry over), and the time counters restart at 0. A unit
// scheduled again on the type it ran on keeps its workers (lease
// extension); others take free workers, filling servers of GPUsPerServer
// first to use few servers.
//
// Time received comes from Report, which credits what really ran; a round
// that was not reported is credited in full (every unit of it, for the time
// from its start to the next call of Next, at most a round) when Next is
// called. Snapshot and Restore save and restore the whole state.
//
// With Compat set to CompatGavel the mechanism is Gavel's code at c4fa400,
// quirks included: see Compat.
//
// Rounds is not safe for concurrent use.
type Rounds struct {
	// Policy computes the allocation.
	Policy Policy
	// Mechanism holds the round length, the reset interval, the queue and
	// type order, the seed, LeaveIdle and Compat.
	Mechanism
	// GPUsPerServer gives, per type index, the GPUs of each server (workers
	// i*G to i*G+G-1 share a server); missing or 0 means 1, as in Gavel's
	// simulations.
	GPUsPerServer []int
	// ReuseRounds lets Next build a round's Assignments and their JobIDs
	// in the memory of the round before the last one: a Round is then
	// valid until the second call of Next after the one that returned it
	// (for a caller that is done with a round by then, such as the
	// scheduling core). Off, every Round is the caller's to keep.
	ReuseRounds bool

	st roundsState
	// saved is the state Checkpoint recorded, for Rollback.
	saved checkpoint
	// scratch is reused from round to round (not state).
	scratch struct {
		index   map[int]int
		entries []entry
		busy    []bool
		// spare is the present set before last, cleared and reused; prev
		// and prevPair map the last round's units (single jobs by ID:
		// the map's fast path) to their assignments' positions.
		spare    map[int]bool
		prev     map[int]int32
		prevPair map[unit]int32
		// used and rest are place's per-type workspaces.
		used []bool
		rest []chosenUnit
		// pos is selectUnits' sort order of a queue, chosen its units
		// per type.
		pos []int32
		// ents numbers the entities of selectUnits' round, owed and
		// taken are markFresh's budgets per entity and type.
		ents        map[string]int32
		owed, taken []float64
		chosen      [][]chosenUnit
		// credits is Report's list of what to credit.
		credits []unitCredit
		// With ReuseRounds, the blocks of the last two rounds'
		// assignments and job IDs; the last round's are in [cur].
		assignments [2][]Assignment
		ids         [2][]int
		cur         int
	}
}

// unitCredit is d seconds on type k for unit u.
type unitCredit struct {
	u unit
	k int
	d float64
}

// roundsState is what Rounds remembers between calls (and Snapshot saves).
type roundsState struct {
	started   bool
	forced    bool
	lastReset float64
	alloc     *Allocation
	// types and capacity as of the last reset; order is the visiting order
	// (type indices) fixed then.
	types    []topology.GPUType
	capacity []int
	order    []int
	// jobs are the job IDs present at the last reset, present those of the
	// last call.
	jobs    map[int]bool
	present map[int]bool
	units   map[unit]*unitState
	// list holds the units in the order of their job IDs, with the
	// positions their jobs had in the last problem (derived from units,
	// rebuilt when nil or stale; not saved).
	list []unitRef
	// worker is Gavel's time run on each type since the reset, seeds
	// included (CompatGavel).
	worker    []float64
	lastRound *Round
	reported  bool
	pcg       *rand.PCG
	rng       *rand.Rand
	py        *pyrand.Rand
}

// unitRef is a unit of roundsState.list; ma and mb are the positions of
// its jobs in the last problem that held them (checked before use).
type unitRef struct {
	u      unit
	st     *unitState
	ma, mb int
}

// unitList returns r.st.units in a slice, in the order of their job IDs,
// built again when the units changed.
func (r *Rounds) unitList() []unitRef {
	if r.st.list != nil && len(r.st.list) == len(r.st.units) {
		return r.st.list
	}
	list := make([]unitRef, 0, len(r.st.units))
	for u, st := range r.st.units {
		list = append(list, unitRef{u: u, st: st, ma: -1, mb: -1})
	}
	sortUnitRefs(list)
	r.st.list = list
	return list
}

// sortUnitRefs sorts units by their job IDs (a unit is in a list once:
// the order is total).
func sortUnitRefs(list []unitRef) {
	slices.SortFunc(list, func(a, b unitRef) int { return cmp.Or(cmp.Compare(a.u.a, b.u.a), cmp.Compare(a.u.b, b.u.b)) })
}

// unit is a job (b = -1) or a pair of job IDs a < b.
type unit struct{ a, b int }

func (u unit) ids() []int {
	if u.b < 0 {
		return []int{u.a}
	}
	return []int{u.a, u.b}
}

type unitState struct {
	x        []float64 // target fraction per type
	received []float64 // time received per type since the reset
	deficit  []float64
	ran      bool
	// inAlloc: the unit belongs to the allocation in force (CompatGavel
	// keeps state for present jobs the allocation does not know yet).
	inAlloc bool
}

// Assignment is one unit's place in a round.
//
// An Assignment is a plain value: safe for concurrent reads, not for
// writes while others read it.
type Assignment struct {
	// JobIDs is one job, or the two jobs of a pair.
	JobIDs []int
	// Type and TypeIndex say which GPUs; Workers are their indices within
	// the type (0 to capacity - 1).
	Type      topology.GPUType
	TypeIndex int
	Workers   []int
	// Extended reports that the unit kept its workers from the last round.
	Extended bool
}

// Round is what runs next.
//
// A Round is a plain value: safe for concurrent reads, not for writes
// while others read it.
type Round struct {
	Start, Length float64
	Assignments   []Assignment
	// Reset reports that the allocation was recomputed for this round,
	// and Allocation is the allocation in force.
	Reset      bool
	Allocation *Allocation
	// Stats describe the policy's call when Reset is true.
	Stats RoundStats
}

// RoundStats describes the work behind a round.
//
// A RoundStats is a plain value: safe for concurrent reads, not for writes
// while others read it.
type RoundStats struct {
	// SolveTime is the wall time of the policy's call (0 without a reset).
	SolveTime time.Duration `json:"solve_time_ns"`
	// LP describes the linear programs the policy solved, when it says
	// (Allocation.LP); nil otherwise.
	LP *LPStats `json:"lp,omitempty"`
}

// minShare is the smallest X the mechanism acts on.
const minShare = 1e-6

// maxCounter bounds the mechanism's time counters and deficits, in
// seconds: a thousand times MaxTime, far above any that rounds within
// MaxTime can reach, so that no sum of reports (at most MaxTime seconds
// each) can overflow them to infinity. Credits saturate at it.
const maxCounter = 1e3 * MaxTime

// addCounter returns v + d saturated at +-maxCounter.
func addCounter(v, d float64) float64 { return min(max(v+d, -maxCounter), maxCounter) }

func (r *Rounds) roundLength() float64 { return r.EffectiveRoundLength() }

// Last returns the last round, as Next returned it or Restore restored
// it; nil before the first. With ReuseRounds it is valid as long as that
// round is.
func (r *Rounds) Last() *Round { return r.st.lastRound }

// ForceReset makes the next call of Next recompute the allocation,
// whatever MinResetInterval says (Gavel's simulator does so when nothing
// runs and no job is due).
func (r *Rounds) ForceReset() { r.st.forced = true }

// Next returns the round that starts at now. The previous round is
// credited with what Report said ran, or in full if Report was not called.
// p holds the jobs present now, with their current throughputs.
func (r *Rounds) Next(ctx context.Context, p *Problem, now float64) (*Round, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	if err := r.checkConfig(p, now); err != nil {
		return nil, err
	}
	r.seedRNG()
	if !r.st.reported {
		r.creditFull(now)
	}
	present := r.scratch.spare
	if present == nil {
		present = make(map[int]bool, len(p.Jobs))
	}
	clear(present)
	for m := range p.Jobs {
		present[p.Jobs[m].ID] = true
	}
	if r.Compat == CompatGavel {
		r.gavelAdmit(p, present)
		r.st.list = nil // Gavel's mode edits the units in place
	}
	changed := !r.st.started || len(present) != len(r.st.jobs)
	for id := range present {
		if changed {
			break
		}
		if !r.st.jobs[id] {
			changed = true
		}
	}
	reshaped := r.st.started && (!slices.Equal(p.Types, r.st.types) || !slices.Equal(p.Capacity, r.st.capacity))
	due := !r.st.started || now-r.st.lastReset >= r.EffectiveResetInterval()
	if r.Compat == CompatGavel && r.st.lastReset == 0 {
		due = true // scheduler.py: _update_priorities resets while _last_reset_time == 0
	}
	round := &Round{Start: now, Length: r.roundLength()}
	if reshaped || r.st.forced || (changed && due) {
		if r.Compat == CompatGavel {
			r.gavelDeficits(p, now)
		}
		start := time.Now()
		a, err := r.Policy.Allocate(ctx, p)
		round.Stats.SolveTime = time.Since(start)
		if err != nil {
			return nil, err
		}
		if err := checkAnswer(r.Policy, p, a, r.Compat != CompatGavel); err != nil {
			return nil, err
		}
		round.Stats.LP = a.LP
		if r.Compat == CompatGavel {
			r.gavelReset(p, a, now)
		} else {
			r.reset(p, a, now)
		}
		round.Reset = true
	}
	round.Allocation = r.st.alloc
	order := r.visitOrder(p)
	var chosen [][]chosenUnit
	if r.Compat == CompatGavel {
		chosen = r.gavelSelect(p, order)
	} else {
		chosen = r.selectUnits(p, order, now)
	}
	r.place(p, round, chosen)
	r.scratch.spare = r.st.present
	r.st.present = present
	r.st.lastRound = round
	r.st.reported = false
	return round, nil
}

func (r *Rounds) seedRNG() {
	if r.st.rng == nil {
		r.st.pcg = rand.NewPCG(r.Seed, 0xbb67ae8584caa73b)
		r.st.rng = rand.New(r.st.pcg)
	}
	if r.st.py == nil {
		r.st.py = pyrand.New(r.Seed + 5) // scheduler.py: _worker_type_shuffler.seed(seed+5)
	}
}

// creditFull credits the last round's units with the time since it
// started (at most a round), when Report did not say what ran.
func (r *Rounds) creditFull(now float64) {
	rd := r.st.lastRound
	if rd == nil {
		return
	}
	d := min(max(now-rd.Start, 0), rd.Length)
	for _, as := range rd.Assignments {
		r.credit(unitOf(as.JobIDs), as.TypeIndex, d)
	}
	r.st.reported = true
}

// credit adds d seconds on type k to unit u.
func (r *Rounds) credit(u unit, k int, d float64) {
	if r.Compat == CompatGavel {
		r.gavelCredit(u, k, d)
		return
	}
	if st := r.st.units[u]; st != nil && k >= 0 && k < len(st.received) {
		r.journalCredit(st, k)
		st.received[k] = addCounter(st.received[k], d)
		st.ran = true
	}
}

func unitOf(ids []int) unit {
	if len(ids) == 1 {
		return unit{ids[0], -1}
	}
	return unit{min(ids[0], ids[1]), max(ids[0], ids[1])}
}

// remember records the problem's shape and jobs at a reset.
func (r *Rounds) remember(p *Problem, a *Allocation, now float64) {
	r.st.alloc = a
	r.st.types = slices.Clone(p.Types)
	r.st.capacity = slices.Clone(p.Capacity)
	r.st.order = r.baseOrder(p)
	r.st.jobs = make(map[int]bool, len(p.Jobs))
	for m := range p.Jobs {
		r.st.jobs[p.Jobs[m].ID] = true
	}
	r.st.lastReset = now
	r.st.started = true
	r.st.forced = false
}

// reset installs a new allocation.
func (r *Rounds) reset(p *Problem, a *Allocation, now float64) {
	elapsed := now - r.st.lastReset
	oldIndex := typeIndex(r.st.types)
	n := len(a.X) + len(a.Pairs)
	next := make(map[unit]*unitState, n)
	// The units' state in one block, their counters in another (a round
	// reads them all).
	states := make([]unitState, 0, n)
	arena := make([]float64, 0, 2*n*len(p.Types))
	counters := func(k int) []float64 {
		if len(arena)+k > cap(arena) {
			return make([]float64, k)
		}
		arena = arena[:len(arena)+k]
		return arena[len(arena)-k : len(arena) : len(arena)]
	}
	list := make([]unitRef, 0, n)
	install := func(u unit, x []float64) {
		states = append(states, unitState{x: x, received: counters(len(x)), deficit: counters(len(x)), inAlloc: true})
		st := &states[len(states)-1]
		if old := r.st.units[u]; old != nil && r.st.started {
			st.ran = old.ran
			for k, t := range p.Types {
				if j, ok := oldIndex[t]; ok && j < len(old.x) {
					st.deficit[k] = addCounter(old.deficit[j], old.x[j]*elapsed-old.received[j])
				}
			}
		}
		next[u] = st
		list = append(list, unitRef{u: u, st: st, ma: -1, mb: -1})
	}
	for m := range a.X {
		install(unit{p.Jobs[m].ID, -1}, a.X[m])
	}
	for _, pr := range a.Pairs {
		install(unitOf([]int{p.Jobs[pr.A].ID, p.Jobs[pr.B].ID}), pr.X)
	}
	r.st.units = next
	// The list in the order of installation, which is mostly that of the
	// job IDs already (the sort then checks it in one pass); unitList
	// builds it from the map instead if a unit came twice.
	r.st.list = nil
	if len(list) == len(next) {
		sortUnitRefs(list)
		r.st.list = list
	}
	r.remember(p, a, now)
}

func typeIndex(types []topology.GPUType) map[topology.GPUType]int {
	out := make(map[topology.GPUType]int, len(types))
	for k, t := range types {
		out[t] = k
	}
	return out
}

// baseOrder is the visiting order fixed at a reset: TypeOrder's types,
// then the others fastest first. CompatGavel visits Gavel's hard-coded
// v100, p100, k80 (those with GPUs), then any other type with GPUs.
func (r *Rounds) baseOrder(p *Problem) []int {
	idx := typeIndex(p.Types)
	var out []int
	taken := make([]bool, len(p.Types))
	take := func(k int) {
		if !taken[k] {
			taken[k] = true
			out = append(out, k)
		}
	}
	if r.Compat == CompatGavel {
		for _, t := range []topology.GPUType{topology.V100, topology.P100, topology.K80} {
			if k, ok := idx[t]; ok && p.Capacity[k] > 0 {
				take(k)
			}
		}
	} else {
		for _, t := range r.TypeOrder {
			if k, ok := idx[t]; ok {
				take(k)
			}
		}
	}
	speed := typeSpeed(p)
	rest := make([]int, 0, len(p.Types))
	for k := range p.Types {
		if !taken[k] && (r.Compat != CompatGavel || p.Capacity[k] > 0) {
			rest = append(rest, k)
		}
	}
	slices.SortStableFunc(rest, func(a, b int) int { return cmp.Compare(speed[b], speed[a]) })
	return append(out, rest...)
}

// visitOrder is this round's order of types, shuffled if asked (CompatGavel
// shuffles with CPython's random.shuffle from seed+5, as Gavel does).
func (r *Rounds) visitOrder(p *Problem) []int {
	var order []int
	if r.st.started && slices.Equal(p.Types, r.st.types) {
		order = slices.Clone(r.st.order)
	} else {
		order = r.baseOrder(p)
	}
	if r.ShuffleTypes {
		swap := func(i, j int) { order[i], order[j] = order[j], order[i] }
		if r.Compat == CompatGavel {
			r.st.py.Shuffle(len(order), swap)
		} else {
			r.st.rng.Shuffle(len(order), swap)
		}
	}
	return order
}

// chosenUnit is a unit picked to run on a type; place gives it workers.
type chosenUnit struct {
	u  unit
	sf int
}

// entry is a (unit, type) entry of the priority queues; ma and mb are the
// jobs' positions in the problem (mb = -1 for a single job); lag is how
// far the unit is behind its share on the type, in seconds, its head start
// included; fresh marks a unit that never ran and goes first within its
// entities' budgets (see Rounds). (64 bytes: a cache line.)
type entry struct {
	u           unit
	ma, mb      int
	k, rank, sf int32
	fresh       bool
	lag, x      float64
}

// Quanta of the comparisons in entryBefore: a share of 1 is known to about
// 1e-9 (the LP's tolerance), a lag, share times up to 1,920 s, to a few
// microseconds. selectUnits stores lags and shares quantized.
const (
	shareQuantum = 1e-9
	lagQuantum   = 1e-4
)

// quantize rounds v to a multiple of q.
func quantize(v, q float64) float64 { return math.Round(v/q) * q }

// entryBefore orders entries: per type (unless the queue is global),
// fresh entries first (by share), then by lag and share, decreasing, then
// by unit and type rank. Lags and shares
// are compared at the accuracy of the LP that gave the shares (entries
// hold them quantized): entries that tie in exact arithmetic tie here
// too, whatever the rounding of the solver, and fall to the unit order.
func entryBefore(a, b *entry, global bool) bool {
	if !global && a.rank != b.rank {
		return a.rank < b.rank
	}
	if a.fresh != b.fresh {
		return a.fresh
	}
	if !a.fresh && a.lag != b.lag {
		return a.lag > b.lag
	}
	if a.x != b.x {
		return a.x > b.x
	}
	if a.u != b.u {
		return a.u.a < b.u.a || (a.u.a == b.u.a && a.u.b < b.u.b)
	}
	return a.rank < b.rank
}

// descending compares x and y for a descending order: -1 when x > y, 1
// when y > x, 0 otherwise (unordered NaNs included, as entryBefore).
func descending(x, y float64) int {
	switch {
	case x > y:
		return -1
	case y > x:
		return 1
	}
	return 0
}

// entryCompare is entryBefore as a three-way comparison (one pass).
func entryCompare(a, b *entry, global bool) int {
	if !global && a.rank != b.rank {
		return cmp.Compare(a.rank, b.rank)
	}
	if a.fresh != b.fresh {
		if a.fresh {
			return -1
		}
		return 1
	}
	if !a.fresh && a.lag != b.lag {
		return descending(a.lag, b.lag)
	}
	if a.x != b.x {
		return descending(a.x, b.x)
	}
	if a.u != b.u {
		if a.u.a != b.u.a {
			return cmp.Compare(a.u.a, b.u.a)
		}
		return cmp.Compare(a.u.b, b.u.b)
	}
	return cmp.Compare(a.rank, b.rank)
}

// entryHeap is a binary heap of entries under entryBefore (heapOf with the
// comparison called directly).
type entryHeap struct {
	s      []entry
	global bool
}

func (h *entryHeap) init() {
	for i := len(h.s)/2 - 1; i >= 0; i-- {
		h.down(i)
	}
}

func (h *entryHeap) down(i int) {
	s := h.s
	n := len(s)
	for {
		l := 2*i + 1
		if l >= n {
			return
		}
		c := l
		if r := l + 1; r < n && entryBefore(&s[r], &s[l], h.global) {
			c = r
		}
		if !entryBefore(&s[c], &s[i], h.global) {
			return
		}
		s[i], s[c] = s[c], s[i]
		i = c
	}
}

func (h *entryHeap) pop() entry {
	n := len(h.s)
	top := h.s[0]
	h.s[0] = h.s[n-1]
	h.s = h.s[:n-1]
	h.down(0)
	return top
}

// selectUnits is the priority pass, then the work-conserving pass. The
// entries are taken in the order of a full sort, but through a heap: a
// round looks at the top entries only, about as many as there are GPUs.
func (r *Rounds) selectUnits(p *Problem, order []int, now float64) [][]chosenUnit {
	// Jobs are found by their position in the last problem, through the
	// index (built on the first miss) when they moved.
	var index map[int]int
	find := func(id, hint int) (int, bool) {
		if hint >= 0 && hint < len(p.Jobs) && p.Jobs[hint].ID == id {
			return hint, true
		}
		if index == nil {
			if r.scratch.index == nil {
				r.scratch.index = make(map[int]int, len(p.Jobs))
			}
			index = r.scratch.index
			clear(index)
			for m := range p.Jobs {
				index[p.Jobs[m].ID] = m
			}
		}
		m, ok := index[id]
		return m, ok
	}
	rank := make([]int, len(p.Types))
	for i, k := range order {
		rank[k] = i
	}
	// Entitlement to the middle of the coming round; a unit that never ran
	// is credited a round more (see Rounds).
	elapsed := now - r.st.lastReset + r.roundLength()/2
	headStart := r.roundLength()
	h := &entryHeap{s: r.scratch.entries[:0], global: r.GlobalQueue}
	list := r.unitList()
	if need := len(list) * len(order); cap(h.s) < need {
		h.s = make([]entry, 0, need)
	}
	// Each entity's budget on each type, in GPU-seconds: what its units
	// are owed by the end of the round (see Rounds).
	ents := r.scratch.ents
	if ents == nil {
		ents = map[string]int32{}
		r.scratch.ents = ents
	}
	clear(ents)
	entity := func(m int) int32 {
		e := p.Jobs[m].Entity
		i, ok := ents[e]
		if !ok {
			i = int32(len(ents))
			ents[e] = i
		}
		return i
	}
	owed := r.scratch.owed[:0]
	addOwed := func(e int32, v float64) {
		for len(owed) <= int(e) {
			owed = append(owed, 0)
		}
		owed[e] += v
	}
	anyFresh := false
	for i := range list {
		ref := &list[i]
		u, st := ref.u, ref.st
		ma, ok := find(u.a, ref.ma)
		if !ok {
			continue
		}
		ref.ma = ma
		mb := -1
		if u.b >= 0 {
			if mb, ok = find(u.b, ref.mb); !ok {
				continue
			}
			ref.mb = mb
		}
		ja := &p.Jobs[ma]
		for _, k := range order {
			if k >= len(st.x) || st.x[k] <= minShare || ja.Throughput[k] <= 0 || (mb >= 0 && p.Jobs[mb].Throughput[k] <= 0) {
				continue
			}
			x := st.x[k]
			lag := st.deficit[k] + x*elapsed - st.received[k]
			// Owed by the end of the round, in GPU-seconds, to the
			// entities of both jobs of a pair.
			o := float64(ja.ScaleFactor) * (lag + x*headStart/2)
			ea := entity(ma)
			addOwed(ea, o)
			if mb >= 0 {
				if eb := entity(mb); eb != ea {
					addOwed(eb, o)
				}
			}
			if !st.ran {
				lag += x * headStart
				anyFresh = true
			}
			h.s = append(h.s, entry{u: u, k: int32(k), rank: int32(rank[k]), sf: int32(ja.ScaleFactor), ma: ma, mb: mb,
				fresh: !st.ran, lag: quantize(lag, lagQuantum), x: quantize(x, shareQuantum)})
		}
	}
	r.scratch.owed = owed
	// One entity alone takes from nobody: it keeps Gavel's rule whatever
	// it is owed (see Rounds).
	if anyFresh && len(ents) > 1 {
		r.markFresh(h.s, owed, entity, headStart)
	}
	r.scratch.entries = h.s[:0]
	busy := slices.Grow(r.scratch.busy[:0], len(p.Jobs))[:len(p.Jobs)]
	clear(busy)
	r.scratch.busy = busy
	free := slices.Clone(p.Capacity)
	left := 0
	for _, f := range free {
		left += f
	}
	// The chosen lists live until place has read them: reused.
	chosen := r.scratch.chosen
	if len(chosen) < len(p.Types) {
		chosen = append(chosen, make([][]chosenUnit, len(p.Types)-len(chosen))...)
	}
	chosen = chosen[:len(p.Types)]
	for k := range chosen {
		chosen[k] = chosen[k][:0]
	}
	r.scratch.chosen = chosen
	pick := func(e *entry) {
		if int(e.sf) > free[e.k] || busy[e.ma] || (e.mb >= 0 && busy[e.mb]) {
			return
		}
		busy[e.ma] = true
		if e.mb >= 0 {
			busy[e.mb] = true
		}
		free[e.k] -= int(e.sf)
		left -= int(e.sf)
		chosen[e.k] = append(chosen[e.k], chosenUnit{e.u, int(e.sf)})
	}
	// take walks a queue in order while GPUs remain (*gpus > 0): by heap
	// while it may stop early, by a sort of the rest once all that is left
	// fits (the walk then reaches the end: the same order, at less cost).
	take := func(h *entryHeap, gpus *int) {
		// Entries whose jobs run already (on a type visited before) would
		// be passed over wherever they stood: drop them first.
		h.s = slices.DeleteFunc(h.s, func(e entry) bool { return busy[e.ma] || (e.mb >= 0 && busy[e.mb]) })
		demand := 0
		for i := range h.s {
			demand += int(h.s[i].sf)
		}
		if demand > *gpus {
			h.init()
		}
		for *gpus > 0 && len(h.s) > 0 {
			if demand <= *gpus {
				// entryBefore is a total order: the sort's result does not
				// depend on the order it starts from.
				// Sorted by position (4 bytes moved, not 64).
				rest, global := h.s, h.global
				pos := slices.Grow(r.scratch.pos[:0], len(rest))
				for i := range rest {
					pos = append(pos, int32(i))
				}
				r.scratch.pos = pos
				slices.SortFunc(pos, func(i, j int32) int { return entryCompare(&rest[i], &rest[j], global) })
				for _, i := range pos {
					if *gpus <= 0 {
						break
					}
					pick(&rest[i])
				}
				return
			}
			e := h.pop()
			demand -= int(e.sf)
			pick(&e)
		}
	}
	if r.GlobalQueue {
		take(h, &left)
	} else {
		// A queue per type, visited in order: the order of the full sort,
		// and a type's queue is left as soon as its GPUs are taken.
		byRank := groupByRank(h.s, len(order))
		for i, k := range order {
			take(&entryHeap{s: byRank[i]}, &free[k])
		}
	}
	if !r.LeaveIdle && left > 0 {
		r.fillIdle(p, order, busy, free, chosen)
	}
	return chosen
}

// markFresh keeps the mark of the entries of units that never ran (built
// with fresh set) on those which go first, and clears it on the others:
// unit by unit in the order of the unit list (by job IDs: submission
// order where IDs grow), a unit goes first if the GPU-seconds the
// entity's marked units take this round (GPUs times the round, once per
// unit whatever its types) stay within what it is owed by the end of the
// round (owed, over all types; lagQuantum absorbs rounding). A pair goes
// first only if both its jobs' entities have the budget, and counts for
// both. The entries of a unit are adjacent in es.
func (r *Rounds) markFresh(es []entry, owed []float64, entity func(int) int32, round float64) {
	taken := slices.Grow(r.scratch.taken[:0], len(owed))[:len(owed)]
	clear(taken)
	r.scratch.taken = taken
	var last unit
	keep, seen := false, false
	for i := range es {
		e := &es[i]
		if !e.fresh {
			continue
		}
		if !seen || e.u != last {
			seen, last = true, e.u
			ia, ib := entity(e.ma), int32(-1)
			if e.mb >= 0 {
				if b := entity(e.mb); b != ia {
					ib = b
				}
			}
			g := float64(e.sf) * round
			keep = taken[ia]+g <= owed[ia]+lagQuantum && (ib < 0 || taken[ib]+g <= owed[ib]+lagQuantum)
			if keep {
				taken[ia] += g
				if ib >= 0 {
					taken[ib] += g
				}
			}
		}
		e.fresh = keep
	}
}

// groupByRank sorts entries by type rank in place (a counting sort) and
// returns the entries of each rank.
func groupByRank(es []entry, ranks int) [][]entry {
	start := make([]int, ranks+1)
	for i := range es {
		start[es[i].rank+1]++
	}
	for i := range ranks {
		start[i+1] += start[i]
	}
	out := make([][]entry, ranks)
	for i := range out {
		out[i] = es[start[i]:start[i]:start[i+1]]
	}
	// Cycle each entry to its group's next free slot.
	for g := range ranks {
		for len(out[g]) < cap(out[g]) {
			e := es[start[g]+len(out[g])]
			for int(e.rank) != g {
				dst := &out[e.rank]
				slot := start[e.rank] + len(*dst)
				*dst = (*dst)[:len(*dst)+1]
				es[slot], e = e, es[slot]
			}
			out[g] = out[g][:len(out[g])+1]
			es[start[g]+len(out[g])-1] = e
		}
	}
	return out
}

// heapOf is a binary heap under before: pop returns the elements in the
// order a sort by before would give.
type heapOf[T any] struct {
	s      []T
	before func(a, b *T) bool
}

func (h *heapOf[T]) init() {
	for i := len(h.s)/2 - 1; i >= 0; i-- {
		h.down(i)
	}
}

func (h *heapOf[T]) down(i int) {
	n := len(h.s)
	for {
		l := 2*i + 1
		if l >= n {
			return
		}
		c := l
		if r := l + 1; r < n && h.before(&h.s[r], &h.s[l]) {
			c = r
		}
		if !h.before(&h.s[c], &h.s[i]) {
			return
		}
		h.s[i], h.s[c] = h.s[c], h.s[i]
		i = c
	}
}

// peek returns the first element, if any.
func (h *heapOf[T]) peek() (*T, bool) {
	if len(h.s) == 0 {
		return nil, false
	}
	return &h.s[0], true
}

func (h *heapOf[T]) pop() (T, bool) {
	var top T
	n := len(h.s)
	if n == 0 {
		return top, false
	}
	top = h.s[0]
	h.s[0] = h.s[n-1]
	h.s = h.s[:n-1]
	h.down(0)
	return top, true
}

// fillIdle gives the GPUs the priority pass left to runnable jobs that do
// not run yet: fastest type first, the jobs that received least time since
// the reset first, then by arrival and ID.
func (r *Rounds) fillIdle(p *Problem, order []int, busy []bool, free []int, chosen [][]chosenUnit) {
	type cand struct {
		m      int
		served float64
	}
	var cs []cand
	for m := range p.Jobs {
		if busy[m] {
			continue
		}
		c := cand{m: m}
		if st := r.st.units[unit{p.Jobs[m].ID, -1}]; st != nil {
			for k := range st.received {
				c.served += st.received[k]
			}
		}
		cs = append(cs, c)
	}
	// The candidates in order, sorted lazily: a heap, popped into sorted
	// as far as some type needs.
	before := func(a, b *cand) bool {
		if a.served != b.served {
			return a.served < b.served
		}
		ja, jb := &p.Jobs[a.m], &p.Jobs[b.m]
		if ja.Arrival != jb.Arrival {
			return ja.Arrival < jb.Arrival
		}
		return ja.ID < jb.ID
	}
	h := &heapOf[cand]{s: cs, before: before}
	h.init()
	var sorted []cand
	for _, k := range order {
		for i := 0; free[k] > 0; i++ {
			if i == len(sorted) {
				c, ok := h.pop()
				if !ok {
					break
				}
				sorted = append(sorted, c)
			}
			j := &p.Jobs[sorted[i].m]
			if busy[sorted[i].m] || j.Throughput[k] <= 0 || j.ScaleFactor > free[k] {
				continue
			}
			busy[sorted[i].m] = true
			free[k] -= j.ScaleFactor
			chosen[k] = append(chosen[k], chosenUnit{unit{j.ID, -1}, j.ScaleFactor})
		}
	}
}

// place gives workers to the chosen units: per type, lease extensions
// first, then by decreasing scale factor into the emptiest-used servers.
func (r *Rounds) place(p *Problem, round *Round, chosen [][]chosenUnit) {
	prev, prevPair := r.scratch.prev, r.scratch.prevPair
	if prev == nil {
		prev, prevPair = map[int]int32{}, map[unit]int32{}
		r.scratch.prev, r.scratch.prevPair = prev, prevPair
	}
	clear(prev)
	clear(prevPair)
	var last []Assignment
	if r.st.lastRound != nil {
		last = r.st.lastRound.Assignments
		for i := range last {
			if u := unitOf(last[i].JobIDs); u.b == -1 {
				prev[u.a] = int32(i)
			} else {
				prevPair[u] = int32(i)
			}
		}
	}
	lastOf := func(u unit) (int32, bool) {
		if u.b == -1 {
			i, ok := prev[u.a]
			return i, ok
		}
		i, ok := prevPair[u]
		return i, ok
	}
	// The round's assignments and their job IDs in one block each.
	units, nids := 0, 0
	for _, cs := range chosen {
		units += len(cs)
		for _, c := range cs {
			nids++
			if c.u.b >= 0 {
				nids++
			}
		}
	}
	var ids []int
	if r.ReuseRounds {
		sc := &r.scratch
		sc.cur ^= 1 // the other block holds the last round
		round.Assignments = slices.Grow(sc.assignments[sc.cur][:0], units)
		ids = slices.Grow(sc.ids[sc.cur][:0], nids)
	} else {
		round.Assignments = slices.Grow(round.Assignments, units)
		ids = make([]int, 0, nids)
	}
	idsOf := func(u unit) []int {
		start := len(ids)
		ids = append(ids, u.a)
		if u.b >= 0 {
			ids = append(ids, u.b)
		}
		return ids[start:len(ids):len(ids)]
	}
	for k := range p.Types {
		used := slices.Grow(r.scratch.used[:0], p.Capacity[k])[:p.Capacity[k]]
		clear(used)
		r.scratch.used = used
		rest := r.scratch.rest[:0]
		for _, c := range chosen[k] {
			i, ok := lastOf(c.u)
			if ok && last[i].Type == p.Types[k] && len(last[i].Workers) == c.sf && fits(used, last[i].Workers) {
				old := &last[i]
				for _, w := range old.Workers {
					used[w] = true
				}
				round.Assignments = append(round.Assignments, Assignment{JobIDs: idsOf(c.u), Type: p.Types[k], TypeIndex: k, Workers: old.Workers, Extended: true})
				continue
			}
			rest = append(rest, c)
		}
		r.scratch.rest = rest
		slices.SortStableFunc(rest, func(a, b chosenUnit) int { return cmp.Compare(b.sf, a.sf) })
		g := 1
		if k < len(r.GPUsPerServer) && r.GPUsPerServer[k] > 0 {
			g = r.GPUsPerServer[k]
		}
		next := 0 // with one GPU per server: no free worker below next
		for _, c := range rest {
			var ws []int
			if g == 1 {
				ws, next = takeFirst(used, c.sf, next)
			} else {
				ws = takeWorkers(used, c.sf, g)
			}
			round.Assignments = append(round.Assignments, Assignment{JobIDs: idsOf(c.u), Type: p.Types[k], TypeIndex: k, Workers: ws})
		}
	}
	if r.ReuseRounds {
		r.scratch.assignments[r.scratch.cur], r.scratch.ids[r.scratch.cur] = round.Assignments, ids
	}
}

// takeFirst takes the n lowest free workers at or above from, which is
// what takeWorkers does with one GPU per server (no server holds more
// than one worker, so the best fit is the first free one), in time
// proportional to the workers passed over; it returns them and where the
// next search may start.
func takeFirst(used []bool, n, from int) ([]int, int) {
	out := make([]int, 0, n)
	w := from
	for ; w < len(used) && len(out) < n; w++ {
		if !used[w] {
			used[w] = true
			out = append(out, w)
		}
	}
	return out, w
}

func fits(used []bool, ws []int) bool {
	for _, w := range ws {
		if w < 0 || w >= len(used) || used[w] {
			return false
		}
	}
	return true
}

// takeWorkers takes n free workers, preferring the server with the fewest
// free workers that still holds all n, then spilling over servers in order.
func takeWorkers(used []bool, n, g int) []int {
	servers := (len(used) + g - 1) / g
	bestServer, bestFree := -1, 0
	for s := range servers {
		free := 0
		for w := s * g; w < min((s+1)*g, len(used)); w++ {
			if !used[w] {
				free++
			}
		}
		if free >= n && (bestServer < 0 || free < bestFree) {
			bestServer, bestFree = s, free
		}
	}
	var out []int
	take := func(lo, hi int) {
		for w := lo; w < hi && len(out) < n; w++ {
			if !used[w] {
				used[w] = true
				out = append(out, w)
			}
		}
	}
	if bestServer >= 0 {
		take(bestServer*g, min((bestServer+1)*g, len(used)))
	}
	take(0, len(used))
	return out
}
