package e2e

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/gpusched/gpusched/kube/internal/kubetest"
	"github.com/gpusched/gpusched/kube/kueue"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
)

// The Kueue tests run on a control plane of their own (the job controller
// of kube-controller-manager would act on the other tests' Jobs): etcd,
// kube-apiserver, kube-controller-manager, the stock kube-scheduler and
// Kueue's manager v0.17.0 with its AdmissionGatedBy feature gate on, and
// GPU nodes of three types (two nodes of 4 GPUs each), with one
// ResourceFlavor per type.
type kueueEnv struct {
	cp        *kubetest.ControlPlane
	dyn       dynamic.Interface
	dir       string
	procs     []*kubetest.Process
	kueueProc *kubetest.Process
}

// Products of the Kueue tests' nodes and flavors, fastest first (the
// order of the ClusterQueues' flavors, as an admin who fills the fastest
// GPUs first writes it).
var kueueProducts = []struct{ flavor, product string }{
	{"v100", kubetest.ProductV100}, {"p100", "Tesla-P100-PCIE-16GB"}, {"k80", "Tesla-K80"},
}

var (
	kueueCanOnce sync.Once
	kueueSkip    string
	kueueOnce    sync.Once
	kueueE       *kueueEnv
	kueueErr     error
)

// kueueEnvironment returns the Kueue tests' control plane, starting it the
// first time; it skips the test when the binaries are missing or Kueue's
// manager cannot run here (not root: see kubetest.CanRunKueue).
func kueueEnvironment(t *testing.T) *kueueEnv {
	t.Helper()
	// Whether Kueue's manager can run here, before anything is built: where
	// it cannot (not root), the Kueue binaries are not worth their minutes.
	kueueCanOnce.Do(func() {
		dir, err := os.MkdirTemp("", "gpusched-e2e-kueue-probe-")
		if err != nil {
			kueueSkip = err.Error()
			return
		}
		defer func() { _ = os.RemoveAll(dir) }()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := kubetest.CanRunKueue(ctx, dir); err != nil {
			kueueSkip = err.Error()
		}
	})
	if kueueSkip != "" {
		t.Skipf("Kueue end-to-end test skipped: Kueue's manager cannot run here: %s", kueueSkip)
	}
	bins := kubetest.RequireKueueBinaries(t)
	kueueOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
		defer cancel()
		dir, err := os.MkdirTemp("", "gpusched-e2e-kueue-")
		if err != nil {
			kueueErr = err
			return
		}
		kueueE, kueueErr = startKueueEnv(ctx, bins, dir)
	})
	if kueueErr != nil {
		t.Fatalf("Kueue control plane: %v", kueueErr)
	}
	return kueueE
}

func startKueueEnv(ctx context.Context, bins kubetest.KueueBinaries, dir string) (e *kueueEnv, err error) {
	e = &kueueEnv{dir: dir}
	defer func() {
		if err != nil {
			e.stop(false)
		}
	}()
	if e.cp, err = kubetest.Start(ctx, bins.Binaries, dir); err != nil {
		return e, err
	}
	if e.dyn, err = dynamic.NewForConfig(e.cp.Config); err != nil {
		return e, err
	}
	kcm, err := kubetest.StartControllerManager(e.cp, bins.ControllerManager, dir)
	if err != nil {
		return e, err
	}
	e.procs = append(e.procs, kcm)
	sched, err := startStockScheduler(e.cp, bins.Scheduler, dir)
	if err != nil {
		return e, err
	}
	e.procs = append(e.procs, sched)
	if e.kueueProc, err = kubetest.StartKueue(ctx, e.cp, bins, dir, kubetest.KueueOptions{FeatureGates: map[string]bool{"AdmissionGatedBy": true}}); err != nil {
		return e, err
	}
	for i, p := range kueueProducts {
		for n := range 2 {
			if err := kubetest.CreateNode(ctx, e.cp.Client, kubetest.GPUNode{Name: fmt.Sprintf("kq-%s-%d", p.flavor, n), Product: p.product, GPUs: 4}); err != nil {
				return e, err
			}
		}
		rf := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor",
			"metadata": map[string]any{"name": p.flavor}, "spec": map[string]any{"nodeLabels": map[string]any{"nvidia.com/gpu.product": p.product}}}}
		// Kueue's webhooks answer a moment after its readyz does.
		if err := e.retry(ctx, func() error {
			_, err := e.dyn.Resource(kueue.ResourceFlavorGVR).Create(ctx, rf, metav1.CreateOptions{})
			if apierrors.IsAlreadyExists(err) {
				return nil
			}
			return err
		}); err != nil {
			return e, fmt.Errorf("flavor %d: %w", i, err)
		}
	}
	return e, nil
}

// startStockScheduler runs the stock kube-scheduler on the control plane.
func startStockScheduler(cp *kubetest.ControlPlane, bin, dir string) (*kubetest.Process, error) {
	cfg := fmt.Sprintf("apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\nleaderElection:\n  leaderElect: false\n"+
		"clientConnection:\n  kubeconfig: %s\n  qps: 1000\n  burst: 1000\n", cp.Kubeconfig)
	path := filepath.Join(dir, "kube-scheduler-config.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		return nil, err
	}
	return kubetest.StartProcess(dir, "kube-scheduler", bin, "--config", path, "--secure-port", "0", "--v", "1")
}

// retry runs f every half second until it succeeds, the processes die
// or ctx ends.
func (e *kueueEnv) retry(ctx context.Context, f func() error) error {
	for {
		err := f()
		if err == nil {
			return nil
		}
		if done, perr := e.kueueProc.Exited(); done {
			return fmt.Errorf("kueue exited (%w): %w\n%s", perr, err, e.kueueProc.LogTail(3000))
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (last error: %w)", ctx.Err(), err)
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// stop ends every process by its pid, the control plane last; the folder
// is removed unless kept (a failure, or GPUSCHED_E2E_KEEP).
func (e *kueueEnv) stop(keep bool) {
	if e == nil {
		return
	}
	e.kueueProc.Stop(10 * time.Second)
	for _, p := range e.procs {
		p.Stop(10 * time.Second)
	}
	e.cp.Stop()
	if keep || os.Getenv("GPUSCHED_E2E_KEEP") != "" {
		fmt.Fprintf(os.Stderr, "e2e: Kueue control plane logs kept in %s\n", e.dir)
		return
	}
	_ = os.RemoveAll(e.dir)
}

// stopKueueEnv is called by TestMain.
func stopKueueEnv(failed bool) { kueueE.stop(failed) }

// clusterQueue makes a ClusterQueue over the flavors (in kueueProducts'
// order) with nominal quota gpus of each, for the namespaces labelled
// e2e-kueue=<run>, and a LocalQueue of the same name in ns.
func (e *kueueEnv) clusterQueue(ctx context.Context, t *testing.T, name, ns, run string, gpus int) {
	t.Helper()
	var flavors []any
	for _, p := range kueueProducts {
		flavors = append(flavors, map[string]any{"name": p.flavor, "resources": []any{map[string]any{"name": "nvidia.com/gpu", "nominalQuota": fmt.Sprint(gpus)}}})
	}
	cq := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue",
		"metadata": map[string]any{"name": name},
		"spec": map[string]any{
			"namespaceSelector": map[string]any{"matchLabels": map[string]any{"e2e-kueue": run}},
			"resourceGroups":    []any{map[string]any{"coveredResources": []any{"nvidia.com/gpu"}, "flavors": flavors}},
		}}}
	must(t, e.retry(ctx, func() error {
		_, err := e.dyn.Resource(kueue.ClusterQueuesGVR).Create(ctx, cq, metav1.CreateOptions{})
		return err
	}), "ClusterQueue %s", name)
	lq := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
		"metadata": map[string]any{"name": name, "namespace": ns}, "spec": map[string]any{"clusterQueue": name}}}
	must(t, e.retry(ctx, func() error {
		_, err := e.dyn.Resource(kueue.LocalQueuesGVR).Namespace(ns).Create(ctx, lq, metav1.CreateOptions{})
		return err
	}), "LocalQueue %s", name)
}

// namespace creates a namespace labelled for a run's ClusterQueues, and
// with the given labels.
func (e *kueueEnv) namespace(ctx context.Context, t *testing.T, ns, run string, labels map[string]string) {
	t.Helper()
	l := map[string]string{"e2e-kueue": run}
	maps.Copy(l, labels)
	_, err := e.cp.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: l}}, metav1.CreateOptions{})
	must(t, err, "namespace %s", ns)
	// The service-account controller makes its default ServiceAccount;
	// make sure before pods come.
	must(t, kubetest.EnsureNamespace(ctx, e.cp.Client, ns), "namespace %s", ns)
}

// workloadOf returns the Workload Kueue made for a Job.
func (e *kueueEnv) workloadOf(ctx context.Context, ns, job string) (*unstructured.Unstructured, error) {
	list, err := e.dyn.Resource(kueue.WorkloadsGVR).Namespace(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	for i := range list.Items {
		for _, o := range list.Items[i].GetOwnerReferences() {
			if o.Kind == "Job" && o.Name == job {
				return &list.Items[i], nil
			}
		}
	}
	return nil, fmt.Errorf("no Workload for Job %s/%s yet", ns, job)
}

// admittedFlavor is the GPU flavor Kueue admitted a Workload on ("" while
// it has no quota reservation).
func admittedFlavor(w *unstructured.Unstructured) string {
	psas, _, _ := unstructured.NestedSlice(w.Object, "status", "admission", "podSetAssignments")
	for _, p := range psas {
		f, _, _ := unstructured.NestedString(p.(map[string]any), "flavors", "nvidia.com/gpu")
		if f != "" {
			return f
		}
	}
	return ""
}

// ctlStopped checks what a stopped controller's Run returned.
func ctlStopped(t *testing.T, err error) {
	t.Helper()
	if err != nil && !errors.Is(err, context.Canceled) {
		t.Errorf("controller: %v", err)
	}
}

var kueuePoliciesOnce sync.Once

// applyKueuePolicies creates deploy/kueue-policies.yaml's objects once and
// waits until the API server applies the gate to a Job of namespace ns (a
// dry run: nothing is stored).
func (e *kueueEnv) applyKueuePolicies(ctx context.Context, t *testing.T, ns, queue string) {
	t.Helper()
	var err error
	kueuePoliciesOnce.Do(func() { err = applyFile(ctx, e.cp.Client, filepath.Join("..", "deploy", "kueue-policies.yaml")) })
	must(t, err, "apply kueue-policies.yaml")
	waitFor(ctx, t, "kueue-policies.yaml in force", e.kueueProc, func() (bool, string) {
		j, err := e.cp.Client.BatchV1().Jobs(ns).Create(ctx, kueueJob(ns, "probe", queue, 1, nil, nil, false), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err != nil {
			return false, err.Error()
		}
		v := j.Annotations[kueue.AnnotationAdmissionGatedBy]
		return v == kueue.DefaultGate, fmt.Sprintf("annotation %q", v)
	})
}

// workloadFinished reports whether a Workload's condition Finished is True.
func workloadFinished(w *unstructured.Unstructured) bool {
	conds, _, _ := unstructured.NestedSlice(w.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["type"] == "Finished" && m["status"] == "True" {
			return true
		}
	}
	return false
}
