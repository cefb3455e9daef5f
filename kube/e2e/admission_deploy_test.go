package e2e

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpusched/gpusched/kube/admission"
	"github.com/gpusched/gpusched/kube/internal/kubetest"
	"github.com/gpusched/gpusched/kube/model"
	"github.com/gpusched/gpusched/kube/tenancy"
	"github.com/gpusched/gpusched/perfmodel"
	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
)

// TestE2EAdmissionDeploy applies deploy/admission-rbac.yaml and
// admission-deployment.yaml (as objects: nothing runs the Deployment
// here) and runs the gpusched-admission binary as the Deployment would,
// with the ServiceAccount's token, its flags and leader election, with
// 2-second rounds and a tenancy ConfigMap in its namespace: it takes its
// lease, keeps its state in its ConfigMap, admits gated pods, rotates them
// (a pod preempted, deleted and created again, gated), reports a
// malformed pod, and keeps its tenancy when an edit does not parse, with
// no request refused.
func TestE2EAdmissionDeploy(t *testing.T) {
	c, _ := controlPlane(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cs := c.Client
	dir := testDir(t)
	var deploy *appsv1.Deployment
	for _, f := range []string{"admission-rbac.yaml", "admission-deployment.yaml"} {
		d, err := admApplyFile(ctx, cs, filepath.Join("..", "deploy", f))
		must(t, err, "apply %s", f)
		if d != nil {
			deploy = d
		}
	}
	if deploy == nil {
		t.Fatal("no Deployment in admission-deployment.yaml")
	}
	const sysNS = "gpusched-system"
	must(t, kubetest.EnsureNamespace(ctx, cs, sysNS), "namespace")
	tok, err := cs.CoreV1().ServiceAccounts(sysNS).CreateToken(ctx, deploy.Spec.Template.Spec.ServiceAccountName,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr(int64(3600))}}, metav1.CreateOptions{})
	must(t, err, "token")
	kc := filepath.Join(dir, "sa-kubeconfig")
	must(t, c.WriteKubeconfig(kc, tok.Status.Token), "kubeconfig")

	bin := filepath.Join(dir, "gpusched-admission")
	build := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/gpusched-admission")
	build.Dir = ".."
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/gpusched-admission: %v\n%s", err, out)
	}
	const ns = "adm-deploy"
	must(t, kubetest.EnsureNamespace(ctx, cs, ns), "namespace")
	t.Cleanup(func() { admDeletePods(cs, ns) })
	createNodes(ctx, t, cs, []kubetest.GPUNode{
		{Name: "adm-deploy-v100", Product: kubetest.ProductV100, GPUs: 4, Labels: map[string]string{admPoolLabel: "deploy"}},
		{Name: "adm-deploy-k80", Product: productK80, GPUs: 4, Labels: map[string]string{admPoolLabel: "deploy"}},
	})
	for i := range 3 {
		j := admJob{name: fmt.Sprintf("job-%d", i), key: perfmodel.JobKey{Model: "ResNet-50", BatchSize: 64, ScaleFactor: 4}, steps: 1e9}
		_, err := cs.CoreV1().Pods(ns).Create(ctx, j.pod(ns), metav1.CreateOptions{})
		must(t, err, "create %s", j.name)
	}
	bad := admJob{name: "bad", key: perfmodel.JobKey{Model: "ResNet-50", BatchSize: 64, ScaleFactor: 1}, steps: 1,
		ann: map[string]string{model.AnnotationThroughput: "v100=fast"}}
	_, err = cs.CoreV1().Pods(ns).Create(ctx, bad.pod(ns), metav1.CreateOptions{})
	must(t, err, "create bad")

	// The admin's tenancy, in the controller's namespace.
	tenancyCM := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: sysNS, Name: tenancy.DefaultConfigMap},
		Data: map[string]string{tenancy.ConfigKey: "tenants:\n- {name: deploy, namespaces: [" + ns + "]}\n"}}
	_, err = cs.CoreV1().ConfigMaps(sysNS).Create(ctx, tenancyCM, metav1.CreateOptions{})
	must(t, err, "tenancy")
	// The copy key's Secret, made at install (admission-rbac.yaml).
	must(t, ensureKeySecret(ctx, cs, sysNS, admission.DefaultCopyKeySecret), "the copy key")
	// The Deployment's command, with this test's kubeconfig, rounds and
	// nodes; POD_NAMESPACE (the downward API) given as a flag.
	args := deploy.Spec.Template.Spec.Containers[0].Command[1:]
	args = append(args, "--kubeconfig", kc, "--round", "2s", "--grace", "0s", "--namespace", ns,
		"--node-selector", admPoolLabel+"=deploy", "--state-namespace", sysNS, "--metrics-bind-address", "127.0.0.1:0")
	p, err := kubetest.StartProcess(dir, "gpusched-admission", bin, args...)
	must(t, err, "start")
	t.Cleanup(func() {
		p.Stop(10 * time.Second)
		if t.Failed() {
			t.Logf("gpusched-admission log tail:\n%s", p.LogTail(4000))
		}
	})
	waitFor(ctx, t, "the lease", p, func() (bool, string) {
		l, err := cs.CoordinationV1().Leases(sysNS).Get(ctx, admission.DefaultStateName, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return l.Spec.HolderIdentity != nil && *l.Spec.HolderIdentity != "", "no holder"
	})
	waitFor(ctx, t, "two pods admitted, one preempted and back", p, func() (bool, string) {
		pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		admitted, preempted := 0, 0
		for _, p := range pods.Items {
			if p.Annotations[admission.AnnotationAdmittedType] != "" && len(p.Spec.SchedulingGates) == 0 {
				admitted++
			}
			if p.Annotations[admission.AnnotationPreemptions] != "" {
				preempted++
			}
		}
		return admitted == 2 && preempted > 0, fmt.Sprintf("%d admitted, %d preempted", admitted, preempted)
	})
	if msg := malformedEvent(ctx, t, cs, ns, "bad"); !strings.Contains(msg, model.AnnotationThroughput) {
		t.Errorf("malformed pod: event %q", msg)
	}
	cm, err := cs.CoreV1().ConfigMaps(sysNS).Get(ctx, admission.DefaultStateName, metav1.GetOptions{})
	must(t, err, "state ConfigMap")
	zr, err := gzip.NewReader(bytes.NewReader(cm.BinaryData["state.json.gz"]))
	must(t, err, "state")
	st, err := io.ReadAll(zr)
	must(t, err, "state")
	if !strings.Contains(string(st), "pod/"+ns+"/job-0") {
		t.Errorf("state ConfigMap without the jobs: %.200s", st)
	}
	// An edit of the tenancy that does not parse: a Warning event, and the
	// rounds go on with the last good one.
	tenancyCM.Data[tenancy.ConfigKey] = "tenants: [{name: Bad}]"
	_, err = cs.CoreV1().ConfigMaps(sysNS).Update(ctx, tenancyCM, metav1.UpdateOptions{})
	must(t, err, "bad tenancy")
	waitFor(ctx, t, "a Warning event on the tenancy ConfigMap", p, func() (bool, string) {
		evs, err := cs.CoreV1().Events(sysNS).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		for _, e := range evs.Items {
			if e.Reason == admission.ReasonBadTenancy && e.InvolvedObject.Name == tenancy.DefaultConfigMap {
				return true, ""
			}
		}
		return false, "none yet"
	})
	before := strings.Count(p.LogTail(1<<20), "msg=round ")
	waitFor(ctx, t, "rounds after the bad edit", p, func() (bool, string) {
		n := strings.Count(p.LogTail(1<<20), "msg=round ")
		return n >= before+2, fmt.Sprintf("%d rounds", n)
	})
	if log := p.LogTail(1 << 20); strings.Contains(log, "forbidden") {
		t.Errorf("the controller was refused something:\n%s", grepLines(log, "forbidden", 10))
	}
}

// admApplyFile creates the objects of a multi-document YAML file, leaving
// those that exist; it returns the Deployment, if the file has one.
func admApplyFile(ctx context.Context, cs kubernetes.Interface, path string) (*appsv1.Deployment, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var deploy *appsv1.Deployment
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(b), 4096)
	for {
		var raw runtime.RawExtension
		if err := dec.Decode(&raw); err != nil {
			if errors.Is(err, io.EOF) {
				return deploy, nil
			}
			return nil, err
		}
		if len(bytes.TrimSpace(raw.Raw)) == 0 {
			continue
		}
		obj, _, err := scheme.Codecs.UniversalDeserializer().Decode(raw.Raw, nil, nil)
		if err != nil {
			return nil, err
		}
		switch o := obj.(type) {
		case *corev1.Namespace:
			_, err = cs.CoreV1().Namespaces().Create(ctx, o, metav1.CreateOptions{})
		case *corev1.ServiceAccount:
			_, err = cs.CoreV1().ServiceAccounts(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
		case *rbacv1.ClusterRole:
			_, err = cs.RbacV1().ClusterRoles().Create(ctx, o, metav1.CreateOptions{})
		case *rbacv1.ClusterRoleBinding:
			_, err = cs.RbacV1().ClusterRoleBindings().Create(ctx, o, metav1.CreateOptions{})
		case *rbacv1.Role:
			_, err = cs.RbacV1().Roles(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
		case *rbacv1.RoleBinding:
			_, err = cs.RbacV1().RoleBindings(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
		case *appsv1.Deployment:
			deploy = o
			_, err = cs.AppsV1().Deployments(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
		default:
			return nil, fmt.Errorf("%s: unexpected kind %T", path, obj)
		}
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
	}
}
