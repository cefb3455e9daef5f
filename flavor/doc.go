// Package flavor models how Kueue (kubernetes-sigs/kueue, v0.17) chooses
// a workload's ResourceFlavor, and so its GPU type, and how gpusched
// steers that choice with a heterogeneity-aware allocation policy. The
// simulator runs both as event-driven schedulers ([Kueue], [Steered]), so
// that a user can predict on a trace what gpusched adds to a Kueue
// cluster before deploying it; the Kubernetes controller kube/kueue makes
// its decisions with the same [Steerer] on the live cluster.
//
// # Kueue's flavor assignment
//
// A ClusterQueue ([Queue]) lists, per resource group, flavors in order,
// each with a nominal quota and optional borrowing and lending limits
// (ClusterQueue spec.resourceGroups[].flavors[].resources[]). For a
// pending workload Kueue walks the flavors of the group that covers the
// resource in that order ([Walk]; Kueue's FlavorAssigner,
// findFlavorForPodSets in its package pkg/scheduler/flavorassigner):
//
//   - a flavor whose nodeLabels the workload's node selector or required
//     node affinity rejects, for the label keys the group's flavors use,
//     is skipped ("flavor ... doesn't match node affinity": checkFlavorForPodSets
//     with flavorSelector); so is one whose taints it does not tolerate;
//   - otherwise the request is checked against the quota left
//     (fitsResourceQuota): more than the flavor could ever give, even
//     borrowing (PotentialAvailable), is no fit; within what is available
//     now (Available) it fits, possibly by borrowing from the cohort;
//     otherwise it fits only by preemption;
//   - the flavor fungibility of the ClusterQueue (spec.flavorFungibility,
//     "Flavor fungibility" in Kueue's ClusterQueue concepts page,
//     https://kueue.sigs.k8s.io/docs/concepts/cluster_queue/#flavorfungibility)
//     says when the walk stops: by default whenCanBorrow is MayStopSearch
//     (the first flavor that fits stops the walk, borrowing or not) and
//     whenCanPreempt is TryNextFlavor (a flavor that fits only by
//     preemption is remembered and the walk goes on); with whenCanBorrow
//     TryNextFlavor a flavor that needs borrowing is remembered too, and
//     the walk takes the first that fits without borrowing, else the best
//     remembered (isPreferred: less borrowing first).
//
// The simulator ([Kueue], [Steered]) models fits without preemption: a
// workload that fits nowhere waits, and its jobs run to completion once
// admitted, as they do under Kueue without preemption. The [Steerer]
// models Kueue's classical preemption too (a ClusterQueue's
// spec.preemption, [Preemption]: reclaiming nominal quota lent to the
// cohort, by priority within the ClusterQueue, and while borrowing): a
// pending workload that fits nowhere but that Kueue would admit by
// preempting running ones gets [Preempt], so that the controller hands it
// to Kueue's preemption instead of holding it. Only the workloads of the
// policy's problem are so walked (at most Steerer.MaxJobs; those Outside
// wait behind them in their queue's order, as Kueue considers each
// queue's heads in a cycle).
//
// Quota ([Quotas]) follows Kueue's accounting over a ClusterQueue and its
// cohort (available and potentialAvailable of Kueue's resource nodes,
// pkg/cache/scheduler; lending limits from KEP-1224): a ClusterQueue
// keeps nominal - lendingLimit of a flavor to itself (its local quota),
// lends the rest to its cohort, and may take from the cohort what the
// other members lend and do not use, up to its borrowingLimit. Cohorts are
// flat here (one level; Kueue's hierarchical cohorts, KEP-79, are not
// modelled).
//
// The order in which pending workloads are tried is Kueue's
// BestEffortFIFO by default (spec.queueingStrategy; higher priority first,
// then older, a workload that does not fit does not block the others);
// with StrictFIFO the first workload of a ClusterQueue that does not fit
// blocks those behind it in that queue.
//
// # What gpusched adds
//
// Kueue's walk takes the first flavor with room, whatever the job: a job
// that runs eight times faster on a V100 than on a K80 starts on a K80 if
// that is first in the list (kubernetes-sigs/kueue#312), and fair sharing
// counts every GPU alike (kubernetes-sigs/kueue#8902). The [Steerer] solves
// a gpusched allocation policy (any [allocation.Policy]: Gavel's
// heterogeneity-aware max-min fairness by default, Narayanan et al., OSDI
// 2020, section 4) over the running and pending workloads, with the
// ClusterQueues as the policy's entities (their fair-sharing weights, and
// their nominal quotas and borrowing limits as guarantees and limits for
// allocation.QuotaFairness) and the flavors' quotas as capacity. Running
// workloads keep their type (the policy sees them only there); each
// pending workload is then started on a type where its ClusterQueue has
// quota left, in the order of the policy's time shares X (Gavel's round
// mechanism gives GPUs to jobs by X over the rounds they received, which
// is X for a job that never ran), or steered to the type the policy gives
// it most of, to wait there. See docs/kueue.md.
//
// # The wait rule for slow types
//
// Gavel's policies assume a job can move at the next round; a Kueue
// workload runs on its flavor for its life. With [Steerer.Patience] set, a
// pending workload starts on a type slower than its fastest only once it
// has waited what running there would cost it (its remaining time on its
// fastest type times the slowdown less one, times Patience); until then it
// waits for a faster type ([Held]). Patience 1 is the break-even rule of
// ski rental (Karlin et al., 1988): within twice the better of starting at
// once and waiting, when the remaining time is known. In the event engine [Steered] asks to be woken when a
// wait ends (gang.Decision.Wake).
package flavor
