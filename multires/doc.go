// Package multires gives jobs CPUs and memory beside their GPUs: Synergy
// (J. Mohan, A. Phanishayee, J. Kulkarni, V. Chidambaram, "Synergy:
// Looking Beyond GPUs for DNN Scheduling on Multi-Tenant Clusters", OSDI
// 2022). Schedulers give a job the CPUs and memory of its servers in
// proportion to its GPUs; jobs differ widely in what they do with them (an
// image model's data loading may run 2.9x faster with 12 CPUs per GPU
// than with 3, a language model's not at all), so a split that follows
// each job's sensitivity runs the same jobs faster.
//
// The model: a [Share] is CPUs and memory per GPU; a [Surface] is a job's
// rate as a function of its share, relative to its rate at the
// proportional share; a [Profile] is a kind of job's surface, iteration
// time and best-case demand; [Zoo] is Synergy's model zoo (embedded, MIT);
// [ReadProfiles] reads profiles of one's own; a [Profiler] builds a
// surface by Synergy's optimistic profiling and from observed progress.
//
// The allocators, behind one interface ([Allocator]): [Proportional], the
// baseline; [Greedy] (Synergy-GREEDY); [Tune] (Synergy-TUNE); [Opt]
// (Synergy-OPT's linear program, its bound or a rounding of it, solved by
// package allocation/lp). Each places the jobs of a round, in a queue
// policy's order, on [Server]s, and returns a [Plan]. The simulator's
// sim.RunSynergy runs them under FIFO, SRTF, LAS and finish-time
// fairness, on Synergy's workload (sim.SynergyWorkload).
//
// Every input is checked and bounded (MaxGrid, MaxRate, MaxServers,
// MaxJobs); errors are [*Error]s naming the kind and where.
package multires
