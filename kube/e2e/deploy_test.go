package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpusched/gpusched/kube/gpusched"
	"github.com/gpusched/gpusched/kube/internal/kubetest"
	"github.com/gpusched/gpusched/kube/model"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
)

// TestE2EDeployManifests applies deploy/rbac.yaml and deploy/deployment.yaml
// (as objects: nothing runs the Deployment here), then runs the scheduler
// as deploy/ would, with the ServiceAccount's token, the profile as
// shipped and leader election on, and checks that those rights suffice: it
// takes its lease, binds a pod with its GPUs and records an event. The
// account may read its record key's Secret and create none (#40: it could
// create any Secret in kube-system); a scheduler whose Secret is missing
// stops at start, naming the command that makes it.
func TestE2EDeployManifests(t *testing.T) {
	c, bin := controlPlane(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cs := c.Client
	must(t, kubetest.EnsureNamespace(ctx, cs, "kube-system"), "kube-system")
	for _, f := range []string{"rbac.yaml", "deployment.yaml"} {
		must(t, applyFile(ctx, cs, filepath.Join("..", "deploy", f)), "apply %s", f)
	}
	tok, err := cs.CoreV1().ServiceAccounts("kube-system").CreateToken(ctx, "gpusched-scheduler",
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr(int64(3600))}}, metav1.CreateOptions{})
	must(t, err, "token")
	dir := testDir(t)
	kc := filepath.Join(dir, "sa-kubeconfig")
	must(t, c.WriteKubeconfig(kc, tok.Status.Token), "kubeconfig")
	saCfg := rest.CopyConfig(c.Config)
	saCfg.BearerToken = tok.Status.Token
	sa, err := kubernetes.NewForConfig(saCfg)
	must(t, err, "the scheduler's client")
	_, err = sa.CoreV1().Secrets("kube-system").Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "made-by-the-scheduler"},
		StringData: map[string]string{"key": "x"}}, metav1.CreateOptions{})
	if !apierrors.IsForbidden(err) {
		t.Errorf("the scheduler's account created a Secret in kube-system: %v (want forbidden)", err)
	}
	_, err = sa.CoreV1().Secrets("kube-system").List(ctx, metav1.ListOptions{})
	if !apierrors.IsForbidden(err) {
		t.Errorf("the scheduler's account listed the Secrets of kube-system: %v (want forbidden)", err)
	}
	_, err = sa.CoreV1().Secrets("kube-system").Get(ctx, "gpusched-e2e-no-such-key", metav1.GetOptions{})
	if !apierrors.IsForbidden(err) {
		t.Errorf("the scheduler's account read a Secret other than its key's: %v (want forbidden)", err)
	}
	// A missing key's Secret (read as an admin: the account may read only
	// its own).
	noKey := schedulerConfig(t, c, map[string]any{"recordKeySecret": "kube-system/gpusched-e2e-no-such-key"})
	stopped := startScheduler(t, dir, "gpusched-no-key", bin, noKey)
	waitFor(ctx, t, "the scheduler without its key stopped", nil, func() (bool, string) {
		exited, _ := stopped.Exited()
		return exited, "still running"
	})
	if want := gpusched.RecordKeyCommand("kube-system", "gpusched-e2e-no-such-key"); !strings.Contains(strings.ReplaceAll(stopped.LogTail(1<<16), `\"`, `"`), want) { // klog quotes the error
		t.Errorf("the scheduler without its key does not say how to make it (%s):\n%s", want, stopped.LogTail(4000))
	}
	if _, err := cs.CoreV1().Secrets("kube-system").Get(ctx, "gpusched-e2e-no-such-key", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the missing key's Secret exists now: %v", err)
	}

	cfg := schedulerConfig(t, c, nil)
	cfg["leaderElection"] = map[string]any{"leaderElect": true, "resourceNamespace": "kube-system", "resourceName": "gpusched-scheduler",
		"leaseDuration": "15s", "renewDeadline": "10s", "retryPeriod": "2s"}
	cfg["clientConnection"].(map[string]any)["kubeconfig"] = kc
	sched := startScheduler(t, dir, "gpusched-sa", bin, cfg)

	const ns = "e2e-deploy"
	must(t, kubetest.EnsureNamespace(ctx, cs, ns), "namespace")
	t.Cleanup(func() { _ = cs.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{}) })
	createNodes(ctx, t, cs, []kubetest.GPUNode{{Name: "deploy-0", Product: kubetest.ProductA100, GPUs: 8,
		Links: `{"interconnect":"nvswitch"}`, Labels: map[string]string{"gpusched.io/e2e": "deploy"}}})
	w, err := watch(ctx, cs, ns, 0, true)
	must(t, err, "watcher")
	defer w.stop()
	ok := gpuPodSpec(ns, "ok", 4, "", nil, nil)
	bad := gpuPodSpec(ns, "bad", 1, "v100,%%", nil, nil)
	for _, p := range []*corev1.Pod{ok, bad} {
		p.Spec.NodeSelector = map[string]string{"gpusched.io/e2e": "deploy"}
		_, err := cs.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{})
		must(t, err, "create %s", p.Name)
	}
	waitFor(ctx, t, "the lease", sched, func() (bool, string) {
		l, err := cs.CoordinationV1().Leases("kube-system").Get(ctx, "gpusched-scheduler", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return l.Spec.HolderIdentity != nil && *l.Spec.HolderIdentity != "", "no holder"
	})
	waitFor(ctx, t, "pod ok bound", sched, func() (bool, string) {
		all, _, _ := w.snapshot()
		return len(all) == 1 && all[0].name == "ok" && len(all[0].devices) == 4, fmt.Sprintf("%d bound", len(all))
	})
	waitFor(ctx, t, "an event on pod bad", sched, func() (bool, string) {
		evs, err := cs.EventsV1().Events(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		for _, e := range evs.Items {
			if e.Regarding.Name == "bad" && strings.Contains(e.Note, model.AnnotationGPUTypes) {
				return true, ""
			}
		}
		return false, "none yet"
	})
	if strings.Contains(sched.LogTail(1<<20), "forbidden") {
		t.Errorf("the scheduler was refused something:\n%s", grepLines(sched.LogTail(1<<20), "forbidden", 10))
	}
	_, _, violations := w.snapshot()
	for _, v := range violations {
		t.Error(v)
	}
}

func ptr[T any](v T) *T { return &v }

func grepLines(s, word string, n int) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, word) && len(out) < n {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// applyFile creates the objects of a multi-document YAML file (the kinds
// deploy/ uses), leaving those that exist.
func applyFile(ctx context.Context, cs kubernetes.Interface, path string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(b), 4096)
	for {
		var raw runtime.RawExtension
		if err := dec.Decode(&raw); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		if len(bytes.TrimSpace(raw.Raw)) == 0 {
			continue
		}
		obj, _, err := scheme.Codecs.UniversalDeserializer().Decode(raw.Raw, nil, nil)
		if err != nil {
			return err
		}
		switch o := obj.(type) {
		case *corev1.Namespace:
			err = applyNamespace(ctx, cs, o)
		case *rbacv1.ClusterRole:
			_, err = cs.RbacV1().ClusterRoles().Create(ctx, o, metav1.CreateOptions{})
		case *networkingv1.NetworkPolicy:
			_, err = cs.NetworkingV1().NetworkPolicies(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
		case *corev1.ServiceAccount:
			_, err = cs.CoreV1().ServiceAccounts(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
		case *rbacv1.ClusterRoleBinding:
			_, err = cs.RbacV1().ClusterRoleBindings().Create(ctx, o, metav1.CreateOptions{})
		case *rbacv1.RoleBinding:
			_, err = cs.RbacV1().RoleBindings(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
		case *rbacv1.Role:
			_, err = cs.RbacV1().Roles(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
		case *appsv1.Deployment:
			_, err = cs.AppsV1().Deployments(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
		case *corev1.ConfigMap:
			_, err = cs.CoreV1().ConfigMaps(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
		case *corev1.Service:
			_, err = cs.CoreV1().Services(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
		case *admissionv1.MutatingAdmissionPolicy:
			_, err = cs.AdmissionregistrationV1().MutatingAdmissionPolicies().Create(ctx, o, metav1.CreateOptions{})
		case *admissionv1.MutatingAdmissionPolicyBinding:
			_, err = cs.AdmissionregistrationV1().MutatingAdmissionPolicyBindings().Create(ctx, o, metav1.CreateOptions{})
		case *admissionv1.ValidatingAdmissionPolicy:
			_, err = cs.AdmissionregistrationV1().ValidatingAdmissionPolicies().Create(ctx, o, metav1.CreateOptions{})
		case *admissionv1.ValidatingAdmissionPolicyBinding:
			_, err = cs.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Create(ctx, o, metav1.CreateOptions{})
		default:
			return fmt.Errorf("%s: unexpected kind %T", path, obj)
		}
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("%s: %w", path, err)
		}
	}
}

// applyNamespace creates a namespace, or sets the labels the manifest
// gives it on the one that exists (another test may have made it bare),
// as kubectl apply would.
func applyNamespace(ctx context.Context, cs kubernetes.Interface, ns *corev1.Namespace) error {
	_, err := cs.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{})
	if !apierrors.IsAlreadyExists(err) {
		return err
	}
	cur, err := cs.CoreV1().Namespaces().Get(ctx, ns.Name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	if cur.Labels == nil {
		cur.Labels = map[string]string{}
	}
	for k, v := range ns.Labels {
		cur.Labels[k] = v
	}
	_, err = cs.CoreV1().Namespaces().Update(ctx, cur, metav1.UpdateOptions{})
	return err
}

// TestE2EHardenedManifests applies the controllers' namespace and RBAC
// (admission-rbac.yaml, kueue-rbac.yaml) and networkpolicy.yaml to the
// real API server, then has it admit, as a dry run, each Deployment and a
// pod of each Deployment's template: in gpusched-system, which enforces
// Pod Security's restricted level, and, for all three, in a namespace
// that does (the scheduler's kube-system is not labelled here). So the
// API server's own checks pass them: restricted (seccomp RuntimeDefault,
// non-root, no escalation, capabilities dropped), the priority class
// resolved (system-cluster-critical outside kube-system), the memory
// limits valid. Before #40 the restricted level refused every one of them
// (no seccompProfile). learning.yaml is applied too (its Role's names,
// Services and NetworkPolicy), and the two controllers' Deployments as
// its patches make them are admitted as a dry run.
func TestE2EHardenedManifests(t *testing.T) {
	c, _ := controlPlane(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cs := c.Client
	for _, f := range []string{"admission-rbac.yaml", "kueue-rbac.yaml", "networkpolicy.yaml", "rbac.yaml", "learning.yaml"} {
		must(t, applyFile(ctx, cs, filepath.Join("..", "deploy", f)), "apply %s", f)
	}
	np, err := cs.NetworkingV1().NetworkPolicies("gpusched-system").Get(ctx, "gpusched-metrics", metav1.GetOptions{})
	must(t, err, "the NetworkPolicy")
	if got := np.Spec.Ingress[0].From[0].NamespaceSelector.MatchLabels["gpusched.io/monitoring"]; got != "true" {
		t.Errorf("the NetworkPolicy admits %q", got)
	}
	const restricted = "e2e-restricted"
	must(t, kubetest.EnsureNamespace(ctx, cs, restricted), "namespace")
	must(t, applyNamespace(ctx, cs, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: restricted,
		Labels: map[string]string{"pod-security.kubernetes.io/enforce": "restricted"}}}), "label %s", restricted)
	dry := metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}
	for _, f := range []string{"deployment.yaml", "admission-deployment.yaml", "kueue-deployment.yaml"} {
		var d *appsv1.Deployment
		b, err := os.ReadFile(filepath.Join("..", "deploy", f))
		must(t, err, "read %s", f)
		for _, doc := range strings.Split(string(b), "\n---") {
			if o, _, err := scheme.Codecs.UniversalDeserializer().Decode([]byte(doc), nil, nil); err == nil {
				if dd, ok := o.(*appsv1.Deployment); ok {
					d = dd
				}
			}
		}
		if d == nil {
			t.Fatalf("no Deployment in %s", f)
		}
		if _, err := cs.AppsV1().Deployments(d.Namespace).Create(ctx, d, dry); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Errorf("%s: the Deployment: %v", f, err)
		}
		pod := func(ns, sa string) *corev1.Pod {
			p := &corev1.Pod{ObjectMeta: *d.Spec.Template.ObjectMeta.DeepCopy(), Spec: *d.Spec.Template.Spec.DeepCopy()}
			p.Namespace, p.Name, p.Spec.ServiceAccountName = ns, d.Name+"-dry-run", sa
			return p
		}
		if d.Namespace == "gpusched-system" {
			if _, err := cs.CoreV1().Pods(d.Namespace).Create(ctx, pod(d.Namespace, d.Spec.Template.Spec.ServiceAccountName), dry); err != nil {
				t.Errorf("%s: its pod in %s: %v", f, d.Namespace, err)
			}
		}
		p, err := cs.CoreV1().Pods(restricted).Create(ctx, pod(restricted, "default"), dry)
		if err != nil {
			t.Errorf("%s: its pod under the restricted level: %v", f, err)
			continue
		}
		if p.Spec.Priority == nil || *p.Spec.Priority < 1_000_000_000 {
			t.Errorf("%s: priority %v (want a system class's)", f, p.Spec.Priority)
		}
		// With learning on (learning.yaml's patches), as kubectl patch
		// would make it.
		patch := map[string]string{"admission-deployment.yaml": "learning-admission-patch.yaml", "kueue-deployment.yaml": "learning-kueue-patch.yaml"}[f]
		if patch == "" {
			continue
		}
		pb, err := os.ReadFile(filepath.Join("..", "deploy", patch))
		must(t, err, "read %s", patch)
		pj, err := utilyaml.ToJSON(pb)
		must(t, err, "%s", patch)
		orig, err := json.Marshal(d)
		must(t, err, "%s", f)
		merged, err := strategicpatch.StrategicMergePatch(orig, pj, appsv1.Deployment{})
		must(t, err, "%s on %s", patch, f)
		var pd appsv1.Deployment
		must(t, json.Unmarshal(merged, &pd), "%s", patch)
		pd.Name += "-learning"
		if _, err := cs.AppsV1().Deployments(pd.Namespace).Create(ctx, &pd, dry); err != nil {
			t.Errorf("%s patched by %s: %v", f, patch, err)
		}
	}
}
