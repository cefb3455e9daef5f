package admission

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/gpusched/gpusched/cluster"
	"github.com/gpusched/gpusched/kube/model"
	"github.com/gpusched/gpusched/scheduler"
	"github.com/gpusched/gpusched/topology"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Preemption frees GPUs only when the preempted pods are gone, and how
// long a pod takes to go after its deletion is its
// terminationGracePeriodSeconds, which its tenant writes. So the admin
// bounds it (Config.MaxDeletionGrace): a preempted pod is deleted with
// the grace min(its own, the bound); a GPU pod of a managed namespace
// whose deletion was given longer (the job controller deletes a
// suspended Job's pods with their own grace; a tenant may delete its own
// with any) is deleted again with what is left of the bound (the API
// server shortens a pending deletion, and the kubelet its kill); one
// still there shortly past it (a kubelet that does not confirm) is
// force-deleted, grace 0. Until gone, a terminating pod holds its GPUs
// (an admitted workload's, those beyond its lease: beyondLease): the core
// plans each round without them (they are failed in its cluster while
// held: scheduler.FailGPUs), the admissions count them, and a job
// the core gives a turn while its own pods still hold GPUs is held back
// and reported as having run for as long as they hold them. The time a
// preempted job's pods run on after its turn (bounded by Config.Grace and
// MaxDeletionGrace) is charged to it (charge.go).

// DefaultMaxDeletionGrace is Config.MaxDeletionGrace's default: the
// grace Kubernetes gives a pod that names none.
const DefaultMaxDeletionGrace = 30 * time.Second

// forceSlack is how long past its deletion's end a terminating pod is
// left to its kubelet before it is force-deleted.
const forceSlack = 5 * time.Second

// indexTerminating indexes the bound pods that are terminating (a
// deletion timestamp, not ended) under "t".
const indexTerminating = "gpusched.io/terminating"

func podTerminatingIndex(obj any) ([]string, error) {
	if p, ok := obj.(*corev1.Pod); ok && p.DeletionTimestamp != nil && p.Spec.NodeName != "" && !terminal(p) {
		return []string{"t"}, nil
	}
	return nil, nil
}

func (c *Config) maxDeletionGrace() time.Duration {
	if c.MaxDeletionGrace > 0 {
		return c.MaxDeletionGrace
	}
	return DefaultMaxDeletionGrace
}

// deletionGrace is the grace, in seconds, of a preempted pod's deletion:
// Config.PodDeletionGrace, else the pod's own (30 s if it names none),
// at most Config.MaxDeletionGrace.
func (c *Controller) deletionGrace(p *corev1.Pod) int64 {
	g := int64(30)
	switch {
	case c.cfg.PodDeletionGrace != nil:
		g = *c.cfg.PodDeletionGrace
	case p.Spec.TerminationGracePeriodSeconds != nil:
		g = *p.Spec.TerminationGracePeriodSeconds
	}
	return min(max(g, 0), int64(c.cfg.maxDeletionGrace()/time.Second))
}

// terminatingPods returns the cached bound pods that are terminating,
// sorted by namespace and name, the controller's own deletions left out.
func (c *Controller) terminatingPods() []*corev1.Pod {
	objs, err := c.caches.pods.GetIndexer().ByIndex(indexTerminating, "t")
	if err != nil {
		return nil
	}
	out := make([]*corev1.Pod, 0, len(objs))
	for _, o := range objs {
		if p, ok := o.(*corev1.Pod); ok {
			out = append(out, p)
		}
	}
	out = c.caches.own.pods(out, "\x00")
	slices.SortFunc(out, func(a, b *corev1.Pod) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	})
	return out
}

// deletionEnd returns when a terminating pod's deletion must be over:
// when its grace ends, or the admin's bound after it began, whichever is
// first; and whether its grace runs past the bound.
func deletionEnd(p *corev1.Pod, bound time.Duration) (end time.Time, tooLong bool) {
	end = p.DeletionTimestamp.Time
	began := end
	if g := p.DeletionGracePeriodSeconds; g != nil && *g > 0 {
		began = end.Add(-time.Duration(min(*g, int64(1<<32))) * time.Second)
	}
	if limit := began.Add(bound); limit.Before(end) {
		return limit, limit.Add(time.Second).Before(end)
	}
	return end, false
}

// holding is what the terminating pods of a round hold: GPUs by node and
// by type, and, for each workload whose pods hold some, until when.
type holding struct {
	byNode map[string]int
	byType map[topology.GPUType]int
	until  map[string]time.Time
}

// heldGPUs returns what the terminating pods on the controller's ready
// nodes hold (at most their healthy GPUs): those of a workload without a
// lease all their GPUs; those of an admitted workload what they hold
// beyond its lease (beyondLease: its lease's GPUs are in the core's plan
// already). Only the former have an end in h.until: the latter are
// charged beyond their workload's run (charge.go), which they do not hold
// back.
func (c *Controller) heldGPUs(ws []*workload) holding {
	h := holding{byNode: map[string]int{}, byType: map[topology.GPUType]int{}, until: map[string]time.Time{}}
	admitted := admittedObjects(ws)
	leased := map[*workload]bool{}
	now, bound := c.wall(), c.cfg.maxDeletionGrace()
	for _, p := range c.terminatingPods() {
		key, owner := c.podWorkload(p)
		if w := cmp.Or(admitted[p.UID], admitted[owner]); w != nil && w.ns == p.Namespace {
			leased[w] = true
			continue
		}
		n, ok := c.nodes[p.Spec.NodeName]
		if !ok || !n.ready {
			continue
		}
		g, err := model.PodGPUs(p, c.cfg.Resource)
		if err != nil || g <= 0 {
			continue
		}
		h.add(p.Spec.NodeName, n, g)
		end, _ := deletionEnd(p, bound)
		until := end.Add(forceSlack)
		if !now.Before(until) {
			until = now.Add(24 * time.Hour) // past its force: no end in sight
		}
		if until.After(h.until[key]) {
			h.until[key] = until
		}
	}
	for _, w := range ws {
		if !leased[w] {
			continue
		}
		for _, g := range c.beyondLease(w.ns, w.podIndex(), c.leaseGPUs(w.key), w.admitted) {
			h.add(g.node, c.nodes[g.node], g.gpus)
		}
	}
	return h
}

// add counts g GPUs held on node name (n), at most its healthy GPUs.
func (h holding) add(name string, n nodeInfo, g int) {
	healthy := len(n.server.GPUs) - len(n.unhealthy)
	g = min(g, healthy-h.byNode[name])
	h.byNode[name] += g
	h.byType[n.typ()] += g
}

// goingPod is a terminating pod bound to a ready node of the
// controller's (node, of type typ), and GPUs it holds.
type goingPod struct {
	pod  *corev1.Pod
	node string
	typ  topology.GPUType
	gpus int
}

// beyondLease returns the terminating pods of an admitted workload (its
// pods' index key, in namespace ns) that hold GPUs beyond its lease (lease
// GPUs of type typ), each with the GPUs it holds beyond it. A terminating
// pod holds its GPUs until gone, beside the live pods that replace it (a
// Job's job controller replaces deleted pods at once): the workload's
// bound pods, live and terminating, hold more than its lease by what they
// hold past it, at most what the terminating ones hold. The lease covers
// first the terminating pods on its type, then the others by name; pods
// of other namespaces (an owner reference names any UID) are not the
// workload's.
func (c *Controller) beyondLease(ns, index string, lease int, typ topology.GPUType) []goingPod {
	var going []goingPod
	live, held := 0, 0
	for _, p := range c.podsOf(index) {
		n, ok := c.nodes[p.Spec.NodeName]
		if p.Namespace != ns || p.Spec.NodeName == "" || !ok || !n.ready || terminal(p) {
			continue
		}
		g, err := model.PodGPUs(p, c.cfg.Resource)
		switch {
		case err != nil || g <= 0:
		case p.DeletionTimestamp == nil:
			live += g
		default:
			going = append(going, goingPod{pod: p, node: p.Spec.NodeName, typ: n.typ(), gpus: g})
			held += g
		}
	}
	slices.SortFunc(going, func(a, b goingPod) int {
		return cmp.Or(cmpBool(a.typ != typ, b.typ != typ), cmp.Compare(a.pod.Name, b.pod.Name))
	})
	covered := min(held, max(0, lease-live))
	out := going[:0]
	for _, g := range going {
		cut := min(covered, g.gpus)
		covered -= cut
		if g.gpus -= cut; g.gpus > 0 {
			out = append(out, g)
		}
	}
	return out
}

// cmpBool orders false before true.
func cmpBool(a, b bool) int {
	switch {
	case a == b:
		return 0
	case !a:
		return -1
	}
	return 1
}

// admittedObjects returns the admitted workloads by the UIDs of their
// Jobs and pods (never "").
func admittedObjects(ws []*workload) map[types.UID]*workload {
	out := map[types.UID]*workload{}
	for _, w := range ws {
		switch {
		case w.admitted == "":
		case w.kind == kindJob:
			out[w.job.UID] = w
		default:
			for _, p := range w.pods {
				out[p.UID] = w
			}
		}
	}
	delete(out, "")
	return out
}

// podWorkload returns the key of the workload a pod belongs to, and the
// UID of the Job that controls it ("" if none).
func (c *Controller) podWorkload(p *corev1.Pod) (string, types.UID) {
	if o := controllerOf(p); o != nil && o.Kind == "Job" {
		return "job/" + p.Namespace + "/" + o.Name, o.UID
	}
	return c.podKey(p), ""
}

// podKey is the key of the workload a pod that no Job controls belongs
// to: its own, its gpusched group's, or its upstream PodGroup's when that
// is a gang.
func (c *Controller) podKey(p *corev1.Pod) string {
	gang := 0
	if g := model.UpstreamPodGroup(p); g != "" {
		gang = c.caches.gang(p.Namespace, g)
	}
	key, _ := workloadKey(p, gang)
	return key
}

// reserveHeld makes the core's cluster match what the terminating pods
// hold: on each ready node, as many of its healthy GPUs failed as they
// hold (those the core has free first, then those it lent to a job, whose
// lease then ends: that job cannot run there until they go), the others
// healthy again. Failed GPUs the node itself reports (syncNodes) are left
// as they are.
func (c *Controller) reserveHeld(h holding) {
	type change struct {
		node          string
		fail, recover []int
	}
	var changes []change
	c.sched.View(func(v *scheduler.ClusterView) {
		for _, name := range slices.Sorted(maps.Keys(c.nodes)) {
			n := c.nodes[name]
			p, ok := v.ServerIndex(name)
			if !ok || !n.ready {
				continue
			}
			var failed, free, lent []int // NVML indices of the GPUs the node calls healthy
			for i, g := range n.server.GPUs {
				r := cluster.GPURef{Server: p, GPU: i}
				switch {
				case slices.Contains(n.unhealthy, i):
				case v.Failed(r):
					failed = append(failed, g.Index)
				case v.Holder(r) == "":
					free = append(free, g.Index)
				default:
					lent = append(lent, g.Index)
				}
			}
			want := h.byNode[name] // at most its healthy GPUs
			ch := change{node: name}
			if len(failed) > want {
				ch.recover = failed[want:]
			} else {
				ch.fail = append(free, lent...)[:want-len(failed)]
			}
			if len(ch.fail)+len(ch.recover) > 0 {
				changes = append(changes, ch)
			}
		}
	})
	for _, ch := range changes {
		if len(ch.recover) > 0 {
			if err := c.sched.RecoverGPUs(ch.node, ch.recover...); err != nil {
				c.log.Warn("recover GPUs no longer held", "node", ch.node, "err", err)
			}
		}
		if len(ch.fail) > 0 {
			if _, err := c.sched.FailGPUs(ch.node, ch.fail...); err != nil {
				c.log.Warn("reserve GPUs held by terminating pods", "node", ch.node, "err", err)
			}
		}
	}
}

// leaving reports whether a workload's pods are all going (terminating
// or ended, at least one terminating) while they still hold GPUs: it is
// not admitted (a pod being deleted is not taken back), and the rounds
// it is given are charged for as long as they hold them.
func (h holding) leaving(w *workload) bool {
	if w == nil || w.kind == kindJob || h.until[w.key].IsZero() {
		return false
	}
	for _, p := range w.pods {
		if p.DeletionTimestamp == nil && !terminal(p) {
			return false
		}
	}
	return true
}

// heldRan returns what the jobs the round gave a turn but held back ran
// on the GPUs their own pods still hold: for as long as they are due to
// hold them (their deletions' ends), at most the round. (A job the round
// did not give a turn is charged what its pods held: RoundReport.Held.)
func (h holding) heldRan(held []string, now time.Time, length float64) []scheduler.Ran {
	var out []scheduler.Ran
	for _, key := range held {
		until, ok := h.until[key]
		if !ok {
			continue
		}
		if s := min(until.Sub(now).Seconds(), length); s > 0 {
			out = append(out, scheduler.Ran{Job: key, Seconds: s})
		}
	}
	return out
}

// expediteDeletions cuts short the deletions of the managed namespaces'
// terminating GPU pods that run past the admin's bound, and force-deletes
// those still there past it (backed off and within their tenants'
// budgets), once: a pod deleted with grace 0 already (by the controller or
// anyone) that is still there is kept by its finalizers or a kubelet that
// does not confirm, and deleting it again changes nothing (it cost a
// request of its tenant's budget at every sweep, each success resetting
// its backoff).
func (c *Controller) expediteDeletions(ctx context.Context) {
	if c.ten == nil {
		return
	}
	now, bound := c.wall(), c.cfg.maxDeletionGrace()
	for _, p := range c.terminatingPods() {
		if g := p.DeletionGracePeriodSeconds; g != nil && *g == 0 {
			continue
		}
		end, tooLong := deletionEnd(p, bound)
		force := !now.Before(end.Add(forceSlack))
		if !tooLong && !force || !c.ten.Managed(p.Namespace) {
			continue
		}
		if g, err := model.PodGPUs(p, c.cfg.Resource); err != nil || g <= 0 {
			continue
		}
		key, tenant := "expedite/"+string(p.UID), c.tenantOf(p.Namespace)
		if !c.retry.due(key, now) || !c.retry.take(tenant, 1) {
			continue
		}
		grace := int64(0)
		if !force {
			grace = max(1, int64(end.Sub(now).Seconds()+0.999))
		}
		if err := c.deleteWithGrace(ctx, p, grace); err != nil {
			c.retry.failed(key, now)
			c.log.Warn("cut a pod's deletion short", "pod", p.Namespace+"/"+p.Name, "grace", grace, "err", err)
			continue
		}
		c.retry.succeeded(key)
		ref := corev1.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: p.Namespace, Name: p.Name, UID: p.UID}
		if force {
			c.eventOn(ref, corev1.EventTypeWarning, ReasonGraceCapped, fmt.Sprintf("force-deleted: still there %v after its deletion's end (the admin's maximum grace is %v)", forceSlack, bound))
		} else {
			c.eventOn(ref, corev1.EventTypeNormal, ReasonGraceCapped, fmt.Sprintf("deletion cut to %d s: a GPU pod takes at most the admin's maximum grace, %v, to go", grace, bound))
		}
	}
}

// deleteWithGrace deletes a pod (this UID only) with a grace in seconds;
// gone already is no error. A pod deleted without a grace (and without
// finalizers, which keep it) is hidden from the controller's reads at
// once.
func (c *Controller) deleteWithGrace(ctx context.Context, p *corev1.Pod, grace int64) error {
	uid := p.UID
	err := c.cfg.Client.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{
		Preconditions: &metav1.Preconditions{UID: &uid}, GracePeriodSeconds: &grace})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("admission: deleting pod %s/%s (grace %d s): %w", p.Namespace, p.Name, grace, err)
	}
	c.caches.own.sentDelete(uid)
	if apierrors.IsNotFound(err) || grace == 0 && len(p.Finalizers) == 0 {
		c.caches.own.deletedPod(p) // gone from the API at once
	}
	return nil
}
