// Package placement decides where jobs run: which servers and which GPUs
// inside a server.
//
// Its one job: map the workers of each job to concrete GPUs, given the
// cluster's topology and its current state. It holds [GPUChooser], the
// topology-aware choice of GPUs inside a server (link scores after
// NVIDIA's go-gpuallocator best-effort policy, with NVSwitch as one
// full-bandwidth domain; exact branch and bound up to 24 free GPUs, greedy
// plus swaps above); [Consolidated], the fewest servers for a gang
// (Tiresias' consolidation), over free masks ([ServerPlacer]) or over the
// live [cluster.State] through its index of servers by free GPUs
// ([Consolidated.PlaceOn], topology-aware inside servers with a chooser);
// and [Buddy], HiveD's buddy cells for cluster-level placement (Zhao et
// al., OSDI 2020), which keeps its own cell hierarchy.
//
// For GPUs shared between jobs: [MIGPlanner] chooses MIG layouts (which GPU
// instances of which profiles at which start slices, by NVIDIA's placement
// rules in package topology) that serve demands for profiles on the fewest
// GPUs with the fewest reconfigurations and the least fragmentation, exact
// for small servers and first-fit decreasing above; [FractionPlacer] packs
// requests for fractions of a GPU's memory (time-sliced sharing) by best
// fit or by fragmentation gradient descent, and [Fragmentation] measures
// the free memory that a workload cannot use.
//
// The ring-all-reduce schedulers under communication contention (SJF-BCO
// and its baselines) live in the subpackage placement/ring, which alone
// needs the performance model.
package placement
