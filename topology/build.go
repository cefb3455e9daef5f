package topology

import (
	"fmt"
	"strconv"
	"strings"
)

// Interconnect names how the GPUs of a built server are linked.
// Its values are constants, safe for concurrent use.
type Interconnect string

// Interconnects understood by [ServerTemplate] and the JSON spec. Besides
// these, "nvlink:N" links every pair with N NVLinks (for instance a two-GPU
// server with an NVLink bridge).
const (
	// PCIe puts every GPU behind one PCIe switch (PIX); pairs of Tesla K80
	// GPUs (positions 2i and 2i+1) share a board (SB). This is the default.
	PCIe Interconnect = "pcie"
	// PCIeDualSocket splits the GPUs into two halves, one per CPU socket and
	// NUMA node: PIX within a half, SYS across (K80 boards as for PCIe).
	PCIeDualSocket Interconnect = "pcie-dual-socket"
	// NVSwitch links every pair through NVSwitches (DGX A100, DGX H100 and
	// HGX boards); each GPU has the NVLink count of its type. The GPUs are
	// split between two NUMA nodes as for PCIeDualSocket.
	NVSwitch Interconnect = "nvswitch"
	// HybridCubeMesh is the NVLink layout of the DGX-1 with eight V100s
	// (NV1 and NV2 links, SYS between unlinked GPUs of different sockets;
	// see NVIDIA's DGX-1 system architecture white paper, figure 4). It needs
	// exactly eight GPUs.
	HybridCubeMesh Interconnect = "hybrid-cube-mesh"
)

// ServerTemplate describes one shape of server for the builders.
//
// It is a plain value, safe for concurrent use.
type ServerTemplate struct {
	// Type is the type of every GPU.
	Type GPUType
	// GPUs is the number of GPUs per server (> 0).
	GPUs int
	// Interconnect links the GPUs; empty means PCIe.
	Interconnect Interconnect
	// MemoryMiB is each GPU's memory; 0 takes the type's nominal memory
	// (16 GiB for a custom type).
	MemoryMiB int
	// NICGbps is the server's network bandwidth, Gbit/s; 0 means unknown.
	NICGbps float64
	// CPUs and MemoryGiB are each server's host CPU cores and memory; 0
	// means unknown.
	CPUs, MemoryGiB float64
	// Rack and Domain label every server built from the template.
	Rack, Domain string
}

// Homogeneous builds and validates a cluster of n servers of one shape, with
// ids "<type>-0", "<type>-1", ...
func Homogeneous(n int, t ServerTemplate) (*Cluster, error) {
	c := &Cluster{}
	if err := c.add(string(t.Type), n, t); err != nil {
		return nil, err
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return c, nil
}

// add appends n servers built from t, named prefix-0, prefix-1, ...
func (c *Cluster) add(prefix string, n int, t ServerTemplate) error {
	if n <= 0 {
		return specErr(ErrInvalidCount, "", "%d servers of %s (want > 0)", n, t.Type)
	}
	if err := t.Type.Validate(); err != nil {
		return err
	}
	if t.GPUs <= 0 {
		return specErr(ErrInvalidCount, "", "%d GPUs per %s server (want > 0)", t.GPUs, t.Type)
	}
	if t.GPUs > MaxGPUsPerServer {
		return specErr(ErrInvalidCount, "", "more than %d GPUs in one server", MaxGPUsPerServer)
	}
	if n > MaxClusterGPUs/t.GPUs || c.NumGPUs()+n*t.GPUs > MaxClusterGPUs {
		return specErr(ErrInvalidCount, "", "the cluster would have more than %d GPUs", MaxClusterGPUs)
	}
	links, numa, err := layout(t.Interconnect, t.Type, t.GPUs)
	if err != nil {
		return err
	}
	mem := t.MemoryMiB
	if mem == 0 {
		mem = t.Type.nominalMemoryMiB()
	}
	if mem == 0 {
		mem = 16 << 10
	}
	if mem < 0 {
		return specErr(ErrInvalidCount, "", "GPU memory %d MiB (want > 0)", mem)
	}
	for k := range n {
		s := Server{
			ID:        fmt.Sprintf("%s-%d", prefix, k),
			Rack:      t.Rack,
			Domain:    t.Domain,
			NICGbps:   t.NICGbps,
			CPUs:      t.CPUs,
			MemoryGiB: t.MemoryGiB,
			Links:     links,
			GPUs:      make([]GPU, t.GPUs),
		}
		for i := range s.GPUs {
			s.GPUs[i] = GPU{Index: i, Type: t.Type, MemoryMiB: mem, NUMANode: numa[i]}
		}
		c.Servers = append(c.Servers, s)
	}
	return nil
}

// layout returns the link matrix and NUMA nodes of g GPUs of type t linked by
// ic; the matrix is nil for a single GPU.
func layout(ic Interconnect, t GPUType, g int) ([][]Link, []int, error) {
	numa := make([]int, g)
	dual := func() {
		for i := range numa {
			if g > 1 && i >= g/2 {
				numa[i] = 1
			}
		}
	}
	var pair func(i, j int) Link
	switch ic {
	case "", PCIe:
		pair = func(i, j int) Link { return pcieLink(t, i, j, LinkSingleSwitch) }
	case PCIeDualSocket:
		dual()
		pair = func(i, j int) Link {
			if numa[i] != numa[j] {
				return Link{Class: LinkCrossSocket}
			}
			return pcieLink(t, i, j, LinkSingleSwitch)
		}
	case NVSwitch:
		dual()
		info, _ := t.Info()
		pair = func(int, int) Link { return Link{Class: LinkNVSwitch, NVLinks: info.NVLinks} }
	case HybridCubeMesh:
		if g != 8 {
			return nil, nil, specErr(ErrInvalidCount, "", "interconnect %q needs 8 GPUs per server, not %d", ic, g)
		}
		dual()
		pair = func(i, j int) Link { return dgx1[i][j] }
	default:
		n, ok := strings.CutPrefix(string(ic), "nvlink:")
		k, err := strconv.Atoi(n)
		if !ok || err != nil || k < 1 || k > maxNVLinks {
			return nil, nil, specErr(ErrUnknownLinkClass, "", "unknown interconnect %q (want pcie, pcie-dual-socket, nvswitch, hybrid-cube-mesh or nvlink:N with N from 1 to %d)", ic, maxNVLinks)
		}
		pair = func(int, int) Link { return Link{Class: LinkNVLink, NVLinks: k} }
	}
	if g == 1 {
		return nil, numa, nil
	}
	links := make([][]Link, g)
	for i := range links {
		links[i] = make([]Link, g)
		for j := range links[i] {
			if i == j {
				links[i][j] = Link{Class: LinkSelf}
			} else {
				links[i][j] = pair(i, j)
			}
		}
	}
	return links, numa, nil
}

func pcieLink(t GPUType, i, j int, other LinkClass) Link {
	if t == K80 && i/2 == j/2 {
		return Link{Class: LinkSameBoard}
	}
	return Link{Class: other}
}

// dgx1 is the link matrix of a DGX-1 with eight V100 GPUs.
var dgx1 = func() [8][8]Link {
	const (
		x = iota
		s
		a
		b
	)
	rows := [8][8]int{
		{x, a, a, b, b, s, s, s},
		{a, x, b, a, s, b, s, s},
		{a, b, x, b, s, s, a, s},
		{b, a, b, x, s, s, s, a},
		{b, s, s, s, x, a, a, b},
		{s, b, s, s, a, x, b, a},
		{s, s, a, s, a, b, x, b},
		{s, s, s, a, b, a, b, x},
	}
	var m [8][8]Link
	for i := range rows {
		for j, v := range rows[i] {
			switch v {
			case x:
				m[i][j] = Link{Class: LinkSelf}
			case s:
				m[i][j] = Link{Class: LinkCrossSocket}
			case a:
				m[i][j] = Link{Class: LinkNVLink, NVLinks: 1}
			case b:
				m[i][j] = Link{Class: LinkNVLink, NVLinks: 2}
			}
		}
	}
	return m
}()

// Limits of a compact spec.
const (
	maxCompactLen   = 4096
	maxCompactTypes = 64
)

// gavelOrder is the order of GPU types in Gavel's "-c v100:p100:k80" flag.
var gavelOrder = []GPUType{V100, P100, K80}

// ParseCompact builds and validates a cluster from a compact spec, with
// gpusPerServer GPUs per server unless an entry says otherwise:
//
//   - "v100:36,p100:36,k80:36": 36 GPUs of each type;
//   - "v100:32:8,k80:8": 32 V100 in servers of 8, 8 K80 in servers of
//     gpusPerServer;
//   - "36:36:36": Gavel's cluster flag (-c), counts of V100, P100 and K80.
//
// Each count must be a positive multiple of its GPUs per server; a count of
// zero in Gavel's form leaves that type out. Servers are named
// "<type>-<k>" and use the PCIe interconnect; build other shapes with
// [Homogeneous] or [ParseJSON].
//
// A compact spec is at most 4,096 bytes long and names at most 64 GPU
// types; the cluster's size is bounded as for [ParseJSON].
func ParseCompact(spec string, gpusPerServer int) (*Cluster, error) {
	spec = strings.TrimSpace(spec)
	switch {
	case spec == "":
		return nil, specErr(ErrMalformedSpec, "", "empty cluster spec (want for instance \"v100:36,p100:36,k80:36\")")
	case len(spec) > maxCompactLen:
		return nil, specErr(ErrMalformedSpec, "", "a compact spec of %d bytes is longer than %d", len(spec), maxCompactLen)
	case strings.Count(spec, ",") >= maxCompactTypes:
		return nil, specErr(ErrMalformedSpec, "", "a compact spec names at most %d GPU types", maxCompactTypes)
	}
	type entry struct {
		t              GPUType
		countS, perSrS string
	}
	var entries []entry
	gavel := spec[0] >= '0' && spec[0] <= '9'
	if gavel {
		fields := strings.Split(spec, ":")
		if len(fields) > len(gavelOrder) {
			return nil, specErr(ErrMalformedSpec, "", "%q: Gavel's form has at most %d counts (v100:p100:k80)", spec, len(gavelOrder))
		}
		for i, f := range fields {
			entries = append(entries, entry{t: gavelOrder[i], countS: f})
		}
	} else {
		for item := range strings.SplitSeq(spec, ",") {
			fields := strings.Split(strings.TrimSpace(item), ":")
			if len(fields) < 2 || len(fields) > 3 {
				return nil, specErr(ErrMalformedSpec, "", "%q: want type:count or type:count:gpus-per-server", item)
			}
			t, err := parseGPUType(fields[0])
			if err != nil {
				err.Where = fmt.Sprintf("entry %q", item)
				return nil, err
			}
			e := entry{t: t, countS: fields[1]}
			if len(fields) == 3 {
				e.perSrS = fields[2]
			}
			entries = append(entries, e)
		}
	}
	// Check every entry and the total before building anything, so that
	// a short spec asking for too much costs nothing.
	type shape struct {
		t             GPUType
		servers, gpus int
	}
	var shapes []shape
	seen := make(map[GPUType]bool)
	total := 0
	for _, e := range entries {
		where := fmt.Sprintf("%s:%s", e.t, e.countS)
		count, err := strconv.Atoi(strings.TrimSpace(e.countS))
		if err != nil {
			return nil, specErr(ErrMalformedSpec, where, "count %q is not an integer", e.countS)
		}
		perSrv := gpusPerServer
		if e.perSrS != "" {
			if perSrv, err = strconv.Atoi(strings.TrimSpace(e.perSrS)); err != nil {
				return nil, specErr(ErrMalformedSpec, where, "GPUs per server %q is not an integer", e.perSrS)
			}
		}
		if seen[e.t] {
			return nil, specErr(ErrDuplicateID, where, "GPU type %s appears twice", e.t)
		}
		seen[e.t] = true
		switch {
		case count < 0 || (count == 0 && !gavel):
			return nil, specErr(ErrInvalidCount, where, "%d GPUs (want > 0)", count)
		case count == 0:
			continue
		case perSrv <= 0:
			return nil, specErr(ErrInvalidCount, where, "%d GPUs per server (want > 0)", perSrv)
		case count%perSrv != 0:
			return nil, specErr(ErrInvalidCount, where, "%d GPUs do not fill servers of %d GPUs", count, perSrv)
		}
		if perSrv > MaxGPUsPerServer {
			return nil, specErr(ErrInvalidCount, where, "more than %d GPUs in one server", MaxGPUsPerServer)
		}
		if count > MaxClusterGPUs-total {
			return nil, specErr(ErrInvalidCount, where, "the cluster would have more than %d GPUs", MaxClusterGPUs)
		}
		total += count
		shapes = append(shapes, shape{e.t, count / perSrv, perSrv})
	}
	c := &Cluster{Name: spec}
	for _, sh := range shapes {
		if err := c.add(string(sh.t), sh.servers, ServerTemplate{Type: sh.t, GPUs: sh.gpus}); err != nil {
			return nil, err
		}
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return c, nil
}
