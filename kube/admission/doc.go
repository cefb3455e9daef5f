// Package admission is a heterogeneity-aware, round-based admission
// controller for Kubernetes: Gavel's policies and round mechanism
// (Narayanan et al., OSDI 2020, sections 3 to 5) run on a live cluster
// through gpusched's scheduling core (scheduler.Scheduler).
//
// Workloads are created held back by a scheduling gate ([GateName] in
// spec.schedulingGates of a pod, or of a batch/v1 Job's pod template, the
// Job created suspended). Every round the [Controller]:
//
//  1. reads the nodes (GPU feature discovery labels, kube/model) into the
//     core's live cluster, and the gated or admitted workloads into jobs:
//     one bare pod, one pod group (gpusched.io/pod-group label and
//     gpusched.io/min-member annotation, admitted whole), or one Job
//     (parallelism x the template's GPUs). A workload that cannot be read
//     gets a Warning event and is skipped; the others go on;
//  2. runs the core's round: the allocation policy (any
//     allocation.Policy: max-min fairness, weighted or hierarchical
//     water-filling with tenants from the namespace or a queue label,
//     finish-time fairness, makespan, cost, FIFO) and the round mechanism
//     choose which jobs run and on which GPU type;
//  3. admits the chosen jobs: node affinity to the products of the type
//     (nvidia.com/gpu.product In [...], plus Config.NodeSelector), the
//     gate removed (for a Job: the gate removed from the template and
//     spec.suspend cleared);
//  4. preempts the jobs that lost their lease: a Job is suspended (the
//     job controller deletes its pods; the API server allows the template
//     to change again, for the next admission, once the Job is suspended
//     with no active pod); a bare pod is annotated with the reason
//     ([AnnotationPreempted]) and deleted after Config.Grace, then created
//     again, gated, under the same name, so it waits for a later round.
//     With Config.NoPreemption a job once admitted runs to its end
//     (admission only, as Kueue does) and jobs are admitted only into
//     free capacity;
//  5. saves the core's Snapshot and its own state in a ConfigMap, from
//     which a restarted controller continues as if it had not stopped.
//
// Throughputs: the annotation [AnnotationThroughput] ("v100=3.2,k80=1")
// gives a job's rates per type in steps per second; else
// [AnnotationJobKind] (with [AnnotationBatchSize]) looks them up in
// Config.Throughput (default: Gavel's measured table,
// perfmodel/gavel.Simulation) for the job's GPU count, GPU types coming
// from the nodes' product labels through topology.ParseProduct; a job
// with neither, or of a kind the model does not know, runs at
// Config.DefaultThroughput (default 1 step/s) on every type, which makes
// the policies heterogeneity-agnostic for it.
//
// The controller assumes it owns the GPUs of the nodes it selects.
package admission
