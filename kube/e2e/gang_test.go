package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/gpusched/gpusched/kube/internal/kubetest"
	"github.com/gpusched/gpusched/kube/model"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestE2EGangAllOrNothing checks Permit directly: a pod group of 3 pods of
// 6 GPUs on 3 nodes of 8, one of which a blocker holds half of. The free
// GPUs add up (20 of 18), so the group passes PreFilter and two members
// find room, but the third does not: the two wait, time out and let their
// GPUs go, again and again, and none is ever bound. Once the blocker goes,
// the three are bound together.
func TestE2EGangAllOrNothing(t *testing.T) {
	c, bin := controlPlane(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cs := c.Client
	const ns = "e2e-gang"
	must(t, kubetest.EnsureNamespace(ctx, cs, ns), "namespace")
	t.Cleanup(func() { _ = cs.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{}) })
	sel := map[string]string{"gpusched.io/e2e": "gang"}
	var nodes []kubetest.GPUNode
	for i := range 3 {
		nodes = append(nodes, kubetest.GPUNode{Name: fmt.Sprintf("gang-%d", i), Product: kubetest.ProductA100, GPUs: 8,
			Links: `{"interconnect":"nvswitch"}`, Labels: sel})
	}
	createNodes(ctx, t, cs, nodes)
	w, err := watch(ctx, cs, ns, 0, true)
	must(t, err, "watcher")
	defer w.stop()
	sched := startScheduler(t, testDir(t), "gpusched", bin,
		schedulerConfig(t, c, map[string]any{"permitTimeoutSeconds": 3, "backoffSeconds": 1}))

	blocker := gpuPodSpec(ns, "blocker", 4, "", nil, nil)
	blocker.Spec.NodeSelector = map[string]string{"kubernetes.io/hostname": "gang-2"}
	_, err = cs.CoreV1().Pods(ns).Create(ctx, blocker, metav1.CreateOptions{})
	must(t, err, "create blocker")
	bound := func(names ...string) func() (bool, string) {
		return func() (bool, string) {
			all, _, _ := w.snapshot()
			got := map[string]bool{}
			for _, b := range all {
				got[b.name] = true
			}
			for _, n := range names {
				if !got[n] {
					return false, n + " not bound"
				}
			}
			return true, ""
		}
	}
	waitFor(ctx, t, "blocker bound", sched, bound("blocker"))

	for m := range 3 {
		p := gpuPodSpec(ns, fmt.Sprint("m", m), 6, "", map[string]string{model.LabelPodGroup: "job"},
			map[string]string{model.AnnotationMinMember: "3"})
		p.Spec.NodeSelector = sel
		_, err := cs.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{})
		must(t, err, "create %s", p.Name)
	}
	// Two rounds of waiting and timing out, seen in the members' events.
	waitFor(ctx, t, "the group to time out twice", sched, func() (bool, string) {
		all, _, _ := w.snapshot()
		for _, b := range all {
			if b.group != "" {
				t.Fatalf("member %s bound to %s while its group could not be placed whole", b.name, b.node)
			}
		}
		evs, err := cs.EventsV1().Events(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		n := int32(0)
		for _, e := range evs.Items {
			if strings.HasPrefix(e.Regarding.Name, "m") && e.Reason == "FailedScheduling" &&
				(strings.Contains(e.Note, "timeout") || strings.Contains(e.Note, "pod group")) {
				n += max(1, e.DeprecatedCount)
				if e.Series != nil {
					n += e.Series.Count
				}
			}
		}
		return n >= 4, fmt.Sprintf("%d rejections so far", n)
	})
	zero := int64(0)
	must(t, cs.CoreV1().Pods(ns).Delete(ctx, "blocker", metav1.DeleteOptions{GracePeriodSeconds: &zero}), "delete blocker")
	waitFor(ctx, t, "the group bound", sched, bound("m0", "m1", "m2"))
	all, _, violations := w.snapshot()
	for _, v := range violations {
		t.Error(v)
	}
	nodesUsed := map[string]bool{}
	var first, last time.Time
	for _, b := range all {
		if b.group == "" {
			continue
		}
		nodesUsed[b.node] = true
		if first.IsZero() || b.at.Before(first) {
			first = b.at
		}
		last = maxTime(last, b.at)
	}
	if len(nodesUsed) != 3 {
		t.Errorf("members on %d nodes, want 3", len(nodesUsed))
	}
	t.Logf("the group's members were bound within %s of each other", last.Sub(first))
}
