// Package elastic scales jobs between a minimum and a maximum number of
// workers and loans capacity between inference and training clusters.
//
// Its one job: choose how many workers each elastic job gets, where they
// go, and which servers to loan or reclaim. The seams are small: a [Curve]
// gives a job's throughput on w workers ([Linear], [Table], or a
// simulator's goodput curve), and a [Policy] maps job states and a GPU
// count to workers per job.
//
// Policies: [Lyra]'s two-phase allocation (Li et al., "Lyra: Elastic
// Scheduling for Deep Learning Clusters", EuroSys 2023, section 5.2: SJF
// for base demands, then [MultipleChoiceKnapsack] over extra workers),
// [AFS]-style relative marginal gain (Hwang et al., NSDI 2021), [Optimus]-
// style greedy time saved (Peng et al., EuroSys 2018), [Pollux]-style
// power mean of goodput speedups (Qiao et al., OSDI 2021), [Tiresias]'s
// 2D-LAS and 2D-Gittins over gang's orders (Gu et al., NSDI 2019), and
// [FIFO].
//
// Heterogeneous clusters: [Pool]s of GPU types, jobs with a [Curve] per
// pool, and a [TypedPolicy] that chooses each job's pool and workers:
// [Sia] (Jayaram Subramanya et al., SOSP 2023: configurations per GPU
// type and count, bootstrapped goodput estimates, the restart factor,
// and its integer program solved exactly by [SolveChoice], branch and
// bound over allocation/lp), and [Unaware], which runs any Policy blind
// to types.
//
// Capacity: [Cluster] is the orchestrator's API: it loans whole servers,
// reclaims them with Lyra's heuristic ([Reclaim], checked against the
// exhaustive [ReclaimOracle]) and applies the preemptions, and places jobs
// best fit decreasing in Lyra's server groups (or packed), on a live
// cluster state of package cluster (jobs hold their GPUs there under
// [HolderKey]): one of its own ([NewCluster]) or the one that the other
// packages share ([NewClusterOn]).
//
// Goodput: [PerfParams] is Pollux's step-time model, fitted to measured
// steps by [FitPerfParams] (gonum's Nelder-Mead); [GradStats] gives the
// statistical efficiency of a batch size; [Goodput] chooses the batch and
// micro-batch of the highest goodput on an allocation.
package elastic
