package model

import (
	"errors"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/gpusched/gpusched/topology"
	corev1 "k8s.io/api/core/v1"
)

// Labels, annotations and the resource read from nodes.
const (
	// ResourceGPU is the extended resource of whole NVIDIA GPUs.
	ResourceGPU corev1.ResourceName = "nvidia.com/gpu"
	// LabelProduct, LabelCount, LabelMemory and LabelClique are GPU feature
	// discovery's labels: the product name, the GPUs on the node, the MiB of
	// each, and the multi-node NVLink domain (clique).
	LabelProduct = "nvidia.com/gpu.product"
	LabelCount   = "nvidia.com/gpu.count"
	LabelMemory  = "nvidia.com/gpu.memory"
	LabelClique  = "nvidia.com/gpu.clique"
	// LabelRack is the default label of a node's rack.
	LabelRack = "gpusched.io/rack"
	// AnnotationLinks holds the node's GPU link matrix (see ParseLinks).
	AnnotationLinks = "gpusched.io/gpu-links"
	// AnnotationUnhealthy lists the NVML indices of the node's failed GPUs.
	AnnotationUnhealthy = "gpusched.io/unhealthy-gpus"
)

// NodeOptions says where ParseNode finds what has no standard place. The
// zero value takes the defaults. It is a value: safe for concurrent reads,
// not for concurrent writes.
type NodeOptions struct {
	// Resource is the extended resource of whole GPUs; "" means
	// ResourceGPU.
	Resource corev1.ResourceName
	// RackLabel is the label naming the rack; "" means LabelRack.
	RackLabel string
	// DomainLabel is the label naming the NVLink domain; "" means
	// LabelClique.
	DomainLabel string
	// Driver is the DRA driver whose ResourceSlices ParseDRANode reads;
	// "" means DriverGPU.
	Driver string
}

func (o NodeOptions) resource() corev1.ResourceName {
	if o.Resource == "" {
		return ResourceGPU
	}
	return o.Resource
}

// Node is what a Kubernetes node tells gpusched. ParseNode returns a new
// one each time; it is safe for concurrent reads, not for concurrent writes.
type Node struct {
	// Server is the node as a server of the cluster model, named after the
	// node, GPU positions in the order of their NVML indices (0, 1, ...).
	// Links is nil when the node carries no usable link annotation.
	Server topology.Server
	// Ready reports that the node's Ready condition is True.
	Ready bool
	// Unhealthy holds the positions of GPUs that AnnotationUnhealthy marks
	// failed, ascending.
	Unhealthy []int
	// Allocatable is the node's allocatable GPUs (status.allocatable of the
	// GPU resource, at most the GPU count), which the device plugin lowers
	// for the devices it finds unhealthy without saying which; -1 when the
	// node does not say.
	Allocatable int
	// Warnings are problems in the node's labels or annotations that
	// ParseNode worked around (a link annotation that does not parse or
	// validate is ignored, so the links are unknown; a bad memory label
	// falls back to the product's memory; a bad unhealthy annotation is
	// ignored). Each is a *FieldError wrapping ErrInvalid.
	Warnings []error
	// DRA is what the node's ResourceSlices publish (ParseDRANode); nil
	// for a node whose GPUs a device plugin serves.
	DRA *DRA
}

// ParseNode reads a node. It returns an error wrapping ErrNoGPUs for a node
// without whole GPUs (no GPU count label and no GPU capacity, or a MIG
// product), and a *FieldError wrapping ErrInvalid when the GPU count or the
// product cannot be read; other bad input becomes a warning.
func ParseNode(n *corev1.Node, o NodeOptions) (Node, error) {
	var nd Node
	if n == nil {
		return nd, errors.New("model: nil node")
	}
	count, err := nodeGPUCount(n, o.resource())
	if err != nil {
		return nd, err
	}
	typ := topology.GPUType("unknown")
	mem := 0
	if v, ok := n.Labels[LabelProduct]; ok {
		p, err := topology.ParseProduct(v)
		if err != nil {
			return nd, fieldErr("label "+LabelProduct, v, err, "not a GPU product name")
		}
		if p.MIGProfile != "" {
			return nd, &FieldError{Field: "label " + LabelProduct, Value: v, Msg: "MIG devices are not whole GPUs", Err: ErrNoGPUs}
		}
		typ, mem = p.Type, p.MemoryMiB
	}
	if v, ok := n.Labels[LabelMemory]; ok {
		m, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil || m < 1 || m > 1<<24 {
			nd.Warnings = append(nd.Warnings, fieldErr("label "+LabelMemory, v, nil, "want MiB from 1 to %d; using the product's memory", 1<<24))
		} else {
			mem = m
		}
	}
	base := topology.ServerSpec{ID: n.Name, GPUType: string(typ), GPUs: count, MemoryMiB: mem}
	s, err := buildServer(base)
	if err != nil {
		return nd, fieldErr("node", n.Name, err, "GPUs of type %q", typ)
	}
	s.Links = nil // unknown until the annotation says
	if v, ok := n.Annotations[AnnotationLinks]; ok {
		ls, werr := linkedServer(v, base)
		if werr != nil {
			nd.Warnings = append(nd.Warnings, werr)
		} else {
			s = ls
		}
	}
	rack := o.RackLabel
	if rack == "" {
		rack = LabelRack
	}
	domain := o.DomainLabel
	if domain == "" {
		domain = LabelClique
	}
	if v := n.Labels[rack]; v != "" {
		s.Rack = v
	}
	if v := n.Labels[domain]; v != "" {
		s.Domain = v
	}
	nd.Server = s
	nd.Ready = nodeReady(n)
	nd.Allocatable = -1
	if q, ok := n.Status.Allocatable[o.resource()]; ok {
		if v := q.Value(); v < 0 || q.MilliValue()%1000 != 0 {
			nd.Warnings = append(nd.Warnings, fieldErr("allocatable "+string(o.resource()), q.String(), nil, "want whole GPUs; ignored"))
		} else {
			nd.Allocatable = int(min(v, int64(count)))
		}
	}
	if v, ok := n.Annotations[AnnotationUnhealthy]; ok {
		idx, err := ParseIndices(AnnotationUnhealthy, v)
		if err == nil {
			nd.Unhealthy, err = positions(&s, idx)
		}
		if err != nil {
			nd.Warnings = append(nd.Warnings, err)
			nd.Unhealthy = nil
		}
	}
	return nd, nil
}

// SameNode reports whether ParseNode reads the same from a and b: the
// same name, labels, link and unhealthy annotations, GPU capacity and
// allocatable, Ready condition and cordon. A node's status updates (a
// kubelet's heartbeat times, its images, its other resources) then cost
// a follower nothing. Either being nil gives false.
func SameNode(a, b *corev1.Node, o NodeOptions) bool {
	if a == nil || b == nil {
		return false
	}
	res := o.resource()
	return a.Name == b.Name &&
		a.Spec.Unschedulable == b.Spec.Unschedulable &&
		nodeReady(a) == nodeReady(b) &&
		maps.Equal(a.Labels, b.Labels) &&
		sameValue(a.Annotations, b.Annotations, AnnotationLinks) &&
		sameValue(a.Annotations, b.Annotations, AnnotationUnhealthy) &&
		sameQuantity(a.Status.Capacity, b.Status.Capacity, res) &&
		sameQuantity(a.Status.Allocatable, b.Status.Allocatable, res)
}

func sameValue(a, b map[string]string, k string) bool {
	va, oka := a[k]
	vb, okb := b[k]
	return oka == okb && va == vb
}

func sameQuantity(a, b corev1.ResourceList, r corev1.ResourceName) bool {
	qa, oka := a[r]
	qb, okb := b[r]
	// Cmp and the unit: ParseNode's warnings quote the quantity's text.
	return oka == okb && qa.Cmp(qb) == 0 && qa.Format == qb.Format
}

// nodeGPUCount reads the GPU count label, else the GPU capacity.
func nodeGPUCount(n *corev1.Node, res corev1.ResourceName) (int, error) {
	if v, ok := n.Labels[LabelCount]; ok {
		c, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil || c < 0 || c > MaxGPUsPerNode {
			return 0, fieldErr("label "+LabelCount, v, nil, "want a count from 0 to %d", MaxGPUsPerNode)
		}
		if c == 0 {
			return 0, &FieldError{Field: "label " + LabelCount, Value: v, Msg: "no GPUs", Err: ErrNoGPUs}
		}
		return c, nil
	}
	q, ok := n.Status.Capacity[res]
	if !ok || q.Value() <= 0 {
		return 0, &FieldError{Field: "node", Value: n.Name, Msg: "neither label " + LabelCount + " nor capacity " + string(res), Err: ErrNoGPUs}
	}
	if q.Value() > MaxGPUsPerNode {
		return 0, fieldErr("capacity "+string(res), q.String(), nil, "more than %d GPUs", MaxGPUsPerNode)
	}
	return int(q.Value()), nil
}

func buildServer(ss topology.ServerSpec) (topology.Server, error) {
	c, err := (&topology.ClusterSpec{Servers: []topology.ServerSpec{ss}}).Build()
	if err != nil {
		return topology.Server{}, err
	}
	return c.Servers[0], nil
}

// linkedServer builds the server with the link annotation merged into base.
func linkedServer(v string, base topology.ServerSpec) (topology.Server, error) {
	spec, err := ParseLinks(v)
	if err != nil {
		return topology.Server{}, err
	}
	spec.ID = base.ID
	switch {
	case len(spec.Devices) > 0:
		if len(spec.Devices) != base.GPUs {
			return topology.Server{}, fieldErr(AnnotationLinks, v, nil, "%d devices, but the node has %d GPUs", len(spec.Devices), base.GPUs)
		}
	case spec.GPUType != "" || spec.GPUs != 0:
		return topology.Server{}, fieldErr(AnnotationLinks, v, nil, "gpu_type and gpus come from the node's labels")
	default:
		spec.GPUType, spec.GPUs, spec.MemoryMiB = base.GPUType, base.GPUs, base.MemoryMiB
	}
	if spec.Links != nil && len(spec.Links) != base.GPUs {
		return topology.Server{}, fieldErr(AnnotationLinks, v, nil, "a %d x %d matrix, but the node has %d GPUs", len(spec.Links), len(spec.Links), base.GPUs)
	}
	s, err := buildServer(spec)
	if err != nil {
		return topology.Server{}, fieldErr(AnnotationLinks, v, err, "does not describe the node's GPUs")
	}
	if s.Links == nil && s.NumGPUs() > 1 {
		return topology.Server{}, fieldErr(AnnotationLinks, v, nil, "gives no links")
	}
	return s, nil
}

// positions maps NVML indices to positions in s.GPUs.
func positions(s *topology.Server, idx []int) ([]int, error) {
	out := make([]int, 0, len(idx))
	for _, i := range idx {
		p := -1
		for k := range s.GPUs {
			if s.GPUs[k].Index == i {
				p = k
				break
			}
		}
		if p < 0 {
			return nil, fieldErr(AnnotationUnhealthy, strconv.Itoa(i), nil, "no GPU with this index on the node")
		}
		out = append(out, p)
	}
	slices.Sort(out)
	return out, nil
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
