package flavor

import (
	"cmp"
	"context"
	"fmt"
	"slices"

	"github.com/gpusched/gpusched/allocation"
	"github.com/gpusched/gpusched/gang"
	"github.com/gpusched/gpusched/topology"
)

// Kueue is Kueue's own flavor assignment as an event-driven scheduler for
// the simulator (sim.RunEvents): at every event, the pending jobs in
// Kueue's order (older first; the simulator's jobs have no priority), each
// given the flavor Kueue's walk finds in its queue (Quotas.Walk), where
// the queue's quota and the cluster's free GPUs allow; a job that fits
// nowhere waits, without blocking the others unless its queue is
// StrictFIFO. Running jobs are never preempted. A job can run on the
// types where its rate is above 0 (its node selector). A running job
// occupies the first flavor of its type in its queue.
//
// Its fields are read only: a Kueue is safe for concurrent use.
type Kueue struct {
	// Queues are the ClusterQueues (OneQueue for a cluster of one
	// tenant); a flavor's Type indexes the engine's types.
	Queues []Queue
	// QueueOf gives a job's queue index; nil means 0.
	QueueOf func(id int) int
}

// OneQueue is a ClusterQueue named name holding one flavor per type, in
// the order given, each with the capacity of that type as its nominal
// quota: a cluster with a single tenant.
func OneQueue(name string, types []topology.GPUType, capacity []int) Queue {
	q := Queue{Name: name}
	for k, t := range types {
		q.Flavors = append(q.Flavors, Flavor{Name: string(t), Type: k, Nominal: capacity[k], BorrowingLimit: NoLimit, LendingLimit: NoLimit})
	}
	return q
}

// charge builds the quotas for the event's running jobs.
func charge(queues []Queue, queueOf func(int) int, types int, running []gang.JobView) (*Quotas, error) {
	q, err := NewQuotas(queues, types)
	if err != nil {
		return nil, err
	}
	for _, j := range running {
		i, err := queueIndex(q, queueOf, j.ID)
		if err != nil {
			return nil, err
		}
		f := flavorOfType(&q.queues[i], j.Type)
		if f < 0 {
			return nil, fmt.Errorf("%w: job %d runs on type %d, which ClusterQueue %q has no flavor of", ErrInvalid, j.ID, j.Type, q.queues[i].Name)
		}
		if err := q.Add(i, f, j.ScaleFactor); err != nil {
			return nil, err
		}
	}
	return q, nil
}

func queueIndex(q *Quotas, queueOf func(int) int, id int) (int, error) {
	i := 0
	if queueOf != nil {
		i = queueOf(id)
	}
	if i < 0 || i >= q.Len() {
		return 0, fmt.Errorf("%w: job %d in queue %d of %d", ErrInvalid, id, i, q.Len())
	}
	return i, nil
}

func flavorOfType(q *Queue, k int) int {
	for f, fl := range q.Flavors {
		if fl.Type == k {
			return f
		}
	}
	return -1
}

// Decide implements gang.Scheduler.
func (s *Kueue) Decide(_ float64, free []int, waiting, running []gang.JobView) (gang.Decision, error) {
	q, err := charge(s.Queues, s.QueueOf, len(free), running)
	if err != nil {
		return gang.Decision{}, err
	}
	slices.SortStableFunc(waiting, func(a, b gang.JobView) int { return cmp.Or(cmp.Compare(a.Arrival, b.Arrival), cmp.Compare(a.ID, b.ID)) })
	blocked := make([]bool, q.Len())
	var d gang.Decision
	for _, j := range waiting {
		i, err := queueIndex(q, s.QueueOf, j.ID)
		if err != nil {
			return gang.Decision{}, err
		}
		if blocked[i] {
			continue
		}
		if len(j.Throughput) != len(free) {
			return gang.Decision{}, fmt.Errorf("%w: job %d has %d rates for %d types", ErrInvalid, j.ID, len(j.Throughput), len(free))
		}
		f := q.Walk(i, j.ScaleFactor, func(k int) bool { return j.Throughput[k] > 0 && free[k] >= j.ScaleFactor })
		if f < 0 {
			blocked[i] = q.queues[i].Strict
			continue
		}
		k := q.queues[i].Flavors[f].Type
		if err := q.Add(i, f, j.ScaleFactor); err != nil {
			return gang.Decision{}, err
		}
		free[k] -= j.ScaleFactor
		d.Start = append(d.Start, gang.Start{JobID: j.ID, Type: k})
	}
	return d, nil
}

// Steered is Kueue steered by gpusched, as an event-driven scheduler for
// the simulator: at every event a Steerer decides over the running and
// waiting jobs, and the jobs it starts start (where the cluster's free
// GPUs allow: quotas above the cluster's capacity are the admin's
// mistake, not a start). Rates are normalized as the controller's trusted
// rates are (kube/tenancy RateRules.Trusted): each job's rates over its
// fastest type's, at least 1/MaxRatio. It is what kube/kueue does on a
// cluster, with decisions at every event (the controller runs a round at
// each change it watches).
//
// Its fields are read only: a Steered is safe for concurrent use if its
// Policy is.
type Steered struct {
	// Queues and QueueOf are as in Kueue.
	Queues  []Queue
	QueueOf func(id int) int
	// Types are the engine's GPU types (the policy's problem names them).
	Types []topology.GPUType
	// Policy is the allocation policy; nil means Gavel's max-min fairness.
	Policy allocation.Policy
	// MaxRatio bounds the ratio between a job's rates on two types; 0
	// means 10 (kube/tenancy's default).
	MaxRatio float64
	// MaxJobs, Patience and Duration are the Steerer's (Patience: the
	// wait rule for slow types; Duration: the time on its fastest type a
	// job of unknown remaining work is taken to need).
	MaxJobs            int
	Patience, Duration float64
	// KnownRemaining lets the policy and the wait rule see each job's
	// remaining work; false, the default, models kube/kueue, which does
	// not know it (Duration stands in for it).
	KnownRemaining bool
	// Rates, if set, gives the rates the policy sees for a job, by ID,
	// one per type (normalized as the engine's), instead of the engine's:
	// what the controller believes (a tenant's claim, the admin's model)
	// when the simulated jobs run otherwise (the end-to-end test pads
	// them with the control plane's latency).
	Rates func(id int) []float64
}

// Decide implements gang.Scheduler.
func (s *Steered) Decide(now float64, free []int, waiting, running []gang.JobView) (gang.Decision, error) {
	if len(s.Types) != len(free) {
		return gang.Decision{}, fmt.Errorf("%w: %d types for %d free counts", ErrInvalid, len(s.Types), len(free))
	}
	q, err := charge(s.Queues, s.QueueOf, len(free), running)
	if err != nil {
		return gang.Decision{}, err
	}
	ratio := s.MaxRatio
	if ratio < 1 {
		ratio = 10
	}
	conv := func(j gang.JobView, flavor int) (Workload, error) {
		i, err := queueIndex(q, s.QueueOf, j.ID)
		if err != nil {
			return Workload{}, err
		}
		if flavor >= 0 {
			flavor = flavorOfType(&q.queues[i], j.Type)
		}
		rates := j.Throughput
		if s.Rates != nil {
			if rates = s.Rates(j.ID); len(rates) != len(j.Throughput) {
				return Workload{}, fmt.Errorf("%w: job %d: %d rates for %d types", ErrInvalid, j.ID, len(rates), len(j.Throughput))
			}
		}
		// The rates are normalized (the fastest is 1): the remaining work
		// in those units is the time left on the fastest type.
		remaining := 0.0
		if s.KnownRemaining && len(j.Throughput) > 0 {
			if fast := slices.Max(j.Throughput); fast > 0 {
				remaining = j.Remaining / fast
			}
		}
		return Workload{ID: j.ID, Queue: i, GPUs: j.ScaleFactor, Rates: Normalize(rates, ratio), Arrival: j.Arrival,
			Remaining: remaining, Weight: j.Weight, Flavor: flavor}, nil
	}
	run := make([]Workload, 0, len(running))
	for _, j := range running {
		w, err := conv(j, 0)
		if err != nil {
			return gang.Decision{}, err
		}
		run = append(run, w)
	}
	pend := make([]Workload, 0, len(waiting))
	for _, j := range waiting {
		w, err := conv(j, -1)
		if err != nil {
			return gang.Decision{}, err
		}
		pend = append(pend, w)
	}
	st := Steerer{Types: s.Types, Policy: s.Policy, MaxJobs: s.MaxJobs, Patience: s.Patience, Duration: s.Duration}
	res, err := st.Steer(context.Background(), now, q, run, pend)
	if err != nil {
		return gang.Decision{}, err
	}
	var d gang.Decision
	for i, dec := range res.Decisions {
		if dec.Why == Held && dec.Until > now && (d.Wake == 0 || dec.Until < d.Wake) {
			d.Wake = dec.Until // decide again when its wait is over
		}
		if dec.Why != Start || free[dec.Type] < pend[i].GPUs {
			continue
		}
		free[dec.Type] -= pend[i].GPUs
		d.Start = append(d.Start, gang.Start{JobID: dec.ID, Type: dec.Type})
	}
	return d, nil
}

// Normalize returns rates over their largest, each at least 1/maxRatio
// (rates of 0 stay 0: the job cannot run there); all 0 stays all 0.
func Normalize(rates []float64, maxRatio float64) []float64 {
	out := make([]float64, len(rates))
	best := 0.0
	for _, r := range rates {
		best = max(best, r)
	}
	if best <= 0 {
		return out
	}
	for k, r := range rates {
		if r > 0 {
			out[k] = max(r/best, 1/maxRatio)
		}
	}
	return out
}
