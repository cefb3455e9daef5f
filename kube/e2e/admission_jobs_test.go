package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/gpusched/gpusched/allocation"
	"github.com/gpusched/gpusched/kube/admission"
	"github.com/gpusched/gpusched/kube/internal/kubetest"
	"github.com/gpusched/gpusched/kube/model"
	"github.com/gpusched/gpusched/topology"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestE2EAdmissionJobs: two suspended batch/v1 Jobs (one pod of 4 GPUs
// each, the gate in their template) share one 4-GPU V100 node. The real
// API server's validation takes every update the controller makes: the
// admission (spec.suspend cleared, the gate taken off the template, the
// template's node affinity set) and the preemption (spec.suspend set); the
// Jobs alternate round by round. No job controller runs here, so no pod is
// created: what is checked is that the API server accepts the updates.
func TestE2EAdmissionJobs(t *testing.T) {
	c, _ := controlPlane(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cs := c.Client
	const ns = "adm-jobs"
	must(t, kubetest.EnsureNamespace(ctx, cs, ns), "namespace")
	createNodes(ctx, t, cs, []kubetest.GPUNode{{Name: "adm-jobs-v100", Product: kubetest.ProductV100, GPUs: 4,
		Labels: map[string]string{admPoolLabel: "jobs"}}})
	for _, name := range []string{"train-a", "train-b"} {
		j := &batchv1.Job{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Annotations: map[string]string{model.AnnotationThroughput: "v100=1"}},
			Spec: batchv1.JobSpec{
				Suspend: ptr(true),
				Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
					RestartPolicy:   corev1.RestartPolicyNever,
					SchedulingGates: []corev1.PodSchedulingGate{{Name: admission.GateName}},
					Containers: []corev1.Container{{Name: "train", Image: "registry.k8s.io/pause:3.10",
						Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{
							model.ResourceGPU: *resource.NewQuantity(4, resource.DecimalSI)}}}},
				}},
			},
		}
		_, err := cs.BatchV1().Jobs(ns).Create(ctx, j, metav1.CreateOptions{})
		must(t, err, "create job %s", name)
	}
	clock := 0.0
	ctl, err := admission.New(ctx, admission.Config{Client: cs, Namespace: ns, NodeSelector: map[string]string{admPoolLabel: "jobs"},
		Policy: &allocation.MaxMinFairness{}, Clock: func() float64 { return clock }, StateNamespace: ns})
	must(t, err, "controller")
	defer ctl.Close()
	ran := map[string]int{}
	for round := range 6 {
		clock = float64(round) * admRound
		res, err := syncedRound(ctx, ctl)
		must(t, err, "round %d", round)
		if len(res.Admitted) != 1 || len(res.Held) != 0 {
			t.Fatalf("round %d: admitted %v, held %v (an update refused?)", round, res.Admitted, res.Held)
		}
		for _, name := range []string{"train-a", "train-b"} {
			j, err := cs.BatchV1().Jobs(ns).Get(ctx, name, metav1.GetOptions{})
			must(t, err, "get %s", name)
			typ, admitted := res.Admitted["job/"+ns+"/"+name]
			if *j.Spec.Suspend == admitted {
				t.Fatalf("round %d: %s suspended=%v admitted=%v", round, name, *j.Spec.Suspend, admitted)
			}
			if admitted {
				ran[name]++
				gated := len(j.Spec.Template.Spec.SchedulingGates) > 0
				na := j.Spec.Template.Spec.Affinity
				if gated || typ != topology.V100 || na == nil || na.NodeAffinity == nil {
					t.Fatalf("round %d: admitted %s: gates %v, affinity %+v", round, name, j.Spec.Template.Spec.SchedulingGates, na)
				}
			}
		}
	}
	if ran["train-a"] != 3 || ran["train-b"] != 3 {
		t.Errorf("rounds run: %v (want 3 each)", ran)
	}
	t.Logf("rounds run per Job: %v", fmt.Sprint(ran))
}
