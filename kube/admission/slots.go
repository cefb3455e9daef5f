package admission

import (
	"cmp"
	"fmt"
	"maps"
	"math"
	"slices"

	"github.com/gpusched/gpusched/kube/tenancy"
	corev1 "k8s.io/api/core/v1"
)

// The jobs in the rounds are bounded, by each tenant's maxJobs and by the
// tenancy's (issue #40, item 2): they bound a round's work and the saved
// state. The tenancy's maxJobs L is shared by the tenants, so that one
// tenant's backlog delays only that tenant:
//
//   - Each tenant with work (jobs in the rounds or waiting to enter) has
//     a part of L, water-filled by the tenants' weights over their
//     demands (its jobs, at most its maxJobs): a tenant that needs fewer
//     than its weighted share leaves the rest to the others. Every tenant
//     with work has a part of at least one job.
//   - A tenant's waiting jobs enter the rounds, oldest first (by their
//     arrival: a pod's or Job's creation, a pod group's completion),
//     while its jobs in the rounds are fewer than its part.
//   - Jobs already in the rounds never keep a tenant below its part from
//     entering. When the rounds then hold more than L, the jobs that wait
//     in them (not admitted, not being preempted) of the tenants above
//     their parts leave them, the newest first, from the tenant furthest
//     above its part first, until the rounds hold L: they wait outside
//     again, keeping their place by age. Admitted jobs are never taken out
//     to make room: when the limit is full of others' running jobs, a
//     tenant with none in the rounds still enters its part, and the rounds
//     hold more than L until those jobs end: at most L plus the jobs that
//     run (or are being preempted or requeued), one per GPU at most, plus,
//     with more tenants with work than L, one job per tenant.
//
// A workload that waits outside gets the event GPUSchedWaiting saying
// which bound keeps it out.

// slots are the round's parts of the tenancy's maxJobs.
type slots struct {
	limit int
	// count is each tenant's jobs in the rounds, part its part of limit,
	// total all jobs in the rounds (also those of no tenant: requeued
	// pods' jobs while their pods are away).
	count, part map[string]int
	total       int
	tenants     int // with work
}

// newSlots water-fills the tenancy's maxJobs over the tenants with jobs
// in the rounds (known, present) or waiting to enter (fresh).
func (c *Controller) newSlots(present map[string]*workload, known map[string]bool, fresh []*workload) *slots {
	s := &slots{limit: c.ten.MaxJobs(), count: map[string]int{}, total: len(known)}
	demand := map[string]int{}
	weight := map[string]float64{}
	most := map[string]int{}
	note := func(t *tenancy.TenantInfo) {
		demand[t.Name]++
		weight[t.Name], most[t.Name] = t.Weight, t.MaxJobs
	}
	for k := range known {
		var t *tenancy.TenantInfo
		if w := present[k]; w != nil {
			t = w.place.Tenant
		} else {
			t = c.refusedTenant(k) // a refused job is its tenant's (resize.go)
		}
		if t != nil {
			s.count[t.Name]++
			note(t)
		}
	}
	attributed := 0
	for _, n := range s.count {
		attributed += n
	}
	for _, w := range fresh {
		note(w.place.Tenant)
	}
	for t, d := range demand {
		demand[t] = min(d, most[t])
	}
	s.tenants = len(demand)
	s.part = waterFill(max(s.limit-(s.total-attributed), 0), demand, weight)
	for t, d := range demand {
		s.part[t] = max(s.part[t], min(d, 1))
	}
	return s
}

// room reports whether a tenant may enter one more job.
func (s *slots) room(t *tenancy.TenantInfo) bool {
	return s.count[t.Name] < min(s.part[t.Name], t.MaxJobs)
}

// take counts a job of a tenant that entered the rounds.
func (s *slots) take(t *tenancy.TenantInfo) {
	s.count[t.Name]++
	s.total++
}

// why says which bound keeps a tenant's job outside the rounds (no
// number that changes from round to round: a job that keeps waiting for
// the same reason gets no new event).
func (s *slots) why(t *tenancy.TenantInfo) string {
	if s.count[t.Name] >= t.MaxJobs {
		return fmt.Sprintf("waits outside the rounds: its tenant %s has its maxJobs (%d) in them; its jobs enter oldest first", t.Name, t.MaxJobs)
	}
	return fmt.Sprintf("waits outside the rounds: the tenancy's maxJobs (%d) is shared by the tenants with work, water-filled by their weights, and its tenant %s has its part in them; its jobs enter oldest first as they leave or as other tenants need fewer",
		s.limit, t.Name)
}

// waterFill shares limit over the tenants' demands by their weights
// (positive): each gets at most its demand, and the rest goes to the
// others in proportion to their weights, in whole jobs; the tenants that
// get a job more than their floor are those with the largest fractions
// (ties by name). The parts add up to min(limit, the demands' sum).
func waterFill(limit int, demand map[string]int, weight map[string]float64) map[string]int {
	part := make(map[string]int, len(demand))
	names := slices.Collect(maps.Keys(demand))
	slices.SortFunc(names, func(a, b string) int {
		return cmp.Or(cmp.Compare(float64(demand[a])/weight[a], float64(demand[b])/weight[b]), cmp.Compare(a, b))
	})
	left, wsum := limit, 0.0
	for _, n := range names {
		wsum += weight[n]
	}
	for i, n := range names {
		if left <= 0 {
			break
		}
		if float64(demand[n]) <= float64(left)*weight[n]/wsum {
			part[n] = demand[n]
			left -= demand[n]
			wsum -= weight[n]
			continue
		}
		shareOut(part, names[i:], left, weight, wsum)
		break
	}
	return part
}

// shareOut shares left jobs over the tenants (each of whose demand
// exceeds its share) in proportion to their weights, in whole jobs.
func shareOut(part map[string]int, names []string, left int, weight map[string]float64, wsum float64) {
	type frac struct {
		name string
		f    float64
	}
	fracs := make([]frac, 0, len(names))
	given := 0
	for _, n := range names {
		x := float64(left) * weight[n] / wsum
		fl := math.Floor(x)
		part[n] = int(fl)
		given += int(fl)
		fracs = append(fracs, frac{n, x - fl})
	}
	slices.SortFunc(fracs, func(a, b frac) int { return cmp.Or(cmp.Compare(b.f, a.f), cmp.Compare(a.name, b.name)) })
	for i := 0; given < left && i < len(fracs); i++ {
		part[fracs[i].name]++
		given++
	}
}

// makeRoom takes jobs that wait in the rounds out of them while the
// rounds hold more than the tenancy's maxJobs: those of the tenants above
// their parts, from the one furthest above first, its newest first; it
// never takes one that runs, is being preempted or has pods requeued, nor
// one that ran (its attained time, rounds and remaining work are the
// core's: taken out, it would come back as a new job, a head start).
func (c *Controller) makeRoom(s *slots, present map[string]*workload, known map[string]bool, res *RoundResult) {
	if s.total <= s.limit {
		return
	}
	waiting := map[string][]*workload{}
	for k := range known {
		w := present[k]
		if w == nil || w.place.Tenant == nil || w.admitted != "" || w.preempting || c.state.Admitted[k] != nil || len(c.state.Requeue[k]) > 0 {
			continue
		}
		if st, err := c.sched.Status(k); err != nil || ran(st) {
			continue
		}
		waiting[w.place.Tenant.Name] = append(waiting[w.place.Tenant.Name], w)
	}
	for _, ws := range waiting {
		slices.SortFunc(ws, func(a, b *workload) int { return cmp.Or(cmp.Compare(a.created, b.created), cmp.Compare(a.key, b.key)) })
	}
	for s.total > s.limit {
		t := s.furthestAbove(waiting)
		if t == "" {
			return // the rest run: they stay
		}
		ws := waiting[t]
		w := ws[len(ws)-1]
		waiting[t] = ws[:len(ws)-1]
		if err := c.sched.Remove(w.key); err != nil {
			c.log.Warn("remove", "job", w.key, "err", err)
			waiting[t] = nil
			continue
		}
		delete(known, w.key)
		s.count[t]--
		s.total--
		c.waitOutside(w, present, res, s.why(w.place.Tenant)+" (it left the rounds, where it waited, to make room for a tenant below its part)")
	}
}

// furthestAbove returns the tenant furthest above its part that has jobs
// waiting in the rounds ("" if none).
func (s *slots) furthestAbove(waiting map[string][]*workload) string {
	best, most := "", 0
	for _, t := range slices.Sorted(maps.Keys(waiting)) {
		if over := s.count[t] - s.part[t]; over > most && len(waiting[t]) > 0 {
			best, most = t, over
		}
	}
	return best
}

// waitOutside keeps a workload out of the round, with an event saying why.
func (c *Controller) waitOutside(w *workload, present map[string]*workload, res *RoundResult, why string) {
	delete(present, w.key)
	delete(res.GPUs, w.key)
	res.Waiting = append(res.Waiting, w.key)
	c.scratch.outside = append(c.scratch.outside, w)
	c.tell(w, corev1.EventTypeNormal, ReasonWaiting, why, false)
}
