package elastic

// The training cluster as it was before it could run on cluster.State,
// kept verbatim (renamed) as the reference the private model must still
// match step for step: the Lyra and Pollux reproductions of the README
// rest on it.

import (
	"errors"
	"fmt"
	"maps"
	"slices"
)

// refCluster is the training cluster as Lyra's orchestrator and job scheduler
// see it (EuroSys 2023, sections 3 to 5): servers of equal size, its own
// and loaned from the inference cluster (whole servers, never shared with
// inference), and where every job's base and flexible workers sit. It is
// the orchestrator API: Loan adds servers, Reclaim chooses servers to hand
// back with Lyra's heuristic and applies the preemptions, and Place,
// Resize and Release move jobs. Server IDs are stable; a reclaimed
// server's ID is not reused. It holds at most MaxServers servers at once,
// of at most MaxGPUsPerServer GPUs.
//
// A refCluster is not safe for concurrent use: every method, even a query,
// must be called from one goroutine at a time (an orchestrator that loans
// from one goroutine and places from another must lock around the calls).
type refCluster struct {
	gpusPerServer int
	servers       []refServer
	jobs          map[int]*refPlaced
	pack          bool
	live          []int // IDs of the servers held now, increasing
}

// SetPacking switches between Lyra's server groups (off, the default) and
// packing (on) for jobs whose speed depends on how many servers they span
// (Pollux's jobs): every job goes on as few servers as the free GPUs
// allow, a growing job is placed afresh (it restarts anyway), and a
// shrinking job leaves its smallest parts first.
func (c *refCluster) SetPacking(on bool) { c.pack = on }

type refServer struct {
	loaned, active bool
	free           int
	base, flex     int // GPUs held by base and by flexible workers
}

type refPlaced struct {
	gpusPerWorker int
	elastic       bool
	parts         []Part
}

// newRefCluster returns a cluster of training servers (at most MaxServers) of
// gpusPerServer GPUs (1 to MaxGPUsPerServer).
func newRefCluster(trainingServers, gpusPerServer int) (*refCluster, error) {
	if trainingServers < 0 || trainingServers > MaxServers || gpusPerServer < 1 || gpusPerServer > MaxGPUsPerServer {
		return nil, fmt.Errorf("%w: %d servers of %d GPUs, want at most %d servers of 1 to %d GPUs",
			ErrInvalid, trainingServers, gpusPerServer, MaxServers, MaxGPUsPerServer)
	}
	c := &refCluster{gpusPerServer: gpusPerServer, jobs: map[int]*refPlaced{}}
	for i := range trainingServers {
		c.servers = append(c.servers, refServer{active: true, free: gpusPerServer})
		c.live = append(c.live, i)
	}
	return c, nil
}

// GPUsPerServer returns the size of every server.
func (c *refCluster) GPUsPerServer() int { return c.gpusPerServer }

// Loan adds n servers lent by the inference cluster and returns their IDs.
// The cluster may hold at most MaxServers servers at once: a loan beyond
// is an error wrapping ErrInvalid and changes nothing.
func (c *refCluster) Loan(n int) ([]int, error) {
	if n < 0 || n > MaxServers-len(c.live) {
		return nil, fmt.Errorf("%w: loan %d servers to a cluster of %d (at most %d at once)", ErrInvalid, n, len(c.live), MaxServers)
	}
	ids := make([]int, n)
	for i := range ids {
		ids[i] = len(c.servers)
		c.live = append(c.live, len(c.servers))
		c.servers = append(c.servers, refServer{loaned: true, active: true, free: c.gpusPerServer})
	}
	return ids, nil
}

// IsLoaned reports whether a server was lent by the inference cluster.
func (c *refCluster) IsLoaned(server int) bool {
	return server >= 0 && server < len(c.servers) && c.servers[server].loaned
}

// Loaned returns the number of loaned servers held now.
func (c *refCluster) Loaned() int {
	n := 0
	for _, id := range c.live {
		if c.servers[id].loaned {
			n++
		}
	}
	return n
}

// GPUs returns the GPUs of the servers held now, and how many are free.
func (c *refCluster) GPUs() (total, free int) {
	for _, id := range c.live {
		total += c.gpusPerServer
		free += c.servers[id].free
	}
	return total, free
}

// LoanedGPUs returns the GPUs of the loaned servers held now, and how many
// of them are busy.
func (c *refCluster) LoanedGPUs() (total, busy int) {
	for _, id := range c.live {
		if s := &c.servers[id]; s.loaned {
			total += c.gpusPerServer
			busy += c.gpusPerServer - s.free
		}
	}
	return total, busy
}

// Workers returns the number of workers of a job placed now (0 if none).
func (c *refCluster) Workers(job int) int {
	p := c.jobs[job]
	if p == nil {
		return 0
	}
	n := 0
	for _, x := range p.parts {
		n += x.Workers
	}
	return n
}

// Parts returns where a job's workers are.
func (c *refCluster) Parts(job int) []Part {
	if p := c.jobs[job]; p != nil {
		return slices.Clone(p.parts)
	}
	return nil
}

// Span appends to buf the job's workers on each server it spans, in
// increasing server ID, and returns it with how many of its workers are on
// loaned servers. Pass a reused buf to avoid allocating.
func (c *refCluster) Span(job int, buf []int) (perServer []int, onLoaned int) {
	perServer = buf
	p := c.jobs[job]
	if p == nil {
		return perServer, 0
	}
	lo := -1 // the last server ID appended
	for {
		next, n := -1, 0
		for _, x := range p.parts {
			if x.Server > lo && (next < 0 || x.Server < next) {
				next, n = x.Server, 0
			}
			if x.Server == next {
				n += x.Workers
			}
		}
		if next < 0 {
			return perServer, onLoaned
		}
		if c.servers[next].loaned {
			onLoaned += n
		}
		perServer = append(perServer, n)
		lo = next
	}
}

// Jobs returns the IDs of the jobs placed, in increasing order.
func (c *refCluster) Jobs() []int { return slices.Sorted(maps.Keys(c.jobs)) }

// Release removes a job's workers.
func (c *refCluster) Release(job int) {
	p := c.jobs[job]
	if p == nil {
		return
	}
	for _, x := range p.parts {
		c.take(x, p.gpusPerWorker, -1)
	}
	delete(c.jobs, job)
}

func (c *refCluster) take(x Part, gpw, sign int) {
	s := &c.servers[x.Server]
	g := sign * x.Workers * gpw
	s.free -= g
	if x.Flexible {
		s.flex += g
	} else {
		s.base += g
	}
}

// Place puts a job that holds no workers on the cluster with the given
// number of workers, best fit decreasing within Lyra's server groups
// (section 5.3): inelastic jobs' workers go to training servers first; an
// elastic job's base workers go to loaned servers that hold no flexible
// workers first, then training servers; its flexible workers (those above
// MinWorkers) go to loaned servers holding no base workers first, then
// other loaned servers, then training servers holding no base workers,
// then any. Within a group the tightest server that takes all the
// remaining workers is chosen, else the one with the most free GPUs. The
// base workers are placed all or nothing (ErrUnplaceable); flexible
// workers as many as fit. It returns the workers placed.
func (c *refCluster) Place(j *Job, workers int) (int, error) {
	if err := j.Validate(); err != nil {
		return 0, err
	}
	if workers < j.MinWorkers || workers > j.MaxWorkers {
		return 0, fmt.Errorf("%w: job %d with %d workers outside %d to %d", ErrInvalid, j.ID, workers, j.MinWorkers, j.MaxWorkers)
	}
	if c.jobs[j.ID] != nil {
		return 0, fmt.Errorf("%w: job %d is placed already", ErrInvalid, j.ID)
	}
	p := &refPlaced{gpusPerWorker: j.GPUsPerWorker, elastic: j.Elastic()}
	if c.pack {
		// All workers together on the fewest servers; the first
		// MinWorkers are the base.
		parts := c.plan(p, workers, true)
		n := 0
		for _, x := range parts {
			n += x.Workers
		}
		if n < j.MinWorkers {
			return 0, fmt.Errorf("%w: job %d's %d base workers of %d GPUs", ErrUnplaceable, j.ID, j.MinWorkers, j.GPUsPerWorker)
		}
		need := j.MinWorkers
		for _, x := range parts {
			b := min(need, x.Workers)
			need -= b
			if b > 0 {
				p.parts = append(p.parts, Part{Server: x.Server, Workers: b})
			}
			if x.Workers > b {
				p.parts = append(p.parts, Part{Server: x.Server, Workers: x.Workers - b, Flexible: true})
			}
		}
		for _, x := range p.parts {
			c.take(x, p.gpusPerWorker, 1)
		}
		c.jobs[j.ID] = p
		return n, nil
	}
	base := c.plan(p, j.MinWorkers, false)
	if base == nil {
		return 0, fmt.Errorf("%w: job %d's %d base workers of %d GPUs", ErrUnplaceable, j.ID, j.MinWorkers, j.GPUsPerWorker)
	}
	for _, x := range base {
		c.take(x, p.gpusPerWorker, 1)
	}
	p.parts = base
	c.jobs[j.ID] = p
	return j.MinWorkers + c.grow(p, workers-j.MinWorkers), nil
}

// Resize changes a placed job's workers, keeping the workers it has:
// growing adds flexible workers as Place would, shrinking removes
// flexible workers, those on loaned servers first. It returns the workers
// the job holds afterwards.
func (c *refCluster) Resize(j *Job, workers int) (int, error) {
	if err := j.Validate(); err != nil {
		return 0, err
	}
	p := c.jobs[j.ID]
	if p == nil {
		return 0, fmt.Errorf("%w: job %d is not placed", ErrUnplaceable, j.ID)
	}
	if p.gpusPerWorker != j.GPUsPerWorker {
		return 0, fmt.Errorf("%w: job %d was placed with %d GPUs per worker, not %d", ErrInvalid, j.ID, p.gpusPerWorker, j.GPUsPerWorker)
	}
	if workers < j.MinWorkers || workers > j.MaxWorkers {
		return 0, fmt.Errorf("%w: job %d with %d workers outside %d to %d", ErrInvalid, j.ID, workers, j.MinWorkers, j.MaxWorkers)
	}
	have := c.Workers(j.ID)
	if workers > have && c.pack {
		old := p.parts
		c.Release(j.ID)
		n, err := c.Place(j, workers)
		if err == nil && n > have {
			return n, nil
		}
		if err == nil {
			c.Release(j.ID) // no more workers than before: stay put
		}
		// Put it back where it was; those GPUs are still free.
		p.parts = old
		for _, x := range old {
			c.take(x, p.gpusPerWorker, 1)
		}
		c.jobs[j.ID] = p
		if err != nil && !errors.Is(err, ErrUnplaceable) {
			return have, err
		}
		return have, nil
	}
	if workers > have {
		return have + c.grow(p, workers-have), nil
	}
	drop := have - workers
	// Flexible parts, loaned servers first, then the later parts first.
	order := make([]int, 0, len(p.parts))
	for i := len(p.parts) - 1; i >= 0; i-- {
		if p.parts[i].Flexible && c.servers[p.parts[i].Server].loaned {
			order = append(order, i)
		}
	}
	for i := len(p.parts) - 1; i >= 0; i-- {
		if p.parts[i].Flexible && !c.servers[p.parts[i].Server].loaned {
			order = append(order, i)
		}
	}
	if c.pack {
		slices.SortStableFunc(order, func(a, b int) int { return p.parts[a].Workers - p.parts[b].Workers })
	}
	for _, i := range order {
		if drop == 0 {
			break
		}
		k := min(drop, p.parts[i].Workers)
		c.take(Part{Server: p.parts[i].Server, Workers: k, Flexible: true}, p.gpusPerWorker, -1)
		p.parts[i].Workers -= k
		drop -= k
	}
	p.parts = slices.DeleteFunc(p.parts, func(x Part) bool { return x.Workers == 0 })
	return c.Workers(j.ID), nil
}

func (c *refCluster) grow(p *refPlaced, extra int) int {
	if extra <= 0 {
		return 0
	}
	parts := c.plan(p, extra, true)
	n := 0
	for _, x := range parts {
		c.take(x, p.gpusPerWorker, 1)
		n += x.Workers
		merged := false
		for i := range p.parts {
			if p.parts[i].Server == x.Server && p.parts[i].Flexible {
				p.parts[i].Workers += x.Workers
				merged = true
				break
			}
		}
		if !merged {
			p.parts = append(p.parts, x)
		}
	}
	return n
}

// plan chooses servers for k workers of p without changing the cluster.
// Base plans are all or nothing (nil when they do not fit); flexible plans
// place as many as fit.
func (c *refCluster) plan(p *refPlaced, k int, flexible bool) []Part {
	g := p.gpusPerWorker
	free := make([]int, len(c.live)) // by position in c.live
	for k, id := range c.live {
		free[k] = c.servers[id].free
	}
	var groups []func(s *refServer) bool
	switch {
	case c.pack:
		groups = []func(s *refServer) bool{func(*refServer) bool { return true }}
	case flexible:
		groups = []func(s *refServer) bool{
			func(s *refServer) bool { return s.loaned && s.base == 0 },
			func(s *refServer) bool { return s.loaned },
			func(s *refServer) bool { return s.base == 0 },
			func(s *refServer) bool { return true },
		}
	case p.elastic:
		groups = []func(s *refServer) bool{
			func(s *refServer) bool { return s.loaned && s.flex == 0 },
			func(s *refServer) bool { return !s.loaned },
			func(s *refServer) bool { return true },
		}
	default:
		groups = []func(s *refServer) bool{
			func(s *refServer) bool { return !s.loaned },
			func(s *refServer) bool { return true },
		}
	}
	var parts []Part
	for _, in := range groups {
		for k > 0 {
			fit, most := -1, -1
			for i, id := range c.live {
				if free[i] < g || !in(&c.servers[id]) {
					continue
				}
				if free[i] >= k*g && (fit < 0 || free[i] < free[fit]) {
					fit = i
				}
				if most < 0 || free[i] > free[most] {
					most = i
				}
			}
			s := fit
			if s < 0 {
				s = most
			}
			if s < 0 {
				break
			}
			n := min(k, free[s]/g)
			parts = append(parts, Part{Server: c.live[s], Workers: n, Flexible: flexible})
			free[s] -= n * g
			k -= n
		}
	}
	if k > 0 && !flexible {
		return nil
	}
	return parts
}

// Reclaim hands n loaned servers back to the inference cluster, chosen by
// Lyra's heuristic (Reclaim), and applies it: preempted jobs lose all
// their workers everywhere, scaled-in jobs their flexible workers on the
// returned servers. The result names servers by their cluster IDs.
// Asking for more servers than are loaned returns an error wrapping
// ErrInvalid and changes nothing.
func (c *refCluster) Reclaim(n int) (*ReclaimResult, error) {
	var ids []int
	index := map[int]int{}
	for _, id := range c.live {
		if c.servers[id].loaned {
			index[id] = len(ids)
			ids = append(ids, id)
		}
	}
	if n < 0 || n > len(ids) {
		return nil, fmt.Errorf("%w: reclaim %d of %d loaned servers", ErrInvalid, n, len(ids))
	}
	view := make([][]Worker, len(ids))
	for _, id := range c.Jobs() {
		p := c.jobs[id]
		for _, x := range p.parts {
			if k, ok := index[x.Server]; ok {
				view[k] = append(view[k], Worker{Job: id, GPUs: x.Workers * p.gpusPerWorker, Flexible: x.Flexible})
			}
		}
	}
	r, err := Reclaim(view, n)
	if err != nil {
		return nil, err
	}
	back := map[int]bool{}
	for i, k := range r.Servers {
		r.Servers[i] = ids[k] // ids increase, so the list stays sorted
		back[ids[k]] = true
	}
	// Every base worker on a returned server must belong to a preempted
	// job; check before changing anything.
	for _, id := range c.Jobs() {
		if slices.Contains(r.Preempted, id) {
			continue
		}
		for _, x := range c.jobs[id].parts {
			if back[x.Server] && !x.Flexible {
				return nil, fmt.Errorf("%w: server %d would go back with job %d's base workers", ErrInconsistent, x.Server, id)
			}
		}
	}
	for _, id := range r.Preempted {
		c.Release(id)
	}
	for _, id := range r.ScaledIn {
		p := c.jobs[id]
		for _, x := range p.parts {
			if back[x.Server] {
				c.take(x, p.gpusPerWorker, -1)
			}
		}
		p.parts = slices.DeleteFunc(p.parts, func(x Part) bool { return back[x.Server] })
	}
	for id := range back {
		s := &c.servers[id]
		if s.free != c.gpusPerServer {
			return nil, fmt.Errorf("%w: server %d still holds %d GPUs of work after reclaiming", ErrInconsistent, id, c.gpusPerServer-s.free)
		}
		s.active = false
	}
	c.live = slices.DeleteFunc(c.live, func(id int) bool { return back[id] })
	return r, nil
}

// Check verifies the cluster's invariants: no server holds more GPUs than
// it has or negative counts, inactive servers hold nothing, and every
// job's parts add up to the servers' counts.
func (c *refCluster) Check() error {
	base := make([]int, len(c.servers))
	flex := make([]int, len(c.servers))
	for id, p := range c.jobs {
		for _, x := range p.parts {
			if x.Workers <= 0 || !c.servers[x.Server].active {
				return fmt.Errorf("%w: job %d has %d workers on server %d (active %v)", ErrInconsistent, id, x.Workers, x.Server, c.servers[x.Server].active)
			}
			if x.Flexible {
				flex[x.Server] += x.Workers * p.gpusPerWorker
			} else {
				base[x.Server] += x.Workers * p.gpusPerWorker
			}
		}
	}
	for i, s := range c.servers {
		if s.base != base[i] || s.flex != flex[i] || s.free != c.gpusPerServer-base[i]-flex[i] || s.free < 0 {
			return fmt.Errorf("%w: server %d counts free %d base %d flex %d, jobs hold base %d flex %d of %d", ErrInconsistent, i, s.free, s.base, s.flex, base[i], flex[i], c.gpusPerServer)
		}
	}
	return nil
}
