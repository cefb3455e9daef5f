// Package topology is gpusched's cluster model: servers, their GPUs and GPU
// types, the pairwise link between every two GPUs of a server, and nominal
// bandwidths. It knows nothing of jobs and needs no cgo.
//
// A [Cluster] is plain data: a list of [Server] values, each holding its
// [GPU] values, a pairwise [Link] matrix and its NIC bandwidth, with optional
// rack and domain labels. Build one with [Homogeneous], [ParseCompact]
// (Gavel's "36:36:36" or "v100:36,p100:36,k80:36"), [ParseJSON] or by hand,
// and check it with [Cluster.Validate]; the builders validate for you.
// Invalid input yields a [*SpecError] whose Kind is one of the Err values of
// this package, so callers can test it with errors.Is. [ParseProduct] maps
// GPU product names, as NVML reports them and as GPU feature discovery
// labels nodes, to well-known types with memory and form factor; NVML
// discovery uses it. A [Discoverer] finds
// the cluster: [Static] reads a spec; the subpackage nvml asks the local
// NVIDIA driver, and returns an error wrapping [ErrNoDriver] without one.
//
// The link classes are those of NVML's topology levels and of nvidia-smi
// topo -m (SYS, NODE, PHB, PXB, PIX, same board, NV#), plus NVSwitch, which
// NVML reports as NVLinks whose remote end is a switch. The ordering of
// classes from farthest to closest follows NVIDIA's go-gpuallocator
// (github.com/NVIDIA/go-gpuallocator, P2PLinkType), and the explicit levels
// (GPU, PCIe switch, socket, node, rack) follow HiveD (Zhao et al., OSDI
// 2020, section 3). Nominal bandwidths are from NVIDIA's product pages:
// NVLink 1 carries 20 GB/s per link and direction, NVLink 2 to 4 carry
// 25 GB/s, NVLink 5 carries 50 GB/s; PCIe 3, 4 and 5 x16 carry about 16, 32
// and 64 GB/s.
package topology
