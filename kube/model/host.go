package model

import (
	"math"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// Annotations of a workload that asks the admission controller to size its
// CPUs and memory (package multires: Synergy's split, OSDI 2022).
const (
	// AnnotationHostProfile names the workload's profile among the
	// admin's (the controller's Config.HostProfiles; Synergy's zoo by
	// default: "res18", "gnmt", ...): how its speed depends on its CPUs
	// and memory. Without it the workload's requests are left as written.
	AnnotationHostProfile = "gpusched.io/host-profile"
	// AnnotationCPU and AnnotationMemory bound what the controller may
	// give each pod, "min-max" in Kubernetes quantities ("2-12",
	// "16Gi-128Gi"), or one quantity for both; absent, the bound is the
	// pod's own request (the minimum) and the node's share (the maximum).
	AnnotationCPU    = "gpusched.io/cpu"
	AnnotationMemory = "gpusched.io/memory"
)

// Bounds of the host annotations: no pod asks for more than a very large
// node has.
const (
	MaxHostCPUs  = 4096
	MaxHostBytes = 64 << 40
)

// HostRange is a workload's host sizing as it asked for it: a profile and
// per pod bounds on CPUs (cores) and memory (bytes), 0 for a bound not
// given. ParseHostRange returns a new one each time: safe for concurrent
// reads.
type HostRange struct {
	Profile            string
	MinCPUs, MaxCPUs   float64
	MinBytes, MaxBytes float64
}

// ParseHostRange reads a workload's host annotations; it returns nil and
// no error when the workload names no profile. Errors are *FieldError
// wrapping ErrInvalid and name the annotation.
func ParseHostRange(ann map[string]string) (*HostRange, error) {
	name, ok := ann[AnnotationHostProfile]
	if !ok {
		return nil, nil
	}
	if name == "" || len(name) > 256 {
		return nil, fieldErr(AnnotationHostProfile, name, ErrInvalid, "want a profile name of 1 to 256 bytes")
	}
	h := &HostRange{Profile: name}
	var err error
	if h.MinCPUs, h.MaxCPUs, err = parseRange(AnnotationCPU, ann[AnnotationCPU], MaxHostCPUs); err != nil {
		return nil, err
	}
	if h.MinBytes, h.MaxBytes, err = parseRange(AnnotationMemory, ann[AnnotationMemory], MaxHostBytes); err != nil {
		return nil, err
	}
	return h, nil
}

// parseRange reads "min-max" or "v"; "" is no bound.
func parseRange(field, v string, limit float64) (lo, hi float64, err error) {
	if v == "" {
		return 0, 0, nil
	}
	if len(v) > 64 {
		return 0, 0, fieldErr(field, v, ErrInvalid, "longer than 64 bytes")
	}
	a, b, ranged := strings.Cut(v, "-")
	if !ranged {
		b = a
	}
	lo, err1 := quantity(a, limit)
	hi, err2 := quantity(b, limit)
	switch {
	case err1 != nil || err2 != nil:
		return 0, 0, fieldErr(field, v, ErrInvalid, "want \"min-max\" or one value, quantities from 0 to %g", limit)
	case hi < lo:
		return 0, 0, fieldErr(field, v, ErrInvalid, "maximum below minimum")
	}
	return lo, hi, nil
}

func quantity(s string, limit float64) (float64, error) {
	q, err := resource.ParseQuantity(strings.TrimSpace(s))
	if err != nil {
		return 0, err
	}
	v := q.AsApproximateFloat64()
	if !(v >= 0 && v <= limit) || math.IsInf(v, 0) {
		return 0, ErrInvalid
	}
	return v, nil
}

// HostContainer returns the index of the container whose CPUs and memory
// the controller sizes: the first that asks for GPUs of resource res
// (requests or limits), or -1.
func HostContainer(spec *corev1.PodSpec, res corev1.ResourceName) int {
	for i := range spec.Containers {
		r := spec.Containers[i].Resources
		if _, ok := r.Limits[res]; ok {
			return i
		}
		if _, ok := r.Requests[res]; ok {
			return i
		}
	}
	return -1
}

// SetHostRequests sets container i's CPU and memory requests to cpus cores
// and bytes: a limit that equalled its request (a Guaranteed pod) moves
// with it, so that the pod's QoS class stays (which a resize must keep); a
// request is never set above its container's limit. It reports whether
// anything changed.
func SetHostRequests(spec *corev1.PodSpec, i int, cpus, bytes float64) bool {
	c := &spec.Containers[i]
	changed := setOne(&c.Resources, corev1.ResourceCPU, resource.NewMilliQuantity(int64(math.Round(cpus*1000)), resource.DecimalSI))
	return setOne(&c.Resources, corev1.ResourceMemory, resource.NewQuantity(int64(math.Round(bytes)), resource.BinarySI)) || changed
}

func setOne(r *corev1.ResourceRequirements, name corev1.ResourceName, q *resource.Quantity) bool {
	old, had := r.Requests[name]
	lim, limited := r.Limits[name]
	guaranteed := limited && had && old.Cmp(lim) == 0
	if limited && !guaranteed && q.Cmp(lim) > 0 {
		q = &lim
	}
	if had && old.Cmp(*q) == 0 {
		return false
	}
	if r.Requests == nil {
		r.Requests = corev1.ResourceList{}
	}
	r.Requests[name] = *q
	if guaranteed {
		r.Limits[name] = *q
	}
	return true
}
