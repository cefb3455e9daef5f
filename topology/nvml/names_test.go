package nvml

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/gpusched/gpusched/topology"
)

func TestTypeOf(t *testing.T) {
	for name, want := range map[string]topology.GPUType{
		"NVIDIA A100-SXM4-40GB": topology.A100, "NVIDIA A100 80GB PCIe": topology.A100, "NVIDIA A10": topology.A10,
		"Tesla V100-SXM2-16GB": topology.V100, "Tesla P100-PCIE-16GB": topology.P100, "Tesla K80": topology.K80,
		"Tesla T4": topology.T4, "NVIDIA H100 80GB HBM3": topology.H100, "NVIDIA H200": topology.H200,
		"NVIDIA L40S": topology.L40S, "NVIDIA L4": topology.L4, "NVIDIA B200": topology.B200,
		"NVIDIA GeForce RTX 4090": "geforce-rtx-4090", "NVIDIA GH200 480GB": "gh200-480gb",
	} {
		got := TypeOf(name)
		assert.Equal(t, want, got, name)
		assert.NoError(t, got.Validate(), name)
	}
}

// Without the build tag nvml, or without a driver, discovery fails with
// topology.ErrNoDriver; a cancelled context is reported as such.
func TestDiscoverWithoutDriver(t *testing.T) {
	_, err := (&Discoverer{}).Discover(context.Background())
	if err == nil {
		t.Skip("this machine has NVML and a GPU")
	}
	assert.ErrorIs(t, err, topology.ErrNoDriver)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = (&Discoverer{}).Discover(ctx)
	assert.ErrorIs(t, err, context.Canceled)
}
