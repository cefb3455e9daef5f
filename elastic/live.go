package elastic

import (
	"fmt"
	"slices"
	"strconv"

	"github.com/gpusched/gpusched/cluster"
	"github.com/gpusched/gpusched/placement"
	"github.com/gpusched/gpusched/topology"
)

// HolderKey is the holder key under which a Cluster on a live state binds
// a job's GPUs there: "elastic/" and the job's ID in decimal.
func HolderKey(job int) string { return "elastic/" + strconv.Itoa(job) }

// NewClusterOn returns a training cluster that runs on the live cluster
// state: its servers are of one shape (shape.GPUs GPUs, 1 to
// MaxGPUsPerServer), its training servers the servers of live named by
// training (none or more, each with shape.GPUs GPUs), every worker it
// places holds its GPUs in live under HolderKey(job ID), servers it loans
// are added to live (Loan builds them from shape; LoanServers takes yours)
// and servers it reclaims are removed from live. Its cluster IDs are the
// positions in training, then loans in order; it decides over the GPUs
// that are free in live (GPUs that other holders hold or that are failed
// there are not free to it) as NewCluster's cluster of as many servers
// decides over its own. A shape that
// does not build, or training servers unknown to live, named twice, of
// another size or with GPUs of another type than shape.Type, give an
// error wrapping ErrInvalid.
//
// Other holders may bind, release, fail and recover GPUs of live between
// the cluster's calls (each call reads what changed, in O(servers) when
// anything did); they must not release the cluster's holders or remove
// its servers (its next call that changes anything, and Check, then
// return an error wrapping ErrInconsistent, and queries such as GPUs
// return the counts as last read: the cluster cannot go on, rebuild it
// with NewClusterOn over the servers left). A GPU held by one of its jobs that fails stays with
// the job, as live keeps it (FailedJobs names such jobs). A reclaimed
// server leaves live with whatever others held there (loaned servers are
// the cluster's whole). The cluster and live are one piece of state
// for concurrency: neither is safe for concurrent use, and a caller that
// shares live serialises every call to both.
func NewClusterOn(live *cluster.State, training []string, shape topology.ServerTemplate) (*Cluster, error) {
	if live == nil {
		panic("elastic: NewClusterOn with a nil cluster state")
	}
	if len(training) > MaxServers {
		return nil, fmt.Errorf("%w: %d training servers, at most %d", ErrInvalid, len(training), MaxServers)
	}
	if shape.GPUs < 1 || shape.GPUs > MaxGPUsPerServer {
		return nil, fmt.Errorf("%w: servers of %d GPUs, want 1 to %d", ErrInvalid, shape.GPUs, MaxGPUsPerServer)
	}
	one, err := topology.Homogeneous(1, shape)
	if err != nil {
		return nil, fmt.Errorf("%w: server shape: %w", ErrInvalid, err)
	}
	c := &Cluster{gpusPerServer: shape.GPUs, jobs: map[int]*placed{}, state: live, shape: one.Servers[0], shapeUniform: -1}
	if uniformLinks(&c.shape) {
		c.shapeUniform = 1
	}
	for i, id := range training {
		pos, ok := live.ServerIndex(id)
		if !ok {
			return nil, fmt.Errorf("%w: training server %q is not in the cluster state", ErrInvalid, id)
		}
		if slices.Contains(training[:i], id) {
			return nil, fmt.Errorf("%w: training server %q named twice", ErrInvalid, id)
		}
		if n := live.Server(pos).NumGPUs(); n != shape.GPUs {
			return nil, fmt.Errorf("%w: training server %q has %d GPUs, the cluster's servers %d", ErrInvalid, id, n, shape.GPUs)
		}
		if err := checkType(live.Server(pos), shape.Type, "training"); err != nil {
			return nil, err
		}
		free := live.ServerFree(pos)
		c.servers = append(c.servers, server{active: true, free: free, other: shape.GPUs - free, id: id})
		c.live = append(c.live, i)
	}
	c.synced()
	return c, nil
}

// State returns the live cluster state the cluster runs on (NewCluster's
// own, or the one given to NewClusterOn). Change it only as NewClusterOn
// allows.
func (c *Cluster) State() *cluster.State { return c.state }

// ServerID returns the id in the live state of the server with the given
// cluster ID ("" for an unknown ID).
func (c *Cluster) ServerID(server int) string {
	if server < 0 || server >= len(c.servers) {
		return ""
	}
	return c.servers[server].id
}

// loanShape is the server Loan adds as cluster ID id: one built from the
// cluster's shape, with id "elastic-loan-" and the cluster ID. It shares
// the shape's GPUs and links, which the state copies or only reads.
func (c *Cluster) loanShape(id int) topology.Server {
	s := c.shape
	s.ID = "elastic-loan-" + strconv.Itoa(id)
	return s
}

// LoanServers adds servers lent by the inference cluster, all or none, and
// returns their cluster IDs. Each must have GPUsPerServer GPUs of the
// cluster's GPU type and is added to the live state (so it must validate
// there, with an id and GPU UUIDs new to it). Errors wrap ErrInvalid (and the cluster package's
// error, if the state refused a server) and change nothing.
func (c *Cluster) LoanServers(servers []topology.Server) ([]int, error) {
	if len(servers) > MaxServers-len(c.live) {
		return nil, fmt.Errorf("%w: loan %d servers to a cluster of %d (at most %d at once)", ErrInvalid, len(servers), len(c.live), MaxServers)
	}
	if len(servers) > (MaxLiveGPUs-c.state.Topology().NumGPUs())/c.gpusPerServer {
		return nil, fmt.Errorf("%w: loan %d servers of %d GPUs to a cluster state of %d GPUs (at most %d)", ErrInvalid, len(servers), c.gpusPerServer, c.state.Topology().NumGPUs(), MaxLiveGPUs)
	}
	for i := range servers {
		if n := servers[i].NumGPUs(); n != c.gpusPerServer {
			return nil, fmt.Errorf("%w: loaned server %q has %d GPUs, the cluster's have %d", ErrInvalid, servers[i].ID, n, c.gpusPerServer)
		}
		if err := checkType(&servers[i], c.shape.GPUs[0].Type, "loaned"); err != nil {
			return nil, err
		}
	}
	if err := c.sync(); err != nil {
		return nil, err
	}
	for i := range servers {
		if _, err := c.state.AddServer(servers[i]); err != nil {
			for _, s := range servers[:i] {
				_, _ = c.state.RemoveServer(s.ID) // added just now, held by nobody
			}
			return nil, fmt.Errorf("%w: loaned server %q: %w", ErrInvalid, servers[i].ID, err)
		}
	}
	ids := make([]int, len(servers))
	for i := range ids {
		ids[i] = len(c.servers)
		c.live = append(c.live, len(c.servers))
		c.servers = append(c.servers, server{loaned: true, active: true, free: c.gpusPerServer, id: servers[i].ID})
	}
	c.synced()
	return ids, nil
}

// checkType reports a GPU of server s whose type is not t (ErrInvalid);
// role names the server in the message.
func checkType(s *topology.Server, t topology.GPUType, role string) error {
	for i := range s.GPUs {
		if g := &s.GPUs[i]; g.Type != t {
			return fmt.Errorf("%w: %s server %q has GPU %d of type %q, the cluster's servers are of type %q", ErrInvalid, role, s.ID, g.Index, g.Type, t)
		}
	}
	return nil
}

// synced records that the counts match the live state as it is now.
func (c *Cluster) synced() { c.gen = c.state.Generation() }

// sync reads the free GPUs of every server held now from the live state if
// anything changed there since the cluster last looked: GPUs neither free
// nor held by the cluster's jobs are others'. A server gone from the state,
// or fewer GPUs than the jobs hold there, is ErrInconsistent.
func (c *Cluster) sync() error {
	if c.state.Generation() == c.gen {
		return nil
	}
	for _, id := range c.live {
		s := &c.servers[id]
		pos, ok := c.state.ServerIndex(s.id)
		if !ok {
			return fmt.Errorf("%w: server %d (%q) left the cluster state behind the cluster's back", ErrInconsistent, id, s.id)
		}
		free := c.state.ServerFree(pos)
		other := c.gpusPerServer - free - s.base - s.flex
		if other < 0 {
			return fmt.Errorf("%w: server %d (%q) has %d GPUs free in the cluster state and jobs hold %d of its %d", ErrInconsistent, id, s.id, free, s.base+s.flex, c.gpusPerServer)
		}
		s.free, s.other = free, other
	}
	c.synced()
	return nil
}

// takeLive binds (sign 1) or releases (sign -1) the GPUs of part x for job
// p in the live state. Each worker binds the free GPUs of the server that
// are best linked together and leave the rest best linked (placement's
// GPUChooser, NVLink before PCIe); a release frees the job's last bound
// GPUs on the server, whole workers since workers bind one after another.
func (c *Cluster) takeLive(p *placed, x Part, sign int) error {
	s := &c.servers[x.Server]
	pos, ok := c.state.ServerIndex(s.id)
	if !ok {
		return fmt.Errorf("%w: server %d (%q) is not in the cluster state", ErrInconsistent, x.Server, s.id)
	}
	want := x.Workers * p.gpusPerWorker
	key := p.key
	refs := c.scratch[:0] // the state copies what it keeps
	switch {
	case sign > 0 && c.uniform(x.Server, pos):
		// Every pair of GPUs scores alike: the chooser's tie-break, the
		// lowest free positions, without its search.
		for g, free := range c.state.FreeMask(pos) {
			if len(refs) == want {
				break
			}
			if free {
				refs = append(refs, cluster.GPURef{Server: pos, GPU: g})
			}
		}
	case sign > 0:
		// Worker by worker, the best linked GPUs among the free ones
		// (placement.GPUChooser), on a copy of the free flags.
		c.mask = append(c.mask[:0], c.state.FreeMask(pos)...)
		srv := c.state.Server(pos)
		for range x.Workers {
			gpus, err := placement.GPUChooser{}.Choose(srv, c.mask, p.gpusPerWorker)
			if err != nil {
				break // too few free: reported below
			}
			for _, g := range gpus {
				c.mask[g] = false
				refs = append(refs, cluster.GPURef{Server: pos, GPU: g})
			}
		}
	default:
		held := c.state.Held(key)
		for i := len(held) - 1; i >= 0 && len(refs) < want; i-- {
			if held[i].Server == pos {
				refs = append(refs, held[i])
			}
		}
	}
	c.scratch = refs
	if len(refs) < want {
		return fmt.Errorf("%w: job %d needs %d GPUs of server %d (%q) %s, the cluster state has %d", ErrInconsistent, p.id, want, x.Server, s.id, map[bool]string{true: "free", false: "held"}[sign > 0], len(refs))
	}
	var err error
	if sign > 0 {
		err = c.state.Bind(key, refs)
	} else {
		err = c.state.ReleaseGPUs(key, refs)
	}
	if err != nil {
		return fmt.Errorf("%w: job %d on server %d: %w", ErrInconsistent, p.id, x.Server, err)
	}
	return nil
}

// checkLive verifies that every job holds in the live state exactly the
// GPUs its parts count, server by server, and that the state's own
// invariants hold.
func (c *Cluster) checkLive() error {
	if err := c.state.Check(); err != nil {
		return fmt.Errorf("%w: %w", ErrInconsistent, err)
	}
	for id, p := range c.jobs {
		want := map[int]int{}
		for _, x := range p.parts {
			pos, ok := c.state.ServerIndex(c.servers[x.Server].id)
			if !ok {
				return fmt.Errorf("%w: job %d has workers on server %d (%q), which the cluster state lacks", ErrInconsistent, id, x.Server, c.servers[x.Server].id)
			}
			want[pos] += x.Workers * p.gpusPerWorker
		}
		got := map[int]int{}
		for _, r := range c.state.Held(HolderKey(id)) {
			got[r.Server]++
		}
		for pos, n := range want {
			if got[pos] != n {
				return fmt.Errorf("%w: job %d holds %d GPUs of server %q in the cluster state, its workers %d", ErrInconsistent, id, got[pos], c.state.Server(pos).ID, n)
			}
		}
		if len(got) != len(want) {
			return fmt.Errorf("%w: job %d holds GPUs in the cluster state on %d servers, its workers are on %d", ErrInconsistent, id, len(got), len(want))
		}
	}
	return nil
}

// FailedJobs returns the jobs that hold a GPU marked failed in the live
// state, in increasing ID (nil if none): what a failure hit,
// for the caller to Release and place again, or Resize. O(GPUs held).
func (c *Cluster) FailedJobs() []int {
	var out []int
	for _, id := range c.Jobs() {
		for _, r := range c.state.Held(HolderKey(id)) {
			if c.state.Failed(r) {
				out = append(out, id)
				break
			}
		}
	}
	return out
}

// uniform reports whether every pair of GPUs of the cluster's server id
// (at position pos in the live state) has the same placement.LinkScore, so
// that placement.GPUChooser would take the lowest free positions; it is
// computed once per server (once for all that Loan builds).
func (c *Cluster) uniform(id, pos int) bool {
	s := &c.servers[id]
	if s.uniform == 0 {
		s.uniform = -1
		if uniformLinks(c.state.Server(pos)) {
			s.uniform = 1
		}
	}
	return s.uniform > 0
}

// uniformLinks reports whether every pair of the server's GPUs scores the
// same in placement.LinkScore, in both directions (the score reads the
// type of the GPU it starts from). O(GPUs^2).
func uniformLinks(s *topology.Server) bool {
	if s.Links == nil {
		return true // every pair is LinkUnknown
	}
	first := true
	score := 0
	for i := range s.GPUs {
		for j := range s.GPUs {
			if i == j {
				continue
			}
			v := placement.LinkScore(s.Link(i, j), s.GPUs[i].Type)
			if first {
				score, first = v, false
			} else if v != score {
				return false
			}
		}
	}
	return true
}
