package kubetest

import (
	"context"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// Products as GPU feature discovery labels them.
const (
	ProductV100 = "Tesla-V100-SXM2-16GB"
	ProductA100 = "NVIDIA-A100-SXM4-80GB"
)

// GPUNode describes a fake GPU node (a value, safe for concurrent reads).
type GPUNode struct {
	Name string
	// Product is the nvidia.com/gpu.product label; GPUs the count label
	// and the nvidia.com/gpu capacity; MemoryMiB the memory label (0: none).
	Product   string
	GPUs      int
	MemoryMiB int
	// Links is the link annotation (model.AnnotationLinks), if any.
	Links string
	// Labels and Annotations are added to the node's.
	Labels, Annotations map[string]string
	// CPU and Memory are the node's capacity; "" means 96 cores and 1 TiB.
	CPU, Memory string
	// NotReady leaves the Ready condition False.
	NotReady bool
	// Taints are the node's taints.
	Taints []corev1.Taint
}

// CreateNode creates the node, takes away the not-ready taint the API
// server puts on new nodes, and sets its status: capacity, allocatable and
// the Ready condition.
func CreateNode(ctx context.Context, cs kubernetes.Interface, g GPUNode) error {
	want := nodeObject(g)
	n := &corev1.Node{ObjectMeta: want.ObjectMeta}
	var err error
	if err = retry(ctx, func() error {
		n, err = cs.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{})
		return err
	}); err != nil {
		return fmt.Errorf("kubetest: create node %s: %w", g.Name, err)
	}
	if !slices.EqualFunc(n.Spec.Taints, g.Taints, func(a, b corev1.Taint) bool { return a.MatchTaint(&b) }) {
		n.Spec.Taints = g.Taints
		if n, err = cs.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("kubetest: untaint node %s: %w", g.Name, err)
		}
	}
	n.Status.Capacity, n.Status.Allocatable, n.Status.Conditions = want.Status.Capacity, want.Status.Allocatable, want.Status.Conditions
	if _, err := cs.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("kubetest: status of node %s: %w", g.Name, err)
	}
	return nil
}

func readyCondition(ready bool) corev1.NodeCondition {
	c := corev1.NodeCondition{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady",
		LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()}
	if !ready {
		c.Status, c.Reason = corev1.ConditionFalse, "KubeletNotReady"
	}
	return c
}

// SetNodeReady sets the node's Ready condition.
func SetNodeReady(ctx context.Context, cs kubernetes.Interface, name string, ready bool) error {
	n, err := cs.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	n.Status.Conditions = []corev1.NodeCondition{readyCondition(ready)}
	_, err = cs.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{})
	return err
}
