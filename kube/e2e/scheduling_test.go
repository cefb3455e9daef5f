package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gpusched/gpusched/kube/internal/kubetest"
	"github.com/gpusched/gpusched/kube/model"
	"github.com/gpusched/gpusched/topology"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// gangSpec is a pod group of the scenario: members x GPUs each.
type gangSpec struct {
	members, gpus int
	types         string
}

// The scenario's pod groups: 2 to 16 members, 65 pods.
var scenarioGangs = []gangSpec{
	{16, 1, ""}, {8, 2, "a100"}, {8, 4, "v100"}, {6, 2, ""}, {4, 8, "a100"}, {4, 4, "v100"},
	{4, 1, ""}, {3, 2, "v100"}, {2, 1, ""}, {2, 2, "a100"}, {2, 4, ""}, {2, 8, "v100"}, {2, 1, "a100"}, {2, 2, ""},
}

func gpuPodSpec(ns, name string, gpus int, types string, labels, ann map[string]string) *corev1.Pod {
	if ann == nil {
		ann = map[string]string{}
	}
	if types != "" {
		ann[model.AnnotationGPUTypes] = types
	}
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels, Annotations: ann},
		Spec: corev1.PodSpec{
			SchedulerName: "gpusched",
			Containers: []corev1.Container{{Name: "train", Image: "registry.k8s.io/pause:3.10",
				Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{
					model.ResourceGPU: *resource.NewQuantity(int64(gpus), resource.DecimalSI)}}}},
		},
	}
	return p
}

// scenarioNodes makes the 20 nodes: 10 DGX-1 V100 nodes (links as
// nvidia-smi topo -m prints them, or as JSON), 10 NVSwitch A100 nodes, in
// racks of 5; the A100s in two NVLink cliques. badLinks gets a malformed
// link annotation.
func scenarioNodes(topoM, badLinks string) []kubetest.GPUNode {
	var nodes []kubetest.GPUNode
	for i := range 10 {
		links := topoM
		if i%2 == 1 {
			links = `{"interconnect":"hybrid-cube-mesh"}`
		}
		name := fmt.Sprintf("v100-%d", i)
		if name == badLinks {
			links = "GPU0\tGPU1\nGPU0\tX\tNV9\n"
		}
		nodes = append(nodes, kubetest.GPUNode{Name: name, Product: kubetest.ProductV100, GPUs: 8, MemoryMiB: 16160,
			Links: links, Labels: map[string]string{model.LabelRack: fmt.Sprintf("r%d", i/5)}})
	}
	for i := range 10 {
		nodes = append(nodes, kubetest.GPUNode{Name: fmt.Sprintf("a100-%d", i), Product: kubetest.ProductA100, GPUs: 8,
			MemoryMiB: 81920, Links: `{"interconnect":"nvswitch"}`,
			Labels: map[string]string{model.LabelRack: fmt.Sprintf("r%d", 2+i/5), model.LabelClique: fmt.Sprintf("clique-%d", i/5)}})
	}
	return nodes
}

func createNodes(ctx context.Context, t *testing.T, cs kubernetes.Interface, nodes []kubetest.GPUNode) {
	t.Helper()
	for _, n := range nodes {
		must(t, kubetest.CreateNode(ctx, cs, n), "node %s", n.Name)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		for _, n := range nodes {
			_ = cs.CoreV1().Nodes().Delete(ctx, n.Name, metav1.DeleteOptions{})
		}
	})
}

// TestE2EScheduling runs the scenario of issue #18 on a real control
// plane: 20 nodes of 8 GPUs, 200 pods of which 65 in 14 pod groups of 2 to
// 16 members, pods completing after a few seconds so that all of them run;
// the scheduler killed and restarted mid-run; a node marked NotReady and
// another deleted mid-run; and bad input (a pod larger than any node, a
// malformed link annotation, a pod group whose members disagree on its
// size). A watcher checks every binding as it happens.
func TestE2EScheduling(t *testing.T) {
	c, bin := controlPlane(t)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	cs := c.Client
	const ns = "e2e-scheduling"
	must(t, kubetest.EnsureNamespace(ctx, cs, ns), "namespace")
	t.Cleanup(func() { _ = cs.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{}) })

	topoM, err := os.ReadFile(filepath.Join("..", "model", "testdata", "dgx1-topo-m.txt"))
	must(t, err, "topo -m sample")
	const badLinks, unhealthy, deleted = "v100-9", "a100-9", "v100-8"
	createNodes(ctx, t, cs, scenarioNodes(string(topoM), badLinks))

	w, err := watch(ctx, cs, ns, 5*time.Second, true)
	must(t, err, "watcher")
	defer w.stop()

	dir := testDir(t)
	args := map[string]any{"permitTimeoutSeconds": 15, "backoffSeconds": 2}
	sched := startScheduler(t, dir, "gpusched-1", bin, schedulerConfig(t, c, args))

	// The pods: 14 groups, 131 single pods, and 4 pods of bad input.
	rng := rand.New(rand.NewPCG(18, 2026))
	var pods []*corev1.Pod
	good := map[string]bool{}
	for g, sp := range scenarioGangs {
		for m := range sp.members {
			name := fmt.Sprintf("g%d-%d", g, m)
			pods = append(pods, gpuPodSpec(ns, name, sp.gpus, sp.types,
				map[string]string{model.LabelPodGroup: fmt.Sprint("g", g)},
				map[string]string{model.AnnotationMinMember: strconv.Itoa(sp.members)}))
			good[name] = true
		}
	}
	sizes := []int{1, 1, 1, 2, 2, 2, 4, 8}
	for i := range 131 {
		types := []string{"", "v100", "a100"}[rng.IntN(3)]
		name := fmt.Sprintf("s%d", i)
		pods = append(pods, gpuPodSpec(ns, name, sizes[rng.IntN(len(sizes))], types, nil, nil))
		good[name] = true
	}
	pods = append(pods, gpuPodSpec(ns, "too-big", 16, "", nil, nil))
	for m, size := range []string{"3", "3", "2"} {
		pods = append(pods, gpuPodSpec(ns, fmt.Sprint("bad-", m), 1, "",
			map[string]string{model.LabelPodGroup: "bad"}, map[string]string{model.AnnotationMinMember: size}))
	}
	if len(pods) != 200 {
		t.Fatalf("%d pods", len(pods))
	}
	rng.Shuffle(len(pods), func(i, j int) { pods[i], pods[j] = pods[j], pods[i] })
	for _, p := range pods {
		_, err := cs.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{})
		must(t, err, "create pod %s", p.Name)
	}
	errs := make(chan error, 100)
	go complete(ctx, cs, ns, w, 3*time.Second, errs)

	boundGood := func() int {
		all, _, _ := w.snapshot()
		n := 0
		for _, b := range all {
			if good[b.name] {
				n++
			}
		}
		return n
	}
	progress := func(n int) func() (bool, string) {
		return func() (bool, string) {
			got := boundGood()
			return got >= n, fmt.Sprintf("%d of %d pods bound", got, len(good))
		}
	}

	// (d) Kill the scheduler mid-run, without warning, and start another.
	waitFor(ctx, t, "70 pods bound", sched, progress(70))
	sched.Kill()
	t.Logf("scheduler killed with %d pods bound", boundGood())
	sched = startScheduler(t, dir, "gpusched-2", bin, schedulerConfig(t, c, args))

	// (e) A node goes NotReady, another is deleted.
	waitFor(ctx, t, "110 pods bound", sched, progress(110))
	must(t, kubetest.SetNodeReady(ctx, cs, unhealthy, false), "node %s NotReady", unhealthy)
	w.fence(unhealthy)
	must(t, cs.CoreV1().Nodes().Delete(ctx, deleted, metav1.DeleteOptions{}), "delete node %s", deleted)
	w.fence(deleted)
	t.Logf("node %s NotReady and node %s deleted with %d pods bound", unhealthy, deleted, boundGood())

	waitFor(ctx, t, "every good pod bound", sched, progress(len(good)))
	select {
	case err := <-errs:
		t.Fatal(err)
	default:
	}

	all, _, violations := w.snapshot()
	// (b), (e) and the annotations, checked binding by binding.
	for _, v := range violations {
		t.Error(v)
	}
	// Every pod bound once (the completer deletes it), none of the bad ones.
	seen := map[string]int{}
	onBad := 0
	for _, b := range all {
		seen[b.name]++
		if b.node == badLinks {
			onBad++
		}
	}
	for name, n := range seen {
		if !good[name] {
			t.Errorf("pod %s of bad input was bound", name)
		} else if n != 1 {
			t.Errorf("pod %s bound %d times", name, n)
		}
	}
	// (a) No pod group partly bound: each group's members were all bound,
	// within moments of each other (they bind together once admitted).
	w.mu.Lock()
	for g, sp := range scenarioGangs {
		members := w.groups[fmt.Sprintf("%s/g%d", ns, g)]
		if len(members) != sp.members {
			t.Errorf("pod group g%d: %d of %d members bound", g, len(members), sp.members)
			continue
		}
		first, last := members[0].at, members[0].at
		for _, m := range members {
			first, last = minTime(first, m.at), maxTime(last, m.at)
		}
		if span := last.Sub(first); span > 10*time.Second {
			t.Errorf("pod group g%d: members bound over %s, not together", g, span)
		}
	}
	w.mu.Unlock()
	// (c) 2-GPU pods on DGX-1 nodes get NVLink pairs.
	dgx1, err := topology.Homogeneous(1, topology.ServerTemplate{Type: topology.V100, GPUs: 8, Interconnect: topology.HybridCubeMesh})
	must(t, err, "DGX-1")
	pairs, linked := 0, 0
	for _, b := range all {
		if b.gpus == 2 && strings.HasPrefix(b.node, "v100-") && b.node != badLinks && len(b.devices) == 2 {
			pairs++
			if dgx1.Servers[0].Link(b.devices[0], b.devices[1]).Class == topology.LinkNVLink {
				linked++
			}
		}
	}
	t.Logf("%d bindings; %d 2-GPU pods on DGX-1 nodes, %d on an NVLink pair; %d pods on the node with bad links", len(all), pairs, linked, onBad)
	if pairs == 0 || linked*10 < pairs*9 {
		t.Errorf("%d of %d 2-GPU pods on DGX-1 nodes got an NVLink pair, want at least 90%%", linked, pairs)
	}
	if onBad == 0 {
		t.Errorf("the node with a malformed link annotation took no pod")
	}

	// (f) Bad input got clear events and broke nothing else (every good
	// pod above was bound).
	wantEvents := map[string]string{
		"too-big": "asks for 16 GPUs but the largest node has 8",
		"bad-0":   "disagree on its size",
		"bad-2":   "disagree on its size",
	}
	waitFor(ctx, t, "events of bad input", sched, func() (bool, string) {
		evs, err := cs.EventsV1().Events(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		missing := []string{}
		for pod, want := range wantEvents {
			found := false
			for _, e := range evs.Items {
				if e.Regarding.Name == pod && e.Reason == "FailedScheduling" && strings.Contains(e.Note, want) {
					found = true
				}
			}
			if !found {
				missing = append(missing, pod)
			}
		}
		slices.Sort(missing)
		return len(missing) == 0, fmt.Sprintf("no FailedScheduling event saying why for %v", missing)
	})
	waitFor(ctx, t, "event on the node with bad links", sched, func() (bool, string) {
		evs, err := cs.EventsV1().Events("").List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		for _, e := range evs.Items {
			if e.Regarding.Kind == "Node" && e.Regarding.Name == badLinks && e.Type == corev1.EventTypeWarning &&
				strings.Contains(e.Note, model.AnnotationLinks) {
				return true, ""
			}
		}
		return false, "no Warning event on node " + badLinks
	})

	// (c) once more, deterministically: on an empty DGX-1 node a 2-GPU pod
	// gets one of the node's best pairs (two NVLinks).
	waitFor(ctx, t, "the cluster to empty", sched, func() (bool, string) {
		_, live, _ := w.snapshot()
		return len(live) == 0, fmt.Sprintf("%d pods still bound", len(live))
	})
	pair := gpuPodSpec(ns, "pair", 2, "v100", nil, nil)
	pair.Spec.NodeSelector = map[string]string{"kubernetes.io/hostname": "v100-0"}
	_, err = cs.CoreV1().Pods(ns).Create(ctx, pair, metav1.CreateOptions{})
	must(t, err, "create pod pair")
	var got bound
	waitFor(ctx, t, "pod pair bound", sched, func() (bool, string) {
		all, _, _ := w.snapshot()
		for _, b := range all {
			if b.name == "pair" {
				got = b
				return true, ""
			}
		}
		return false, "not bound"
	})
	if l := dgx1.Servers[0].Link(got.devices[0], got.devices[1]); l != (topology.Link{Class: topology.LinkNVLink, NVLinks: 2}) {
		t.Errorf("pod pair got GPUs %v on %s, linked by %s, want NV2", got.devices, got.node, l)
	}
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
