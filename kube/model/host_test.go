package model

import (
	"errors"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

func TestParseHostRange(t *testing.T) {
	h, err := ParseHostRange(map[string]string{AnnotationHostProfile: "res18", AnnotationCPU: "2-12", AnnotationMemory: "16Gi"})
	if err != nil || h.Profile != "res18" || h.MinCPUs != 2 || h.MaxCPUs != 12 || h.MinBytes != 16<<30 || h.MaxBytes != 16<<30 {
		t.Fatalf("%+v, %v", h, err)
	}
	if h, err := ParseHostRange(map[string]string{AnnotationCPU: "2-12"}); h != nil || err != nil {
		t.Fatalf("no profile: %+v, %v", h, err)
	}
	for _, bad := range []map[string]string{
		{AnnotationHostProfile: ""},
		{AnnotationHostProfile: "x", AnnotationCPU: "12-2"},
		{AnnotationHostProfile: "x", AnnotationCPU: "1e9"},
		{AnnotationHostProfile: "x", AnnotationCPU: "-1"},
		{AnnotationHostProfile: "x", AnnotationCPU: "2-"},
		{AnnotationHostProfile: "x", AnnotationMemory: "1Ei"},
		{AnnotationHostProfile: "x", AnnotationMemory: "lots"},
	} {
		var fe *FieldError
		if _, err := ParseHostRange(bad); !errors.Is(err, ErrInvalid) || !errors.As(err, &fe) {
			t.Errorf("%v: %v", bad, err)
		}
	}
}

func TestSetHostRequests(t *testing.T) {
	q := resource.MustParse
	spec := &corev1.PodSpec{Containers: []corev1.Container{
		{Name: "side", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: q("100m")}}},
		{Name: "train", Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: q("3"), corev1.ResourceMemory: q("8Gi"), "nvidia.com/gpu": q("1")},
			Limits:   corev1.ResourceList{corev1.ResourceCPU: q("3"), corev1.ResourceMemory: q("100Gi"), "nvidia.com/gpu": q("1")},
		}},
	}}
	i := HostContainer(spec, "nvidia.com/gpu")
	if i != 1 {
		t.Fatalf("container %d", i)
	}
	if !SetHostRequests(spec, i, 12, 200<<30) {
		t.Fatal("nothing changed")
	}
	r := spec.Containers[1].Resources
	// The CPU limit equalled the request: it moves with it. The memory
	// request stops at its limit.
	if c := r.Requests[corev1.ResourceCPU]; c.Cmp(q("12")) != 0 || r.Limits.Cpu().Cmp(q("12")) != 0 {
		t.Fatalf("cpu %v / %v", r.Requests.Cpu(), r.Limits.Cpu())
	}
	if m := r.Requests[corev1.ResourceMemory]; m.Cmp(q("100Gi")) != 0 {
		t.Fatalf("memory %v", r.Requests.Memory())
	}
	if SetHostRequests(spec, i, 12, 100<<30) {
		t.Fatal("the same values again changed something")
	}
}

func FuzzParseHostRange(f *testing.F) {
	f.Add("res18", "2-12", "16Gi-128Gi")
	f.Add("x", "1", "")
	f.Fuzz(func(t *testing.T, profile, cpu, mem string) {
		h, err := ParseHostRange(map[string]string{AnnotationHostProfile: profile, AnnotationCPU: cpu, AnnotationMemory: mem})
		if err != nil {
			return
		}
		if h.MinCPUs > h.MaxCPUs || h.MaxCPUs > MaxHostCPUs || h.MinBytes > h.MaxBytes || h.MaxBytes > MaxHostBytes || h.MinCPUs < 0 || h.MinBytes < 0 {
			t.Fatalf("%q %q: %+v", cpu, mem, h)
		}
	})
}
