package topology

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseProduct(t *testing.T) {
	const gib = 1 << 10
	for _, tc := range []struct {
		name string
		want Product
	}{
		// GPU feature discovery labels.
		{"nvidia.com/gpu.product=NVIDIA-A100-SXM4-80GB", Product{Type: A100, MemoryMiB: 80 * gib, Form: FormSXM}},
		{"NVIDIA-A100-SXM4-40GB", Product{Type: A100, MemoryMiB: 40 * gib, Form: FormSXM}},
		{"NVIDIA-A100-PCIE-40GB", Product{Type: A100, MemoryMiB: 40 * gib, Form: FormPCIe}},
		{"NVIDIA-A100-SXM4-40GB-MIG-1g.5gb", Product{Type: A100, MemoryMiB: 40 * gib, Form: FormSXM, MIGProfile: "1g.5gb"}},
		{"NVIDIA-A100-SXM4-40GB-MIG-3g.20gb-SHARED", Product{Type: A100, MemoryMiB: 40 * gib, Form: FormSXM, MIGProfile: "3g.20gb", Shared: true}},
		{"NVIDIA-H100-80GB-HBM3", Product{Type: H100, MemoryMiB: 80 * gib}},
		{"NVIDIA-H100-NVL", Product{Type: H100, MemoryMiB: 94 * gib, Form: FormNVL}},
		{"NVIDIA-H100-PCIe", Product{Type: H100, MemoryMiB: 80 * gib, Form: FormPCIe}},
		{"NVIDIA-H200", Product{Type: H200, MemoryMiB: 141 * gib}},
		{"NVIDIA-H200-NVL", Product{Type: H200, MemoryMiB: 141 * gib, Form: FormNVL}},
		{"NVIDIA-B200", Product{Type: B200, MemoryMiB: 180 * gib}},
		{"NVIDIA-L4", Product{Type: L4, MemoryMiB: 24 * gib}},
		{"NVIDIA-L40S", Product{Type: L40S, MemoryMiB: 48 * gib}},
		{"NVIDIA-A10", Product{Type: A10, MemoryMiB: 24 * gib}},
		{"Tesla-T4-SHARED", Product{Type: T4, MemoryMiB: 16 * gib, Shared: true}},
		{"Tesla-V100-SXM2-16GB", Product{Type: V100, MemoryMiB: 16 * gib, Form: FormSXM}},
		// NVML names.
		{"NVIDIA A100-SXM4-40GB", Product{Type: A100, MemoryMiB: 40 * gib, Form: FormSXM}},
		{"NVIDIA A100 80GB PCIe", Product{Type: A100, MemoryMiB: 80 * gib, Form: FormPCIe}},
		{"Tesla V100-SXM2-32GB", Product{Type: V100, MemoryMiB: 32 * gib, Form: FormSXM}},
		{"Tesla V100S-PCIE-32GB", Product{Type: V100, MemoryMiB: 32 * gib, Form: FormPCIe}},
		{"Tesla P100-PCIE-16GB", Product{Type: P100, MemoryMiB: 16 * gib, Form: FormPCIe}},
		{"Tesla K80", Product{Type: K80, MemoryMiB: 12 * gib}},
		{"NVIDIA H100 80GB HBM3", Product{Type: H100, MemoryMiB: 80 * gib}},
		{"NVIDIA H100 NVL", Product{Type: H100, MemoryMiB: 94 * gib, Form: FormNVL}},
		{"  nvidia l40s ", Product{Type: L40S, MemoryMiB: 48 * gib}},
		// Not well-known: a custom type of the name.
		{"NVIDIA GeForce RTX 4090", Product{Type: "geforce-rtx-4090"}},
		{"NVIDIA-A10G", Product{Type: "a10g"}},
		{"NVIDIA A800-SXM4-80GB", Product{Type: "a800-sxm4-80gb", MemoryMiB: 80 * gib, Form: FormSXM}},
		{"NVIDIA GH200 480GB", Product{Type: "gh200-480gb", MemoryMiB: 480 * gib}},
		{"Quadro RTX 8000", Product{Type: "quadro-rtx-8000"}},
		{"???", Product{Type: "unknown"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseProduct(tc.name)
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
			require.NoError(t, got.Type.Validate())
		})
	}
	for _, bad := range []string{"", "  ", "nvidia.com/gpu.product=", strings.Repeat("A", 300)} {
		_, err := ParseProduct(bad)
		assert.ErrorIs(t, err, ErrInvalidGPUType, "%q", bad)
	}
	long, err := ParseProduct(strings.Repeat("x", 200))
	require.NoError(t, err)
	assert.Len(t, string(long.Type), 64)
}

func FuzzParseProduct(f *testing.F) {
	for _, s := range []string{"NVIDIA-A100-SXM4-80GB", "NVIDIA H100 NVL", "Tesla-T4-MIG-1g.5gb-SHARED", "x-99999999999GB", "-MIG-"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p, err := ParseProduct(s)
		if err != nil {
			return
		}
		if err := p.Type.Validate(); err != nil {
			t.Fatalf("%q: type %q: %v", s, p.Type, err)
		}
		if p.MemoryMiB < 0 || p.MemoryMiB > 1<<26 {
			t.Fatalf("%q: memory %d MiB", s, p.MemoryMiB)
		}
	})
}
