package scheduler

import (
	"slices"

	"github.com/gpusched/gpusched/cluster"
	"github.com/gpusched/gpusched/topology"
)

// ClusterView is read-only access to the scheduler's live cluster state
// (cluster.State), lent by [Scheduler.View] under the scheduler's lock:
// its methods answer as the state's do, and return copies where the
// state returns its own memory, so that nothing read through it can
// change the state. It is valid only while the View call that lent it
// runs, and not safe for concurrent use: only that call's goroutine may
// use it (the scheduler's lock is held meanwhile); a view kept after View
// returns panics on every method.
type ClusterView struct {
	st *cluster.State
}

func (v *ClusterView) state() *cluster.State {
	if v.st == nil {
		panic("scheduler: ClusterView used after View returned")
	}
	return v.st
}

// NumServers returns the number of servers.
func (v *ClusterView) NumServers() int { return v.state().NumServers() }

// Server returns a copy of the server at position s (its GPUs copied;
// link and bandwidth matrices are shared, read-only as topology says).
// It panics if s is out of range.
func (v *ClusterView) Server(s int) topology.Server {
	srv := *v.state().Server(s)
	srv.GPUs = slices.Clone(srv.GPUs)
	return srv
}

// ServerIndex returns the position of the server with the given id.
func (v *ClusterView) ServerIndex(id string) (int, bool) { return v.state().ServerIndex(id) }

// Lookup returns the position of a GPU by server id and NVML index
// (cluster.State.Lookup).
func (v *ClusterView) Lookup(serverID string, index int) (cluster.GPURef, error) {
	return v.state().Lookup(serverID, index)
}

// Types returns the GPU types present, sorted by name (a copy).
func (v *ClusterView) Types() []topology.GPUType { return slices.Clone(v.state().Types()) }

// Total returns the GPUs of type t, failed or not.
func (v *ClusterView) Total(t topology.GPUType) int { return v.state().Total(t) }

// Capacity returns the healthy GPUs of type t, held or not.
func (v *ClusterView) Capacity(t topology.GPUType) int { return v.state().Capacity(t) }

// Free returns the free GPUs of type t.
func (v *ClusterView) Free(t topology.GPUType) int { return v.state().Free(t) }

// ServerFree returns the free GPUs of server s, of any type.
func (v *ClusterView) ServerFree(s int) int { return v.state().ServerFree(s) }

// ServerFreeOf returns the free GPUs of type t on server s.
func (v *ClusterView) ServerFreeOf(s int, t topology.GPUType) int {
	return v.state().ServerFreeOf(s, t)
}

// FreeMask returns a copy of server s's free flags.
func (v *ClusterView) FreeMask(s int) []bool { return slices.Clone(v.state().FreeMask(s)) }

// LargestServer returns the most GPUs of type t one server has.
func (v *ClusterView) LargestServer(t topology.GPUType) int { return v.state().LargestServer(t) }

// BestFit returns the server with the fewest free GPUs of type t that
// still has n (cluster.State.BestFit).
func (v *ClusterView) BestFit(t topology.GPUType, n int) (int, bool) { return v.state().BestFit(t, n) }

// Holder returns who holds a GPU ("" if nobody): a job's key, or the
// holder key of two jobs sharing GPUs. It panics if r is out of range.
func (v *ClusterView) Holder(r cluster.GPURef) string { return v.state().Holder(r) }

// Failed reports whether a GPU is marked failed. It panics if r is out of
// range.
func (v *ClusterView) Failed(r cluster.GPURef) bool { return v.state().Failed(r) }

// Held returns a copy of the GPUs a holder holds, in the order bound.
func (v *ClusterView) Held(holder string) []cluster.GPURef {
	return slices.Clone(v.state().Held(holder))
}

// Holders returns every holder, sorted.
func (v *ClusterView) Holders() []string { return v.state().Holders() }

// Generation counts the state's changes (cluster.State.Generation).
func (v *ClusterView) Generation() uint64 { return v.state().Generation() }

// CapacityGeneration counts its changes of capacity
// (cluster.State.CapacityGeneration).
func (v *ClusterView) CapacityGeneration() uint64 { return v.state().CapacityGeneration() }

// Check verifies the state's invariants (cluster.State.Check).
func (v *ClusterView) Check() error { return v.state().Check() }
