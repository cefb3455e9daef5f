package elastic

import (
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/gpusched/gpusched/cluster"
	"github.com/gpusched/gpusched/topology"
)

// Part is a share of a job's workers on one server. It is a plain value,
// safe for concurrent use.
type Part struct {
	Server, Workers int
	// Flexible marks workers above the job's base demand.
	Flexible bool
}

// Cluster is the training cluster as Lyra's orchestrator and job scheduler
// see it (EuroSys 2023, sections 3 to 5): servers of equal size, its own
// and loaned from the inference cluster (whole servers, never shared with
// inference), and where every job's base and flexible workers sit. It is
// the orchestrator API: Loan adds servers, Reclaim chooses servers to hand
// back with Lyra's heuristic and applies the preemptions, and Place,
// Resize and Release move jobs. Server IDs are stable; a reclaimed
// server's ID is not reused. It holds at most MaxServers servers at once,
// of at most MaxGPUsPerServer GPUs, and its state at most MaxLiveGPUs
// GPUs.
//
// It runs on a live cluster state of package cluster, where every job
// holds its GPUs, loans add servers and reclaims remove them, and GPUs
// that others hold or that failed are not free: the state that the other
// packages share (NewClusterOn) or one of its own (NewCluster).
//
// A Cluster is not safe for concurrent use: every method, even a query,
// must be called from one goroutine at a time (an orchestrator that loans
// from one goroutine and places from another must lock around the calls).
type Cluster struct {
	gpusPerServer int
	servers       []server
	jobs          map[int]*placed
	pack          bool
	live          []int // IDs of the servers held now, increasing

	// state is the live cluster state the cluster runs on; the counts
	// below mirror it.
	state *cluster.State
	gen   uint64          // state's Generation when the counts last matched it
	shape topology.Server // a server of the cluster's shape, for Loan
	// shapeUniform is server.uniform of the shape.
	shapeUniform int8
	// scratch holds the GPUs of one bind or release in state, mask a
	// server's free flags while its workers are chosen.
	scratch []cluster.GPURef
	mask    []bool
}

// SetPacking switches between Lyra's server groups (off, the default) and
// packing (on) for jobs whose speed depends on how many servers they span
// (Pollux's jobs): every job goes on as few servers as the free GPUs
// allow, a growing job is placed afresh (it restarts anyway), and a
// shrinking job leaves its smallest parts first.
func (c *Cluster) SetPacking(on bool) { c.pack = on }

type server struct {
	loaned, active bool
	free           int
	base, flex     int // GPUs held by base and by flexible workers
	// other counts the GPUs that are neither free nor held by the jobs of
	// this cluster: held by others or failed in the live state.
	other int
	// id is the server's id in the live state.
	id string
	// uniform is 1 when every pair of the server's GPUs links alike (a
	// worker then takes the lowest free GPUs), -1 when not, 0 until known.
	uniform int8
}

type placed struct {
	id            int    // the job's ID
	key           string // HolderKey(id)
	gpusPerWorker int
	elastic       bool
	parts         []Part
}

// NewCluster returns a cluster of training servers (at most MaxServers) of
// gpusPerServer GPUs (1 to MaxGPUsPerServer) on a cluster state of its own
// (State): NewClusterOn over a state of that many servers "train-0",
// "train-1", ... of gpusPerServer GPUs of type "train" (TrainGPUType), all
// linked alike. The state holds at most MaxLiveGPUs GPUs: a larger cluster,
// or loans beyond, are errors wrapping ErrInvalid.
func NewCluster(trainingServers, gpusPerServer int) (*Cluster, error) {
	if trainingServers < 0 || trainingServers > MaxServers || gpusPerServer < 1 || gpusPerServer > MaxGPUsPerServer {
		return nil, fmt.Errorf("%w: %d servers of %d GPUs, want at most %d servers of 1 to %d GPUs",
			ErrInvalid, trainingServers, gpusPerServer, MaxServers, MaxGPUsPerServer)
	}
	if trainingServers > MaxLiveGPUs/gpusPerServer {
		return nil, fmt.Errorf("%w: %d servers of %d GPUs, more than %d GPUs in one cluster state",
			ErrInvalid, trainingServers, gpusPerServer, MaxLiveGPUs)
	}
	shape := topology.ServerTemplate{Type: TrainGPUType, GPUs: gpusPerServer}
	var topo *topology.Cluster
	if trainingServers > 0 {
		var err error
		if topo, err = topology.Homogeneous(trainingServers, shape); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
		}
	}
	live, err := cluster.New(topo)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	ids := make([]string, trainingServers)
	for i := range ids {
		ids[i] = live.Server(i).ID
	}
	return NewClusterOn(live, ids, shape)
}

// TrainGPUType is the GPU type of the servers of NewCluster's own state.
const TrainGPUType topology.GPUType = "train"

// GPUsPerServer returns the size of every server.
func (c *Cluster) GPUsPerServer() int { return c.gpusPerServer }

// Loan adds n servers lent by the inference cluster and returns their IDs.
// They are added to the live state too, built from the cluster's server
// shape, with ids "elastic-loan-" and the cluster ID (see LoanServers to
// add servers of your own). The cluster may hold at most MaxServers
// servers at once, and the state MaxLiveGPUs GPUs: a loan beyond is an
// error wrapping ErrInvalid and changes nothing.
func (c *Cluster) Loan(n int) ([]int, error) {
	if n < 0 || n > MaxServers-len(c.live) {
		return nil, fmt.Errorf("%w: loan %d servers to a cluster of %d (at most %d at once)", ErrInvalid, n, len(c.live), MaxServers)
	}
	if n > (MaxLiveGPUs-c.state.Topology().NumGPUs())/c.gpusPerServer {
		return nil, fmt.Errorf("%w: loan %d servers of %d GPUs to a cluster state of %d GPUs (at most %d)", ErrInvalid, n, c.gpusPerServer, c.state.Topology().NumGPUs(), MaxLiveGPUs)
	}
	servers := make([]topology.Server, n)
	for i := range servers {
		servers[i] = c.loanShape(len(c.servers) + i)
	}
	ids, err := c.LoanServers(servers)
	for _, id := range ids {
		c.servers[id].uniform = c.shapeUniform // their links are the shape's
	}
	return ids, err
}

// IsLoaned reports whether a server was lent by the inference cluster.
func (c *Cluster) IsLoaned(server int) bool {
	return server >= 0 && server < len(c.servers) && c.servers[server].loaned
}

// Loaned returns the number of loaned servers held now.
func (c *Cluster) Loaned() int {
	n := 0
	for _, id := range c.live {
		if c.servers[id].loaned {
			n++
		}
	}
	return n
}

// GPUs returns the GPUs of the servers held now, and how many are free
// (on a shared live state, as it is now: GPUs others hold or that failed
// are not free). If a server left the live state behind the cluster's
// back, it returns the counts as last read; Check reports the loss.
func (c *Cluster) GPUs() (total, free int) {
	_ = c.sync() // a lost server: the counts as last read; the next change reports it
	for _, id := range c.live {
		total += c.gpusPerServer
		free += c.servers[id].free
	}
	return total, free
}

// LoanedGPUs returns the GPUs of the loaned servers held now, and how many
// of them are busy (on a shared live state, as it is now).
func (c *Cluster) LoanedGPUs() (total, busy int) {
	_ = c.sync() // as in GPUs
	for _, id := range c.live {
		if s := &c.servers[id]; s.loaned {
			total += c.gpusPerServer
			busy += c.gpusPerServer - s.free
		}
	}
	return total, busy
}

// Workers returns the number of workers of a job placed now (0 if none).
func (c *Cluster) Workers(job int) int {
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
func (c *Cluster) Parts(job int) []Part {
	if p := c.jobs[job]; p != nil {
		return slices.Clone(p.parts)
	}
	return nil
}

// Span appends to buf the job's workers on each server it spans, in
// increasing server ID, and returns it with how many of its workers are on
// loaned servers. Pass a reused buf to avoid allocating.
func (c *Cluster) Span(job int, buf []int) (perServer []int, onLoaned int) {
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
func (c *Cluster) Jobs() []int { return slices.Sorted(maps.Keys(c.jobs)) }

// Release removes a job's workers.
func (c *Cluster) Release(job int) {
	p := c.jobs[job]
	if p == nil {
		return
	}
	// Read first what others changed in the live state since the last
	// call: marking the counts in sync without it would count their GPUs
	// free. A state that lost a server is left to the next call to report.
	if c.sync() == nil {
		defer c.synced()
	}
	c.state.Release(p.key)
	for _, x := range p.parts {
		c.count(x, p.gpusPerWorker, -1)
	}
	for _, x := range p.parts {
		c.reread(x.Server)
	}
	delete(c.jobs, job)
}

// reread sets a server's free and other counts from the live state after
// the cluster's jobs changed there: a GPU a job let go of that failed
// meanwhile stays out of the free ones (live keeps it out), so it is
// counted as others'. A server gone from the state keeps its counts (the
// next sync reports it).
func (c *Cluster) reread(id int) {
	s := &c.servers[id]
	pos, ok := c.state.ServerIndex(s.id)
	if !ok {
		return
	}
	s.free = c.state.ServerFree(pos)
	s.other = c.gpusPerServer - s.free - s.base - s.flex
}

// take gives p the GPUs of part x (sign 1) or takes them back (sign -1),
// in the counts and, on a live cluster, in the state (binding the lowest
// free GPUs of the server, or releasing the job's last bound there). The
// counts mirror the state, so the state refuses nothing unless it changed
// behind the cluster's back (ErrInconsistent).
func (c *Cluster) take(p *placed, x Part, sign int) error {
	if err := c.takeLive(p, x, sign); err != nil {
		return err
	}
	c.count(x, p.gpusPerWorker, sign)
	if sign < 0 {
		c.reread(x.Server) // GPUs let go of may have failed
	}
	return nil
}

// count changes the server's counts for part x.
func (c *Cluster) count(x Part, gpw, sign int) {
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
func (c *Cluster) Place(j *Job, workers int) (int, error) {
	return c.place(j, workers, "")
}

// place is Place; key, if not empty, is HolderKey(j.ID) made already.
func (c *Cluster) place(j *Job, workers int, key string) (int, error) {
	if err := j.Validate(); err != nil {
		return 0, err
	}
	if workers < j.MinWorkers || workers > j.MaxWorkers {
		return 0, fmt.Errorf("%w: job %d with %d workers outside %d to %d", ErrInvalid, j.ID, workers, j.MinWorkers, j.MaxWorkers)
	}
	if c.jobs[j.ID] != nil {
		return 0, fmt.Errorf("%w: job %d is placed already", ErrInvalid, j.ID)
	}
	if err := c.sync(); err != nil {
		return 0, err
	}
	if key == "" {
		key = HolderKey(j.ID)
	}
	if c.state.Held(key) != nil {
		return 0, fmt.Errorf("%w: job %d's holder %q already holds GPUs in the cluster state", ErrInvalid, j.ID, key)
	}
	defer c.synced()
	p := &placed{id: j.ID, key: key, gpusPerWorker: j.GPUsPerWorker, elastic: j.Elastic()}
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
		split := make([]Part, 0, 2*len(parts))
		for _, x := range parts {
			b := min(need, x.Workers)
			need -= b
			if b > 0 {
				split = append(split, Part{Server: x.Server, Workers: b})
			}
			if x.Workers > b {
				split = append(split, Part{Server: x.Server, Workers: x.Workers - b, Flexible: true})
			}
		}
		// The parts list only what was taken, so that an error (the live
		// state changed behind the cluster's back) leaves them true. They
		// reuse split's memory: each part is read before it is written.
		c.jobs[j.ID] = p
		p.parts = split[:0]
		for _, x := range split {
			if err := c.take(p, x, 1); err != nil {
				return 0, err
			}
			p.parts = append(p.parts, x)
		}
		return n, nil
	}
	base := c.plan(p, j.MinWorkers, false)
	if base == nil {
		return 0, fmt.Errorf("%w: job %d's %d base workers of %d GPUs", ErrUnplaceable, j.ID, j.MinWorkers, j.GPUsPerWorker)
	}
	c.jobs[j.ID] = p
	for _, x := range base {
		if err := c.take(p, x, 1); err != nil {
			return 0, err
		}
		p.parts = append(p.parts, x)
	}
	n, err := c.grow(p, workers-j.MinWorkers)
	return j.MinWorkers + n, err
}

// Resize changes a placed job's workers, keeping the workers it has:
// growing adds flexible workers as Place would, shrinking removes
// flexible workers, those on loaned servers first. It returns the workers
// the job holds afterwards.
func (c *Cluster) Resize(j *Job, workers int) (int, error) {
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
	if err := c.sync(); err != nil {
		return 0, err
	}
	defer c.synced()
	have := c.Workers(j.ID)
	if workers > have && c.pack {
		old := p.parts
		c.Release(j.ID)
		n, err := c.place(j, workers, p.key)
		if err == nil && n > have {
			return n, nil
		}
		if err == nil {
			c.Release(j.ID) // no more workers than before: stay put
		}
		// Put it back where it was; those GPUs are still free (on a live
		// cluster, the same number on each server, not always the same
		// GPUs).
		p.parts = nil
		c.jobs[j.ID] = p
		for _, x := range old {
			if err := c.take(p, x, 1); err != nil {
				return 0, err
			}
			p.parts = append(p.parts, x)
		}
		if err != nil && !errors.Is(err, ErrUnplaceable) {
			return have, err
		}
		return have, nil
	}
	if workers > have {
		n, err := c.grow(p, workers-have)
		return have + n, err
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
		if err := c.take(p, Part{Server: p.parts[i].Server, Workers: k, Flexible: true}, -1); err != nil {
			return 0, err
		}
		p.parts[i].Workers -= k
		drop -= k
	}
	p.parts = slices.DeleteFunc(p.parts, func(x Part) bool { return x.Workers == 0 })
	return c.Workers(j.ID), nil
}

func (c *Cluster) grow(p *placed, extra int) (int, error) {
	if extra <= 0 {
		return 0, nil
	}
	parts := c.plan(p, extra, true)
	n := 0
	for _, x := range parts {
		if err := c.take(p, x, 1); err != nil {
			return n, err
		}
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
	return n, nil
}

// plan chooses servers for k workers of p without changing the cluster.
// Base plans are all or nothing (nil when they do not fit); flexible plans
// place as many as fit.
func (c *Cluster) plan(p *placed, k int, flexible bool) []Part {
	g := p.gpusPerWorker
	free := make([]int, len(c.live)) // by position in c.live
	for k, id := range c.live {
		free[k] = c.servers[id].free
	}
	var groups []func(s *server) bool
	switch {
	case c.pack:
		groups = []func(s *server) bool{func(*server) bool { return true }}
	case flexible:
		groups = []func(s *server) bool{
			func(s *server) bool { return s.loaned && s.base == 0 },
			func(s *server) bool { return s.loaned },
			func(s *server) bool { return s.base == 0 },
			func(s *server) bool { return true },
		}
	case p.elastic:
		groups = []func(s *server) bool{
			func(s *server) bool { return s.loaned && s.flex == 0 },
			func(s *server) bool { return !s.loaned },
			func(s *server) bool { return true },
		}
	default:
		groups = []func(s *server) bool{
			func(s *server) bool { return !s.loaned },
			func(s *server) bool { return true },
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
func (c *Cluster) Reclaim(n int) (*ReclaimResult, error) {
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
	if err := c.sync(); err != nil {
		return nil, err
	}
	defer c.synced()
	view := make([][]Worker, len(ids))
	jobs := c.Jobs()
	for _, id := range jobs {
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
	for _, id := range jobs {
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
				if err := c.take(p, x, -1); err != nil {
					return nil, err
				}
			}
		}
		p.parts = slices.DeleteFunc(p.parts, func(x Part) bool { return back[x.Server] })
	}
	for _, id := range r.Servers {
		s := &c.servers[id]
		if s.base+s.flex != 0 {
			return nil, fmt.Errorf("%w: server %d still holds %d GPUs of work after reclaiming", ErrInconsistent, id, s.base+s.flex)
		}
		if _, err := c.state.RemoveServer(s.id); err != nil {
			return nil, fmt.Errorf("%w: returning server %d (%q): %w", ErrInconsistent, id, s.id, err)
		}
		s.active = false
	}
	c.live = slices.DeleteFunc(c.live, func(id int) bool { return back[id] })
	return r, nil
}

// Check verifies the cluster's invariants: no server holds more GPUs than
// it has or negative counts, inactive servers hold nothing, every job's
// parts add up to the servers' counts, every server's free count is the
// live state's (after reading what others changed there since the last
// call), and every job holds in the live state the GPUs its parts count.
// A server gone from the live state behind the cluster's back is reported
// too (ErrInconsistent).
func (c *Cluster) Check() error {
	if err := c.sync(); err != nil {
		return err
	}
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
		if s.base != base[i] || s.flex != flex[i] || s.free != c.gpusPerServer-base[i]-flex[i]-s.other || s.free < 0 || s.other < 0 {
			return fmt.Errorf("%w: server %d counts free %d base %d flex %d other %d, jobs hold base %d flex %d of %d", ErrInconsistent, i, s.free, s.base, s.flex, s.other, base[i], flex[i], c.gpusPerServer)
		}
	}
	for _, id := range c.live {
		s := &c.servers[id]
		pos, ok := c.state.ServerIndex(s.id)
		if !ok {
			return fmt.Errorf("%w: server %d (%q) left the cluster state behind the cluster's back", ErrInconsistent, id, s.id)
		}
		if free := c.state.ServerFree(pos); free != s.free {
			return fmt.Errorf("%w: server %d (%q) counts %d GPUs free, the cluster state has %d", ErrInconsistent, id, s.id, s.free, free)
		}
	}
	return c.checkLive()
}
