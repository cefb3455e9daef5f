// Package placement will decide where jobs run: which servers and which GPUs
// inside a server.
//
// Its one job: map the workers of each job to concrete GPUs, given the
// cluster's topology and its current state. The algorithms planned here are
// SJF-BCO with FA-FFP and LBSGF (Yu et al., "On Scheduling Ring-All-Reduce
// Learning Jobs in Multi-Tenant GPU Clusters with Communication Contention",
// MobiHoc 2022, Algorithms 1-3) and its baselines (First-Fit,
// List-Scheduling, Random), consolidated placement, and topology-aware GPU
// choice inside a server.
//
// Status: the package is laid out but holds no placer yet; see the README's
// feature table.
package placement
