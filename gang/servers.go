package gang

import (
	"cmp"
	"slices"

	"github.com/gpusched/gpusched/topology"
)

// GPUSet is where a job's workers run: GPU positions per server.
type GPUSet map[int][]int

// ServerPlacer chooses GPUs for a job of n workers of type k, given the
// free GPUs of every server (free[s][i] for GPU i of server s). It returns
// nil when it cannot place all n at once; it must not change free.
type ServerPlacer interface {
	Place(c *topology.Cluster, free [][]bool, k topology.GPUType, n int) GPUSet
}

// Consolidated places a job on as few servers as possible: on one server
// when one has room (the one with the fewest free GPUs that fit it, to
// leave large holes for large jobs), else across the servers with the most
// free GPUs first. With Strict, a job that fits in one server's GPUs must
// run on one server, or wait (locality before speed, as Tiresias does for
// consolidation-sensitive models).
type Consolidated struct {
	Strict bool
}

// Place implements ServerPlacer.
func (c Consolidated) Place(cl *topology.Cluster, free [][]bool, t topology.GPUType, n int) GPUSet {
	type srv struct{ s, free, size int }
	var cands []srv
	for s := range cl.Servers {
		f, size := 0, 0
		for i, g := range cl.Servers[s].GPUs {
			if g.Type != t {
				continue
			}
			size++
			if free[s][i] {
				f++
			}
		}
		if f > 0 {
			cands = append(cands, srv{s, f, size})
		}
	}
	take := func(s, m int) []int {
		var out []int
		for i, g := range cl.Servers[s].GPUs {
			if len(out) == m {
				break
			}
			if g.Type == t && free[s][i] {
				out = append(out, i)
			}
		}
		return out
	}
	// Best fit on one server.
	best := -1
	for i, c := range cands {
		if c.free >= n && (best < 0 || c.free < cands[best].free) {
			best = i
		}
	}
	if best >= 0 {
		return GPUSet{cands[best].s: take(cands[best].s, n)}
	}
	if c.Strict {
		for _, c := range cands {
			if n <= c.size {
				return nil // fits a server, but none is free enough
			}
		}
	}
	slices.SortStableFunc(cands, func(a, b srv) int { return cmp.Or(cmp.Compare(b.free, a.free), cmp.Compare(a.s, b.s)) })
	out := GPUSet{}
	left := n
	for _, c := range cands {
		if left == 0 {
			break
		}
		m := min(left, c.free)
		out[c.s] = take(c.s, m)
		left -= m
	}
	if left > 0 {
		return nil
	}
	return out
}

// OnServers adds server-level gang admission to a Scheduler: it keeps the
// free GPUs of every server, hands the scheduler the free GPUs per type,
// and places each job the scheduler starts with the Placer (Consolidated
// by default), all workers at once; a job the placer cannot place is not
// started (its tentative placement is rolled back and its GPUs stay free),
// and waits for a later event. Placement tells where each running job is.
// An OnServers must not be copied after first use.
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

// Decide implements Scheduler.
func (o *OnServers) Decide(now float64, free []int, waiting, running []JobView) Decision {
	o.init()
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
	d := o.Inner.Decide(now, o.freeByType(), waiting, running)
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
			set := placer.Place(o.Cluster, o.free, o.types[s.Type], j.ScaleFactor)
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
		next := o.Inner.Decide(now, o.freeByType(), rest, now2)
		d.Start = next.Start // further preemptions are not taken in this event
	}
	d.Start = started
	return d
}

// valid checks a placement: n distinct free GPUs of type t.
func (o *OnServers) valid(set GPUSet, t topology.GPUType, n int) bool {
	if set == nil || set.count() != n {
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

func (g GPUSet) count() int {
	n := 0
	for _, gpus := range g {
		n += len(gpus)
	}
	return n
}
