package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gpusched/gpusched/kube/admission"
	"github.com/gpusched/gpusched/kube/internal/kubetest"
	"github.com/gpusched/gpusched/kube/kueue"
	"github.com/gpusched/gpusched/kube/model"
	"github.com/gpusched/gpusched/kube/tenancy"
	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	batchv1client "k8s.io/client-go/kubernetes/typed/batch/v1"
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
		forged := apierrors.IsForbidden(err)
		// Each policy is loaded on its own: gpusched-uncounted-gpus too.
		claimed := gpuPod(ns, "probe-claimed", 0, nil)
		claimed.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "gpus", ResourceClaimTemplateName: ptr("probe")}}
		_, err = tc.CoreV1().Pods(ns).Create(ctx, claimed, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		uncounted := err != nil && strings.Contains(err.Error(), "'gpusched-uncounted-gpus'")
		return gated(p.Spec.SchedulingGates) && j.Spec.Suspend != nil && *j.Spec.Suspend && forged && uncounted, "not yet"
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
	// A GPU in a sidecar (an init container that keeps running) is a GPU.
	sidecar := gpuPod(ns, "sidecar-gpu", 0, nil)
	sidecar.Spec.InitContainers = gpuPod(ns, "x", 1, nil).Spec.Containers
	sidecar.Spec.InitContainers[0].Name = "serve"
	sidecar.Spec.InitContainers[0].RestartPolicy = ptr(corev1.ContainerRestartPolicyAlways)
	p, err = pods.Create(ctx, sidecar, metav1.CreateOptions{})
	must(t, err, "create a pod with a GPU sidecar")
	if !gated(p.Spec.SchedulingGates) {
		t.Errorf("a pod whose sidecar asks for a GPU is not gated")
	}
	// A GPU resource the controller does not count (a MIG slice) would run
	// outside the rounds: refused, in a pod and in a Job.
	mig := gpuPod(ns, "mig", 0, nil)
	mig.Spec.Containers[0].Resources.Limits = corev1.ResourceList{"nvidia.com/mig-1g.5gb": resource.MustParse("1")}
	if p, err := pods.Create(ctx, mig, metav1.CreateOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("a pod asking for nvidia.com/mig-1g.5gb: %v (gates %v; want forbidden)", err, p.Spec.SchedulingGates)
	}
	migJob := gpuJob(ns, "mig", nil)
	migJob.Spec.Template.Spec.Containers = mig.Spec.Containers
	if _, err := jobs.Create(ctx, migJob, metav1.CreateOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("a Job asking for nvidia.com/mig-1g.5gb: %v (want forbidden)", err)
	}
	// Devices asked through a DRA claim are not counted either: refused,
	// in a pod and in a Job.
	claimed := gpuPod(ns, "claimed", 0, nil)
	claimed.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "gpus", ResourceClaimTemplateName: ptr("eight-gpus")}}
	if _, err := pods.Create(ctx, claimed, metav1.CreateOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("a pod asking for devices through a ResourceClaim: %v (want forbidden)", err)
	}
	claimedJob := gpuJob(ns, "claimed", nil)
	claimedJob.Spec.Template.Spec.Containers[0].Resources = corev1.ResourceRequirements{}
	claimedJob.Spec.Template.Spec.ResourceClaims = claimed.Spec.ResourceClaims
	if _, err := jobs.Create(ctx, claimedJob, metav1.CreateOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("a Job asking for devices through a ResourceClaim: %v (want forbidden)", err)
	}
	// kube-controller-manager's own identity (controllers that run without
	// their service accounts) creating a pod for a ReplicaSet: gated; for
	// a Job it controls: an admitted Job's pod, left alone.
	kcm := rest.CopyConfig(c.Config)
	kcm.Impersonate = rest.ImpersonationConfig{UserName: "system:kube-controller-manager", Groups: []string{"system:masters"}}
	kcmClient, err := kubernetes.NewForConfig(kcm)
	must(t, err, "kube-controller-manager's client")
	yes := true
	rsPod := gpuPod(ns, "rs-pod", 1, nil)
	rsPod.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "rs", UID: "rs-uid", Controller: &yes}}
	p, err = kcmClient.CoreV1().Pods(ns).Create(ctx, rsPod, metav1.CreateOptions{})
	must(t, err, "create a ReplicaSet's pod as kube-controller-manager")
	if !gated(p.Spec.SchedulingGates) {
		t.Errorf("a ReplicaSet's GPU pod made by kube-controller-manager's identity is not gated")
	}
	jobPod := gpuPod(ns, "job-pod", 1, nil)
	jobPod.OwnerReferences = []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: "j", UID: "j-uid", Controller: &yes}}
	p, err = kcmClient.CoreV1().Pods(ns).Create(ctx, jobPod, metav1.CreateOptions{})
	must(t, err, "create a Job's pod as kube-controller-manager")
	if gated(p.Spec.SchedulingGates) {
		t.Errorf("a Job's pod made by the job controller was gated")
	}
	// A GPU that another webhook adds after the policies ran: the gate
	// policy is invoked again (reinvocationPolicy IfNeeded, its test in
	// the mutation).
	startMutatingWebhook(ctx, t, c, "gpusched-e2e-admission")
	late := gpuPod(ns, "late-gpu", 0, nil)
	late.Spec.Containers[0].Resources = corev1.ResourceRequirements{}
	late.Labels = map[string]string{labelMutate: "add-gpu"}
	p, err = pods.Create(ctx, late, metav1.CreateOptions{})
	must(t, err, "create a pod whose GPU a webhook adds")
	if p.Spec.Containers[0].Resources.Limits.Name(model.ResourceGPU, resource.DecimalSI).Value() != 1 {
		t.Errorf("the test webhook added no GPU: %v", p.Spec.Containers[0].Resources)
	} else if !gated(p.Spec.SchedulingGates) {
		t.Errorf("a pod whose GPU a later webhook added is not gated")
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

var kueuePoliciesMainOnce sync.Once

// Kinds of Kueue's integrations, as stub CRDs on the shared control plane.
var (
	jobSetGVR     = schema.GroupVersionResource{Group: "jobset.x-k8s.io", Version: "v1alpha2", Resource: "jobsets"}
	pyTorchJobGVR = schema.GroupVersionResource{Group: "kubeflow.org", Version: "v1", Resource: "pytorchjobs"}
	rayJobGVR     = schema.GroupVersionResource{Group: "ray.io", Version: "v1", Resource: "rayjobs"}
)

// podSpecOf is a pod spec as unstructured content: one container asking
// for gpus GPUs (none: no resources), in an init container that keeps
// running (a sidecar) when sidecar is set.
func podSpecOf(gpus int, sidecar bool) map[string]any {
	c := map[string]any{"name": "train", "image": "registry.k8s.io/pause:3.10"}
	if gpus > 0 {
		c["resources"] = map[string]any{"limits": map[string]any{string(model.ResourceGPU): fmt.Sprint(gpus)}}
	}
	if !sidecar {
		return map[string]any{"containers": []any{c}}
	}
	c["restartPolicy"] = "Always"
	return map[string]any{"initContainers": []any{c}, "containers": []any{map[string]any{"name": "main", "image": "registry.k8s.io/pause:3.10"}}}
}

// queuedObject is an object of a stub kind in Kueue's queue q.
func queuedObject(gvr schema.GroupVersionResource, kind, ns, name string, spec map[string]any) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": gvr.GroupVersion().String(), "kind": kind,
		"metadata": map[string]any{"namespace": ns, "name": name, "labels": map[string]any{kueue.LabelQueueName: "q"}},
		"spec":     spec}}
}

func kueueGated(ann map[string]string) bool {
	for g := range strings.SplitSeq(ann[kueue.AnnotationAdmissionGatedBy], ",") {
		if strings.TrimSpace(g) == kueue.DefaultGate {
			return true
		}
	}
	return false
}

// TestE2EKueuePolicies applies deploy/kueue-policies.yaml to the real API
// server (no Kueue needed: the policies are the API server's) and plays a
// tenant of a namespace labelled gpusched.io/kueue=true: every queued job
// of the gated kinds whose pods ask for GPUs, in a container, an init
// container or a sidecar, gets gpusched's gate, also when a webhook adds
// the queue label after the policies ran (Kueue's default LocalQueue);
// JobSets and Kubeflow's jobs too (stub CRDs of their shapes), and the
// tenant cannot take the gate off them; a queued GPU workload of a kind
// the gate cannot hold (a RayJob, a plain pod, a Deployment) is refused;
// CPU jobs, unqueued jobs and MIG slices are left alone; an ungated GPU
// job cannot be put into a queue after its creation (kueueGateOnUpdate).
func TestE2EKueuePolicies(t *testing.T) {
	c, _ := controlPlane(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	dyn, err := dynamic.NewForConfig(c.Config)
	must(t, err, "dynamic client")
	for _, k := range []struct {
		gvr  schema.GroupVersionResource
		kind string
	}{{jobSetGVR, "JobSet"}, {pyTorchJobGVR, "PyTorchJob"}, {rayJobGVR, "RayJob"}} {
		ensureStubCRD(ctx, t, dyn, k.gvr, k.kind)
	}
	kueuePoliciesMainOnce.Do(func() { err = applyFile(ctx, c.Client, filepath.Join("..", "deploy", "kueue-policies.yaml")) })
	must(t, err, "apply kueue-policies.yaml")
	const ns = "tenant-kueue-policies"
	tc := tenantNamespace(ctx, t, c, ns)
	n, err := c.Client.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
	must(t, err, "namespace")
	n.Labels["gpusched.io/kueue"] = "true"
	delete(n.Labels, tenancy.LabelManaged) // Kueue's namespace, not the admission controller's
	_, err = c.Client.CoreV1().Namespaces().Update(ctx, n, metav1.UpdateOptions{})
	must(t, err, "label the namespace gpusched.io/kueue=true")
	_, err = c.Client.RbacV1().Roles(ns).Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "tenant-kinds"}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{"jobset.x-k8s.io", "kubeflow.org", "ray.io", "apps"}, Resources: []string{"*"}, Verbs: []string{"get", "create", "update", "patch", "delete"}},
	}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("role: %v", err)
	}
	_, err = c.Client.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "tenant-kinds"},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "tenant-kinds"},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: "tenant", Namespace: ns}}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("role binding: %v", err)
	}
	tenantCfg := rest.CopyConfig(c.Config)
	tenantCfg.BearerToken = tenantToken(ctx, t, c, ns)
	tdyn, err := dynamic.NewForConfig(tenantCfg)
	must(t, err, "the tenant's dynamic client")
	jobs := tc.BatchV1().Jobs(ns)
	waitFor(ctx, t, "kueue-policies.yaml in force", nil, func() (bool, string) {
		j, err := jobs.Create(ctx, kueueJob(ns, "probe", "q", 1, nil, nil, false), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err != nil {
			return false, err.Error()
		}
		return kueueGated(j.Annotations), "not yet"
	})
	kueueValidationInForce(ctx, t, tc, ns)
	startMutatingWebhook(ctx, t, c, "gpusched-e2e-kueue")

	// batch/v1 Jobs: a GPU in an init container or a sidecar is a GPU; a
	// queue label a later webhook adds is a queue label.
	create := func(j *batchv1.Job) *batchv1.Job {
		t.Helper()
		got, err := jobs.Create(ctx, j, metav1.CreateOptions{})
		must(t, err, "create Job %s", j.Name)
		return got
	}
	for _, tc := range []struct {
		name    string
		job     func() *batchv1.Job
		want    bool
		explain string
	}{
		{"plain", func() *batchv1.Job { return kueueJob(ns, "plain", "q", 1, nil, nil, false) }, true, "a queued GPU Job"},
		{"init", func() *batchv1.Job {
			j := kueueJob(ns, "init", "q", 0, nil, nil, false)
			j.Spec.Template.Spec.InitContainers = kueueJob(ns, "x", "q", 1, nil, nil, false).Spec.Template.Spec.Containers
			j.Spec.Template.Spec.InitContainers[0].Name = "fetch"
			j.Spec.Template.Spec.Containers[0].Resources = corev1.ResourceRequirements{}
			return j
		}, true, "a Job whose init container asks for a GPU"},
		{"sidecar", func() *batchv1.Job {
			j := kueueJob(ns, "sidecar", "q", 0, nil, nil, false)
			j.Spec.Template.Spec.InitContainers = kueueJob(ns, "x", "q", 1, nil, nil, false).Spec.Template.Spec.Containers
			j.Spec.Template.Spec.InitContainers[0].Name = "serve"
			j.Spec.Template.Spec.InitContainers[0].RestartPolicy = ptr(corev1.ContainerRestartPolicyAlways)
			j.Spec.Template.Spec.Containers[0].Resources = corev1.ResourceRequirements{}
			return j
		}, true, "a Job whose sidecar asks for a GPU"},
		{"late-queue", func() *batchv1.Job {
			j := kueueJob(ns, "late-queue", "q", 1, nil, nil, false)
			j.Labels = map[string]string{labelMutate: "add-queue"}
			return j
		}, true, "a GPU Job whose queue label a later webhook added"},
		{"cpu", func() *batchv1.Job {
			j := kueueJob(ns, "cpu", "q", 0, nil, nil, false)
			j.Spec.Template.Spec.Containers[0].Resources = corev1.ResourceRequirements{}
			return j
		}, false, "a queued CPU Job"},
		{"unqueued", func() *batchv1.Job {
			j := kueueJob(ns, "unqueued", "q", 1, nil, nil, false)
			j.Labels = nil
			return j
		}, false, "a GPU Job of no queue"},
		{"mig", func() *batchv1.Job {
			j := kueueJob(ns, "mig", "q", 0, nil, nil, false)
			j.Spec.Template.Spec.Containers[0].Resources.Limits = corev1.ResourceList{"nvidia.com/mig-1g.5gb": resource.MustParse("1")}
			return j
		}, false, "a queued Job of MIG slices (Kueue's alone)"},
	} {
		j := create(tc.job())
		if tc.name == "late-queue" && j.Labels[kueue.LabelQueueName] == "" {
			t.Errorf("the test webhook added no queue label: %v", j.Labels)
		}
		if got := kueueGated(j.Annotations); got != tc.want {
			t.Errorf("%s: gated %v, want %v (annotations %v)", tc.explain, got, tc.want, j.Annotations)
		}
	}

	kueueGateOnUpdate(ctx, t, c, tdyn, jobs, ns)

	// JobSets and Kubeflow's jobs are gated as Jobs are, and the tenant
	// cannot take gpusched's gate off them.
	js := queuedObject(jobSetGVR, "JobSet", ns, "js", map[string]any{"replicatedJobs": []any{
		map[string]any{"name": "workers", "template": map[string]any{"spec": map[string]any{"template": map[string]any{"spec": podSpecOf(1, false)}}}}}})
	got, err := createCR(ctx, tdyn, jobSetGVR, js)
	must(t, err, "create a JobSet")
	if !kueueGated(got.GetAnnotations()) {
		t.Errorf("a queued GPU JobSet is not gated: %v", got.GetAnnotations())
	}
	// A JobSet the tenant gated itself at creation (as docs/kueue.md said
	// to, before the gate covered JobSets): the gate is gpusched's to
	// remove all the same.
	own := queuedObject(jobSetGVR, "JobSet", ns, "js-own", js.Object["spec"].(map[string]any))
	own.SetAnnotations(map[string]string{kueue.AnnotationAdmissionGatedBy: kueue.DefaultGate})
	got, err = createCR(ctx, tdyn, jobSetGVR, own)
	must(t, err, "create a JobSet gated by its tenant")
	got.SetAnnotations(nil)
	if _, err := tdyn.Resource(jobSetGVR).Namespace(ns).Update(ctx, got, metav1.UpdateOptions{}); !apierrors.IsForbidden(err) && !apierrors.IsInvalid(err) {
		t.Errorf("the tenant took gpusched's gate off its JobSet: %v", err)
	}
	pt := queuedObject(pyTorchJobGVR, "PyTorchJob", ns, "pt", map[string]any{"pytorchReplicaSpecs": map[string]any{
		"Master": map[string]any{"replicas": 1, "template": map[string]any{"spec": podSpecOf(0, false)}},
		"Worker": map[string]any{"replicas": 2, "template": map[string]any{"spec": podSpecOf(1, true)}}}})
	got, err = createCR(ctx, tdyn, pyTorchJobGVR, pt)
	must(t, err, "create a PyTorchJob")
	if !kueueGated(got.GetAnnotations()) {
		t.Errorf("a queued PyTorchJob whose workers' sidecar asks for a GPU is not gated: %v", got.GetAnnotations())
	}

	// Kinds the gate cannot hold: refused when queued and asking for GPUs.
	ray := queuedObject(rayJobGVR, "RayJob", ns, "ray", map[string]any{"rayClusterSpec": map[string]any{
		"headGroupSpec":    map[string]any{"template": map[string]any{"spec": podSpecOf(0, false)}},
		"workerGroupSpecs": []any{map[string]any{"groupName": "gpu", "template": map[string]any{"spec": podSpecOf(1, false)}}}}})
	if _, err := createCR(ctx, tdyn, rayJobGVR, ray); !apierrors.IsForbidden(err) {
		t.Errorf("a queued RayJob with GPU workers: %v (want forbidden)", err)
	}
	rayCPU := queuedObject(rayJobGVR, "RayJob", ns, "ray-cpu", map[string]any{"rayClusterSpec": map[string]any{
		"headGroupSpec": map[string]any{"template": map[string]any{"spec": podSpecOf(0, false)}}}})
	if _, err := createCR(ctx, tdyn, rayJobGVR, rayCPU); err != nil {
		t.Errorf("a queued CPU RayJob: %v (want created)", err)
	}
	pod := gpuPod(ns, "queued-pod", 1, nil)
	pod.Labels = map[string]string{kueue.LabelQueueName: "q"}
	if _, err := tc.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("a queued plain GPU pod: %v (want forbidden)", err)
	}
	dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "serve", Labels: map[string]string{kueue.LabelQueueName: "q"}},
		Spec: appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "serve"}},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "serve"}}, Spec: gpuPod(ns, "x", 1, nil).Spec}}}
	if _, err := tc.AppsV1().Deployments(ns).Create(ctx, dep, metav1.CreateOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("a queued GPU Deployment: %v (want forbidden)", err)
	}
}

// kueueGateOnUpdate plays gpusched-kueue-gate-queue (review of #40): the
// gate is added at creation only, so a tenant that creates its GPU Job
// suspended without the queue label (not gated) cannot label it
// afterwards (Kueue takes a queue label on a suspended job and would
// queue it ungated), nor make a queued ungated JobSet ask for a GPU; a
// gated Job may change queue, a CPU Job may be queued, and an admin may
// label a GPU Job. jobs is the tenant's, as tdyn; the gated Job "plain" of
// queue q exists.
func kueueGateOnUpdate(ctx context.Context, t *testing.T, c *kubetest.ControlPlane, tdyn dynamic.Interface, jobs batchv1client.JobInterface, ns string) {
	t.Helper()
	label := func(q string) []byte {
		return fmt.Appendf(nil, `{"metadata":{"labels":{%q:%q}}}`, kueue.LabelQueueName, q)
	}
	for _, j := range []struct {
		name string
		gpus int
	}{{"late-label", 1}, {"late-cpu", 0}} {
		late := kueueJob(ns, j.name, "q", j.gpus, nil, nil, false)
		late.Labels = nil
		late.Spec.Suspend = ptr(true)
		if j.gpus == 0 {
			late.Spec.Template.Spec.Containers[0].Resources = corev1.ResourceRequirements{}
		}
		got, err := jobs.Create(ctx, late, metav1.CreateOptions{})
		must(t, err, "create Job %s", j.name)
		if kueueGated(got.Annotations) {
			t.Errorf("Job %s of no queue was gated: %v", j.name, got.Annotations)
		}
	}
	if j, err := jobs.Patch(ctx, "late-label", types.MergePatchType, label("q"), metav1.PatchOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("the tenant put its ungated GPU Job into queue q by labelling it after creation: %v (want forbidden; labels now %v)", err, j.GetLabels())
	}
	if _, err := jobs.Patch(ctx, "late-cpu", types.MergePatchType, label("q"), metav1.PatchOptions{}); err != nil {
		t.Errorf("a CPU Job labelled for a queue after creation: %v (want allowed)", err)
	}
	if _, err := jobs.Patch(ctx, "plain", types.MergePatchType, label("q2"), metav1.PatchOptions{}); err != nil {
		t.Errorf("a gated GPU Job moved to another queue: %v (want allowed)", err)
	}
	if _, err := c.Client.BatchV1().Jobs(ns).Patch(ctx, "late-label", types.MergePatchType, label("q"), metav1.PatchOptions{}); err != nil {
		t.Errorf("the admin (system:masters) labelled a GPU Job: %v (want allowed)", err)
	}
	if _, err := jobs.Patch(ctx, "late-label", types.MergePatchType, label("q3"), metav1.PatchOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("the tenant moved its ungated GPU Job to another queue: %v (want forbidden)", err)
	}
	cpu := queuedObject(jobSetGVR, "JobSet", ns, "js-cpu", map[string]any{"replicatedJobs": []any{
		map[string]any{"name": "workers", "template": map[string]any{"spec": map[string]any{"template": map[string]any{"spec": podSpecOf(0, false)}}}}}})
	got, err := createCR(ctx, tdyn, jobSetGVR, cpu)
	must(t, err, "create a queued CPU JobSet")
	if kueueGated(got.GetAnnotations()) {
		t.Errorf("a queued CPU JobSet was gated: %v", got.GetAnnotations())
	}
	got.Object["spec"] = map[string]any{"replicatedJobs": []any{
		map[string]any{"name": "workers", "template": map[string]any{"spec": map[string]any{"template": map[string]any{"spec": podSpecOf(1, false)}}}}}}
	if _, err := tdyn.Resource(jobSetGVR).Namespace(ns).Update(ctx, got, metav1.UpdateOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("the tenant made its queued ungated JobSet ask for a GPU: %v (want forbidden)", err)
	}
}

// kueueValidationInForce waits until the API server enforces
// kueue-policies.yaml's validating policies in namespace ns for the tenant
// (client tc), as it enforced the mutating one before: each policy is
// loaded on its own, and a check made while one is not yet in force reads
// as a hole in it. The probes are dry runs on two Jobs made for them and
// deleted after.
func kueueValidationInForce(ctx context.Context, t *testing.T, tc kubernetes.Interface, ns string) {
	t.Helper()
	jobs := tc.BatchV1().Jobs(ns)
	ungated := kueueJob(ns, "probe-ungated", "q", 1, nil, nil, false)
	ungated.Labels, ungated.Spec.Suspend = nil, ptr(true)
	gated := kueueJob(ns, "probe-gated", "q", 1, nil, nil, false)
	gated.Spec.Suspend = ptr(true)
	for _, j := range []*batchv1.Job{ungated, gated} {
		_, err := jobs.Create(ctx, j, metav1.CreateOptions{})
		must(t, err, "create probe Job %s", j.Name)
		defer func() { _ = jobs.Delete(context.WithoutCancel(ctx), j.Name, metav1.DeleteOptions{}) }()
	}
	dry := metav1.PatchOptions{DryRun: []string{metav1.DryRunAll}}
	// refusedBy reports whether err is policy's refusal.
	refusedBy := func(policy string, err error) (bool, string) {
		return err != nil && strings.Contains(err.Error(), "'"+policy+"'"), fmt.Sprintf("answered %v", err)
	}
	waitFor(ctx, t, "gpusched-kueue-gate-queue in force", nil, func() (bool, string) {
		_, err := jobs.Patch(ctx, ungated.Name, types.MergePatchType,
			fmt.Appendf(nil, `{"metadata":{"labels":{%q:"q"}}}`, kueue.LabelQueueName), dry)
		return refusedBy("gpusched-kueue-gate-queue", err)
	})
	waitFor(ctx, t, "gpusched-kueue-gate-owner in force", nil, func() (bool, string) {
		_, err := jobs.Patch(ctx, gated.Name, types.MergePatchType,
			fmt.Appendf(nil, `{"metadata":{"annotations":{%q:null}}}`, kueue.AnnotationAdmissionGatedBy), dry)
		return refusedBy("gpusched-kueue-gate-owner", err)
	})
	waitFor(ctx, t, "gpusched-kueue-other-kinds in force", nil, func() (bool, string) {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "probe", Namespace: ns, Labels: map[string]string{kueue.LabelQueueName: "q"}},
			Spec: gated.Spec.Template.Spec}
		_, err := tc.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return refusedBy("gpusched-kueue-other-kinds", err)
	})
}

// tenantToken is a token of the tenant account of namespace ns.
func tenantToken(ctx context.Context, t *testing.T, c *kubetest.ControlPlane, ns string) string {
	t.Helper()
	tok, err := c.Client.CoreV1().ServiceAccounts(ns).CreateToken(ctx, "tenant",
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr(int64(3600))}}, metav1.CreateOptions{})
	must(t, err, "token")
	return tok.Status.Token
}

// createCR creates a custom resource, trying again for a while when the
// API server's admission does not know the kind yet (a CRD just made:
// "There can be a delay between when CustomResourceDefinitions are
// created and when they are available").
func createCR(ctx context.Context, dyn dynamic.Interface, gvr schema.GroupVersionResource, o *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	for {
		got, err := dyn.Resource(gvr).Namespace(o.GetNamespace()).Create(ctx, o, metav1.CreateOptions{})
		if err == nil || !strings.Contains(err.Error(), "There can be a delay") {
			return got, err
		}
		select {
		case <-ctx.Done():
			return nil, err
		case <-time.After(200 * time.Millisecond):
		}
	}
}
