// Package elastic will scale jobs between a minimum and a maximum number of
// workers and loan capacity between inference and training clusters.
//
// Its one job: choose how many workers each elastic job gets, and which
// servers to loan or reclaim. Planned: Lyra's capacity loaning and two-phase
// allocation (Li et al., "Lyra: Elastic Scheduling for Deep Learning
// Clusters", EuroSys 2023), AFS-style marginal-gain scaling (Hwang et al.,
// NSDI 2021), Optimus-style greedy scaling (Peng et al., EuroSys 2018) and a
// Pollux-style goodput policy (Qiao et al., OSDI 2021).
//
// Status: it holds Lyra's phase-2 multiple-choice knapsack
// ([MultipleChoiceKnapsack], [ScalingItems]) and its reclaiming heuristic
// with an exhaustive oracle ([Reclaim], [ReclaimOracle]); the rest is
// planned (see the README's feature table).
package elastic
