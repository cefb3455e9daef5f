package admission

import (
	"cmp"
	"slices"

	"github.com/gpusched/gpusched/kube/model"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
)

// A Job is the workload its pods belong to: the controller admits the
// Job, and its pods are none of its business. A tenant writes its pods'
// owner references and labels, though, so that a pod that names a Job of
// its namespace as its controller is not taken for one of the Job's on
// its word (issue #40, item 8b). It is the Job's only if it really is
// one of the pods the job controller runs for it:
//
//   - the Job's UID is in its controller owner reference, and the Job's
//     selector matches its labels (the job controller releases any other
//     pod);
//   - it asks for the GPUs of the Job's template, and it is not gated
//     (the controller admits a Job by taking the gate off its template,
//     so its pods never carry it);
//   - the controller did not admit it as a bare pod or a group member of
//     its own (its records say so);
//   - and it is one of the oldest min(parallelism, completions) live pods
//     so claiming the Job while the Job runs (none while it is suspended
//     or finished): no more pods than the Job runs.
//
// A pod that ended or is being deleted holds no GPUs for long: it is the
// Job's on the first two counts alone. Any other pod is a workload of its
// own, a bare pod: gated, or preempted as a bare pod that bypassed
// admission when it runs without.

// jobWidth is how many pods a Job runs at once: its parallelism (1 when
// unset), at most its completions when set (the job controller never
// runs more pods than completions are left).
func jobWidth(j *batchv1.Job) int {
	n := 1
	if p := j.Spec.Parallelism; p != nil {
		n = int(*p)
	}
	if c := j.Spec.Completions; c != nil {
		n = min(n, int(*c))
	}
	return n
}

// recordedPods returns the UIDs in the controller's records: the pods it
// admitted as workloads of their own (and the Jobs it admitted). O(the
// records' UIDs): a round builds it once.
func recordedPods(recs map[string]*record) map[types.UID]bool {
	n := 0
	for _, r := range recs {
		n += len(r.UIDs)
	}
	out := make(map[types.UID]bool, n)
	for _, r := range recs {
		for _, u := range r.UIDs {
			out[u] = true
		}
	}
	return out
}

// jobPods returns the UIDs of the pods that are their Jobs' (of jobs), as
// above; recorded are the UIDs of the controller's records
// (recordedPods). O(pods + jobs), and a sort of each Job's pods.
func jobPods(pods []*corev1.Pod, jobs []*batchv1.Job, res corev1.ResourceName, recorded map[types.UID]bool) map[types.UID]bool {
	byUID := make(map[types.UID]*claimed, len(jobs))
	for _, j := range jobs {
		byUID[j.UID] = &claimed{job: j}
	}
	out := map[types.UID]bool{}
	for _, p := range pods {
		if c := claimOf(p, byUID, recorded, res); c != nil {
			switch {
			case terminal(p) || p.DeletionTimestamp != nil:
				out[p.UID] = true
			case !hasGate(p.Spec.SchedulingGates) && c.sameGPUs(p, res):
				c.pods = append(c.pods, p)
			}
		}
	}
	for _, c := range byUID {
		for _, p := range c.running() {
			out[p.UID] = true
		}
	}
	return out
}

// claimOf returns the Job a pod claims, if the claim holds on the first
// counts: the Job's UID as the pod's controller, in its namespace, its
// selector matching the pod's labels, and no record of the pod as a
// workload of its own.
func claimOf(p *corev1.Pod, byUID map[types.UID]*claimed, recorded map[types.UID]bool, res corev1.ResourceName) *claimed {
	o := controllerOf(p)
	if o == nil || o.Kind != "Job" {
		return nil
	}
	c := byUID[o.UID]
	if c == nil || c.job.Namespace != p.Namespace || recorded[p.UID] || !c.selects(p, res) {
		return nil
	}
	return c
}

// running returns the live pods the Job runs: the oldest
// min(parallelism, completions) of those claiming it, none while it is
// suspended or finished.
func (c *claimed) running() []*corev1.Pod {
	if len(c.pods) == 0 || suspended(c.job) || jobFinished(c.job) {
		return nil
	}
	slices.SortFunc(c.pods, func(a, b *corev1.Pod) int {
		return cmp.Or(a.CreationTimestamp.Compare(b.CreationTimestamp.Time), cmp.Compare(a.Name, b.Name))
	})
	return c.pods[:min(jobWidth(c.job), len(c.pods))]
}

// claimed is a Job and the live pods that claim it, with its selector and
// its template's GPUs, read once.
type claimed struct {
	job  *batchv1.Job
	pods []*corev1.Pod
	read bool
	sel  labels.Selector // nil: selects nothing
	gpus int             // -1: unreadable
}

func (c *claimed) load(res corev1.ResourceName) {
	if c.read {
		return
	}
	c.read = true
	if c.job.Spec.Selector != nil {
		if sel, err := metav1.LabelSelectorAsSelector(c.job.Spec.Selector); err == nil {
			c.sel = sel
		}
	}
	var err error
	if c.gpus, err = model.PodGPUs(&corev1.Pod{Spec: c.job.Spec.Template.Spec}, res); err != nil {
		c.gpus = -1
	}
}

// selects reports whether the Job's selector matches a pod's labels (a
// Job without a valid selector selects nothing).
func (c *claimed) selects(p *corev1.Pod, res corev1.ResourceName) bool {
	c.load(res)
	return c.sel != nil && c.sel.Matches(labels.Set(p.Labels))
}

// sameGPUs reports whether a pod asks for the GPUs of the Job's template
// (both readable).
func (c *claimed) sameGPUs(p *corev1.Pod, res corev1.ResourceName) bool {
	c.load(res)
	got, err := model.PodGPUs(p, res)
	return c.gpus >= 0 && err == nil && got == c.gpus
}
