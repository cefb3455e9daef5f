// Package tenancy is the admin-owned configuration of a shared GPU
// cluster, and the rules by which gpusched's Kubernetes parts turn what
// tenants write into what the policies see.
//
// A cluster admin writes a [Config] (YAML, the key [ConfigKey] of a
// ConfigMap in the controller's own namespace, which RBAC lets only the
// admin write): the tenants, each with its weight, its namespaces, its
// queues and its quota (guaranteed shares and limits, per GPU type or as a
// share of the cluster's normalized throughput). [Parse] validates it
// strictly (an unknown field, a namespace of two tenants, a queue naming a
// namespace its tenant does not own, weights or shares out of range are
// errors naming the field) and compiles it into a [Tenancy], which answers
// for a workload:
//
//   - its tenant: always the tenant that owns its namespace ([Tenancy.Resolve]);
//   - its queue: the queue its label [LabelQueue] names, if its namespace
//     may use it, else the namespace's default queue; a label naming a
//     queue the namespace may not use is refused ([ErrQueue]), never a way
//     into another tenant;
//   - its weight: the queue's JobWeight, never a value the tenant writes;
//   - its priority tier: its PriorityClass's value, capped by the queue's
//     MaxPriority ([Queue.Priority]);
//   - its remaining work: the queue's ExpectedSeconds, the admin's model
//     ([Queue.RemainingSteps]), never a tenant's claim;
//   - its rates: what the tenant claims (rates per GPU type, or a job kind
//     looked up in a performance model) is a hint used only relative to
//     itself, how much faster the job runs on one type than on another,
//     within the ratio the admin allows ([RateRules.Trusted]): however large
//     the claim, the job's fastest type runs at the admin's reference rate.
//
// Package admission (the round-based controller) and other controllers
// of this module read their tenancy from here, so that they agree on who
// is who. The threat model these rules follow is kube/SECURITY.md.
//
// A Tenancy is immutable once built: safe for concurrent use.
package tenancy
