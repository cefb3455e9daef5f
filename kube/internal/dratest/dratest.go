// Package dratest makes ResourceSlices and DeviceClasses in the schema of
// NVIDIA's DRA driver for GPUs (kubernetes-sigs/dra-driver-nvidia-gpu:
// its kubelet plugin's device info for the devices, the chart's
// templates/deviceclass-gpu.yaml for the class), for tests: of the parsers,
// of the scheduler plugin and of the end-to-end test driver that publishes
// them as the driver would. Its functions return new values; they are safe
// for concurrent use.
package dratest

import (
	"fmt"

	"github.com/gpusched/gpusched/kube/model"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// GPU is one whole GPU as the driver would publish it. It is a value:
// safe for concurrent reads.
type GPU struct {
	// Minor is the device's minor number: the device is named gpu-<Minor>.
	Minor int
	// Product is NVML's product name, e.g. "NVIDIA A100-SXM4-40GB".
	Product string
	// MemoryGiB is its memory; 0 publishes no memory capacity.
	MemoryGiB int
	// PCIeRoot ("pci0000:00") and NUMA (-1: not published) place it on the
	// host.
	PCIeRoot string
	NUMA     int
	// Module is its Fabric Manager module (gpuModuleId); 0: not published.
	Module int
	// Taints are its device taints.
	Taints []resourcev1.DeviceTaint
	// Host is the node it is in, part of its UUID (a UUID is unique in a
	// cluster); Slices sets it.
	Host string
}

// Name is the device's name in its pool.
func (g GPU) Name() string { return fmt.Sprintf("gpu-%d", g.Minor) }

// UUID is the device's made-up UUID.
func (g GPU) UUID() string {
	return fmt.Sprintf("GPU-%08d-0000-0000-0000-%012x", g.Minor, fnv32(g.Host))
}

func fnv32(s string) uint32 {
	h := uint32(2166136261)
	for i := range len(s) {
		h = (h ^ uint32(s[i])) * 16777619
	}
	return h
}

func str(s string) resourcev1.DeviceAttribute { return resourcev1.DeviceAttribute{StringValue: &s} }
func integer(v int) resourcev1.DeviceAttribute {
	i := int64(v)
	return resourcev1.DeviceAttribute{IntValue: &i}
}

// Device returns the GPU as a ResourceSlice device.
func (g GPU) Device() resourcev1.Device {
	d := resourcev1.Device{
		Name: g.Name(),
		Attributes: map[resourcev1.QualifiedName]resourcev1.DeviceAttribute{
			model.AttrType:          str(model.DeviceTypeGPU),
			model.AttrUUID:          str(g.UUID()),
			model.AttrProduct:       str(g.Product),
			"brand":                 str("Nvidia"),
			"architecture":          str("Ampere"),
			"cudaComputeCapability": {VersionValue: ptr.To("8.0.0")},
			"driverVersion":         {VersionValue: ptr.To("580.65.6")},
			model.AttrPCIBusID:      str(fmt.Sprintf("0000:%02x:00.0", 0x10+g.Minor)),
		},
		Taints: g.Taints,
	}
	if g.PCIeRoot != "" {
		d.Attributes[model.AttrPCIeRoot] = str(g.PCIeRoot)
	}
	if g.NUMA >= 0 {
		d.Attributes[model.AttrNUMANode] = integer(g.NUMA)
	}
	if g.Module > 0 {
		d.Attributes[model.AttrGPUModule] = integer(g.Module)
	}
	if g.MemoryGiB > 0 {
		d.Capacity = map[resourcev1.QualifiedName]resourcev1.DeviceCapacity{
			model.CapacityMemory: {Value: *resource.NewQuantity(int64(g.MemoryGiB)<<30, resource.BinarySI)},
		}
	}
	return d
}

// MIG returns a MIG device of profile carved from parent, numbered k.
func MIG(parent GPU, profile string, k int) resourcev1.Device {
	return resourcev1.Device{
		Name: fmt.Sprintf("gpu-%d-mig-%s-%d", parent.Minor, profile, k),
		Attributes: map[resourcev1.QualifiedName]resourcev1.DeviceAttribute{
			model.AttrType:       str(model.DeviceTypeMIG),
			model.AttrUUID:       str(fmt.Sprintf("MIG-%08d-%04d", parent.Minor, k)),
			model.AttrProduct:    str(parent.Product),
			model.AttrProfile:    str(profile),
			model.AttrParentUUID: str(parent.UUID()),
		},
	}
}

// Node returns n GPUs of one product, minors 0..n-1: all in one Fabric
// Manager fabric when nvswitch, else half on each of two PCIe roots and
// NUMA nodes.
func Node(n int, product string, memGiB int, nvswitch bool) []GPU {
	gs := make([]GPU, n)
	for i := range gs {
		gs[i] = GPU{Minor: i, Product: product, MemoryGiB: memGiB, NUMA: 2 * i / max(n, 1),
			PCIeRoot: fmt.Sprintf("pci0000:%02x", 0x40*(2*i/max(n, 1)))}
		if nvswitch {
			gs[i].Module = i + 1
		}
	}
	return gs
}

// Slice returns slice k of count of pool's generation gen, for node, with
// devices.
func Slice(node, pool string, gen, k, count int64, devs ...resourcev1.Device) *resourcev1.ResourceSlice {
	return &resourcev1.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%s-%d-%d", node, pool, gen, k)},
		Spec: resourcev1.ResourceSliceSpec{
			Driver:   model.DriverGPU,
			Pool:     resourcev1.ResourcePool{Name: pool, Generation: gen, ResourceSliceCount: count},
			NodeName: &node,
			Devices:  devs,
		},
	}
}

// Slices returns node's GPUs as the driver publishes them: one pool named
// after the node, generation 1, one slice.
func Slices(node string, gpus []GPU) []*resourcev1.ResourceSlice {
	return []*resourcev1.ResourceSlice{Slice(node, node, 1, 0, 1, Devices(node, gpus)...)}
}

// Devices returns node's GPUs as slice devices (their Host set to node).
func Devices(node string, gpus []GPU) []resourcev1.Device {
	devs := make([]resourcev1.Device, len(gpus))
	for i, g := range gpus {
		g.Host = node
		devs[i] = g.Device()
	}
	return devs
}

// DeviceClass returns the chart's DeviceClass for whole GPUs: named after
// the driver, selecting its devices of type gpu, mapped to the extended
// resource nvidia.com/gpu (KEP-5004).
func DeviceClass() *resourcev1.DeviceClass {
	ext := string(model.ResourceGPU)
	return &resourcev1.DeviceClass{
		ObjectMeta: metav1.ObjectMeta{Name: model.DriverGPU},
		Spec: resourcev1.DeviceClassSpec{
			Selectors: []resourcev1.DeviceSelector{{CEL: &resourcev1.CELDeviceSelector{
				Expression: fmt.Sprintf("device.driver == %q && device.attributes[%q].type == %q", model.DriverGPU, model.DriverGPU, model.DeviceTypeGPU),
			}}},
			ExtendedResourceName: &ext,
		},
	}
}

// ReadyNode returns a Ready node of that name with no GPU resources (its
// GPUs are DRA devices) and the given labels.
func ReadyNode(name string, labels map[string]string) *corev1.Node {
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Status: corev1.NodeStatus{
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
		},
	}
}
