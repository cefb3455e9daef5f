//go:build nvml

package nvml

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	gonvml "github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gpusched/gpusched/topology"
)

// Discoverer discovers the local server through NVML. It implements
// topology.Discoverer. It keeps no state between calls (each call
// initialises and shuts down its own NVML session, which NVML counts), so
// it is safe for concurrent use when Lib is.
type Discoverer struct {
	// Lib is the NVML interface; nil means the real library
	// (go-nvml's nvml.New()). Tests pass go-nvml's mock servers.
	Lib gonvml.Interface
	// ID names the server; empty means the host name.
	ID string
}

var _ topology.Discoverer = (*Discoverer)(nil)

// Discover implements topology.Discoverer.
func (d *Discoverer) Discover(ctx context.Context) (*topology.Cluster, error) {
	r, err := d.Details(ctx)
	if err != nil {
		return nil, err
	}
	return r.Cluster, nil
}

// Details discovers the server and returns NVML's details too.
func (d *Discoverer) Details(ctx context.Context) (*Discovery, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	lib := d.Lib
	if lib == nil {
		lib = gonvml.New()
	}
	switch ret := lib.Init(); ret {
	case gonvml.SUCCESS:
	case gonvml.ERROR_LIBRARY_NOT_FOUND, gonvml.ERROR_DRIVER_NOT_LOADED:
		// No NVML call may follow a failed Init.
		return nil, fmt.Errorf("%w: nvmlInit: %w", topology.ErrNoDriver, ret)
	default:
		return nil, fmt.Errorf("topology/nvml: nvmlInit: %w", ret)
	}
	defer func() { _ = lib.Shutdown() }()
	id := d.ID
	if id == "" {
		if h, err := os.Hostname(); err == nil && h != "" {
			id = h
		} else {
			id = "localhost"
		}
	}
	out := &Discovery{}
	if v, ret := lib.SystemGetDriverVersion(); ret == gonvml.SUCCESS {
		out.DriverVersion = v
	}
	count, ret := lib.DeviceGetCount()
	if ret != gonvml.SUCCESS {
		return nil, fmt.Errorf("topology/nvml: device count: %w", ret)
	}
	if count == 0 {
		return nil, errors.New("topology/nvml: the driver reports no GPUs")
	}
	devs := make([]gonvml.Device, count)
	server := topology.Server{ID: id, GPUs: make([]topology.GPU, count)}
	busIndex := map[string]int{}
	for i := range count {
		dev, ret := lib.DeviceGetHandleByIndex(i)
		if ret != gonvml.SUCCESS {
			return nil, fmt.Errorf("topology/nvml: GPU %d: handle: %w", i, ret)
		}
		devs[i] = dev
		g, info, err := describe(dev, i)
		if err != nil {
			return nil, err
		}
		server.GPUs[i] = g
		out.GPUs = append(out.GPUs, info)
		if g.PCIBusID != "" {
			busIndex[normaliseBusID(g.PCIBusID)] = i
		}
	}
	links, err := linkMatrix(devs, busIndex)
	if err != nil {
		return nil, err
	}
	if count > 1 {
		server.Links = links
	}
	c := &topology.Cluster{Name: id, Servers: []topology.Server{server}}
	if err := c.Validate(); err != nil {
		return nil, fmt.Errorf("topology/nvml: discovered an invalid server: %w", err)
	}
	out.Cluster = c
	return out, nil
}

// describe reads one GPU.
func describe(dev gonvml.Device, i int) (topology.GPU, GPUInfo, error) {
	g := topology.GPU{Index: i, NUMANode: -1}
	var info GPUInfo
	name, ret := dev.GetName()
	if ret != gonvml.SUCCESS {
		return g, info, fmt.Errorf("topology/nvml: GPU %d: name: %w", i, ret)
	}
	info.Name = name
	g.Type = TypeOf(name)
	if uuid, ret := dev.GetUUID(); ret == gonvml.SUCCESS {
		g.UUID = uuid
	}
	mem, ret := dev.GetMemoryInfo()
	if ret != gonvml.SUCCESS {
		return g, info, fmt.Errorf("topology/nvml: GPU %d: memory: %w", i, ret)
	}
	g.MemoryMiB = int(mem.Total >> 20)
	if pci, ret := dev.GetPciInfo(); ret == gonvml.SUCCESS {
		g.PCIBusID = busID(pci)
	}
	if node, ret := dev.GetNumaNodeId(); ret == gonvml.SUCCESS && node >= 0 {
		g.NUMANode = node
	}
	if major, minor, ret := dev.GetCudaComputeCapability(); ret == gonvml.SUCCESS {
		info.ComputeCapability = fmt.Sprintf("%d.%d", major, minor)
	}
	if mask, ret := dev.GetCpuAffinity(16); ret == gonvml.SUCCESS {
		for w, bitsWord := range mask {
			for b := range 64 {
				if bitsWord>>b&1 == 1 {
					info.CPUAffinity = append(info.CPUAffinity, w*64+b)
				}
			}
		}
	}
	if current, _, ret := dev.GetMigMode(); ret == gonvml.SUCCESS && current == gonvml.DEVICE_MIG_ENABLE {
		info.MIGEnabled = true
		if n, ret := dev.GetMaxMigDeviceCount(); ret == gonvml.SUCCESS {
			for j := range n {
				mig, ret := dev.GetMigDeviceHandleByIndex(j)
				if ret != gonvml.SUCCESS {
					continue
				}
				var m MIGInstance
				if u, ret := mig.GetUUID(); ret == gonvml.SUCCESS {
					m.UUID = u
				}
				if mm, ret := mig.GetMemoryInfo(); ret == gonvml.SUCCESS {
					m.MemoryMiB = int(mm.Total >> 20)
				}
				info.MIG = append(info.MIG, m)
			}
		}
		layout, err := migLayout(dev, &g)
		if err != nil {
			info.MIGLayoutError = err.Error()
		}
		g.MIG = layout
	}
	return g, info, nil
}

// linkMatrix reads the pairwise links.
func linkMatrix(devs []gonvml.Device, busIndex map[string]int) ([][]topology.Link, error) {
	n := len(devs)
	links := make([][]topology.Link, n)
	for i := range links {
		links[i] = make([]topology.Link, n)
		links[i][i] = topology.Link{Class: topology.LinkSelf}
	}
	nvlinks := make([][]int, n)
	switched := make([]int, n) // links into NVSwitches
	for i, dev := range devs {
		nvlinks[i] = make([]int, n)
		for l := range gonvml.NVLINK_MAX_LINKS {
			state, ret := dev.GetNvLinkState(l)
			if ret != gonvml.SUCCESS {
				break // no NVLink, or no more links
			}
			if state != gonvml.FEATURE_ENABLED {
				continue
			}
			if kind, ret := dev.GetNvLinkRemoteDeviceType(l); ret == gonvml.SUCCESS && kind == gonvml.NVLINK_DEVICE_TYPE_SWITCH {
				switched[i]++
				continue
			}
			pci, ret := dev.GetNvLinkRemotePciInfo(l)
			if ret != gonvml.SUCCESS {
				continue
			}
			if peer, ok := busIndex[normaliseBusID(busID(pci))]; ok && peer != i {
				nvlinks[i][peer]++
			}
		}
	}
	for i := range n {
		for j := i + 1; j < n; j++ {
			var l topology.Link
			switch {
			case switched[i] > 0 && switched[j] > 0:
				l = topology.Link{Class: topology.LinkNVSwitch, NVLinks: min(switched[i], switched[j])}
			case nvlinks[i][j] > 0 || nvlinks[j][i] > 0:
				l = topology.Link{Class: topology.LinkNVLink, NVLinks: max(nvlinks[i][j], nvlinks[j][i])}
			default:
				level, ret := devs[i].GetTopologyCommonAncestor(devs[j])
				if ret != gonvml.SUCCESS {
					return nil, fmt.Errorf("topology/nvml: common ancestor of GPUs %d and %d: %w", i, j, ret)
				}
				l = topology.Link{Class: classOf(level)}
			}
			links[i][j], links[j][i] = l, l
		}
	}
	return links, nil
}

// classOf maps NVML's topology levels to link classes.
func classOf(level gonvml.GpuTopologyLevel) topology.LinkClass {
	switch level {
	case gonvml.TOPOLOGY_INTERNAL:
		return topology.LinkSameBoard
	case gonvml.TOPOLOGY_SINGLE:
		return topology.LinkSingleSwitch
	case gonvml.TOPOLOGY_MULTIPLE:
		return topology.LinkMultiSwitch
	case gonvml.TOPOLOGY_HOSTBRIDGE:
		return topology.LinkHostBridge
	case gonvml.TOPOLOGY_NODE:
		return topology.LinkSameNUMA
	}
	return topology.LinkCrossSocket
}

// busID reads the bus id string of a PciInfo.
func busID(p gonvml.PciInfo) string {
	var b strings.Builder
	for _, c := range p.BusId {
		if c == 0 {
			break
		}
		b.WriteByte(byte(c))
	}
	return b.String()
}

// normaliseBusID makes "00000000:07:00.0" and "0000:07:00.0" equal.
func normaliseBusID(s string) string {
	s = strings.ToLower(strings.TrimSpace(s))
	if dom, rest, ok := strings.Cut(s, ":"); ok {
		dom = strings.TrimLeft(dom, "0")
		return dom + ":" + rest
	}
	return s
}
