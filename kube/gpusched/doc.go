// Package gpusched is gpusched's Kubernetes scheduler plugin: one plugin,
// named GPUSched, for the scheduler framework's extension points, built into
// a scheduler binary with app.NewSchedulerCommand(app.WithPlugin(Name, New))
// (see cmd/gpusched-scheduler) and enabled by a KubeSchedulerConfiguration
// profile (see deploy/).
//
// The plugin keeps a device-level ledger: a cluster.State over the GPU nodes
// (servers from model.ParseNode: type, count, memory, links, health), whose
// holders are pod UIDs. What each extension point does, and which part of
// gpusched it calls:
//
//   - QueueSort orders pending pods by priority (spec.priority, which the
//     API server sets from the pod's PriorityClass), then by one of gang's
//     orders on the job the pod belongs to: FIFO (gang.ByArrival), SRTF
//     (gang.ShortestRemaining, on the admin's model: Args.ExpectedSeconds
//     less the service received), Tiresias's 2D-LAS (gang.LAS2D) or
//     2D-Gittins (gang.Gittins2D) on the attained service the plugin
//     measures itself (each bound pod's GPUs times the time since its
//     PodScheduled condition, kept for its job, a pod group or the pod's
//     controller or the pod by name, when the pod ends); then by the
//     job's arrival, keeping the members of a pod group next to each
//     other. No pod's claim of its attained or remaining time is read.
//   - PreFilter reads the pod's request (model.ParseRequest) and rejects bad
//     input with a message naming the label or annotation at fault, a pod
//     larger than every node of its allowed types, a pod group whose members
//     disagree on its size or that has fewer members than it needs, and a
//     group that cannot fit in the free GPUs.
//   - Filter keeps the nodes that are Ready, have GPUs of an allowed type and
//     enough free healthy ones (cluster.State free counts).
//   - PreScore and Score rank nodes by the placement.GPUChooser score of the
//     best set of free GPUs on the node relative to the best set on an empty
//     node (NVLink pairs on a DGX-1), by best fit (fewest GPUs left free,
//     Tiresias's consolidation), and, for a pod group, by closeness to the
//     members already placed: same node, same NVLink domain
//     (nvidia.com/gpu.clique), same rack.
//   - Reserve books the best GPU set on the chosen node in the ledger;
//     Unreserve releases it (and rejects the pod's group, as coscheduling
//     does when a member fails).
//   - Permit admits pod groups all or nothing through gang.Coscheduler, with
//     a timeout and a backoff after a rejection.
//   - Bind posts the Binding with the booked GPUs as an annotation
//     (model.AnnotationGPUs) and the plugin's record of them
//     (model.AnnotationGPUsMAC, an HMAC under its RecordKey): the API
//     server copies a Binding's annotations onto the pod as it sets
//     spec.nodeName, so a pod is never bound without its GPUs recorded, nor
//     recorded without being bound. A device plugin's
//     GetPreferredAllocation or a DRA driver can read them there.
//   - PostBind marks the booking as bound.
//
// The ledger follows the node and pod informers: nodes added, changed
// (health, GPUs, links) and deleted; pods bound, finished or deleted. Only
// the plugin's own records count: its bookings, and annotations whose
// record verifies under the key (Args.RecordKeySecret: a Secret only the
// scheduler reads), so a restarted scheduler books exactly what its
// predecessor bound, whatever tenants wrote on their pods since. A GPU pod
// bound without a record that verifies (by another scheduler, on
// spec.nodeName, or with an annotation a tenant edited), or whose record
// names GPUs the node lacks or another pod holds, is booked on free GPUs
// of its node as a stand-in, which gives way to a verified pod, so the
// count stays right whatever the order; each is reported by a Warning
// event.
//
// The plugin's metrics (gpusched_plugin_*: latency per extension point,
// time per pod, the ledger's conflicts and GPUs, pod group permits and
// waits) are registered in component-base's legacyregistry, so
// kube-scheduler serves them on its own /metrics.
//
// The plugin never panics on input: bad labels, annotations and arguments
// become framework statuses (and so FailedScheduling events on the pod) or
// Warning events on the node.
package gpusched
