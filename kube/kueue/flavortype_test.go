package kueue

import (
	"testing"

	"github.com/gpusched/gpusched/topology"
	"github.com/stretchr/testify/assert"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// A flavor is typed by its LabelGPUType, else by the product under the
// type label; without the type label
// among its node labels it has no type, since the controller steers by a
// node selector on that label (with the label alone it once counted as
// typed, and its workloads were reported steered while nothing pinned
// them).
func TestFlavorType(t *testing.T) {
	const label = "nvidia.com/gpu.product"
	for _, tc := range []struct {
		name       string
		nodeLabels map[string]string
		labels     map[string]string
		typ        topology.GPUType
		value      string
		ok         bool
	}{
		{"product", map[string]string{label: "Tesla-V100-SXM2-16GB"}, nil, topology.V100, "Tesla-V100-SXM2-16GB", true},
		{"unknown product, typed by the label", map[string]string{label: "acme-x1"}, map[string]string{LabelGPUType: "a100"}, topology.A100, "acme-x1", true},
		{"unknown product, a custom type", map[string]string{label: "acme-x1"}, nil, "acme-x1", "acme-x1", true},
		{"the label overrides the product", map[string]string{label: "NVIDIA-A100-SXM4-80GB"}, map[string]string{LabelGPUType: "h100"}, topology.H100, "NVIDIA-A100-SXM4-80GB", true},
		{"label without the type label", map[string]string{"pool": "a"}, map[string]string{LabelGPUType: "a100"}, "", "", false},
		{"nothing", nil, nil, "", "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rf := &ResourceFlavor{ObjectMeta: metav1.ObjectMeta{Name: "f", Labels: tc.labels}, Spec: ResourceFlavorSpec{NodeLabels: tc.nodeLabels}}
			got, ok := flavorType(rf, label)
			assert.Equal(t, tc.ok, ok)
			assert.Equal(t, tc.typ, got.typ)
			assert.Equal(t, tc.value, got.value)
		})
	}
}
