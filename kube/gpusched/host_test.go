package gpusched

import (
	"math"
	"testing"

	"github.com/gpusched/gpusched/kube/model"
	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/kubernetes/pkg/scheduler/framework"
)

// TestHostFit: on a node of 8 GPUs and 24 CPUs (3 per GPU) whose pods
// hold 2 GPUs and 3 CPUs, a pod of 1 GPU and 12 CPUs leaves 9 CPUs for 5
// free GPUs, 1.8 each: 0.6 of the proportional share. With 1 CPU held
// instead, 11 for 5: 0.73. A pod of 1 CPU strands nothing: 1. Memory
// counts alike; a node that states no CPUs is not judged on them.
func TestHostFit(t *testing.T) {
	mk := func(cpu string) *framework.NodeInfo {
		held := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "held", UID: "held"}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c",
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse("10Gi")}}}}}}
		ni := framework.NewNodeInfo(held)
		ni.SetNode(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n"}, Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse("24"), corev1.ResourceMemory: resource.MustParse("500Gi"), model.ResourceGPU: resource.MustParse("8")}}})
		return ni
	}
	c := Choice{Free: 6, Total: 8}
	hungry := &cycleData{req: model.Request{GPUs: 1}, milliCPU: 12000, memory: 10 << 30}
	light := &cycleData{req: model.Request{GPUs: 1}, milliCPU: 1000, memory: 10 << 30}
	assert.InDelta(t, 0.6, hostFit(c, hungry, mk("3")), 1e-9)
	assert.InDelta(t, 11.0/5/3, hostFit(c, hungry, mk("1")), 1e-9)
	assert.Equal(t, 1.0, hostFit(c, light, mk("3")))
	// Memory: 480 GiB asked leaves 10 GiB for 5 GPUs: 2 GiB each, of 62.5.
	greedy := &cycleData{req: model.Request{GPUs: 1}, milliCPU: 1000, memory: 480 << 30}
	assert.InDelta(t, 2/62.5, hostFit(c, greedy, mk("1")), 1e-9)
	// The last free GPUs: nothing left to strand.
	assert.Equal(t, 1.0, hostFit(Choice{Free: 1, Total: 8}, hungry, mk("3")))
	// More asked than is free: 0, not negative.
	huge := &cycleData{req: model.Request{GPUs: 1}, milliCPU: 100000}
	assert.Equal(t, 0.0, hostFit(c, huge, mk("1")))
	assert.False(t, math.IsNaN(hostFit(Choice{}, hungry, mk("1"))))
}
