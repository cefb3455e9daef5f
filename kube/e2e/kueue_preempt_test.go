package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/gpusched/gpusched/kube/admission"
	"github.com/gpusched/gpusched/kube/kueue"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// The preemption tests run Kueue's classical preemption on the real
// Kueue v0.17.0 with gpusched's controller (the default policy,
// quota-water-filling) in both modes: "gate" (Jobs carry gpusched's
// admission gate, Kueue's scheduler never sees a workload until the
// controller releases it) and "rewrite" (no gate: the controller only
// rewrites node selectors). Each uses the V100 nodes only (8 GPUs) and
// deletes its Jobs at the end.

var kqModes = []struct {
	name  string
	gated bool
}{{"gate", true}, {"rewrite", false}}

// kqPreemptQueue makes a ClusterQueue over the v100 flavor alone, with a
// nominal quota, a cohort ("" for none) and spec.preemption (nil for
// Kueue's default), for namespaces labelled e2e-kueue=run, and a
// LocalQueue of the same name in ns.
func (e *kueueEnv) kqPreemptQueue(ctx context.Context, t *testing.T, name, ns, run, cohort string, nominal int, preemption map[string]any) {
	t.Helper()
	spec := map[string]any{
		"namespaceSelector": map[string]any{"matchLabels": map[string]any{"e2e-kueue": run}},
		"resourceGroups": []any{map[string]any{"coveredResources": []any{"nvidia.com/gpu"}, "flavors": []any{
			map[string]any{"name": "v100", "resources": []any{map[string]any{"name": "nvidia.com/gpu", "nominalQuota": fmt.Sprint(nominal)}}}}}},
	}
	if cohort != "" {
		spec["cohortName"] = cohort
	}
	if preemption != nil {
		spec["preemption"] = preemption
	}
	cq := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue",
		"metadata": map[string]any{"name": name}, "spec": spec}}
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

// kqController runs gpusched's controller on namespace ns with the
// default policy until the returned stop is called.
func kqController(ctx context.Context, t *testing.T, e *kueueEnv, ns string) (stop func()) {
	t.Helper()
	pol, err := admission.PolicyByName("quota-water-filling")
	must(t, err, "policy")
	ctl, err := kueue.New(kueue.Config{Client: e.cp.Client, Dynamic: e.dyn, Namespace: ns, Policy: pol, PolicyName: "quota-water-filling",
		MinInterval: 100 * time.Millisecond, Interval: time.Second})
	must(t, err, "controller")
	cctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- ctl.Run(cctx) }()
	return func() {
		cancel()
		ctlStopped(t, <-done)
	}
}

// kqCreate creates a Job of kueueJob's, gated or not.
func kqCreate(ctx context.Context, t *testing.T, e *kueueEnv, ns, name, queue string, gpus int, labels map[string]string, gated bool) {
	t.Helper()
	_, err := e.cp.Client.BatchV1().Jobs(ns).Create(ctx, kueueJob(ns, name, queue, gpus, nil, labels, gated), metav1.CreateOptions{})
	must(t, err, "create job %s", name)
}

// kqCleanup deletes a namespace's Jobs and waits until their pods are
// gone, so that the V100s are free for the next test.
func kqCleanup(ctx context.Context, t *testing.T, e *kueueEnv, ns string) {
	t.Helper()
	cs := e.cp.Client
	bg := metav1.DeletePropagationBackground
	must(t, cs.BatchV1().Jobs(ns).DeleteCollection(ctx, metav1.DeleteOptions{PropagationPolicy: &bg}, metav1.ListOptions{}), "delete jobs")
	waitFor(ctx, t, "the pods of "+ns+" gone", e.kueueProc, func() (bool, string) {
		pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		for i := range pods.Items {
			if pods.Items[i].DeletionTimestamp == nil {
				_ = cs.CoreV1().Pods(ns).Delete(ctx, pods.Items[i].Name, metav1.DeleteOptions{GracePeriodSeconds: ptr(int64(0))})
			}
		}
		return len(pods.Items) == 0, fmt.Sprintf("%d pods", len(pods.Items))
	})
}

// kqCondition reports whether a Workload's condition t is True.
func kqCondition(w *unstructured.Unstructured, t string) bool {
	conds, _, _ := unstructured.NestedSlice(w.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["type"] == t && m["status"] == "True" {
			return true
		}
	}
	return false
}

// kqEvent waits for an event of the reason on a Job's Workload and
// returns its message.
func kqEvent(ctx context.Context, t *testing.T, e *kueueEnv, ns, job, reason string) string {
	t.Helper()
	var msg string
	waitFor(ctx, t, reason+" on the Workload of "+job, e.kueueProc, func() (bool, string) {
		w, err := e.workloadOf(ctx, ns, job)
		if err != nil {
			return false, err.Error()
		}
		evs, err := e.cp.Client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + w.GetName()})
		if err != nil {
			return false, err.Error()
		}
		var seen []string
		for _, ev := range evs.Items {
			if ev.Reason == reason {
				msg = ev.Message
				return true, ""
			}
			seen = append(seen, ev.Reason)
		}
		return false, fmt.Sprintf("events %v", seen)
	})
	return msg
}

// kqGated reports whether a Job still carries gpusched's gate.
func kqGated(ctx context.Context, t *testing.T, e *kueueEnv, ns, job string) bool {
	t.Helper()
	j, err := e.cp.Client.BatchV1().Jobs(ns).Get(ctx, job, metav1.GetOptions{})
	must(t, err, "job %s", job)
	return strings.Contains(j.Annotations[kueue.AnnotationAdmissionGatedBy], kueue.DefaultGate)
}

// TestE2EKueueReclaim: team-a (reclaimWithinCohort Any) lends its 4 idle
// nominal V100s to team-b (nominal 0) of its cohort; team-b's four 1-GPU
// Jobs borrow them; then team-a's 4-GPU Job arrives, and Kueue preempts
// team-b's borrowed workloads to admit it on the V100s. In gate mode the
// controller releases it for that (GPUSchedReleased "released for Kueue's
// preemption: reclaims 4 GPUs of v100 its ClusterQueue lent"); before,
// it stayed gated while team-b's workloads ran. In rewrite mode Kueue's
// own scheduler sees it and reclaims.
func TestE2EKueueReclaim(t *testing.T) {
	e := kueueEnvironment(t)
	for _, m := range kqModes {
		t.Run(m.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			start := time.Now()
			ns, run := "kq-reclaim-"+m.name, "reclaim-"+m.name
			e.namespace(ctx, t, ns, run, nil)
			a, b := "reclaim-a-"+m.name, "reclaim-b-"+m.name
			e.kqPreemptQueue(ctx, t, a, ns, run, run, 4, map[string]any{"reclaimWithinCohort": "Any"})
			e.kqPreemptQueue(ctx, t, b, ns, run, run, 0, nil)
			stop := kqController(ctx, t, e, ns)
			defer stop()
			defer kqCleanup(ctx, t, e, ns)
			for i := range 4 {
				kqCreate(ctx, t, e, ns, fmt.Sprintf("borrower-%d", i), b, 1, nil, m.gated)
			}
			for i := range 4 {
				boundPod(ctx, t, e, ns, fmt.Sprintf("borrower-%d", i))
			}
			kqCreate(ctx, t, e, ns, "owner", a, 4, nil, m.gated)
			pod := boundPod(ctx, t, e, ns, "owner")
			w, err := e.workloadOf(ctx, ns, "owner")
			must(t, err, "workload")
			if f := admittedFlavor(w); f != "v100" {
				t.Fatalf("owner admitted on %q, want v100", f)
			}
			preempted := 0
			for i := range 4 {
				bw, err := e.workloadOf(ctx, ns, fmt.Sprintf("borrower-%d", i))
				must(t, err, "workload")
				if kqCondition(bw, "Preempted") {
					preempted++
				}
			}
			if preempted != 4 {
				t.Errorf("%d of team-b's 4 borrowed workloads preempted, want 4", preempted)
			}
			msg := ""
			if m.gated {
				msg = kqEvent(ctx, t, e, ns, "owner", kueue.ReasonReleased)
				if !strings.Contains(msg, "released for Kueue's preemption: reclaims 4 GPUs of v100 its ClusterQueue lent") {
					t.Errorf("the release event says %q", msg)
				}
			}
			t.Logf("%s: team-b's 4 borrowed V100 workloads preempted, team-a's owner admitted on v100 (pod on %s) in %.1f s; %q",
				m.name, pod.Spec.NodeName, time.Since(start).Seconds(), msg)
		})
	}
}

// TestE2EKueuePriority: in a ClusterQueue of 4 V100s with
// withinClusterQueue LowerPriority, four priority-0 Jobs run; a
// priority-100000 Job (WorkloadPriorityClass e2e-high) arrives and Kueue
// preempts one of them for it, while a priority-0 Job that arrived before
// it waits. In gate mode the controller releases the urgent Job for that
// (before, it stayed gated) and keeps the plain one gated.
func TestE2EKueuePriority(t *testing.T) {
	e := kueueEnvironment(t)
	wpc := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "WorkloadPriorityClass",
		"metadata": map[string]any{"name": "e2e-high"}, "value": int64(100000)}}
	gvr := schema.GroupVersionResource{Group: kueue.Group, Version: kueue.Version, Resource: "workloadpriorityclasses"}
	for _, m := range kqModes {
		t.Run(m.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			start := time.Now()
			must(t, e.retry(ctx, func() error {
				_, err := e.dyn.Resource(gvr).Create(ctx, wpc, metav1.CreateOptions{})
				if apierrors.IsAlreadyExists(err) {
					return nil
				}
				return err
			}), "WorkloadPriorityClass")
			ns, run := "kq-priority-"+m.name, "priority-"+m.name
			e.namespace(ctx, t, ns, run, nil)
			cq := "priority-" + m.name
			e.kqPreemptQueue(ctx, t, cq, ns, run, "", 4, map[string]any{"withinClusterQueue": "LowerPriority"})
			stop := kqController(ctx, t, e, ns)
			defer stop()
			defer kqCleanup(ctx, t, e, ns)
			for i := range 4 {
				kqCreate(ctx, t, e, ns, fmt.Sprintf("low-%d", i), cq, 1, nil, m.gated)
			}
			for i := range 4 {
				boundPod(ctx, t, e, ns, fmt.Sprintf("low-%d", i))
			}
			kqCreate(ctx, t, e, ns, "plain", cq, 1, nil, m.gated)
			kqCreate(ctx, t, e, ns, "urgent", cq, 1, map[string]string{"kueue.x-k8s.io/priority-class": "e2e-high"}, m.gated)
			pod := boundPod(ctx, t, e, ns, "urgent")
			w, err := e.workloadOf(ctx, ns, "urgent")
			must(t, err, "workload")
			if p, _, _ := unstructured.NestedInt64(w.Object, "spec", "priority"); p != 100000 {
				t.Errorf("urgent's priority %d, want 100000", p)
			}
			preempted := 0
			for i := range 4 {
				lw, err := e.workloadOf(ctx, ns, fmt.Sprintf("low-%d", i))
				must(t, err, "workload")
				if kqCondition(lw, "Preempted") {
					preempted++
				}
			}
			if preempted != 1 {
				t.Errorf("%d priority-0 workloads preempted, want 1", preempted)
			}
			pw, err := e.workloadOf(ctx, ns, "plain")
			must(t, err, "workload")
			if f := admittedFlavor(pw); f != "" {
				t.Errorf("the plain priority-0 Job was admitted on %s", f)
			}
			msg := ""
			if m.gated {
				msg = kqEvent(ctx, t, e, ns, "urgent", kueue.ReasonReleased)
				if !strings.Contains(msg, "released for Kueue's preemption: preempts 1 GPU of v100 of lower-priority workloads of ClusterQueue "+cq) {
					t.Errorf("the release event says %q", msg)
				}
				if !kqGated(ctx, t, e, ns, "plain") {
					t.Errorf("the plain Job lost its gate")
				}
			}
			t.Logf("%s: urgent admitted on v100 (pod on %s), 1 priority-0 workload preempted, plain waits; %.1f s; %q",
				m.name, pod.Spec.NodeName, time.Since(start).Seconds(), msg)
		})
	}
}

// TestE2EKueueUnreadableGated: a gated Job whose rates the controller
// cannot read keeps its gate, with a Warning event naming the field
// (before, its gate was removed and Kueue admitted it by its own walk: a
// tenant shed the gate with one malformed annotation); once an admin
// removes the gate, Kueue admits it.
func TestE2EKueueUnreadableGated(t *testing.T) {
	e := kueueEnvironment(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	start := time.Now()
	const ns = "kq-unreadable"
	e.namespace(ctx, t, ns, "unreadable", nil)
	e.kqPreemptQueue(ctx, t, "unreadable", ns, "unreadable", "", 1, nil)
	stop := kqController(ctx, t, e, ns)
	defer stop()
	defer kqCleanup(ctx, t, e, ns)
	cs := e.cp.Client
	_, err := cs.BatchV1().Jobs(ns).Create(ctx, kueueJob(ns, "garbage", "unreadable", 1, map[string]string{"gpusched.io/throughput": "v100=fast"}, nil, true), metav1.CreateOptions{})
	must(t, err, "create the unreadable job")
	msg := kqEvent(ctx, t, e, ns, "garbage", kueue.ReasonUnreadable)
	for _, want := range []string{"spec.podSets[main].template.metadata.annotations[gpusched.io/throughput]", "stays gated"} {
		if !strings.Contains(msg, want) {
			t.Errorf("the Warning says %q, want %q", msg, want)
		}
	}
	time.Sleep(2 * time.Second) // rounds at 100 ms: it would have been released by now
	if !kqGated(ctx, t, e, ns, "garbage") {
		t.Fatalf("the unreadable Job lost its gate")
	}
	w, err := e.workloadOf(ctx, ns, "garbage")
	must(t, err, "workload")
	if f := admittedFlavor(w); f != "" {
		t.Fatalf("the unreadable Job was admitted on %s while gated", f)
	}
	// The admin removes the gate (the test's client is the cluster's
	// admin): Kueue admits it by its own walk.
	j, err := cs.BatchV1().Jobs(ns).Get(ctx, "garbage", metav1.GetOptions{})
	must(t, err, "job")
	delete(j.Annotations, kueue.AnnotationAdmissionGatedBy)
	_, err = cs.BatchV1().Jobs(ns).Update(ctx, j, metav1.UpdateOptions{})
	must(t, err, "remove the gate")
	pod := boundPod(ctx, t, e, ns, "garbage")
	if pod.Status.Phase == corev1.PodFailed {
		t.Fatalf("pod failed")
	}
	t.Logf("unreadable workload kept its gate: Warning %s %q; admitted by Kueue once the admin removed the gate; %.1f s", kueue.ReasonUnreadable, msg, time.Since(start).Seconds())
}
