package admission

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/gpusched/gpusched/kube/model"
	"github.com/gpusched/gpusched/kube/tenancy"
	"github.com/gpusched/gpusched/perfmodel"
	"github.com/gpusched/gpusched/scheduler"
	"github.com/gpusched/gpusched/topology"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// kind is what a workload is made of.
type kind int

const (
	kindPod   kind = iota // one bare pod
	kindGroup             // the pods of a pod group
	kindJob               // a batch/v1 Job
)

func (k kind) String() string {
	return [...]string{"pod", "group", "job"}[k]
}

// workload is one job of the scheduler as the API server shows it.
type workload struct {
	key  string
	kind kind
	ns   string
	name string
	pods []*corev1.Pod // members, by name (pod, group)
	job  *batchv1.Job
	// min is a group's member count (from the min-member annotation, or
	// gang, an upstream PodGroup's minCount).
	min, gang int
	// gpus is what the workload asks for: a Job's pods at once
	// (jobWidth) x its template's GPUs (perPod), a pod's or group's pods'
	// GPUs.
	gpus, perPod int
	// admitted is the type the workload runs on by the controller's own
	// record ("" while it waits); preempting reports a preempted pod
	// still in its grace.
	admitted   topology.GPUType
	preempting bool
	// bypass lists the workload's pods that run without the controller's
	// admission (no gate, no record), or holds the Job if it runs
	// unsuspended without one.
	bypass []*corev1.Pod
	jobRun bool
	// done: every pod ended, or the Job completed or failed.
	done bool
	// incomplete: a group with fewer members than it needs (it waits).
	incomplete bool
	err        error // malformed
	// created is the workload's arrival, Unix seconds, for the order in
	// which waiting workloads enter the rounds (and so their FIFO place):
	// a pod's or Job's creation; a pod group's completion (arrival).
	created int64
	labels  map[string]string
	ann     map[string]string
	// place is the workload's tenant and queue.
	place tenancy.Placement
}

func hasGate(gates []corev1.PodSchedulingGate) bool {
	return slices.ContainsFunc(gates, func(g corev1.PodSchedulingGate) bool { return g.Name == GateName })
}

// controllerOf returns the pod's controller owner reference, if any.
func controllerOf(p *corev1.Pod) *metav1.OwnerReference {
	for i := range p.OwnerReferences {
		if o := &p.OwnerReferences[i]; o.Controller != nil && *o.Controller {
			return o
		}
	}
	return nil
}

// managedPod reports whether the controller handles the pod as (part of)
// a workload of its own: a pod that is gated or asks for GPUs. The pods
// that are really a Job's (jobPods) are the Job's, not workloads: the
// caller leaves them out.
func managedPod(p *corev1.Pod, res corev1.ResourceName) bool {
	if hasGate(p.Spec.SchedulingGates) {
		return true
	}
	n, err := model.PodGPUs(p, res)
	return err != nil || n > 0
}

// managedJob reports whether a Job is a workload: gated, or asking for
// GPUs.
func managedJob(j *batchv1.Job, res corev1.ResourceName) bool {
	if hasGate(j.Spec.Template.Spec.SchedulingGates) {
		return true
	}
	n, err := model.PodGPUs(&corev1.Pod{Spec: j.Spec.Template.Spec}, res)
	return err != nil || n > 0
}

func terminal(p *corev1.Pod) bool {
	return p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
}

func jobFinished(j *batchv1.Job) bool {
	for _, c := range j.Status.Conditions {
		if (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed) && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

func suspended(j *batchv1.Job) bool { return j.Spec.Suspend != nil && *j.Spec.Suspend }

// workloadKey is the key of the workload a managed pod belongs to.
//
// A member of an upstream PodGroup (spec.schedulingGroup) is in that group
// when the PodGroup is a gang (gang: its minCount, above 1), admitted
// whole; else it is a pod of its own (kube-scheduler's GangScheduling
// holds what barrier there is).
func workloadKey(p *corev1.Pod, gang int) (string, kind) {
	if g := model.PodGroup(p); g != "" && (model.UpstreamPodGroup(p) == "" || gang > 1) {
		return "group/" + g, kindGroup
	}
	return "pod/" + p.Namespace + "/" + p.Name, kindPod
}

// collect turns the managed pods and Jobs of the managed namespaces into
// workloads, sorted by key; recs are the controller's own records of
// what it admitted, the only source of a workload's admitted type. The
// pods that are really a Job's (jobPods) belong to the Job; every other
// managed pod is a bare pod or a group member.
//
// gangs gives the minCount of an upstream PodGroup that is a gang (0: not
// one, or not known: its members are pods of their own).
func collect(pods []*corev1.Pod, jobs []*batchv1.Job, res corev1.ResourceName, managed func(string) bool, recs map[string]*record, gangs func(ns, name string) int) []*workload {
	return collectClaimed(pods, jobs, res, managed, recs, jobPods(pods, jobs, res, recordedPods(recs)), gangs)
}

// collectClaimed is collect with the UIDs of the pods that are their
// Jobs' (jobPods) already selected.
func collectClaimed(pods []*corev1.Pod, jobs []*batchv1.Job, res corev1.ResourceName, managed func(string) bool, recs map[string]*record, theirs map[types.UID]bool, gangs func(ns, name string) int) []*workload {
	byKey := map[string]*workload{}
	for _, p := range pods {
		if !managed(p.Namespace) || theirs[p.UID] || !managedPod(p, res) {
			continue
		}
		gang := 0
		if g := model.UpstreamPodGroup(p); g != "" && gangs != nil {
			gang = gangs(p.Namespace, g)
		}
		key, k := workloadKey(p, gang)
		w := byKey[key]
		if w == nil {
			w = &workload{key: key, kind: k, ns: p.Namespace, name: p.Name, created: p.CreationTimestamp.Unix(), labels: p.Labels, ann: p.Annotations, gang: gang}
			if k == kindGroup {
				w.name = strings.TrimPrefix(model.PodGroup(p), p.Namespace+"/")
			}
			byKey[key] = w
		}
		w.pods = append(w.pods, p)
		w.created = min(w.created, p.CreationTimestamp.Unix())
	}
	for _, j := range jobs {
		if !managed(j.Namespace) || !managedJob(j, res) {
			continue
		}
		key := "job/" + j.Namespace + "/" + j.Name
		byKey[key] = &workload{key: key, kind: kindJob, ns: j.Namespace, name: j.Name, job: j, created: j.CreationTimestamp.Unix(), labels: j.Labels, ann: j.Annotations}
	}
	out := make([]*workload, 0, len(byKey))
	for _, w := range byKey {
		slices.SortFunc(w.pods, func(a, b *corev1.Pod) int { return cmp.Compare(a.Name, b.Name) })
		w.inspect(res, recs[w.key])
		out = append(out, w)
	}
	slices.SortFunc(out, func(a, b *workload) int { return cmp.Compare(a.key, b.key) })
	return out
}

// inspect fills the workload's size and state, or its error.
func (w *workload) inspect(res corev1.ResourceName, rec *record) {
	bad := func(format string, args ...any) {
		w.err = fmt.Errorf("%w: %s %s/%s: %s", ErrMalformed, w.kind, w.ns, w.name, fmt.Sprintf(format, args...))
	}
	if w.kind == kindJob {
		j := w.job
		w.done = jobFinished(j)
		// Admitted: running (not suspended) by the controller's record. A
		// suspended Job waits, gated or (after a preemption) not; one that
		// runs without a record bypassed admission.
		if !suspended(j) && !w.done {
			if rec.has(j.UID) {
				w.admitted = rec.Type
			} else {
				w.jobRun = true
			}
		}
		per, err := model.PodGPUs(&corev1.Pod{Spec: j.Spec.Template.Spec}, res)
		if err != nil {
			bad("pod template: %v", err)
			return
		}
		par := jobWidth(j)
		if per < 1 || par < 1 || par > model.MaxGroupMembers {
			bad("%d pods of %d GPUs (want at least one pod asking for GPUs, at most %d pods)", par, per, model.MaxGroupMembers)
			return
		}
		w.perPod, w.gpus = per, per*par
		return
	}
	ended := 0
	for _, p := range w.pods {
		if terminal(p) {
			ended++
		}
		if hasGate(p.Spec.SchedulingGates) || p.DeletionTimestamp != nil || terminal(p) {
			continue
		}
		switch {
		case !rec.has(p.UID):
			w.bypass = append(w.bypass, p)
		case rec.DeleteAfter != "":
			w.preempting = true
		default:
			w.admitted = rec.Type
		}
	}
	w.done = ended == len(w.pods) && ended > 0
	var per int
	for i, p := range w.pods {
		r, err := model.ParseRequest(p, res)
		if err != nil {
			bad("pod %s: %v", p.Name, err)
			return
		}
		if r.GPUs < 1 {
			bad("pod %s asks for no GPUs", p.Name)
			return
		}
		if w.kind == kindGroup && w.gang == 0 {
			if i == 0 {
				w.min = r.MinMember
			} else if r.MinMember != w.min {
				bad("members disagree on %s: %d and %d", model.AnnotationMinMember, w.min, r.MinMember)
				return
			}
		}
		per += r.GPUs
	}
	w.gpus = per
	if w.kind != kindGroup {
		return
	}
	if w.gang > 0 {
		// An upstream PodGroup: at least minCount members, admitted
		// together (those beyond it too).
		w.min = w.gang
		w.created = arrival(w.pods, w.min)
		w.incomplete = len(w.pods) < w.min
		return
	}
	w.created = arrival(w.pods, w.min)
	w.incomplete = len(w.pods) < w.min
	if len(w.pods) > w.min {
		bad("%d members for a group of %d", len(w.pods), w.min)
	}
}

// arrival is when a pod group of min members became complete: the
// creation of the member that completed it, the min-th oldest (the newest
// of an incomplete group). A group's place in the order of arrival is
// that of its last member, so that one long-lived placeholder member does
// not backdate it (issue #40, item 10).
func arrival(pods []*corev1.Pod, minMembers int) int64 {
	times := make([]int64, len(pods))
	for i, p := range pods {
		times[i] = p.CreationTimestamp.Unix()
	}
	slices.Sort(times)
	if len(times) == 0 {
		return 0
	}
	return times[min(max(minMembers, 1), len(times))-1]
}

// object is what events name.
func (w *workload) object() (kind, ns, name, uid string) {
	if w.kind == kindJob {
		return "Job", w.ns, w.name, string(w.job.UID)
	}
	p := w.pods[0]
	return "Pod", p.Namespace, p.Name, string(p.UID)
}

// specEnv is what a workload's spec is derived from besides the
// workload: the admin's tenancy and model, the cluster's types and
// priority classes.
type specEnv struct {
	ten        *tenancy.Tenancy
	model      perfmodel.ThroughputModel
	known      []topology.GPUType
	priorities map[string]int32 // PriorityClass values by name
	// defaultPriority is the value of the globalDefault PriorityClass (0
	// without one).
	defaultPriority int32
	// learn makes the rates learned (Config.Estimator): the claims are
	// claims, none are none.
	learn bool
}

// priority returns the value of the workload's PriorityClass. A pod's
// is its spec.priority: the API server's Priority admission resolved it
// from the pod's class (and refuses a pod that sets another). A Job's
// template is resolved by nothing, so its spec.priority is the tenant's
// to write and is never read (issue #40, item 12): its priorityClassName
// is looked up among the cluster's PriorityClasses. Without a class, or
// naming one that does not exist (the API server would refuse its pods),
// it is the global default class's value, 0 without one.
func (e *specEnv) priority(w *workload) int32 {
	ps := w.podSpec()
	if w.kind != kindJob && ps.Priority != nil {
		return *ps.Priority
	}
	if v, ok := e.priorities[ps.PriorityClassName]; ok && ps.PriorityClassName != "" {
		return v
	}
	return e.defaultPriority
}

// podSpec is the spec of the workload's pods (a Job's template).
func (w *workload) podSpec() *corev1.PodSpec {
	if w.kind == kindJob {
		return &w.job.Spec.Template.Spec
	}
	return &w.pods[0].Spec
}

// spec builds the job's spec from what the admin decides (tenant, queue
// weight, priority cap, expected work: tenancy) and, bounded, from what
// the tenant claims (its GPUs, the types it allows, its rates used only
// relative to each other: tenancy.RateRules.Trusted). notes tell the
// tenant what was not taken as written.
func (w *workload) spec(env *specEnv) (spec scheduler.JobSpec, notes []string, err error) {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s %s/%s: %s", ErrMalformed, w.kind, w.ns, w.name, fmt.Sprintf(format, args...))
	}
	spec.GPUs = w.gpus
	// A pod runs on one node; so does a Job of one pod.
	spec.SingleServer = w.singleServer()
	ann := w.ann
	if w.kind == kindJob {
		ann = mergedAnnotations(w.job)
	}
	allowed := env.known
	if v, ok := ann[model.AnnotationGPUTypes]; ok {
		ts, err := model.ParseTypes(v)
		if err != nil {
			return spec, nil, bad("%v", err)
		}
		allowed = nil
		for _, t := range env.known {
			if slices.Contains(ts, t) {
				allowed = append(allowed, t)
			}
		}
		spec.Types = allowed
		if len(allowed) == 0 && len(env.known) > 0 {
			return spec, nil, bad("annotation %s %q allows none of the cluster's types %v", model.AnnotationGPUTypes, cut(v), env.known)
		}
	}
	q := w.place.Queue
	spec.Tenant = w.place.Tenant.Name
	spec.Weight = q.JobWeight
	rules := env.ten.Rates()
	spec.RemainingSteps = q.RemainingSteps(rules.Ref())
	pri := env.priority(w)
	spec.Priority = q.Priority(pri)
	if spec.Priority != int(pri) {
		notes = append(notes, fmt.Sprintf("priority %d capped at %d, queue %s's maxPriority", pri, spec.Priority, q.Name))
	}
	for _, a := range []string{AnnotationWeight, AnnotationSteps} {
		if _, ok := ann[a]; ok {
			notes = append(notes, fmt.Sprintf("annotation %s ignored: weights and remaining work come from queue %s (the admin's)", a, q.Name))
		}
	}
	claimed, more, err := model.ClaimedRates(ann, w.gpus, env.model, allowed)
	if err != nil {
		return spec, nil, bad("%v", err)
	}
	notes = append(notes, more...)
	rates, clamped := rules.Trusted(claimed, allowed)
	if clamped {
		notes = append(notes, fmt.Sprintf("rates more than %gx apart raised to 1/%g of the fastest type's (the admin's rates.maxRatio)", rules.Ratio(), rules.Ratio()))
	}
	if len(rates) == 0 && len(allowed) > 0 {
		return spec, nil, bad("annotation %s rates none of the cluster's types %v it may run on", model.AnnotationThroughput, allowed)
	}
	spec.Throughput = rates
	if env.learn {
		spec.Learn = true
		if len(claimed) == 0 {
			spec.Throughput = nil // nothing claimed: learned from nothing
		}
		// Runs of one program (its namespace, images, commands and GPU
		// count, or its kind) start where the last one ended.
		spec.Group = model.ProgramGroup(w.ns, w.podSpec(), w.gpus, ann)
	}
	return spec, notes, nil
}

// singleServer reports whether the workload runs on one node: a pod, or
// a Job of one pod at once.
func (w *workload) singleServer() bool {
	return w.kind == kindPod || w.kind == kindJob && jobWidth(w.job) == 1
}

// mergedAnnotations are a Job's annotations over its template's.
func mergedAnnotations(j *batchv1.Job) map[string]string {
	out := map[string]string{}
	for k, v := range j.Spec.Template.Annotations {
		out[k] = v
	}
	for k, v := range j.Annotations {
		out[k] = v
	}
	return out
}

func cut(s string) string {
	if len(s) > 64 {
		return s[:64] + "..."
	}
	return s
}
