// Package ring schedules ring-all-reduce jobs under communication
// contention (Yu, Ji, Rajan and Liu, "On Scheduling Ring-All-Reduce
// Learning Jobs in Multi-Tenant GPU Clusters with Communication
// Contention", MobiHoc 2022).
//
// It holds the one-method [Placer] seam, the [Executor] that runs jobs
// slot by slot with speeds following perfmodel.RingModel (eq. 6-8) as
// contention changes, on the live cluster state of package cluster (each
// running job holds its GPUs there under [HolderKey], so rings share a
// cluster with other work and failed GPUs stay idle; [Executor.RunOn]),
// [SJFBCO] (Algorithm 1) with [FAFFP] (Algorithm 2, both readings) and [LBSGF] (Algorithm 3), and the paper's baselines
// [ListScheduling], [FirstFit] and [Random]. It lives apart from package
// placement so that a binary choosing GPUs or admitting gangs does not
// carry the performance model.
package ring
