package gang

import (
	"fmt"
	"strconv"

	"github.com/gpusched/gpusched/cluster"
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

// OnServers adds server-level gang admission to a Scheduler: it hands the
// scheduler the free GPUs per type of a live [cluster.State], and places
// each job the scheduler starts with the Placer (Consolidated by default),
// all workers at once, binding them in the state under the job's ID in
// decimal; a job the placer cannot place is not started (its tentative
// placement is rolled back and its GPUs stay free), and waits for a later
// event. Placement tells where each running job is. Set State to share
// the cluster's live state with the rest of a scheduler (GPUs held or
// failed there are not free here); otherwise OnServers builds one from
// Cluster at the first call. Inner and Cluster or State must be set
// (Decide returns an error wrapping ErrInvalid otherwise), and the engine
// must use the types of Types.
//
// An OnServers keeps the state of the servers between decisions: it is not
// safe for concurrent use, and must not be copied after first use.
type OnServers struct {
	Inner   Scheduler
	Cluster *topology.Cluster
	Placer  ServerPlacer
	State   *cluster.State

	types   []topology.GPUType
	running map[int]bool // jobs this OnServers bound
	refs    []cluster.GPURef
	free    []int
	err     error
}

var _ Scheduler = (*OnServers)(nil)

// Types returns the cluster's GPU types in the order of the free counts
// Decide expects (the simulator's Types must follow it).
func (o *OnServers) Types() []topology.GPUType {
	o.init()
	return o.types
}

// Capacity returns the healthy GPUs of each type, in the order of Types.
func (o *OnServers) Capacity() []int {
	o.init()
	out := make([]int, len(o.types))
	for k, t := range o.types {
		if o.State != nil {
			out[k] = o.State.Capacity(t)
		}
	}
	return out
}

// Err returns the error met building the state from Cluster, if any (a
// cluster that does not validate); Decide returns it too.
func (o *OnServers) Err() error {
	o.init()
	return o.err
}

func (o *OnServers) init() {
	if o.running != nil {
		return
	}
	o.running = map[int]bool{}
	if o.State == nil && o.Cluster != nil {
		o.State, o.err = cluster.New(o.Cluster)
		if o.err != nil {
			o.State = nil
			o.err = fmt.Errorf("%w: OnServers: %w", ErrInvalid, o.err)
			return
		}
	}
	if o.State != nil {
		o.types = o.State.Types()
	}
}

func holderKey(job int) string { return strconv.Itoa(job) }

// Placement returns where a running job's workers are.
func (o *OnServers) Placement(job int) GPUSet {
	o.init()
	if o.State == nil {
		return nil
	}
	held := o.State.Held(holderKey(job))
	if held == nil {
		return nil
	}
	set := GPUSet{}
	for _, r := range held {
		set[r.Server] = append(set[r.Server], r.GPU)
	}
	return set
}

// Decide implements Scheduler. Errors of the inner scheduler and of the
// placer (a request it finds bad) are returned as they are.
func (o *OnServers) Decide(now float64, free []int, waiting, running []JobView) (Decision, error) {
	if o.Inner == nil || o.Cluster == nil && o.State == nil {
		return Decision{}, fmt.Errorf("%w: OnServers needs Inner, and Cluster or State", ErrInvalid)
	}
	o.init()
	if o.err != nil {
		return Decision{}, o.err
	}
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
	still := make(map[int]bool, len(running))
	for _, j := range running {
		still[j.ID] = true
	}
	for id := range o.running {
		if !still[id] {
			o.State.Release(holderKey(id))
			delete(o.running, id)
		}
	}
	d, err := o.Inner.Decide(now, o.freeByType(), waiting, running)
	if err != nil {
		return Decision{}, err
	}
	for _, id := range d.Preempt {
		if o.running[id] {
			o.State.Release(holderKey(id))
			delete(o.running, id)
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
			set, err := placer.Place(o.State.Topology(), o.State.FreeMasks(), o.types[s.Type], j.ScaleFactor)
			if err != nil {
				return Decision{}, fmt.Errorf("gang: placing job %d: %w", j.ID, err)
			}
			if !o.bind(s.JobID, set, o.types[s.Type], j.ScaleFactor) {
				rolledBack = true // all workers or none: it waits
				continue
			}
			o.running[s.JobID] = true
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
		if next.Wake > now && (d.Wake <= now || next.Wake < d.Wake) {
			d.Wake = next.Wake
		}
	}
	d.Start = started
	return d, nil
}

// bind checks a placement (n distinct free GPUs of type t) and binds it
// in the state, or binds nothing.
func (o *OnServers) bind(job int, set GPUSet, t topology.GPUType, n int) bool {
	if set == nil || set.Count() != n {
		return false
	}
	o.refs = o.refs[:0]
	for srv, gpus := range set {
		if srv < 0 || srv >= o.State.NumServers() {
			return false
		}
		s := o.State.Server(srv)
		for _, g := range gpus {
			if g < 0 || g >= len(s.GPUs) || s.GPUs[g].Type != t {
				return false
			}
			o.refs = append(o.refs, cluster.GPURef{Server: srv, GPU: g})
		}
	}
	// Bind refuses GPUs that are taken, failed or named twice.
	return o.State.Bind(holderKey(job), o.refs) == nil
}

func (o *OnServers) freeByType() []int {
	o.free = o.State.FreeCounts(o.types, o.free)
	return o.free
}
