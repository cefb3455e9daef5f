// Package nvml discovers the local server's GPUs and their topology through
// NVIDIA's management library (NVML), with the bindings of
// github.com/NVIDIA/go-nvml. It needs cgo, which is why it is not part of
// package topology: importers of topology need no cgo and no library.
//
// The NVML implementation is built only with the build tag nvml
// (go build -tags nvml), like the CLP backend's tag clp, so that a plain
// build or go test ./... compiles no cgo. Without the tag the package
// still builds: [Discoverer.Discover] returns an error wrapping
// topology.ErrNoDriver that says to rebuild with -tags nvml, and
// [TypeOf] works as ever.
//
// Where no driver is present, Init fails, and any NVML call after that
// kills the process (seen: "symbol lookup error", exit status 127, which
// recover cannot catch); Discover therefore stops at a failed Init and
// returns an error wrapping topology.ErrNoDriver.
//
// The link between two GPUs comes from GetTopologyCommonAncestor (board,
// one or several PCIe switches, host bridge, NUMA node, system), NVLinks
// from GetNvLinkState and GetNvLinkRemotePciInfo matched to the peers' bus
// ids, and NVSwitches from GetNvLinkRemoteDeviceType: GPUs whose links end
// at switches form one full-bandwidth domain.
package nvml
