package model

import (
	"slices"
	"strconv"
	"strings"

	"github.com/gpusched/gpusched/topology"
	corev1 "k8s.io/api/core/v1"
)

// Labels and annotations read from and written to pods.
const (
	// LabelPodGroup names the pod's gang; LabelPodGroupX is the label of
	// kubernetes-sigs/scheduler-plugins' coscheduling, read when the first
	// is absent.
	LabelPodGroup  = "gpusched.io/pod-group"
	LabelPodGroupX = "scheduling.x-k8s.io/pod-group"
	// AnnotationMinMember is the number of members the pod's gang needs
	// to start; every member must say the same.
	AnnotationMinMember = "gpusched.io/min-member"
	// AnnotationGPUTypes lists the GPU types the pod may run on, by
	// gpusched's type names or product names ("v100,a100").
	AnnotationGPUTypes = "gpusched.io/gpu-types"
	// AnnotationGPUs is written at binding: the NVML indices of the GPUs
	// booked for the pod on its node, ascending ("0,1").
	AnnotationGPUs = "gpusched.io/gpus"
	// AnnotationGPUsMAC is written with AnnotationGPUs: the scheduler's
	// record of it, an HMAC over the pod's UID, its node and the indices
	// under a key only the scheduler holds, so that a restarted scheduler
	// believes the indices only where it wrote them (a tenant can edit its
	// pods' annotations).
	AnnotationGPUsMAC = "gpusched.io/gpus-mac"
)

const (
	// MaxGroupMembers bounds a gang's size.
	MaxGroupMembers = 10000
	maxTypes        = 64
)

// Request is what a pod asks of the scheduler. ParseRequest returns a new
// one each time; it is safe for concurrent reads, not for concurrent writes.
type Request struct {
	// GPUs is the number of whole GPUs (0: the pod needs none).
	GPUs int
	// Types are the GPU types allowed; nil allows any.
	Types []topology.GPUType
	// Group is the pod's gang as "namespace/name", "" for none, and
	// MinMember the members it needs (1 without a group).
	Group     string
	MinMember int
	// Upstream reports that the group is an upstream PodGroup
	// (scheduling.k8s.io, spec.schedulingGroup): kube-scheduler's
	// GangScheduling holds its barrier (its minCount), so MinMember is 1
	// and gpusched's own barrier steps aside; the group still keeps its
	// members close.
	Upstream bool
}

// Allows reports whether the request may run on GPUs of type t.
func (r *Request) Allows(t topology.GPUType) bool {
	return r.Types == nil || slices.Contains(r.Types, t)
}

// ContainerGPUs returns the GPUs of resource res one container asks for:
// its limit, else its request; a count that is not whole or beyond
// MaxGPUsPerNode is a *FieldError wrapping ErrInvalid.
func ContainerGPUs(c *corev1.Container, res corev1.ResourceName) (int64, error) {
	q, ok := c.Resources.Limits[res]
	if !ok {
		q, ok = c.Resources.Requests[res]
	}
	if !ok {
		return 0, nil
	}
	v := q.Value()
	if v < 0 || v > MaxGPUsPerNode || q.MilliValue()%1000 != 0 {
		return 0, fieldErr("container "+c.Name+" resource "+string(res), q.String(), nil, "want whole GPUs from 0 to %d", MaxGPUsPerNode)
	}
	return v, nil
}

// PodGPUs returns the GPUs a pod asks for: the larger of the sum over its
// containers and the largest init container, each container's limit
// (requests where no limit is set), as Kubernetes computes a pod's
// request of an extended resource.
func PodGPUs(p *corev1.Pod, res corev1.ResourceName) (int, error) {
	if res == "" {
		res = ResourceGPU
	}
	one := func(c *corev1.Container) (int64, error) { return ContainerGPUs(c, res) }
	var sum, initMax int64
	for i := range p.Spec.Containers {
		v, err := one(&p.Spec.Containers[i])
		if err != nil {
			return 0, err
		}
		sum += v
	}
	for i := range p.Spec.InitContainers {
		v, err := one(&p.Spec.InitContainers[i])
		if err != nil {
			return 0, err
		}
		if c := &p.Spec.InitContainers[i]; c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			sum += v // a sidecar runs beside the containers
			continue
		}
		initMax = max(initMax, v)
	}
	n := max(sum, initMax)
	if n > MaxGPUsPerNode {
		return 0, fieldErr("resource "+string(res), strconv.FormatInt(n, 10), nil, "more than %d GPUs in one pod", MaxGPUsPerNode)
	}
	return int(n), nil
}

// PodGroup returns the pod's gang as "namespace/name", or "".
//
// A pod in an upstream PodGroup (spec.schedulingGroup.podGroupName) is in
// that group, whatever its labels say: one group, and one barrier (the
// upstream one), per pod.
func PodGroup(p *corev1.Pod) string {
	if g := UpstreamPodGroup(p); g != "" {
		return p.Namespace + "/" + g
	}
	g := p.Labels[LabelPodGroup]
	if g == "" {
		g = p.Labels[LabelPodGroupX]
	}
	if g == "" {
		return ""
	}
	return p.Namespace + "/" + g
}

// UpstreamPodGroup returns the name of the upstream PodGroup
// (scheduling.k8s.io/v1beta1, Kubernetes 1.37's gang scheduling) the pod
// joins through spec.schedulingGroup, or "".
func UpstreamPodGroup(p *corev1.Pod) string {
	if sg := p.Spec.SchedulingGroup; sg != nil && sg.PodGroupName != nil {
		return *sg.PodGroupName
	}
	return ""
}

// ParseRequest reads a pod's request. Bad input is a *FieldError wrapping
// ErrInvalid that names the label, annotation or resource at fault.
func ParseRequest(p *corev1.Pod, res corev1.ResourceName) (Request, error) {
	r := Request{MinMember: 1}
	var err error
	if r.GPUs, err = PodGPUs(p, res); err != nil {
		return r, err
	}
	a := p.Annotations
	if v, ok := a[AnnotationGPUTypes]; ok {
		if r.Types, err = ParseTypes(v); err != nil {
			return r, err
		}
	}
	r.Group = PodGroup(p)
	if UpstreamPodGroup(p) != "" {
		r.Upstream = true // its minCount is the PodGroup's, and upstream's barrier holds it
		return r, nil
	}
	if v, ok := a[AnnotationMinMember]; ok {
		if r.Group == "" {
			return r, fieldErr("annotation "+AnnotationMinMember, v, nil, "set on a pod without a %s label", LabelPodGroup)
		}
		m, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil || m < 1 || m > MaxGroupMembers {
			return r, fieldErr("annotation "+AnnotationMinMember, v, nil, "want a count from 1 to %d", MaxGroupMembers)
		}
		r.MinMember = m
	} else if r.Group != "" {
		return r, fieldErr("label "+LabelPodGroup, r.Group, nil, "a pod group needs the annotation %s", AnnotationMinMember)
	}
	return r, nil
}

// ParseTypes reads a list of GPU types ("v100,a100"); each entry is a type
// name or a product name (topology.ParseProduct). An empty list is an
// error: a pod that may run nowhere is a mistake.
func ParseTypes(v string) ([]topology.GPUType, error) {
	field := "annotation " + AnnotationGPUTypes
	if len(v) > 4096 {
		return nil, fieldErr(field, v, nil, "%d bytes, more than 4096", len(v))
	}
	var out []topology.GPUType
	for f := range strings.SplitSeq(v, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		t, err := topology.ParseGPUType(f)
		if err != nil || !t.Known() {
			p, perr := topology.ParseProduct(f)
			if perr != nil || (err != nil && !p.Type.Known()) {
				return nil, fieldErr(field, v, nil, "%q is not a GPU type", f)
			}
			t = p.Type
		}
		if !slices.Contains(out, t) {
			out = append(out, t)
		}
		if len(out) > maxTypes {
			return nil, fieldErr(field, v, nil, "more than %d types", maxTypes)
		}
	}
	if len(out) == 0 {
		return nil, fieldErr(field, v, nil, "no GPU type")
	}
	return out, nil
}

// ParseIndices reads a list of NVML indices ("0,1" or "3, 1"): distinct,
// from 0 to MaxGPUsPerNode-1, returned ascending. An empty value is an
// empty list.
func ParseIndices(field, v string) ([]int, error) {
	if len(v) > 8*MaxGPUsPerNode {
		return nil, fieldErr(field, v, nil, "%d bytes, too long", len(v))
	}
	var out []int
	for f := range strings.SplitSeq(v, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		i, err := strconv.Atoi(f)
		if err != nil || i < 0 || i >= MaxGPUsPerNode {
			return nil, fieldErr(field, v, nil, "%q is not a GPU index from 0 to %d", f, MaxGPUsPerNode-1)
		}
		out = append(out, i)
	}
	slices.Sort(out)
	for k := 1; k < len(out); k++ {
		if out[k] == out[k-1] {
			return nil, fieldErr(field, v, nil, "index %d twice", out[k])
		}
	}
	return out, nil
}

// FormatIndices writes indices as ParseIndices reads them.
func FormatIndices(idx []int) string {
	var b strings.Builder
	for k, i := range idx {
		if k > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(i))
	}
	return b.String()
}
