package admission

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gpusched/gpusched/allocation"
	"github.com/gpusched/gpusched/kube/model"
	"github.com/gpusched/gpusched/kube/tenancy"
	"github.com/gpusched/gpusched/scheduler"
	"github.com/gpusched/gpusched/topology"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
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
	// shared holds what the progress channel reads without the mutex
	// (progress.go).
	shared shared
	// learnedSaid is the last ReasonLearned message of each workload
	// (learned.go), dropped when it leaves the rounds.
	learnedSaid map[string]string

	ten        *tenancy.Tenancy
	tenancyRV  string // resourceVersion of the tenancy ConfigMap last read
	tenancyBad string // resourceVersion and error last reported
	// tenancyLoaded: the ConfigMap has loaded once.
	tenancyLoaded bool
	specKey       string // tenancy and types the present jobs' specs were derived from

	nodes    map[string]nodeInfo
	products map[topology.GPUType][]string // node product labels per type
	capacity map[topology.GPUType]int      // healthy GPUs of ready nodes

	priorities      map[string]int32
	defaultPriority int32

	state ctrlState
	gen   int64 // generation of the state last saved or loaded
	// slotChunks counts the chunks this process wrote (or tried to) in
	// each slot and has not deleted; chunksKnown says they are the only
	// chunks (a save listed and deleted the others, and no write or
	// delete failed since), so that a save deletes by name: no List of
	// megabytes of chunks each round. saves counts the saves.
	slotChunks  [2]int
	chunksKnown bool
	saves       int
	// genUnsure: a head write failed, and may have landed (the API
	// server wrote it, the answer was lost): the next save reads the
	// head's generation first, so that it never writes its chunks into
	// the slot that the head in the API names.
	genUnsure bool
	// learnerDropped: the last save left the estimator's snapshot out
	// (too large), and said so once.
	learnerDropped bool
	adopt          bool // a clean start: adopt what runs at the next round
	created        map[string][]*corev1.Pod

	caches  *caches
	events  *eventer
	metrics *Metrics
	// bypassed lists the workloads Sweep preempted for running without
	// admission since the last round (reported in its RoundResult).
	bypassed []string
	scratch  roundScratch
	// jobPodTypes is the type of a node a Job's pod is bound to, by Job UID.
	jobPodTypes map[types.UID]topology.GPUType
	// memCopies holds the copies of the pods this process requeued (under
	// Config.NoState their only copy), so that creating one again reads no
	// ConfigMap.
	memCopies map[string][]byte
	// written holds the state ConfigMaps as last written (metadata only).
	written map[string]*corev1.ConfigMap

	// retry paces the writes sweeps retry (backoff, tenants' budgets);
	// copyKey signs the requeued pods' copies; hold is what the
	// terminating pods held at the last round's start.
	retry   *retrier
	copyKey *copyKey
	hold    holding
	// afterLease follows the workloads whose pods hold GPUs after their
	// lease ended, by key, in the round's window (charge.go).
	afterLease map[string]*afterLease
	// admittedWaits watches the workloads the round admitted for waits on
	// GPUs the followed ones hold; window is the round's time on the wall
	// clock, lastCount the last count (charge.go).
	admittedWaits map[string]*admittedWait
	window        chargeWindow
	lastCount     time.Time
}

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
	// still), with their types, by the controller's records.
	Admitted map[string]topology.GPUType
	// Started lists the workloads admitted in this round, Preempted those
	// preempted, Held those assigned but not admitted (their pods are not
	// back yet, or, without preemption, no GPUs are free), Finished those
	// found done and forgotten, Skipped the malformed ones, Waiting those
	// kept out of the round by their tenant's MaxJobs (or its part of the
	// tenancy's),
	// Bypassed those found running without the controller's admission
	// (and preempted), Adopted those found running at a clean start and
	// taken as admitted, Unrunnable those with a pod larger than every
	// node of the types they may run on (kept out of the rounds); all
	// sorted.
	Started, Preempted, Held, Finished, Skipped, Waiting, Bypassed, Adopted, Unrunnable []string
	// Capacity is the healthy GPUs of each type.
	Capacity map[topology.GPUType]int
	// GPUs gives each job's GPU count, by key, for the jobs present.
	GPUs map[string]int
}

// New returns a controller for cfg. Unless cfg.NoState, it loads the
// state a previous controller saved (the tenancy and the nodes are read
// first, so that the core's Restore finds the cluster as it is); a state
// it cannot read (corrupt, hostile, of another version) gets a Warning
// event on its ConfigMap and a clean start, never an error, so that no
// saved state keeps the controller from starting. A clean start adopts
// the GPU workloads it finds running (no record says otherwise).
func New(ctx context.Context, cfg Config) (*Controller, error) {
	if err := cfg.check(); err != nil {
		return nil, err
	}
	c := &Controller{cfg: cfg, log: cfg.Logger, nodes: map[string]nodeInfo{}, state: newCtrlState(), memCopies: map[string][]byte{},
		afterLease: map[string]*afterLease{}, admittedWaits: map[string]*admittedWait{},
		retry: newRetrier(&cfg), copyKey: newCopyKey(cfg.CopyKey)}
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	c.metrics = cfg.Metrics
	c.events = newEvents(ctx, cfg, c.log)
	if err := c.startCaches(ctx); err != nil {
		c.events.close()
		return nil, err
	}
	ok := false
	defer func() {
		if !ok {
			c.Close()
		}
	}()
	c.ten = cfg.Tenancy
	if c.ten == nil {
		c.ten = tenancy.PerNamespace()
	}
	if cfg.TenancyConfigMap != "" {
		if err := c.reloadTenancy(); err != nil {
			c.log.Warn("no tenancy yet: nothing is admitted until it loads", "err", err)
		}
	}
	if err := c.resetScheduler(); err != nil {
		return nil, err
	}
	if cfg.NoState {
		ok = true
		return c, nil
	}
	fresh, err := c.load(ctx)
	switch {
	case errors.Is(err, ErrState):
		ns, name := cfg.stateLocation()
		c.eventOn(corev1.ObjectReference{Kind: "ConfigMap", APIVersion: "v1", Namespace: ns, Name: name}, corev1.EventTypeWarning, ReasonBadState,
			fmt.Sprintf("the saved state cannot be read, starting clean (running GPU workloads are adopted; the next save replaces it): %v", err))
		c.state = newCtrlState()
		if err := c.resetScheduler(); err != nil {
			return nil, err
		}
		c.adopt = true
	case err != nil:
		return nil, err
	default:
		c.adopt = fresh
	}
	ok = true
	return c, nil
}

// resetScheduler builds a new core for the current tenancy and adds the
// nodes to it.
func (c *Controller) resetScheduler() error {
	var weights map[string]float64
	var quotas map[string]allocation.Quota
	if c.ten != nil { // nil while a tenancy ConfigMap has not loaded: no round runs
		weights, quotas = c.ten.Weights(), c.ten.Quotas()
	}
	s, err := scheduler.New(scheduler.Config{
		Policy: c.cfg.Policy, Throughput: c.cfg.model(), TenantWeights: weights, TenantQuotas: quotas,
		Mechanism: allocation.Mechanism{RoundLength: c.cfg.roundSeconds(), MinResetInterval: c.cfg.MinResetInterval},
		// Admission decides types, not devices: a job may span nodes.
		MigrationCost: -1, Logger: c.log,
		Estimator: c.cfg.Estimator, Explore: scheduler.Explore{Normalise: true},
	})
	if err != nil {
		return fmt.Errorf("%w: %w", ErrConfig, err)
	}
	c.sched = s
	c.shared.sched.Store(s)
	c.nodes = map[string]nodeInfo{}
	c.specKey = ""
	return c.syncNodes()
}

// reloadTenancy reads the tenancy ConfigMap from the cache; a document
// that does not parse keeps the tenancy in force and gets a Warning event
// (once per version). A change of weights or quotas rebuilds the core
// from its snapshot.
func (c *Controller) reloadTenancy() error {
	ns, _ := c.cfg.stateLocation()
	var t *tenancy.Tenancy
	var rv string
	cm, err := c.caches.cms.ConfigMaps(ns).Get(c.cfg.TenancyConfigMap)
	if err == nil {
		t, rv, err = tenancy.FromConfigMap(cm)
	} else {
		err = fmt.Errorf("tenancy: reading ConfigMap %s/%s: %w", ns, c.cfg.TenancyConfigMap, err)
	}
	if err != nil {
		if bad := rv + "|" + err.Error(); bad != c.tenancyBad && !apierrors.IsNotFound(err) {
			c.tenancyBad = bad
			c.eventOn(corev1.ObjectReference{Kind: "ConfigMap", APIVersion: "v1", Namespace: ns, Name: c.cfg.TenancyConfigMap},
				corev1.EventTypeWarning, ReasonBadTenancy, fmt.Sprintf("tenancy not applied, the last good one stays in force: %v", err))
		}
		if !c.tenancyLoaded && c.cfg.Tenancy == nil {
			c.ten = nil // nothing to go by yet
		}
		return err
	}
	if rv == c.tenancyRV && rv != "" && c.tenancyLoaded {
		return nil
	}
	old := c.ten
	if !c.tenancyLoaded {
		old = nil
	}
	c.ten, c.tenancyRV, c.tenancyLoaded = t, rv, true
	c.log.Info("tenancy loaded", "configmap", ns+"/"+c.cfg.TenancyConfigMap, "tenants", len(t.Tenants()), "version", rv)
	if c.sched != nil && (old == nil || !maps.Equal(old.Weights(), t.Weights()) || !reflect.DeepEqual(old.Quotas(), t.Quotas())) {
		return c.rebuild()
	}
	return nil
}

// rebuild moves the core's state into a new core built for the tenancy.
func (c *Controller) rebuild() error {
	snap, err := c.sched.Snapshot()
	if err != nil {
		return fmt.Errorf("admission: snapshot: %w", err)
	}
	if err := c.resetScheduler(); err != nil {
		return err
	}
	if err := c.restore(snap); err != nil {
		return fmt.Errorf("admission: rebuilding the core for the new tenancy: %w", err)
	}
	return nil
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

// Tenancy returns the tenancy in force (nil while a TenancyConfigMap has
// not loaded yet).
func (c *Controller) Tenancy() *tenancy.Tenancy {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ten
}

// Run runs a round every Config.Interval and sweeps (graces, requeued
// pods) every second in between, until ctx ends. The next round is due
// an interval after the last one ended (never sooner: the core refuses a
// round that starts before the last one's end). A round that fails is
// logged and retried an interval later.
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
			start := time.Now()
			r, err := c.Round(ctx)
			next = time.Now().Add(interval)
			if err != nil {
				c.log.Error("round failed", "err", err)
			} else {
				c.log.Info("round", "round", r.Round, "assigned", len(r.Assigned), "started", len(r.Started),
					"preempted", len(r.Preempted), "held", len(r.Held), "finished", len(r.Finished), "skipped", len(r.Skipped),
					"waiting", len(r.Waiting), "bypassed", len(r.Bypassed), "took", time.Since(start).Round(time.Millisecond))
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

// Round runs one round at the clock's time: sweep, read the tenancy,
// nodes and workloads (from the informers' caches), preempt what bypassed
// admission, the core's round, preempt, admit, save the state, then tell
// each workload where it stands (events, pod conditions) and update the
// metrics.
func (c *Controller) Round(ctx context.Context) (*RoundResult, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	start := time.Now()
	var before uint64
	if c.cfg.Requests != nil {
		before = c.cfg.Requests()
	}
	res, view, err := c.round(ctx)
	if err != nil {
		c.metrics.roundFailed()
		return res, err
	}
	if c.metrics != nil && view != nil {
		end := time.Now()
		view.seconds, view.endUnix, view.requests = end.Sub(start).Seconds(), float64(end.UnixNano())/1e9, -1
		if c.cfg.Requests != nil {
			view.requests = int64(c.cfg.Requests() - before)
		}
		c.metrics.observe(view)
	}
	return res, nil
}

func (c *Controller) round(ctx context.Context) (*RoundResult, *roundView, error) {
	now := c.now()
	c.retry.newPass(true)
	if err := c.sweep(ctx); err != nil {
		return nil, nil, err
	}
	// The last round is over: report it before anything changes the
	// core's jobs.
	c.reportLast(c.wall())
	if c.cfg.TenancyConfigMap != "" {
		if err := c.reloadTenancy(); err != nil && c.ten == nil {
			return nil, nil, fmt.Errorf("admission: no tenancy to go by: %w", err)
		}
	}
	if err := c.syncNodes(); err != nil {
		return nil, nil, err
	}
	if err := c.syncPriorities(); err != nil {
		return nil, nil, err
	}
	ws, err := c.workloads()
	if err != nil {
		return nil, nil, err
	}
	res := &RoundResult{Round: c.state.Rounds + 1, Now: now, Assigned: map[string]topology.GPUType{},
		Admitted: map[string]topology.GPUType{}, Capacity: maps.Clone(c.capacity), GPUs: map[string]int{}}
	if c.adopt {
		c.adoptRunning(ctx, ws, res)
		c.adopt = false
	}
	c.enforce(ctx, ws, res)
	present := c.syncJobs(ctx, ws, now, res)
	// Terminating pods hold their GPUs until gone: out of the core's plan.
	c.hold = c.heldGPUs(ws)
	c.reserveHeld(c.hold)

	r, err := c.sched.Round(ctx, now)
	if err != nil {
		return nil, nil, fmt.Errorf("admission: round at %v: %w", now, err)
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
	// The preemptions' writes run at once (they are independent), their
	// records then in order.
	used := maps.Clone(c.hold.byType)
	var preempts []*pendingPreempt
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
			preempts = append(preempts, &pendingPreempt{key: key, w: w,
				reason: fmt.Sprintf("lease ended at round %d (t=%.0f s): the %s policy gave its %s GPUs to other jobs", res.Round, now, policyName(c.cfg.Policy), w.admitted)})
			continue
		}
		if w.admitted != "" {
			used[w.admitted] += w.gpus
		}
	}
	parallel(len(preempts), func(i int) { c.preemptWrites(ctx, preempts[i]) })
	for _, pp := range preempts {
		if err := c.preempted(pp); err != nil {
			c.log.Warn("preempt", "job", pp.key, "err", err)
			used[pp.w.admitted] += pp.w.gpus
			continue
		}
		res.Preempted = append(res.Preempted, pp.key)
		pp.w.admitted = ""
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
	// Admit the others, in the order of the core's assignments: the
	// decisions first, the admissions' writes then at once (they are
	// independent), their records in that order.
	report := scheduler.RoundReport{Start: r.Start}
	var admits []*pendingAdmit
	var ran []*pendingAdmit // the jobs that run this round, in order
	for _, as := range r.Assignments {
		for _, key := range as.Jobs {
			w := present[key]
			pa := &pendingAdmit{key: key, w: w, typ: as.Type}
			switch {
			case w == nil || len(c.state.Requeue[key]) > 0 || w.preempting || c.hold.leaving(w) || w.kind != kindJob && len(w.pods) == 0:
				res.Held = append(res.Held, key)
				continue
			case w.admitted == as.Type:
				pa.w = nil // runs already
			case w.admitted != "" || used[as.Type]+w.gpus > c.capacity[as.Type]:
				res.Held = append(res.Held, key)
				continue
			default:
				pa.nodes = nodesOf(as)
				used[as.Type] += w.gpus
				admits = append(admits, pa)
			}
			ran = append(ran, pa)
		}
	}
	c.planHost(ctx, r.Assignments, present, ran)
	c.admitAll(ctx, admits, now)
	for _, pa := range ran {
		if pa.w != nil {
			if pa.rec != nil && len(pa.rec.UIDs) > 0 {
				// Recorded even if a later pod failed, so that a pod whose
				// gate is off is never taken for one that bypassed.
				c.state.Admitted[pa.key] = pa.rec
			}
			if pa.err != nil {
				c.log.Warn("admit", "job", pa.key, "err", pa.err)
				res.Held = append(res.Held, pa.key)
				continue
			}
			c.admitted(pa.w, pa.typ, pa.rec, now)
			res.Started = append(res.Started, pa.key)
		}
		r := scheduler.Ran{Job: pa.key, Seconds: r.Length}
		st, err := c.sched.Status(pa.key)
		if err == nil && st.Spec.RemainingSteps > 0 {
			// The work of the round at the job's (trusted) rate counts
			// the admin's model of its remaining work down; a learned
			// job's rate is its estimate over its fastest (normalised,
			// as the claims are).
			rate := st.Spec.Throughput[pa.typ]
			if st.Spec.Learn {
				rate = learnedShare(st, pa.typ)
			}
			r.Steps = r.Seconds * rate
		}
		if err == nil && st.Spec.Learn && pa.w != nil {
			c.tellLearned(pa.w, st)
		}
		report.Ran = append(report.Ran, r)
	}
	// A job held back while its own pods still hold GPUs ran on them.
	report.Ran = append(report.Ran, c.hold.heldRan(res.Held, c.wall(), r.Length)...)
	for key, w := range present {
		if w.admitted != "" {
			res.Admitted[key] = w.admitted
		}
	}
	// Reported when the round is over (reportLast), with what the
	// workloads whose leases ended hold meanwhile.
	c.state.Report = &report
	c.followAfterRound(present, res.Started)
	res.Bypassed = append(res.Bypassed, c.bypassed...)
	c.bypassed = nil
	for _, l := range [][]string{res.Started, res.Preempted, res.Held, res.Finished, res.Skipped, res.Waiting, res.Bypassed, res.Adopted, res.Unrunnable} {
		slices.Sort(l)
	}
	if !c.cfg.NoState {
		if err := c.save(ctx); err != nil {
			return res, nil, err
		}
	}
	return res, c.explain(present, res, r.Stats), nil
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

// preemptedOn is the type a preempted workload ran on, by its record.
func (c *Controller) preemptedOn(w *workload) topology.GPUType {
	if r := c.state.Admitted[w.key]; r != nil {
		return r.Type
	}
	return ""
}

// syncPriorities reads the cluster's PriorityClasses.
func (c *Controller) syncPriorities() error {
	list, err := c.caches.pcs.List(labels.Everything())
	if err != nil {
		return fmt.Errorf("admission: reading the priority class cache: %w", err)
	}
	c.priorities, c.defaultPriority = make(map[string]int32, len(list)), 0
	for _, pc := range list {
		c.priorities[pc.Name] = pc.Value
		if pc.GlobalDefault {
			c.defaultPriority = pc.Value
		}
	}
	return nil
}

// workloads reads the managed pods and Jobs of the managed namespaces
// from the caches.
func (c *Controller) workloads() ([]*workload, error) {
	pods, err := c.listPods()
	if err != nil {
		return nil, err
	}
	jobs, err := c.listJobs()
	if err != nil {
		return nil, err
	}
	// The Jobs' pods are selected once for the round (issue #40 review:
	// once per Job, each time over every record's pods, it cost Jobs x
	// recorded pods a round, 1.6e8 map inserts at 20,000 suspended Jobs
	// and 8,000 admitted pods).
	theirs := jobPods(pods, jobs, c.cfg.Resource, recordedPods(c.state.Admitted))
	ws := collectClaimed(pods, jobs, c.cfg.Resource, c.ten.Managed, c.state.Admitted, theirs, c.caches.gang)
	c.jobPodTypes = c.boundJobPods(pods, theirs)
	return ws, nil
}

// boundJobPods returns the type of a node that a Job's pod (of theirs,
// jobPods) is bound to, by the Job's UID.
func (c *Controller) boundJobPods(pods []*corev1.Pod, theirs map[types.UID]bool) map[types.UID]topology.GPUType {
	out := map[types.UID]topology.GPUType{}
	for _, p := range pods {
		if p.Spec.NodeName == "" || !theirs[p.UID] {
			continue
		}
		if n, ok := c.nodes[p.Spec.NodeName]; ok {
			out[controllerOf(p).UID] = n.typ()
		}
	}
	return out
}

// adoptRunning takes as admitted, at a clean start, the workloads found
// running on nodes: their type is that of the nodes their pods are bound
// to (admin-owned objects), never what an annotation says. What is not
// bound is left to enforce.
func (c *Controller) adoptRunning(ctx context.Context, ws []*workload, res *RoundResult) {
	for _, w := range ws {
		if w.err != nil || w.done {
			continue
		}
		var t topology.GPUType
		switch {
		case w.kind == kindJob && w.jobRun:
			t = c.jobPodTypes[w.job.UID]
		case len(w.bypass) > 0:
			for _, p := range w.bypass {
				if n, ok := c.nodes[p.Spec.NodeName]; ok && t == "" {
					t = n.typ()
				}
			}
		default:
			continue
		}
		if t == "" {
			continue
		}
		rec := &record{Type: t, NS: w.ns, Adopted: true}
		if w.kind == kindJob {
			rec.UIDs = []types.UID{w.job.UID}
			w.jobRun = false
		} else {
			for _, p := range w.bypass {
				rec.UIDs, rec.Pods = append(rec.UIDs, p.UID), append(rec.Pods, p.Name)
			}
			w.bypass = nil
		}
		c.state.Admitted[w.key] = rec
		w.admitted = t
		res.Adopted = append(res.Adopted, w.key)
		c.tell(w, corev1.EventTypeNormal, ReasonAdopted, fmt.Sprintf("found running on %s GPUs at a clean start: taken as admitted", t), true)
	}
}

// enforce preempts what runs without the controller's admission (no gate
// and no record: a tenant that dropped the gate, or created the workload
// where no admission policy added it): a Job is suspended, a bare pod is
// deleted and created again gated, a pod another controller owns is
// deleted (its controller creates it again, gated by the admission
// policy). Each gets a Warning event.
func (c *Controller) enforce(ctx context.Context, ws []*workload, res *RoundResult) {
	for _, w := range ws {
		if !w.jobRun && len(w.bypass) == 0 {
			continue
		}
		msg := "ran without gpusched's admission (no scheduling gate " + GateName + " and no admission by the controller): "
		var err error
		if w.kind == kindJob {
			err = c.updateJob(ctx, w.job, func(j *batchv1.Job) { j.Spec.Suspend = ptrTo(true) })
			msg += "suspended; it waits for a round like any other"
			w.jobRun = false
		} else {
			for _, p := range w.bypass {
				if e := c.deleteAndRequeue(ctx, w.key, p); e != nil {
					err = e
				}
			}
			msg += "deleted and created again with the gate; it waits for a round like any other"
			w.bypass = nil
		}
		if err != nil {
			c.log.Warn("enforce admission", "workload", w.key, "err", err)
			continue
		}
		res.Bypassed = append(res.Bypassed, w.key)
		c.follow(w.key, w.podIndex())
		c.metrics.preempted(PreemptBypass)
		c.event(w, corev1.EventTypeWarning, ReasonBypass, msg)
	}
}

// syncJobs submits new workloads to the core and removes those done,
// malformed or gone; it returns the workloads that take part in the round.
func (c *Controller) syncJobs(ctx context.Context, ws []*workload, now float64, res *RoundResult) map[string]*workload {
	present := map[string]*workload{}
	known := map[string]bool{}
	for _, k := range c.sched.Jobs() {
		known[k] = true
	}
	env := &specEnv{ten: c.ten, model: c.cfg.model(), known: c.types(), priorities: c.priorities, defaultPriority: c.defaultPriority,
		learn: c.cfg.Estimator != nil}
	var fresh []*workload
	malformed := map[string]bool{}
	for _, w := range ws {
		if w.err == nil {
			var err error
			if w.place, err = c.ten.Resolve(w.ns, w.labels); err != nil {
				w.err = fmt.Errorf("%w: %s %s/%s: %w", ErrMalformed, w.kind, w.ns, w.name, err)
			}
		}
		if w.err == nil && w.kind != kindJob && !known[w.key] {
			// Checked once, when it enters the rounds: a pod too large to
			// keep a copy of could not be preempted.
			for _, p := range w.pods {
				if _, err := podCopy(requeueCopy(p, c.cfg.NodeSelector)); err != nil {
					w.err = fmt.Errorf("%w: %w", ErrMalformed, err)
					break
				}
			}
		}
		switch {
		case w.err != nil:
			c.tell(w, corev1.EventTypeWarning, ReasonMalformed, w.err.Error(), false)
			res.Skipped = append(res.Skipped, w.key)
			malformed[w.key] = true
			continue
		case w.done:
			if known[w.key] {
				res.Finished = append(res.Finished, w.key)
			}
			continue
		case w.incomplete && len(c.state.Requeue[w.key]) == 0:
			c.scratch.incomplete = append(c.scratch.incomplete, w)
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
			// A malformed workload's job that ran is held refused, its
			// state kept (resize.go); one done or gone leaves.
			if malformed[k] && c.refuse(k) {
				continue
			}
			if !malformed[k] {
				if err := c.sched.Remove(k); err != nil {
					c.log.Warn("remove", "job", k, "err", err)
				}
			}
			delete(c.learnedSaid, k)
			delete(known, k)
			if !slices.Contains(res.Finished, k) && !slices.Contains(res.Skipped, k) {
				res.Finished = append(res.Finished, k)
			}
		}
	}
	for k := range c.state.Admitted {
		if present[k] == nil {
			delete(c.state.Admitted, k)
		}
	}
	c.syncDemand(ctx, present, known, env, res)
	// The admin's tenancy or the cluster's types changed: the jobs' specs
	// are derived again (their remaining work kept).
	if key := c.tenancyRV + "|" + fmt.Sprint(env.known); key != c.specKey {
		c.specKey = key
		for k := range known {
			w := present[k]
			if w == nil || w.place.Tenant == nil {
				continue
			}
			st, serr := c.sched.Status(k)
			if serr == nil && refusedSpec(st.Spec) {
				continue // refused: syncDemand looks at it again every round
			}
			spec, _, err := w.spec(env)
			if err == nil {
				if serr == nil {
					spec.RemainingSteps = st.Spec.RemainingSteps
				}
				err = c.sched.Update(k, spec)
			}
			if err != nil {
				c.log.Warn("update spec", "job", k, "err", err)
			}
		}
	}
	// The admin's model of remaining work never runs out while the job
	// runs: a job past its queue's expected time has two rounds of work
	// left (a round's report takes at most one).
	floor := 2 * c.ten.Rates().Ref() * c.cfg.roundSeconds()
	for k := range known {
		w := present[k]
		if w == nil || w.place.Queue == nil || w.place.Queue.ExpectedSeconds == 0 {
			continue
		}
		st, err := c.sched.Status(k)
		if err != nil || st.Spec.RemainingSteps >= floor {
			continue
		}
		spec := st.Spec
		spec.RemainingSteps = floor
		if err := c.sched.Update(k, spec); err != nil {
			c.log.Warn("update remaining work", "job", k, "err", err)
		}
	}
	// New jobs, oldest first, as far as their tenant's MaxJobs and its
	// part of the tenancy's allow: the others wait outside the
	// round.
	sl := c.newSlots(present, known, fresh)
	taken := map[string]int{} // GPUs bound so far to adopted jobs, by node
	largest := c.largestNodes()
	slices.SortStableFunc(fresh, func(a, b *workload) int { return cmp.Or(cmp.Compare(a.created, b.created), cmp.Compare(a.key, b.key)) })
	for _, w := range fresh {
		tn := w.place.Tenant
		if !sl.room(tn) {
			c.waitOutside(w, present, res, sl.why(tn))
			continue
		}
		spec, notes, err := w.spec(env)
		if err == nil {
			if msg := c.unrunnable(w, spec, largest); msg != "" {
				// A pod runs on one node: one larger than every node of
				// its types never runs (the core, which may spread a job
				// over servers, would give it GPUs of several).
				delete(present, w.key)
				delete(res.GPUs, w.key)
				res.Unrunnable = append(res.Unrunnable, w.key)
				c.scratch.unrunnable = append(c.scratch.unrunnable, unrunnableWorkload{w, msg})
				continue
			}
			err = c.sched.Submit(w.key, spec, now)
		}
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				err = fmt.Errorf("%w: %s: %w", ErrMalformed, w.key, err)
			}
			c.tell(w, corev1.EventTypeWarning, ReasonMalformed, err.Error(), false)
			res.Skipped = append(res.Skipped, w.key)
			delete(present, w.key)
			delete(res.GPUs, w.key)
			continue
		}
		sl.take(tn)
		if rec := c.state.Admitted[w.key]; rec != nil && rec.Adopted {
			c.bindAdopted(w, taken)
		}
		for _, n := range notes {
			c.event(w, corev1.EventTypeNormal, ReasonDefault, n)
		}
	}
	c.makeRoom(sl, present, known, res)
	return present
}

// bindAdopted tells the core where an adopted workload runs: its pods'
// nodes, as many GPUs of each as the pods there ask for (which ones does
// not matter to admission), so that the next round keeps it there if the
// policy lets it run on that type.
func (c *Controller) bindAdopted(w *workload, taken map[string]int) {
	var devs []scheduler.Device
	for _, p := range w.pods {
		n, ok := c.nodes[p.Spec.NodeName]
		if !ok || terminal(p) {
			continue
		}
		g, _ := model.PodGPUs(p, c.cfg.Resource)
		for range g {
			if taken[p.Spec.NodeName] < len(n.server.GPUs) {
				devs = append(devs, scheduler.Device{Server: p.Spec.NodeName, Index: n.server.GPUs[taken[p.Spec.NodeName]].Index})
				taken[p.Spec.NodeName]++
			}
		}
	}
	if len(devs) == 0 {
		return
	}
	if err := c.sched.Bind(w.key, devs); err != nil {
		c.log.Warn("bind adopted", "job", w.key, "err", err)
	}
}

// pendingAdmit is an admission decided in a round: its writes, then
// their outcome (the record of what was ungated, or the error).
type pendingAdmit struct {
	key   string
	w     *workload // nil: the job runs already
	typ   topology.GPUType
	nodes []string
	host  *hostTarget // its pods' CPUs and memory (Config.HostProfiles)
	rec   *record
	err   error
}

// writeParallelism bounds the admissions, preemptions and requeued pods
// a round writes at once.
const writeParallelism = 16

// admitAll does the admissions' writes, writeParallelism at a time.
func (c *Controller) admitAll(ctx context.Context, admits []*pendingAdmit, now float64) {
	parallel(len(admits), func(i int) {
		pa := admits[i]
		pa.rec, pa.err = c.admitWrites(ctx, pa.w, pa.typ, pa.nodes, pa.host, now)
	})
}

// admitWrites takes the gate off a workload and steers it to type t (a
// Job resumed); it returns the record of what it ungated, also when a
// later pod failed. It changes nothing of the controller's but the
// overlay of its own writes: several run at once.
func (c *Controller) admitWrites(ctx context.Context, w *workload, t topology.GPUType, nodes []string, host *hostTarget, now float64) (*record, error) {
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
	rec := &record{Type: t, NS: w.ns}
	if w.kind == kindJob {
		err := c.updateJob(ctx, w.job, func(j *batchv1.Job) {
			mark(&j.ObjectMeta)
			j.Spec.Template.Spec.SchedulingGates = dropGate(j.Spec.Template.Spec.SchedulingGates)
			c.affinity(&j.Spec.Template.Spec, t, nodes)
			c.hostOnJob(&j.Spec.Template.Spec, host)
			j.Spec.Suspend = new(bool)
		})
		if err != nil {
			return nil, err
		}
		if host != nil {
			c.event(w, corev1.EventTypeNormal, ReasonHost, "sized at admission: "+host.note)
		}
		rec.UIDs = []types.UID{w.job.UID}
		return rec, nil
	}
	for _, p := range w.pods {
		if terminal(p) {
			continue
		}
		if host != nil && hasGate(p.Spec.SchedulingGates) {
			out, _, err := c.resizePod(ctx, p, host)
			if err != nil {
				c.event(w, corev1.EventTypeWarning, ReasonHost, fmt.Sprintf("pod %s not resized: %v", p.Name, cut(err.Error())))
			}
			p = out
		}
		err := c.updatePod(ctx, p, func(p *corev1.Pod) {
			mark(&p.ObjectMeta)
			if hasGate(p.Spec.SchedulingGates) {
				p.Spec.SchedulingGates = dropGate(p.Spec.SchedulingGates)
				c.affinity(&p.Spec, t, nodes)
			}
		})
		if err == nil {
			rec.UIDs, rec.Pods = append(rec.UIDs, p.UID), append(rec.Pods, p.Name)
		}
		if err != nil {
			return rec, err
		}
	}
	return rec, nil
}

// admitted records an admission whose writes succeeded.
func (c *Controller) admitted(w *workload, t topology.GPUType, rec *record, now float64) {
	w.admitted = t
	c.state.Admitted[w.key] = rec
	c.metrics.admitted(t)
	c.tell(w, corev1.EventTypeNormal, ReasonAdmitted, c.admittedWhy(w, t, now), true)
}

// pendingPreempt is a preemption decided in a round: its writes, then
// their outcome.
type pendingPreempt struct {
	key, reason string
	w           *workload
	deadline    string
	gone        []deletion // pods deleted (without a grace)
	err         error
}

// preemptWrites does a preemption's writes (a Job suspended, or pods
// annotated or deleted, their copies kept). It changes nothing of the
// controller's but the overlay of its own writes: several run at once.
func (c *Controller) preemptWrites(ctx context.Context, pp *pendingPreempt) {
	w := pp.w
	if w.kind == kindJob {
		pp.err = c.updateJob(ctx, w.job, func(j *batchv1.Job) {
			if j.Annotations == nil {
				j.Annotations = map[string]string{}
			}
			j.Annotations[AnnotationPreempted] = pp.reason
			j.Annotations[AnnotationPreemptions] = strconv.Itoa(atoi(j.Annotations[AnnotationPreemptions]) + 1)
			// Only spec.suspend: the API server takes no change to the
			// template of a Job that is not suspended. The job controller
			// deletes its pods.
			j.Spec.Suspend = ptrTo(true)
		})
		return
	}
	pp.deadline = c.wall().Add(c.cfg.Grace).UTC().Format(time.RFC3339Nano)
	for _, p := range w.pods {
		if terminal(p) {
			continue
		}
		if c.cfg.Grace == 0 {
			// Without a grace the pod goes at once (its event says why).
			d, err := c.deleteWrites(ctx, w.key, p)
			if err != nil {
				pp.err = err
				return
			}
			pp.gone = append(pp.gone, d)
			continue
		}
		if pp.err = c.updatePod(ctx, p, func(p *corev1.Pod) {
			if p.Annotations == nil {
				p.Annotations = map[string]string{}
			}
			p.Annotations[AnnotationPreempted] = pp.reason
			p.Annotations[AnnotationDeleteAfter] = pp.deadline
		}); pp.err != nil {
			return
		}
	}
}

// preempted records a preemption's outcome; it returns the writes'
// error.
func (c *Controller) preempted(pp *pendingPreempt) error {
	w := pp.w
	for _, d := range pp.gone {
		c.deleted(w.key, d)
	}
	if pp.err != nil {
		return pp.err
	}
	c.metrics.preempted(PreemptLeaseEnded)
	if w.kind == kindJob {
		delete(c.state.Admitted, w.key)
		c.follow(w.key, w.podIndex())
		c.tell(w, corev1.EventTypeNormal, ReasonPreempted, "suspended: "+pp.reason, false)
		return nil
	}
	if rec := c.state.Admitted[w.key]; rec != nil {
		rec.DeleteAfter = pp.deadline
	}
	c.follow(w.key, w.podIndex())
	c.tell(w, corev1.EventTypeNormal, ReasonPreempted, fmt.Sprintf("%s; deleted after %v and created again, gated", pp.reason, c.cfg.Grace), false)
	return nil
}

// parallel runs f(0) ... f(n-1), writeParallelism at a time.
func parallel(n int, f func(i int)) {
	if n == 1 {
		f(0)
		return
	}
	var wg sync.WaitGroup
	next := make(chan int)
	for range min(writeParallelism, n) {
		wg.Go(func() {
			for i := range next {
				f(i)
			}
		})
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
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
	if rec := c.state.Admitted[w.key]; rec != nil {
		rec.DeleteAfter = ""
	}
	return nil
}

// deleteAndRequeue deletes a preempted pod and, for a bare pod, keeps a
// gated copy, in a ConfigMap of its own, to create once it is gone; a pod
// another controller owns is only deleted (its controller creates it
// again). The pod leaves the workload's record.
func (c *Controller) deleteAndRequeue(ctx context.Context, key string, p *corev1.Pod) error {
	d, err := c.deleteWrites(ctx, key, p)
	if err != nil {
		return err
	}
	c.deleted(key, d)
	return nil
}

// deletion is a pod deleted, and the copy kept of it (none: Copy "").
type deletion struct {
	uid  types.UID
	copy requeued
	b    []byte
}

// deleteWrites keeps a bare pod's gated, signed copy and deletes the pod
// with the grace min(its own, Config.MaxDeletionGrace); a pod too large
// for a copy is deleted without one (Warning event ReasonNotRequeued: it
// is not created again). It reads the controller's records and changes
// nothing of the controller's but the overlay of its own writes: several
// run at once.
func (c *Controller) deleteWrites(ctx context.Context, key string, p *corev1.Pod) (deletion, error) {
	d := deletion{uid: p.UID}
	uid := p.UID
	var noCopy error
	if controllerOf(p) == nil && !slices.ContainsFunc(c.state.Requeue[key], func(r requeued) bool { return r.Old == uid }) {
		var err error
		if noCopy, err = c.keepCopy(ctx, p, &d); err != nil {
			return d, err
		}
	}
	if err := c.deleteWithGrace(ctx, p, c.deletionGrace(p)); err != nil {
		return d, err
	}
	if noCopy != nil {
		c.eventOn(corev1.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: p.Namespace, Name: p.Name, UID: uid}, corev1.EventTypeWarning, ReasonNotRequeued,
			fmt.Sprintf("preempted and deleted without a copy: it cannot be requeued (created again, gated): %v", noCopy))
	}
	return d, nil
}

// keepCopy writes a bare pod's gated copy, signed, to create it again
// once it is gone (d says which); a pod too large for a copy gets none,
// and noCopy says why.
func (c *Controller) keepCopy(ctx context.Context, p *corev1.Pod, d *deletion) (noCopy, err error) {
	b, err := podCopy(requeueCopy(p, c.cfg.NodeSelector))
	if errors.Is(err, errCopyTooLarge) {
		return err, nil
	}
	if err != nil {
		return nil, fmt.Errorf("admission: %w", err)
	}
	ns, name := c.cfg.stateLocation()
	d.copy = requeued{NS: p.Namespace, Name: p.Name, Old: p.UID, Copy: requeueName(name, p.Namespace, p.Name)}
	d.b = b
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: d.copy.Copy, Namespace: ns,
		Labels: map[string]string{labelStateOf: name + "-requeue"}}, BinaryData: map[string][]byte{requeueKey: b},
		Data: map[string]string{copyMACKey: c.copyKey.sign(d.copy, b)}}
	if !c.cfg.NoState {
		if err := c.createCopy(ctx, cm); err != nil {
			return nil, err
		}
	}
	return nil, nil
}

// deleted records a pod's deletion: its copy waits to be created again,
// and it leaves the workload's record.
func (c *Controller) deleted(key string, d deletion) {
	if d.copy.Copy != "" {
		c.state.Requeue[key] = append(c.state.Requeue[key], d.copy)
		if len(c.memCopies) < maxRecords {
			c.memCopies[d.copy.Copy] = d.b
		}
	}
	if rec := c.state.Admitted[key]; rec != nil {
		if i := slices.Index(rec.UIDs, d.uid); i >= 0 {
			rec.UIDs = slices.Delete(rec.UIDs, i, i+1)
			if i < len(rec.Pods) {
				rec.Pods = slices.Delete(rec.Pods, i, i+1)
			}
		}
		if len(rec.UIDs) == 0 {
			delete(c.state.Admitted, key)
		}
	}
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
	cp.Annotations[AnnotationPreemptions] = strconv.Itoa(min(atoi(p.Annotations[AnnotationPreemptions]), 1<<30) + 1)
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
// requeued pods whose old copies are gone; and it preempts at once the
// workloads the watches showed running without admission (which a round
// would otherwise find only at its start). Round sweeps first; Run sweeps
// every second.
func (c *Controller) Sweep(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.retry.newPass(false)
	if err := c.enforceHinted(ctx); err != nil {
		return err
	}
	return c.sweep(ctx)
}

// enforceHinted checks the workloads the watches showed running without a
// gate (most are the controller's own admissions, which its records tell
// apart) and preempts those that bypassed admission, as a round would
// (hintedObjects). Before the first round of a clean start it waits: the
// round adopts what runs.
func (c *Controller) enforceHinted(ctx context.Context) error {
	if c.adopt || c.ten == nil {
		return nil
	}
	hints := c.caches.takeHints()
	grown := c.preemptGrown(ctx, c.grownHinted(hints))
	pods, jobs := c.hintedObjects(hints)
	if len(pods) == 0 && len(jobs) == 0 {
		return c.saveIf(ctx, grown)
	}
	res := &RoundResult{}
	ws := collect(pods, c.caches.own.jobs(jobs), c.cfg.Resource, c.ten.Managed, c.state.Admitted, c.caches.gang)
	c.enforce(ctx, c.withinBudget(ws), res)
	if len(res.Bypassed) == 0 {
		return c.saveIf(ctx, grown)
	}
	c.bypassed = append(c.bypassed, res.Bypassed...)
	if c.cfg.NoState {
		return nil
	}
	return c.save(ctx)
}

// hintedObjects reads the hinted workloads from the caches, as a round
// would see them: the pods of each hinted pod or group key (those that
// name a Job as their controller too), each hinted Job, admitted or not,
// and with each Job all the pods that name it, so that the selection of
// its pods (jobPods) is the round's: one that is not really the Job's is
// a bare pod, preempted at once if it runs without admission (issue #40
// review: before, a pod naming a Job was never checked between rounds,
// and one forged after each round ran until the next). A workload the
// controller admitted is read too: its records tell its pods from others.
func (c *Controller) hintedObjects(hints map[string]bool) ([]*corev1.Pod, []*batchv1.Job) {
	h := hinted{pods: map[types.UID]*corev1.Pod{}, jobs: map[types.UID]*batchv1.Job{}}
	for _, key := range sortedKeys(hints) {
		kind, rest, _ := strings.Cut(key, "/")
		if kind == "job" {
			ns, name, _ := strings.Cut(rest, "/")
			c.hintJob(&h, ns, name, "")
			continue
		}
		for _, p := range append(c.podsOf(key), c.podsOf(jobOwnedIndex(key))...) {
			h.pods[p.UID] = p
			if o := controllerOf(p); o != nil && o.Kind == "Job" {
				c.hintJob(&h, p.Namespace, o.Name, o.UID)
			}
		}
	}
	pods := slices.Collect(maps.Values(h.pods))
	slices.SortFunc(pods, func(a, b *corev1.Pod) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	})
	jobs := slices.Collect(maps.Values(h.jobs))
	slices.SortFunc(jobs, func(a, b *batchv1.Job) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	})
	return pods, jobs
}

// hinted are the pods and Jobs a Sweep reads, by UID.
type hinted struct {
	pods map[types.UID]*corev1.Pod
	jobs map[types.UID]*batchv1.Job
}

// hintJob adds the cached Job of a namespace and name (if it has the UID,
// when one is given) and every pod that names it as its controller.
func (c *Controller) hintJob(h *hinted, ns, name string, uid types.UID) {
	j, err := c.caches.jobs.Jobs(ns).Get(name)
	if err != nil || uid != "" && j.UID != uid || h.jobs[j.UID] != nil {
		return
	}
	h.jobs[j.UID] = j
	for _, p := range c.podsOf(jobPodIndex(ns, j.UID)) {
		h.pods[p.UID] = p
	}
}

func (c *Controller) sweep(ctx context.Context) error {
	changed := c.sweepGraces(ctx)
	if c.requeue(ctx) {
		changed = true
	}
	c.expediteDeletions(ctx)
	c.countAfterLease(c.wall())
	if changed && !c.cfg.NoState {
		return c.save(ctx)
	}
	return nil
}

// sweepGraces deletes the preempted pods whose grace is over (their
// copies kept) and forgets those gone; it reports whether a record
// changed.
func (c *Controller) sweepGraces(ctx context.Context) bool {
	changed := false
	now := c.wall()
	for _, key := range slices.Sorted(maps.Keys(c.state.Admitted)) {
		rec := c.state.Admitted[key]
		if rec.DeleteAfter == "" {
			continue
		}
		if t, err := time.Parse(time.RFC3339Nano, rec.DeleteAfter); err == nil && now.Before(t) {
			continue
		}
		for i := len(rec.Pods) - 1; i >= 0; i-- {
			p := c.getPod(rec.NS, rec.Pods[i])
			switch {
			case p == nil || p.UID != rec.UIDs[i]:
				rec.UIDs, rec.Pods = slices.Delete(rec.UIDs, i, i+1), slices.Delete(rec.Pods, i, i+1)
				changed = true
			case p.DeletionTimestamp != nil || terminal(p):
			default:
				changed = c.sweepDelete(ctx, key, p, now) || changed
			}
		}
		if r := c.state.Admitted[key]; r != nil && len(r.UIDs) == 0 {
			delete(c.state.Admitted, key)
		}
	}
	return changed
}

// requeue creates again the requeued pods whose old copies are gone; it
// reports whether any entry was settled. The pods created are in
// c.created, by workload key. An entry is tried when its backoff (after
// a failure) is over and its tenant's budget has room; none is tried
// before a tenancy has loaded (a copy is created only in a namespace it
// manages).
func (c *Controller) requeue(ctx context.Context) bool {
	c.created = map[string][]*corev1.Pod{}
	if c.ten == nil {
		return false
	}
	now := c.wall()
	var tasks, todo []*requeueTask
	for _, key := range slices.Sorted(maps.Keys(c.state.Requeue)) {
		for _, rq := range c.state.Requeue[key] {
			t := &requeueTask{key: key, rq: rq, tenant: c.tenantOf(rq.NS)}
			// The cache says whether the old pod is still there; only when
			// it looks gone, or was deleted lately, is the API asked (so a
			// pod is never created twice, nor its copy dropped, on a stale
			// cache).
			cur := c.getPod(rq.NS, rq.Name)
			t.ask = cur != nil && cur.UID == rq.Old
			t.b, t.mem = c.memCopies[rq.Copy]
			switch {
			case t.ask && !c.caches.own.askAPI(rq.Old):
				t.wait = true // terminating
			case !c.retry.due(rq.Copy, now) || !c.retry.take(t.tenant, t.cost(c.cfg.NoState)):
				t.wait = true
			default:
				todo = append(todo, t)
			}
			tasks = append(tasks, t)
		}
	}
	parallel(len(todo), func(i int) { c.requeueOne(ctx, todo[i], now) })
	return c.requeued(tasks)
}

// requeueTask is one requeued pod of a requeue, and what became of it.
type requeueTask struct {
	key, tenant string
	rq          requeued
	b           []byte
	mem         bool // b is this process's own copy
	ask         bool // the cache still shows the old pod: the API is asked first
	wait        bool // not tried
	out         requeueOutcome
}

// cost is the requests a requeued pod's try takes at least: its copy
// read (unless in memory), the API asked (if the cache still shows the
// old pod), the pod created.
func (t *requeueTask) cost(noState bool) int {
	n := 1
	if !t.mem && !noState {
		n++
	}
	if t.ask {
		n++
	}
	return n
}

// requeued records what became of a requeue's tasks; it reports whether
// any entry was settled.
func (c *Controller) requeued(tasks []*requeueTask) bool {
	ns, name := c.cfg.stateLocation()
	changed := false
	left := map[string][]requeued{}
	for _, t := range tasks {
		if t.out.read != nil && len(c.memCopies) < maxRecords {
			c.memCopies[t.rq.Copy] = t.out.read // read and checked once
		}
		switch {
		case t.wait || t.out.keep:
			left[t.key] = append(left[t.key], t.rq)
			continue
		case t.out.created != nil:
			c.created[t.key] = append(c.created[t.key], t.out.created)
		case t.out.bad != nil:
			c.eventOn(corev1.ObjectReference{Kind: "ConfigMap", APIVersion: "v1", Namespace: ns, Name: name}, corev1.EventTypeWarning, ReasonBadCopy,
				fmt.Sprintf("a requeued pod's copy was dropped, not created: %v", t.out.bad))
		}
		delete(c.memCopies, t.rq.Copy)
		changed = true
	}
	for key := range c.state.Requeue {
		if len(left[key]) == 0 {
			delete(c.state.Requeue, key)
		} else {
			c.state.Requeue[key] = left[key]
		}
	}
	return changed
}

// requeueOutcome says what became of a requeued pod: it waits still
// (keep), or it was created again (created, unless it existed already)
// and its copy is gone, or its copy failed its checks (bad) and is gone.
// read is the copy read from its ConfigMap (checked), to keep in memory.
type requeueOutcome struct {
	keep    bool
	created *corev1.Pod
	bad     error
	read    []byte
}

// The name of a requeued pod, as the API shows it.
const (
	nameFree  = iota // no pod of that name
	nameOld          // the old pod, terminating
	nameOther        // another pod (created again already, or the tenant's)
)

// requeueOne creates a requeued pod again from its copy (t.b, when t.mem;
// else its ConfigMap, checked: decodeCopy) if the old one is gone, and
// deletes the copy; a failure backs the entry off, and the requests past
// the try's cost (taken before) are charged to its tenant. It changes
// nothing of the controller's but the overlay of its own writes and the
// retrier's: several run at once.
func (c *Controller) requeueOne(ctx context.Context, t *requeueTask, now time.Time) {
	rq, spent := t.rq, 0
	defer func() { c.retry.charge(t.tenant, spent-t.cost(c.cfg.NoState)) }()
	keep := func() { t.out.keep = true; c.retry.failed(rq.Copy, now) }
	done := func() {
		spent += c.deleteCopy(ctx, rq.Copy)
		c.retry.succeeded(rq.Copy)
	}
	pods := c.cfg.Client.CoreV1().Pods(rq.NS)
	if t.ask {
		spent++
		switch st, err := c.nameOf(ctx, rq); {
		case err != nil:
			keep()
			return
		case st == nameOld:
			t.out.keep = true // still terminating
			return
		case st == nameOther:
			done()
			return
		}
	}
	cp, ok := c.copyOf(ctx, t, now, &spent)
	if !ok {
		return
	}
	spent++
	p, err := pods.Create(ctx, cp, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		spent++
		switch st, err := c.nameOf(ctx, rq); {
		case err != nil || st != nameOther:
			keep() // the old pod still there, or gone meanwhile
		default:
			done() // created again already
		}
		return
	}
	if err != nil {
		c.log.Warn("requeue: create pod", "pod", rq.NS+"/"+rq.Name, "err", err)
		keep()
		return
	}
	t.out.created = p
	c.caches.own.wrotePod(p, true)
	done()
}

// copyOf returns a requeued pod's copy, checked (decodeCopy): its own
// copy in memory, else its ConfigMap's; a copy that fails its checks is
// deleted (t.out.bad), one that cannot be read yet is kept (t.out.keep).
func (c *Controller) copyOf(ctx context.Context, t *requeueTask, now time.Time, spent *int) (*corev1.Pod, bool) {
	rq := t.rq
	b, mac := t.b, ""
	if !t.mem && !c.cfg.NoState {
		ns, _ := c.cfg.stateLocation()
		*spent++
		cm, err := c.cfg.Client.CoreV1().ConfigMaps(ns).Get(ctx, rq.Copy, metav1.GetOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			c.log.Warn("requeue: get copy", "configmap", rq.Copy, "err", err)
			t.out.keep = true
			c.retry.failed(rq.Copy, now)
			return nil, false
		}
		if err == nil {
			b, mac = cm.BinaryData[requeueKey], cm.Data[copyMACKey]
		}
	}
	cp, err := c.copyKey.decodeCopy(rq, b, mac, t.mem, c.ten.Managed)
	if err != nil {
		t.out.bad = err
		*spent += c.deleteCopy(ctx, rq.Copy)
		c.retry.succeeded(rq.Copy)
		return nil, false
	}
	if !t.mem {
		t.out.read = b
	}
	return cp, true
}

// nameOf asks the API whether a requeued pod's name is free, still the
// old pod's, or another pod's.
func (c *Controller) nameOf(ctx context.Context, rq requeued) (int, error) {
	cur, err := c.cfg.Client.CoreV1().Pods(rq.NS).Get(ctx, rq.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return nameFree, nil
	case err != nil:
		c.log.Warn("requeue: get pod", "pod", rq.NS+"/"+rq.Name, "err", err)
		return 0, err
	case cur.UID == rq.Old:
		return nameOld, nil
	}
	return nameOther, nil
}

// createCopy writes a requeued pod's copy: a new ConfigMap, created in
// one request (replaced if one of that name is left over). Several run at
// once.
func (c *Controller) createCopy(ctx context.Context, cm *corev1.ConfigMap) error {
	cms := c.cfg.Client.CoreV1().ConfigMaps(cm.Namespace)
	_, err := cms.Create(ctx, cm, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		var cur *corev1.ConfigMap
		if cur, err = cms.Get(ctx, cm.Name, metav1.GetOptions{}); err == nil {
			cur = cur.DeepCopy()
			cur.Labels, cur.Data, cur.BinaryData = cm.Labels, cm.Data, cm.BinaryData
			_, err = cms.Update(ctx, cur, metav1.UpdateOptions{})
		}
	}
	if err != nil {
		return fmt.Errorf("admission: saving a preempted pod's copy %s/%s: %w", cm.Namespace, cm.Name, err)
	}
	return nil
}

// deleteCopy deletes a requeued pod's ConfigMap (the caller forgets its
// copy in memory); it returns the requests it sent.
func (c *Controller) deleteCopy(ctx context.Context, name string) int {
	if c.cfg.NoState {
		return 0
	}
	ns, _ := c.cfg.stateLocation()
	if err := c.cfg.Client.CoreV1().ConfigMaps(ns).Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		c.log.Warn("deleting a requeued pod's copy", "configmap", name, "err", err)
	}
	return 1
}

func (c *Controller) updatePod(ctx context.Context, p *corev1.Pod, mutate func(*corev1.Pod)) error {
	pods := c.cfg.Client.CoreV1().Pods(p.Namespace)
	_, err := retried(c, p, func() (*corev1.Pod, error) { return pods.Get(ctx, p.Name, metav1.GetOptions{}) },
		(*corev1.Pod).DeepCopy, func(p *corev1.Pod) bool { mutate(p); return true },
		func(p *corev1.Pod) (*corev1.Pod, error) { return pods.Update(ctx, p, metav1.UpdateOptions{}) },
		func(out *corev1.Pod) { c.caches.own.wrotePod(out, false) })
	return err
}

func (c *Controller) updateJob(ctx context.Context, j *batchv1.Job, mutate func(*batchv1.Job)) error {
	jobs := c.cfg.Client.BatchV1().Jobs(j.Namespace)
	_, err := retried(c, j, func() (*batchv1.Job, error) { return jobs.Get(ctx, j.Name, metav1.GetOptions{}) },
		(*batchv1.Job).DeepCopy, func(j *batchv1.Job) bool { mutate(j); return true },
		func(j *batchv1.Job) (*batchv1.Job, error) { return jobs.Update(ctx, j, metav1.UpdateOptions{}) },
		c.caches.own.wroteJob)
	return err
}

// retried writes obj changed by mutate (a copy; nothing is written when
// mutate reports no change), and on a conflict reads it again with get
// and retries (client-go's retry.DefaultRetry); wrote sees what was
// written. It returns whether a write succeeded.
func retried[T any](c *Controller, obj T, get func() (T, error), clone func(T) T, mutate func(T) bool, write func(T) (T, error), wrote func(T)) (bool, error) {
	first, written := true, false
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur := obj
		if !first {
			var err error
			if cur, err = get(); err != nil {
				return err
			}
		}
		first = false
		cur = clone(cur)
		if !mutate(cur) {
			return nil
		}
		out, err := write(cur)
		if apierrors.IsConflict(err) {
			c.metrics.conflict()
		}
		if err == nil {
			wrote(out)
			written = true
		}
		return err
	})
	return written, err
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

func cut1k(s string) string {
	if len(s) > 1024 {
		return s[:1024]
	}
	return s
}
