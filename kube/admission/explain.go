package admission

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/gpusched/gpusched/kube/model"
	"github.com/gpusched/gpusched/scheduler"
	"github.com/gpusched/gpusched/topology"
	corev1 "k8s.io/api/core/v1"
)

// roundScratch is what syncJobs leaves for the end of the round: the
// workloads kept out of it.
type roundScratch struct {
	// outside: kept out by their tenant's MaxJobs (or its part of the
	// tenancy's).
	outside []*workload
	// incomplete: pod groups with fewer members than they need.
	incomplete []*workload
	// unrunnable: workloads with a pod larger than every node of their
	// types, and why.
	unrunnable []unrunnableWorkload
}

type unrunnableWorkload struct {
	w   *workload
	msg string
}

// explain tells each workload of the round where it stands (an event
// when that changes, and the pods' condition ConditionAdmitted) and
// returns what the metrics are computed from. The messages name no
// round or time, so that a workload that keeps waiting for the same
// reason gets no new event or condition write.
func (c *Controller) explain(present map[string]*workload, res *RoundResult, st scheduler.RoundStats) *roundView {
	var weights map[string]float64
	if c.ten != nil {
		weights = c.ten.Weights()
	}
	view := &roundView{stats: st, capacity: res.Capacity, weights: weights}
	held := map[string]bool{}
	for _, k := range res.Held {
		held[k] = true
	}
	// GPUs each tenant holds per type, for the quota check.
	tenantUsed := map[string]map[topology.GPUType]int{}
	for _, w := range present {
		if w.admitted != "" && w.place.Tenant != nil {
			if tenantUsed[w.place.Tenant.Name] == nil {
				tenantUsed[w.place.Tenant.Name] = map[topology.GPUType]int{}
			}
			tenantUsed[w.place.Tenant.Name][w.admitted] += w.gpus
		}
	}
	largest := c.largestNodes()
	for _, key := range slices.Sorted(maps.Keys(present)) {
		w := present[key]
		if w.place.Tenant == nil {
			continue // a requeued pod's job while its pod is away
		}
		it := viewItem{tenant: w.place.Tenant.Name, gpus: w.gpus, admitted: w.admitted}
		if w.admitted != "" {
			it.running = c.running(w)
		} else {
			var msg string
			it.reason, msg = c.whyWaits(w, held[key], res, tenantUsed[it.tenant], largest)
			c.tell(w, corev1.EventTypeNormal, it.reason, msg, false)
		}
		view.items = append(view.items, it)
	}
	for _, w := range c.scratch.outside {
		view.items = append(view.items, viewItem{tenant: w.place.Tenant.Name, gpus: w.gpus, reason: ReasonWaiting})
	}
	for _, w := range c.scratch.incomplete {
		if w.place.Tenant == nil {
			continue
		}
		msg := fmt.Sprintf("pod group %s has %d of the %d members it needs: it enters the rounds once all are created", w.name, len(w.pods), w.min)
		c.tell(w, corev1.EventTypeNormal, ReasonGangIncomplete, msg, false)
		view.items = append(view.items, viewItem{tenant: w.place.Tenant.Name, gpus: w.gpus, reason: ReasonGangIncomplete, noDemand: true})
	}
	for _, u := range c.scratch.unrunnable {
		c.tell(u.w, corev1.EventTypeNormal, ReasonUnrunnable, u.msg, false)
		view.items = append(view.items, viewItem{tenant: u.w.place.Tenant.Name, gpus: u.w.gpus, reason: ReasonUnrunnable, noDemand: true})
	}
	c.scratch = roundScratch{}
	return view
}

// unrunnable says why a workload cannot run ("" if it can): one of its
// pods asks for more GPUs than the largest node of every type it may run
// on has.
func (c *Controller) unrunnable(w *workload, spec scheduler.JobSpec, largest map[topology.GPUType]int) string {
	per := 0
	switch w.kind {
	case kindJob:
		per = w.perPod
	default:
		for _, p := range w.pods {
			g, _ := model.PodGPUs(p, c.cfg.Resource)
			per = max(per, g)
		}
	}
	types := spec.Types
	if types == nil {
		types = c.types()
	}
	most := 0
	names := make([]string, len(types))
	for i, t := range types {
		most = max(most, largest[t])
		names[i] = string(t)
	}
	if per <= most {
		return ""
	}
	return fmt.Sprintf("a pod of it asks for %d GPUs; the largest node of the types it may run on (%s) has %d", per, strings.Join(names, ", "), most)
}

// largestNodes gives the most GPUs of one node, per type (ready or not,
// healthy or not: the bound of what a pod of the type can ever get).
func (c *Controller) largestNodes() map[topology.GPUType]int {
	out := map[topology.GPUType]int{}
	for _, n := range c.nodes {
		t := n.typ()
		out[t] = max(out[t], len(n.server.GPUs))
	}
	return out
}

// running reports whether an admitted workload's pods are bound: some of
// a Job's, every live one of a pod or group.
func (c *Controller) running(w *workload) bool {
	if w.kind == kindJob {
		_, ok := c.jobPodTypes[w.job.UID]
		return ok
	}
	live := 0
	for _, p := range w.pods {
		if terminal(p) {
			continue
		}
		if p.Spec.NodeName == "" {
			return false
		}
		live++
	}
	return live > 0
}

// whyWaits says why a workload of the round was not admitted.
func (c *Controller) whyWaits(w *workload, held bool, res *RoundResult, used map[topology.GPUType]int, largest map[topology.GPUType]int) (reason, msg string) {
	if held {
		return ReasonAwaitingGPUs, fmt.Sprintf("the round gave it %s GPUs; it waits for them to be free (preempted pods leaving) or for its preempted pods to come back", res.Assigned[w.key])
	}
	types := c.types()
	single := false
	if st, err := c.sched.Status(w.key); err == nil {
		if st.Spec.Types != nil {
			types = st.Spec.Types
		}
		single = st.Spec.SingleServer
	}
	names := make([]string, len(types))
	most := 0
	for i, t := range types {
		names[i] = string(t)
		if single {
			most = max(most, largest[t])
		} else {
			most = max(most, res.Capacity[t])
		}
	}
	list := strings.Join(names, ", ")
	if list == "" {
		list = "none"
	}
	switch {
	case len(types) == 0 || w.gpus > most:
		where := "of the types it may run on"
		if single {
			where = "on one node of the types it may run on"
		}
		return ReasonUnrunnable, fmt.Sprintf("asks for %d GPUs; the cluster has at most %d healthy GPUs %s (%s)", w.gpus, most, where, list)
	case c.overQuota(w, types, used):
		return ReasonQuota, fmt.Sprintf("its tenant %s's quota (maxGPUs) leaves no room for %d more GPUs on %s", w.place.Tenant.Name, w.gpus, list)
	}
	return ReasonNoCapacity, fmt.Sprintf("the %s policy gave the GPUs of its types (%s) to other jobs this round", policyName(c.cfg.Policy), list)
}

// overQuota reports whether the tenant's maxGPUs keep the workload off
// every type it may run on.
func (c *Controller) overQuota(w *workload, types []topology.GPUType, used map[topology.GPUType]int) bool {
	if c.ten == nil {
		return false
	}
	q, ok := c.ten.Quotas()[w.place.Tenant.Name]
	if !ok || q.MaxGPUs == nil {
		return false
	}
	for _, t := range types {
		limit, capped := q.MaxGPUs[t]
		if !capped || float64(used[t]+w.gpus) <= limit {
			return false
		}
	}
	return len(types) > 0
}

// admittedWhy says why a workload runs on type t: the policy, and the
// job's (normalized) rates on the types it may run on.
func (c *Controller) admittedWhy(w *workload, t topology.GPUType, now float64) string {
	msg := fmt.Sprintf("admitted on %s GPUs (%d) at t=%.0f s: the %s policy's allocation runs it there this round", t, w.gpus, now, policyName(c.cfg.Policy))
	st, err := c.sched.Status(w.key)
	if err != nil || len(st.Spec.Throughput) == 0 {
		return msg
	}
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(st.Spec.Throughput)) {
		parts = append(parts, fmt.Sprintf("%s %.3g", k, st.Spec.Throughput[k]))
	}
	return msg + " (its normalized rates: " + strings.Join(parts, ", ") + ")"
}
