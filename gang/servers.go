package gang

import (
	"fmt"

	"github.com/gpusched/gpusched/placement"
	"github.com/gpusched/gpusched/topology"
)

// GPUSet is where a job's workers run: GPU positions per server (an alias
// of placement.GPUSet: a plain map, safe for concurrent reads only).
type GPUSet = placement.GPUSet

// ServerPlacer chooses GPUs for a job on the servers (an alias of
// placement.ServerPlacer; implementations without state should be safe for
// concurrent use).
type ServerPlacer = placement.ServerPlacer

// Consolidated places a job on as few servers as possible (an alias of
// placement.Consolidated, kept here for the schedulers that use it; safe
// for concurrent use).
type Consolidated = placement.Consolidated

// OnServers adds server-level gang admission to a Scheduler: it keeps the
// free GPUs of every server, hands the scheduler the free GPUs per type,
// and places each job the scheduler starts with the Placer (Consolidated
// by default), all workers at once; a job the placer cannot place is not
// started (its tentative placement is rolled back and its GPUs stay free),
// and waits for a later event. Placement tells where each running job is.
// Inner and Cluster must be set (Decide returns an error wrapping
// ErrInvalid otherwise), and the engine must use the types of Types.
//
// An OnServers keeps the state of the servers between decisions: it is not
// safe for concurrent use, and must not be copied after first use.
type OnServers struct {
	Inner   Scheduler
	Cluster *topology.Cluster
	Placer  ServerPlacer

	free    [][]bool
	where   map[int]GPUSet
	types   []topology.GPUType
	typeIdx map[topology.GPUType]int
}

// Types returns the cluster's GPU types in the order of the free counts
// Decide expects (the simulator's Types must follow it).
func (o *OnServers) Types() []topology.GPUType {
	o.init()
	return o.types
}

// Capacity returns the GPUs of each type, in the order of Types.
func (o *OnServers) Capacity() []int {
	o.init()
	capacity := o.Cluster.Capacity()
	out := make([]int, len(o.types))
	for k, t := range o.types {
		out[k] = capacity[t]
	}
	return out
}

func (o *OnServers) init() {
	if o.free != nil {
		return
	}
	o.types = o.Cluster.GPUTypes()
	o.typeIdx = map[topology.GPUType]int{}
	for k, t := range o.types {
		o.typeIdx[t] = k
	}
	o.free = make([][]bool, len(o.Cluster.Servers))
	for s := range o.Cluster.Servers {
		o.free[s] = make([]bool, len(o.Cluster.Servers[s].GPUs))
		for i := range o.free[s] {
			o.free[s][i] = true
		}
	}
	o.where = map[int]GPUSet{}
}

// Placement returns where a running job's workers are.
func (o *OnServers) Placement(job int) GPUSet { return o.where[job] }

// Decide implements Scheduler. Errors of the inner scheduler and of the
// placer (a request it finds bad) are returned as they are.
func (o *OnServers) Decide(now float64, free []int, waiting, running []JobView) (Decision, error) {
	if o.Inner == nil || o.Cluster == nil {
		return Decision{}, fmt.Errorf("%w: OnServers needs Inner and Cluster", ErrInvalid)
	}
	o.init()
	if len(free) != len(o.types) {
		return Decision{}, fmt.Errorf("%w: free GPUs of %d types, the cluster has %d (%v)", ErrInvalid, len(free), len(o.types), o.types)
	}
	if err := checkViews(now, free, waiting, running); err != nil {
		return Decision{}, err
	}
	placer := o.Placer
	if placer == nil {
		placer = Consolidated{}
	}
	// Release the GPUs of jobs that no longer run.
	still := map[int]bool{}
	for _, j := range running {
		still[j.ID] = true
	}
	for id, set := range o.where {
		if !still[id] {
			o.release(set)
			delete(o.where, id)
		}
	}
	d, err := o.Inner.Decide(now, o.freeByType(), waiting, running)
	if err != nil {
		return Decision{}, err
	}
	for _, id := range d.Preempt {
		if set, ok := o.where[id]; ok {
			o.release(set)
			delete(o.where, id)
		}
	}
	byID := map[int]JobView{}
	for _, j := range waiting {
		byID[j.ID] = j
	}
	preempted := map[int]bool{}
	for _, id := range d.Preempt {
		preempted[id] = true
	}
	var started []Start
	done := map[int]bool{} // placed or rolled back
	for round := 0; len(d.Start) > 0 && round <= len(waiting); round++ {
		rolledBack := false
		for _, s := range d.Start {
			j, ok := byID[s.JobID]
			if !ok || done[s.JobID] || s.Type < 0 || s.Type >= len(o.types) {
				continue
			}
			done[s.JobID] = true
			set, err := placer.Place(o.Cluster, o.free, o.types[s.Type], j.ScaleFactor)
			if err != nil {
				return Decision{}, fmt.Errorf("gang: placing job %d: %w", j.ID, err)
			}
			if !o.valid(set, o.types[s.Type], j.ScaleFactor) {
				rolledBack = true // all workers or none: it waits
				continue
			}
			for srv, gpus := range set {
				for _, g := range gpus {
					o.free[srv][g] = false
				}
			}
			o.where[s.JobID] = set
			started = append(started, s)
		}
		if !rolledBack {
			break
		}
		// Ask again without the jobs already decided, so that jobs behind
		// a rolled-back one get their chance.
		var rest []JobView
		for _, j := range waiting {
			if !done[j.ID] {
				rest = append(rest, j)
			}
		}
		var now2 []JobView
		for _, j := range running {
			if !preempted[j.ID] {
				now2 = append(now2, j)
			}
		}
		for _, s := range started {
			j := byID[s.JobID]
			j.Type = s.Type
			now2 = append(now2, j)
		}
		next, err := o.Inner.Decide(now, o.freeByType(), rest, now2)
		if err != nil {
			return Decision{}, err
		}
		d.Start = next.Start // further preemptions are not taken in this event
	}
	d.Start = started
	return d, nil
}

// valid checks a placement: n distinct free GPUs of type t.
func (o *OnServers) valid(set GPUSet, t topology.GPUType, n int) bool {
	if set == nil || set.Count() != n {
		return false
	}
	for srv, gpus := range set {
		if srv < 0 || srv >= len(o.free) {
			return false
		}
		seen := map[int]bool{}
		for _, g := range gpus {
			if g < 0 || g >= len(o.free[srv]) || !o.free[srv][g] || seen[g] || o.Cluster.Servers[srv].GPUs[g].Type != t {
				return false
			}
			seen[g] = true
		}
	}
	return true
}

func (o *OnServers) release(set GPUSet) {
	for srv, gpus := range set {
		for _, g := range gpus {
			o.free[srv][g] = true
		}
	}
}

func (o *OnServers) freeByType() []int {
	out := make([]int, len(o.types))
	for s, srv := range o.Cluster.Servers {
		for i, g := range srv.GPUs {
			if o.free[s][i] {
				out[o.typeIdx[g.Type]]++
			}
		}
	}
	return out
}
