package flavor

import (
	"cmp"
	"container/heap"
	"slices"

	"github.com/gpusched/gpusched/allocation"
)

// The policy's problem holds at most Steerer.MaxJobs workloads. When the
// running and pending ones are more, the places are shared so that no
// ClusterQueue's backlog, and no number of running workloads, keeps
// another queue's pending workloads out:
//
//   - running workloads stay one problem job each while they fill at most
//     half the places; beyond that they are aggregated, one problem job
//     per ClusterQueue and GPU type with their GPUs summed and their
//     weights added (aggregate). The policy still sees what each queue
//     holds of each type, which is what fairness between queues needs (a
//     running workload never moves, so its own share changes nothing but
//     what is left for the pending ones), and the running part of the
//     problem is bounded by queues x types whatever their number;
//   - at least half the places go to pending workloads, shared among the
//     ClusterQueues that have some by their fair-sharing weights, water
//     filled (choose): every queue first gets one place (queues by the
//     age of their oldest workload), then each next place goes to the
//     queue with the fewest places per weight, and a queue that needs
//     fewer places than its share leaves the rest to the others. Within a
//     queue the places go by priority, then age (its own order), so a
//     workload left out (Outside) waits behind a bounded number of its
//     own queue's workloads only, and moves up as they start: nothing
//     another queue submits can keep it out for good.
//
// A fixed cut over all queues by priority and age (as before) let one
// tenant's old backlog keep every other queue's new workloads out, their
// quota idle, and more running workloads than MaxJobs left no place at
// all.

// limit is MaxJobs, or DefaultMaxJobs.
func (s *Steerer) limit() int {
	if s.MaxJobs > 0 {
		return s.MaxJobs
	}
	return DefaultMaxJobs
}

// queueOrder compares two pending workloads in their queue's order:
// higher priority first, then older, then by ID.
func queueOrder(x, y *Workload) int {
	return cmp.Or(cmp.Compare(y.Priority, x.Priority), cmp.Compare(x.Arrival, y.Arrival), cmp.Compare(x.ID, y.ID))
}

// aggregate returns the running workloads as the problem sees them: one
// each, or, when they would fill more than half of the limit's places
// and the pending ones do not fit beside them, one per ClusterQueue and
// type (GPUs summed, weights added, the oldest arrival, the highest
// priority), in queue then type order.
func aggregate(q *Quotas, running []Workload, pending, limit int) []Workload {
	if len(running)+pending <= limit || len(running) <= limit/2 {
		return running
	}
	type key struct{ queue, typ int }
	at := map[key]int{}
	var out []Workload
	for i := range running {
		w := &running[i]
		k := key{w.Queue, q.queues[w.Queue].Flavors[w.Flavor].Type}
		j, ok := at[k]
		if !ok {
			at[k] = len(out)
			rates := make([]float64, len(w.Rates))
			rates[k.typ] = 1 // pinned: only its type's rate is seen, and only its presence counts
			out = append(out, Workload{ID: len(out), Queue: w.Queue, GPUs: 0, Rates: rates, Priority: w.Priority,
				Arrival: w.Arrival, Flavor: w.Flavor})
			j = len(out) - 1
		}
		a := &out[j]
		a.GPUs = min(a.GPUs+w.GPUs, MaxQuota)
		a.Weight = min(a.Weight+weightOf(w), allocation.MaxWeight)
		a.Priority = max(a.Priority, w.Priority)
		a.Arrival = min(a.Arrival, w.Arrival)
	}
	slices.SortStableFunc(out, func(a, b Workload) int {
		return cmp.Or(cmp.Compare(a.Queue, b.Queue), cmp.Compare(q.queues[a.Queue].Flavors[a.Flavor].Type, q.queues[b.Queue].Flavors[b.Flavor].Type))
	})
	for i := range out {
		out[i].ID = i
	}
	return out
}

// weightOf is a workload's weight within its queue (0 means 1).
func weightOf(w *Workload) float64 {
	if w.Weight > 0 {
		return w.Weight
	}
	return 1
}

// choice is which pending workloads enter the policy's problem.
type choice struct {
	// in lists them (indices of pending), in the order given.
	in []int
	// places and queued, by queue: the places it got, and its pending
	// workloads that some flavor could hold.
	places, queued []int
	// rank, by pending index: its place in its queue's order (1 first; 0
	// for a workload no flavor can hold).
	rank []int
}

// choose shares room places among the queues of the pending workloads of
// order (indices of pending that some flavor can hold), by the queues'
// fair-sharing weights, water filled, each queue's going to its first
// workloads in its own order (see the comment at the top of this file).
// in keeps order's order.
func choose(q *Quotas, pending []Workload, order []int, room int) choice {
	c := choice{places: make([]int, len(q.queues)), queued: make([]int, len(q.queues)), rank: make([]int, len(pending))}
	byQueue := map[int][]int{}
	for _, i := range order {
		byQueue[pending[i].Queue] = append(byQueue[pending[i].Queue], i)
	}
	queues := make([]int, 0, len(byQueue))
	oldest := map[int]float64{}
	for e, l := range byQueue {
		slices.SortFunc(l, func(a, b int) int { return queueOrder(&pending[a], &pending[b]) })
		for r, i := range l {
			c.rank[i] = r + 1
			if a, ok := oldest[e]; !ok || pending[i].Arrival < a {
				oldest[e] = pending[i].Arrival
			}
		}
		c.queued[e] = len(l)
		queues = append(queues, e)
	}
	// Queues by the age of their oldest workload (then index): the order
	// in which they get their first place, and ties after.
	slices.SortFunc(queues, func(a, b int) int { return cmp.Or(cmp.Compare(oldest[a], oldest[b]), cmp.Compare(a, b)) })
	if len(order) <= room {
		copy(c.places, c.queued)
		c.in = order
		return c
	}
	waterFill(q, queues, c.queued, c.places, room)
	for _, i := range order {
		if c.rank[i] <= c.places[pending[i].Queue] {
			c.in = append(c.in, i)
		}
	}
	return c
}

// waterFill gives room places to the queues (in tie order), each at most
// its queued workloads: one each first, then each next place to the queue
// whose next place costs the least per weight ((places+1)/weight, the
// D'Hondt rule: the result is the weighted water level, rounded down,
// with the remainders by the same rule).
func waterFill(q *Quotas, queues, queued, places []int, room int) {
	h := &placeHeap{q: q, places: places}
	for n, e := range queues {
		if room == 0 {
			return
		}
		places[e], room = 1, room-1
		if queued[e] > 1 {
			h.items = append(h.items, placeItem{e, n})
		}
	}
	heap.Init(h)
	for room > 0 && h.Len() > 0 {
		it := h.items[0]
		places[it.queue]++
		room--
		if places[it.queue] < queued[it.queue] {
			heap.Fix(h, 0)
		} else {
			heap.Pop(h)
		}
	}
}

type placeItem struct{ queue, tie int }

// placeHeap orders queues by the cost of their next place.
type placeHeap struct {
	q      *Quotas
	places []int
	items  []placeItem
}

func (h *placeHeap) Len() int { return len(h.items) }
func (h *placeHeap) Less(a, b int) bool {
	x, y := h.items[a], h.items[b]
	cx := float64(h.places[x.queue]+1) / h.q.queues[x.queue].weight()
	cy := float64(h.places[y.queue]+1) / h.q.queues[y.queue].weight()
	return cmp.Or(cmp.Compare(cx, cy), cmp.Compare(x.tie, y.tie)) < 0
}
func (h *placeHeap) Swap(a, b int) { h.items[a], h.items[b] = h.items[b], h.items[a] }
func (h *placeHeap) Push(x any)    { h.items = append(h.items, x.(placeItem)) }
func (h *placeHeap) Pop() any {
	it := h.items[len(h.items)-1]
	h.items = h.items[:len(h.items)-1]
	return it
}
