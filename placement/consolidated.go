package placement

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/gpusched/gpusched/topology"
)

// GPUSet is where a job's workers run: GPU positions per server index.
// A GPUSet is a plain map: safe for concurrent reads, not for writes while
// others read it.
type GPUSet map[int][]int

// Count is the number of GPUs in the set.
func (g GPUSet) Count() int {
	n := 0
	for _, gpus := range g {
		n += len(gpus)
	}
	return n
}

// Servers is the number of servers the set spans.
func (g GPUSet) Servers() int {
	n := 0
	for _, gpus := range g {
		if len(gpus) > 0 {
			n++
		}
	}
	return n
}

// ServerPlacer chooses GPUs for a job of n workers of type k, given the
// free GPUs of every server (free[s][i] for GPU i of server s). It returns
// a nil set and no error when it cannot place all n at once, and an error
// wrapping ErrBadRequest for a request that makes no sense (n < 1, free
// not shaped like the cluster's servers); it must not change free.
// Implementations should be safe for concurrent use when they hold no
// state (Consolidated is).
type ServerPlacer interface {
	Place(c *topology.Cluster, free [][]bool, k topology.GPUType, n int) (GPUSet, error)
}

// Consolidated places a job on as few servers as possible, the placement
// Tiresias (Gu et al., NSDI 2019, section 4.2) and Gandiva use for
// consolidation-sensitive jobs: on one server when one has room (best fit:
// the one with the fewest free GPUs that still hold the job, leaving large
// holes for large jobs); otherwise on the k servers with the most free
// GPUs, k the fewest that hold the job, except that the last part goes to
// the tightest server that holds it (so a job of 10 with 8, 8, 2 free takes
// 8 + 2 and leaves the other 8 whole). With Strict, a job that fits in one
// server's GPUs must run on one server, or wait (locality before speed).
// Inside a server the Chooser picks the GPUs (topology-aware) when set;
// otherwise they are taken in index order. [Consolidated.PlaceOn] does the
// same on a live [cluster.State] without scanning every server. It holds
// no state and is safe for concurrent use (the Chooser's settings are only
// read).
type Consolidated struct {
	Strict  bool
	Chooser *GPUChooser
}

var _ ServerPlacer = Consolidated{}

// Place implements ServerPlacer.
func (c Consolidated) Place(cl *topology.Cluster, free [][]bool, t topology.GPUType, n int) (GPUSet, error) {
	if n <= 0 {
		return nil, fmt.Errorf("%w: %d GPUs asked for", ErrBadRequest, n)
	}
	if c.Chooser != nil && (c.Chooser.ExactLimit < 0 || c.Chooser.ExactLimit > MaxExactLimit) {
		return nil, fmt.Errorf("%w: exact limit %d, want 0 to %d", ErrBadRequest, c.Chooser.ExactLimit, MaxExactLimit)
	}
	if len(free) != len(cl.Servers) {
		return nil, fmt.Errorf("%w: free GPUs given for %d servers, the cluster has %d", ErrBadRequest, len(free), len(cl.Servers))
	}
	type srv struct{ s, free, size int }
	var cands []srv
	total := 0
	for s := range cl.Servers {
		if len(free[s]) != len(cl.Servers[s].GPUs) {
			return nil, fmt.Errorf("%w: server %d: %d free flags for %d GPUs", ErrBadRequest, s, len(free[s]), len(cl.Servers[s].GPUs))
		}
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
			total += f
		}
	}
	if total < n {
		return nil, nil
	}
	take := func(s, m int) []int {
		if c.Chooser != nil && m < cands[slices.IndexFunc(cands, func(x srv) bool { return x.s == s })].free {
			mask := make([]bool, len(free[s]))
			for i, g := range cl.Servers[s].GPUs {
				mask[i] = free[s][i] && g.Type == t
			}
			if pick, err := c.Chooser.Choose(&cl.Servers[s], mask, m); err == nil {
				return pick
			}
		}
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
	// bestFit is the server with the fewest free GPUs, at least m, among
	// cands[from:].
	bestFit := func(from, m int) int {
		best := -1
		for i := from; i < len(cands); i++ {
			if cands[i].free >= m && (best < 0 || cands[i].free < cands[best].free) {
				best = i
			}
		}
		return best
	}
	if b := bestFit(0, n); b >= 0 {
		return GPUSet{cands[b].s: take(cands[b].s, n)}, nil
	}
	if c.Strict {
		for _, c := range cands {
			if n <= c.size {
				return nil, nil // fits a server, but none is free enough
			}
		}
	}
	slices.SortStableFunc(cands, func(a, b srv) int { return cmp.Or(cmp.Compare(b.free, a.free), cmp.Compare(a.s, b.s)) })
	out := GPUSet{}
	left := n
	for i := 0; left > 0; i++ {
		// Fewest servers: take whole servers, largest first, until the rest
		// fits one of the servers not yet used; give it the tightest.
		if b := bestFit(i, left); b >= 0 {
			out[cands[b].s] = take(cands[b].s, left)
			break
		}
		out[cands[i].s] = take(cands[i].s, cands[i].free)
		left -= cands[i].free
	}
	return out, nil
}
