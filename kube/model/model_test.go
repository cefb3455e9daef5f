package model

import (
	"errors"
	"os"
	"testing"

	"github.com/gpusched/gpusched/topology"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func gpuNode(name string, labels, annotations map[string]string, ready bool) *corev1.Node {
	st := corev1.ConditionFalse
	if ready {
		st = corev1.ConditionTrue
	}
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels, Annotations: annotations},
		Status: corev1.NodeStatus{
			Capacity:   corev1.ResourceList{ResourceGPU: resource.MustParse("8")},
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: st}},
		},
	}
}

func dgx1Links(t *testing.T) [][]topology.Link {
	t.Helper()
	c, err := topology.Homogeneous(1, topology.ServerTemplate{Type: topology.V100, GPUs: 8, Interconnect: topology.HybridCubeMesh})
	require.NoError(t, err)
	return c.Servers[0].Links
}

func TestParseNodeDGX1TopoM(t *testing.T) {
	text, err := os.ReadFile("testdata/dgx1-topo-m.txt")
	require.NoError(t, err)
	n := gpuNode("dgx-3", map[string]string{
		LabelProduct: "Tesla-V100-SXM2-16GB", LabelCount: "8", LabelMemory: "16160",
		LabelRack: "r2", LabelClique: "c1.0",
	}, map[string]string{AnnotationLinks: string(text), AnnotationUnhealthy: "5, 2"}, true)
	nd, err := ParseNode(n, NodeOptions{})
	require.NoError(t, err)
	assert.Empty(t, nd.Warnings)
	s := nd.Server
	assert.Equal(t, "dgx-3", s.ID)
	assert.Equal(t, "r2", s.Rack)
	assert.Equal(t, "c1.0", s.Domain)
	require.Len(t, s.GPUs, 8)
	for i, g := range s.GPUs {
		assert.Equal(t, i, g.Index)
		assert.Equal(t, topology.V100, g.Type)
		assert.Equal(t, 16160, g.MemoryMiB)
	}
	assert.Equal(t, dgx1Links(t), s.Links, "topo -m text gives the hybrid cube mesh")
	assert.True(t, nd.Ready)
	assert.Equal(t, []int{2, 5}, nd.Unhealthy)
}

func TestParseNodeJSONForms(t *testing.T) {
	labels := map[string]string{LabelProduct: "NVIDIA-A100-SXM4-80GB", LabelCount: "2"}
	for name, ann := range map[string]string{
		"matrix":       `[["X","NV12"],["NV12","X"]]`,
		"spec links":   `{"links": [["X","NV12"],["NV12","X"]], "nic_gbps": 200}`,
		"interconnect": `{"interconnect": "nvlink:12"}`,
	} {
		t.Run(name, func(t *testing.T) {
			nd, err := ParseNode(gpuNode("a", labels, map[string]string{AnnotationLinks: ann}, true), NodeOptions{})
			require.NoError(t, err)
			require.Empty(t, nd.Warnings)
			assert.Equal(t, topology.Link{Class: topology.LinkNVLink, NVLinks: 12}, nd.Server.Link(0, 1))
			assert.Equal(t, topology.A100, nd.Server.GPUs[0].Type)
			assert.Equal(t, 80<<10, nd.Server.GPUs[0].MemoryMiB)
		})
	}
	nd, err := ParseNode(gpuNode("nvs", map[string]string{LabelProduct: "NVIDIA-A100-SXM4-40GB", LabelCount: "8"},
		map[string]string{AnnotationLinks: `{"interconnect":"nvswitch"}`}, true), NodeOptions{})
	require.NoError(t, err)
	assert.Equal(t, topology.LinkNVSwitch, nd.Server.Link(0, 7).Class)
}

func TestParseNodeFallbacks(t *testing.T) {
	// No labels at all: the capacity gives the count, the type is unknown.
	nd, err := ParseNode(gpuNode("bare", nil, nil, false), NodeOptions{})
	require.NoError(t, err)
	assert.Len(t, nd.Server.GPUs, 8)
	assert.Equal(t, topology.GPUType("unknown"), nd.Server.GPUs[0].Type)
	assert.Nil(t, nd.Server.Links, "links unknown without the annotation")
	assert.False(t, nd.Ready)

	// Bad annotations are warnings: the node stays usable.
	labels := map[string]string{LabelProduct: "Tesla-V100-SXM2-16GB", LabelCount: "8", LabelMemory: "lots"}
	for name, ann := range map[string]string{
		"garbage":        "hello world",
		"wrong size":     `[["X","NV1"],["NV1","X"]]`,
		"asymmetric":     `{"links":[["X","NV1"],["NV2","X"]]}`,
		"bad class":      "\tGPU0\tGPU1\nGPU0\tX\tNV99\nGPU1\tNV99\tX\n",
		"missing row":    "\tGPU0\tGPU1\nGPU0\tX\tNV1\n",
		"count":          `{"count": 2, "interconnect": "nvswitch"}`,
		"unknown field":  `{"linkz": []}`,
		"trailing":       `[["X"]] x`,
		"type in spec":   `{"gpu_type":"a100","gpus":8}`,
		"bad ic":         `{"interconnect":"warp"}`,
		"no gpu columns": "a b c\n",
	} {
		t.Run(name, func(t *testing.T) {
			nd, err := ParseNode(gpuNode("n", labels, map[string]string{AnnotationLinks: ann, AnnotationUnhealthy: "9"}, true), NodeOptions{})
			require.NoError(t, err)
			require.Len(t, nd.Warnings, 3, "memory, links and unhealthy")
			for _, w := range nd.Warnings {
				assert.ErrorIs(t, w, ErrInvalid)
			}
			assert.Contains(t, nd.Warnings[1].Error(), AnnotationLinks)
			assert.Nil(t, nd.Server.Links)
			assert.Empty(t, nd.Unhealthy)
			assert.Equal(t, 16<<10, nd.Server.GPUs[0].MemoryMiB, "the product's memory")
		})
	}
}

func TestParseNodeErrors(t *testing.T) {
	noCap := gpuNode("x", nil, nil, true)
	noCap.Status.Capacity = nil
	for name, tc := range map[string]struct {
		n    *corev1.Node
		kind error
	}{
		"no GPUs":       {noCap, ErrNoGPUs},
		"zero count":    {gpuNode("x", map[string]string{LabelCount: "0"}, nil, true), ErrNoGPUs},
		"bad count":     {gpuNode("x", map[string]string{LabelCount: "-1"}, nil, true), ErrInvalid},
		"huge count":    {gpuNode("x", map[string]string{LabelCount: "100000"}, nil, true), ErrInvalid},
		"MIG":           {gpuNode("x", map[string]string{LabelProduct: "NVIDIA-A100-SXM4-40GB-MIG-1g.5gb"}, nil, true), ErrNoGPUs},
		"empty product": {gpuNode("x", map[string]string{LabelProduct: " "}, nil, true), ErrInvalid},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := ParseNode(tc.n, NodeOptions{})
			require.ErrorIs(t, err, tc.kind)
		})
	}
}

func pod(ann map[string]string, labels map[string]string, gpus ...string) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", Annotations: ann, Labels: labels}}
	for _, g := range gpus {
		p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: "c",
			Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{ResourceGPU: resource.MustParse(g)}}})
	}
	return p
}

func TestParseRequest(t *testing.T) {
	p := pod(map[string]string{
		AnnotationGPUTypes: "V100, NVIDIA-A100-SXM4-80GB,v100", AnnotationMinMember: "4",
		"gpusched.io/attained-gpu-seconds": "-1", "gpusched.io/remaining-seconds": "NaN", // no longer read
	}, map[string]string{LabelPodGroup: "job1"}, "2", "1")
	always := corev1.ContainerRestartPolicyAlways
	p.Spec.InitContainers = []corev1.Container{
		{Name: "init", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{ResourceGPU: resource.MustParse("2")}}},
		{Name: "sidecar", RestartPolicy: &always, Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{ResourceGPU: resource.MustParse("1")}}},
	}
	r, err := ParseRequest(p, "")
	require.NoError(t, err)
	assert.Equal(t, Request{GPUs: 4, Types: []topology.GPUType{topology.V100, topology.A100}, Group: "ns/job1", MinMember: 4}, r)
	assert.True(t, r.Allows(topology.A100))
	assert.False(t, r.Allows(topology.K80))

	r, err = ParseRequest(pod(nil, map[string]string{LabelPodGroupX: "g"}, "1"), "")
	require.ErrorIs(t, err, ErrInvalid, "a group without min-member")
	r, err = ParseRequest(pod(nil, nil), "")
	require.NoError(t, err)
	assert.Equal(t, 0, r.GPUs)
	assert.Equal(t, 1, r.MinMember)
	assert.Nil(t, r.Types)
}

func TestParseRequestErrors(t *testing.T) {
	grp := map[string]string{LabelPodGroup: "g"}
	for name, p := range map[string]*corev1.Pod{
		"fractional":   pod(nil, nil, "500m"),
		"too many":     pod(nil, nil, "2000"),
		"bad types":    pod(map[string]string{AnnotationGPUTypes: "v100,!!"}, nil, "1"),
		"empty types":  pod(map[string]string{AnnotationGPUTypes: " , "}, nil, "1"),
		"bad min":      pod(map[string]string{AnnotationMinMember: "two"}, grp, "1"),
		"zero min":     pod(map[string]string{AnnotationMinMember: "0"}, grp, "1"),
		"min no group": pod(map[string]string{AnnotationMinMember: "2"}, nil, "1"),
	} {
		t.Run(name, func(t *testing.T) {
			_, err := ParseRequest(p, "")
			require.ErrorIs(t, err, ErrInvalid)
			var fe *FieldError
			require.True(t, errors.As(err, &fe))
			assert.NotEmpty(t, fe.Field)
		})
	}
}

func TestIndices(t *testing.T) {
	idx, err := ParseIndices("f", " 3,1 ,0")
	require.NoError(t, err)
	assert.Equal(t, []int{0, 1, 3}, idx)
	assert.Equal(t, "0,1,3", FormatIndices(idx))
	idx, err = ParseIndices("f", "")
	require.NoError(t, err)
	assert.Empty(t, idx)
	for _, bad := range []string{"1,1", "-1", "x", "1024", "1;2"} {
		_, err := ParseIndices("f", bad)
		assert.ErrorIs(t, err, ErrInvalid, bad)
	}
}

func TestParseLinksCap(t *testing.T) {
	big := make([]byte, MaxAnnotationLen+1)
	for i := range big {
		big[i] = ' '
	}
	_, err := ParseLinks(string(big))
	require.ErrorIs(t, err, ErrInvalid)
}

func TestParseNodeAllocatable(t *testing.T) {
	tests := []struct {
		name  string
		alloc string // "" for none
		want  int
		warn  bool
	}{
		{"absent", "", -1, false},
		{"all", "8", 8, false},
		{"two unhealthy", "6", 6, false},
		{"more than the count", "12", 8, false},
		{"fractional", "1500m", -1, true},
		{"negative", "-1", -1, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			n := gpuNode("n", map[string]string{LabelProduct: "Tesla-V100-SXM2-16GB", LabelCount: "8"}, nil, true)
			if tc.alloc != "" {
				n.Status.Allocatable = corev1.ResourceList{ResourceGPU: resource.MustParse(tc.alloc)}
			}
			nd, err := ParseNode(n, NodeOptions{})
			require.NoError(t, err)
			assert.Equal(t, tc.want, nd.Allocatable)
			if tc.warn {
				require.Len(t, nd.Warnings, 1)
				assert.ErrorIs(t, nd.Warnings[0], ErrInvalid)
				assert.Contains(t, nd.Warnings[0].Error(), "allocatable nvidia.com/gpu")
			} else {
				assert.Empty(t, nd.Warnings)
			}
		})
	}
}

// TestSameNode: every field ParseNode reads makes two nodes differ; a
// heartbeat, images and other resources do not, and where SameNode says
// same, ParseNode's answers are equal.
func TestSameNode(t *testing.T) {
	base := func() *corev1.Node {
		n := gpuNode("n1", map[string]string{LabelProduct: "Tesla-V100-SXM2-16GB", LabelRack: "r1"},
			map[string]string{AnnotationUnhealthy: "1", "other": "x"}, true)
		n.Status.Allocatable = corev1.ResourceList{ResourceGPU: resource.MustParse("8"), corev1.ResourceCPU: resource.MustParse("64")}
		return n
	}
	same := map[string]func(*corev1.Node){
		"heartbeat":        func(n *corev1.Node) { n.Status.Conditions[0].LastHeartbeatTime = metav1.Now() },
		"images":           func(n *corev1.Node) { n.Status.Images = []corev1.ContainerImage{{Names: []string{"x"}}} },
		"cpu":              func(n *corev1.Node) { n.Status.Allocatable[corev1.ResourceCPU] = resource.MustParse("63") },
		"other annotation": func(n *corev1.Node) { n.Annotations["other"] = "y" },
		"resource version": func(n *corev1.Node) { n.ResourceVersion = "99" },
		"alloc in milli":   func(n *corev1.Node) { n.Status.Allocatable[ResourceGPU] = resource.MustParse("8000m") },
		"taint":            func(n *corev1.Node) { n.Spec.Taints = []corev1.Taint{{Key: "k", Effect: corev1.TaintEffectNoSchedule}} },
	}
	differ := map[string]func(*corev1.Node){
		"name":        func(n *corev1.Node) { n.Name = "n2" },
		"cordon":      func(n *corev1.Node) { n.Spec.Unschedulable = true },
		"not ready":   func(n *corev1.Node) { n.Status.Conditions[0].Status = corev1.ConditionUnknown },
		"no ready":    func(n *corev1.Node) { n.Status.Conditions = nil },
		"rack label":  func(n *corev1.Node) { n.Labels[LabelRack] = "r2" },
		"new label":   func(n *corev1.Node) { n.Labels[LabelCount] = "4" },
		"links":       func(n *corev1.Node) { n.Annotations[AnnotationLinks] = "[]" },
		"unhealthy":   func(n *corev1.Node) { n.Annotations[AnnotationUnhealthy] = "2" },
		"healthy":     func(n *corev1.Node) { delete(n.Annotations, AnnotationUnhealthy) },
		"capacity":    func(n *corev1.Node) { n.Status.Capacity[ResourceGPU] = resource.MustParse("4") },
		"allocatable": func(n *corev1.Node) { n.Status.Allocatable[ResourceGPU] = resource.MustParse("7") },
		"no alloc":    func(n *corev1.Node) { delete(n.Status.Allocatable, ResourceGPU) },
	}
	for name, f := range same {
		b := base()
		f(b)
		assert.True(t, SameNode(base(), b, NodeOptions{}), name)
		pa, erra := ParseNode(base(), NodeOptions{})
		pb, errb := ParseNode(b, NodeOptions{})
		require.NoError(t, erra)
		require.NoError(t, errb)
		assert.Equal(t, pa, pb, name)
	}
	for name, f := range differ {
		b := base()
		f(b)
		assert.False(t, SameNode(base(), b, NodeOptions{}), name)
	}
	assert.False(t, SameNode(nil, base(), NodeOptions{}))
	// Another resource: the GPU capacity no longer matters, its own does.
	o := NodeOptions{Resource: "example.com/gpu"}
	b := base()
	b.Status.Capacity[ResourceGPU] = resource.MustParse("4")
	assert.True(t, SameNode(base(), b, o))
	b.Status.Capacity["example.com/gpu"] = resource.MustParse("4")
	assert.False(t, SameNode(base(), b, o))
}
