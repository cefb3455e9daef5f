// Package allocation will hold gpusched's heterogeneity-aware allocation
// policies and the round-based mechanism that turns a fractional allocation
// into concrete rounds.
//
// Its one job: given jobs, their throughput on each GPU type and the GPU
// counts per type, decide the fraction of time X[m][j] that each job m should
// spend on each type j. The policies follow Gavel (Narayanan et al.,
// "Heterogeneity-Aware Cluster Scheduling Policies for Deep Learning
// Workloads", OSDI 2020, sections 3 and 4: max-min fairness, finish-time
// fairness, makespan, throughput, cost, FIFO, hierarchical, with and without
// space sharing) and the round-based mechanism of its section 5.
//
// Status: the package is laid out but holds no policy yet; see the README's
// feature table.
package allocation
