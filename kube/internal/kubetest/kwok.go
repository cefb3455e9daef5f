package kubetest

import (
	"context"
	_ "embed" // the kwok stages
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/gpusched/gpusched/kube/model"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// kwok (sigs.k8s.io/kwok) plays the kubelets of many fake nodes on the
// real control plane: hack/e2e-binaries.sh installs it beside the other
// binaries. The scale tests create GPU nodes annotated KwokNodeAnnotation,
// Ready and with their capacity (CreateKwokNodes); kwok runs the pods
// bound to them (kwok-stages.yaml): Running at once, Succeeded after the
// duration of their AnnotationRunDuration, removed at once when deleted.

//go:embed kwok-stages.yaml
var kwokStages string

const (
	// KwokNodeAnnotation marks the nodes kwok manages (value "fake").
	KwokNodeAnnotation = "kwok.x-k8s.io/node"
	// AnnotationRunDuration is how long kwok runs a pod before it
	// completes (a Go duration); without it the pod runs until deleted.
	AnnotationRunDuration = "gpusched.io/kwok-run-duration"
)

// FindKwok returns the kwok binary's path if it is there.
func FindKwok() (string, error) {
	dir, err := BinDir()
	if err != nil {
		return "", err
	}
	p := filepath.Join(dir, "kwok")
	st, err := os.Stat(p)
	if err != nil {
		return "", fmt.Errorf("kubetest: %w", err)
	}
	if st.Mode()&0o111 == 0 {
		return "", fmt.Errorf("kubetest: %s is not executable", p)
	}
	return p, nil
}

var (
	kwokOnce sync.Once
	kwokErr  error
)

// RequireKwok returns kwok's path, installing it with hack/e2e-binaries.sh
// when missing (the control plane's binaries too, if they are); if it
// cannot, it skips the test, saying why.
func RequireKwok(t testing.TB) string {
	t.Helper()
	RequireBinaries(t)
	if p, err := FindKwok(); err == nil {
		return p
	}
	kwokOnce.Do(func() { kwokErr = buildBinaries(context.Background()) })
	p, err := FindKwok()
	if err != nil {
		t.Skipf("end-to-end test skipped: kwok is missing and could not be installed (run kube/hack/e2e-binaries.sh): %v", errors.Join(kwokErr, err))
	}
	return p
}

// KwokOptions tune kwok's controller. A plain value, safe for concurrent
// use when not being changed.
type KwokOptions struct {
	// Parallelism of the pod and node stages (0: kwok's defaults).
	PodParallelism, NodeParallelism int
}

// StartKwok starts kwok against the control plane, managing the nodes
// annotated KwokNodeAnnotation=fake with the stages of kwok-stages.yaml;
// its files and log go into dir. Stop it by the process.
func StartKwok(dir, bin string, cp *ControlPlane, o KwokOptions) (*Process, error) {
	var sb strings.Builder
	sb.WriteString("apiVersion: config.kwok.x-k8s.io/v1alpha1\nkind: KwokConfiguration\noptions:\n")
	sb.WriteString("  manageAllNodes: false\n  manageNodesWithAnnotationSelector: " + KwokNodeAnnotation + "=fake\n")
	if o.PodParallelism > 0 {
		sb.WriteString("  podPlayStageParallelism: " + strconv.Itoa(o.PodParallelism) + "\n")
	}
	if o.NodeParallelism > 0 {
		sb.WriteString("  nodePlayStageParallelism: " + strconv.Itoa(o.NodeParallelism) + "\n")
	}
	sb.WriteString("---\n")
	sb.WriteString(kwokStages)
	cfg := filepath.Join(dir, "kwok.yaml")
	if err := os.WriteFile(cfg, []byte(sb.String()), 0o600); err != nil {
		return nil, err
	}
	// No leases: no node-lifecycle controller reads them, and thousands
	// of nodes would renew theirs every 10 s.
	return StartProcess(dir, "kwok", bin, "--kubeconfig", cp.Kubeconfig, "--config", cfg, "--node-lease-duration-seconds", "0")
}

// CreateKwokNodes creates the nodes for kwok, workers at a time: each in
// one request, with its labels, taints, capacity, the Ready condition and
// the annotation that hands it to kwok (the control plane adds no
// not-ready taint; see Start).
func CreateKwokNodes(ctx context.Context, cs kubernetes.Interface, nodes []GPUNode, workers int) error {
	if workers < 1 {
		workers = 1
	}
	next := make(chan GPUNode)
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
	)
	for range workers {
		wg.Go(func() {
			for g := range next {
				if err := createKwokNode(ctx, cs, g); err != nil {
					mu.Lock()
					first = errors.Join(first, err)
					mu.Unlock()
				}
			}
		})
	}
	for _, g := range nodes {
		next <- g
	}
	close(next)
	wg.Wait()
	return first
}

func createKwokNode(ctx context.Context, cs kubernetes.Interface, g GPUNode) error {
	n := nodeObject(g)
	n.Annotations[KwokNodeAnnotation] = "fake"
	got, err := cs.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("kubetest: create node %s: %w", g.Name, err)
	}
	if !slices.EqualFunc(got.Spec.Taints, g.Taints, func(a, b corev1.Taint) bool { return a.MatchTaint(&b) }) {
		got.Spec.Taints = g.Taints
		if got, err = cs.CoreV1().Nodes().Update(ctx, got, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("kubetest: untaint node %s: %w", g.Name, err)
		}
	}
	if _, ok := got.Status.Allocatable[corev1.ResourcePods]; !ok || len(got.Status.Conditions) == 0 {
		got.Status = n.Status
		if _, err := cs.CoreV1().Nodes().UpdateStatus(ctx, got, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("kubetest: status of node %s: %w", g.Name, err)
		}
	}
	return nil
}

// nodeObject is the node of g with its status.
func nodeObject(g GPUNode) *corev1.Node {
	labels := map[string]string{"kubernetes.io/hostname": g.Name, "kubernetes.io/os": "linux"}
	if g.Product != "" {
		labels[model.LabelProduct] = g.Product
	}
	if g.GPUs > 0 {
		labels[model.LabelCount] = strconv.Itoa(g.GPUs)
	}
	if g.MemoryMiB > 0 {
		labels[model.LabelMemory] = strconv.Itoa(g.MemoryMiB)
	}
	maps.Copy(labels, g.Labels)
	ann := map[string]string{}
	if g.Links != "" {
		ann[model.AnnotationLinks] = g.Links
	}
	maps.Copy(ann, g.Annotations)
	cpu, mem := g.CPU, g.Memory
	if cpu == "" {
		cpu = "96"
	}
	if mem == "" {
		mem = "1Ti"
	}
	list := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse(cpu),
		corev1.ResourceMemory: resource.MustParse(mem),
		corev1.ResourcePods:   resource.MustParse("250"),
	}
	if g.GPUs > 0 {
		list[model.ResourceGPU] = *resource.NewQuantity(int64(g.GPUs), resource.DecimalSI)
	}
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: g.Name, Labels: labels, Annotations: ann},
		Spec:       corev1.NodeSpec{Taints: g.Taints},
		Status: corev1.NodeStatus{Capacity: list, Allocatable: list.DeepCopy(), Phase: corev1.NodeRunning,
			Conditions: []corev1.NodeCondition{readyCondition(!g.NotReady)}},
	}
}

// Memory returns the process's resident memory now and its peak (VmRSS
// and VmHWM of /proc, Linux), in bytes.
func (p *Process) Memory() (rss, peak int64, err error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.Pid()))
	if err != nil {
		return 0, 0, err
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		f := strings.Fields(v)
		if len(f) != 2 || f[1] != "kB" {
			continue
		}
		n, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			continue
		}
		switch k {
		case "VmRSS":
			rss = n << 10
		case "VmHWM":
			peak = n << 10
		}
	}
	if rss == 0 && peak == 0 {
		return 0, 0, fmt.Errorf("kubetest: no VmRSS in /proc/%d/status", p.Pid())
	}
	return rss, peak, nil
}
