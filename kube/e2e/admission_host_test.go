package e2e

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/gpusched/gpusched/allocation"
	"github.com/gpusched/gpusched/kube/admission"
	"github.com/gpusched/gpusched/kube/internal/kubetest"
	"github.com/gpusched/gpusched/kube/model"
	"github.com/gpusched/gpusched/multires"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestE2EAdmissionHost (#45): CPU-hungry and CPU-light jobs share one
// node of 8 V100s, 24 CPUs and 500 GiB: two AlexNets (best case 12 CPUs
// and 125 GB per GPU, 2.94x faster than at the proportional 3 CPUs), five
// GNMTs (1 CPU and 20 GB: no faster with more) as bare gated pods, and one
// GNMT as a suspended Job, each asking 1 CPU and 8 GiB. Both AlexNets'
// best cases and the GNMTs' need 30 CPUs: Synergy's split gives one
// AlexNet 12, the other the proportional 3, each GNMT 1 (21 CPUs). The
// real API server takes the sizes (pods/resize on gated pods; the
// suspended Job's template), and the stock kube-scheduler binds every pod
// on the node with them, which it could not have done had both AlexNets
// been given their best case.
func TestE2EAdmissionHost(t *testing.T) {
	controlPlane(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	const ns = "adm-host"
	cs := admSetup(ctx, t, ns)
	createNodes(ctx, t, cs, []kubetest.GPUNode{{Name: "adm-host-v100", Product: kubetest.ProductV100, GPUs: 8,
		CPU: "24", Memory: "500Gi", Labels: map[string]string{admPoolLabel: "host"}}})
	startStock(t)
	spec := func() corev1.PodSpec {
		return corev1.PodSpec{
			RestartPolicy:   corev1.RestartPolicyNever,
			SchedulingGates: []corev1.PodSchedulingGate{{Name: admission.GateName}},
			Containers: []corev1.Container{{Name: "train", Image: "registry.k8s.io/pause:3.10",
				Resources: corev1.ResourceRequirements{
					Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("8Gi")},
					Limits:   corev1.ResourceList{model.ResourceGPU: *resource.NewQuantity(1, resource.DecimalSI)}}}},
		}
	}
	pods := []string{"alex-a", "alex-b", "gnmt-1", "gnmt-2", "gnmt-3", "gnmt-4", "gnmt-5"}
	for _, name := range pods {
		profile := "gnmt"
		if name[:4] == "alex" {
			profile = "alexnet"
		}
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name,
			Annotations: map[string]string{model.AnnotationHostProfile: profile, model.AnnotationThroughput: "v100=1"}}, Spec: spec()}
		_, err := cs.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{})
		must(t, err, "create pod %s", name)
	}
	job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "gnmt-job",
		Annotations: map[string]string{model.AnnotationHostProfile: "gnmt", model.AnnotationThroughput: "v100=1"}},
		Spec: batchv1.JobSpec{Suspend: ptr(true), Template: corev1.PodTemplateSpec{Spec: spec()}}}
	_, err := cs.BatchV1().Jobs(ns).Create(ctx, job, metav1.CreateOptions{})
	must(t, err, "create job")
	ctl, err := admission.New(ctx, admission.Config{Client: cs, Namespace: ns, NodeSelector: map[string]string{admPoolLabel: "host"},
		Policy: &allocation.MaxMinFairness{}, Clock: func() float64 { return 0 }, StateNamespace: ns, HostProfiles: multires.Zoo()})
	must(t, err, "controller")
	defer ctl.Close()
	res, err := syncedRound(ctx, ctl)
	must(t, err, "round")
	if len(res.Admitted) != 8 || len(res.Held) != 0 {
		t.Fatalf("admitted %v, held %v (a write refused?)", res.Admitted, res.Held)
	}
	var alex []float64
	total := 0.0
	waitBound := time.Now().Add(90 * time.Second)
	for _, name := range pods {
		var p *corev1.Pod
		for {
			p, err = cs.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
			must(t, err, "get %s", name)
			if p.Spec.NodeName != "" || time.Now().After(waitBound) {
				break
			}
			time.Sleep(500 * time.Millisecond)
		}
		if p.Spec.NodeName != "adm-host-v100" {
			t.Fatalf("%s not bound (%q): requests %v", name, p.Spec.NodeName, p.Spec.Containers[0].Resources.Requests)
		}
		c := p.Spec.Containers[0].Resources.Requests.Cpu().AsApproximateFloat64()
		total += c
		if name[:4] == "alex" {
			alex = append(alex, c)
		} else if c != 1 {
			t.Errorf("%s: %g CPUs, want its best case, 1", name, c)
		}
	}
	slices.Sort(alex)
	if !slices.Equal(alex, []float64{3, 12}) {
		t.Errorf("AlexNets hold %v CPUs, want 3 and 12", alex)
	}
	j, err := cs.BatchV1().Jobs(ns).Get(ctx, "gnmt-job", metav1.GetOptions{})
	must(t, err, "get job")
	r := j.Spec.Template.Spec.Containers[0].Resources.Requests
	if *j.Spec.Suspend || r.Cpu().AsApproximateFloat64() != 1 || r.Memory().Cmp(resource.MustParse("20Gi")) != 0 {
		t.Errorf("the Job: suspended %v, template requests %v (want 1 CPU, 20Gi)", *j.Spec.Suspend, r)
	}
	t.Logf("CPUs held: AlexNets %v, GNMT pods %g (of 24), the Job's template %v", alex, total-alex[0]-alex[1], fmt.Sprint(r.Cpu()))
	admDeletePods(cs, ns)
}
