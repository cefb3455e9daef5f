// Package admission is a heterogeneity-aware, round-based admission
// controller for Kubernetes: Gavel's policies and round mechanism
// (Narayanan et al., OSDI 2020, sections 3 to 5) run on a live cluster
// through gpusched's scheduling core (scheduler.Scheduler).
//
// The controller manages the GPU workloads of the namespaces its admin's
// tenancy (package kube/tenancy, Config.Tenancy or Config.TenancyConfigMap)
// assigns to tenants. They are created held back by a scheduling gate
// ([GateName] in spec.schedulingGates of a pod, or of a batch/v1 Job's pod
// template, the Job created suspended), which the MutatingAdmissionPolicy
// of kube/deploy adds to every GPU pod and Job of a managed namespace.
//
// The controller watches rather than lists: shared informers (client-go)
// keep the pods (indexed by workload), Jobs, selected nodes,
// PriorityClasses and the tenancy ConfigMap, and a round reads their
// caches, so that its requests are its writes and the state's save (its
// own writes override the caches until the watches deliver them). A pod
// or Job that a watch shows running without admission is preempted at
// the next [Controller.Sweep], not the next round.
//
// Every round the [Controller]:
//
//  1. reads the nodes (GPU feature discovery labels, kube/model) into the
//     core's live cluster, and the gated or admitted workloads into jobs:
//     one bare pod, one pod group (gpusched.io/pod-group label and
//     gpusched.io/min-member annotation, admitted whole, arriving when it
//     is complete), or one Job (min(parallelism, completions) x the
//     template's GPUs; a pod is the Job's only if it really is one of its
//     pods: the Job's UID and selector, the template's GPUs, among the
//     oldest live ones). What a workload asks for is read again every
//     round: one whose GPUs changed is re-admitted at its new size
//     against its share, preempted first if it ran with more than it was
//     admitted for ([ReasonResized]). A workload that cannot
//     be read gets a Warning event and is skipped; the others go on;
//     Each job's tenant is its namespace's, its queue the one its
//     [LabelQueue] label names among those its namespace may use; its
//     weight, priority cap and expected work come from the queue. A GPU
//     workload that runs without the controller's admission (its gate
//     removed, or never added) is preempted and reported (Warning event
//     [ReasonBypass]): a Job suspended, a pod deleted and created again
//     gated;
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
//     again, gated, under the same name, from a signed copy, so it waits
//     for a later round. No pod takes longer than Config.MaxDeletionGrace
//     to go (its own grace is capped, a longer deletion cut short, one
//     still there past it force-deleted), and until gone a terminating
//     pod's GPUs are out of the core's plan, and the GPU time a preempted
//     workload's pods hold is charged to it (counted at every sweep,
//     reported with the round: scheduler.RoundReport.Held). With
//     Config.NoPreemption a
//     job once admitted runs to its end (admission only, as Kueue does)
//     and jobs are admitted only into free capacity;
//  5. saves the core's Snapshot and its own records (what it admitted,
//     on which type; what it preempted; the round's report, sent to the
//     core when the round is over, at the next round's start, with what
//     it measured meanwhile) and, learning (Config.Estimator, if its
//     state can be saved: *learn.Learner), what the estimator learned,
//     in ConfigMaps of its own namespace, from which a restarted
//     controller continues as if it had not stopped (the estimator
//     restored first, then the core; reports after the last save are
//     lost). A saved estimator state that cannot be restored is a
//     Warning event [ReasonLearnerState] and the estimator learns
//     afresh, the rest restored; so is a state too large to keep it,
//     saved without it (the estimator's snapshot takes about 1.9 KB per
//     active job measured on 8 types and 0.2 KB per remembered one,
//     compressed 3.6 times: 10,000 of each take 5.6 MiB of the state's
//     56 MiB, TestLearnerStateSize);
//  6. tells each workload where it stands: an event when that changes
//     (client-go's broadcaster, which aggregates and rate-limits them) and
//     the pod condition [ConditionAdmitted], with the reason it waits
//     ([ReasonNoCapacity], [ReasonQuota], [ReasonGangIncomplete],
//     [ReasonUnrunnable], [ReasonAwaitingGPUs], [ReasonWaiting]), where it
//     was admitted and why, or why it was preempted; and sets its
//     [Metrics] (gpusched_admission_*: round and solve times, the LP's
//     size, requests per round, workloads by tenant, type and state, each
//     tenant's share beside its fair share, preemptions by reason).
//
// # What it trusts
//
// Only the controller's own records say what runs: the decision
// annotations it writes ([DecisionAnnotations]: admitted type and time,
// preemption, deletion deadline, count) are for people and are never read
// back, and the ValidatingAdmissionPolicy of kube/deploy refuses them on
// tenants' writes. What a tenant writes on its workload is a hint,
// bounded: the GPUs it asks for and the types it allows (it can only
// narrow its own chances); its rates (the annotation
// [model.AnnotationThroughput], "v100=3.2,k80=1", else
// [model.AnnotationJobKind] with [model.AnnotationBatchSize] looked up in
// Config.Throughput, default Gavel's measured table
// perfmodel/gavel.Simulation; read by [model.ClaimedRates], as the Kueue
// controller reads them), used only relative to each other, within
// the admin's ratio, at the admin's reference rate on the job's fastest
// type (tenancy.RateRules.Trusted), so that every policy compares jobs in
// normalized throughput; a job with neither runs at the reference rate on
// every type. Weights ([AnnotationWeight]), remaining work
// ([AnnotationSteps]) and attained service never come from the tenant:
// weights are the admin's (tenant and queue), remaining work the queue's
// expected run time counted down by the rounds the job ran, attained
// service what the core measured in the rounds it ran and what its pods
// held after its leases ended. Priority follows
// the cluster's PriorityClasses (a Job's, its template's class looked
// up), capped by the queue's maxPriority. A tenant's jobs enter the
// rounds up to its MaxJobs and its part of the tenancy's (water-filled by
// the tenants' weights), oldest first. The policy of a shared
// cluster is [DefaultPolicy], fair per tenant.
//
// The saved state is bounded whatever tenants write, and a state the
// controller cannot read gets a Warning event ([ReasonBadState]) and a
// clean start, never an error at start (with the estimator's state put
// back as it was before the load): see kube/SECURITY.md.
//
// The controller assumes it owns the GPUs of the nodes it selects.
package admission
