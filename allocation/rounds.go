package allocation

import (
	"cmp"
	"context"
	"math/rand/v2"
	"slices"

	"github.com/gpusched/gpusched/topology"
)

// Rounds is Gavel's round-based mechanism (Narayanan et al., OSDI 2020,
// section 5; scheduler.py): it turns a policy's fractional allocation into
// rounds in which each job (or pair of jobs, with space sharing) runs on a
// whole number of GPUs of one type, so that over many rounds each job's
// share of time on each type approaches X.
//
// Each round, the (unit, type) entries (units are jobs and pairs) are
// sorted by priority X[m][k] / (time received on k / time elapsed), by
// their deficit, then by X, and taken greedily while GPUs of the type
// remain; a job runs at most once per round. Shares below 1e-6 count as 0
// (interior-point solutions carry residues of 1e-10). A unit with X > 0 that has never run
// gets priority X * 1e9, and one with X = 0 or no rate on the type never
// runs there. The allocation is recomputed by the policy only when jobs
// have arrived or left and at least MinResetInterval has passed since the
// last reset (Gavel: 1920 s); at a reset, every unit's shortfall
// X * elapsed - received is added to its deficit, and the time counters are
// re-seeded with half a round at the new shares. A unit scheduled again on
// the type it ran on keeps its workers (lease extension); others take free
// workers, filling servers of GPUsPerServer first to use few servers.
//
// Rounds is not safe for concurrent use.
type Rounds struct {
	// Policy computes the allocation.
	Policy Policy
	// RoundLength is the length of a round in seconds; 0 means 360.
	RoundLength float64
	// MinResetInterval is the least time between two allocations; 0 means
	// 1920 s, and a negative value recomputes at every change.
	MinResetInterval float64
	// GPUsPerServer gives, per type index, the GPUs of each server (workers
	// i*G to i*G+G-1 share a server); missing or 0 means 1, as in Gavel's
	// simulations.
	GPUsPerServer []int
	// PerTypeQueues takes the types one after another, each with its own
	// queue (Gavel's default); otherwise one queue over all (unit, type)
	// entries (Gavel's global queue option), which lets a job run first on
	// the type where it is furthest behind and converges faster.
	PerTypeQueues bool
	// ShuffleTypes visits the types in an order drawn from Seed each round
	// (Gavel does so for policies that ignore throughputs); otherwise in
	// the order of Problem.Types. It breaks ties in the global queue.
	ShuffleTypes bool
	Seed         uint64

	alloc     *Allocation
	jobs      map[int]bool // job IDs at the last reset
	lastReset float64
	started   bool
	rng       *rand.Rand
	units     map[unit]*unitState
	lastRound *Round
}

// unit is a job (b = -1) or a pair of job IDs a < b.
type unit struct{ a, b int }

type unitState struct {
	x        []float64 // target fraction per type
	received []float64 // time received per type since the reset
	deficit  []float64
	ran      bool
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
}

// minShare is the smallest X the mechanism acts on.
const minShare = 1e-6

func (r *Rounds) roundLength() float64 {
	if r.RoundLength > 0 {
		return r.RoundLength
	}
	return 360
}

func (r *Rounds) resetInterval() float64 {
	switch {
	case r.MinResetInterval > 0:
		return r.MinResetInterval
	case r.MinResetInterval < 0:
		return 0
	}
	return 1920
}

// Next returns the round that starts at now. The previous round's units
// are credited with the time since it started (at most a round). p holds
// the jobs present now, with their current throughputs.
func (r *Rounds) Next(ctx context.Context, p *Problem, now float64) (*Round, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	if err := r.checkConfig(p, now); err != nil {
		return nil, err
	}
	if r.rng == nil {
		r.rng = rand.New(rand.NewPCG(r.Seed, 0xbb67ae8584caa73b))
	}
	r.credit(now)
	present := map[int]bool{}
	for m := range p.Jobs {
		present[p.Jobs[m].ID] = true
	}
	changed := !r.started || len(present) != len(r.jobs)
	for id := range present {
		if !r.jobs[id] {
			changed = true
		}
	}
	round := &Round{Start: now, Length: r.roundLength()}
	if changed && (!r.started || now-r.lastReset >= r.resetInterval()) {
		a, err := r.Policy.Allocate(ctx, p)
		if err != nil {
			return nil, err
		}
		if err := checkAnswer(r.Policy, p, a); err != nil {
			return nil, err
		}
		r.reset(p, a, now)
		round.Reset = true
	}
	round.Allocation = r.alloc
	r.schedule(p, round, now)
	r.lastRound = round
	return round, nil
}

// credit adds the time since the last round started to its units.
func (r *Rounds) credit(now float64) {
	if r.lastRound == nil {
		return
	}
	d := min(max(now-r.lastRound.Start, 0), r.lastRound.Length)
	for _, as := range r.lastRound.Assignments {
		if st := r.units[unitOf(as.JobIDs)]; st != nil {
			st.received[as.TypeIndex] += d
			st.ran = true
		}
	}
}

func unitOf(ids []int) unit {
	if len(ids) == 1 {
		return unit{ids[0], -1}
	}
	return unit{min(ids[0], ids[1]), max(ids[0], ids[1])}
}

// reset installs a new allocation.
func (r *Rounds) reset(p *Problem, a *Allocation, now float64) {
	half := r.roundLength() / 2
	elapsed := now - r.lastReset
	next := map[unit]*unitState{}
	install := func(u unit, x []float64) {
		st := &unitState{x: x, received: make([]float64, len(x)), deficit: make([]float64, len(x))}
		if old := r.units[u]; old != nil && r.started && len(old.x) == len(x) {
			st.ran = old.ran
			for k := range x {
				st.deficit[k] = old.deficit[k] + old.x[k]*(elapsed+half) - old.received[k]
			}
		}
		for k := range x {
			st.received[k] = x[k] * half
		}
		next[u] = st
	}
	for m := range a.X {
		install(unit{p.Jobs[m].ID, -1}, a.X[m])
	}
	for _, pr := range a.Pairs {
		install(unitOf([]int{p.Jobs[pr.A].ID, p.Jobs[pr.B].ID}), pr.X)
	}
	r.units = next
	r.alloc = a
	r.jobs = map[int]bool{}
	for m := range p.Jobs {
		r.jobs[p.Jobs[m].ID] = true
	}
	r.lastReset = now
	r.started = true
}

// schedule fills the round.
func (r *Rounds) schedule(p *Problem, round *Round, now float64) {
	index := map[int]int{}
	for m := range p.Jobs {
		index[p.Jobs[m].ID] = m
	}
	elapsed := now - r.lastReset + r.roundLength()/2
	order := make([]int, len(p.Types))
	for k := range order {
		order[k] = k
	}
	if r.ShuffleTypes {
		r.rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
	}
	type entry struct {
		u                unit
		k                int
		prio, deficit, x float64
		sf               int
		ids              []int
	}
	var entries []entry
	for u, st := range r.units {
		ids := []int{u.a}
		if u.b >= 0 {
			ids = append(ids, u.b)
		}
		for _, k := range order {
			x := st.x[k]
			if x <= minShare {
				continue
			}
			ok := true
			for _, id := range ids {
				m, present := index[id]
				if !present || p.Jobs[m].Throughput[k] <= 0 {
					ok = false
				}
			}
			if !ok {
				continue
			}
			prio := x * 1e9 // never ran: first in line
			if st.ran && st.received[k] > 0 {
				prio = x / (st.received[k] / elapsed)
			}
			entries = append(entries, entry{u, k, prio, st.deficit[k], x, p.Jobs[index[u.a]].ScaleFactor, ids})
		}
	}
	rank := make([]int, len(p.Types))
	for i, k := range order {
		rank[k] = i
	}
	slices.SortFunc(entries, func(a, b entry) int {
		byType := 0
		if r.PerTypeQueues {
			byType = cmp.Compare(rank[a.k], rank[b.k])
		}
		return cmp.Or(byType, cmp.Compare(b.prio, a.prio), cmp.Compare(b.deficit, a.deficit), cmp.Compare(b.x, a.x),
			cmp.Compare(a.u.a, b.u.a), cmp.Compare(a.u.b, b.u.b), cmp.Compare(rank[a.k], rank[b.k]))
	})
	busy := map[int]bool{}
	free := slices.Clone(p.Capacity)
	chosen := make([][]entry, len(p.Types))
	for _, e := range entries {
		if e.sf > free[e.k] || busy[e.ids[0]] || (len(e.ids) == 2 && busy[e.ids[1]]) {
			continue
		}
		for _, id := range e.ids {
			busy[id] = true
		}
		free[e.k] -= e.sf
		chosen[e.k] = append(chosen[e.k], e)
	}
	// Place: per type, lease extensions first, then by decreasing scale
	// factor into the emptiest-used servers.
	prev := map[unit]Assignment{}
	if r.lastRound != nil {
		for _, as := range r.lastRound.Assignments {
			prev[unitOf(as.JobIDs)] = as
		}
	}
	for k := range p.Types {
		used := make([]bool, p.Capacity[k])
		var rest []entry
		for _, e := range chosen[k] {
			old, ok := prev[e.u]
			if ok && old.TypeIndex == k && len(old.Workers) == e.sf && fits(used, old.Workers) {
				for _, w := range old.Workers {
					used[w] = true
				}
				round.Assignments = append(round.Assignments, Assignment{JobIDs: e.ids, Type: p.Types[k], TypeIndex: k, Workers: old.Workers, Extended: true})
				continue
			}
			rest = append(rest, e)
		}
		slices.SortStableFunc(rest, func(a, b entry) int { return cmp.Compare(b.sf, a.sf) })
		g := 1
		if k < len(r.GPUsPerServer) && r.GPUsPerServer[k] > 0 {
			g = r.GPUsPerServer[k]
		}
		for _, e := range rest {
			round.Assignments = append(round.Assignments, Assignment{JobIDs: e.ids, Type: p.Types[k], TypeIndex: k, Workers: takeWorkers(used, e.sf, g)})
		}
	}
}

func fits(used []bool, ws []int) bool {
	for _, w := range ws {
		if w >= len(used) || used[w] {
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
