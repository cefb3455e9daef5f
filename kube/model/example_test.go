package model_test

import (
	"fmt"

	"github.com/gpusched/gpusched/kube/model"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// A node as GPU feature discovery labels it, with its links as
// nvidia-smi topo -m prints them, becomes a server of the cluster model.
func ExampleParseNode() {
	n := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name: "gpu-node-7",
			Labels: map[string]string{
				model.LabelProduct: "NVIDIA-A100-SXM4-80GB",
				model.LabelCount:   "4",
				model.LabelRack:    "r12",
			},
			Annotations: map[string]string{
				model.AnnotationLinks: "" +
					"\tGPU0\tGPU1\tGPU2\tGPU3\tCPU Affinity\n" +
					"GPU0\t X \tNV4\tNV4\tSYS\t0-31\n" +
					"GPU1\tNV4\t X \tSYS\tNV4\t0-31\n" +
					"GPU2\tNV4\tSYS\t X \tNV4\t32-63\n" +
					"GPU3\tSYS\tNV4\tNV4\t X \t32-63\n",
				model.AnnotationUnhealthy: "2",
			},
		},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}},
	}
	nd, err := model.ParseNode(n, model.NodeOptions{})
	if err != nil {
		fmt.Println(err)
		return
	}
	s := nd.Server
	fmt.Println(s.ID, s.Rack, len(s.GPUs), "x", s.GPUs[0].Type, s.GPUs[0].MemoryMiB, "MiB")
	fmt.Println("GPU0-GPU1:", s.Link(0, 1), "GPU0-GPU3:", s.Link(0, 3))
	fmt.Println("ready:", nd.Ready, "unhealthy:", nd.Unhealthy)
	// Output:
	// gpu-node-7 r12 4 x a100 81920 MiB
	// GPU0-GPU1: NV4 GPU0-GPU3: SYS
	// ready: true unhealthy: [2]
}

// A pod asks for GPUs of some types, as a member of a pod group.
func ExampleParseRequest() {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: "ml", Name: "trainer-0",
			Labels:      map[string]string{model.LabelPodGroup: "bert"},
			Annotations: map[string]string{model.AnnotationMinMember: "4", model.AnnotationGPUTypes: "a100, h100"},
		},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "train",
			Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{model.ResourceGPU: mustQuantity("8")}}}}},
	}
	r, err := model.ParseRequest(p, "")
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(r.GPUs, r.Types, r.Group, r.MinMember)
	// Output: 8 [a100 h100] ml/bert 4
}
