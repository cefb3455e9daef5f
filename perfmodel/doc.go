// Package perfmodel knows how fast jobs run on hardware: job identities and
// throughput models, with Gavel's measured throughput table embedded as the
// default. It knows jobs and hardware, not policies.
//
// A [JobKey] names a job the way Gavel's throughput table does: a model, its
// batch size, and the scale factor (the number of GPUs it asks for). A
// [ThroughputModel] gives a job's steps per second on a GPU type; a
// [ColocationModel] gives the rates of two jobs sharing one GPU (space
// sharing). [*Table] implements both from a file in Gavel's format, and
// package perfmodel/gavel returns the tables of Gavel, embedded in the binary.
// [FittedColocation] is a second ColocationModel: measured pairs where the
// table has them, a least-squares fit (gonum) for pairs it lacks.
//
// [SpecModel] predicts rates on GPU types a job was never measured on from
// the types' hardware specifications (compute rate in the job's precision
// and memory bandwidth; a log-linear model with per-job intercepts fitted
// to measured types, reported by leave-one-type-out error), and the rates
// of MIG slices and time-sliced fractions of a GPU from their shares of
// compute and bandwidth; every predicted value is marked as predicted
// ([Estimate]). The subpackage perfmodel/hw embeds NVIDIA's data-sheet
// specifications and MLPerf Training results of A30 to B200 servers.
//
// [RingModel] is the per-iteration time of ring-all-reduce training under
// communication contention, with [Contention] counting contenders (Yu, Ji,
// Rajan and Liu, ACM MobiHoc 2022, section 4.1, equations 6 to 8).
//
// Source of the data and of its format: Narayanan et al.,
// "Heterogeneity-Aware Cluster Scheduling Policies for Deep Learning
// Workloads", OSDI 2020, section 6 (throughput estimation) and the
// repository stanford-futuredata/gavel at commit c4fa400:
// scheduler/simulation_throughputs.json, read by
// scheduler/utils.py:read_all_throughputs_json_v2. The measured files ship,
// embedded with their MIT licence, in the subpackage perfmodel/gavel, so
// that only a binary that uses them carries them.
package perfmodel
