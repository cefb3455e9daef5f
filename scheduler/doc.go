// Package scheduler is gpusched's composed scheduling core: the part a
// production scheduler embeds (a Kubernetes scheduler plugin, a round-based
// admission controller) and the simulator drives, so that a simulated
// decision and a production one come from one code path, as Gavel's
// simulator and its physical mode share one scheduler (Narayanan et al.,
// OSDI 2020, section 6).
//
// Jobs are keyed by strings (pod-group UIDs, trace ids) and described by a
// [JobSpec]: GPUs, allowed types, rates per type or a performance-model
// key, weight, tenant, priority, elastic range, gang, remaining work. The
// cluster is a live [cluster.State] that the scheduler owns: servers are
// added and removed, GPUs fail and recover through its methods, which
// evict the jobs that held them.
//
// Every [Scheduler.Round] runs these steps:
//
//  1. allocate: for each priority tier, highest first, the policy's
//     allocation over the tier's jobs (allocation.Policy, solved again
//     when jobs come or go, at most every MinResetInterval, or when
//     capacity changes) and Gavel's round mechanism (allocation.Rounds)
//     choose which jobs run on which GPU type; a lower tier sees the GPUs
//     the tiers above leave;
//  2. plan: a job chosen again on the same type and size keeps its GPUs
//     (its lease is extended);
//  3. release: every other lease is released;
//  4. place: the other jobs are placed, largest first, by
//     placement.Consolidated over the state's index of servers by free
//     GPUs (best fit on one server, else the fewest servers), with
//     placement.GPUChooser inside a server; a job that asks for one
//     server waits rather than spread;
//  5. admit gangs: a gang some of whose jobs found no GPUs does not run;
//  6. refill: when a gang was dropped, the GPUs left free go to the jobs
//     and gangs that wait (the dropped gang's included), highest priority
//     first, then least attained service, each job on the fastest type
//     where the placer finds it room, a gang whole or not at all (with
//     LeaveIdle, only as many GPUs as the dropped gangs freed), so that
//     no GPU a waiting job or gang could use stays idle because a gang
//     was dropped;
//  7. consolidate: a kept job spread over several servers moves to fewer
//     when the speed gained over the round exceeds the migration cost;
//  8. grow: GPUs left over go to elastic jobs by Lyra's knapsack;
//  9. publish: the assignments, with devices by server id and NVML index,
//     and the fate of every other job (Round.Waiting, Round.Finished).
//
// A job's fate ([JobState], [Reason]) is visible in each Round and in
// [Scheduler.Status]: it waits (new, no capacity this round, no room on
// the servers, preempted, its gang incomplete), runs, has finished (its
// known remaining steps reached 0 at a report: it leaves the rounds and
// is listed once), or is unrunnable (no type present it may run on, no
// rate for any, larger than the cluster or, for a SingleServer job, than
// any server of its types, or a job of its gang unrunnable): an
// unrunnable job takes no share of the policy's allocation, and is looked
// at again when servers join or leave or its spec changes.
//
// [Scheduler.Report] then says what really ran (and what failed to
// start), and only that is credited to the mechanism, with the GPU time
// jobs held outside their turn (a preempted job's processes still
// stopping: [RoundReport.Held], charged in GPU-seconds over the job's
// GPUs); a round without a report is credited in full.
// [Scheduler.Snapshot] and [Scheduler.Restore] carry the whole state
// across a restart, exactly: a restored scheduler
// makes the rounds the one that took the snapshot would have made, and a
// snapshot taken on another cluster or configuration is refused with a
// [*MismatchError]; [Scheduler.Adopt] loads such a snapshot and says
// what it dropped. [Scheduler.Bind] rebuilds leases from what the outside
// world records (pod annotations). docs/embedding.md is the contract for
// an embedder: rounds, reports, restarts, fates of jobs, concurrency.
// Config.Logger and Config.OnRound observe every round ([RoundStats]).
//
// A Scheduler is safe for concurrent use.
package scheduler
