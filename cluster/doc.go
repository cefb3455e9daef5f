// Package cluster is gpusched's live cluster state: the topology of a
// cluster as it is now, who holds each GPU and whether it is healthy.
//
// A [State] starts from a [topology.Cluster] (or empty) and follows what
// happens to it: servers added and removed (nodes joining and leaving), GPUs
// failing and recovering, holders (opaque string keys: job ids, pod-group
// UIDs, pods) bound to GPUs all or nothing and released. It keeps the free
// counts per GPU type and per server, and an index of servers by free GPUs
// of each type, up to date with every change, so that the schedulers and
// placers that read it ([State.Free], [State.BestFit], [State.ByFree],
// [State.FreeMasks]) neither copy the cluster nor scan every server. A
// change counter ([State.CapacityGeneration]) tells a consumer that capacity
// moved and an allocation must be solved again.
//
// It is the one model of the cluster the policy packages share, in the
// spirit of the Kubernetes scheduler framework's NodeInfo: placement's
// placers read its free masks, gang's server-level admission binds through
// it, and the scheduler package composes them over one State. It imports
// only topology and knows nothing of jobs beyond their keys.
//
// Bad input (an unknown server, a GPU out of range, a GPU already held or
// failed) returns an [*Error] whose Kind is one of the Err values of this
// package; nothing changes when a call fails. [State.Check] verifies every
// invariant by recomputing it. The read-only accessors that take a
// server's position or a [GPURef] ([State.Server], [State.FreeMask],
// [State.ServerFree], [State.ServerFreeOf], [State.ServerCapacityOf],
// [State.Holder], [State.Failed]) index the state as a slice is indexed: a
// position out of range panics (positions come from the state itself:
// [State.NumServers], [State.ServerIndex], [State.Lookup]); every method
// that changes the state checks its positions and returns an error.
package cluster
