package dra_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/gpusched/gpusched/kube/dra"
	"github.com/gpusched/gpusched/kube/internal/dratest"
	"github.com/gpusched/gpusched/kube/model"
	"github.com/gpusched/gpusched/placement"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/dynamic-resource-allocation/structured"
)

// classes is a DeviceClassLister over a fixed list.
type classes []*resourcev1.DeviceClass

func (c classes) List() ([]*resourcev1.DeviceClass, error) { return c, nil }

func (c classes) Get(name string) (*resourcev1.DeviceClass, error) {
	for _, x := range c {
		if x.Name == name {
			return x, nil
		}
	}
	return nil, apierrors.NewNotFound(resourcev1.Resource("deviceclasses"), name)
}

// features are those of a v1.37 cluster's defaults.
var features = structured.Features{AdminAccess: true, PrioritizedList: true, DeviceTaints: true, PartitionableDevices: true}

func newAllocator() *dra.Allocator {
	return dra.New(classes{dratest.DeviceClass()}, features, placement.GPUChooser{})
}

// claim asks for n GPUs of the driver's class, with CEL selectors.
func claim(name string, n int64, sel ...string) *resourcev1.ResourceClaim {
	req := resourcev1.ExactDeviceRequest{DeviceClassName: model.DriverGPU, AllocationMode: resourcev1.DeviceAllocationModeExactCount, Count: n}
	for _, s := range sel {
		req.Selectors = append(req.Selectors, resourcev1.DeviceSelector{CEL: &resourcev1.CELDeviceSelector{Expression: s}})
	}
	return &resourcev1.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: "t", Name: name, UID: types.UID("uid-" + name)},
		Spec:       resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{{Name: "gpus", Exactly: &req}}}},
	}
}

// pcieNode is a 4-GPU PCIe server, two GPUs per socket (PHB within a
// socket, SYS across), with its slices.
func pcieNode(t *testing.T, gpus []dratest.GPU) (*corev1.Node, model.Node, []*resourcev1.ResourceSlice) {
	t.Helper()
	n := dratest.ReadyNode("p", nil)
	rs := dratest.Slices("p", gpus)
	nd, err := model.ParseDRANode(n, rs, model.NodeOptions{})
	require.NoError(t, err)
	return n, nd, rs
}

func inUse(names ...string) structured.AllocatedState {
	s := structured.AllocatedState{AllocatedDevices: sets.New[structured.DeviceID]()}
	for _, n := range names {
		s.AllocatedDevices.Insert(structured.MakeDeviceID(model.DriverGPU, "p", n))
	}
	return s
}

func devices(a resourcev1.AllocationResult) []string {
	var out []string
	for _, r := range a.Devices.Results {
		out = append(out, r.Pool+"/"+r.Device)
	}
	return out
}

// With gpu-0 in use, the first fit of two GPUs is gpu-1 and gpu-2, across
// the sockets; gpusched gives gpu-2 and gpu-3, on one PCIe root. The
// allocation is upstream's: it names the request, the driver, the pool
// and the node.
func TestAllocateChoosesTheLinkedPair(t *testing.T) {
	node, nd, rs := pcieNode(t, dratest.Node(4, "NVIDIA A100-PCIE-40GB", 40, false))
	a := newAllocator()
	st := inUse("gpu-0")
	c := claim("two", 2)
	require.NoError(t, a.Fit(context.Background(), node, nd, rs, st, []*resourcev1.ResourceClaim{c}))
	res, err := a.Allocate(context.Background(), node, nd, rs, st, []*resourcev1.ResourceClaim{c})
	require.NoError(t, err)
	assert.True(t, res.Chosen)
	assert.Equal(t, []int{2, 3}, res.GPUs)
	require.Len(t, res.Allocations, 1)
	assert.Equal(t, []string{"p/gpu-2", "p/gpu-3"}, devices(res.Allocations[0]))
	r := res.Allocations[0].Devices.Results[0]
	assert.Equal(t, "gpus", r.Request)
	assert.Equal(t, model.DriverGPU, r.Driver)
	require.NotNil(t, res.Allocations[0].NodeSelector)
	assert.Equal(t, []string{"p"}, res.Allocations[0].NodeSelector.NodeSelectorTerms[0].MatchFields[0].Values)
	assert.Equal(t, 1, st.AllocatedDevices.Len(), "the state given is not changed")
}

// A claim whose selector names one device rules the choice out: the first
// fit (upstream's answer) stands, and Chosen says so.
func TestAllocateClaimRulesTheChoiceOut(t *testing.T) {
	gpus := dratest.Node(4, "NVIDIA A100-PCIE-40GB", 40, false)
	node, nd, rs := pcieNode(t, gpus)
	for i := range gpus {
		gpus[i].Host = "p" // as the slices name them
	}
	sel := fmt.Sprintf("device.attributes[%q].uuid == %q || device.attributes[%q].uuid == %q", model.DriverGPU, gpus[1].UUID(), model.DriverGPU, gpus[2].UUID())
	res, err := newAllocator().Allocate(context.Background(), node, nd, rs, inUse("gpu-0"), []*resourcev1.ResourceClaim{claim("pinned", 2, sel)})
	require.NoError(t, err)
	assert.False(t, res.Chosen)
	assert.Equal(t, []int{1, 2}, res.GPUs)
}

// Tainted GPUs are never given, even to a claim that tolerates the
// taint; a claim larger than the healthy free GPUs does not fit.
func TestAllocateTaints(t *testing.T) {
	gpus := dratest.Node(4, "NVIDIA A100-PCIE-40GB", 40, false)
	gpus[3].Taints = []resourcev1.DeviceTaint{{Key: "gpu.nvidia.com/gpu-lost", Effect: resourcev1.DeviceTaintEffectNoSchedule}}
	node, nd, rs := pcieNode(t, gpus)
	c := claim("tolerant", 2)
	c.Spec.Devices.Requests[0].Exactly.Tolerations = []resourcev1.DeviceToleration{{Operator: resourcev1.DeviceTolerationOpExists}}
	res, err := newAllocator().Allocate(context.Background(), node, nd, rs, inUse("gpu-0"), []*resourcev1.ResourceClaim{c})
	require.NoError(t, err)
	assert.Equal(t, []int{1, 2}, res.GPUs, "gpu-3 is lost")
	err = newAllocator().Fit(context.Background(), node, nd, rs, inUse("gpu-0"), []*resourcev1.ResourceClaim{claim("three", 3)})
	assert.ErrorIs(t, err, dra.ErrUnschedulable)
}

// Bad input is typed: a CEL expression that does not compile, an unknown
// class, a node that is not a DRA node, too many claims.
func TestAllocateInvalid(t *testing.T) {
	node, nd, rs := pcieNode(t, dratest.Node(2, "NVIDIA A100-PCIE-40GB", 40, false))
	a := newAllocator()
	ctx := context.Background()
	_, err := a.Allocate(ctx, node, nd, rs, inUse(), []*resourcev1.ResourceClaim{claim("bad", 1, "device.attributes[")})
	assert.ErrorIs(t, err, dra.ErrInvalid)
	c := claim("nocls", 1)
	c.Spec.Devices.Requests[0].Exactly.DeviceClassName = "no-such-class"
	_, err = a.Allocate(ctx, node, nd, rs, inUse(), []*resourcev1.ResourceClaim{c})
	assert.ErrorIs(t, err, dra.ErrInvalid)
	plain := nd
	plain.DRA = nil
	_, err = a.Allocate(ctx, node, plain, rs, inUse(), []*resourcev1.ResourceClaim{claim("x", 1)})
	assert.ErrorIs(t, err, dra.ErrInvalid)
	many := make([]*resourcev1.ResourceClaim, dra.MaxClaims+1)
	for i := range many {
		many[i] = claim(fmt.Sprint("c", i), 0)
	}
	_, err = a.Allocate(ctx, node, nd, rs, inUse(), many)
	assert.ErrorIs(t, err, dra.ErrInvalid)
}

// On an HGX (one NVSwitch fabric) every set is as good: the first fit is
// gpusched's choice too, and two claims of one pod get distinct GPUs.
func TestAllocateTwoClaims(t *testing.T) {
	node := dratest.ReadyNode("p", nil)
	rs := dratest.Slices("p", dratest.Node(8, "NVIDIA H100 80GB HBM3", 80, true))
	nd, err := model.ParseDRANode(node, rs, model.NodeOptions{})
	require.NoError(t, err)
	res, err := newAllocator().Allocate(context.Background(), node, nd, rs, inUse("gpu-1"), []*resourcev1.ResourceClaim{claim("a", 2), claim("b", 3)})
	require.NoError(t, err)
	assert.True(t, res.Chosen)
	assert.Len(t, res.GPUs, 5)
	assert.NotContains(t, res.GPUs, 1)
	all := append(devices(res.Allocations[0]), devices(res.Allocations[1])...)
	assert.Len(t, sets.New(all...), 5, "no device given twice")
}

// One Allocator serves concurrent scheduling goroutines (run under -race).
func TestAllocateConcurrent(t *testing.T) {
	node, nd, rs := pcieNode(t, dratest.Node(4, "NVIDIA A100-PCIE-40GB", 40, false))
	a := newAllocator()
	done := make(chan []int)
	for range 8 {
		go func() {
			res, err := a.Allocate(context.Background(), node, nd, rs, inUse("gpu-0"), []*resourcev1.ResourceClaim{claim("two", 2)})
			assert.NoError(t, err)
			done <- res.GPUs
		}()
	}
	for range 8 {
		assert.Equal(t, []int{2, 3}, <-done)
	}
}

// A request with admin access (monitoring: the API server allows it only
// in namespaces the admin labels) may see devices in use; it takes none,
// so none is counted as the pod's.
func TestAllocateAdminAccess(t *testing.T) {
	node, nd, rs := pcieNode(t, dratest.Node(2, "NVIDIA A100-PCIE-40GB", 40, false))
	c := claim("monitor", 2)
	admin := true
	c.Spec.Devices.Requests[0].Exactly.AdminAccess = &admin
	res, err := newAllocator().Allocate(context.Background(), node, nd, rs, inUse("gpu-0", "gpu-1"), []*resourcev1.ResourceClaim{c})
	require.NoError(t, err)
	assert.Empty(t, res.GPUs)
	assert.Len(t, res.Allocations[0].Devices.Results, 2, "both GPUs, in use by others, seen")
}

// A device of the driver that the node's model left out (here: no
// product) is never given, even to a claim whose selector asks for it.
func TestAllocateHidesUnreadDevices(t *testing.T) {
	gpus := dratest.Node(2, "NVIDIA A100-PCIE-40GB", 40, false)
	n := dratest.ReadyNode("p", nil)
	devs := dratest.Devices("p", gpus)
	bad := dratest.Devices("p", dratest.Node(3, "NVIDIA A100-PCIE-40GB", 40, false))[2]
	delete(bad.Attributes, model.AttrProduct)
	rs := []*resourcev1.ResourceSlice{dratest.Slice("p", "p", 1, 0, 1, append(devs, bad)...)}
	nd, err := model.ParseDRANode(n, rs, model.NodeOptions{})
	require.NoError(t, err)
	require.Len(t, nd.DRA.Devices, 2)
	err = newAllocator().Fit(context.Background(), n, nd, rs, inUse("gpu-0", "gpu-1"), []*resourcev1.ResourceClaim{claim("unread", 1)})
	assert.ErrorIs(t, err, dra.ErrUnschedulable, "gpu-2, unread, is not given")
}
