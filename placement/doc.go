// Package placement decides where jobs run: which servers and which GPUs
// inside a server.
//
// Its one job: map the workers of each job to concrete GPUs, given the
// cluster's topology and its current state. Today it holds [GPUChooser],
// the topology-aware choice of GPUs inside a server (link scores after
// NVIDIA's go-gpuallocator best-effort policy, with NVSwitch as one
// full-bandwidth domain; exact branch and bound up to 24 free GPUs, greedy
// plus swaps above), and [Buddy], HiveD's buddy cells for cluster-level
// placement (Zhao et al., OSDI 2020), and [Consolidated], the fewest
// servers for a gang (Tiresias' consolidation).
//
// For ring-all-reduce jobs under communication contention (Yu et al., "On
// Scheduling Ring-All-Reduce Learning Jobs in Multi-Tenant GPU Clusters
// with Communication Contention", MobiHoc 2022) it holds the one-method
// [Placer] seam, the [RingExecutor] that runs jobs slot by slot with
// speeds following perfmodel.RingModel as contention changes, [SJFBCO]
// (Algorithm 1) with [FAFFP] (Algorithm 2, both readings) and [LBSGF]
// (Algorithm 3), and the paper's baselines [ListScheduling], [FirstFit]
// and [Random].
package placement
