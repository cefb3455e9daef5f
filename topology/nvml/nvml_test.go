//go:build nvml

package nvml

import (
	"context"
	"testing"

	gonvml "github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxa100"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gpusched/gpusched/topology"
)

// prepare fills the methods go-nvml's mock servers leave nil: bus ids, NUMA
// nodes, CPU affinity, and the topology, from level (common ancestor of two
// GPUs) and nvlink (the peer of each link of each GPU: -1 for an NVSwitch).
func prepare(s *server.Server, level func(a, b int) gonvml.GpuTopologyLevel, nvlink func(i int) []int) {
	index := map[gonvml.Device]int{}
	for i, d := range s.Devices {
		index[d] = i
	}
	for i, d := range s.Devices {
		dev := d.(*server.Device)
		bus := dev.PciBusID
		dev.GetPciInfoFunc = func() (gonvml.PciInfo, gonvml.Return) { return pci(bus), gonvml.SUCCESS }
		dev.GetNumaNodeIdFunc = func() (int, gonvml.Return) { return i / 4, gonvml.SUCCESS }
		dev.GetCpuAffinityFunc = func(int) ([]uint, gonvml.Return) { return []uint{0xff << (8 * uint(i/4))}, gonvml.SUCCESS }
		dev.GetTopologyCommonAncestorFunc = func(other gonvml.Device) (gonvml.GpuTopologyLevel, gonvml.Return) {
			return level(i, index[other]), gonvml.SUCCESS
		}
		peers := nvlink(i)
		dev.GetNvLinkStateFunc = func(l int) (gonvml.EnableState, gonvml.Return) {
			if l >= len(peers) {
				return 0, gonvml.ERROR_INVALID_ARGUMENT
			}
			return gonvml.FEATURE_ENABLED, gonvml.SUCCESS
		}
		dev.GetNvLinkRemoteDeviceTypeFunc = func(l int) (gonvml.IntNvLinkDeviceType, gonvml.Return) {
			if peers[l] < 0 {
				return gonvml.NVLINK_DEVICE_TYPE_SWITCH, gonvml.SUCCESS
			}
			return gonvml.NVLINK_DEVICE_TYPE_GPU, gonvml.SUCCESS
		}
		dev.GetNvLinkRemotePciInfoFunc = func(l int) (gonvml.PciInfo, gonvml.Return) {
			return pci(s.Devices[peers[l]].(*server.Device).PciBusID), gonvml.SUCCESS
		}
	}
}

func pci(bus string) gonvml.PciInfo {
	var p gonvml.PciInfo
	// NVML writes 8 domain digits.
	full := "0000" + bus
	for i := 0; i < len(full) && i < len(p.BusId)-1; i++ {
		p.BusId[i] = int8(full[i])
	}
	return p
}

// A DGX A100: eight A100s on NVSwitches (12 links each), two per PCIe
// switch, four per NUMA node.
func TestDiscoverDGXA100(t *testing.T) {
	s := dgxa100.New()
	prepare(s, func(a, b int) gonvml.GpuTopologyLevel {
		switch {
		case a/2 == b/2:
			return gonvml.TOPOLOGY_SINGLE
		case a/4 == b/4:
			return gonvml.TOPOLOGY_NODE
		}
		return gonvml.TOPOLOGY_SYSTEM
	}, func(int) []int {
		peers := make([]int, 12)
		for l := range peers {
			peers[l] = -1
		}
		return peers
	})
	d, err := (&Discoverer{Lib: s, ID: "dgx"}).Details(context.Background())
	require.NoError(t, err)
	require.NoError(t, d.Cluster.Validate())
	srv := &d.Cluster.Servers[0]
	assert.Equal(t, "dgx", srv.ID)
	require.Len(t, srv.GPUs, 8)
	assert.Equal(t, topology.A100, srv.GPUs[0].Type)
	assert.Equal(t, 40960, srv.GPUs[0].MemoryMiB)
	assert.Equal(t, "00000000:03:00.0", srv.GPUs[3].PCIBusID)
	assert.Equal(t, 1, srv.GPUs[5].NUMANode)
	assert.Equal(t, topology.Link{Class: topology.LinkNVSwitch, NVLinks: 12}, srv.Link(0, 7))
	assert.Equal(t, "8.0", d.GPUs[0].ComputeCapability)
	assert.Equal(t, []int{8, 9, 10, 11, 12, 13, 14, 15}, d.GPUs[4].CPUAffinity)
	assert.Equal(t, "550.54.15", d.DriverVersion)
	assert.NotEmpty(t, srv.GPUs[0].UUID)
}

// NVLinks without switches, as in a DGX-1 (GPU i and its peers), and PCIe
// levels for the pairs without links.
func TestDiscoverNVLinkAndPCIe(t *testing.T) {
	s := dgxa100.New()
	// 0-1 share two links, 2-3 one; the rest is PCIe.
	prepare(s, func(a, b int) gonvml.GpuTopologyLevel {
		switch {
		case a/2 == b/2:
			return gonvml.TOPOLOGY_MULTIPLE
		case a/4 == b/4:
			return gonvml.TOPOLOGY_HOSTBRIDGE
		}
		return gonvml.TOPOLOGY_SYSTEM
	}, func(i int) []int {
		switch i {
		case 0:
			return []int{1, 1}
		case 1:
			return []int{0, 0}
		case 2:
			return []int{3}
		case 3:
			return []int{2}
		}
		return nil
	})
	c, err := (&Discoverer{Lib: s}).Discover(context.Background())
	require.NoError(t, err)
	srv := &c.Servers[0]
	assert.Equal(t, "NV2", srv.Link(0, 1).String())
	assert.Equal(t, "NV1", srv.Link(2, 3).String())
	assert.Equal(t, "PXB", srv.Link(4, 5).String())
	assert.Equal(t, "PHB", srv.Link(4, 6).String())
	assert.Equal(t, "SYS", srv.Link(0, 4).String())
}

// Without a driver, Init fails and nothing else may be called: the mock
// panics on any other call.
func TestNoDriver(t *testing.T) {
	for _, ret := range []gonvml.Return{gonvml.ERROR_LIBRARY_NOT_FOUND, gonvml.ERROR_DRIVER_NOT_LOADED} {
		lib := &mock.Interface{InitFunc: func() gonvml.Return { return ret }}
		_, err := (&Discoverer{Lib: lib}).Discover(context.Background())
		require.ErrorIs(t, err, topology.ErrNoDriver)
		assert.ErrorContains(t, err, "no NVIDIA driver found")
		assert.Len(t, lib.InitCalls(), 1)
	}
	lib := &mock.Interface{InitFunc: func() gonvml.Return { return gonvml.ERROR_NO_PERMISSION }}
	_, err := (&Discoverer{Lib: lib}).Discover(context.Background())
	assert.ErrorContains(t, err, "nvmlInit")
	assert.NotErrorIs(t, err, topology.ErrNoDriver)
}

// The real library on this machine: with no driver, a clear error.
func TestRealLibrary(t *testing.T) {
	c, err := (&Discoverer{}).Discover(context.Background())
	if err == nil {
		t.Logf("found %d GPUs on %s", len(c.Servers[0].GPUs), c.Servers[0].ID)
		return
	}
	assert.ErrorIs(t, err, topology.ErrNoDriver)
}
