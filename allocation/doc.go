// Package allocation holds gpusched's heterogeneity-aware allocation
// policies and the round-based mechanism that turns a fractional allocation
// into concrete rounds.
//
// Its one job: given jobs, their throughput on each GPU type and the GPU
// counts per type (a [Problem]), decide the fraction of time X[m][k] each
// job m should spend on each type k (an [Allocation]), and then which jobs
// run on which GPUs in each round ([Rounds]). The policies follow Gavel
// (Narayanan et al., "Heterogeneity-Aware Cluster Scheduling Policies for
// Deep Learning Workloads", OSDI 2020, sections 3 to 5, and the repository
// stanford-futuredata/gavel at c4fa400), each citing its formulation:
//
//   - [MaxMinFairness]: LAS (Agnostic), heterogeneity-aware, weighted, and
//     with space sharing (exact: a group LP over interchangeable jobs, or
//     column generation over pairs);
//   - [WaterFilling]: iterated max-min with exact bottlenecks from the
//     interior-point solution, flat or hierarchical over entities with
//     fairness or FIFO inside an entity;
//   - [QuotaFairness]: max-min fairness or water filling subject to
//     per-entity guarantees and limits ([Quota], Problem.EntityQuotas),
//     per GPU type or in normalised throughput, idle guarantees lent;
//   - [FinishTimeFairness]: Themis's finish-time fairness, stateful, by an
//     exact bisection over LP feasibility instead of Gavel's SOCP;
//   - [MinMakespan]: the exact single LP instead of Gavel's bisection;
//   - [MaxThroughput]: total throughput, throughput per dollar, with SLOs;
//   - [FIFO] (agnostic, perf, packed), and the baselines [Isolated],
//     [Proportional] and [Gandiva].
//
// Every LP goes through an lp.Solver (the pure-Go interior-point method by
// default), and the LP-based policies say what they solved in
// [Allocation].LP. Policies are plain structs configured by fields; the
// stateful ones (FinishTimeFairness, FIFO, Gandiva) keep their state inside
// and must not be copied after first use.
//
// [Rounds] is Gavel's mechanism with our defaults (a queue per type, types
// fastest first, work-conserving), fed back with [Rounds.Report] and saved
// with [Rounds.Snapshot]; with [CompatGavel] it and [FIFO] are Gavel's code,
// quirks included, and a simulation through them matches Gavel's simulator
// job for job.
package allocation
