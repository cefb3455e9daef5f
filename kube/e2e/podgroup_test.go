package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/gpusched/gpusched/kube/internal/kubetest"
	"github.com/gpusched/gpusched/kube/model"
	corev1 "k8s.io/api/core/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestE2EPodGroups runs Kubernetes 1.37's gang scheduling (the API server
// and the scheduler with GenericWorkload on, scheduling.k8s.io/v1beta1
// served): a PodGroup of minCount 3 whose members join it through
// spec.schedulingGroup. Two members wait (upstream's barrier); the third
// brings the group in whole. There is one barrier: the third member is
// also labelled into a gpusched group of min-member 5, which gpusched's
// own barrier would hold forever, and the group binds all the same. The
// members stay close: the rack of three nodes, not the lone one.
func TestE2EPodGroups(t *testing.T) {
	c, bin := controlPlane(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cs := c.Client
	const ns = "e2e-podgroups"
	must(t, kubetest.EnsureNamespace(ctx, cs, ns), "namespace")
	t.Cleanup(func() { _ = cs.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{}) })
	var nodes []kubetest.GPUNode
	var names []string
	for i := range 4 {
		rack := "pg-r0"
		if i == 3 {
			rack = "pg-r1"
		}
		name := fmt.Sprintf("pg-%d", i)
		names = append(names, name)
		nodes = append(nodes, kubetest.GPUNode{Name: name, Product: kubetest.ProductV100, GPUs: 8, MemoryMiB: 16160,
			Links: `{"interconnect":"hybrid-cube-mesh"}`, Labels: map[string]string{model.LabelRack: rack}})
	}
	createNodes(ctx, t, cs, nodes)
	_, err := cs.SchedulingV1beta1().PodGroups(ns).Create(ctx, &schedulingv1beta1.PodGroup{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "trio"},
		Spec: schedulingv1beta1.PodGroupSpec{SchedulingPolicy: schedulingv1beta1.PodGroupSchedulingPolicy{
			Gang: &schedulingv1beta1.GangSchedulingPolicy{MinCount: 3}}},
	}, metav1.CreateOptions{})
	must(t, err, "PodGroup trio")
	sched := startScheduler(t, testDir(t), "gpusched-podgroups", bin, schedulerConfig(t, c, map[string]any{"permitTimeoutSeconds": 300}),
		"--feature-gates", "GenericWorkload=true")

	member := func(i int, labels, ann map[string]string) *corev1.Pod {
		p := gpuPodSpec(ns, fmt.Sprint("m", i), 8, "", labels, ann)
		p.Spec.SchedulingGroup = &corev1.PodSchedulingGroup{PodGroupName: ptr("trio")}
		p.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
			NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{
				{Key: "kubernetes.io/hostname", Operator: corev1.NodeSelectorOpIn, Values: names}}}}}}}
		return p
	}
	bound := func() map[string]string {
		out := map[string]string{}
		l, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return out
		}
		for _, p := range l.Items {
			if p.Spec.NodeName != "" {
				out[p.Name] = p.Spec.NodeName
			}
		}
		return out
	}
	for i := range 2 {
		p, err := cs.CoreV1().Pods(ns).Create(ctx, member(i, nil, nil), metav1.CreateOptions{})
		must(t, err, "member %d", i)
		if p.Spec.SchedulingGroup == nil {
			t.Fatalf("the API server dropped spec.schedulingGroup: is GenericWorkload on?")
		}
	}
	time.Sleep(3 * time.Second)
	if b := bound(); len(b) > 0 {
		t.Fatalf("members bound before the group is whole: %v", b)
	}
	_, err = cs.CoreV1().Pods(ns).Create(ctx, member(2, map[string]string{model.LabelPodGroup: "trio"},
		map[string]string{model.AnnotationMinMember: "5"}), metav1.CreateOptions{})
	must(t, err, "member 2")
	waitFor(ctx, t, "the group bound whole", sched, func() (bool, string) {
		b := bound()
		return len(b) == 3, fmt.Sprint(b)
	})
	for p, n := range bound() {
		if n == "pg-3" {
			t.Errorf("member %s went to the lone rack's node %s: %v", p, n, bound())
		}
	}
}
