package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/gpusched/gpusched/kube/internal/kubetest"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestE2EKwok checks the kwok stages the scale tests rely on: a pod
// bound to a kwok node runs at once, completes after the duration of its
// annotation, and a deleted one is removed without a kubelet.
func TestE2EKwok(t *testing.T) {
	c, _ := controlPlane(t)
	startKwok(t, c)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cs := c.Client
	const ns = "kwok-e2e"
	must(t, kubetest.EnsureNamespace(ctx, cs, ns), "namespace")
	deleteNodesAtEnd(t, cs, []string{"kwok-e2e-0"})
	must(t, kubetest.CreateKwokNodes(ctx, cs, []kubetest.GPUNode{{Name: "kwok-e2e-0", Product: kubetest.ProductA100, GPUs: 8}}, 1), "node")
	mk := func(name, run string) {
		p := gpuPodSpec(ns, name, 1, "", nil, map[string]string{})
		p.Spec.NodeName = "kwok-e2e-0"
		if run != "" {
			p.Annotations[kubetest.AnnotationRunDuration] = run
		}
		_, err := cs.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{})
		must(t, err, "create %s", name)
	}
	start := time.Now()
	mk("short", "3s")
	mk("long", "")
	phase := func(name string) (corev1.PodPhase, error) {
		p, err := cs.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return "", err
		}
		return p.Status.Phase, nil
	}
	waitFor(ctx, t, "both running, then short done", nil, func() (bool, string) {
		s, err1 := phase("short")
		l, err2 := phase("long")
		if err1 != nil || err2 != nil {
			return false, fmt.Sprint(err1, err2)
		}
		return s == corev1.PodSucceeded && l == corev1.PodRunning, fmt.Sprintf("short %s, long %s", s, l)
	})
	t.Logf("short completed %.1f s after its creation", time.Since(start).Seconds())
	if d := time.Since(start); d < 3*time.Second {
		t.Errorf("short completed after %v, before its 3 s", d)
	}
	must(t, cs.CoreV1().Pods(ns).Delete(ctx, "long", metav1.DeleteOptions{}), "delete")
	waitFor(ctx, t, "the deleted pod gone", nil, func() (bool, string) {
		_, err := phase("long")
		return err != nil, "still there"
	})
	t.Logf("the deleted pod removed %.1f s after the creations", time.Since(start).Seconds())
	admDeletePods(cs, ns)
}
