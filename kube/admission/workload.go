package admission

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/gpusched/gpusched/kube/model"
	"github.com/gpusched/gpusched/perfmodel"
	"github.com/gpusched/gpusched/scheduler"
	"github.com/gpusched/gpusched/topology"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
	// min is a group's member count (from the min-member annotation).
	min  int
	gpus int
	// admitted is the type the workload runs on ("" while it waits);
	// preempting reports a preempted pod still in its grace.
	admitted   topology.GPUType
	preempting bool
	// done: every pod ended, or the Job completed or failed.
	done bool
	// incomplete: a group with fewer members than it needs (it waits).
	incomplete bool
	err        error // malformed
	created    int64 // creation time, Unix seconds, for submission order
	labels     map[string]string
	ann        map[string]string
}

func hasGate(gates []corev1.PodSchedulingGate) bool {
	return slices.ContainsFunc(gates, func(g corev1.PodSchedulingGate) bool { return g.Name == GateName })
}

// managedPod reports whether the controller handles the pod.
func managedPod(p *corev1.Pod) bool {
	if slices.ContainsFunc(p.OwnerReferences, func(o metav1.OwnerReference) bool { return o.Kind == "Job" }) {
		return false // a Job's pod: the Job is the workload
	}
	return hasGate(p.Spec.SchedulingGates) || p.Annotations[AnnotationAdmittedType] != ""
}

func managedJob(j *batchv1.Job) bool {
	return hasGate(j.Spec.Template.Spec.SchedulingGates) || j.Annotations[AnnotationAdmittedType] != ""
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

// collect turns the managed pods and Jobs into workloads, sorted by key.
func collect(pods []corev1.Pod, jobs []batchv1.Job, res corev1.ResourceName) []*workload {
	byKey := map[string]*workload{}
	for i := range pods {
		p := &pods[i]
		if !managedPod(p) {
			continue
		}
		key, k := "pod/"+p.Namespace+"/"+p.Name, kindPod
		if g := model.PodGroup(p); g != "" {
			key, k = "group/"+g, kindGroup
		}
		w := byKey[key]
		if w == nil {
			w = &workload{key: key, kind: k, ns: p.Namespace, name: p.Name, created: p.CreationTimestamp.Unix(), labels: p.Labels, ann: p.Annotations}
			if k == kindGroup {
				w.name = strings.TrimPrefix(model.PodGroup(p), p.Namespace+"/")
			}
			byKey[key] = w
		}
		w.pods = append(w.pods, p)
		w.created = min(w.created, p.CreationTimestamp.Unix())
	}
	for i := range jobs {
		j := &jobs[i]
		if !managedJob(j) {
			continue
		}
		key := "job/" + j.Namespace + "/" + j.Name
		byKey[key] = &workload{key: key, kind: kindJob, ns: j.Namespace, name: j.Name, job: j, created: j.CreationTimestamp.Unix(), labels: j.Labels, ann: j.Annotations}
	}
	out := make([]*workload, 0, len(byKey))
	for _, w := range byKey {
		slices.SortFunc(w.pods, func(a, b *corev1.Pod) int { return cmp.Compare(a.Name, b.Name) })
		w.inspect(res)
		out = append(out, w)
	}
	slices.SortFunc(out, func(a, b *workload) int { return cmp.Compare(a.key, b.key) })
	return out
}

// inspect fills the workload's size and state, or its error.
func (w *workload) inspect(res corev1.ResourceName) {
	bad := func(format string, args ...any) {
		w.err = fmt.Errorf("%w: %s %s/%s: %s", ErrMalformed, w.kind, w.ns, w.name, fmt.Sprintf(format, args...))
	}
	if w.kind == kindJob {
		j := w.job
		w.done = jobFinished(j)
		// Admitted: running (not suspended), its gate gone. A suspended
		// Job waits, gated or (after a preemption) not.
		if !hasGate(j.Spec.Template.Spec.SchedulingGates) && (j.Spec.Suspend == nil || !*j.Spec.Suspend) {
			w.admitted = topology.GPUType(j.Annotations[AnnotationAdmittedType])
		}
		per, err := model.PodGPUs(&corev1.Pod{Spec: j.Spec.Template.Spec}, res)
		if err != nil {
			bad("pod template: %v", err)
			return
		}
		par := 1
		if j.Spec.Parallelism != nil {
			par = int(*j.Spec.Parallelism)
		}
		if per < 1 || par < 1 || par > model.MaxGroupMembers {
			bad("%d pods of %d GPUs (want at least one pod asking for GPUs)", par, per)
			return
		}
		w.gpus = per * par
		return
	}
	ended := 0
	for _, p := range w.pods {
		if terminal(p) {
			ended++
		}
		if !hasGate(p.Spec.SchedulingGates) && p.DeletionTimestamp == nil {
			if t := p.Annotations[AnnotationAdmittedType]; t != "" {
				if p.Annotations[AnnotationPreempted] != "" {
					w.preempting = true
				} else if !terminal(p) {
					w.admitted = topology.GPUType(t)
				}
			}
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
		if w.kind == kindGroup {
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
	if w.kind == kindGroup && len(w.pods) < w.min {
		w.incomplete = true
	}
	if w.kind == kindGroup && len(w.pods) > w.min {
		bad("%d members for a group of %d", len(w.pods), w.min)
	}
}

// object is what events name.
func (w *workload) object() (kind, ns, name, uid string) {
	if w.kind == kindJob {
		return "Job", w.ns, w.name, string(w.job.UID)
	}
	p := w.pods[0]
	return "Pod", p.Namespace, p.Name, string(p.UID)
}

// spec builds the job's spec: its GPUs, allowed types, rates, weight,
// tenant and steps. known lists the cluster's types; warn says when the
// default rate is used.
func (w *workload) spec(cfg *Config, known []topology.GPUType) (spec scheduler.JobSpec, warn string, err error) {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s %s/%s: %s", ErrMalformed, w.kind, w.ns, w.name, fmt.Sprintf(format, args...))
	}
	spec.GPUs = w.gpus
	// A pod runs on one node; so does a Job of one pod.
	spec.SingleServer = w.kind == kindPod || w.kind == kindJob && (w.job.Spec.Parallelism == nil || *w.job.Spec.Parallelism == 1)
	ann := w.ann
	if w.kind == kindJob {
		ann = mergedAnnotations(w.job)
	}
	if v, ok := ann[model.AnnotationGPUTypes]; ok {
		ts, err := model.ParseTypes(v)
		if err != nil {
			return spec, "", bad("%v", err)
		}
		spec.Types = ts
	}
	if v, ok := ann[AnnotationWeight]; ok {
		f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
		if err != nil || !(f > 0) || f > 1e9 {
			return spec, "", bad("annotation %s %q: want a weight from 0 to 1e9", AnnotationWeight, cut(v))
		}
		spec.Weight = f
	}
	if v, ok := ann[AnnotationSteps]; ok {
		f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
		if err != nil || !(f >= 0) || f > 1e15 {
			return spec, "", bad("annotation %s %q: want steps from 0 to 1e15", AnnotationSteps, cut(v))
		}
		spec.RemainingSteps = f
	}
	spec.Tenant = w.ns
	if cfg.TenantLabel != "" {
		if v := w.labels[cfg.TenantLabel]; v != "" {
			spec.Tenant = v
		}
	}
	if v, ok := ann[AnnotationThroughput]; ok {
		rates, err := parseRates(v)
		if err != nil {
			return spec, "", bad("annotation %s: %v", AnnotationThroughput, err)
		}
		spec.Throughput = rates
		return spec, "", nil
	}
	if v, ok := ann[AnnotationJobKind]; ok {
		key := perfmodel.JobKey{Model: strings.TrimSpace(v), ScaleFactor: w.gpus}
		if b, ok := ann[AnnotationBatchSize]; ok {
			n, err := strconv.Atoi(strings.TrimSpace(b))
			if err != nil || n < 0 || n > 1<<20 {
				return spec, "", bad("annotation %s %q: want a batch size from 0 to %d", AnnotationBatchSize, cut(b), 1<<20)
			}
			key.BatchSize = n
		}
		rates := map[topology.GPUType]float64{}
		for _, t := range known {
			if r, err := cfg.model().Throughput(key, t); err == nil && r > 0 && !math.IsInf(r, 0) {
				rates[t] = r
			}
		}
		if len(rates) > 0 || len(known) == 0 {
			k := key
			spec.Model = &k
			return spec, "", nil
		}
		warn = fmt.Sprintf("the performance model does not know %s on %d GPUs: %v steps/s on every type", key.Name(), w.gpus, cfg.defaultRate())
	} else {
		warn = fmt.Sprintf("no %s or %s annotation: %v steps/s on every type", AnnotationThroughput, AnnotationJobKind, cfg.defaultRate())
	}
	spec.Throughput = map[topology.GPUType]float64{}
	for _, t := range known {
		spec.Throughput[t] = cfg.defaultRate()
	}
	return spec, warn, nil
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

// parseRates reads "v100=3.2,k80=1" (type or product names).
func parseRates(v string) (map[topology.GPUType]float64, error) {
	if len(v) > 4096 {
		return nil, fmt.Errorf("%d bytes (at most 4096)", len(v))
	}
	out := map[topology.GPUType]float64{}
	for part := range strings.SplitSeq(v, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		name, num, ok := strings.Cut(part, "=")
		if !ok {
			return nil, fmt.Errorf("entry %q: want type=rate", cut(part))
		}
		p, err := topology.ParseProduct(strings.TrimSpace(name))
		if err != nil {
			return nil, fmt.Errorf("entry %q: %w", cut(part), err)
		}
		f, err := strconv.ParseFloat(strings.TrimSpace(num), 64)
		if err != nil || !(f >= 0) || f > 1e12 {
			return nil, fmt.Errorf("entry %q: want a rate from 0 to 1e12 steps/s", cut(part))
		}
		if _, dup := out[p.Type]; dup {
			return nil, fmt.Errorf("type %s given twice", p.Type)
		}
		out[p.Type] = f
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no rates in %q", cut(v))
	}
	return out, nil
}

func cut(s string) string {
	if len(s) > 64 {
		return s[:64] + "..."
	}
	return s
}
