package admission

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/gpusched/gpusched/scheduler"
	"github.com/gpusched/gpusched/topology"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
)

// Controller runs the scheduling core's rounds against a cluster. It is
// safe for concurrent use: one mutex serialises Round and Sweep.
type Controller struct {
	mu    sync.Mutex
	cfg   Config
	log   *slog.Logger
	sched *scheduler.Scheduler

	nodes    map[string]nodeInfo
	products map[topology.GPUType][]string // node product labels per type
	capacity map[topology.GPUType]int      // healthy GPUs of ready nodes

	state   ctrlState
	events  map[string]bool // events already recorded (object, reason, message)
	created map[string][]*corev1.Pod
}

// ctrlState is what the controller keeps beside the core's snapshot.
type ctrlState struct {
	Version int `json:"version"`
	// Rounds counts the rounds run.
	Rounds int `json:"rounds"`
	// Requeue holds preempted bare pods to create again, gated, once the
	// deleted ones are gone, by workload key.
	Requeue map[string][]requeued `json:"requeue,omitempty"`
}

type requeued struct {
	Pod corev1.Pod `json:"pod"`
	// Old is the UID of the pod that was deleted.
	Old types.UID `json:"old"`
}

const stateVersion = 1

// RoundResult says what a round decided and did. It belongs to the
// caller (the controller keeps no reference): safe for concurrent reads,
// not for concurrent writes.
type RoundResult struct {
	// Round numbers the round from 1; Now is its start on the clock.
	Round int
	Now   float64
	// Assigned is the core's decision: the jobs (by key) that run this
	// round and their GPU types.
	Assigned map[string]topology.GPUType
	// Admitted holds the workloads admitted after the round (newly or
	// still), with their types: the gates that are off.
	Admitted map[string]topology.GPUType
	// Started lists the workloads admitted in this round, Preempted those
	// preempted, Held those assigned but not admitted (their pods are not
	// back yet, or, without preemption, no GPUs are free), Finished those
	// found done and forgotten, Skipped the malformed ones; all sorted.
	Started, Preempted, Held, Finished, Skipped []string
	// Capacity is the healthy GPUs of each type.
	Capacity map[topology.GPUType]int
	// GPUs gives each job's GPU count, by key, for the jobs present.
	GPUs map[string]int
}

// New returns a controller for cfg; unless cfg.NoState, it loads the
// state a previous controller saved (the nodes are read first, so that
// the core's Restore finds the cluster as it is).
func New(ctx context.Context, cfg Config) (*Controller, error) {
	if err := cfg.check(); err != nil {
		return nil, err
	}
	c := &Controller{cfg: cfg, log: cfg.Logger, nodes: map[string]nodeInfo{}, events: map[string]bool{}}
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	c.state = ctrlState{Version: stateVersion, Requeue: map[string][]requeued{}}
	s, err := scheduler.New(scheduler.Config{
		Policy: cfg.Policy, Throughput: cfg.model(), RoundLength: cfg.roundSeconds(),
		MinResetInterval: cfg.MinResetInterval, TenantWeights: cfg.TenantWeights,
		// Admission decides types, not devices: a job may span nodes.
		MigrationCost: -1, Logger: c.log,
	})
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	c.sched = s
	if err := c.syncNodes(ctx); err != nil {
		return nil, err
	}
	if !cfg.NoState {
		if err := c.load(ctx); err != nil {
			return nil, err
		}
	}
	return c, nil
}

func (c *Controller) now() float64 {
	if c.cfg.Clock != nil {
		return c.cfg.Clock()
	}
	return float64(time.Now().UnixNano()) / 1e9
}

func (c *Controller) wall() time.Time {
	if c.cfg.Now != nil {
		return c.cfg.Now()
	}
	return time.Now()
}

// Scheduler returns the scheduling core the controller drives (for
// Status and Snapshot; changing it behind the controller's back is a
// mistake).
func (c *Controller) Scheduler() *scheduler.Scheduler { return c.sched }

// Run runs a round every Config.Interval and sweeps (graces, requeued
// pods) every second in between, until ctx ends. A round that fails is
// logged and retried at the next tick.
func (c *Controller) Run(ctx context.Context) error {
	interval := c.cfg.Interval
	if interval == 0 {
		interval = time.Duration(c.cfg.roundSeconds() * float64(time.Second))
	}
	next := time.Now()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		if !time.Now().Before(next) {
			next = next.Add(interval)
			if r, err := c.Round(ctx); err != nil {
				c.log.Error("round failed", "err", err)
			} else {
				c.log.Info("round", "round", r.Round, "assigned", len(r.Assigned), "started", len(r.Started),
					"preempted", len(r.Preempted), "held", len(r.Held), "finished", len(r.Finished), "skipped", len(r.Skipped))
			}
		} else if err := c.Sweep(ctx); err != nil {
			c.log.Warn("sweep failed", "err", err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
}

// Round runs one round at the clock's time: sweep, read nodes and
// workloads, the core's round, preempt, admit, save the state.
func (c *Controller) Round(ctx context.Context) (*RoundResult, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	if err := c.sweep(ctx); err != nil {
		return nil, err
	}
	if err := c.syncNodes(ctx); err != nil {
		return nil, err
	}
	ws, err := c.workloads(ctx)
	if err != nil {
		return nil, err
	}
	res := &RoundResult{Round: c.state.Rounds + 1, Now: now, Assigned: map[string]topology.GPUType{},
		Admitted: map[string]topology.GPUType{}, Capacity: maps.Clone(c.capacity), GPUs: map[string]int{}}
	present := c.syncJobs(ctx, ws, now, res)

	r, err := c.sched.Round(ctx, now)
	if err != nil {
		return nil, fmt.Errorf("admission: round at %v: %w", now, err)
	}
	c.state.Rounds++
	for _, as := range r.Assignments {
		for _, k := range as.Jobs {
			res.Assigned[k] = as.Type
		}
	}
	// Preempt the jobs that lost their lease (or hold them, without
	// preemption); a preempted pod still in its grace that got its type
	// back keeps running.
	used := map[topology.GPUType]int{}
	for _, key := range slices.Sorted(maps.Keys(present)) {
		w := present[key]
		want, assigned := res.Assigned[key]
		switch {
		case w.preempting && assigned && w.admitted == "" && c.preemptedOn(w) == want:
			if err := c.unpreempt(ctx, w); err != nil {
				c.log.Warn("cancel preemption", "job", key, "err", err)
				continue
			}
			w.admitted, w.preempting = want, false
		case w.admitted == "" || (assigned && w.admitted == want):
		case c.cfg.NoPreemption:
		default:
			if err := c.preempt(ctx, w, fmt.Sprintf("lease ended at round %d (t=%.0f s): the %s policy gave its %s GPUs to other jobs", res.Round, now, policyName(c.cfg.Policy), w.admitted)); err != nil {
				c.log.Warn("preempt", "job", key, "err", err)
				continue
			}
			res.Preempted = append(res.Preempted, key)
			w.admitted = ""
		}
		if w.admitted != "" {
			used[w.admitted] += w.gpus
		}
	}
	// Pods deleted at once come back gated now, and may be admitted on
	// their new type in this round.
	c.requeue(ctx)
	for key, pods := range c.created {
		w := present[key]
		if w == nil || w.kind == kindJob || len(c.state.Requeue[key]) > 0 {
			continue
		}
		byName := map[string]*corev1.Pod{}
		for _, p := range pods {
			byName[p.Name] = p
		}
		for i, p := range w.pods {
			if n := byName[p.Name]; n != nil {
				w.pods[i] = n
			}
		}
		w.preempting, w.admitted = false, ""
	}
	// Admit the others, in the order of the core's assignments.
	report := scheduler.RoundReport{Start: r.Start}
	for _, as := range r.Assignments {
		for _, key := range as.Jobs {
			w := present[key]
			switch {
			case w == nil || len(c.state.Requeue[key]) > 0 || w.preempting:
				res.Held = append(res.Held, key)
				continue
			case w.admitted == as.Type:
			case w.admitted != "" || used[as.Type]+w.gpus > c.capacity[as.Type]:
				res.Held = append(res.Held, key)
				continue
			default:
				if err := c.admit(ctx, w, as.Type, nodesOf(as), now); err != nil {
					c.log.Warn("admit", "job", key, "err", err)
					res.Held = append(res.Held, key)
					continue
				}
				used[as.Type] += w.gpus
				w.admitted = as.Type
				res.Started = append(res.Started, key)
			}
			report.Ran = append(report.Ran, scheduler.Ran{Job: key, Seconds: r.Length})
		}
	}
	for key, w := range present {
		if w.admitted != "" {
			res.Admitted[key] = w.admitted
		}
	}
	if err := c.sched.Report(report); err != nil {
		c.log.Warn("report", "err", err)
	}
	for _, l := range [][]string{res.Started, res.Preempted, res.Held, res.Finished, res.Skipped} {
		slices.Sort(l)
	}
	if !c.cfg.NoState {
		if err := c.save(ctx); err != nil {
			return res, err
		}
	}
	return res, nil
}

// nodesOf lists the nodes of an assignment's devices, sorted.
func nodesOf(as scheduler.Assignment) []string {
	var out []string
	for _, d := range as.Devices {
		if !slices.Contains(out, d.Server) {
			out = append(out, d.Server)
		}
	}
	slices.Sort(out)
	return out
}

// preemptedOn is the type a preempted pod ran on.
func (c *Controller) preemptedOn(w *workload) topology.GPUType {
	for _, p := range w.pods {
		if t := p.Annotations[AnnotationAdmittedType]; t != "" {
			return topology.GPUType(t)
		}
	}
	return ""
}

// workloads lists the managed pods and Jobs.
func (c *Controller) workloads(ctx context.Context) ([]*workload, error) {
	pods, err := c.cfg.Client.CoreV1().Pods(c.cfg.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("admission: listing pods: %w", err)
	}
	jobs, err := c.cfg.Client.BatchV1().Jobs(c.cfg.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("admission: listing jobs: %w", err)
	}
	return collect(pods.Items, jobs.Items, c.cfg.Resource), nil
}

// syncJobs submits new workloads to the core and removes those done,
// malformed or gone; it returns the workloads that take part in the round.
func (c *Controller) syncJobs(ctx context.Context, ws []*workload, now float64, res *RoundResult) map[string]*workload {
	present := map[string]*workload{}
	known := map[string]bool{}
	for _, k := range c.sched.Jobs() {
		known[k] = true
	}
	types := c.types()
	var fresh []*workload
	for _, w := range ws {
		switch {
		case w.err != nil:
			c.event(ctx, w, corev1.EventTypeWarning, ReasonMalformed, w.err.Error())
			res.Skipped = append(res.Skipped, w.key)
			continue
		case w.done:
			if known[w.key] {
				res.Finished = append(res.Finished, w.key)
			}
			continue
		case w.incomplete && len(c.state.Requeue[w.key]) == 0:
			continue
		}
		present[w.key] = w
		res.GPUs[w.key] = w.gpus
		if !known[w.key] {
			fresh = append(fresh, w)
		}
	}
	// A requeued pod's job waits while its pods are away.
	for key := range c.state.Requeue {
		if present[key] == nil && known[key] {
			present[key] = &workload{key: key}
		}
	}
	for k := range known {
		if present[k] == nil {
			if err := c.sched.Remove(k); err != nil {
				c.log.Warn("remove", "job", k, "err", err)
			}
			if !slices.Contains(res.Finished, k) && !slices.Contains(res.Skipped, k) {
				res.Finished = append(res.Finished, k)
			}
		}
	}
	slices.SortStableFunc(fresh, func(a, b *workload) int { return cmp.Compare(a.created, b.created) })
	for _, w := range fresh {
		spec, warn, err := w.spec(&c.cfg, types)
		if err == nil {
			err = c.sched.Submit(w.key, spec, now)
		}
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				err = fmt.Errorf("%w: %s: %w", ErrMalformed, w.key, err)
			}
			c.event(ctx, w, corev1.EventTypeWarning, ReasonMalformed, err.Error())
			res.Skipped = append(res.Skipped, w.key)
			delete(present, w.key)
			delete(res.GPUs, w.key)
			continue
		}
		if warn != "" {
			c.event(ctx, w, corev1.EventTypeNormal, ReasonDefault, warn)
		}
	}
	return present
}

// admit lets a workload run on type t.
func (c *Controller) admit(ctx context.Context, w *workload, t topology.GPUType, nodes []string, now float64) error {
	at := strconv.FormatFloat(now, 'f', 3, 64)
	mark := func(m *metav1.ObjectMeta) {
		if m.Annotations == nil {
			m.Annotations = map[string]string{}
		}
		m.Annotations[AnnotationAdmittedType] = string(t)
		m.Annotations[AnnotationAdmittedAt] = at
		delete(m.Annotations, AnnotationPreempted)
		delete(m.Annotations, AnnotationDeleteAfter)
	}
	if w.kind == kindJob {
		err := c.updateJob(ctx, w.job, func(j *batchv1.Job) {
			mark(&j.ObjectMeta)
			j.Spec.Template.Spec.SchedulingGates = dropGate(j.Spec.Template.Spec.SchedulingGates)
			c.affinity(&j.Spec.Template.Spec, t, nodes)
			j.Spec.Suspend = new(bool)
		})
		if err != nil {
			return err
		}
	} else {
		for _, p := range w.pods {
			if terminal(p) {
				continue
			}
			err := c.updatePod(ctx, p, func(p *corev1.Pod) {
				mark(&p.ObjectMeta)
				if hasGate(p.Spec.SchedulingGates) {
					p.Spec.SchedulingGates = dropGate(p.Spec.SchedulingGates)
					c.affinity(&p.Spec, t, nodes)
				}
			})
			if err != nil {
				return err
			}
		}
	}
	c.event(ctx, w, corev1.EventTypeNormal, ReasonAdmitted, fmt.Sprintf("admitted on %s GPUs (%d) at t=%.0f s", t, w.gpus, now))
	return nil
}

// preempt takes a workload's GPUs back: a Job is suspended; a
// pod is marked with the reason and deleted after the grace (then
// requeued).
func (c *Controller) preempt(ctx context.Context, w *workload, reason string) error {
	if w.kind == kindJob {
		err := c.updateJob(ctx, w.job, func(j *batchv1.Job) {
			if j.Annotations == nil {
				j.Annotations = map[string]string{}
			}
			j.Annotations[AnnotationPreempted] = reason
			j.Annotations[AnnotationPreemptions] = strconv.Itoa(atoi(j.Annotations[AnnotationPreemptions]) + 1)
			// Only spec.suspend: the API server takes no change to the
			// template of a Job that is not suspended. The job controller
			// deletes its pods; AnnotationAdmittedType (the last type)
			// keeps the Job managed.
			j.Spec.Suspend = ptrTo(true)
		})
		if err == nil {
			c.event(ctx, w, corev1.EventTypeNormal, ReasonPreempted, "suspended: "+reason)
		}
		return err
	}
	deadline := c.wall().Add(c.cfg.Grace).UTC().Format(time.RFC3339Nano)
	for _, p := range w.pods {
		if terminal(p) {
			continue
		}
		err := c.updatePod(ctx, p, func(p *corev1.Pod) {
			if p.Annotations == nil {
				p.Annotations = map[string]string{}
			}
			p.Annotations[AnnotationPreempted] = reason
			p.Annotations[AnnotationDeleteAfter] = deadline
		})
		if err != nil {
			return err
		}
	}
	c.event(ctx, w, corev1.EventTypeNormal, ReasonPreempted, fmt.Sprintf("%s; deleted after %v and created again, gated", reason, c.cfg.Grace))
	if c.cfg.Grace == 0 {
		for _, p := range w.pods {
			if !terminal(p) {
				if err := c.deleteAndRequeue(ctx, w.key, p); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// unpreempt cancels a preemption in its grace.
func (c *Controller) unpreempt(ctx context.Context, w *workload) error {
	for _, p := range w.pods {
		if terminal(p) {
			continue
		}
		err := c.updatePod(ctx, p, func(p *corev1.Pod) {
			delete(p.Annotations, AnnotationPreempted)
			delete(p.Annotations, AnnotationDeleteAfter)
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// deleteAndRequeue deletes a preempted pod and remembers a gated copy to
// create once it is gone.
func (c *Controller) deleteAndRequeue(ctx context.Context, key string, p *corev1.Pod) error {
	cp := requeueCopy(p, c.cfg.NodeSelector)
	uid := p.UID
	err := c.cfg.Client.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{
		Preconditions: &metav1.Preconditions{UID: &uid}, GracePeriodSeconds: c.cfg.PodDeletionGrace})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("admission: deleting pod %s/%s: %w", p.Namespace, p.Name, err)
	}
	if !slices.ContainsFunc(c.state.Requeue[key], func(r requeued) bool { return r.Old == uid }) {
		c.state.Requeue[key] = append(c.state.Requeue[key], requeued{Pod: *cp, Old: uid})
	}
	return nil
}

// requeueCopy is a gated copy of a pod, without what the controller, the
// API server and the scheduler added.
func requeueCopy(p *corev1.Pod, selector map[string]string) *corev1.Pod {
	cp := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{
		Name: p.Name, Namespace: p.Namespace, Labels: maps.Clone(p.Labels), Annotations: maps.Clone(p.Annotations),
		OwnerReferences: p.OwnerReferences, Finalizers: p.Finalizers,
	}}
	if cp.Annotations == nil {
		cp.Annotations = map[string]string{}
	}
	for _, a := range []string{AnnotationAdmittedType, AnnotationAdmittedAt, AnnotationPreempted, AnnotationDeleteAfter} {
		delete(cp.Annotations, a)
	}
	cp.Annotations[AnnotationPreemptions] = strconv.Itoa(atoi(p.Annotations[AnnotationPreemptions]) + 1)
	spec := p.Spec.DeepCopy()
	spec.NodeName = ""
	stripAffinity(spec, selector)
	if !hasGate(spec.SchedulingGates) {
		spec.SchedulingGates = append(spec.SchedulingGates, corev1.PodSchedulingGate{Name: GateName})
	}
	cp.Spec = *spec
	return cp
}

// Sweep deletes preempted pods whose grace is over and creates again the
// requeued pods whose old copies are gone. Round sweeps first; Run sweeps
// every second.
func (c *Controller) Sweep(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.sweep(ctx)
}

func (c *Controller) sweep(ctx context.Context) error {
	if c.cfg.Grace > 0 {
		pods, err := c.cfg.Client.CoreV1().Pods(c.cfg.Namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return fmt.Errorf("admission: listing pods: %w", err)
		}
		now := c.wall()
		for _, w := range collect(pods.Items, nil, c.cfg.Resource) {
			for _, p := range w.pods {
				v := p.Annotations[AnnotationDeleteAfter]
				if v == "" || p.DeletionTimestamp != nil || terminal(p) {
					continue
				}
				t, err := time.Parse(time.RFC3339Nano, v)
				if err == nil && now.Before(t) {
					continue
				}
				if err := c.deleteAndRequeue(ctx, w.key, p); err != nil {
					c.log.Warn("delete preempted pod", "pod", p.Namespace+"/"+p.Name, "err", err)
				}
			}
		}
	}
	if c.requeue(ctx) && !c.cfg.NoState {
		return c.save(ctx)
	}
	return nil
}

// requeue creates again the requeued pods whose old copies are gone; it
// reports whether any entry was settled. The pods created are in
// c.created, by workload key.
func (c *Controller) requeue(ctx context.Context) bool {
	changed := false
	c.created = map[string][]*corev1.Pod{}
	for _, key := range slices.Sorted(maps.Keys(c.state.Requeue)) {
		var left []requeued
		for _, rq := range c.state.Requeue[key] {
			pods := c.cfg.Client.CoreV1().Pods(rq.Pod.Namespace)
			cur, err := pods.Get(ctx, rq.Pod.Name, metav1.GetOptions{})
			switch {
			case err == nil && cur.UID == rq.Old:
				left = append(left, rq) // still terminating
				continue
			case err == nil:
				changed = true // created again already
				continue
			case !apierrors.IsNotFound(err):
				left = append(left, rq)
				c.log.Warn("requeue: get pod", "pod", rq.Pod.Name, "err", err)
				continue
			}
			p, err := pods.Create(ctx, rq.Pod.DeepCopy(), metav1.CreateOptions{})
			if err != nil && !apierrors.IsAlreadyExists(err) {
				left = append(left, rq)
				c.log.Warn("requeue: create pod", "pod", rq.Pod.Name, "err", err)
				continue
			}
			if err == nil {
				c.created[key] = append(c.created[key], p)
			}
			changed = true
		}
		if len(left) == 0 {
			delete(c.state.Requeue, key)
		} else {
			c.state.Requeue[key] = left
		}
	}
	return changed
}

func (c *Controller) updatePod(ctx context.Context, p *corev1.Pod, mutate func(*corev1.Pod)) error {
	pods := c.cfg.Client.CoreV1().Pods(p.Namespace)
	first := true
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur := p
		if !first {
			var err error
			if cur, err = pods.Get(ctx, p.Name, metav1.GetOptions{}); err != nil {
				return err
			}
		}
		first = false
		cur = cur.DeepCopy()
		mutate(cur)
		_, err := pods.Update(ctx, cur, metav1.UpdateOptions{})
		return err
	})
}

func (c *Controller) updateJob(ctx context.Context, j *batchv1.Job, mutate func(*batchv1.Job)) error {
	jobs := c.cfg.Client.BatchV1().Jobs(j.Namespace)
	first := true
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur := j
		if !first {
			var err error
			if cur, err = jobs.Get(ctx, j.Name, metav1.GetOptions{}); err != nil {
				return err
			}
		}
		first = false
		cur = cur.DeepCopy()
		mutate(cur)
		_, err := jobs.Update(ctx, cur, metav1.UpdateOptions{})
		return err
	})
}

func dropGate(gates []corev1.PodSchedulingGate) []corev1.PodSchedulingGate {
	return slices.DeleteFunc(slices.Clone(gates), func(g corev1.PodSchedulingGate) bool { return g.Name == GateName })
}

func atoi(s string) int {
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 {
		return 0
	}
	return n
}

func ptrTo[T any](v T) *T { return &v }

func policyName(p any) string {
	return fmt.Sprintf("%T", p)[len("*allocation."):]
}

// event records an event on the workload's object once per message.
func (c *Controller) event(ctx context.Context, w *workload, typ, reason, msg string) {
	kind, ns, name, uid := w.object()
	id := uid + "|" + reason + "|" + msg
	if c.events[id] {
		return
	}
	c.events[id] = true
	if len(c.events) > 1<<16 {
		clear(c.events)
	}
	apiVersion := "v1"
	if kind == "Job" {
		apiVersion = "batch/v1"
	}
	now := metav1.NewTime(c.wall())
	ev := &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{Name: fmt.Sprintf("%s.%x", name, c.wall().UnixNano()+int64(len(c.events))), Namespace: ns},
		InvolvedObject: corev1.ObjectReference{Kind: kind, APIVersion: apiVersion, Namespace: ns, Name: name, UID: types.UID(uid)},
		Reason:         reason, Message: cut1k(msg), Type: typ,
		Source:         corev1.EventSource{Component: "gpusched-admission"},
		FirstTimestamp: now, LastTimestamp: now, Count: 1,
	}
	if _, err := c.cfg.Client.CoreV1().Events(ns).Create(ctx, ev, metav1.CreateOptions{}); err != nil {
		c.log.Warn("event", "object", ns+"/"+name, "reason", reason, "err", err)
	}
	if typ == corev1.EventTypeWarning {
		c.log.Warn(reason, "object", ns+"/"+name, "msg", msg)
	}
}

func cut1k(s string) string {
	if len(s) > 1024 {
		return s[:1024]
	}
	return s
}
