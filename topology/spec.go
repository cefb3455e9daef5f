package topology

import (
	"errors"
	"fmt"
	"io"

	"github.com/gpusched/gpusched/internal/safeio"
	"github.com/gpusched/gpusched/internal/strictjson"
)

// ClusterSpec is the JSON form of a cluster, read by [ParseJSON] and written
// by [Cluster.Spec]. An example with three shapes of server:
//
//	{
//	  "name": "lab",
//	  "servers": [
//	    {"id": "v100", "count": 4, "gpu_type": "v100", "gpus": 8,
//	     "interconnect": "hybrid-cube-mesh", "nic_gbps": 100, "rack": "r1"},
//	    {"id": "k80", "count": 2, "gpu_type": "k80", "gpus": 4},
//	    {"id": "odd", "devices": [
//	       {"type": "a100", "memory_mib": 81920, "numa_node": 0},
//	       {"type": "a100", "memory_mib": 81920, "numa_node": 1}],
//	     "links": [["X", "NV12"], ["NV12", "X"]]}
//	  ]
//	}
//
// A ClusterSpec is a plain value: safe for concurrent reads (Build only
// reads it), not for writes while others read it.
type ClusterSpec struct {
	Name    string       `json:"name,omitempty"`
	Servers []ServerSpec `json:"servers"`
}

// ServerSpec is the JSON form of one server, or of Count identical servers.
// Give either GPUType and GPUs (with an optional Interconnect or Links), or
// Devices (with optional Links).
// It is a plain value, safe for concurrent reads.
type ServerSpec struct {
	// ID names the server; with Count, servers are named ID-0, ID-1, ...
	// An empty ID becomes "server-<position>".
	ID string `json:"id,omitempty"`
	// Count replicates the server; omitted means 1, and it must be >= 1.
	Count *int `json:"count,omitempty"`
	// Rack and Domain are optional labels.
	Rack   string `json:"rack,omitempty"`
	Domain string `json:"domain,omitempty"`
	// GPUType and GPUs give a server of GPUs of one type.
	GPUType string `json:"gpu_type,omitempty"`
	GPUs    int    `json:"gpus,omitempty"`
	// MemoryMiB sets the memory of each GPU when GPUType is used; 0 takes
	// the type's nominal memory.
	MemoryMiB int `json:"memory_mib,omitempty"`
	// Interconnect is one of the [Interconnect] values; it may not be given
	// together with Links.
	Interconnect string `json:"interconnect,omitempty"`
	// Devices describes the GPUs one by one.
	Devices []DeviceSpec `json:"devices,omitempty"`
	// Links is the link matrix in nvidia-smi notation ("X", "NV2", "PIX", ...).
	Links [][]string `json:"links,omitempty"`
	// BandwidthGBps optionally gives measured pairwise bandwidths, GB/s.
	BandwidthGBps [][]float64 `json:"bandwidth_gbps,omitempty"`
	// NICGbps is the network bandwidth of the server, Gbit/s.
	NICGbps float64 `json:"nic_gbps,omitempty"`
	// CPUs and MemoryGiB are the host's CPU cores and memory beside the
	// GPUs (omitted: unknown).
	CPUs      float64 `json:"cpus,omitempty"`
	MemoryGiB float64 `json:"host_memory_gib,omitempty"`
	// MIG, with GPUType, puts every GPU of the server in MIG mode with this
	// layout (see [MIGLayout]).
	MIG *MIGLayout `json:"mig,omitempty"`
}

// DeviceSpec is the JSON form of one GPU.
// It is a plain value, safe for concurrent reads.
type DeviceSpec struct {
	// Index defaults to the device's position in the list.
	Index *int   `json:"index,omitempty"`
	Type  string `json:"type"`
	// MemoryMiB defaults to the type's nominal memory.
	MemoryMiB int    `json:"memory_mib,omitempty"`
	UUID      string `json:"uuid,omitempty"`
	PCIBusID  string `json:"pci_bus_id,omitempty"`
	// NUMANode defaults to -1 (unknown).
	NUMANode *int `json:"numa_node,omitempty"`
	// MIG is the GPU's MIG layout; omitted means MIG is off.
	MIG *MIGLayout `json:"mig,omitempty"`
}

// Limits that keep a cluster from asking for absurd amounts of memory or
// time. [Cluster.Validate] enforces them, so every cluster that validates
// keeps them whoever built it: [ParseJSON] and the builders refuse more
// before they allocate, and the live state of package cluster (New,
// AddServer) refuses the same servers. A JSON spec is at most
// [MaxSpecBytes] long.
const (
	// MaxGPUsPerServer bounds the GPUs of one server.
	MaxGPUsPerServer = 1024
	// MaxClusterGPUs bounds the GPUs of a cluster (about 100 MB of memory
	// once built).
	MaxClusterGPUs = 1 << 20
	// MaxIDLen bounds, in bytes, a server's id, rack and domain, a GPU's
	// UUID and PCI bus id, and the cluster's name: 253, the longest
	// Kubernetes node name (a DNS subdomain, RFC 1123), which the
	// Kubernetes parts take as the server's id.
	MaxIDLen = 253
)

// MaxSpecBytes bounds the length of a JSON cluster spec; [ReadJSON] reads
// no further and [ParseJSON] refuses longer input.
const MaxSpecBytes = 64 << 20

// ParseJSON reads a [ClusterSpec] from JSON and builds and validates the
// cluster. A leading UTF-8 byte order mark is skipped. Syntax errors, a
// truncated document, unknown fields, a field given twice or in another
// case ("GPU_TYPE" for "gpu_type"), values of the wrong type and trailing
// data are errors of kind [ErrMalformedSpec] located by line and column;
// bad counts, unknown link classes and the problems of [Cluster.Validate]
// are errors of the kinds of this package located by server and GPU.
func ParseJSON(data []byte) (*Cluster, error) {
	if len(data) > MaxSpecBytes {
		return nil, specErr(ErrMalformedSpec, "", "the spec is %d bytes long, more than the %d MiB allowed", len(data), MaxSpecBytes>>20)
	}
	var spec ClusterSpec
	if err := strictjson.Decode(data, &spec); err != nil {
		var je *strictjson.Error
		if errors.As(err, &je) {
			return nil, specErr(ErrMalformedSpec, je.Where(), "%s", je.Problem())
		}
		return nil, specErr(ErrMalformedSpec, "", "%v", err)
	}
	return spec.Build()
}

// ReadJSON is [ParseJSON] on everything r holds, reading at most
// [MaxSpecBytes].
func ReadJSON(r io.Reader) (*Cluster, error) {
	data, err := safeio.ReadAll(r, MaxSpecBytes)
	if err != nil {
		if errors.Is(err, safeio.ErrTooLarge) {
			return nil, specErr(ErrMalformedSpec, "", "the spec is longer than %d MiB", MaxSpecBytes>>20)
		}
		return nil, fmt.Errorf("topology: reading cluster spec: %w", err)
	}
	return ParseJSON(data)
}

// Build turns the spec into a validated cluster.
func (cs *ClusterSpec) Build() (*Cluster, error) {
	c := &Cluster{Name: cs.Name}
	total := 0
	for si := range cs.Servers {
		ss := &cs.Servers[si]
		where := fmt.Sprintf("servers[%d] %s", si, quoteID(ss.ID))
		s, count, err := ss.build(si)
		if err != nil {
			var se *SpecError
			if errors.As(err, &se) {
				se.Where = joinWhere(where, se.Where)
			}
			return nil, err
		}
		total += count * len(s.GPUs)
		if total > MaxClusterGPUs {
			return nil, specErr(ErrInvalidCount, where, "the cluster would have more than %d GPUs", MaxClusterGPUs)
		}
		if count == 1 && ss.Count == nil {
			c.Servers = append(c.Servers, s)
			continue
		}
		for k := range count {
			r := s
			r.ID = fmt.Sprintf("%s-%d", s.ID, k)
			r.GPUs = append([]GPU(nil), s.GPUs...)
			c.Servers = append(c.Servers, r)
		}
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return c, nil
}

func joinWhere(outer, inner string) string {
	if inner == "" {
		return outer
	}
	return outer + ": " + inner
}

// build makes one server of the spec and returns how many copies to make.
func (ss *ServerSpec) build(pos int) (Server, int, error) {
	count := 1
	if ss.Count != nil {
		count = *ss.Count
	}
	if count < 1 {
		return Server{}, 0, specErr(ErrInvalidCount, "", "count %d (want >= 1)", count)
	}
	s := Server{ID: ss.ID, Rack: ss.Rack, Domain: ss.Domain, NICGbps: ss.NICGbps, CPUs: ss.CPUs, MemoryGiB: ss.MemoryGiB, Bandwidth: ss.BandwidthGBps}
	if s.ID == "" {
		s.ID = fmt.Sprintf("server-%d", pos)
	}
	switch {
	case len(ss.Devices) > 0 && (ss.GPUType != "" || ss.GPUs != 0 || ss.MemoryMiB != 0):
		return s, 0, specErr(ErrMalformedSpec, "", "give either devices or gpu_type with gpus, not both")
	case len(ss.Devices) > 0 && ss.MIG != nil:
		return s, 0, specErr(ErrMalformedSpec, "", "mig applies to gpu_type with gpus; with devices give each device its mig")
	case len(ss.Devices) > 0 && ss.Interconnect != "":
		return s, 0, specErr(ErrMalformedSpec, "", "interconnect applies to gpu_type with gpus; with devices give links")
	case ss.Interconnect != "" && ss.Links != nil:
		return s, 0, specErr(ErrMalformedSpec, "", "give either interconnect or links, not both")
	case len(ss.Devices) > MaxGPUsPerServer || ss.GPUs > MaxGPUsPerServer:
		return s, 0, specErr(ErrInvalidCount, "", "more than %d GPUs in one server", MaxGPUsPerServer)
	case count > MaxClusterGPUs:
		return s, 0, specErr(ErrInvalidCount, "", "count %d is more than %d", count, MaxClusterGPUs)
	case len(s.ID) > MaxIDLen:
		// Checked before the copies are named after it.
		return s, 0, specErr(ErrMalformedSpec, "", "server id of %d bytes is longer than %d", len(s.ID), MaxIDLen)
	}
	if len(ss.Devices) > 0 {
		for i, d := range ss.Devices {
			g, err := d.gpu(i)
			if err != nil {
				err.Where = joinWhere(fmt.Sprintf("devices[%d]", i), err.Where)
				return s, 0, err
			}
			s.GPUs = append(s.GPUs, g)
		}
	} else {
		if ss.GPUType == "" {
			return s, 0, specErr(ErrMalformedSpec, "", "server has neither gpu_type with gpus nor devices")
		}
		t, err := ParseGPUType(ss.GPUType)
		if err != nil {
			return s, 0, err
		}
		var c Cluster
		if err := c.add("", 1, ServerTemplate{Type: t, GPUs: ss.GPUs, Interconnect: Interconnect(ss.Interconnect), MemoryMiB: ss.MemoryMiB}); err != nil {
			return s, 0, err
		}
		s.GPUs, s.Links = c.Servers[0].GPUs, c.Servers[0].Links
		for i := range s.GPUs {
			s.GPUs[i].MIG = ss.MIG
		}
	}
	if ss.Links != nil {
		links, err := parseLinks(ss.Links)
		if err != nil {
			return s, 0, err
		}
		s.Links = links
	}
	return s, count, nil
}

func (d *DeviceSpec) gpu(pos int) (GPU, *SpecError) {
	t, err := parseGPUType(d.Type)
	if err != nil {
		return GPU{}, err
	}
	g := GPU{Index: pos, Type: t, MemoryMiB: d.MemoryMiB, UUID: d.UUID, PCIBusID: d.PCIBusID, NUMANode: -1, MIG: d.MIG}
	if d.Index != nil {
		g.Index = *d.Index
	}
	if d.NUMANode != nil {
		g.NUMANode = *d.NUMANode
	}
	if g.MemoryMiB == 0 {
		g.MemoryMiB = t.nominalMemoryMiB()
	}
	if g.MemoryMiB == 0 {
		return GPU{}, specErr(ErrInvalidCount, "", "memory_mib is needed for the custom GPU type %q", t)
	}
	return g, nil
}

func parseLinks(rows [][]string) ([][]Link, error) {
	links := make([][]Link, len(rows))
	for i, row := range rows {
		links[i] = make([]Link, len(row))
		for j, v := range row {
			l, err := parseLink(v)
			if err != nil {
				err.Where = fmt.Sprintf("links[%d][%d]", i, j)
				return nil, err
			}
			links[i][j] = l
		}
	}
	return links, nil
}

// Spec returns the JSON form of c, one ServerSpec with devices and links per
// server; [ClusterSpec.Build] on it gives back an equal cluster.
func (c *Cluster) Spec() *ClusterSpec {
	cs := &ClusterSpec{Name: c.Name, Servers: make([]ServerSpec, len(c.Servers))}
	for si := range c.Servers {
		s := &c.Servers[si]
		ss := ServerSpec{ID: s.ID, Rack: s.Rack, Domain: s.Domain, NICGbps: s.NICGbps, CPUs: s.CPUs, MemoryGiB: s.MemoryGiB, BandwidthGBps: s.Bandwidth}
		for _, g := range s.GPUs {
			ss.Devices = append(ss.Devices, DeviceSpec{
				Index: &g.Index, Type: string(g.Type), MemoryMiB: g.MemoryMiB,
				UUID: g.UUID, PCIBusID: g.PCIBusID, NUMANode: &g.NUMANode, MIG: g.MIG,
			})
		}
		if s.Links != nil {
			ss.Links = make([][]string, len(s.Links))
			for i, row := range s.Links {
				ss.Links[i] = make([]string, len(row))
				for j, l := range row {
					ss.Links[i][j] = l.String()
				}
			}
		}
		cs.Servers[si] = ss
	}
	return cs
}
