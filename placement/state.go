package placement

import (
	"fmt"

	"github.com/gpusched/gpusched/cluster"
	"github.com/gpusched/gpusched/topology"
)

// PlaceOn chooses n free GPUs of type t for one job on the live state, by
// the rule of [Consolidated.Place] (best fit on one server, else the fewest
// servers with the remainder on the tightest; with Strict, one server or
// nothing), and inside each server with the Chooser when set. It appends
// the GPUs to dst[:0] and returns them, grouped by server with ascending
// positions inside each, or nil (and no error) when it cannot place all
// n. It binds nothing. A request that makes no sense (n < 1, a Chooser
// whose ExactLimit is out of range) gives an error wrapping ErrBadRequest.
//
// It reads the state's index of servers by free GPUs, so a job that fits
// one server costs O(G + S/64) for servers of at most G GPUs, S servers,
// plus the choice inside the server; it never scans every server.
func (c Consolidated) PlaceOn(st *cluster.State, t topology.GPUType, n int, dst []cluster.GPURef) ([]cluster.GPURef, error) {
	if n < 1 {
		return nil, fmt.Errorf("%w: %d GPUs asked for", ErrBadRequest, n)
	}
	if c.Chooser != nil && (c.Chooser.ExactLimit < 0 || c.Chooser.ExactLimit > MaxExactLimit) {
		return nil, fmt.Errorf("%w: exact limit %d, want 0 to %d", ErrBadRequest, c.Chooser.ExactLimit, MaxExactLimit)
	}
	dst = dst[:0]
	if st.Free(t) < n {
		return nil, nil
	}
	if s, ok := st.BestFit(t, n); ok {
		return c.takeOn(st, s, t, n, dst)
	}
	if c.Strict && n <= st.LargestServer(t) {
		return nil, nil // fits a server, but none is free enough
	}
	// Fewest servers: whole servers, most free first, until the rest fits
	// one of the servers not yet used; that one is the tightest.
	var used [8]int
	taken := used[:0]
	left := n
	for s, f := range st.ByFree(t) {
		fit := -1
		for s2 := range st.FitAtLeast(t, left) {
			if !contains(taken, s2) {
				fit = s2
				break
			}
		}
		if fit >= 0 {
			return c.takeOn(st, fit, t, left, dst)
		}
		var err error
		if dst, err = c.takeOn(st, s, t, f, dst); err != nil {
			return nil, err
		}
		taken = append(taken, s)
		left -= f
	}
	return nil, nil // unreachable while Free(t) >= n
}

func contains(xs []int, x int) bool {
	for _, v := range xs {
		if v == x {
			return true
		}
	}
	return false
}

// takeOn appends m free GPUs of type t of server s to dst.
func (c Consolidated) takeOn(st *cluster.State, s int, t topology.GPUType, m int, dst []cluster.GPURef) ([]cluster.GPURef, error) {
	srv := st.Server(s)
	mask := st.FreeMask(s)
	if c.Chooser != nil && m < st.ServerFreeOf(s, t) {
		if st.ServerFreeOf(s, t) != st.ServerFree(s) {
			// A server of several types: offer only the GPUs of type t.
			own := make([]bool, len(mask))
			for i, g := range srv.GPUs {
				own[i] = mask[i] && g.Type == t
			}
			mask = own
		}
		pick, err := c.Chooser.Choose(srv, mask, m)
		if err != nil {
			return nil, err // the state's counts disagree with its masks
		}
		for _, i := range pick {
			dst = append(dst, cluster.GPURef{Server: s, GPU: i})
		}
		return dst, nil
	}
	for i, g := range srv.GPUs {
		if m == 0 {
			break
		}
		if mask[i] && g.Type == t {
			dst = append(dst, cluster.GPURef{Server: s, GPU: i})
			m--
		}
	}
	return dst, nil
}
