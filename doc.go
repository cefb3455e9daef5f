// Package gpusched is a Go SDK of GPU-cluster scheduling algorithms for
// deep-learning workloads: heterogeneity-aware allocation policies (the Gavel
// family), communication-aware placement, gang admission and queue policies,
// elastic scaling, and a trace-driven simulator that composes them.
//
// The root package holds no code; the work is in its subpackages, layered so
// that the policy packages never import the simulator and the cluster model
// knows nothing of jobs:
//
//	examples/*  ->  sim  ->  allocation, placement, gang, elastic
//	                              |
//	                              v
//	                          perfmodel  ->  topology
//
// The packages:
//
//   - [github.com/gpusched/gpusched/topology]: the cluster model (servers, GPUs,
//     GPU types, pairwise links, bandwidths) and its builders and validation.
//   - [github.com/gpusched/gpusched/perfmodel]: job identities and throughput
//     models, with Gavel's measured table embedded as the default.
//   - [github.com/gpusched/gpusched/allocation]: LP-based allocation policies
//     and the round-based mechanism.
//   - [github.com/gpusched/gpusched/placement]: placement of jobs on servers and GPUs.
//   - [github.com/gpusched/gpusched/gang]: all-or-nothing admission, reservations, backfilling.
//   - [github.com/gpusched/gpusched/elastic]: elastic scaling and capacity loaning.
//   - [github.com/gpusched/gpusched/sim]: the discrete-event simulator and trace loaders.
//
// Packages that need cgo (an LP solver binding, NVML discovery) live in their
// own subpackages, so importing any package above needs no cgo and no system
// library.
package gpusched
