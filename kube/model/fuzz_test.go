package model

import (
	"errors"
	"os"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

func FuzzParseLinks(f *testing.F) {
	text, err := os.ReadFile("testdata/dgx1-topo-m.txt")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(string(text))
	f.Add(`[["X","NV12"],["NV12","X"]]`)
	f.Add(`{"interconnect":"hybrid-cube-mesh"}`)
	f.Add("\tGPU0\tGPU1\nGPU0\tX\tNV1\nGPU1\tNV1\tX\n")
	f.Fuzz(func(t *testing.T, v string) {
		// Any input: no panic; a node built with it keeps its GPUs.
		n := gpuNode("n", map[string]string{LabelProduct: "Tesla-V100-SXM2-16GB", LabelCount: "8"},
			map[string]string{AnnotationLinks: v, AnnotationUnhealthy: v}, true)
		nd, err := ParseNode(n, NodeOptions{})
		if err != nil {
			t.Fatalf("links annotation made the node unusable: %v", err)
		}
		if len(nd.Server.GPUs) != 8 {
			t.Fatalf("%d GPUs", len(nd.Server.GPUs))
		}
		if nd.Server.Links != nil && len(nd.Server.Links) != 8 {
			t.Fatalf("links %d x ?", len(nd.Server.Links))
		}
	})
}

func FuzzParseRequest(f *testing.F) {
	f.Add("v100,a100", "4", "g")
	f.Add("", "", "")
	f.Add("NVIDIA-A100-SXM4-80GB", "0", "x")
	f.Fuzz(func(t *testing.T, types, minMember, group string) {
		p := pod(map[string]string{AnnotationGPUTypes: types, AnnotationMinMember: minMember}, map[string]string{LabelPodGroup: group}, "2")
		r, err := ParseRequest(p, corev1.ResourceName(""))
		if err != nil {
			return
		}
		if r.GPUs != 2 || r.MinMember < 1 || r.MinMember > MaxGroupMembers {
			t.Fatalf("accepted %+v", r)
		}
	})
}

func FuzzParseIndices(f *testing.F) {
	f.Add("0,1,3")
	f.Add(" 3, 1")
	f.Fuzz(func(t *testing.T, v string) {
		idx, err := ParseIndices("f", v)
		if err != nil {
			return
		}
		back, err := ParseIndices("f", FormatIndices(idx))
		if err != nil || len(back) != len(idx) {
			t.Fatalf("round trip of %v: %v %v", idx, back, err)
		}
		for k := range idx {
			if back[k] != idx[k] || (k > 0 && idx[k] <= idx[k-1]) {
				t.Fatalf("round trip of %v: %v", idx, back)
			}
		}
	})
}

// parseRates never panics; it accepts only finite rates >= 0 of distinct
// types, and its errors are *FieldError naming the annotation.
func FuzzParseRates(f *testing.F) {
	for _, s := range []string{"v100=3.2,k80=1", "Tesla-V100-SXM2-16GB=2", "", "=", "v100=1,v100=2", "a=1e400", "k80=-0", "p100= 4 ,"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		rates, err := parseRates(s)
		if err != nil {
			var fe *FieldError
			if rates != nil || !errors.As(err, &fe) || fe.Field != "annotation "+AnnotationThroughput || !errors.Is(err, ErrInvalid) {
				t.Fatalf("%q: rates %v with error %v", s, rates, err)
			}
			return
		}
		if len(rates) == 0 {
			t.Fatalf("%q: no rates and no error", s)
		}
		for typ, v := range rates {
			if !(v >= 0) || v > maxRate || typ.Validate() != nil {
				t.Fatalf("%q: rate %v on %q", s, v, typ)
			}
		}
	})
}
