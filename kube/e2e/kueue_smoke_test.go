package e2e

import (
	"context"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gpusched/gpusched/allocation"
	"github.com/gpusched/gpusched/kube/deploy"
	"github.com/gpusched/gpusched/kube/internal/kubetest"
	"github.com/gpusched/gpusched/kube/kueue"
	"github.com/gpusched/gpusched/kube/model"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/component-base/metrics"
)

// kueueJob is a batch/v1 Job of one pod asking for gpus GPUs, in Kueue's
// LocalQueue queue; ann go on the pod template (where Kueue's Workload
// keeps them); gated adds gpusched's admission gate.
func kueueJob(ns, name, queue string, gpus int, ann, labels map[string]string, gated bool) *batchv1.Job {
	l := map[string]string{kueue.LabelQueueName: queue}
	maps.Copy(l, labels)
	j := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: l},
		Spec: batchv1.JobSpec{
			BackoffLimit: ptr(int32(0)),
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Annotations: ann, Labels: labels},
				Spec: corev1.PodSpec{
					RestartPolicy:                 corev1.RestartPolicyNever,
					TerminationGracePeriodSeconds: ptr(int64(0)),
					Containers: []corev1.Container{{Name: "train", Image: "registry.k8s.io/pause:3.10",
						Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{model.ResourceGPU: *resource.NewQuantity(int64(gpus), resource.DecimalSI)}}}},
				},
			},
		},
	}
	if gated {
		j.Annotations = map[string]string{kueue.AnnotationAdmissionGatedBy: kueue.DefaultGate}
	}
	return j
}

// boundPod waits for the pod of a Job to be bound and returns it.
func boundPod(ctx context.Context, t *testing.T, e *kueueEnv, ns, job string) *corev1.Pod {
	t.Helper()
	var pod *corev1.Pod
	waitFor(ctx, t, "the pod of job "+job+" bound", e.kueueProc, func() (bool, string) {
		pods, err := e.cp.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "job-name=" + job})
		if err != nil {
			return false, err.Error()
		}
		for i := range pods.Items {
			if pods.Items[i].Spec.NodeName != "" {
				pod = &pods.Items[i]
				return true, ""
			}
		}
		return false, fmt.Sprintf("%d pods, none bound", len(pods.Items))
	})
	return pod
}

// succeed marks a pod Succeeded, as its kubelet would when the container
// exits 0.
func succeed(ctx context.Context, cs kubernetes.Interface, p *corev1.Pod) error {
	now := metav1.Now()
	p = p.DeepCopy()
	p.Status.Phase = corev1.PodSucceeded
	p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "train", Image: p.Spec.Containers[0].Image,
		State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed", StartedAt: now, FinishedAt: now}}}}
	_, err := cs.CoreV1().Pods(p.Namespace).UpdateStatus(ctx, p, metav1.UpdateOptions{})
	return err
}

// jobDone reports whether a Job completed.
func jobDone(j *batchv1.Job) bool {
	for _, c := range j.Status.Conditions {
		if c.Type == batchv1.JobComplete && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

// TestE2EKueueSmoke runs the real Kueue v0.17.0: it admits a Job on the
// first flavor of its ClusterQueue, the job controller creates its pod, the
// scheduler binds it to a node of that flavor, and the Job completes. Then
// gpusched's controller steers two pending Workloads without the gate (the
// path that needs no alpha feature): Kueue alone would give the V100 that
// frees first to the older, a Recommendation job that runs slower there
// than on the other types; steered, ResNet-50 (seven times faster on a
// V100) gets it, and the Recommendation job waits for the type it was
// steered to, where Kueue admits it.
func TestE2EKueueSmoke(t *testing.T) {
	e := kueueEnvironment(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cs := e.cp.Client
	const ns = "kq-smoke"
	e.namespace(ctx, t, ns, "smoke", nil)
	e.clusterQueue(ctx, t, "smoke", ns, "smoke", 1)

	_, err := cs.BatchV1().Jobs(ns).Create(ctx, kueueJob(ns, "one", "smoke", 1, nil, nil, false), metav1.CreateOptions{})
	must(t, err, "create job")
	pod := boundPod(ctx, t, e, ns, "one")
	w, err := e.workloadOf(ctx, ns, "one")
	must(t, err, "workload")
	if f := admittedFlavor(w); f != "v100" {
		t.Fatalf("Kueue admitted job one on flavor %q, want v100 (the first)", f)
	}
	node, err := cs.CoreV1().Nodes().Get(ctx, pod.Spec.NodeName, metav1.GetOptions{})
	must(t, err, "node")
	if node.Labels[model.LabelProduct] != kubetest.ProductV100 {
		t.Fatalf("pod bound to %s (%s), want a V100 node", node.Name, node.Labels[model.LabelProduct])
	}
	must(t, succeed(ctx, cs, pod), "pod succeeded")
	waitFor(ctx, t, "job one complete", e.kueueProc, func() (bool, string) {
		j, err := cs.BatchV1().Jobs(ns).Get(ctx, "one", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return jobDone(j), fmt.Sprintf("%+v", j.Status)
	})
	t.Logf("Kueue admitted job one on v100; pod bound to %s; the Job completed", node.Name)

	// Quota taken on every flavor by three blockers; then two jobs wait.
	blockers := map[string]*corev1.Pod{}
	for _, p := range kueueProducts {
		name := "block-" + p.flavor
		_, err := cs.BatchV1().Jobs(ns).Create(ctx, kueueJob(ns, name, "smoke", 1, nil, nil, false), metav1.CreateOptions{})
		must(t, err, "create %s", name)
		blockers[p.flavor] = boundPod(ctx, t, e, ns, name)
	}
	m := kueue.NewMetrics()
	reg := metrics.NewKubeRegistry()
	must(t, m.Register(reg), "metrics")
	ctl, err := kueue.New(kueue.Config{Client: cs, Dynamic: e.dyn, Namespace: ns, Policy: &allocation.MaxMinFairness{}, PolicyName: "max-min-fairness",
		MinInterval: 100 * time.Millisecond, Interval: time.Second, Metrics: m})
	must(t, err, "controller")
	cctx, stop := context.WithCancel(ctx)
	defer stop()
	done := make(chan error, 1)
	go func() { done <- ctl.Run(cctx) }()
	// Gavel's rates: Recommendation (batch size 1024) and ResNet-50.
	rec := map[string]string{"gpusched.io/throughput": "v100=13.28,p100=30.74,k80=20.05"}
	resnet := map[string]string{"gpusched.io/job-kind": "ResNet-50", "gpusched.io/batch-size": "64"}
	_, err = cs.BatchV1().Jobs(ns).Create(ctx, kueueJob(ns, "rec", "smoke", 1, rec, nil, false), metav1.CreateOptions{})
	must(t, err, "create rec")
	time.Sleep(1100 * time.Millisecond) // a later creation time
	_, err = cs.BatchV1().Jobs(ns).Create(ctx, kueueJob(ns, "resnet", "smoke", 1, resnet, nil, false), metav1.CreateOptions{})
	must(t, err, "create resnet")
	steeredTo := map[string]string{}
	waitFor(ctx, t, "both Workloads steered", e.kueueProc, func() (bool, string) {
		for _, job := range []string{"rec", "resnet"} {
			w, err := e.workloadOf(ctx, ns, job)
			if err != nil {
				return false, err.Error()
			}
			steeredTo[job] = w.GetAnnotations()[kueue.AnnotationSteered]
		}
		return steeredTo["rec"] != "" && steeredTo["resnet"] != "", fmt.Sprint(steeredTo)
	})
	if steeredTo["resnet"] != kubetest.ProductV100 || steeredTo["rec"] == kubetest.ProductV100 {
		t.Fatalf("steered %v: want ResNet-50 on the V100, Recommendation elsewhere", steeredTo)
	}
	// The controller's metrics while both wait (a gauge of pending
	// workloads has no series once none is pending).
	fams, err := reg.Gather()
	must(t, err, "gather")
	// The V100 frees: Kueue alone would give it to rec, the older.
	must(t, succeed(ctx, cs, blockers["v100"]), "v100 blocker done")
	pod = boundPod(ctx, t, e, ns, "resnet")
	w, err = e.workloadOf(ctx, ns, "resnet")
	must(t, err, "workload")
	if f := admittedFlavor(w); f != "v100" {
		t.Fatalf("resnet admitted on %q, want v100", f)
	}
	w, err = e.workloadOf(ctx, ns, "rec")
	must(t, err, "workload")
	if f := admittedFlavor(w); f != "" {
		t.Fatalf("rec admitted on %s while steered to %s", f, steeredTo["rec"])
	}
	want := "k80"
	if steeredTo["rec"] == kueueProducts[1].product {
		want = "p100"
	}
	// rec's type frees: Kueue admits it there.
	must(t, succeed(ctx, cs, blockers[want]), "%s blocker done", want)
	recPod := boundPod(ctx, t, e, ns, "rec")
	w, err = e.workloadOf(ctx, ns, "rec")
	must(t, err, "workload")
	if f := admittedFlavor(w); f != want {
		t.Fatalf("rec admitted on %q, want %s", f, want)
	}
	t.Logf("without the gate: resnet steered to v100 and admitted there (pod on %s); rec steered to %s, admitted on %s (pod on %s)",
		pod.Spec.NodeName, steeredTo["rec"], want, recPod.Spec.NodeName)
	stop()
	ctlStopped(t, <-done)

	// The dashboard's Kueue panels query metrics the controller served
	// in this run, while both workloads waited (TestE2EMetrics checks the
	// other binaries' panels).
	served := map[string]bool{}
	for _, f := range fams {
		served[f.GetName()] = true
	}
	exprs, err := deploy.DashboardQueries()
	must(t, err, "dashboard")
	kueuePanels := 0
	for _, q := range exprs {
		for _, n := range regexp.MustCompile(`\bgpusched_kueue_[a-z0-9_]+`).FindAllString(q, -1) {
			kueuePanels++
			if base := strings.TrimSuffix(n, "_bucket"); !served[base] && !served[n] {
				t.Errorf("the dashboard queries %s, which the Kueue controller did not serve (it served %v)", n, slices.Sorted(maps.Keys(served)))
			}
		}
	}
	if kueuePanels == 0 {
		t.Errorf("the dashboard has no query of the Kueue controller's metrics")
	}
}
