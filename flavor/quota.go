package flavor

import (
	"errors"
	"fmt"
	"maps"
)

// ErrInvalid: a queue, flavor or workload that cannot be modelled (a
// quota or limit out of range, a type that does not exist, two queues of
// one name, a workload of another queue or on a flavor its queue does
// not have). Test with errors.Is.
var ErrInvalid = errors.New("flavor: invalid input")

// NoLimit marks an absent borrowing or lending limit.
const NoLimit = -1

// Limits on what a model holds.
const (
	// MaxQueues bounds the ClusterQueues of a model, MaxFlavors the
	// flavors of one queue.
	MaxQueues  = 1 << 14
	MaxFlavors = 64
	// MaxQuota bounds a quota or limit, in GPUs.
	MaxQuota = 1 << 30
)

// Fungibility is a ClusterQueue's flavorFungibility.whenCanBorrow: what
// the flavor walk does at a flavor where the workload fits only by
// borrowing from the cohort. A plain value, safe for concurrent use.
type Fungibility int

const (
	// MayStopSearch (Kueue's default) takes that flavor.
	MayStopSearch Fungibility = iota
	// TryNextFlavor goes on to the next flavor, and takes the first one
	// that fits without borrowing, else the first that fits by
	// borrowing.
	TryNextFlavor
)

// Flavor is one flavor of a ClusterQueue's GPU resource group: a GPU
// type and the queue's quota of it, in GPUs. A plain value, safe for
// concurrent reads.
type Flavor struct {
	// Name is the ResourceFlavor's name; quotas of one name pool in a
	// cohort.
	Name string
	// Type is the index of the flavor's GPU type (in the model's types).
	Type int
	// Nominal is the queue's nominal quota, in [0, MaxQuota].
	Nominal int
	// BorrowingLimit is the most the queue may borrow from its cohort
	// beyond Nominal, and LendingLimit the most of Nominal it lends to the
	// cohort; NoLimit for none (borrow or lend all), else in [0, MaxQuota].
	BorrowingLimit, LendingLimit int
}

// Queue is a ClusterQueue: its flavors of GPUs in the order of its
// resource group, its cohort and its fair-sharing weight. A plain value,
// safe for concurrent reads.
type Queue struct {
	Name string
	// Cohort is the cohort's name; "" for none (the queue cannot borrow
	// or lend).
	Cohort string
	// Weight is spec.fairSharing.weight; 0 means 1.
	Weight float64
	// Flavors are the GPU flavors, in the order Kueue tries them.
	Flavors []Flavor
	// WhenCanBorrow is spec.flavorFungibility.whenCanBorrow.
	WhenCanBorrow Fungibility
	// Strict is spec.queueingStrategy StrictFIFO (else BestEffortFIFO).
	Strict bool
	// Preemption is spec.preemption (the zero value, Kueue's default,
	// never preempts), and PreemptStops spec.flavorFungibility's
	// whenCanPreempt MayStopSearch (false: TryNextFlavor, Kueue's
	// default). Only Steerer.Steer reads them (Why Preempt); the
	// simulator's Kueue does not preempt.
	Preemption   Preemption
	PreemptStops bool
}

// weight is the queue's fair-sharing weight.
func (q *Queue) weight() float64 {
	if q.Weight > 0 {
		return q.Weight
	}
	return 1
}

// Quotas is Kueue's quota accounting over ClusterQueues and their
// (flat) cohorts: what each queue uses of each of its flavors, and what is
// left to it (Available) and could ever be (Potential). It is not safe for
// concurrent use; Clone gives an independent copy.
type Quotas struct {
	types  int
	queues []Queue
	index  map[string]int
	usage  [][]int
	// cohorts, by name: members and, by flavor name, the quota members
	// lend and the usage they keep there.
	cohorts map[string]*cohort
}

type cohort struct {
	quota, usage map[string]int
}

// NewQuotas validates the queues (flavor types below types) and returns
// their accounting, with nothing used.
func NewQuotas(queues []Queue, types int) (*Quotas, error) {
	if len(queues) > MaxQueues {
		return nil, fmt.Errorf("%w: %d ClusterQueues (at most %d)", ErrInvalid, len(queues), MaxQueues)
	}
	q := &Quotas{types: types, queues: queues, index: make(map[string]int, len(queues)), usage: make([][]int, len(queues)), cohorts: map[string]*cohort{}}
	for i := range queues {
		qu := &queues[i]
		if _, dup := q.index[qu.Name]; dup {
			return nil, fmt.Errorf("%w: two ClusterQueues named %q", ErrInvalid, qu.Name)
		}
		q.index[qu.Name] = i
		if len(qu.Flavors) > MaxFlavors {
			return nil, fmt.Errorf("%w: ClusterQueue %q: %d flavors (at most %d)", ErrInvalid, qu.Name, len(qu.Flavors), MaxFlavors)
		}
		if !(qu.Weight >= 0) || qu.Weight > 1e9 {
			return nil, fmt.Errorf("%w: ClusterQueue %q: weight %v (want 0 to 1e9)", ErrInvalid, qu.Name, qu.Weight)
		}
		if err := qu.Preemption.check(); err != nil {
			return nil, fmt.Errorf("%w: ClusterQueue %q: preemption: %w", ErrInvalid, qu.Name, err)
		}
		names := map[string]bool{}
		for _, f := range qu.Flavors {
			if err := checkFlavor(f, types); err != nil {
				return nil, fmt.Errorf("%w: ClusterQueue %q: %w", ErrInvalid, qu.Name, err)
			}
			if names[f.Name] {
				return nil, fmt.Errorf("%w: ClusterQueue %q lists flavor %q twice", ErrInvalid, qu.Name, f.Name)
			}
			names[f.Name] = true
		}
		q.usage[i] = make([]int, len(qu.Flavors))
		if qu.Cohort == "" {
			continue
		}
		c := q.cohorts[qu.Cohort]
		if c == nil {
			c = &cohort{quota: map[string]int{}, usage: map[string]int{}}
			q.cohorts[qu.Cohort] = c
		}
		for _, f := range qu.Flavors {
			c.quota[f.Name] += f.Nominal - localQuota(f)
		}
	}
	return q, nil
}

func checkFlavor(f Flavor, types int) error {
	switch {
	case f.Name == "":
		return errors.New("a flavor without a name")
	case f.Type < 0 || f.Type >= types:
		return fmt.Errorf("flavor %q: type %d of %d", f.Name, f.Type, types)
	case f.Nominal < 0 || f.Nominal > MaxQuota:
		return fmt.Errorf("flavor %q: nominal quota %d (want 0 to %d)", f.Name, f.Nominal, MaxQuota)
	case f.BorrowingLimit < NoLimit || f.BorrowingLimit > MaxQuota:
		return fmt.Errorf("flavor %q: borrowing limit %d (want %d for none, or 0 to %d)", f.Name, f.BorrowingLimit, NoLimit, MaxQuota)
	case f.LendingLimit < NoLimit || f.LendingLimit > MaxQuota:
		return fmt.Errorf("flavor %q: lending limit %d (want %d for none, or 0 to %d)", f.Name, f.LendingLimit, NoLimit, MaxQuota)
	}
	return nil
}

// localQuota is the part of a flavor's nominal quota the queue keeps to
// itself: nominal - lendingLimit, with a lending limit (Kueue's
// resourceNode.localQuota).
func localQuota(f Flavor) int {
	if f.LendingLimit == NoLimit {
		return 0
	}
	return max(0, f.Nominal-f.LendingLimit)
}

// Clone returns an independent copy (the queues are shared: they are
// read only).
func (q *Quotas) Clone() *Quotas {
	c := &Quotas{types: q.types, queues: q.queues, index: q.index, usage: make([][]int, len(q.usage)), cohorts: make(map[string]*cohort, len(q.cohorts))}
	for i, u := range q.usage {
		c.usage[i] = append([]int(nil), u...)
	}
	for n, co := range q.cohorts {
		c.cohorts[n] = &cohort{quota: co.quota, usage: maps.Clone(co.usage)}
	}
	return c
}

// Len returns the number of queues.
func (q *Quotas) Len() int { return len(q.queues) }

// Queue returns queue i (read only).
func (q *Quotas) Queue(i int) *Queue { return &q.queues[i] }

// Index returns the index of the queue named name.
func (q *Quotas) Index(name string) (int, bool) {
	i, ok := q.index[name]
	return i, ok
}

// Used returns what queue i uses of its flavor f.
func (q *Quotas) Used(i, f int) int { return q.usage[i][f] }

func (q *Quotas) check(i, f int) error {
	if i < 0 || i >= len(q.queues) {
		return fmt.Errorf("%w: queue %d of %d", ErrInvalid, i, len(q.queues))
	}
	if f < 0 || f >= len(q.queues[i].Flavors) {
		return fmt.Errorf("%w: ClusterQueue %q has no flavor %d", ErrInvalid, q.queues[i].Name, f)
	}
	return nil
}

// Available returns the GPUs of flavor f that queue i can be given now:
// its own unused quota and, in a cohort, what the cohort has unused, up to
// the queue's borrowing limit (Kueue's available). It is negative when
// the queue uses more than it may (quota lowered under admitted
// workloads).
func (q *Quotas) Available(i, f int) int {
	fl := q.queues[i].Flavors[f]
	used := q.usage[i][f]
	co := q.cohorts[q.queues[i].Cohort]
	if co == nil {
		return fl.Nominal - used
	}
	local := localQuota(fl)
	parent := co.quota[fl.Name] - co.usage[fl.Name]
	if fl.BorrowingLimit != NoLimit {
		stored := fl.Nominal - local
		usedInParent := max(0, used-local)
		parent = min(stored-usedInParent+fl.BorrowingLimit, parent)
	}
	return max(0, local-used) + parent
}

// Potential returns the most of flavor f queue i could ever be given,
// with nothing used (Kueue's potentialAvailable).
func (q *Quotas) Potential(i, f int) int {
	fl := q.queues[i].Flavors[f]
	co := q.cohorts[q.queues[i].Cohort]
	if co == nil {
		return fl.Nominal
	}
	p := localQuota(fl) + co.quota[fl.Name]
	if fl.BorrowingLimit != NoLimit {
		p = min(fl.Nominal+fl.BorrowingLimit, p)
	}
	return p
}

// Add charges n GPUs of flavor f to queue i (an admission), the part
// beyond its local quota to its cohort (Kueue's addUsage).
func (q *Quotas) Add(i, f, n int) error {
	if err := q.check(i, f); err != nil {
		return err
	}
	if n < 0 || n > MaxQuota {
		return fmt.Errorf("%w: charging %d GPUs", ErrInvalid, n)
	}
	fl := q.queues[i].Flavors[f]
	before := q.usage[i][f]
	q.usage[i][f] += n
	if co := q.cohorts[q.queues[i].Cohort]; co != nil {
		local := localQuota(fl)
		co.usage[fl.Name] += max(0, q.usage[i][f]-local) - max(0, before-local)
	}
	return nil
}

// Remove gives back n GPUs of flavor f that queue i used (a workload
// finished), at most what it uses.
func (q *Quotas) Remove(i, f, n int) error {
	if err := q.check(i, f); err != nil {
		return err
	}
	if n < 0 || n > q.usage[i][f] {
		return fmt.Errorf("%w: ClusterQueue %q gives back %d GPUs of flavor %q, uses %d", ErrInvalid, q.queues[i].Name, n, q.queues[i].Flavors[f].Name, q.usage[i][f])
	}
	fl := q.queues[i].Flavors[f]
	before := q.usage[i][f]
	q.usage[i][f] -= n
	if co := q.cohorts[q.queues[i].Cohort]; co != nil {
		local := localQuota(fl)
		co.usage[fl.Name] -= max(0, before-local) - max(0, q.usage[i][f]-local)
	}
	return nil
}

// Walk is Kueue's flavor assignment for a pending workload of queue i
// asking for gpus GPUs, without preemption: the flavors in the queue's
// order, skipping those whose type allowed rejects (the workload's node
// selector) and those where it does not fit now; the first that fits,
// unless it needs borrowing and the queue's WhenCanBorrow is
// TryNextFlavor, in which case the first that fits without borrowing, else
// the first that fits by borrowing. It returns the flavor's index, or -1
// when none fits now.
func (q *Quotas) Walk(i, gpus int, allowed func(typ int) bool) int {
	qu := &q.queues[i]
	best := -1
	for f, fl := range qu.Flavors {
		if allowed != nil && !allowed(fl.Type) {
			continue
		}
		if gpus > q.Potential(i, f) || gpus > q.Available(i, f) {
			continue // no fit, or a fit only by preemption: TryNextFlavor
		}
		if q.usage[i][f]+gpus <= fl.Nominal || qu.WhenCanBorrow == MayStopSearch {
			return f
		}
		if best < 0 {
			best = f
		}
	}
	return best
}
