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

// GPUInfo holds what NVML says of a GPU beyond the topology model.
type GPUInfo struct {
	Name string
	// ComputeCapability is "major.minor", such as "8.0".
	ComputeCapability string
	// CPUAffinity lists the CPU cores closest to the GPU.
	CPUAffinity []int
	// MIGEnabled reports MIG mode, and MIG its instances.
	MIGEnabled bool
	MIG        []MIGInstance
	// MIGLayoutError says why a GPU in MIG mode has no layout in the
	// topology (a product without a profile table here, or instances that
	// break the placement rules); empty when the layout was read.
	MIGLayoutError string
}

// MIGInstance is one MIG device of a GPU.
type MIGInstance struct {
	UUID      string
	MemoryMiB int
}

// Discovery is the result of discovering the local server.
type Discovery struct {
	Cluster *topology.Cluster
	// GPUs holds, in the order of Cluster.Servers[0].GPUs, the details of
	// each GPU.
	GPUs          []GPUInfo
	DriverVersion string
}

// Discoverer discovers the local server through NVML. It implements
// topology.Discoverer.
type Discoverer struct {
	// Lib is the NVML interface; nil means the real library
	// (go-nvml's nvml.New()). Tests pass go-nvml's mock servers.
	Lib gonvml.Interface
	// ID names the server; empty means the host name.
	ID string
}

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

// TypeOf maps an NVML product name ("NVIDIA A100-SXM4-40GB", "Tesla
// V100-SXM2-16GB") to a GPU type: a well-known one when the name holds its
// model, else a custom type made of the name.
func TypeOf(name string) topology.GPUType {
	u := strings.ToUpper(name)
	// Longer names first: A100 before A10, L40S before L4.
	for _, m := range []struct {
		token string
		t     topology.GPUType
	}{
		{"B200", topology.B200}, {"H200", topology.H200}, {"H100", topology.H100}, {"A100", topology.A100}, {"A10", topology.A10},
		{"L40S", topology.L40S}, {"L4", topology.L4}, {"V100", topology.V100}, {"P100", topology.P100}, {"T4", topology.T4}, {"K80", topology.K80},
	} {
		if containsToken(u, m.token) {
			return m.t
		}
	}
	var b strings.Builder
	for _, r := range strings.ToLower(name) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '.', r == '_', r == '-':
			b.WriteRune(r)
		case r == ' ':
			b.WriteRune('-')
		}
	}
	t := strings.TrimPrefix(strings.TrimPrefix(b.String(), "nvidia-"), "tesla-")
	if len(t) > 64 {
		t = t[:64]
	}
	if t == "" {
		t = "unknown"
	}
	return topology.GPUType(t)
}

// containsToken reports whether tok appears in s not followed by another
// letter or digit (so "A10" does not match "A100", nor "L4" "L40S").
func containsToken(s, tok string) bool {
	for i := 0; ; {
		j := strings.Index(s[i:], tok)
		if j < 0 {
			return false
		}
		end := i + j + len(tok)
		if end == len(s) || !isAlnum(s[end]) {
			if start := i + j; start == 0 || !isAlnum(s[start-1]) {
				return true
			}
		}
		i += j + 1
	}
}

func isAlnum(c byte) bool { return c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' }
