package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/gpusched/gpusched/kube/admission"
	"github.com/gpusched/gpusched/kube/internal/kubetest"
	"github.com/gpusched/gpusched/kube/model"
	"github.com/gpusched/gpusched/kube/tenancy"
	authenticationv1 "k8s.io/api/authentication/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// A tenant as the attacker is: a ServiceAccount with the right to
// create, change and delete pods, Jobs and ConfigMaps in its own
// namespace, and nothing else.

// tenantNamespace creates a namespace labelled as managed (as only an
// admin can) and a tenant account in it, and returns its client.
func tenantNamespace(ctx context.Context, t *testing.T, c *kubetest.ControlPlane, ns string) kubernetes.Interface {
	t.Helper()
	cs := c.Client
	must(t, kubetest.EnsureNamespace(ctx, cs, ns), "namespace %s", ns)
	n, err := cs.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
	must(t, err, "get namespace")
	if n.Labels[tenancy.LabelManaged] != "true" {
		if n.Labels == nil {
			n.Labels = map[string]string{}
		}
		n.Labels[tenancy.LabelManaged] = "true"
		_, err = cs.CoreV1().Namespaces().Update(ctx, n, metav1.UpdateOptions{})
		must(t, err, "label namespace")
	}
	create := func(err error, what string) {
		if err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatalf("%s: %v", what, err)
		}
	}
	_, err = cs.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "tenant"}}, metav1.CreateOptions{})
	create(err, "service account")
	_, err = cs.RbacV1().Roles(ns).Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "tenant"}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"pods", "configmaps"}, Verbs: []string{"get", "list", "watch", "create", "update", "patch", "delete"}},
		{APIGroups: []string{"batch"}, Resources: []string{"jobs"}, Verbs: []string{"get", "list", "watch", "create", "update", "patch", "delete"}},
	}}, metav1.CreateOptions{})
	create(err, "role")
	_, err = cs.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "tenant"},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "tenant"},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: "tenant", Namespace: ns}}}, metav1.CreateOptions{})
	create(err, "role binding")
	tok, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, "tenant",
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr(int64(3600))}}, metav1.CreateOptions{})
	must(t, err, "token")
	cfg := rest.CopyConfig(c.Config)
	cfg.BearerToken = tok.Status.Token
	tc, err := kubernetes.NewForConfig(cfg)
	must(t, err, "tenant client")
	return tc
}

var policiesOnce sync.Once

// applyPolicies creates deploy/admission-policies.yaml's objects once and
// waits until the API server enforces them (its policy plugins pick them
// up from informers).
func applyPolicies(ctx context.Context, t *testing.T, c *kubetest.ControlPlane) {
	t.Helper()
	var err error
	policiesOnce.Do(func() { err = applyFile(ctx, c.Client, filepath.Join("..", "deploy", "admission-policies.yaml")) })
	must(t, err, "apply admission-policies.yaml")
	const ns = "gpusched-policy-probe"
	tc := tenantNamespace(ctx, t, c, ns)
	waitFor(ctx, t, "the admission policies in force", nil, func() (bool, string) {
		p, err := tc.CoreV1().Pods(ns).Create(ctx, gpuPod(ns, fmt.Sprintf("probe-%d", time.Now().UnixNano()), 1, nil), metav1.CreateOptions{})
		if err != nil {
			return false, err.Error()
		}
		_ = tc.CoreV1().Pods(ns).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr(int64(0))})
		j := gpuJob(ns, fmt.Sprintf("probe-%d", time.Now().UnixNano()), nil)
		j, err = tc.BatchV1().Jobs(ns).Create(ctx, j, metav1.CreateOptions{})
		if err != nil {
			return false, err.Error()
		}
		_ = tc.BatchV1().Jobs(ns).Delete(ctx, j.Name, metav1.DeleteOptions{PropagationPolicy: ptr(metav1.DeletePropagationBackground)})
		_, err = tc.CoreV1().Pods(ns).Create(ctx, gpuPod(ns, "probe-forged", 1, map[string]string{admission.AnnotationAdmittedType: "v100"}), metav1.CreateOptions{})
		if err == nil {
			_ = tc.CoreV1().Pods(ns).Delete(ctx, "probe-forged", metav1.DeleteOptions{GracePeriodSeconds: ptr(int64(0))})
		}
		return gated(p.Spec.SchedulingGates) && j.Spec.Suspend != nil && *j.Spec.Suspend && apierrors.IsForbidden(err), "not yet"
	})
}

// gpuPod is a bare pod asking for GPUs, as a tenant writes it: no gate.
func gpuPod(ns, name string, gpus int, ann map[string]string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Annotations: ann},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "train", Image: "registry.k8s.io/pause:3.10",
			Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{model.ResourceGPU: *resource.NewQuantity(int64(gpus), resource.DecimalSI)}}}}},
	}
}

// gpuJob is a Job of one 1-GPU pod, as a tenant writes it: not suspended,
// no gate.
func gpuJob(ns, name string, ann map[string]string) *batchv1.Job {
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Annotations: ann},
		Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever,
			Containers: gpuPod(ns, name, 1, nil).Spec.Containers}}},
	}
}

func gated(gs []corev1.PodSchedulingGate) bool {
	return slices.ContainsFunc(gs, func(g corev1.PodSchedulingGate) bool { return g.Name == admission.GateName })
}

// TestE2EAdmissionPolicies applies deploy/admission-policies.yaml to the
// real API server and plays a tenant against it: every GPU pod and Job it
// creates in its managed namespace is gated (Jobs suspended), whatever it
// writes; it can neither write the decision annotations (admitted type,
// preemption, the devices and their record), nor take the gate off, nor
// resume a suspended Job, nor name a node; pods without GPUs and other
// namespaces are left alone; the controller (here an admin) may do all of
// it.
func TestE2EAdmissionPolicies(t *testing.T) {
	c, _ := controlPlane(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	applyPolicies(ctx, t, c)
	const ns = "tenant-policies"
	tc := tenantNamespace(ctx, t, c, ns)
	t.Cleanup(func() { admDeletePods(c.Client, ns) })
	pods, jobs := tc.CoreV1().Pods(ns), tc.BatchV1().Jobs(ns)

	p, err := pods.Create(ctx, gpuPod(ns, "plain", 2, nil), metav1.CreateOptions{})
	must(t, err, "create a GPU pod")
	if !gated(p.Spec.SchedulingGates) {
		t.Errorf("a GPU pod created without the gate has none: %v", p.Spec.SchedulingGates)
	}
	init := gpuPod(ns, "init-gpu", 0, nil)
	init.Spec.InitContainers = gpuPod(ns, "x", 1, nil).Spec.Containers
	init.Spec.InitContainers[0].Name = "fetch"
	p, err = pods.Create(ctx, init, metav1.CreateOptions{})
	must(t, err, "create a pod with a GPU init container")
	if !gated(p.Spec.SchedulingGates) {
		t.Errorf("a pod whose init container asks for a GPU is not gated")
	}
	cpu := gpuPod(ns, "cpu", 0, nil)
	cpu.Spec.Containers[0].Resources = corev1.ResourceRequirements{}
	p, err = pods.Create(ctx, cpu, metav1.CreateOptions{})
	must(t, err, "create a CPU pod")
	if len(p.Spec.SchedulingGates) > 0 {
		t.Errorf("a pod without GPUs was gated")
	}
	onNode := gpuPod(ns, "on-node", 1, nil)
	onNode.Spec.NodeName = "some-node"
	if _, err := pods.Create(ctx, onNode, metav1.CreateOptions{}); err == nil {
		t.Errorf("a GPU pod naming spec.nodeName was accepted: it would bypass the scheduler")
	}
	for _, a := range append(slices.Clone(admission.DecisionAnnotations), model.AnnotationGPUs, model.AnnotationGPUsMAC) {
		_, err := pods.Create(ctx, gpuPod(ns, "forged", 1, map[string]string{a: "x"}), metav1.CreateOptions{})
		if !apierrors.IsForbidden(err) {
			t.Errorf("a pod created with %s: %v (want forbidden)", a, err)
		}
	}
	// Updates of its own pod: annotations that record decisions, the gate.
	p, err = pods.Get(ctx, "plain", metav1.GetOptions{})
	must(t, err, "get")
	forge := p.DeepCopy()
	forge.Annotations = map[string]string{model.AnnotationGPUs: "0,1"}
	if _, err := pods.Update(ctx, forge, metav1.UpdateOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("a tenant wrote %s on its pod: %v", model.AnnotationGPUs, err)
	}
	ungate := p.DeepCopy()
	ungate.Spec.SchedulingGates = nil
	if _, err := pods.Update(ctx, ungate, metav1.UpdateOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("a tenant took the gate off its pod: %v", err)
	}
	other := p.DeepCopy()
	other.Annotations = map[string]string{"team": "vision"}
	if _, err := pods.Update(ctx, other, metav1.UpdateOptions{}); err != nil {
		t.Errorf("a tenant cannot write its own annotations: %v", err)
	}
	// Jobs: created suspended and gated; not resumed by the tenant.
	j, err := jobs.Create(ctx, gpuJob(ns, "train", nil), metav1.CreateOptions{})
	must(t, err, "create a Job")
	if j.Spec.Suspend == nil || !*j.Spec.Suspend || !gated(j.Spec.Template.Spec.SchedulingGates) {
		t.Errorf("a GPU Job was created running or ungated: suspend %v, gates %v", j.Spec.Suspend, j.Spec.Template.Spec.SchedulingGates)
	}
	resume := j.DeepCopy()
	resume.Spec.Suspend = ptr(false)
	if _, err := jobs.Update(ctx, resume, metav1.UpdateOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("a tenant resumed its suspended Job: %v", err)
	}
	// The controller (an admin here; in a cluster its ServiceAccount) may.
	adm := c.Client.CoreV1().Pods(ns)
	p, err = adm.Get(ctx, "plain", metav1.GetOptions{})
	must(t, err, "get")
	p.Spec.SchedulingGates = nil
	p.Annotations = map[string]string{admission.AnnotationAdmittedType: "v100"}
	_, err = adm.Update(ctx, p, metav1.UpdateOptions{})
	must(t, err, "the controller admits")
	// Another namespace, not labelled: the policies do not apply.
	const free = "not-managed"
	must(t, kubetest.EnsureNamespace(ctx, c.Client, free), "namespace")
	t.Cleanup(func() { admDeletePods(c.Client, free) })
	p, err = c.Client.CoreV1().Pods(free).Create(ctx, gpuPod(free, "plain", 1, map[string]string{model.AnnotationGPUs: "0"}), metav1.CreateOptions{})
	must(t, err, "create in an unmanaged namespace")
	if len(p.Spec.SchedulingGates) > 0 {
		t.Errorf("a pod of an unmanaged namespace was gated")
	}
}
