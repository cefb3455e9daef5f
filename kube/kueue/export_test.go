package kueue

import (
	"encoding/json"

	"github.com/gpusched/gpusched/flavor"
	"github.com/gpusched/gpusched/topology"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
)

// Fingerprint is what the controller reads of a Workload, as text.
func Fingerprint(u *unstructured.Unstructured) string {
	o, _ := transform[Workload](u)
	return fingerprint(o.(*Workload))
}

func fingerprint(w *Workload) string {
	b, _ := json.Marshal([]any{w.Annotations, w.Spec, w.Status})
	return string(b)
}

// Synced reports whether the Workload informer holds exactly the given
// Workloads (namespace/name), with the given fingerprints.
func (c *Controller) Synced(want map[string]string) bool {
	items := c.wl.GetStore().List()
	if len(items) != len(want) {
		return false
	}
	for _, o := range items {
		w, ok := o.(*Workload)
		if !ok || want[w.Namespace+"/"+w.Name] != fingerprint(w) {
			return false
		}
	}
	return true
}

// ReadOne reads a pending Workload of one pod set asking for gpus GPUs,
// with the pod template's annotations and node selector value for the
// type label, against a snapshot of two flavors (V100, K80) in one
// ClusterQueue: whether it is gpusched's and the rates it gets, or why it
// cannot be read.
func ReadOne(ann map[string]string, selector string, gpus int64) (ours bool, rates []float64, err error) {
	c := &Controller{cfg: Config{Resources: []corev1.ResourceName{"nvidia.com/gpu"}, TypeLabel: "nvidia.com/gpu.product", Gate: DefaultGate}}
	q, _ := flavor.NewQuotas([]flavor.Queue{{Name: "cq", Flavors: []flavor.Flavor{{Name: "k80", Type: 0, BorrowingLimit: -1, LendingLimit: -1},
		{Name: "v100", Type: 1, BorrowingLimit: -1, LendingLimit: -1}}}}, 2)
	s := &snapshot{types: []topology.GPUType{"k80", "v100"}, typeIdx: map[topology.GPUType]int{"k80": 0, "v100": 1}, queues: q,
		resources: [][]corev1.ResourceName{{"nvidia.com/gpu", "nvidia.com/gpu"}},
		byName:    map[string]int{"cq": 0}, lq: map[string]string{"ns/q": "cq"},
		values:    map[string][]int{"Tesla-K80": {0}, "Tesla-V100-SXM2-16GB": {1}},
		selectors: map[string]labels.Selector{"cq": labels.Everything()}, namespace: func(string) (labels.Set, bool) { return nil, true }}
	w := &Workload{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "w"}, Spec: WorkloadSpec{QueueName: "q", PodSets: []PodSet{{Name: "main", Count: 1,
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Annotations: ann}, Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{"nvidia.com/gpu": *resource.NewQuantity(gpus, resource.DecimalSI)}}}}}}}}}}
	if selector != "" {
		w.Spec.PodSets[0].Template.Spec.NodeSelector = map[string]string{"nvidia.com/gpu.product": selector}
	}
	r, ok := c.readWorkload(s, w)
	return ok, r.rates, r.err
}
