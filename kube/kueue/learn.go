package kueue

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/gpusched/gpusched/flavor"
	"github.com/gpusched/gpusched/kube/model"
	"github.com/gpusched/gpusched/perfmodel/learn"
	"github.com/gpusched/gpusched/scheduler"
	"github.com/gpusched/gpusched/topology"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
)

// Learning (issue #41). With Config.Estimator the controller learns each
// workload's rates from its progress instead of taking them from
// annotations: every round registers the pending and admitted Workloads
// it reads with the estimator (their GPUs, their program's group,
// model.ProgramGroup, and their claims as weak evidence) and steers them
// by its estimates, normalised per workload (their scale buys nothing)
// and bounded by Config.Rates' maxRatio as claims are; the progress
// channel (kube/progress) resolves a pod's reports to its Workload
// (Workload) and passes them to the estimator on the type and GPU count
// of the flavor Kueue admitted the Workload on (Progress). Kueue never
// moves an admitted workload, so a workload is measured on one type: what
// is learned of a program reaches its next runs through their group.

// DefaultRefit is Config.Refit's default.
const DefaultRefit = 30 * time.Minute

// DefaultExplore is Config.Explore's default: 5% of the GPUs.
const DefaultExplore = 0.05

// maxResolved bounds the cache of resolved pods (cleared when full).
const maxResolved = 1 << 16

// maxRestarts bounds the segments of one admission (restarts in place):
// a segment is the admission's second times maxRestarts plus the
// restarts.
const maxRestarts = 1 << 10

// restartCount is a Workload's restarts in place within its admission
// (the admission's segment).
type restartCount struct{ seg, n uint64 }

// learning is the controller's state for learned rates, under its own
// mutex (the progress channel's calls never wait for a round).
type learning struct {
	mu sync.Mutex
	// keys are the Workloads registered with the estimator (by key, with
	// their UIDs), seen the round they were registered at.
	keys map[string]learnedKey
	// resolved caches the pods resolved to a Workload, by pod UID.
	resolved map[types.UID]resolvedPod
	// refitAt is the clock at the last refit (refitted: there was one).
	refitAt  float64
	refitted bool
	// exploring are the admitted workloads started on a type where their
	// rate was optimistic, by key; budget is what is left of each
	// ClusterQueue's part of Config.Explore's GPUs in the round (set at
	// its start, spent by each workload given optimistic rates).
	exploring map[string]explorer
	budget    map[string]float64
	// restarts counts each Workload's restarts in place (by key).
	restarts map[string]restartCount
}

// explorer is an exploring workload's GPUs and ClusterQueue.
type explorer struct {
	gpus int
	cq   string
}

type learnedKey struct {
	uid   types.UID
	round int
}

type resolvedPod struct {
	key string
	uid types.UID // the Workload's
	seg uint64    // the admission the pod was resolved in
}

// indexOwner indexes the Workloads by the UID of their controller (the
// Job or pod Kueue made the Workload for).
const indexOwner = "owner"

func workloadOwner(obj any) ([]string, error) {
	w, ok := obj.(*Workload)
	if !ok {
		return nil, nil
	}
	for _, o := range w.OwnerReferences {
		if o.Controller != nil && *o.Controller {
			return []string{string(o.UID)}, nil
		}
	}
	return nil, nil
}

// clock is the learner's time in seconds: Config.Clock, else Now's.
func (c *Controller) clock() float64 {
	if c.cfg.Clock != nil {
		return c.cfg.Clock()
	}
	return float64(c.now().UnixNano()) / 1e9
}

// refit refits the estimator's population at most every Config.Refit of
// the learner's clock (a round's first step).
func (c *Controller) refit() {
	if c.cfg.Estimator == nil {
		return
	}
	now := c.clock()
	c.learn.mu.Lock()
	due := !c.learn.refitted || now-c.learn.refitAt >= c.cfg.Refit.Seconds()
	if due {
		c.learn.refitted, c.learn.refitAt = true, now
	}
	c.learn.mu.Unlock()
	if due {
		c.cfg.Estimator.Refresh()
	}
}

// exploreBudget sets whether this round may explore: the GPUs held by
// exploring workloads below Config.Explore of the steered flavors'
// nominal GPUs.
func (c *Controller) exploreBudget(s *snapshot) {
	if c.cfg.Estimator == nil {
		return
	}
	clear(c.learn.budget)
	if c.cfg.Explore <= 0 {
		return
	}
	for i := range s.queues.Len() {
		q := s.queues.Queue(i)
		total := 0
		for _, f := range q.Flavors {
			total += f.Nominal
		}
		c.learn.budget[q.Name] += c.cfg.Explore * float64(total)
	}
	for _, e := range c.learn.exploring {
		c.learn.budget[e.cq] -= float64(e.gpus)
	}
}

// noteExplore notes a workload that starts on a type where its rate was
// optimistic: it explores, against the budget, until it is gone. It
// reports whether it does.
func (c *Controller) noteExplore(r *read, d flavor.Decision) bool {
	if (d.Why == flavor.Start || d.Why == flavor.Preempt) && d.Type >= 0 && d.Type < len(r.optimistic) && r.optimistic[d.Type] {
		c.learn.exploring[r.key] = explorer{gpus: r.gpus, cq: r.cq}
		return true
	}
	return false
}

// learnedRates registers a Workload read in a round with the estimator
// and returns its learned rates on the allowed types: each the
// estimate's median at its GPUs where the estimator knows something, the
// geometric mean of those elsewhere, all over the fastest; nil where it
// knows nothing (the same rate on every type). Its claims (what its
// annotations say) are weak evidence, never its rates once anything of
// it or its program is measured; until then they are its rates (none:
// the same rate everywhere), as without learning. While the round
// may explore, a type where neither the workload nor its program was
// measured is rated at its upper confidence bound where that beats the
// best measured type (optimistic lists those types).
func (c *Controller) learnedRates(r *read, ps *podSets, claimed map[topology.GPUType]float64, allowed []topology.GPUType) (map[topology.GPUType]float64, []topology.GPUType, error) {
	w := r.w
	info := learn.JobInfo{GPUs: r.gpus, Group: model.ProgramGroup(w.Namespace, &w.Spec.PodSets[r.podSets[0]].Template.Spec, r.gpus, ps.ann)}
	for t, v := range claimed {
		if slices.Contains(allowed, t) && v > 0 {
			if info.Claims == nil {
				info.Claims = map[topology.GPUType]float64{}
			}
			info.Claims[t] = v
		}
	}
	c.learn.mu.Lock()
	if k, ok := c.learn.keys[r.key]; ok && k.uid != w.UID {
		// Another Workload of the same name (a Job deleted and made
		// again): not the old one's measurements.
		c.cfg.Estimator.Forget(r.key)
	}
	err := c.cfg.Estimator.Register(r.key, info)
	if err == nil {
		c.learn.keys[r.key] = learnedKey{uid: w.UID, round: c.rounds}
	}
	c.learn.mu.Unlock()
	if errors.Is(err, learn.ErrLimit) {
		// The estimator is full (Config.MaxJobs): the workload is steered
		// by its claims, as without learning, rather than left unread.
		return info.Claims, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	est := c.cfg.Estimator.Estimates(r.key, nil)
	out := map[topology.GPUType]float64{}
	sum, best := 0.0, 0.0
	for _, e := range est {
		if e.Source == learn.SourceNone || !slices.Contains(allowed, e.Type) {
			continue
		}
		if v := e.Rate(r.gpus); v > 0 && !math.IsInf(v, 0) {
			out[e.Type] = v
			sum += math.Log(v)
			if e.Source == learn.SourceMeasured || e.Source == learn.SourceGroup {
				best = max(best, v)
			}
		}
	}
	if !w.HasQuotaReservation() {
		// Of the types it may run on.
		mine := make([]learn.Estimate, 0, len(est))
		for _, e := range est {
			if slices.Contains(allowed, e.Type) {
				mine = append(mine, e)
			}
		}
		r.learned = model.LearnedMessage(mine, learn.SourceMeasured, learn.SourceGroup)
	}
	if len(out) == 0 || best == 0 {
		// Nothing measured of the workload or its program: the priors
		// alone would compare the types through other programs, each
		// measured on one type under Kueue (the population's per-type
		// medians are those of whichever programs ran there), which
		// misleads more than it tells (TestE2ELearnKueue: the first
		// half of the jobs ran 2.08 times slower than on their best
		// type with them, 1.71 with the same rate everywhere). Its
		// claims, if any, are its rates, as without learning.
		return info.Claims, nil, nil
	}
	var optimistic []topology.GPUType
	if c.learn.budget[r.cq] >= float64(r.gpus) && !w.HasQuotaReservation() {
		for _, e := range est {
			v, ok := out[e.Type]
			if !ok || e.Source == learn.SourceMeasured || e.Source == learn.SourceGroup {
				continue
			}
			if up := v * math.Exp(e.Sigma); up > best && !math.IsInf(up, 0) {
				out[e.Type] = up
				optimistic = append(optimistic, e.Type)
			}
		}
		if len(optimistic) > 0 {
			c.learn.budget[r.cq] -= float64(r.gpus)
		}
	}
	fallback := math.Exp(sum / float64(len(out)))
	top := 0.0
	for _, t := range allowed {
		if _, ok := out[t]; !ok {
			out[t] = fallback
		}
		top = max(top, out[t])
	}
	for t, v := range out {
		out[t] = v / top
	}
	return out, optimistic, nil
}

// forgetGone drops from the estimator the Workloads no longer read (they
// finished, or were deleted): what they measured stays in the
// population and their group (a round's last step).
func (c *Controller) forgetGone() {
	if c.cfg.Estimator == nil {
		return
	}
	c.learn.mu.Lock()
	defer c.learn.mu.Unlock()
	for k, v := range c.learn.keys {
		if v.round != c.rounds {
			delete(c.learn.keys, k)
			delete(c.learn.exploring, k)
			delete(c.learn.restarts, k)
			// Under the mutex: a report between the check of its key
			// and its Observe would register the job again, untracked.
			c.cfg.Estimator.Forget(k)
		}
	}
}

// Workload resolves the pod of a progress report to the Workload whose
// rates the estimator learns (the progress channel's resolver,
// kube/progress: the pod's namespace, name and UID come from its
// service-account token, checked by the channel): the pod must exist
// with that UID, be bound and running; its controller a Job of its
// namespace with the UID the pod names, whose selector matches the pod
// (its Workload the Job's or, for a JobSet's Job, the JobSet's or the
// JobSet's TrainJob's), a
// Kubeflow training job (PyTorchJob, TFJob, XGBoostJob, PaddleJob,
// JAXJob, MPIJob), or none (the pod itself, under Kueue's pod
// integration); and that Workload must hold a quota reservation and be
// one the controller learns. A pod's answer is cached by its UID (the
// Workload's reservation is checked again at every report). It reads the
// pod and the Job from the API server (one GET each, once per pod). Safe
// for concurrent use; never waits for a round.
func (c *Controller) Workload(namespace, pod string, uid types.UID) (string, bool) {
	if c.cfg.Estimator == nil {
		return "", false
	}
	c.learn.mu.Lock()
	rp, ok := c.learn.resolved[uid]
	c.learn.mu.Unlock()
	if ok {
		if c.stillLearned(rp) {
			return rp.key, true
		}
		// Its Workload was admitted again (or is gone): the pod may be
		// a terminating one of the old admission; resolve it afresh.
		c.learn.mu.Lock()
		delete(c.learn.resolved, uid)
		c.learn.mu.Unlock()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	p, err := c.cfg.Client.CoreV1().Pods(namespace).Get(ctx, pod, metav1.GetOptions{})
	if err != nil || p.UID != uid || p.Namespace != namespace || p.Spec.NodeName == "" || p.DeletionTimestamp != nil || p.Status.Phase != corev1.PodRunning {
		return "", false
	}
	owners, ok := c.podOwners(ctx, p)
	if !ok {
		return "", false
	}
	var objs []any
	for _, owner := range owners {
		if objs, err = c.wl.GetIndexer().ByIndex(indexOwner, string(owner)); err != nil {
			return "", false
		}
		if len(objs) > 0 {
			break
		}
	}
	for _, o := range objs {
		w, ok := o.(*Workload)
		if !ok || w.Namespace != namespace {
			continue
		}
		rp := resolvedPod{key: w.Namespace + "/" + w.Name, uid: w.UID}
		_, _, seg, err := c.admittedOn(rp.key)
		if err != nil || p.CreationTimestamp.Unix() < int64(seg) {
			// A pod made before the Workload's admission is one of an
			// earlier admission's (terminating): its steps are not
			// this admission's.
			continue
		}
		rp.seg = seg
		if !c.stillLearned(rp) {
			continue
		}
		c.learn.mu.Lock()
		if len(c.learn.resolved) >= maxResolved {
			clear(c.learn.resolved)
		}
		c.learn.resolved[uid] = rp
		c.learn.mu.Unlock()
		return rp.key, true
	}
	return "", false
}

// podOwnerKinds are the controllers of pods, other than a batch/v1 Job,
// whose Workload a pod's reports go to: the kinds gpusched-kueue gates
// whose operators own their pods directly (Kubeflow's training jobs).
var podOwnerKinds = map[string]bool{
	"kubeflow.org/v1/PyTorchJob": true, "kubeflow.org/v1/TFJob": true, "kubeflow.org/v1/XGBoostJob": true,
	"kubeflow.org/v1/PaddleJob": true, "kubeflow.org/v1/JAXJob": true, "kubeflow.org/v2beta1/MPIJob": true,
}

// podOwners lists, nearest first, the UIDs a pod's Workload may be owned
// by: the pod itself without a controller (Kueue's pod integration); its
// batch/v1 Job (read from the API server: the UID the pod names, a
// selector that selects it), that Job's own controller (a JobSet, or an
// MPIJob's launcher Job's MPIJob) and, for a JobSet, the JobSet's own
// controller (a Kubeflow TrainJob; the JobSet read through the dynamic
// client, its UID the one the Job names); or its controller of a kind of
// podOwnerKinds. Any other controller resolves to nothing. The pod's
// namespace is the tenant's, so an owner reference it wrote moves only
// its own namespace's workloads.
func (c *Controller) podOwners(ctx context.Context, p *corev1.Pod) ([]types.UID, bool) {
	o := metav1.GetControllerOf(p)
	switch {
	case o == nil:
		return []types.UID{p.UID}, true
	case podOwnerKinds[o.APIVersion+"/"+o.Kind]:
		return []types.UID{o.UID}, true
	case o.Kind != "Job" || o.APIVersion != "batch/v1":
		return nil, false
	}
	j, err := c.cfg.Client.BatchV1().Jobs(p.Namespace).Get(ctx, o.Name, metav1.GetOptions{})
	if err != nil || j.UID != o.UID || j.Spec.Selector == nil {
		return nil, false
	}
	sel, err := metav1.LabelSelectorAsSelector(j.Spec.Selector)
	if err != nil || sel.Empty() || !sel.Matches(labels.Set(p.Labels)) {
		return nil, false
	}
	owners := []types.UID{j.UID}
	jo := metav1.GetControllerOf(j)
	if jo == nil {
		return owners, true
	}
	owners = append(owners, jo.UID)
	if jo.Kind == "JobSet" && strings.HasPrefix(jo.APIVersion, "jobset.x-k8s.io/") {
		gvr, err := ownerResource(*jo)
		if err != nil {
			return owners, true
		}
		js, err := c.cfg.Dynamic.Resource(gvr).Namespace(p.Namespace).Get(ctx, jo.Name, metav1.GetOptions{})
		if err == nil && js.GetUID() == jo.UID {
			if to := metav1.GetControllerOfNoCopy(js); to != nil {
				owners = append(owners, to.UID)
			}
		}
	}
	return owners, true
}

// stillLearned reports whether a resolved Workload is still one the
// controller learns, the same object (UID), holding the quota
// reservation the pod was resolved in.
func (c *Controller) stillLearned(rp resolvedPod) bool {
	c.learn.mu.Lock()
	k, ok := c.learn.keys[rp.key]
	c.learn.mu.Unlock()
	if !ok || k.uid != rp.uid {
		return false
	}
	_, _, seg, err := c.admittedOn(rp.key)
	return err == nil && seg == rp.seg
}

// admittedOn returns the GPU type and count a Workload holds quota for
// (its flavors' GPUs of Config.Resources, all of one type: a Workload
// across two types has no one rate), and the segment of its admission: the Unix second its quota
// was reserved (a Workload evicted and admitted again is a new segment).
func (c *Controller) admittedOn(key string) (topology.GPUType, int, uint64, error) {
	o, ok, err := c.wl.GetStore().GetByKey(key)
	if err != nil || !ok {
		return "", 0, 0, fmt.Errorf("%w: Workload %s", scheduler.ErrUnknownJob, key)
	}
	w, ok := o.(*Workload)
	if !ok || w.decodeErr != nil || !w.HasQuotaReservation() || w.Finished() {
		return "", 0, 0, fmt.Errorf("%w: Workload %s holds no quota", scheduler.ErrNotRunning, key)
	}
	u := usage(w, c.cfg.Resources)
	gpus, typ := 0, topology.GPUType("")
	for _, name := range sortedFlavors(u) {
		if u[name] == 0 {
			continue
		}
		ro, ok, _ := c.rf.GetStore().GetByKey(name)
		rf, isRF := ro.(*ResourceFlavor)
		fi, typed := flavorInfo{}, false
		if ok && isRF {
			fi, typed = flavorType(rf, c.cfg.TypeLabel)
		}
		switch {
		case !typed:
			return "", 0, 0, fmt.Errorf("%w: Workload %s holds GPUs of flavor %s, of no known type", scheduler.ErrNotRunning, key, name)
		case typ != "" && fi.typ != typ:
			return "", 0, 0, fmt.Errorf("%w: Workload %s holds GPUs of two types (%s, %s): its rate is neither's", scheduler.ErrNotRunning, key, typ, fi.typ)
		}
		typ, gpus = fi.typ, gpus+u[name]
	}
	if typ == "" || gpus < 1 {
		return "", 0, 0, fmt.Errorf("%w: Workload %s holds no GPU flavor of a known type", scheduler.ErrNotRunning, key)
	}
	seg := uint64(1)
	for _, cond := range w.Status.Conditions {
		if cond.Type == ConditionQuotaReserved && cond.LastTransitionTime.Unix() > 0 {
			seg = uint64(cond.LastTransitionTime.Unix())
		}
	}
	return typ, gpus, seg, nil
}

// Progress takes a progress report of a Workload (the progress channel's
// sink, kube/progress): its cumulative steps, observed on the GPU type
// and count of the flavor Kueue admitted it on, at the learner's clock
// (Config.Clock; at is the channel's receipt time, used without a Clock).
// Errors wrap scheduler.ErrUnknownJob (no such Workload, or not learned),
// ErrNotRunning (it holds no quota) or ErrInvalid (the estimator refused
// the report: steps going back within an admission, a rate beyond
// perfmodel.MaxRate), which the channel answers as the core's refusals.
// Safe for concurrent use; never waits for a round.
func (c *Controller) Progress(workload string, steps float64, at time.Time) error {
	if c.cfg.Estimator == nil {
		return fmt.Errorf("%w: the controller learns no rates", scheduler.ErrUnknownJob)
	}
	c.learn.mu.Lock()
	defer c.learn.mu.Unlock() // a round's forgetGone waits: the job stays known
	if _, ok := c.learn.keys[workload]; !ok {
		return fmt.Errorf("%w: Workload %s is not learned", scheduler.ErrUnknownJob, workload)
	}
	typ, gpus, seg, err := c.admittedOn(workload)
	if err != nil {
		return err
	}
	now := float64(at.UnixNano()) / 1e9
	if c.cfg.Clock != nil {
		now = c.cfg.Clock()
	}
	// A segment per admission, and within one a new segment each time
	// the steps go back (a pod failed and was replaced, restarting from
	// its checkpoint or from 0), as the scheduling core does.
	rs := c.learn.restarts[workload]
	if rs.seg != seg {
		rs = restartCount{seg: seg}
	}
	o := learn.Observation{Type: typ, GPUs: gpus, Segment: seg*maxRestarts + rs.n, Steps: steps, Time: now}
	err = c.cfg.Estimator.Observe(workload, o)
	if e, ok := errors.AsType[*learn.Error](err); ok && errors.Is(err, learn.ErrOutOfOrder) && e.Field == "Steps" && rs.n+1 < maxRestarts {
		rs.n++
		o.Segment++
		err = c.cfg.Estimator.Observe(workload, o)
	}
	if err == nil {
		c.learn.restarts[workload] = rs
	}
	if err != nil {
		// Every refusal is the report's (a limit reached by this job,
		// such as its tracks, is not lifted by trying again).
		return fmt.Errorf("%w: %w", scheduler.ErrInvalid, err)
	}
	return nil
}
