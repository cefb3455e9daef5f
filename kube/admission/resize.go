package admission

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/gpusched/gpusched/kube/tenancy"
	"github.com/gpusched/gpusched/scheduler"
	"github.com/gpusched/gpusched/topology"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
)

// What a workload asks for is read again at every round (issue #40,
// item 4): a tenant may change it after the workload entered the rounds,
// by a Job's spec.parallelism (or completions, where that is the fewer),
// its template's resources while it is suspended, a pod group's members
// (one deleted and a larger one created in its place) or a bare pod
// created again under its name. The core's spec of a job is what it was
// charged for; a workload whose GPUs (or whether it fits one node) differ
// from it is re-admitted at its new size against its share:
//
//   - if it runs with more GPUs than it was admitted for, it is preempted
//     first (a Job suspended, pods deleted after the grace and created
//     again, gated), with an event that names the change;
//   - its spec is updated in the core (scheduler.Update, its place and
//     remaining work kept), so that its real GPUs are what it is charged,
//     and it is admitted again when the policy gives it GPUs at that size;
//     a Normal event GPUSchedResized says so;
//   - if it can no longer run (a pod larger than every node of its types)
//     or its spec no longer reads, it leaves the rounds with the event of
//     that (GPUSchedUnrunnable, GPUSchedMalformed): refused. A job that
//     never ran leaves the core; one that ran stays in it, held there
//     unrunnable (refuse), so that it comes back when its workload can
//     run again with what it ran (its attained time and rounds), its
//     arrival and its remaining work. Taken out of the core, it came back
//     as a new job, with none of it: a head start (issue #40 review). So
//     does a job whose workload no longer reads at all (ErrMalformed, a
//     Job's parallelism set to 0, say), and only a job that never ran
//     leaves the rounds to make room for other tenants' (slots.go).
//
// A Job's update is also seen by Sweep (the watch hints it), which
// preempts an admitted Job that grew at once, rather than at the next
// round; the next round updates its spec.

// syncDemand re-reads the demand of the workloads in the rounds (known,
// present), as above: it preempts those that grew while admitted, updates
// the core's specs, and takes out of the rounds (present, known, res.GPUs)
// those refused.
func (c *Controller) syncDemand(ctx context.Context, present map[string]*workload, known map[string]bool, env *specEnv, res *RoundResult) {
	var changed []*workload
	old := map[string]int{}
	var grown []*pendingPreempt
	for _, k := range slices.Sorted(maps.Keys(known)) {
		w := present[k]
		if w == nil || w.place.Tenant == nil || w.preempting || len(c.state.Requeue[k]) > 0 {
			continue // a requeued pod's job, or one in its preemption's grace
		}
		st, err := c.sched.Status(k)
		if err != nil || st.Spec.GPUs == w.gpus && st.Spec.SingleServer == w.singleServer() && !refusedSpec(st.Spec) {
			continue // a refused job is looked at again every round
		}
		changed = append(changed, w)
		old[k] = st.Spec.GPUs
		if w.admitted != "" && w.gpus > st.Spec.GPUs {
			grown = append(grown, &pendingPreempt{key: k, w: w, reason: grewReason(w, st.Spec.GPUs)})
		}
	}
	c.preemptGrown(ctx, grown)
	largest := c.largestNodes()
	updated := false
	for _, w := range changed {
		if w.admitted != "" && w.gpus > old[w.key] {
			continue // its preemption failed: the next round tries again
		}
		if c.resized(w, old[w.key], env, largest, present, known, res) {
			updated = true
		}
	}
	if updated {
		// The policy's allocation was solved for the old sizes: a job's
		// share is a fraction of time at its size, which the round
		// mechanism keeps until the jobs present change. The policy
		// solves again at this round (at most once a round, however many
		// workloads changed).
		c.sched.ForceReset()
	}
}

// resized updates the core's spec of a workload whose demand changed
// from was GPUs (it reports whether it did), or refuses it (it leaves
// the rounds).
func (c *Controller) resized(w *workload, was int, env *specEnv, largest map[topology.GPUType]int, present map[string]*workload, known map[string]bool, res *RoundResult) bool {
	leave := func() {
		if !c.refuse(w.key) {
			delete(known, w.key)
		}
		delete(present, w.key)
		delete(res.GPUs, w.key)
	}
	spec, _, err := w.spec(env)
	if err != nil && w.admitted == "" {
		leave()
		c.tell(w, corev1.EventTypeWarning, ReasonMalformed, err.Error(), false)
		res.Skipped = append(res.Skipped, w.key)
		return false
	}
	if msg := c.unrunnable(w, spec, largest); err == nil && msg != "" && w.admitted == "" {
		leave()
		res.Unrunnable = append(res.Unrunnable, w.key)
		c.scratch.unrunnable = append(c.scratch.unrunnable, unrunnableWorkload{w, msg})
		return false
	}
	back := false
	if err == nil {
		if st, serr := c.sched.Status(w.key); serr == nil {
			spec.RemainingSteps = st.Spec.RemainingSteps
			back = refusedSpec(st.Spec)
		}
		err = c.sched.Update(w.key, spec)
	}
	if err != nil {
		c.log.Warn("update spec", "job", w.key, "err", err)
		return false
	}
	msg := fmt.Sprintf("%s: it is re-admitted at its new size against its tenant's share", changeOf(w, was))
	if back {
		msg = fmt.Sprintf("%s: it can run again, and is back in the rounds with the time it ran and its remaining work", changeOf(w, was))
	}
	c.event(w, corev1.EventTypeNormal, ReasonResized, msg)
	return true
}

// refusedType is the one type the core's spec of a refused job that ran
// allows (refuse): no node has it (a type read from a node's product
// label never holds '_'), so the core holds the job Unrunnable
// (scheduler.ReasonNoType), out of its rounds, until its spec is
// updated.
const refusedType topology.GPUType = "gpusched_refused"

// refusedSpec reports whether a core's spec is that of a refused job.
func refusedSpec(spec scheduler.JobSpec) bool {
	return len(spec.Types) == 1 && spec.Types[0] == refusedType
}

// ran reports whether a core's job ran: in a round, or charged time.
func ran(st scheduler.JobStatus) bool { return st.Rounds > 0 || len(st.Attained) > 0 }

// refuse takes a job whose workload cannot run out of the rounds: one
// that never ran leaves the core (scheduler.Remove); one that ran stays
// in it, refused (its spec's types refusedType alone), with its state. It
// reports whether the job stays in the core.
func (c *Controller) refuse(key string) bool {
	st, err := c.sched.Status(key)
	if err == nil && ran(st) {
		if refusedSpec(st.Spec) {
			return true
		}
		spec := st.Spec
		spec.Types = []topology.GPUType{refusedType}
		if err = c.sched.Update(key, spec); err == nil {
			return true
		}
		c.log.Warn("refuse", "job", key, "err", err)
	}
	if err := c.sched.Remove(key); err != nil {
		c.log.Warn("remove", "job", key, "err", err)
	}
	return false
}

// refusedTenant returns the tenant of a job held refused (nil for any
// other): that of its workload's namespace.
func (c *Controller) refusedTenant(key string) *tenancy.TenantInfo {
	st, err := c.sched.Status(key)
	if err != nil || !refusedSpec(st.Spec) {
		return nil
	}
	_, rest, _ := strings.Cut(key, "/")
	ns, _, _ := strings.Cut(rest, "/")
	pl, err := c.ten.Resolve(ns, nil)
	if err != nil {
		return nil
	}
	return pl.Tenant
}

// preemptGrown preempts the workloads that run with more GPUs than they
// were admitted for (their writes at once, their records in order); it
// reports whether any was.
func (c *Controller) preemptGrown(ctx context.Context, pps []*pendingPreempt) bool {
	parallel(len(pps), func(i int) { c.preemptWrites(ctx, pps[i]) })
	done := false
	for _, pp := range pps {
		if err := c.preempted(pp); err != nil {
			c.log.Warn("preempt", "job", pp.key, "err", err)
			continue
		}
		pp.w.admitted, done = "", true
	}
	return done
}

// grownHinted returns the preemptions of the admitted Jobs among the
// hinted workloads (Sweep) that now ask for more GPUs than the core's
// spec, which is what they were admitted for.
func (c *Controller) grownHinted(hints map[string]bool) []*pendingPreempt {
	var out []*pendingPreempt
	for _, key := range sortedKeys(hints) {
		rest, isJob := strings.CutPrefix(key, "job/")
		if rec := c.state.Admitted[key]; !isJob || rec == nil || rec.DeleteAfter != "" {
			continue
		}
		ns, name, _ := strings.Cut(rest, "/")
		j, err := c.caches.jobs.Jobs(ns).Get(name)
		if err != nil {
			continue
		}
		ws := collect(nil, c.caches.own.jobs([]*batchv1.Job{j}), c.cfg.Resource, c.ten.Managed, c.state.Admitted, nil)
		if len(ws) != 1 || ws[0].err != nil || ws[0].admitted == "" {
			continue
		}
		w := ws[0]
		if st, err := c.sched.Status(key); err == nil && w.gpus > st.Spec.GPUs {
			out = append(out, &pendingPreempt{key: key, w: w, reason: grewReason(w, st.Spec.GPUs)})
		}
	}
	return out
}

// grewReason is the preemption's reason for a workload that grew from
// was GPUs while admitted.
func grewReason(w *workload, was int) string {
	return changeOf(w, was) + ": it ran with more GPUs than it was admitted for, and is re-admitted at its new size against its tenant's share"
}

// changeOf names a workload's change of demand from was GPUs.
func changeOf(w *workload, was int) string {
	var now string
	switch w.kind {
	case kindJob:
		now = fmt.Sprintf("%d pods of %d GPUs (spec.parallelism %s, spec.completions %s)", jobWidth(w.job), w.perPod,
			orUnset(w.job.Spec.Parallelism), orUnset(w.job.Spec.Completions))
	case kindGroup:
		now = fmt.Sprintf("its %d members' GPUs", len(w.pods))
	default:
		now = "its containers' GPUs"
	}
	return fmt.Sprintf("asks for %d GPUs, %s, where it entered the rounds with %d", w.gpus, now, was)
}

func orUnset(p *int32) string {
	if p == nil {
		return "unset"
	}
	return strconv.Itoa(int(*p))
}

// saveIf saves the state if changed (and the controller keeps one).
func (c *Controller) saveIf(ctx context.Context, changed bool) error {
	if !changed || c.cfg.NoState {
		return nil
	}
	return c.save(ctx)
}
