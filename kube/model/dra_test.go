package model_test

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/gpusched/gpusched/kube/internal/dratest"
	"github.com/gpusched/gpusched/kube/model"
	"github.com/gpusched/gpusched/topology"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	resourcev1 "k8s.io/api/resource/v1"
)

// An HGX A100 as the driver publishes it with Fabric Manager
// partitioning: eight A100-SXM4-40GB in one NVSwitch fabric, split over
// two slices in no order.
func TestParseDRANodeHGX(t *testing.T) {
	gpus := dratest.Node(8, "NVIDIA A100-SXM4-40GB", 40, true)
	var a, b []resourcev1.Device
	for i, g := range gpus {
		if i%2 == 0 {
			a = append([]resourcev1.Device{g.Device()}, a...)
		} else {
			b = append(b, g.Device())
		}
	}
	rs := []*resourcev1.ResourceSlice{
		dratest.Slice("hgx-1", "hgx-1", 3, 1, 2, b...),
		dratest.Slice("other", "other", 1, 0, 1, dratest.Node(2, "NVIDIA H100 80GB HBM3", 80, false)[0].Device()),
		dratest.Slice("hgx-1", "hgx-1", 3, 0, 2, a...),
		dratest.Slice("hgx-1", "hgx-1", 2, 0, 1, gpus[0].Device()), // an older generation
	}
	n := dratest.ReadyNode("hgx-1", map[string]string{model.LabelRack: "r7", model.LabelClique: "c1"})
	nd, err := model.ParseDRANode(n, rs, model.NodeOptions{})
	require.NoError(t, err)
	assert.Empty(t, nd.Warnings)
	s := nd.Server
	assert.Equal(t, "hgx-1", s.ID)
	assert.Equal(t, "r7", s.Rack)
	assert.Equal(t, "c1", s.Domain)
	require.Equal(t, 8, s.NumGPUs())
	assert.True(t, nd.Ready)
	assert.Equal(t, 8, nd.Allocatable)
	for i, g := range s.GPUs {
		assert.Equal(t, topology.A100, g.Type)
		assert.Equal(t, 40960, g.MemoryMiB)
		assert.Equal(t, i, g.Index, "positions follow the minors")
		assert.Equal(t, gpus[i].UUID(), g.UUID)
		assert.Equal(t, gpus[i].Name(), nd.DRA.Devices[i].Name)
		assert.Equal(t, "hgx-1", nd.DRA.Devices[i].Pool)
		for j := range s.GPUs {
			if i != j {
				assert.Equal(t, topology.LinkNVSwitch, s.Links[i][j].Class, "%d-%d", i, j)
			}
		}
	}
	assert.Empty(t, nd.Unhealthy)
	assert.Equal(t, model.DriverGPU, nd.DRA.Driver)
}

// A PCIe server: two GPUs per root port, one root per socket; the links
// follow (PHB on a root, SYS across sockets). The node's link annotation,
// where there is one, is the better source.
func TestParseDRANodePCIe(t *testing.T) {
	gpus := dratest.Node(4, "NVIDIA A100-PCIE-40GB", 40, false)
	n := dratest.ReadyNode("pcie", nil)
	nd, err := model.ParseDRANode(n, dratest.Slices("pcie", gpus), model.NodeOptions{})
	require.NoError(t, err)
	l := nd.Server.Links
	assert.Equal(t, topology.LinkHostBridge, l[0][1].Class)
	assert.Equal(t, topology.LinkCrossSocket, l[1][2].Class)
	assert.Equal(t, 0, nd.Server.GPUs[1].NUMANode)
	assert.Equal(t, 1, nd.Server.GPUs[2].NUMANode)

	// Same NUMA node, another root: NODE.
	gpus[1].PCIeRoot = "pci0000:20"
	nd, err = model.ParseDRANode(n, dratest.Slices("pcie", gpus), model.NodeOptions{})
	require.NoError(t, err)
	assert.Equal(t, topology.LinkSameNUMA, nd.Server.Links[0][1].Class)

	n.Annotations = map[string]string{model.AnnotationLinks: `[["X","NV2","SYS","SYS"],["NV2","X","SYS","SYS"],["SYS","SYS","X","NV2"],["SYS","SYS","NV2","X"]]`}
	nd, err = model.ParseDRANode(n, dratest.Slices("pcie", gpus), model.NodeOptions{})
	require.NoError(t, err)
	assert.Equal(t, topology.LinkNVLink, nd.Server.Links[0][1].Class)
	g3 := gpus[3]
	g3.Host = "pcie"
	assert.Equal(t, g3.UUID(), nd.Server.GPUs[3].UUID, "the devices kept under the annotation's links")

	// No attributes to go by: links unknown.
	for i := range gpus {
		gpus[i].PCIeRoot, gpus[i].NUMA = "", -1
	}
	nd, err = model.ParseDRANode(dratest.ReadyNode("pcie", nil), dratest.Slices("pcie", gpus), model.NodeOptions{})
	require.NoError(t, err)
	assert.Nil(t, nd.Server.Links)
}

// Device taints are GPU health: NoSchedule and NoExecute make a GPU
// unhealthy, NoExecute also evicts; None (the driver's non-fatal XIDs)
// changes nothing.
func TestParseDRANodeTaints(t *testing.T) {
	gpus := dratest.Node(4, "NVIDIA H100 80GB HBM3", 80, true)
	gpus[1].Taints = []resourcev1.DeviceTaint{{Key: "gpu.nvidia.com/xid", Value: "13", Effect: resourcev1.DeviceTaintEffectNone}}
	gpus[2].Taints = []resourcev1.DeviceTaint{{Key: "gpu.nvidia.com/gpu-lost", Effect: resourcev1.DeviceTaintEffectNoSchedule}}
	gpus[3].Taints = []resourcev1.DeviceTaint{{Key: "example.com/drain", Effect: resourcev1.DeviceTaintEffectNoExecute}}
	nd, err := model.ParseDRANode(dratest.ReadyNode("h", nil), dratest.Slices("h", gpus), model.NodeOptions{})
	require.NoError(t, err)
	assert.Equal(t, []int{2, 3}, nd.Unhealthy)
	assert.Equal(t, []int{3}, nd.DRA.Evict)
	assert.Equal(t, topology.H100, nd.Server.GPUs[0].Type)
	assert.Equal(t, 81920, nd.Server.GPUs[0].MemoryMiB)
	assert.Equal(t, gpus[2].Taints, nd.DRA.Devices[2].Taints)
}

// MIG devices are types of their own; a node with only MIG devices has no
// whole GPUs.
func TestParseDRANodeMIG(t *testing.T) {
	gpus := dratest.Node(2, "NVIDIA A100-SXM4-40GB", 40, false)
	devs := []resourcev1.Device{gpus[0].Device(), dratest.MIG(gpus[1], "3g.20gb", 0), dratest.MIG(gpus[1], "1g.5gb", 1)}
	rs := []*resourcev1.ResourceSlice{dratest.Slice("m", "m", 1, 0, 1, devs...)}
	nd, err := model.ParseDRANode(dratest.ReadyNode("m", nil), rs, model.NodeOptions{})
	require.NoError(t, err)
	require.Equal(t, 1, nd.Server.NumGPUs())
	require.Len(t, nd.DRA.MIG, 2)
	assert.Equal(t, topology.GPUType("a100-40gb-1g.5gb"), nd.DRA.MIG[0].Type)
	assert.Equal(t, topology.GPUType("a100-40gb-3g.20gb"), nd.DRA.MIG[1].Type)
	assert.Equal(t, -1, nd.DRA.MIG[0].Parent, "its parent is not published whole")

	// A MIG device whose parent is published whole (as with dynamic MIG).
	devs = []resourcev1.Device{gpus[0].Device(), dratest.MIG(gpus[0], "1g.5gb", 0)}
	nd, err = model.ParseDRANode(dratest.ReadyNode("m", nil), []*resourcev1.ResourceSlice{dratest.Slice("m", "m", 1, 0, 1, devs...)}, model.NodeOptions{})
	require.NoError(t, err)
	assert.Equal(t, 0, nd.DRA.MIG[0].Parent)

	_, err = model.ParseDRANode(dratest.ReadyNode("m", nil), []*resourcev1.ResourceSlice{dratest.Slice("m", "m", 1, 0, 1, devs[1])}, model.NodeOptions{})
	assert.ErrorIs(t, err, model.ErrNoGPUs)
}

// A slice is the driver's input: what is malformed or contradictory is
// skipped with a warning naming it, never a crash or a device counted
// twice.
func TestParseDRANodeHostileSlices(t *testing.T) {
	gpus := dratest.Node(4, "NVIDIA A100-SXM4-40GB", 40, true)
	node := dratest.ReadyNode("n", nil)
	parse := func(rs ...*resourcev1.ResourceSlice) (model.Node, error) {
		return model.ParseDRANode(node, rs, model.NodeOptions{})
	}
	// A device published twice in its pool counts once.
	nd, err := parse(dratest.Slice("n", "n", 1, 0, 2, gpus[0].Device(), gpus[1].Device()), dratest.Slice("n", "n", 1, 1, 2, gpus[1].Device()))
	require.NoError(t, err)
	assert.Equal(t, 2, nd.Server.NumGPUs())
	assert.Len(t, nd.Warnings, 1)

	// A pool missing a slice is skipped until it is whole.
	_, err = parse(dratest.Slice("n", "n", 1, 0, 2, gpus[0].Device()))
	assert.ErrorIs(t, err, model.ErrNoGPUs)

	// No product, a product that is not a GPU, an unknown type: skipped.
	bad := gpus[2].Device()
	delete(bad.Attributes, model.AttrProduct)
	other := gpus[3].Device()
	v := "vfio"
	other.Attributes[model.AttrType] = resourcev1.DeviceAttribute{StringValue: &v}
	nd, err = parse(dratest.Slice("n", "n", 1, 0, 1, gpus[0].Device(), bad, other))
	require.NoError(t, err)
	assert.Equal(t, 1, nd.Server.NumGPUs())
	require.Len(t, nd.Warnings, 1)
	var fe *model.FieldError
	require.ErrorAs(t, nd.Warnings[0], &fe)
	assert.Contains(t, fe.Field, "n/gpu-2")

	// Two products on one node: refused, named.
	mixed := dratest.Node(1, "NVIDIA H100 80GB HBM3", 80, true)[0]
	mixed.Minor = 5
	_, err = parse(dratest.Slice("n", "n", 1, 0, 1, gpus[0].Device(), mixed.Device()))
	require.ErrorIs(t, err, model.ErrInvalid)
	assert.Contains(t, err.Error(), "several products")

	// Another driver's slices, slices of other nodes, nil slices: not read.
	o := dratest.Slice("n", "n", 1, 0, 1, gpus[0].Device())
	o.Spec.Driver = "tpu.example.com"
	_, err = parse(o, nil, dratest.Slice("m", "m", 1, 0, 1, gpus[0].Device()))
	assert.ErrorIs(t, err, model.ErrNoGPUs)

	// Too many slices: the rest are ignored, with a warning.
	var many []*resourcev1.ResourceSlice
	for k := range model.MaxSlicesPerNode + 5 {
		many = append(many, dratest.Slice("n", "p"+string(rune('a'+k%26))+string(rune('a'+k/26)), 1, 0, 1))
	}
	many = append(many, dratest.Slice("n", "n", 1, 0, 1, gpus[0].Device()))
	_, err = parse(many...)
	assert.ErrorIs(t, err, model.ErrNoGPUs)

	// A hostile memory capacity falls back to the product's.
	huge := gpus[0]
	huge.MemoryGiB = 1 << 20
	nd, err = parse(dratest.Slices("n", []dratest.GPU{huge})...)
	require.NoError(t, err)
	assert.Equal(t, 40960, nd.Server.GPUs[0].MemoryMiB)
}

func FuzzParseDRANode(f *testing.F) {
	seed, err := json.Marshal(dratest.Slices("n", dratest.Node(4, "NVIDIA A100-SXM4-40GB", 40, true)))
	require.NoError(f, err)
	f.Add(seed)
	gpus := dratest.Node(2, "NVIDIA A100-PCIE-40GB", 40, false)
	gpus[1].Taints = []resourcev1.DeviceTaint{{Key: "k", Effect: resourcev1.DeviceTaintEffectNoExecute}}
	seed, err = json.Marshal(append(dratest.Slices("n", gpus), dratest.Slice("n", "n", 2, 0, 1, dratest.MIG(gpus[0], "1g.5gb", 0))))
	require.NoError(f, err)
	f.Add(seed)
	f.Fuzz(func(t *testing.T, b []byte) {
		var rs []*resourcev1.ResourceSlice
		if json.Unmarshal(b, &rs) != nil {
			return
		}
		nd, err := model.ParseDRANode(dratest.ReadyNode("n", nil), rs, model.NodeOptions{})
		if err != nil {
			if !errors.Is(err, model.ErrInvalid) && !errors.Is(err, model.ErrNoGPUs) {
				t.Fatalf("untyped error %v", err)
			}
			return
		}
		if len(nd.DRA.Devices) != nd.Server.NumGPUs() || nd.Server.NumGPUs() > model.MaxGPUsPerNode {
			t.Fatalf("%d devices for %d GPUs", len(nd.DRA.Devices), nd.Server.NumGPUs())
		}
		seen := map[[2]string]bool{}
		for _, d := range nd.DRA.Devices {
			if seen[[2]string{d.Pool, d.Name}] {
				t.Fatalf("device %s/%s counted twice", d.Pool, d.Name)
			}
			seen[[2]string{d.Pool, d.Name}] = true
		}
		for _, u := range nd.Unhealthy {
			if u < 0 || u >= nd.Server.NumGPUs() {
				t.Fatalf("unhealthy position %d of %d", u, nd.Server.NumGPUs())
			}
		}
	})
}
