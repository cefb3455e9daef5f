package model

import (
	"context"
	"errors"
	"os"
	"slices"
	"testing"

	"github.com/gpusched/gpusched/allocation"
	"github.com/gpusched/gpusched/scheduler"
	"github.com/gpusched/gpusched/topology"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func gpuPod(name string, gpus int, labels, ann map[string]string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ml", Name: name, Labels: labels, Annotations: ann},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{
			Limits: corev1.ResourceList{ResourceGPU: *resource.NewQuantity(int64(gpus), resource.DecimalSI)}}}}},
	}
}

func TestJobSpec(t *testing.T) {
	types := []topology.GPUType{topology.A100, topology.V100}
	tests := []struct {
		name string
		pod  *corev1.Pod
		want scheduler.JobSpec
		err  string
	}{
		{"any type", gpuPod("p", 2, nil, nil),
			scheduler.JobSpec{GPUs: 2, Throughput: map[topology.GPUType]float64{topology.A100: 1, topology.V100: 1}}, ""},
		{"types, pod group; a claimed remaining time is not read", gpuPod("g-0", 4, map[string]string{LabelPodGroup: "train"},
			map[string]string{AnnotationMinMember: "2", AnnotationGPUTypes: "v100,k80", "gpusched.io/remaining-seconds": "600"}),
			scheduler.JobSpec{GPUs: 4, Types: []topology.GPUType{topology.V100, topology.K80},
				Throughput: map[topology.GPUType]float64{topology.V100: 1}, Gang: "ml/train", Priority: 3}, ""},
		{"no GPUs", gpuPod("cpu", 0, nil, nil), scheduler.JobSpec{}, "at least one GPU"},
		{"no type of the cluster", gpuPod("k", 1, nil, map[string]string{AnnotationGPUTypes: "k80"}),
			scheduler.JobSpec{}, `"k80": allows none of the cluster's types [a100 v100]`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r, err := ParseRequest(tc.pod, "")
			require.NoError(t, err)
			got, err := r.JobSpec(types, tc.want.Priority)
			if tc.err != "" {
				require.ErrorIs(t, err, ErrInvalid)
				var fe *FieldError
				require.True(t, errors.As(err, &fe))
				assert.Contains(t, err.Error(), tc.err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

// Nodes and pods read here drive the scheduling core: the pod group's two
// 4-GPU members run together on the DGX-1 (the only V100 node), each on a
// fully NVLinked quad, and the 2-GPU pod that may run anywhere goes to the
// A100 node the group leaves free.
func TestJobSpecOnTheCore(t *testing.T) {
	text, err := os.ReadFile("testdata/dgx1-topo-m.txt")
	require.NoError(t, err)
	dgx := gpuNode("dgx-0", map[string]string{LabelProduct: "Tesla-V100-SXM2-16GB", LabelCount: "8"},
		map[string]string{AnnotationLinks: string(text)}, true)
	a100 := gpuNode("a100-0", map[string]string{LabelProduct: "NVIDIA-A100-SXM4-80GB", LabelCount: "8"},
		map[string]string{AnnotationLinks: `{"interconnect":"nvswitch"}`}, true)
	c := &topology.Cluster{}
	for _, n := range []*corev1.Node{dgx, a100} {
		nd, err := ParseNode(n, NodeOptions{})
		require.NoError(t, err)
		c.Servers = append(c.Servers, nd.Server)
	}
	s, err := scheduler.New(scheduler.Config{Policy: &allocation.FIFO{}, Cluster: c})
	require.NoError(t, err)
	types := []topology.GPUType{topology.A100, topology.V100}
	pods := []*corev1.Pod{
		gpuPod("g-0", 4, map[string]string{LabelPodGroup: "train"}, map[string]string{AnnotationMinMember: "2", AnnotationGPUTypes: "v100"}),
		gpuPod("g-1", 4, map[string]string{LabelPodGroup: "train"}, map[string]string{AnnotationMinMember: "2", AnnotationGPUTypes: "v100"}),
		gpuPod("solo", 2, nil, nil),
	}
	for i, p := range pods {
		r, err := ParseRequest(p, "")
		require.NoError(t, err)
		spec, err := r.JobSpec(types, 0)
		require.NoError(t, err)
		require.NoError(t, s.Submit(p.Name, spec, float64(i)))
	}
	round, err := s.Round(context.Background(), 10)
	require.NoError(t, err)
	got := map[string]scheduler.Assignment{}
	for _, as := range round.Assignments {
		require.Len(t, as.Jobs, 1)
		got[as.Jobs[0]] = as
	}
	require.Len(t, got, 3, "every job runs")
	dgxLinks := dgx1Links(t)
	var held []int
	for _, name := range []string{"g-0", "g-1"} {
		as := got[name]
		assert.Equal(t, topology.V100, as.Type, name)
		require.Len(t, as.Devices, 4, name)
		var idx []int
		for _, d := range as.Devices {
			assert.Equal(t, "dgx-0", d.Server, name)
			idx = append(idx, d.Index)
		}
		for i := range idx {
			for j := range i {
				assert.Equal(t, topology.LinkNVLink, dgxLinks[idx[i]][idx[j]].Class, "%s: GPUs %v", name, idx)
			}
		}
		held = append(held, idx...)
	}
	slices.Sort(held)
	assert.Equal(t, []int{0, 1, 2, 3, 4, 5, 6, 7}, held, "the two members share no GPU")
	solo := got["solo"]
	assert.Equal(t, topology.A100, solo.Type)
	require.Len(t, solo.Devices, 2)
	assert.Equal(t, "a100-0", solo.Devices[0].Server)
}
