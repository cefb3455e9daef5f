// Package kueue makes gpusched the heterogeneity-aware brain of Kueue
// (kubernetes-sigs/kueue, v0.17): a controller that chooses each pending
// Kueue workload's GPU type with a gpusched allocation policy and steers
// Kueue to it, leaving Kueue to admit, account quota, preempt and place
// as usual.
//
// Kueue picks a workload's ResourceFlavor by walking its ClusterQueue's
// flavors in order and taking the first with room (package flavor models
// the walk). The [Controller] watches Kueue's Workloads, ClusterQueues,
// LocalQueues and ResourceFlavors, and the namespaces' labels, through
// shared informers (a state index on Workloads: pending, reserved, done),
// and at every change (at most
// every Config.MinInterval, at least every Config.Interval) runs a round:
//
//  1. the GPU types are those of the flavors (a flavor's node label
//     nvidia.com/gpu.product, Config.TypeLabel, names its GPU; else its
//     label gpusched.io/gpu-type); each ClusterQueue that covers
//     nvidia.com/gpu (Config.Resources) is a tenant, with its fair-sharing
//     weight, its
//     flavors in order with their nominal quotas and borrowing and lending
//     limits, its cohort, its preemption policies (flavor.Quotas: Kueue's
//     quota accounting);
//  2. the Workloads with quota reserved are charged to their flavors; the
//     pending ones of gpusched's queues whose namespace the ClusterQueue's
//     namespaceSelector selects (as in Kueue, a ClusterQueue without one
//     takes no namespace's workloads; the others are no demand of that
//     queue, and a gated one stays gated) are read: GPUs (pod sets x GPUs per
//     pod, init containers and sidecars counted as Kubernetes does), the
//     types they may run on (their own node selector on the
//     type label, the gpusched.io/gpu-types annotation of the pod
//     template), trusted rates (the pod template's gpusched.io/throughput
//     or gpusched.io/job-kind annotations through the admin's performance
//     model, read by model.ClaimedRates as the admission controller reads
//     them, normalized by tenancy.RateRules.Trusted: see kube/SECURITY.md),
//     priority and creation time;
//  3. flavor.Steerer decides, with the policy, which pending workloads
//     start now on which type, and which type each other one waits for;
//  4. the decisions are carried out. A Workload that carries the
//     controller's admission gate (kueue.x-k8s.io/admission-gated-by:
//     gpusched.io/kueue, Kueue's alpha AdmissionGatedBy feature) waits
//     until it starts: then its pod sets' node selector gets the chosen
//     type and the gate is removed from its job (Kueue copies the job's
//     gate to the Workload), so Kueue admits it at once on that type. A
//     Workload without the gate (Kueue's features as they are) is steered
//     while it waits: its pod sets' node selector names the type it starts
//     on or waits for, and is changed at each round while Kueue has not
//     reserved quota for it (Kueue's webhook allows pod sets to change
//     until then), so Kueue's flavor walk can only take a flavor of that
//     type. Events on the Workload (kubectl describe workload) say where
//     it was steered and why, or why it waits.
//
// The controller never touches a Workload Kueue has reserved quota for:
// admitted workloads run where Kueue put them, and Kueue's own preemption
// (by priority, or reclaiming lent quota) is the only one; a preempted
// workload is pending again and steered anew. A gated workload never
// reaches Kueue's scheduler, so the controller reads each ClusterQueue's
// spec.preemption and releases a pending workload that fits nowhere but
// that Kueue would admit by preemption (flavor.Preempt: reclaiming quota
// its ClusterQueue lent, by priority within it, or while borrowing) to
// Kueue, on the flavor where that preemption applies, with a
// GPUSchedReleased event that says what Kueue would preempt. A Workload
// the controller cannot read (a malformed annotation, a node affinity on
// the type label, a GPU resource it does not steer) gets a Warning event
// that names the field at fault; a gated one stays gated (a tenant cannot
// shed the gate by writing garbage: it fixes the field, or an admin
// removes the gate), an ungated one is left to Kueue's own flavor walk.
// The controller keeps no state: every decision is derived from the
// objects (arrival times are creation times, IDs follow names), so a
// restarted controller decides as the one before it. The exception is
// learning (Config.Estimator, gpusched-kueue --learn, issue #41): the
// workloads' rates are then the estimator's, learned from the progress
// their pods report through the progress channel (kube/progress; the
// controller is its resolver, Workload, and sink, Progress), on the type
// and GPUs of the flavor Kueue admitted each on; a Workload never moves,
// so what a run measured reaches the next runs of its program through
// their group (model.ProgramGroup). What was learned is kept across
// restarts in a ConfigMap (Config.StateNamespace, Controller.Save).
//
// Only kueue.x-k8s.io/v1beta2 is read, through the dynamic client, into
// small structs of this package such as [Workload] (importing Kueue's own
// API package would bring controller-runtime and Kueue's k8s.io v0.35
// module graph into this module for a few field names). See docs/kueue.md.
package kueue
