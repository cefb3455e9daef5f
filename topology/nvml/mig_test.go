//go:build nvml

package nvml

import (
	"context"
	"testing"

	gonvml "github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxh100"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gpusched/gpusched/topology"
)

// mockMIG puts dev in MIG mode with GPU instances of the given nvml.h
// profile indices at the given placements (start, size in memory slices),
// as nvidia-smi mig -cgi would, and gives it no MIG devices (the mock has
// no GetMaxMigDeviceCount).
func mockMIG(t *testing.T, dev *server.Device, instances ...[3]int) {
	t.Helper()
	dev.GetMaxMigDeviceCountFunc = func() (int, gonvml.Return) { return 0, gonvml.SUCCESS }
	_, _ = dev.SetMigMode(gonvml.DEVICE_MIG_ENABLE)
	for _, in := range instances {
		info, ret := dev.GetGpuInstanceProfileInfo(in[0])
		require.Equal(t, gonvml.SUCCESS, ret)
		_, ret = dev.CreateGpuInstanceWithPlacement(&info, &gonvml.GpuInstancePlacement{Start: uint32(in[1]), Size: uint32(in[2])})
		require.Equal(t, gonvml.SUCCESS, ret)
	}
}

// A DGX H100 with GPU 0 split 3-2-1-1 (3g.40gb at 4, 2g.20gb at 0, two
// 1g.10gb at 2 and 3), GPU 1 as two 1g.20gb and a 3g.40gb, GPU 2 with an
// instance of the wrong size (as the mock's own placement tables give: a
// 3g of size 3), GPU 3 with a layout that breaks the rules, the rest
// without MIG.
func TestDiscoverMIGLayouts(t *testing.T) {
	s := dgxh100.New()
	prepare(s, func(a, b int) gonvml.GpuTopologyLevel { return gonvml.TOPOLOGY_SYSTEM }, func(int) []int { return nil })
	dev := func(i int) *server.Device { return s.Devices[i].(*server.Device) }
	mockMIG(t, dev(0), [3]int{gonvml.GPU_INSTANCE_PROFILE_3_SLICE, 4, 4}, [3]int{gonvml.GPU_INSTANCE_PROFILE_2_SLICE, 0, 2},
		[3]int{gonvml.GPU_INSTANCE_PROFILE_1_SLICE, 2, 1}, [3]int{gonvml.GPU_INSTANCE_PROFILE_1_SLICE, 3, 1})
	mockMIG(t, dev(1), [3]int{gonvml.GPU_INSTANCE_PROFILE_1_SLICE_REV2, 0, 2}, [3]int{gonvml.GPU_INSTANCE_PROFILE_1_SLICE_REV2, 2, 2},
		[3]int{gonvml.GPU_INSTANCE_PROFILE_3_SLICE, 4, 4})
	mockMIG(t, dev(2), [3]int{gonvml.GPU_INSTANCE_PROFILE_3_SLICE, 0, 3})
	mockMIG(t, dev(3), [3]int{gonvml.GPU_INSTANCE_PROFILE_4_SLICE, 0, 4}, [3]int{gonvml.GPU_INSTANCE_PROFILE_3_SLICE, 0, 4})

	d, err := (&Discoverer{Lib: s, ID: "dgx-h100"}).Details(context.Background())
	require.NoError(t, err)
	require.NoError(t, d.Cluster.Validate())
	gpus := d.Cluster.Servers[0].GPUs
	require.Len(t, gpus, 8)
	assert.Equal(t, topology.H100, gpus[0].Type)
	assert.Equal(t, &topology.MIGLayout{Product: "h100-80gb", Instances: []topology.MIGInstance{
		{Profile: "2g.20gb", Start: 0}, {Profile: "1g.10gb", Start: 2}, {Profile: "1g.10gb", Start: 3}, {Profile: "3g.40gb", Start: 4},
	}}, gpus[0].MIG)
	assert.Equal(t, []topology.MIGInstance{{Profile: "1g.20gb", Start: 0}, {Profile: "1g.20gb", Start: 2}, {Profile: "3g.40gb", Start: 4}}, gpus[1].MIG.Instances)
	assert.Empty(t, d.GPUs[0].MIGLayoutError)

	assert.Nil(t, gpus[2].MIG)
	assert.True(t, d.GPUs[2].MIGEnabled)
	assert.Contains(t, d.GPUs[2].MIGLayoutError, "spans 3 memory slices; the profile takes 4")
	assert.Nil(t, gpus[3].MIG)
	assert.Contains(t, d.GPUs[3].MIGLayoutError, "overlaps")
	for i := 4; i < 8; i++ {
		assert.Nil(t, gpus[i].MIG)
		assert.False(t, d.GPUs[i].MIGEnabled)
	}
}

// A GPU in MIG mode whose product has no table here keeps no layout.
func TestDiscoverMIGUnknownProduct(t *testing.T) {
	s := dgxh100.New()
	prepare(s, func(a, b int) gonvml.GpuTopologyLevel { return gonvml.TOPOLOGY_SYSTEM }, func(int) []int { return nil })
	d0 := s.Devices[0].(*server.Device)
	d0.GetNameFunc = func() (string, gonvml.Return) { return "NVIDIA RTX PRO 6000 Blackwell Server Edition", gonvml.SUCCESS }
	mockMIG(t, d0)
	d, err := (&Discoverer{Lib: s}).Details(context.Background())
	require.NoError(t, err)
	assert.Nil(t, d.Cluster.Servers[0].GPUs[0].MIG)
	assert.Contains(t, d.GPUs[0].MIGLayoutError, "has no MIG")
}
