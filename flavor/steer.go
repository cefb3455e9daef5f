package flavor

import (
	"cmp"
	"container/heap"
	"context"
	"fmt"
	"math"
	"slices"

	"github.com/gpusched/gpusched/allocation"
	"github.com/gpusched/gpusched/topology"
)

// Workload is a Kueue workload as the Steerer sees it: a plain value,
// safe for concurrent reads.
type Workload struct {
	// ID identifies it (unique among the running and pending workloads
	// of one call).
	ID int
	// Queue is its ClusterQueue's index in the Quotas.
	Queue int
	// GPUs is what it asks for in all (its pods' GPUs), at least 1.
	GPUs int
	// Rates are its rates on each type, in steps per second (trusted:
	// only their ratios matter to the heterogeneity-aware policies); 0
	// where it cannot run (its node selector or the tenant's allowed
	// types exclude the type).
	Rates []float64
	// Priority is its priority (Kueue's spec.priority): higher first.
	Priority int
	// Arrival is its creation time, in seconds.
	Arrival float64
	// Remaining is its remaining work in steps, for the policies that use
	// it (finish-time fairness, makespan) and the wait rule; 0 means
	// unknown (Steerer.Duration, an hour by default, at its fastest
	// rate).
	Remaining float64
	// Weight is its weight within its queue; 0 means 1.
	Weight float64
	// Flavor is, for a running (admitted) workload, the index of its
	// flavor in its queue; -1 for a pending one.
	Flavor int
}

// Why says why a pending workload got its decision. A plain value, safe
// for concurrent use.
type Why int

const (
	// Start: its type has quota left in its ClusterQueue, and the policy
	// gives the workload a share of that type: Kueue admits it there now.
	Start Why = iota
	// Busy: the type the policy gives it most of has no quota left now;
	// it waits there.
	Busy
	// NoShare: the policy gives it no share of any type with quota left
	// now (others come first); it waits on the type that suits it best.
	NoShare
	// Outside: its ClusterQueue has more pending workloads than its
	// places in the policy's problem (Steerer.MaxJobs, shared among the
	// queues by fair-sharing weight); it waits outside the problem, behind
	// Decision.Rank - 1 workloads of its own queue (Result.Places).
	Outside
	// NoFlavor: no flavor of its ClusterQueue can ever hold it (too many
	// GPUs, or no type it can run on): Kueue would not admit it either.
	NoFlavor
	// Held: the policy would start it now on a type where it runs slower
	// than on a faster type it waits for, and it has not waited long
	// enough to take the slower one (Steerer.Patience): Kueue does not
	// move an admitted workload, so it would run there for its life. It
	// waits for the faster type (Decision.Type) until Decision.Until, and
	// then may start on the slower one (Decision.HeldFrom).
	Held
	// Preempt: no flavor has room for it now, and Kueue would admit it by
	// preemption (its ClusterQueue's Queue.Preemption; only a workload in
	// the policy's problem, not one Outside): reclaiming
	// nominal quota the queue lent to its cohort, or preempting
	// lower-priority workloads; Decision.Victims says which. Kueue decides
	// that preemption itself (the controller releases the workload to
	// it), on Decision.Flavor.
	Preempt
)

func (w Why) String() string {
	switch w {
	case Start:
		return "start"
	case Busy:
		return "busy"
	case NoShare:
		return "no-share"
	case Outside:
		return "outside"
	case NoFlavor:
		return "no-flavor"
	case Held:
		return "held"
	case Preempt:
		return "preempt"
	}
	return fmt.Sprintf("Why(%d)", int(w))
}

// Decision is the Steerer's choice for one pending workload. A plain
// value, safe for concurrent reads.
type Decision struct {
	// ID is the workload's.
	ID int
	// Flavor is the index, in the workload's queue, of the flavor it
	// starts on (Why Start), is admitted on by preemption (Preempt) or
	// waits for (Busy, NoShare, Held); -1 with Outside and NoFlavor. Type
	// is that flavor's type (-1 without one).
	Flavor, Type int
	Why          Why
	// Share is the policy's time share of the workload on Type (X), and
	// Best its largest share on any type.
	Share, Best float64
	// HeldFrom, with Why Held, is the slower type with room it could
	// start on soonest, and Until the time (as Steer's now) from which it
	// may start there; both 0 otherwise (check Why before reading them).
	HeldFrom int
	Until    float64
	// Rank, with Why Outside, is its place in its ClusterQueue's order of
	// pending workloads (priority, then age; 1 first); 0 otherwise.
	Rank int
	// Victims, with Why Preempt, is what Kueue would preempt for it; the
	// zero value otherwise.
	Victims Victims
}

// DefaultMaxJobs is Steerer.MaxJobs when 0: the workloads, running and
// pending, the policy's problem holds (running ones beyond half of it
// aggregated).
const DefaultMaxJobs = 2048

// shareEpsilon: shares below it count as none (LP solutions carry
// round-off).
const shareEpsilon = 1e-6

// Steerer chooses the GPU type of pending Kueue workloads with an
// allocation policy. Its fields are read only by Steer: a Steerer is safe
// for concurrent use if its Policy is (every policy of package
// allocation is).
type Steerer struct {
	// Types are the GPU types (flavors' Type indices refer to them).
	Types []topology.GPUType
	// Policy allocates GPU time; nil means Gavel's heterogeneity-aware
	// max-min fairness (allocation.MaxMinFairness).
	Policy allocation.Policy
	// MaxJobs bounds the workloads in the policy's problem; 0 means
	// DefaultMaxJobs. Running workloads beyond half of it are aggregated,
	// one problem job per ClusterQueue and type, and at least half of it
	// goes to pending workloads, shared among their ClusterQueues by
	// fair-sharing weight, water filled, within a queue by priority,
	// then age: no queue's backlog, and no number of running workloads,
	// keeps another queue's workloads out.
	MaxJobs int
	// Patience turns on the wait rule for slow types (0, the default,
	// leaves it off: Gavel's policies assume a job can move at the next
	// round, a Kueue workload cannot). A pending workload whose fastest
	// type it may run on has rate r_b, and whose remaining time there is
	// T (Workload.Remaining / r_b, or Duration when unknown), starts on a
	// type of rate r_k < r_b only once it has waited (now - Arrival) at
	// least Patience * T * (r_b/r_k - 1): the time it would lose by
	// running there instead. Until then it waits for a faster type (Why
	// Held) and the slower type's quota goes to others. Patience 1 is the
	// break-even rule of ski rental (Karlin, Manasse, Rudolph and Sleator,
	// "Competitive snoopy caching", Algorithmica 3, 1988, section 3): a
	// workload the slower type could take on arrival finishes no later
	// than twice the better of starting there at once and waiting for its
	// fastest type, however long that type stays busy, provided T is its
	// true remaining time, the slower type still has room when the wait
	// ends, and the fastest type goes to it when it frees (with T
	// assumed, a job far shorter than T waits longer than it should). At
	// most MaxPatience.
	Patience float64
	// Duration is the time, in seconds, a workload of unknown remaining
	// work (Remaining 0) is taken to need on its fastest type: the
	// remaining work the policy's problem gives it (for the policies that
	// use it: finish-time fairness, makespan) and T of Patience; 0 means
	// an hour. At most allocation.MaxSteps.
	Duration float64
}

// MaxPatience bounds Steerer.Patience.
const MaxPatience = 100

// maxSlowdown bounds the rate ratio the wait rule acts on, so that a wait
// stays finite.
const maxSlowdown = 1e6

// Result is what Steer decided: a plain value owned by the caller, safe
// for concurrent reads, not for concurrent writes.
type Result struct {
	// Decisions, one per pending workload, in the order given.
	Decisions []Decision
	// Allocation is the policy's (nil when no workload was considered).
	Allocation *allocation.Allocation
	// Considered counts the jobs in the policy's problem (aggregated
	// running workloads count once).
	Considered int
	// Places and Queued, by queue index: the places its pending
	// workloads got in the policy's problem, and its pending workloads
	// some flavor can hold.
	Places, Queued []int
}

// Steer decides, for each pending workload, the flavor (and so the GPU
// type) it starts on now or waits for. q says what the running workloads
// already use (the caller charged them); it is not changed. The policy
// sees running workloads on their own type only, pending ones on every
// type their queue has a flavor for that could hold them; the capacity
// of each type is what the queues' quotas of it could give their
// workloads (each queue at most what its workloads could use of it, so
// that an idle queue's quota is no capacity for the others), at most the
// sum of the nominal quotas; the queues
// are the policy's entities, with their weights and, for
// allocation.QuotaFairness, their nominal quotas as guarantees and what
// they could ever get (Potential) as limits. Pending workloads then start,
// in order of priority and of their share X of a type with room in their
// queue (the largest first: Gavel's round mechanism, for jobs that never
// ran), each queue as far as the policy gave it GPUs, then on what is
// left by the queue due the most, each on the first flavor of that type
// with room; the others wait on the type of their
// largest share, unless Kueue would admit them now by preemption
// (Preempt). With more workloads than MaxJobs the problem holds
// each queue's share of them; the others wait Outside.
func (s *Steerer) Steer(ctx context.Context, now float64, q *Quotas, running, pending []Workload) (*Result, error) {
	nt := len(s.Types)
	if q.types != nt {
		return nil, fmt.Errorf("%w: quotas over %d types, steerer over %d", ErrInvalid, q.types, nt)
	}
	if !(s.Patience >= 0 && s.Patience <= MaxPatience) || !(s.Duration >= 0 && s.Duration <= allocation.MaxSteps) {
		return nil, fmt.Errorf("%w: patience %v (want 0 to %d), duration %v s (want 0 to %g)", ErrInvalid, s.Patience, MaxPatience, s.Duration, allocation.MaxSteps)
	}
	if err := s.check(q, running, pending); err != nil {
		return nil, err
	}
	res := &Result{Decisions: make([]Decision, len(pending))}
	for i, w := range pending {
		res.Decisions[i] = Decision{ID: w.ID, Flavor: -1, Type: -1, Why: NoFlavor}
	}
	// Which types each pending workload could ever run on in its queue.
	viable := make([][]bool, len(pending))
	for i, w := range pending {
		viable[i] = make([]bool, nt)
		fl := q.queues[w.Queue].Flavors
		for f := range fl {
			if w.Rates[fl[f].Type] > 0 && q.Potential(w.Queue, f) >= w.GPUs {
				viable[i][fl[f].Type] = true
			}
		}
	}
	order := make([]int, 0, len(pending))
	for i := range pending {
		if slices.Contains(viable[i], true) {
			order = append(order, i)
		}
	}
	slices.SortStableFunc(order, func(a, b int) int { return queueOrder(&pending[a], &pending[b]) })
	limit := s.limit()
	run := aggregate(q, running, len(order), limit)
	c := choose(q, pending, order, max(limit-len(run), (limit+1)/2))
	res.Places, res.Queued = c.places, c.queued
	for _, i := range order {
		if c.rank[i] > c.places[pending[i].Queue] {
			res.Decisions[i].Why, res.Decisions[i].Rank = Outside, c.rank[i]
		}
	}
	order = c.in
	qc := q.Clone() // the starts and preemptions are charged to it
	if len(order) > 0 {
		p, err := s.problem(now, q, run, pending, order, viable)
		if err != nil {
			return nil, err
		}
		pol := s.Policy
		if pol == nil {
			pol = &allocation.MaxMinFairness{}
		}
		a, err := pol.Allocate(ctx, p)
		if err != nil {
			return nil, fmt.Errorf("flavor: policy: %w", err)
		}
		if len(a.X) != len(p.Jobs) {
			return nil, fmt.Errorf("flavor: the policy allocated %d jobs of %d", len(a.X), len(p.Jobs))
		}
		res.Allocation, res.Considered = a, len(p.Jobs)
		x := a.X[len(run):] // the pending workloads', in order
		due := s.due(q, run, pending, order, a.X)
		s.assign(now, qc, pending, order, x, viable, due, res)
	}
	s.preempt(qc, running, pending, order, viable, res)
	return res, nil
}

// due is, by queue, the GPUs the policy gives the queue's pending
// workloads, less what its running workloads hold beyond their own
// shares: how many GPUs the queue is due now. x holds the problem's
// shares: run's, then those of order's workloads. GPUs of every type
// count alike here; the policy's shares choose the types.
func (s *Steerer) due(q *Quotas, run, pending []Workload, order []int, x [][]float64) []float64 {
	due := make([]float64, len(q.queues))
	for j := range run {
		w := &run[j]
		k := q.queues[w.Queue].Flavors[w.Flavor].Type
		due[w.Queue] += float64(w.GPUs) * (x[j][k] - 1)
	}
	for n, i := range order {
		w := &pending[i]
		for _, v := range x[len(run)+n] {
			due[w.Queue] += float64(w.GPUs) * v
		}
	}
	return due
}

// check validates the workloads.
func (s *Steerer) check(q *Quotas, running, pending []Workload) error {
	ids := make(map[int]bool, len(running)+len(pending))
	for li, list := range [2][]Workload{running, pending} {
		for _, w := range list {
			bad := func(format string, args ...any) error {
				return fmt.Errorf("%w: workload %d: %s", ErrInvalid, w.ID, fmt.Sprintf(format, args...))
			}
			switch {
			case ids[w.ID]:
				return bad("given twice")
			case w.Queue < 0 || w.Queue >= len(q.queues):
				return bad("queue %d of %d", w.Queue, len(q.queues))
			case w.GPUs < 1 || w.GPUs > MaxQuota:
				return bad("%d GPUs (want 1 to %d)", w.GPUs, MaxQuota)
			case len(w.Rates) != len(s.Types):
				return bad("%d rates for %d types", len(w.Rates), len(s.Types))
			case li == 0 && (w.Flavor < 0 || w.Flavor >= len(q.queues[w.Queue].Flavors)):
				return bad("runs on flavor %d of ClusterQueue %q", w.Flavor, q.queues[w.Queue].Name)
			case li == 1 && w.Flavor != -1:
				return bad("pending with flavor %d (want -1)", w.Flavor)
			case !finiteAtLeast0(w.Arrival) || !finiteAtLeast0(w.Remaining) || !(w.Weight >= 0 && w.Weight <= allocation.MaxWeight):
				return bad("arrival %v, remaining %v, weight %v", w.Arrival, w.Remaining, w.Weight)
			}
			for k, r := range w.Rates {
				if !finiteAtLeast0(r) {
					return bad("rate %v on type %d", r, k)
				}
			}
			ids[w.ID] = true
		}
	}
	return nil
}

func finiteAtLeast0(v float64) bool { return v >= 0 && !math.IsInf(v, 0) }

// problem builds the policy's problem: running workloads first (pinned to
// their type), then the pending ones of order.
func (s *Steerer) problem(now float64, q *Quotas, running, pending []Workload, order []int, viable [][]bool) (*allocation.Problem, error) {
	nt := len(s.Types)
	p := &allocation.Problem{Types: s.Types, Capacity: make([]int, nt), Now: now,
		EntityWeights: map[string]float64{}, EntityQuotas: map[string]allocation.Quota{}}
	// What each queue's workloads could use of each type: the running
	// ones where they run, the pending ones on every type they may run on.
	demand := make([][]int, len(q.queues))
	for i := range demand {
		demand[i] = make([]int, nt)
	}
	for i := range running {
		w := &running[i]
		k := q.queues[w.Queue].Flavors[w.Flavor].Type
		demand[w.Queue][k] = min(demand[w.Queue][k]+w.GPUs, MaxQuota)
	}
	for _, i := range order {
		w := &pending[i]
		for k := range nt {
			if viable[i][k] {
				demand[w.Queue][k] = min(demand[w.Queue][k]+w.GPUs, MaxQuota)
			}
		}
	}
	nominal := make([]int, nt)
	for i := range q.queues {
		qu := &q.queues[i]
		p.EntityWeights[qu.Name] = qu.weight()
		quota := allocation.Quota{GuaranteedGPUs: map[topology.GPUType]float64{}, MaxGPUs: map[topology.GPUType]float64{}}
		potential := make([]int, nt)
		for f, fl := range qu.Flavors {
			nominal[fl.Type] += fl.Nominal
			potential[fl.Type] = min(potential[fl.Type]+q.Potential(i, f), MaxQuota)
			t := s.Types[fl.Type]
			quota.GuaranteedGPUs[t] += float64(fl.Nominal)
			quota.MaxGPUs[t] += float64(q.Potential(i, f))
		}
		// A queue adds to a type's capacity what its workloads could use
		// of it: an idle ClusterQueue's quota is no capacity for the
		// others (without a cohort they cannot have it; in one, Potential
		// counts what they may borrow).
		for k := range nt {
			p.Capacity[k] += min(potential[k], demand[i][k])
		}
		p.EntityQuotas[qu.Name] = quota
	}
	for k := range p.Capacity {
		p.Capacity[k] = min(p.Capacity[k], nominal[k], allocation.MaxCapacity)
	}
	// Quotas over several queues can promise a type more than once in a
	// cohort: the guarantee never exceeds the type's capacity, nor the
	// limit the capacity.
	for name, quota := range p.EntityQuotas {
		for k, t := range s.Types {
			c := float64(p.Capacity[k])
			quota.GuaranteedGPUs[t] = min(quota.GuaranteedGPUs[t], c)
			quota.MaxGPUs[t] = max(min(quota.MaxGPUs[t], c), quota.GuaranteedGPUs[t])
		}
		p.EntityQuotas[name] = quota
	}
	job := func(w *Workload, id int, rates []float64) allocation.Job {
		best := slices.Max(rates)
		rem := w.Remaining
		if rem <= 0 {
			rem = s.duration() * max(best, allocation.MinRate)
		}
		return allocation.Job{ID: id, Weight: w.Weight, ScaleFactor: w.GPUs, RemainingSteps: min(rem, allocation.MaxSteps),
			Throughput: rates, Arrival: w.Arrival, Entity: q.queues[w.Queue].Name}
	}
	for i := range running {
		w := &running[i]
		rates := make([]float64, nt)
		k := q.queues[w.Queue].Flavors[w.Flavor].Type
		// The policy sees it only where it runs: Kueue does not move an
		// admitted workload.
		rates[k] = clampRate(w.Rates[k])
		p.Jobs = append(p.Jobs, job(w, len(p.Jobs), rates))
	}
	for _, i := range order {
		w := &pending[i]
		rates := make([]float64, nt)
		for k := range rates {
			if viable[i][k] {
				rates[k] = clampRate(w.Rates[k])
			}
		}
		p.Jobs = append(p.Jobs, job(w, len(p.Jobs), rates))
	}
	if err := p.Validate(); err != nil {
		return nil, fmt.Errorf("flavor: the policy's problem: %w", err)
	}
	return p, nil
}

// clampRate keeps a positive rate within the policies' range.
func clampRate(r float64) float64 {
	if r <= 0 {
		return 0
	}
	return min(max(r, allocation.MinRate), allocation.MaxRate)
}

// assign starts pending workloads by their shares, and steers the others
// to their best type. x holds the shares of the workloads of order, in
// that order; q is a copy the starts are charged to; due is what each
// queue is due (Steerer.due), charged as they start.
//
// The starts go in two passes over the pairs (workload, type) the policy
// gives a share, in order of priority and share (the largest first:
// Gavel's round mechanism, for jobs that never ran), then age. The first
// starts a workload only while its queue is due at least its GPUs: each
// queue gets what the policy gave it, whatever the number of its
// workloads (per-queue policies give a queue of many small workloads
// small shares each, which would otherwise all rank last, or, with
// per-job policies, first). The second fills what is left (the policy's
// rounding, quota the shares did not use), always next for the queue that
// is due the most (the largest remainder), so that the remainders too
// follow the policy's split. Within a queue both go in pair order, so one
// queue's starts are those of the pair order alone.
func (s *Steerer) assign(now float64, q *Quotas, pending []Workload, order []int, x [][]float64, viable [][]bool, due []float64, res *Result) {
	pairs := s.pairs(pending, order, x, viable)
	st := &starts{s: s, now: now, q: q, pending: pending, order: order, viable: viable, x: x, res: res,
		started: make([]bool, len(order)), held: make([]int, len(order)), until: make([]float64, len(order))}
	for n := range st.held {
		st.held[n] = -1
	}
	for _, pr := range pairs {
		w := &pending[order[pr.n]]
		if !st.started[pr.n] && due[w.Queue] >= float64(w.GPUs)-dueSlack && st.try(pr) {
			due[w.Queue] -= float64(w.GPUs)
		}
	}
	st.fill(pairs, due)
	st.wait()
}

// dueSlack: what a queue may lack of a workload's GPUs and still be due
// them (LP solutions carry round-off).
const dueSlack = 1e-3

// pair is a workload (its index in order) and a type it has a share of.
type pair struct {
	n, k  int
	share float64
}

// pairs lists the (workload, type) pairs with a share, in order of
// priority, share (to three digits: LP solutions that tie up to
// round-off fall to the next keys, not to noise), age, ID, rate and type.
func (s *Steerer) pairs(pending []Workload, order []int, x [][]float64, viable [][]bool) []pair {
	var pairs []pair
	for n, i := range order {
		for k, v := range x[n] {
			if v > shareEpsilon && viable[i][k] {
				pairs = append(pairs, pair{n, k, v})
			}
		}
	}
	slices.SortStableFunc(pairs, func(a, b pair) int {
		wa, wb := &pending[order[a.n]], &pending[order[b.n]]
		return cmp.Or(cmp.Compare(wb.Priority, wa.Priority), cmp.Compare(level(b.share), level(a.share)),
			cmp.Compare(wa.Arrival, wb.Arrival), cmp.Compare(wa.ID, wb.ID),
			cmp.Compare(wb.Rates[b.k], wa.Rates[a.k]), cmp.Compare(a.k, b.k))
	})
	return pairs
}

// level rounds a share or a GPU count to three digits, for comparisons
// that LP round-off must not decide.
func level(v float64) float64 { return math.Round(v * 1000) }

// starts is assign's state.
type starts struct {
	s       *Steerer
	now     float64
	q       *Quotas
	pending []Workload
	order   []int
	viable  [][]bool
	x       [][]float64
	res     *Result
	started []bool
	// held[n] is the slower type with room workload order[n] was held
	// from (-1: none), until when.
	held  []int
	until []float64
}

// try starts a pair's workload on its type if a flavor of it has room
// in its queue and the wait rule allows; it reports whether it did.
func (st *starts) try(pr pair) bool {
	i := st.order[pr.n]
	w := &st.pending[i]
	k := pr.k
	f := st.q.Walk(w.Queue, w.GPUs, func(t int) bool { return t == k })
	if f < 0 {
		return false
	}
	if from, ok := st.s.patient(st.now, w, st.viable[i], k); !ok {
		// Held from the slower type whose wait ends first (the fastest
		// of them): it waits for types faster than that.
		if st.held[pr.n] < 0 || from < st.until[pr.n] {
			st.held[pr.n], st.until[pr.n] = k, from
		}
		return false
	}
	_ = st.q.Add(w.Queue, f, w.GPUs) // f is the queue's, GPUs checked
	st.started[pr.n] = true
	st.res.Decisions[i] = Decision{ID: w.ID, Flavor: f, Type: k, Why: Start, Share: pr.share, Best: slices.Max(st.x[pr.n])}
	return true
}

// fill is assign's second pass: the pairs not started, grouped by queue,
// each next start for the queue due the most (then the one whose first
// pair comes first).
func (st *starts) fill(pairs []pair, due []float64) {
	at := map[int]int{}
	h := &groupHeap{due: due}
	for p, pr := range pairs {
		if st.started[pr.n] {
			continue
		}
		e := st.pending[st.order[pr.n]].Queue
		g, ok := at[e]
		if !ok {
			g = len(h.groups)
			at[e] = g
			h.groups = append(h.groups, group{queue: e, first: p})
		}
		h.groups[g].pairs = append(h.groups[g].pairs, p)
	}
	heap.Init(h)
	for h.Len() > 0 {
		g := &h.groups[0]
		started := false
		for len(g.pairs) > 0 && !started {
			pr := pairs[g.pairs[0]]
			g.pairs = g.pairs[1:]
			if !st.started[pr.n] && st.try(pr) {
				started = true
				due[g.queue] -= float64(st.pending[st.order[pr.n]].GPUs)
			}
		}
		if len(g.pairs) == 0 {
			heap.Pop(h)
			continue
		}
		g.first = g.pairs[0]
		heap.Fix(h, 0)
	}
}

// group is the pairs of one queue, in pair order.
type group struct {
	queue, first int
	pairs        []int
}

// groupHeap orders groups by what their queue is due (the most first),
// then by their first pair.
type groupHeap struct {
	due    []float64
	groups []group
}

func (h *groupHeap) Len() int { return len(h.groups) }
func (h *groupHeap) Less(a, b int) bool {
	x, y := &h.groups[a], &h.groups[b]
	return cmp.Or(cmp.Compare(level(h.due[y.queue]), level(h.due[x.queue])), cmp.Compare(x.first, y.first)) < 0
}
func (h *groupHeap) Swap(a, b int) { h.groups[a], h.groups[b] = h.groups[b], h.groups[a] }
func (h *groupHeap) Push(x any)    { h.groups = append(h.groups, x.(group)) }
func (h *groupHeap) Pop() any {
	g := h.groups[len(h.groups)-1]
	h.groups = h.groups[:len(h.groups)-1]
	return g
}

// wait steers the workloads that did not start to the type of their
// largest share (a held one to a type faster than the one it was held
// from).
func (st *starts) wait() {
	for n, i := range st.order {
		if st.started[n] {
			continue
		}
		w := &st.pending[i]
		x := st.x[n]
		// A held workload waits on a type faster than the one it was held
		// from; the others on any they may run on.
		floor := 0.0
		if st.held[n] >= 0 {
			floor = w.Rates[st.held[n]]
		}
		best, k := 0.0, -1
		for t, v := range x {
			if !st.viable[i][t] || w.Rates[t] <= floor {
				continue
			}
			if k < 0 || v > best+shareEpsilon || math.Abs(v-best) <= shareEpsilon && w.Rates[t] > w.Rates[k] {
				best, k = max(v, 0), t
			}
		}
		d := Decision{ID: w.ID, Flavor: st.s.flavorOf(st.q, w, k), Type: k, Why: Busy, Share: best, Best: slices.Max(x)}
		switch {
		case st.held[n] >= 0:
			d.Why, d.HeldFrom, d.Until = Held, st.held[n], st.until[n]
		case best <= shareEpsilon:
			d.Why, d.Best = NoShare, best
		default:
			d.Best = best
		}
		st.res.Decisions[i] = d
	}
}

// duration is Duration, or an hour.
func (s *Steerer) duration() float64 {
	if s.Duration > 0 {
		return s.Duration
	}
	return 3600
}

// patient applies the wait rule (Patience) to starting w on type k now: ok
// if it may start there, else the time from which it may.
func (s *Steerer) patient(now float64, w *Workload, viable []bool, k int) (from float64, ok bool) {
	if s.Patience <= 0 {
		return 0, true
	}
	fast := 0.0 // its fastest rate on a type it may run on
	for t, r := range w.Rates {
		if viable[t] {
			fast = max(fast, r)
		}
	}
	slow := w.Rates[k]
	if slow >= fast {
		return 0, true
	}
	rest := s.duration() // its remaining time on its fastest type
	if w.Remaining > 0 {
		rest = min(w.Remaining/fast, allocation.MaxSteps)
	}
	loss := rest * (min(fast/slow, maxSlowdown) - 1)
	from = w.Arrival + s.Patience*loss
	return from, now >= from
}

// flavorOf is the first flavor of type k in the workload's queue that
// could ever hold it.
func (s *Steerer) flavorOf(q *Quotas, w *Workload, k int) int {
	for f, fl := range q.queues[w.Queue].Flavors {
		if fl.Type == k && q.Potential(w.Queue, f) >= w.GPUs {
			return f
		}
	}
	return -1
}
