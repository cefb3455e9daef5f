// Package gpusched is a Go SDK of GPU-cluster scheduling algorithms for
// deep-learning workloads: heterogeneity-aware allocation policies (the Gavel
// family), communication-aware placement, gang admission and queue policies,
// elastic scaling, a composed scheduling core that a production scheduler
// embeds, and a trace-driven simulator that drives the same core.
//
// The root package holds no code; the work is in its subpackages, layered so
// that the policy packages never import the core or the simulator and the
// cluster model knows nothing of jobs:
//
//	examples/*  ->  compare  ->  sim  ->  scheduler  ->  allocation, placement, gang, elastic
//	                                              |                  |
//	                                              v                  v
//	                                          perfmodel     cluster (live state)
//	                                              |                  |
//	                                              +--->  topology  <-+
//
// The packages:
//
//   - [github.com/gpusched/gpusched/scheduler]: the composed core: jobs by
//     key, rounds, reports of what ran, snapshots, failures.
//   - [github.com/gpusched/gpusched/topology]: the cluster model (servers, GPUs,
//     GPU types, pairwise links, bandwidths, MIG) and its builders and validation.
//   - [github.com/gpusched/gpusched/cluster]: the live cluster state: who holds
//     each GPU, its health, free counts.
//   - [github.com/gpusched/gpusched/perfmodel]: job identities and throughput
//     models, with Gavel's measured table embedded in perfmodel/gavel, the
//     spec model in perfmodel/hw, and rates learned from progress in
//     perfmodel/learn.
//   - [github.com/gpusched/gpusched/allocation]: LP-based allocation policies
//     and the round-based mechanism; allocation/lp is the LP solver.
//   - [github.com/gpusched/gpusched/placement]: placement of jobs on servers
//     and GPUs; placement/ring is ring-all-reduce placement (SJF-BCO).
//   - [github.com/gpusched/gpusched/gang]: all-or-nothing admission, queue
//     orders, backfilling.
//   - [github.com/gpusched/gpusched/elastic]: elastic scaling, capacity
//     loaning, Pollux's goodput, Sia.
//   - [github.com/gpusched/gpusched/multires]: CPUs and memory beside the
//     GPUs: throughput surfaces, Synergy's model zoo, and its allocators
//     (GPU-proportional, GREEDY, TUNE and the OPT bound).
//   - [github.com/gpusched/gpusched/flavor]: how Kueue chooses a workload's
//     flavor (GPU type), and gpusched's steering of that choice.
//   - [github.com/gpusched/gpusched/sim]: the simulator's engines and trace loaders.
//   - [github.com/gpusched/gpusched/compare]: policies side by side on the
//     simulator: the baselines defined once, a user's policy beside them,
//     every metric as a table (text, Markdown, CSV, JSON) and plots.
//
// Packages that need cgo (an LP solver binding, allocation/lp/clp; NVML
// discovery, topology/nvml) live in their own subpackages behind build
// tags, so importing any package above needs no cgo and no system library;
// allocation/lp/lptest holds the tests every LP backend passes. The
// examples folder holds runnable programs; internal holds helpers of no
// use outside. The Kubernetes parts are the nested module kube. The repository's docs folder has a guide per
// audience: embedding the core, the simulator, Kubernetes, reproductions of
// the papers, benchmarks, input limits and the architecture.
package gpusched
