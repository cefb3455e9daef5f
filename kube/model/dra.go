package model

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/gpusched/gpusched/topology"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
)

// The schema of NVIDIA's DRA driver for GPUs (kubernetes-sigs'
// dra-driver-nvidia-gpu, its kubelet plugin's device info): one pool
// per node, devices named gpu-<minor> with these attributes and capacity.
// Unqualified names live in the driver's domain (in CEL,
// device.attributes["gpu.nvidia.com"].productName).
const (
	// DriverGPU is the driver's name, and the name of the DeviceClass its
	// chart installs for whole GPUs (with extendedResourceName
	// nvidia.com/gpu).
	DriverGPU = "gpu.nvidia.com"
	// DeviceTypeGPU and DeviceTypeMIG are the values of AttrType for a
	// whole GPU and a MIG device.
	DeviceTypeGPU = "gpu"
	DeviceTypeMIG = "mig"
	// AttrType, AttrProduct, AttrUUID, AttrProfile, AttrParentUUID and
	// AttrGPUModule are the driver's attributes: the device's type, its
	// product ("NVIDIA A100-SXM4-40GB"), its UUID, a MIG device's profile
	// ("1g.5gb") and parent GPU, and the NVSwitch module a GPU sits in
	// (published with Fabric Manager partitioning).
	AttrType       = "type"
	AttrProduct    = "productName"
	AttrUUID       = "uuid"
	AttrProfile    = "profile"
	AttrParentUUID = "parentUUID"
	AttrGPUModule  = "gpuModuleId"
	// AttrPCIeRoot, AttrPCIBusID and AttrNUMANode are Kubernetes' standard
	// attributes (k8s.io/dynamic-resource-allocation/deviceattribute).
	AttrPCIeRoot = "resource.kubernetes.io/pcieRoot"
	AttrPCIBusID = "resource.kubernetes.io/pciBusID"
	AttrNUMANode = "resource.kubernetes.io/numaNode"
	// CapacityMemory is a device's memory, in bytes.
	CapacityMemory = "memory"
	// MaxSlicesPerNode bounds the ResourceSlices of one node that
	// ParseDRANode reads; MaxMIGPerNode bounds its MIG devices.
	MaxSlicesPerNode = 64
	MaxMIGPerNode    = 8 * MaxGPUsPerNode
)

// Device is a GPU a DRA driver publishes: where it is published and what
// the scheduler writes in a claim's allocation to give it. It is a value:
// safe for concurrent reads.
type Device struct {
	// Pool and Name name the device in the driver's ResourceSlices (and
	// in a claim's status.allocation).
	Pool, Name string
	// Taints are the device's taints, as the driver or a DeviceTaintRule
	// set them.
	Taints []resourcev1.DeviceTaint
}

// MIGDevice is a MIG device a DRA driver publishes: a GPU type of its own.
// It is a value: safe for concurrent reads.
type MIGDevice struct {
	Device
	// Type is the MIG device's type (topology.MIGSliceType), e.g.
	// "a100-40gb-1g.5gb".
	Type topology.GPUType
	// Parent is the position of the GPU it is carved from in
	// Node.Server.GPUs, or -1 when its parent is not published whole.
	Parent int

	parent string // the parent's UUID, while reading
}

// DRA is what a node's ResourceSlices tell: its whole GPUs by position in
// Node.Server.GPUs, its MIG devices, the devices that a NoExecute taint
// evicts from. It is a value: safe for concurrent reads.
type DRA struct {
	// Driver is the driver that published the devices.
	Driver string
	// Devices are the whole GPUs, Devices[i] being Server.GPUs[i].
	Devices []Device
	// MIG are the MIG devices, by name.
	MIG []MIGDevice
	// Evict holds the positions of whole GPUs with a NoExecute taint,
	// ascending: their pods are to stop (Node.Unhealthy holds them too).
	Evict []int
}

// driver returns the DRA driver whose slices are read.
func (o NodeOptions) driver() string {
	return cmp.Or(o.Driver, DriverGPU)
}

// draGPU is a whole GPU read from a slice, before it is given a position.
type draGPU struct {
	dev     Device
	minor   int // from the name gpu-<minor>, else -1
	product topology.Product
	memMiB  int
	uuid    string
	busID   string
	root    string
	numa    int
	module  int64
}

// ParseDRANode reads a node whose GPUs a DRA driver publishes
// (NodeOptions.Driver, gpu.nvidia.com by default) in ResourceSlices: the
// slices given may be all the cluster's; those of the node's pools are
// read, each pool at its newest generation. The GPU type comes from each
// device's productName, the memory from its capacity, the positions follow
// the device's minor number (gpu-<minor>), health from the device taints
// (a NoSchedule or NoExecute taint makes a GPU unhealthy; NoExecute also
// lists it in DRA.Evict), links from the node's link annotation where
// there is one, else from the attributes: NVSwitch for GPUs of one Fabric
// Manager fabric (gpuModuleId), else the PCIe root and NUMA node (PHB,
// NODE, SYS), else unknown. Rack, domain and readiness come from the node
// as ParseNode reads them.
//
// A slice is the driver's input, read as untrusted: a device of the
// wrong shape (no product, a duplicate name, an unknown type) is skipped
// with a warning, and so are slices beyond MaxSlicesPerNode and pools
// published only in part. A node with no whole GPU in its slices (MIG
// only, or none) returns an error wrapping ErrNoGPUs; one whose GPUs are of
// several products, a *FieldError wrapping ErrInvalid.
func ParseDRANode(n *corev1.Node, rs []*resourcev1.ResourceSlice, o NodeOptions) (Node, error) {
	var nd Node
	if n == nil {
		return nd, fmt.Errorf("model: nil node")
	}
	gpus, migs, warn := readSlices(n.Name, rs, o.driver())
	nd.Warnings = warn
	if len(gpus) == 0 {
		return nd, &FieldError{Field: "ResourceSlices of driver " + o.driver(), Value: n.Name,
			Msg: fmt.Sprintf("no whole GPUs published (%d MIG devices)", len(migs)), Err: ErrNoGPUs}
	}
	if len(gpus) > MaxGPUsPerNode {
		return nd, fieldErr("ResourceSlices of driver "+o.driver(), n.Name, nil, "%d GPUs, more than %d", len(gpus), MaxGPUsPerNode)
	}
	spec, err := draServer(n.Name, gpus, o.driver())
	if err != nil {
		return nd, err
	}
	s, err := buildServer(spec)
	if err != nil {
		return nd, fieldErr("ResourceSlices of driver "+o.driver(), n.Name, err, "GPUs of type %q", spec.Devices[0].Type)
	}
	if v, ok := n.Annotations[AnnotationLinks]; ok {
		base := topology.ServerSpec{ID: n.Name, GPUType: spec.Devices[0].Type, GPUs: len(gpus), MemoryMiB: spec.Devices[0].MemoryMiB}
		if ls, werr := linkedServer(v, base); werr != nil {
			nd.Warnings = append(nd.Warnings, werr)
		} else {
			ls.GPUs = s.GPUs // the devices' indices, UUIDs and NUMA nodes
			s = ls
		}
	}
	applyNodeLabels(&s, n, o)
	nd.Server, nd.Ready, nd.Allocatable = s, nodeReady(n), len(gpus)
	dra := &DRA{Driver: o.driver(), MIG: migParents(migs, gpus)}
	for i, g := range gpus {
		dra.Devices = append(dra.Devices, g.dev)
		sched, exec := taintEffects(g.dev.Taints)
		if sched || exec {
			nd.Unhealthy = append(nd.Unhealthy, i)
		}
		if exec {
			dra.Evict = append(dra.Evict, i)
		}
	}
	nd.DRA = dra
	return nd, nil
}

// draServer orders a node's GPUs by minor number and returns them as a
// server's spec, with the links their attributes give; GPUs of several
// products are an error.
func draServer(node string, gpus []draGPU, driver string) (topology.ServerSpec, error) {
	slices.SortFunc(gpus, func(a, b draGPU) int {
		return cmp.Or(cmp.Compare(a.minor, b.minor), strings.Compare(a.dev.Pool, b.dev.Pool), strings.Compare(a.dev.Name, b.dev.Name))
	})
	typ, mem := gpus[0].product.Type, 0
	spec := topology.ServerSpec{ID: node, Links: draLinks(gpus)}
	seen := map[int]bool{}
	for i, g := range gpus {
		if g.product.Type != typ {
			return spec, fieldErr("ResourceSlices of driver "+driver, node, nil,
				"GPUs of several products on one node (%s and %s); gpusched's server has one GPU type", typ, g.product.Type)
		}
		if m := cmp.Or(g.memMiB, g.product.MemoryMiB); mem == 0 || (m > 0 && m < mem) {
			mem = m
		}
		idx := g.minor
		if idx < 0 || seen[idx] {
			idx = MaxGPUsPerNode*8 + i // no minor: after those that have one
		}
		seen[idx] = true
		d := topology.DeviceSpec{Index: &idx, Type: string(typ), UUID: g.uuid, PCIBusID: g.busID}
		if g.numa >= 0 {
			d.NUMANode = &g.numa
		}
		spec.Devices = append(spec.Devices, d)
	}
	for i := range spec.Devices {
		spec.Devices[i].MemoryMiB = mem // one memory per server: the least
	}
	return spec, nil
}

// applyNodeLabels sets a server's rack and NVLink domain from its node's
// labels.
func applyNodeLabels(s *topology.Server, n *corev1.Node, o NodeOptions) {
	if v := n.Labels[cmp.Or(o.RackLabel, LabelRack)]; v != "" {
		s.Rack = v
	}
	if v := n.Labels[cmp.Or(o.DomainLabel, LabelClique)]; v != "" {
		s.Domain = v
	}
}

// taintEffects reports whether taints hold a NoSchedule and a NoExecute
// taint.
func taintEffects(ts []resourcev1.DeviceTaint) (noSchedule, noExecute bool) {
	for _, t := range ts {
		switch t.Effect {
		case resourcev1.DeviceTaintEffectNoSchedule:
			noSchedule = true
		case resourcev1.DeviceTaintEffectNoExecute:
			noExecute = true
		}
	}
	return noSchedule, noExecute
}

// readSlices reads the whole GPUs and MIG devices of node's pools from the
// driver's slices: per pool the newest generation only, a pool missing some
// of its slices skipped, bad devices skipped; what was skipped is warned
// of.
func readSlices(node string, rs []*resourcev1.ResourceSlice, driver string) ([]draGPU, []MIGDevice, []error) {
	pools, warn := newestPools(node, rs, driver)
	names := slices.Sorted(maps.Keys(pools))
	var gpus []draGPU
	var migs []MIGDevice
	for _, name := range names {
		p := pools[name]
		if int64(len(p.slices)) != p.count {
			warn = append(warn, fieldErr("ResourceSlices of driver "+driver, name, nil,
				"pool generation %d has %d of its %d slices; skipped until it is whole", p.gen, len(p.slices), p.count))
			continue
		}
		seen := map[string]bool{}
		for _, s := range p.slices {
			for i := range s.Spec.Devices {
				d := &s.Spec.Devices[i]
				if seen[d.Name] {
					warn = append(warn, fieldErr("ResourceSlices of driver "+driver, name+"/"+d.Name, nil, "device published twice in its pool; the second is ignored"))
					continue
				}
				seen[d.Name] = true
				g, m, err := readDevice(name, d, driver)
				switch {
				case err != nil:
					warn = append(warn, err)
				case m != nil && len(migs) < MaxMIGPerNode:
					migs = append(migs, *m)
				case g != nil && len(gpus) <= MaxGPUsPerNode:
					gpus = append(gpus, *g)
				}
			}
		}
	}
	return gpus, migs, warn
}

// slicePool is the newest generation of one pool seen so far.
type slicePool struct {
	gen, count int64
	slices     []*resourcev1.ResourceSlice
}

// newestPools groups the driver's slices of node by pool, keeping each
// pool's newest generation, at most MaxSlicesPerNode slices in all.
func newestPools(node string, rs []*resourcev1.ResourceSlice, driver string) (map[string]*slicePool, []error) {
	var warn []error
	pools := map[string]*slicePool{}
	n := 0
	for _, s := range rs {
		if s == nil || s.Spec.Driver != driver || s.Spec.NodeName == nil || *s.Spec.NodeName != node {
			continue
		}
		if n++; n > MaxSlicesPerNode {
			warn = append(warn, fieldErr("ResourceSlices of driver "+driver, node, nil, "more than %d slices for the node; the rest are ignored", MaxSlicesPerNode))
			break
		}
		p := pools[s.Spec.Pool.Name]
		switch {
		case p == nil || s.Spec.Pool.Generation > p.gen:
			p = &slicePool{gen: s.Spec.Pool.Generation}
			pools[s.Spec.Pool.Name] = p
		case s.Spec.Pool.Generation < p.gen:
			continue
		}
		p.count = s.Spec.Pool.ResourceSliceCount
		p.slices = append(p.slices, s)
	}
	return pools, warn
}

// deviceAttrs reads a device's attributes, unqualified names first, then
// in the driver's domain.
type deviceAttrs struct {
	d      *resourcev1.Device
	driver string
}

func (a deviceAttrs) get(k string) resourcev1.DeviceAttribute {
	if v, ok := a.d.Attributes[resourcev1.QualifiedName(k)]; ok {
		return v
	}
	return a.d.Attributes[resourcev1.QualifiedName(a.driver+"/"+k)]
}

func (a deviceAttrs) str(k string) string {
	if v := a.get(k).StringValue; v != nil {
		return *v
	}
	return ""
}

// readDevice reads one device of pool: a whole GPU, a MIG device, or
// neither (another type: nil, nil, nil).
func readDevice(pool string, d *resourcev1.Device, driver string) (*draGPU, *MIGDevice, error) {
	field := "device " + pool + "/" + d.Name
	a := deviceAttrs{d, driver}
	typ := a.str(AttrType)
	if typ != DeviceTypeGPU && typ != DeviceTypeMIG {
		return nil, nil, nil
	}
	p, err := topology.ParseProduct(a.str(AttrProduct))
	if err != nil {
		return nil, nil, fieldErr(field, a.str(AttrProduct), err, "attribute %s is not a GPU product", AttrProduct)
	}
	dev := Device{Pool: pool, Name: d.Name, Taints: d.Taints}
	if typ == DeviceTypeMIG {
		prof := a.str(AttrProfile)
		mp, err := topology.MIGProductFor(p.Type, p.MemoryMiB)
		if err == nil {
			_, err = mp.Profile(prof)
		}
		if err != nil {
			return nil, nil, fieldErr(field, prof, err, "attribute %s is not a MIG profile of %s", AttrProfile, a.str(AttrProduct))
		}
		return nil, &MIGDevice{Device: dev, Type: topology.MIGSliceType(mp, prof), Parent: -1, parent: a.str(AttrParentUUID)}, nil
	}
	return readGPU(dev, p, a), nil, nil
}

// readGPU reads a whole GPU's minor number, host placement, module and
// memory; what is out of range is left unknown.
func readGPU(dev Device, p topology.Product, a deviceAttrs) *draGPU {
	g := &draGPU{dev: dev, minor: -1, product: p, uuid: a.str(AttrUUID), busID: a.str(AttrPCIBusID), root: a.str(AttrPCIeRoot), numa: -1}
	if m, ok := strings.CutPrefix(dev.Name, "gpu-"); ok {
		if v, err := strconv.Atoi(m); err == nil && v >= 0 && v < MaxGPUsPerNode*8 {
			g.minor = v
		}
	}
	if v := a.get(AttrNUMANode).IntValue; v != nil && *v >= 0 && *v < 1<<10 {
		g.numa = int(*v)
	}
	if v := a.get(AttrGPUModule).IntValue; v != nil && *v > 0 {
		g.module = *v
	}
	if q, ok := a.d.Capacity[CapacityMemory]; ok {
		// AsInt64, not Value: a quantity of a huge exponent (1e999999999)
		// would be computed in full.
		if b, ok := q.Value.AsInt64(); ok && b >= 1<<20 && b <= 1<<44 {
			g.memMiB = int(b >> 20)
		}
	}
	return g
}

// draLinks derives a link matrix from the GPUs' attributes: NVSwitch
// between GPUs that all sit in Fabric Manager modules, else the PCIe root
// and NUMA node when every GPU has both, else nil (unknown).
func draLinks(gpus []draGPU) [][]string {
	if len(gpus) < 2 {
		return nil
	}
	fabric, pcie := true, true
	for _, g := range gpus {
		fabric = fabric && g.module > 0
		pcie = pcie && g.root != "" && g.numa >= 0
	}
	if !fabric && !pcie {
		return nil
	}
	m := make([][]string, len(gpus))
	for i, a := range gpus {
		m[i] = make([]string, len(gpus))
		for j, b := range gpus {
			switch {
			case i == j:
				m[i][j] = "X"
			case fabric:
				m[i][j] = "NVS"
			case a.root == b.root:
				m[i][j] = "PHB"
			case a.numa == b.numa:
				m[i][j] = "NODE"
			default:
				m[i][j] = "SYS"
			}
		}
	}
	return m
}

// migParents sets each MIG device's parent position from its parent's
// UUID.
func migParents(migs []MIGDevice, gpus []draGPU) []MIGDevice {
	for i := range migs {
		for k, g := range gpus {
			if g.uuid != "" && g.uuid == migs[i].parent {
				migs[i].Parent = k
			}
		}
		migs[i].parent = ""
	}
	slices.SortFunc(migs, func(a, b MIGDevice) int {
		return cmp.Or(strings.Compare(a.Pool, b.Pool), strings.Compare(a.Name, b.Name))
	})
	return migs
}
