package topology

import (
	"fmt"
	"math"
	"slices"
)

// GPU is one GPU of a server.
// It is a plain value, safe for concurrent use.
type GPU struct {
	// Index is the GPU's index in its server, as NVML and CUDA number it.
	// Indices are unique within a server; rows and columns of the server's
	// link matrix follow the order of [Server.GPUs], not Index.
	Index int `json:"index"`
	// Type is the GPU's type.
	Type GPUType `json:"type"`
	// MemoryMiB is the GPU's memory in MiB.
	MemoryMiB int `json:"memory_mib"`
	// UUID is NVML's GPU UUID ("GPU-..."), if known; unique in a cluster.
	UUID string `json:"uuid,omitempty"`
	// PCIBusID is the PCI bus id ("00000000:07:00.0"), if known.
	PCIBusID string `json:"pci_bus_id,omitempty"`
	// NUMANode is the NUMA node closest to the GPU, or -1 if unknown.
	NUMANode int `json:"numa_node"`
	// MIG is the GPU's MIG layout when it is in MIG mode; nil otherwise.
	// See [MIGLayout]; builders may share it between GPUs (read-only).
	MIG *MIGLayout `json:"mig,omitempty"`
}

// Server is one machine: its GPUs, how they are linked, and its network.
// A Server is a plain value: safe for concurrent reads (its methods only
// read it), not for writes while others read it.
type Server struct {
	// ID names the server; unique in a cluster.
	ID string
	// Rack and Domain are optional labels: the rack, and a wider failure or
	// network domain (a pod, a spine, an NVLink domain spanning servers).
	Rack, Domain string
	// GPUs are the server's GPUs.
	GPUs []GPU
	// NICGbps is the server's network bandwidth in Gbit/s (the sum over its
	// NICs); 0 means unknown.
	NICGbps float64
	// CPUs and MemoryGiB are the host's CPU cores and memory that jobs
	// may have beside the GPUs (package multires: Synergy's split); 0
	// means unknown. Left out of the encoding while unknown, so that a
	// server described before they existed (in a scheduler's snapshot,
	// by its digest) is the same server.
	CPUs      float64 `json:",omitempty"`
	MemoryGiB float64 `json:",omitempty"`
	// Links is the pairwise link matrix, len(GPUs) x len(GPUs), in the order
	// of GPUs, symmetric, with LinkSelf on the diagonal; nil when unknown.
	// Builders share one matrix between servers of the same shape: treat it
	// as read-only.
	Links [][]Link
	// Bandwidth optionally overrides the nominal pairwise bandwidths, in GB/s
	// per direction, with measured ones; nil to use the nominal figures of
	// [Link.NominalBandwidth]. Same shape and symmetry as Links.
	Bandwidth [][]float64
}

// NumGPUs returns the number of GPUs of the server.
func (s *Server) NumGPUs() int { return len(s.GPUs) }

// Link returns the link between the GPUs at positions i and j of s.GPUs; it
// is LinkSelf when i == j and LinkUnknown when the server has no link matrix.
// It panics if i or j is out of range.
func (s *Server) Link(i, j int) Link {
	_ = s.GPUs[i]
	_ = s.GPUs[j]
	switch {
	case i == j:
		return Link{Class: LinkSelf}
	case s.Links == nil:
		return Link{Class: LinkUnknown}
	}
	return s.Links[i][j]
}

// PairBandwidth returns the bandwidth between the GPUs at positions i and j
// of s.GPUs, in GB/s per direction: the measured value of s.Bandwidth if set,
// otherwise the link's nominal bandwidth. It is 0 when i == j.
func (s *Server) PairBandwidth(i, j int) float64 {
	if i == j {
		return 0
	}
	if s.Bandwidth != nil {
		return s.Bandwidth[i][j]
	}
	return s.Link(i, j).NominalBandwidth(s.GPUs[i].Type, s.GPUs[j].Type)
}

// Bounds of a server's host resources.
const (
	maxHostCPUs      = 1 << 16
	maxHostMemoryGiB = 1 << 24
)

// NICGBps returns the network bandwidth in GB/s (NICGbps / 8).
func (s *Server) NICGBps() float64 { return s.NICGbps / 8 }

// Cluster is a set of servers.
// A Cluster is a plain value: safe for concurrent reads (its methods only
// read it, and schedulers and simulators share one), not for writes while
// others read it.
type Cluster struct {
	// Name is an optional name for reports.
	Name string
	// Servers are the cluster's servers.
	Servers []Server
}

// NumGPUs returns the number of GPUs in the cluster.
func (c *Cluster) NumGPUs() int {
	n := 0
	for i := range c.Servers {
		n += len(c.Servers[i].GPUs)
	}
	return n
}

// Capacity returns the number of GPUs of each type.
func (c *Cluster) Capacity() map[GPUType]int {
	m := make(map[GPUType]int)
	for i := range c.Servers {
		for _, g := range c.Servers[i].GPUs {
			m[g.Type]++
		}
	}
	return m
}

// GPUTypes returns the GPU types present in the cluster, sorted by name.
func (c *Cluster) GPUTypes() []GPUType {
	var out []GPUType
	for t := range c.Capacity() {
		out = append(out, t)
	}
	slices.Sort(out)
	return out
}

// Validate checks the cluster and returns nil, or every problem found (up to
// twenty), each a [*SpecError], in one error on one line ("; " between
// them) whose Unwrap() []error returns them. It checks that there
// is at least one server, that server ids are non-empty and unique, that
// every server has GPUs, that GPU types are well formed, indices unique and
// non-negative, memory positive, UUIDs unique across the cluster, NUMA nodes
// >= -1, NIC bandwidth finite and non-negative, that link and bandwidth
// matrices are square, symmetric, of known classes, with LinkSelf exactly on
// the diagonal, bandwidths finite and positive off it and finite and >= 0 on
// it, that MIG layouts follow NVIDIA's placement rules
// ([MIGProduct.Check]), and that the cluster keeps the limits
// [MaxGPUsPerServer], [MaxClusterGPUs] and [MaxIDLen] (a server over
// MaxGPUsPerServer is reported without checking its GPUs, and a cluster
// over MaxClusterGPUs stops the check there).
//
// Its cost is linear in the number of GPUs plus the size of the distinct
// matrices: a link or bandwidth matrix shared by several servers (as the
// builders and [ClusterSpec.Build] share them) is checked once.
func (c *Cluster) Validate() error {
	var p problems
	if len(c.Servers) == 0 {
		p.add(ErrInvalidCount, func() string { return "" }, "a cluster needs at least one server")
	}
	if len(c.Name) > MaxIDLen {
		p.add(ErrMalformedSpec, func() string { return "" }, "the cluster's name of %d bytes is longer than %d", len(c.Name), MaxIDLen)
	}
	ids := make(map[string]int, len(c.Servers))
	v := newValidation()
	total := 0
	for si := range c.Servers {
		s := &c.Servers[si]
		where := func() string { return fmt.Sprintf("servers[%d] %s", si, quoteID(s.ID)) }
		if s.ID == "" {
			p.add(ErrMalformedSpec, where, "server has no id")
		} else if prev, dup := ids[s.ID]; dup {
			p.add(ErrDuplicateID, where, "server id %s is also the id of servers[%d]", quoteID(s.ID), prev)
		} else {
			ids[s.ID] = si
		}
		if total += len(s.GPUs); total > MaxClusterGPUs {
			p.add(ErrInvalidCount, where, "the cluster has more than %d GPUs", MaxClusterGPUs)
			return p.err() // the rest would take as long as the cluster is large
		}
		s.validate(si, where, &v, &p)
	}
	return p.err()
}

// Validate checks one server as [Cluster.Validate] checks each of a
// cluster's (its id, GPUs, links, bandwidths, MIG layouts and limits), for
// code that takes a server on its own. Its problems are located as
// servers[0].
func (s *Server) Validate() error {
	var p problems
	where := func() string { return "servers[0] " + quoteID(s.ID) }
	if s.ID == "" {
		p.add(ErrMalformedSpec, where, "server has no id")
	}
	v := newValidation()
	s.validate(0, where, &v, &p)
	return p.err()
}

// quoteID quotes an id for a message, cut to 64 bytes when it is longer
// than MaxIDLen (the message then says how long it is).
func quoteID(id string) string {
	if len(id) <= MaxIDLen {
		return fmt.Sprintf("%q", id)
	}
	return fmt.Sprintf("%q... (%d bytes)", id[:64], len(id))
}

// checkLabel reports a label of a server or GPU longer than MaxIDLen.
func checkLabel(p *problems, where func() string, what, v string) {
	if len(v) > MaxIDLen {
		p.add(ErrMalformedSpec, where, "%s of %d bytes is longer than %d", what, len(v), MaxIDLen)
	}
}

// validation is what Validate remembers across servers: the UUIDs seen
// so far (with their server and GPU positions) and the matrices checked
// already, by the address of their first row.
type validation struct {
	uuids      map[string][2]int
	links      map[*[]Link]bool
	bandwidths map[*[]float64]bool
	indices    map[int]int
}

func newValidation() validation {
	return validation{uuids: make(map[string][2]int), links: map[*[]Link]bool{}, bandwidths: map[*[]float64]bool{}}
}

// validate checks server si.
func (s *Server) validate(si int, where func() string, v *validation, p *problems) {
	if len(s.GPUs) == 0 {
		p.add(ErrInvalidCount, where, "server has no GPUs")
	}
	if len(s.GPUs) > MaxGPUsPerServer {
		// Its link matrix alone would take as long to check as it has
		// entries.
		p.add(ErrInvalidCount, where, "%d GPUs in one server, more than %d", len(s.GPUs), MaxGPUsPerServer)
		return
	}
	checkLabel(p, where, "server id", s.ID)
	checkLabel(p, where, "rack", s.Rack)
	checkLabel(p, where, "domain", s.Domain)
	if !(s.CPUs >= 0 && s.CPUs <= maxHostCPUs) || !(s.MemoryGiB >= 0 && s.MemoryGiB <= maxHostMemoryGiB) {
		p.add(ErrInvalidCount, where, "%v CPUs and %v GiB of host memory (want 0, unknown, or up to %d and %d)", s.CPUs, s.MemoryGiB, maxHostCPUs, maxHostMemoryGiB)
	}
	if math.IsNaN(s.NICGbps) || math.IsInf(s.NICGbps, 0) || s.NICGbps < 0 {
		p.add(ErrInvalidCount, where, "NIC bandwidth %v Gbit/s (want a finite number >= 0)", s.NICGbps)
	}
	if v.indices == nil {
		v.indices = make(map[int]int, len(s.GPUs))
	}
	clear(v.indices)
	for gi := range s.GPUs {
		g := &s.GPUs[gi]
		gw := func() string { return fmt.Sprintf("%s: gpus[%d]", where(), gi) }
		if err := g.Type.validate(); err != nil {
			p.add(ErrInvalidGPUType, gw, "%s", err.Msg)
		}
		if g.Index < 0 {
			p.add(ErrInvalidCount, gw, "GPU index %d is negative", g.Index)
		} else if prev, dup := v.indices[g.Index]; dup {
			p.add(ErrDuplicateID, gw, "GPU index %d is also the index of gpus[%d]", g.Index, prev)
		} else {
			v.indices[g.Index] = gi
		}
		if g.MemoryMiB <= 0 {
			p.add(ErrInvalidCount, gw, "GPU memory %d MiB (want > 0)", g.MemoryMiB)
		}
		if g.NUMANode < -1 {
			p.add(ErrInvalidCount, gw, "NUMA node %d (want >= 0, or -1 for unknown)", g.NUMANode)
		}
		if err := g.validateMIG(); err != nil {
			p.addErr(gw, err)
		}
		checkLabel(p, gw, "PCI bus id", g.PCIBusID)
		if len(g.UUID) > MaxIDLen {
			checkLabel(p, gw, "UUID", g.UUID)
		} else if g.UUID != "" {
			if prev, dup := v.uuids[g.UUID]; dup {
				p.add(ErrDuplicateID, gw, "GPU UUID %q is also the UUID of servers[%d]: gpus[%d]", g.UUID, prev[0], prev[1])
			} else {
				v.uuids[g.UUID] = [2]int{si, gi}
			}
		}
	}
	// A matrix shared with a server checked already is not checked again.
	if n := len(s.Links); n == 0 || n != len(s.GPUs) || !v.links[&s.Links[0]] {
		if n > 0 && n == len(s.GPUs) {
			v.links[&s.Links[0]] = true
		}
		s.validateLinks(where, p)
	}
	if n := len(s.Bandwidth); n == 0 || n != len(s.GPUs) || !v.bandwidths[&s.Bandwidth[0]] {
		if n > 0 && n == len(s.GPUs) {
			v.bandwidths[&s.Bandwidth[0]] = true
		}
		s.validateBandwidth(where, p)
	}
}

func (s *Server) validateLinks(where func() string, p *problems) {
	if s.Links == nil {
		return
	}
	n := len(s.GPUs)
	if !square(len(s.Links), n, func(i int) int { return len(s.Links[i]) }) {
		p.add(ErrMalformedSpec, where, "link matrix is not %dx%d (one row and one column per GPU)", n, n)
		return
	}
	// at builds the location of a problem only when one is kept.
	at := func(i, j int) func() string {
		return func() string { return fmt.Sprintf("%s: links[%d][%d]", where(), i, j) }
	}
	for i := range n {
		row := s.Links[i]
		if row[i].Class != LinkSelf {
			p.add(ErrUnknownLinkClass, at(i, i), "the diagonal must be X (LinkSelf), got %s", row[i])
		}
		for j := i + 1; j < n; j++ {
			a, b := row[j], s.Links[j][i]
			if err := a.validate(); err != nil {
				p.add(err.Kind, at(i, j), "%s", err.Msg)
				continue
			}
			switch a.Class {
			case LinkSelf:
				p.add(ErrUnknownLinkClass, at(i, j), "X (LinkSelf) may stand only on the diagonal")
				continue
			case LinkUnknown:
				p.add(ErrUnknownLinkClass, at(i, j), "link class is not set; leave Links nil if the topology is unknown")
				continue
			}
			if a != b {
				p.add(ErrAsymmetricLinks, at(i, j), "links[%d][%d]=%s but links[%d][%d]=%s", i, j, a, j, i, b)
			}
		}
	}
}

func (s *Server) validateBandwidth(where func() string, p *problems) {
	if s.Bandwidth == nil {
		return
	}
	n := len(s.GPUs)
	if !square(len(s.Bandwidth), n, func(i int) int { return len(s.Bandwidth[i]) }) {
		p.add(ErrMalformedSpec, where, "bandwidth matrix is not %dx%d (one row and one column per GPU)", n, n)
		return
	}
	at := func(i, j int) func() string {
		return func() string { return fmt.Sprintf("%s: bandwidth[%d][%d]", where(), i, j) }
	}
	for i := range n {
		row := s.Bandwidth[i]
		// A GPU's bandwidth with itself is not used (PairBandwidth gives 0),
		// but a measured matrix may carry it: any finite value >= 0.
		if d := row[i]; math.IsNaN(d) || math.IsInf(d, 0) || d < 0 {
			p.add(ErrInvalidCount, at(i, i), "bandwidth %v GB/s on the diagonal (want a finite number >= 0)", d)
		}
		for j := i + 1; j < n; j++ {
			a, b := row[j], s.Bandwidth[j][i]
			switch {
			case math.IsNaN(a) || math.IsInf(a, 0) || a <= 0:
				p.add(ErrInvalidCount, at(i, j), "bandwidth %v GB/s (want a finite number > 0)", a)
			case a != b:
				p.add(ErrAsymmetricLinks, at(i, j), "bandwidth[%d][%d]=%v but bandwidth[%d][%d]=%v", i, j, a, j, i, b)
			}
		}
	}
}

func square(rows, n int, cols func(int) int) bool {
	if rows != n {
		return false
	}
	for i := range rows {
		if cols(i) != n {
			return false
		}
	}
	return true
}
