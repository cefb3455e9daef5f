package flavor

import (
	"cmp"
	"fmt"
	"slices"
)

// PreemptionPolicy is one policy of a ClusterQueue's spec.preemption. A
// plain value, safe for concurrent use.
type PreemptionPolicy int

const (
	// PreemptNever (Kueue's default for every policy): no preemption.
	PreemptNever PreemptionPolicy = iota
	// PreemptLowerPriority: only workloads of lower priority than the
	// pending one.
	PreemptLowerPriority
	// PreemptLowerOrNewerEqualPriority (withinClusterQueue only): also
	// workloads of equal priority created after the pending one.
	PreemptLowerOrNewerEqualPriority
	// PreemptAny (reclaimWithinCohort only): any workload, whatever its
	// priority.
	PreemptAny
)

func (p PreemptionPolicy) String() string {
	switch p {
	case PreemptNever:
		return "Never"
	case PreemptLowerPriority:
		return "LowerPriority"
	case PreemptLowerOrNewerEqualPriority:
		return "LowerOrNewerEqualPriority"
	case PreemptAny:
		return "Any"
	}
	return fmt.Sprintf("PreemptionPolicy(%d)", int(p))
}

// Preemption is a ClusterQueue's spec.preemption, for Kueue's classical
// preemption (kueue.x-k8s.io/v1beta2 ClusterQueuePreemption, v0.17; fair
// sharing's preemption strategies are not modelled). Its zero value is
// Kueue's default: no preemption. A plain value, safe for concurrent
// reads.
type Preemption struct {
	// ReclaimWithinCohort: whether a pending workload that fits in its
	// queue's nominal quota may preempt workloads of other queues of the
	// cohort that use more than their nominal quota (PreemptNever,
	// PreemptLowerPriority or PreemptAny).
	ReclaimWithinCohort PreemptionPolicy
	// WithinClusterQueue: whether it may preempt workloads of its own
	// queue (PreemptNever, PreemptLowerPriority or
	// PreemptLowerOrNewerEqualPriority).
	WithinClusterQueue PreemptionPolicy
	// BorrowWithinCohort is borrowWithinCohort.policy: whether, while it
	// borrows, it may preempt lower-priority workloads of other queues of
	// the cohort (PreemptNever or PreemptLowerPriority; Kueue requires
	// ReclaimWithinCohort other than PreemptNever with it), those of
	// priority at most MaxPriorityThreshold when HasThreshold.
	BorrowWithinCohort   PreemptionPolicy
	MaxPriorityThreshold int
	HasThreshold         bool
}

// check validates the policies' values.
func (p *Preemption) check() error {
	switch {
	case p.ReclaimWithinCohort == PreemptLowerOrNewerEqualPriority || p.ReclaimWithinCohort < PreemptNever || p.ReclaimWithinCohort > PreemptAny:
		return fmt.Errorf("reclaimWithinCohort %v", p.ReclaimWithinCohort)
	case p.WithinClusterQueue < PreemptNever || p.WithinClusterQueue > PreemptLowerOrNewerEqualPriority:
		return fmt.Errorf("withinClusterQueue %v", p.WithinClusterQueue)
	case p.BorrowWithinCohort != PreemptNever && p.BorrowWithinCohort != PreemptLowerPriority:
		return fmt.Errorf("borrowWithinCohort %v", p.BorrowWithinCohort)
	case p.BorrowWithinCohort != PreemptNever && p.ReclaimWithinCohort == PreemptNever:
		return fmt.Errorf("borrowWithinCohort %v with reclaimWithinCohort Never (Kueue refuses it)", p.BorrowWithinCohort)
	}
	return nil
}

// none reports whether the queue never preempts.
func (p *Preemption) none() bool {
	return p.ReclaimWithinCohort == PreemptNever && p.WithinClusterQueue == PreemptNever
}

// Victims is what Kueue would preempt for a pending workload: the IDs of
// the running workloads, in Kueue's order of candidates, and their GPUs
// by Kueue's reason. A plain value, safe for concurrent reads.
type Victims struct {
	IDs []int
	// Reclaimed: GPUs of other queues of the cohort, preempted to give
	// the workload's queue back the nominal quota it lent (Kueue's
	// InCohortReclamation).
	Reclaimed int
	// WhileBorrowing: GPUs of lower-priority workloads of other queues,
	// preempted while the workload borrows (borrowWithinCohort; Kueue's
	// InCohortReclaimWhileBorrowing).
	WhileBorrowing int
	// InQueue: GPUs of lower-priority workloads of its own queue (Kueue's
	// InClusterQueue).
	InQueue int
	// Borrowing: the workload borrows from the cohort once admitted.
	Borrowing bool
}

// preempt gives Why Preempt to the pending workloads that did not start
// and that Kueue would admit now by preempting running ones, as Kueue's
// scheduler would find them (its flavor assigner's preemption oracle and
// classical preemption, pkg/scheduler/preemption in Kueue v0.17): in
// Kueue's order (priority, then age), each walks its queue's flavors on
// the types it may run on; a flavor with room means Kueue admits it
// there without preemption (the policy decides when); otherwise the
// flavors where a set of victims makes room are candidates (with
// whenCanPreempt TryNextFlavor, Kueue's default, the walk goes on, and
// the best is the one that leaves the workload not borrowing, then the
// one that reclaims rather than preempts in its own queue, then the first;
// with MayStopSearch the first). The victims' quota is freed and the
// workload charged on q, so that the next ones see what is left: no more
// workloads are released than the preemptions can admit.
//
// Only the workloads of the policy's problem are walked (in, at most
// MaxJobs): those left Outside wait behind them in their queue's order
// (priority, then age), as Kueue considers only each queue's heads in a
// scheduling cycle. A round's walks are so bounded by MaxJobs, whatever
// the backlog (before, every pending workload was walked:
// O(pending x flavors x running) a round).
func (s *Steerer) preempt(q *Quotas, running, pending []Workload, in []int, viable [][]bool, res *Result) {
	if !slices.ContainsFunc(q.queues, func(qu Queue) bool { return !qu.Preemption.none() }) {
		return
	}
	p := newPreemptions(q, running)
	order := make([]int, 0, len(in))
	for _, i := range in {
		if why := res.Decisions[i].Why; why != Start && why != NoFlavor && !q.queues[pending[i].Queue].Preemption.none() {
			order = append(order, i)
		}
	}
	slices.SortFunc(order, func(a, b int) int { return queueOrder(&pending[a], &pending[b]) })
	for _, i := range order {
		w := &pending[i]
		f, v, ok := p.walk(w, viable[i])
		if !ok {
			continue
		}
		for _, id := range v.IDs {
			r := p.byID[id]
			p.gone[r] = true
			_ = q.Remove(running[r].Queue, running[r].Flavor, running[r].GPUs)
		}
		_ = q.Add(w.Queue, f, w.GPUs)
		d := &res.Decisions[i]
		*d = Decision{ID: w.ID, Flavor: f, Type: q.queues[w.Queue].Flavors[f].Type, Why: Preempt, Share: d.Share, Best: d.Best, Victims: v}
	}
}

// preemptions is preempt's state: the running workloads by queue, and
// those already taken as victims.
type preemptions struct {
	q       *Quotas
	running []Workload
	byQueue [][]int
	byID    map[int]int
	gone    []bool
	cohorts map[string][]int
}

func newPreemptions(q *Quotas, running []Workload) *preemptions {
	p := &preemptions{q: q, running: running, byQueue: make([][]int, len(q.queues)), byID: make(map[int]int, len(running)),
		gone: make([]bool, len(running)), cohorts: map[string][]int{}}
	for r := range running {
		p.byQueue[running[r].Queue] = append(p.byQueue[running[r].Queue], r)
		p.byID[running[r].ID] = r
	}
	for e := range q.queues {
		if c := q.queues[e].Cohort; c != "" {
			p.cohorts[c] = append(p.cohorts[c], e)
		}
	}
	return p
}

// walk is Kueue's flavor walk for w with preemption: the flavor and the
// victims, ok false when a flavor has room (Kueue admits without
// preemption) or no preemption makes room.
func (p *preemptions) walk(w *Workload, viable []bool) (int, Victims, bool) {
	qu := &p.q.queues[w.Queue]
	best, bestV := -1, Victims{}
	for f, fl := range qu.Flavors {
		if !viable[fl.Type] || p.q.Potential(w.Queue, f) < w.GPUs {
			continue
		}
		if w.GPUs <= p.q.Available(w.Queue, f) {
			return -1, Victims{}, false // it fits: no preemption
		}
		// Kueue's fitsResourceQuota simulates preemption only for a
		// request within the nominal quota, or with borrowWithinCohort.
		if w.GPUs > fl.Nominal && qu.Preemption.BorrowWithinCohort == PreemptNever {
			continue
		}
		v, ok := p.targets(w, f)
		if !ok {
			continue
		}
		if qu.PreemptStops {
			return f, v, true
		}
		if best < 0 || preferred(v, bestV) {
			best, bestV = f, v
		}
	}
	return best, bestV, best >= 0
}

// preferred is Kueue's BorrowingOverPreemption preference between two
// flavors that admit by preemption: not borrowing first, then reclaim
// (no victim of the workload's own queue) over preemption.
func preferred(a, b Victims) bool {
	if a.Borrowing != b.Borrowing {
		return !a.Borrowing
	}
	return a.InQueue == 0 && b.InQueue > 0
}

// Kinds of candidates (Kueue's preemptionVariant).
const (
	inQueue          = iota // WithinCQ
	reclaim                 // HiearchicalReclaim: w fits in its own nominal quota
	reclaimNoBorrow         // ReclaimWithoutBorrowing: only if w then does not borrow
	reclaimWhileBorr        // ReclaimWhileBorrowing: borrowWithinCohort
)

type candidate struct{ r, kind int }

// targets is Kueue's classical preemption (classicalPreemptions, flat
// cohorts) for w on flavor f of its queue: candidates of other queues
// first, then of its own, each lower priority first, then the most
// recent first (Kueue orders by admission time; creation time stands in
// for it here); they are removed in that order until w fits, then those
// not needed are put back. ok is false when no set of candidates makes
// room.
func (p *preemptions) targets(w *Workload, f int) (Victims, bool) {
	cands, fromOthers, hier := p.candidates(w, f)
	pol := &p.q.queues[w.Queue].Preemption
	forbidden := pol.BorrowWithinCohort == PreemptNever
	var attempts []bool // allow borrowing
	switch {
	case !fromOthers || forbidden && !p.underNominal(w.Queue, f):
		attempts = []bool{true}
	case forbidden && !hier:
		attempts = []bool{false, true}
	default:
		attempts = []bool{true, false}
	}
	for _, borrow := range attempts {
		if v, ok := p.attempt(w, f, cands, borrow); ok {
			return v, true
		}
	}
	return Victims{}, false
}

// attempt removes candidates until w fits on f (borrowing or not), puts
// back those not needed, restores the quotas and returns the victims.
func (p *preemptions) attempt(w *Workload, f int, cands []candidate, borrow bool) (Victims, bool) {
	var removed []candidate
	restore := func() {
		for _, c := range removed {
			r := &p.running[c.r]
			_ = p.q.Add(r.Queue, r.Flavor, r.GPUs)
		}
	}
	defer restore()
	for _, c := range cands {
		if !p.valid(w, c, borrow) {
			continue
		}
		r := &p.running[c.r]
		_ = p.q.Remove(r.Queue, r.Flavor, r.GPUs)
		removed = append(removed, c)
		if !p.fits(w, f, borrow) {
			continue
		}
		// Put back, last removed first, those it fits without.
		for n := len(removed) - 2; n >= 0; n-- {
			r := &p.running[removed[n].r]
			_ = p.q.Add(r.Queue, r.Flavor, r.GPUs)
			if p.fits(w, f, borrow) {
				removed = slices.Delete(removed, n, n+1)
			} else {
				_ = p.q.Remove(r.Queue, r.Flavor, r.GPUs)
			}
		}
		v := Victims{Borrowing: p.q.usage[w.Queue][f]+w.GPUs > p.q.queues[w.Queue].Flavors[f].Nominal}
		for _, c := range removed {
			r := &p.running[c.r]
			v.IDs = append(v.IDs, r.ID)
			switch c.kind {
			case inQueue:
				v.InQueue += r.GPUs
			case reclaimWhileBorr:
				v.WhileBorrowing += r.GPUs
			default:
				v.Reclaimed += r.GPUs
			}
		}
		return v, true
	}
	return Victims{}, false
}

// fits is Kueue's workloadFits: w's GPUs within what its queue has
// available on f, and without borrowing unless allowed.
func (p *preemptions) fits(w *Workload, f int, borrow bool) bool {
	if !borrow && p.q.usage[w.Queue][f]+w.GPUs > p.q.queues[w.Queue].Flavors[f].Nominal {
		return false
	}
	return w.GPUs <= p.q.Available(w.Queue, f)
}

// underNominal: the queue uses less than its nominal quota of f.
func (p *preemptions) underNominal(e, f int) bool {
	return p.q.usage[e][f] < p.q.queues[e].Flavors[f].Nominal
}

// valid is Kueue's candidateIsValid: a candidate of another queue only
// while that queue uses more than its nominal quota, and one that may be
// preempted only without borrowing not when borrowing is allowed.
func (p *preemptions) valid(w *Workload, c candidate, borrow bool) bool {
	r := &p.running[c.r]
	if r.Queue == w.Queue {
		return true
	}
	if borrow && c.kind == reclaimNoBorrow {
		return false
	}
	return p.q.usage[r.Queue][r.Flavor] > p.q.queues[r.Queue].Flavors[r.Flavor].Nominal
}

// candidates lists w's candidates on flavor f of its queue in Kueue's
// order (of other queues with a hierarchical advantage, other queues by
// priority, its own queue; each lower priority first, then the most
// recent), whether some are of other queues, and whether some of those
// are hierarchical reclaims.
func (p *preemptions) candidates(w *Workload, f int) (cands []candidate, fromOthers, hier bool) {
	qu := &p.q.queues[w.Queue]
	pol := &qu.Preemption
	name := qu.Flavors[f].Name
	var others, own []candidate
	if qu.Cohort != "" && pol.ReclaimWithinCohort != PreemptNever {
		adv := p.q.usage[w.Queue][f]+w.GPUs <= qu.Flavors[f].Nominal
		for _, e := range p.cohorts[qu.Cohort] {
			fo := slices.IndexFunc(p.q.queues[e].Flavors, func(fl Flavor) bool { return fl.Name == name })
			if e == w.Queue || fo < 0 || p.q.usage[e][fo] <= p.q.queues[e].Flavors[fo].Nominal {
				continue
			}
			for _, r := range p.byQueue[e] {
				c := &p.running[r]
				if p.gone[r] || c.Flavor != fo || !satisfies(pol.ReclaimWithinCohort, w, c) {
					continue
				}
				others = append(others, candidate{r, cohortKind(pol, adv, w, c)})
			}
		}
	}
	if pol.WithinClusterQueue != PreemptNever {
		for _, r := range p.byQueue[w.Queue] {
			c := &p.running[r]
			if !p.gone[r] && c.Flavor == f && satisfies(pol.WithinClusterQueue, w, c) {
				own = append(own, candidate{r, inQueue})
			}
		}
	}
	order := func(a, b candidate) int {
		x, y := &p.running[a.r], &p.running[b.r]
		return cmp.Or(cmp.Compare(x.Priority, y.Priority), cmp.Compare(y.Arrival, x.Arrival), cmp.Compare(x.ID, y.ID))
	}
	slices.SortFunc(others, func(a, b candidate) int {
		return cmp.Or(cmp.Compare(rankKind(a.kind), rankKind(b.kind)), order(a, b))
	})
	slices.SortFunc(own, order)
	hier = slices.ContainsFunc(others, func(c candidate) bool { return c.kind == reclaim })
	return append(others, own...), len(others) > 0, hier
}

// rankKind puts hierarchical reclaims before the other candidates of
// other queues (Kueue lists them first).
func rankKind(kind int) int {
	if kind == reclaim {
		return 0
	}
	return 1
}

// cohortKind classifies a candidate of another queue (Kueue's
// classifyPreemptionVariant): a reclaim when w fits in its own nominal
// quota, else one allowed while borrowing (borrowWithinCohort, a lower
// priority within the threshold), else only if w then does not borrow.
func cohortKind(pol *Preemption, adv bool, w, c *Workload) int {
	switch {
	case adv:
		return reclaim
	case pol.BorrowWithinCohort == PreemptNever || c.Priority >= w.Priority || pol.HasThreshold && c.Priority > pol.MaxPriorityThreshold:
		return reclaimNoBorrow
	}
	return reclaimWhileBorr
}

// satisfies is Kueue's SatisfiesPreemptionPolicy: whether the pending w
// may preempt c under pol (equal priorities compare by creation time;
// Kueue's optional five-minute buffer, SchedulerTimestampPreemptionBuffer,
// is not modelled).
func satisfies(pol PreemptionPolicy, w, c *Workload) bool {
	switch pol {
	case PreemptLowerPriority:
		return c.Priority < w.Priority
	case PreemptLowerOrNewerEqualPriority:
		return c.Priority < w.Priority || c.Priority == w.Priority && w.Arrival < c.Arrival
	case PreemptAny:
		return true
	}
	return false
}
