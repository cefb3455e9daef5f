package cluster

import (
	"fmt"
	"iter"
	"math/bits"
	"slices"

	"github.com/gpusched/gpusched/topology"
)

// GPURef names one GPU by position: Server indexes the servers of
// [State.Topology], GPU the GPUs of that server (not [topology.GPU.Index];
// see [State.Lookup]). Positions stay valid until a server is removed.
type GPURef struct {
	Server, GPU int
}

// MaxHolderLen bounds the length of a holder key in bytes.
const MaxHolderLen = 1024

// State is the live state of a cluster: its topology, who holds each GPU
// (an opaque, non-empty holder key such as a job or pod-group UID), and
// each GPU's health. A GPU is free when it is healthy and held by nobody.
//
// Servers can be added and removed, GPUs marked failed and recovered,
// holders bound to GPUs (all or nothing) and released. The counts of free,
// healthy and total GPUs per type and per server are kept incrementally,
// and every read below is O(1) unless it says otherwise; so is an index of
// servers by free GPUs of each type, through which [State.BestFit] and
// [State.ByFree] find servers without scanning them all. Read-only views
// ([State.Topology], [State.FreeMasks], [State.Held]) share the state's
// memory: they are valid until the next change and must not be written.
//
// Failing a held GPU does not release it: the holder keeps it (its job may
// still run on the others) until it is released, and a failed GPU that is
// released stays out of the free pool until it recovers. Removing a server
// takes its GPUs from their holders.
//
// # Invariants
//
// [State.Check] verifies them all: every GPU is held by at most one holder
// and appears in that holder's list exactly once; free masks, counts per
// server and per type, and the server index agree with the GPUs; server
// ids are unique.
//
// State is not safe for concurrent use: an embedder serialises calls (the
// scheduler package holds one mutex). Read-only methods may run
// concurrently with each other while no method that changes the state runs.
type State struct {
	topo    topology.Cluster
	servers []server
	free    [][]bool
	byID    map[string]int
	uuids   map[string]bool

	typeID map[topology.GPUType]int
	types  []typeState
	sorted []topology.GPUType // present types by name

	holders map[string]*holding
	spare   []*holding // released holdings, reused by Bind

	gen, capGen uint64
}

type server struct {
	holder []string // "" when free
	failed []bool
	typeOf []int // type id of each GPU
	nFree  int
	counts []typeCount // one entry per distinct type of the server
}

type typeCount struct{ t, total, healthy, free int }

type typeState struct {
	name                 topology.GPUType
	total, healthy, free int
	maxPer               int
	// bucket[f] is the set of servers with exactly f free GPUs of the
	// type (f >= 1), a bitset over server positions.
	bucket [][]uint64
}

type holding struct{ gpus []GPURef }

// New returns the state of c with every GPU free and healthy. c may be nil
// or have no servers (servers are added later); otherwise it must validate.
// The state copies the server list and the GPUs; link and bandwidth
// matrices are shared and, as topology says, read-only.
func New(c *topology.Cluster) (*State, error) {
	st := &State{byID: map[string]int{}, uuids: map[string]bool{}, typeID: map[topology.GPUType]int{}, holders: map[string]*holding{}}
	if c == nil || len(c.Servers) == 0 {
		if c != nil {
			st.topo.Name = c.Name
		}
		return st, nil
	}
	if err := c.Validate(); err != nil {
		return nil, &Error{Op: "new", GPU: -1, Msg: "the cluster does not validate", Kind: ErrInvalid, cause: err}
	}
	st.topo.Name = c.Name
	st.topo.Servers = make([]topology.Server, 0, len(c.Servers))
	for i := range c.Servers {
		st.appendServer(c.Servers[i])
	}
	st.rebuildBuckets()
	st.sortTypes()
	return st, nil
}

// appendServer adds a validated server at the end, free and healthy; the
// caller rebuilds or extends the buckets.
func (st *State) appendServer(s topology.Server) {
	s.GPUs = slices.Clone(s.GPUs)
	p := len(st.topo.Servers)
	st.topo.Servers = append(st.topo.Servers, s)
	st.byID[s.ID] = p
	n := len(s.GPUs)
	sv := server{holder: make([]string, n), failed: make([]bool, n), typeOf: make([]int, n), nFree: n}
	mask := make([]bool, n)
	for i, g := range s.GPUs {
		mask[i] = true
		if g.UUID != "" {
			st.uuids[g.UUID] = true
		}
		t, ok := st.typeID[g.Type]
		if !ok {
			t = len(st.types)
			st.typeID[g.Type] = t
			st.types = append(st.types, typeState{name: g.Type})
		}
		sv.typeOf[i] = t
		ts := &st.types[t]
		ts.total++
		ts.healthy++
		ts.free++
		j := slices.IndexFunc(sv.counts, func(c typeCount) bool { return c.t == t })
		if j < 0 {
			sv.counts = append(sv.counts, typeCount{t: t})
			j = len(sv.counts) - 1
		}
		sv.counts[j].total++
		sv.counts[j].healthy++
		sv.counts[j].free++
	}
	for _, c := range sv.counts {
		st.types[c.t].maxPer = max(st.types[c.t].maxPer, c.total)
	}
	st.servers = append(st.servers, sv)
	st.free = append(st.free, mask)
}

// words is the length of a bitset over the servers.
func (st *State) words() int { return (len(st.servers) + 63) / 64 }

// rebuildBuckets recomputes the server index of every type, in the
// memory of the index it replaces where that is large enough.
func (st *State) rebuildBuckets() {
	w := st.words()
	for t := range st.types {
		ts := &st.types[t]
		if cap(ts.bucket) < ts.maxPer+1 {
			ts.bucket = append(ts.bucket[:cap(ts.bucket)], make([][]uint64, ts.maxPer+1-cap(ts.bucket))...)
		}
		ts.bucket = ts.bucket[:ts.maxPer+1]
		for f := 1; f <= ts.maxPer; f++ {
			if row := ts.bucket[f]; cap(row) >= w {
				ts.bucket[f] = row[:w]
				clear(ts.bucket[f])
			} else {
				ts.bucket[f] = make([]uint64, w)
			}
		}
	}
	for s := range st.servers {
		for _, c := range st.servers[s].counts {
			if c.free > 0 {
				st.types[c.t].bucket[c.free][s/64] |= 1 << (s % 64)
			}
		}
	}
}

// countOf returns the server's count entry for type t.
func (sv *server) countOf(t int) *typeCount {
	for j := range sv.counts {
		if sv.counts[j].t == t {
			return &sv.counts[j]
		}
	}
	return nil
}

// setFree marks GPU i of server s free or not and updates every count.
func (st *State) setFree(s, i int, free bool) {
	if st.free[s][i] == free {
		return
	}
	st.free[s][i] = free
	sv := &st.servers[s]
	t := sv.typeOf[i]
	c := sv.countOf(t)
	ts := &st.types[t]
	old := c.free
	d := -1
	if free {
		d = 1
	}
	c.free += d
	sv.nFree += d
	ts.free += d
	if old > 0 {
		ts.bucket[old][s/64] &^= 1 << (s % 64)
	}
	if c.free > 0 {
		ts.bucket[c.free][s/64] |= 1 << (s % 64)
	}
}

// ---- Reads ----

// Topology returns the cluster as it is now: a read-only view whose
// Servers follow the state's server positions. It stays valid until a
// server is added or removed.
func (st *State) Topology() *topology.Cluster { return &st.topo }

// FreeMasks returns, for every server position s and GPU position i,
// whether the GPU is free: a read-only view in the shape
// [placement.ServerPlacer] takes, valid until a server is added or removed
// (the flags change with every bind, release and failure).
func (st *State) FreeMasks() [][]bool { return st.free }

// FreeMask returns server s's free flags (a read-only view).
func (st *State) FreeMask(s int) []bool { return st.free[s] }

// NumServers returns the number of servers.
func (st *State) NumServers() int { return len(st.servers) }

// Server returns the server at position s (read-only). It panics if s is
// out of range.
func (st *State) Server(s int) *topology.Server { return &st.topo.Servers[s] }

// ServerIndex returns the position of the server with the given id.
func (st *State) ServerIndex(id string) (int, bool) {
	s, ok := st.byID[id]
	return s, ok
}

// Lookup returns the position of the GPU whose NVML index is index on the
// server with the given id (what device plugins and annotations name). It
// scans the server's GPUs.
func (st *State) Lookup(serverID string, index int) (GPURef, error) {
	s, ok := st.byID[serverID]
	if !ok {
		return GPURef{}, &Error{Op: "lookup", Server: serverID, GPU: -1, Kind: ErrUnknownServer}
	}
	for i, g := range st.topo.Servers[s].GPUs {
		if g.Index == index {
			return GPURef{s, i}, nil
		}
	}
	return GPURef{}, &Error{Op: "lookup", Server: serverID, GPU: index, Msg: "the server has no GPU of this index", Kind: ErrInvalid}
}

// Types returns the GPU types present (at least one GPU, failed or not),
// sorted by name. The slice is shared and replaced when servers come or
// go: do not modify it.
func (st *State) Types() []topology.GPUType { return st.sorted }

// sortTypes recomputes the list of present types; the list stays as it
// is (the same slice) when the types present are the same.
func (st *State) sortTypes() {
	present := 0
	for _, ts := range st.types {
		if ts.total > 0 {
			present++
		}
	}
	same := present == len(st.sorted)
	for _, name := range st.sorted {
		if !same {
			break
		}
		same = st.types[st.typeID[name]].total > 0
	}
	if same {
		return
	}
	st.sorted = make([]topology.GPUType, 0, len(st.types))
	for _, ts := range st.types {
		if ts.total > 0 {
			st.sorted = append(st.sorted, ts.name)
		}
	}
	slices.Sort(st.sorted)
}

// Total returns the number of GPUs of type t, failed or not.
func (st *State) Total(t topology.GPUType) int {
	if i, ok := st.typeID[t]; ok {
		return st.types[i].total
	}
	return 0
}

// Capacity returns the number of healthy GPUs of type t, held or not.
func (st *State) Capacity(t topology.GPUType) int {
	if i, ok := st.typeID[t]; ok {
		return st.types[i].healthy
	}
	return 0
}

// Free returns the number of free GPUs of type t.
func (st *State) Free(t topology.GPUType) int {
	if i, ok := st.typeID[t]; ok {
		return st.types[i].free
	}
	return 0
}

// FreeCounts appends the free GPUs of each of types to dst[:0] and returns
// it (the shape gang.Scheduler's Decide takes).
func (st *State) FreeCounts(types []topology.GPUType, dst []int) []int {
	dst = dst[:0]
	for _, t := range types {
		dst = append(dst, st.Free(t))
	}
	return dst
}

// ServerFree returns the free GPUs of server s, of any type.
func (st *State) ServerFree(s int) int { return st.servers[s].nFree }

// ServerFreeOf returns the free GPUs of type t on server s.
func (st *State) ServerFreeOf(s int, t topology.GPUType) int {
	if c := st.countOn(s, t); c != nil {
		return c.free
	}
	return 0
}

// ServerCapacityOf returns the healthy GPUs of type t on server s.
func (st *State) ServerCapacityOf(s int, t topology.GPUType) int {
	if c := st.countOn(s, t); c != nil {
		return c.healthy
	}
	return 0
}

func (st *State) countOn(s int, t topology.GPUType) *typeCount {
	i, ok := st.typeID[t]
	if !ok {
		return nil
	}
	return st.servers[s].countOf(i)
}

// Holder returns who holds the GPU ("" if nobody). It panics if r is out
// of range.
func (st *State) Holder(r GPURef) string { return st.servers[r.Server].holder[r.GPU] }

// Failed reports whether the GPU is marked failed. It panics if r is out
// of range.
func (st *State) Failed(r GPURef) bool { return st.servers[r.Server].failed[r.GPU] }

// Held returns the GPUs the holder holds, in the order they were bound (a
// read-only view, valid until the next change); nil for an unknown holder.
func (st *State) Held(holder string) []GPURef {
	if h := st.holders[holder]; h != nil {
		return h.gpus
	}
	return nil
}

// NumHolders returns the number of holders that hold at least one GPU.
func (st *State) NumHolders() int { return len(st.holders) }

// Holders returns every holder, sorted. O(holders log holders).
func (st *State) Holders() []string {
	out := make([]string, 0, len(st.holders))
	for h := range st.holders {
		out = append(out, h)
	}
	slices.Sort(out)
	return out
}

// Generation counts every change of the state (binds, releases, failures,
// servers), as the Kubernetes scheduler's NodeInfo does: a consumer that
// saw generation g knows nothing changed while it is still g.
func (st *State) Generation() uint64 { return st.gen }

// CapacityGeneration counts the changes of capacity: servers added or
// removed, GPUs failed or recovered. A round-based scheduler re-solves its
// allocation when it moves.
func (st *State) CapacityGeneration() uint64 { return st.capGen }

// BestFit returns the server with the fewest free GPUs of type t that
// still has at least n, ties to the lowest position (the best fit of
// Tiresias's and Gandiva's consolidation). O(G + S/64) for servers of at
// most G GPUs of the type, S servers.
func (st *State) BestFit(t topology.GPUType, n int) (int, bool) {
	i, ok := st.typeID[t]
	if !ok || n < 1 {
		return 0, false
	}
	ts := &st.types[i]
	for f := n; f <= ts.maxPer; f++ {
		for w, word := range ts.bucket[f] {
			if word != 0 {
				return w*64 + bits.TrailingZeros64(word), true
			}
		}
	}
	return 0, false
}

// FitAtLeast yields the servers with at least n free GPUs of type t and
// their free counts, fewest free first, ties by position: the best fits
// in order, for a placer that must skip some. The state must not change
// during the iteration.
func (st *State) FitAtLeast(t topology.GPUType, n int) iter.Seq2[int, int] {
	return func(yield func(int, int) bool) {
		i, ok := st.typeID[t]
		if !ok {
			return
		}
		ts := &st.types[i]
		for f := max(n, 1); f <= ts.maxPer; f++ {
			for w, word := range ts.bucket[f] {
				for word != 0 {
					b := bits.TrailingZeros64(word)
					word &^= 1 << b
					if !yield(w*64+b, f) {
						return
					}
				}
			}
		}
	}
}

// LargestServer returns the most GPUs of type t that one server has,
// failed or not (0 for a type the cluster lacks).
func (st *State) LargestServer(t topology.GPUType) int {
	if i, ok := st.typeID[t]; ok {
		return st.types[i].maxPer
	}
	return 0
}

// ByFree yields the servers with free GPUs of type t and their free
// counts, most free first, ties by position. Each step is O(1) amortised
// over a bucket's bitset; the state must not change during the iteration.
func (st *State) ByFree(t topology.GPUType) iter.Seq2[int, int] {
	return func(yield func(int, int) bool) {
		i, ok := st.typeID[t]
		if !ok {
			return
		}
		ts := &st.types[i]
		for f := ts.maxPer; f >= 1; f-- {
			for w, word := range ts.bucket[f] {
				for word != 0 {
					b := bits.TrailingZeros64(word)
					word &^= 1 << b
					if !yield(w*64+b, f) {
						return
					}
				}
			}
		}
	}
}

// ---- Changes ----

// checkRef reports whether r names a GPU.
func (st *State) checkRef(op string, r GPURef) *Error {
	if r.Server < 0 || r.Server >= len(st.servers) || r.GPU < 0 || r.GPU >= len(st.servers[r.Server].holder) {
		return newErr(ErrInvalid, op, "GPU position (%d, %d) out of range (%d servers)", r.Server, r.GPU, len(st.servers))
	}
	return nil
}

func (st *State) gpuErr(kind error, op string, r GPURef, holder, format string, args ...any) *Error {
	return &Error{Op: op, Server: st.topo.Servers[r.Server].ID, GPU: r.GPU, Holder: holder, Msg: fmt.Sprintf(format, args...), Kind: kind}
}

func checkHolder(op, holder string) *Error {
	switch {
	case holder == "":
		return newErr(ErrInvalid, op, "empty holder key")
	case len(holder) > MaxHolderLen:
		return newErr(ErrInvalid, op, "holder key of %d bytes (at most %d)", len(holder), MaxHolderLen)
	}
	return nil
}

// distinct reports the first GPU that appears twice in gpus, if any.
func distinct(gpus []GPURef) (GPURef, bool) {
	if len(gpus) <= 32 {
		for i := range gpus {
			for j := range i {
				if gpus[i] == gpus[j] {
					return gpus[i], false
				}
			}
		}
		return GPURef{}, true
	}
	seen := make(map[GPURef]bool, len(gpus))
	for _, r := range gpus {
		if seen[r] {
			return r, false
		}
		seen[r] = true
	}
	return GPURef{}, true
}

// Bind gives the holder the GPUs, all or none: every GPU must exist, be
// healthy, held by nobody and named once; otherwise nothing changes and
// the error (an [*Error]) names the first GPU at fault. A holder that
// already holds GPUs keeps them and gains these. O(len(gpus)).
func (st *State) Bind(holder string, gpus []GPURef) error {
	const op = "bind"
	if err := checkHolder(op, holder); err != nil {
		return err
	}
	for _, r := range gpus {
		if err := st.checkRef(op, r); err != nil {
			err.Holder = holder
			return err
		}
		sv := &st.servers[r.Server]
		switch {
		case sv.holder[r.GPU] != "":
			return st.gpuErr(ErrBusy, op, r, holder, "held by %q", sv.holder[r.GPU])
		case sv.failed[r.GPU]:
			return st.gpuErr(ErrFailed, op, r, holder, "the GPU is marked failed")
		}
	}
	if r, ok := distinct(gpus); !ok {
		return st.gpuErr(ErrInvalid, op, r, holder, "the GPU is named twice")
	}
	if len(gpus) == 0 {
		return nil
	}
	h := st.holders[holder]
	if h == nil {
		h = st.newHolding()
		st.holders[holder] = h
	}
	for _, r := range gpus {
		st.servers[r.Server].holder[r.GPU] = holder
		st.setFree(r.Server, r.GPU, false)
		h.gpus = append(h.gpus, r)
	}
	st.gen++
	return nil
}

// Release frees every GPU the holder holds (failed ones stay out of the
// free pool) and forgets the holder; it returns how many it held (0 for an
// unknown holder). O(GPUs held).
func (st *State) Release(holder string) int {
	h := st.holders[holder]
	if h == nil {
		return 0
	}
	for _, r := range h.gpus {
		st.unhold(r)
	}
	n := len(h.gpus)
	st.forget(holder, h)
	st.gen++
	return n
}

func (st *State) newHolding() *holding {
	if n := len(st.spare); n > 0 {
		h := st.spare[n-1]
		st.spare = st.spare[:n-1]
		return h
	}
	return &holding{}
}

// forget drops a holder and keeps its holding for reuse.
func (st *State) forget(holder string, h *holding) {
	delete(st.holders, holder)
	h.gpus = h.gpus[:0]
	st.spare = append(st.spare, h)
}

func (st *State) unhold(r GPURef) {
	sv := &st.servers[r.Server]
	sv.holder[r.GPU] = ""
	if !sv.failed[r.GPU] {
		st.setFree(r.Server, r.GPU, true)
	}
}

// ReleaseGPUs frees some of the holder's GPUs, all or none: each must be
// held by holder and named once. A holder left with no GPU is forgotten.
// O(GPUs held + len(gpus)).
func (st *State) ReleaseGPUs(holder string, gpus []GPURef) error {
	const op = "release"
	if err := checkHolder(op, holder); err != nil {
		return err
	}
	for _, r := range gpus {
		if err := st.checkRef(op, r); err != nil {
			err.Holder = holder
			return err
		}
		if got := st.servers[r.Server].holder[r.GPU]; got != holder {
			return st.gpuErr(ErrNotHeld, op, r, holder, "held by %q", got)
		}
	}
	if r, ok := distinct(gpus); !ok {
		return st.gpuErr(ErrInvalid, op, r, holder, "the GPU is named twice")
	}
	if len(gpus) == 0 {
		return nil
	}
	for _, r := range gpus {
		st.unhold(r)
	}
	h := st.holders[holder]
	h.gpus = slices.DeleteFunc(h.gpus, func(r GPURef) bool { return st.servers[r.Server].holder[r.GPU] != holder })
	if len(h.gpus) == 0 {
		st.forget(holder, h)
	}
	st.gen++
	return nil
}

// Fail marks the GPUs failed, all or none (each must exist; one already
// failed stays failed), and returns the holders of any of them, sorted,
// which keep their GPUs until released. O(len(gpus) + affected holders).
func (st *State) Fail(gpus ...GPURef) ([]string, error) {
	return st.setHealth("fail", gpus, true)
}

// Recover marks the GPUs healthy again, all or none; a recovered GPU that
// nobody holds is free.
func (st *State) Recover(gpus ...GPURef) error {
	_, err := st.setHealth("recover", gpus, false)
	return err
}

func (st *State) setHealth(op string, gpus []GPURef, failed bool) ([]string, error) {
	for _, r := range gpus {
		if err := st.checkRef(op, r); err != nil {
			return nil, err
		}
	}
	var affected []string
	changed := false
	for _, r := range gpus {
		sv := &st.servers[r.Server]
		if h := sv.holder[r.GPU]; h != "" && failed && !slices.Contains(affected, h) {
			affected = append(affected, h)
		}
		if sv.failed[r.GPU] == failed {
			continue
		}
		changed = true
		sv.failed[r.GPU] = failed
		c := sv.countOf(sv.typeOf[r.GPU])
		d := 1
		if failed {
			d = -1
		}
		c.healthy += d
		st.types[sv.typeOf[r.GPU]].healthy += d
		if sv.holder[r.GPU] == "" {
			st.setFree(r.Server, r.GPU, !failed)
		}
	}
	if changed {
		st.gen++
		st.capGen++
	}
	slices.Sort(affected)
	return affected, nil
}

// serverRefs returns every GPU of the server with the given id.
func (st *State) serverRefs(op, id string) ([]GPURef, error) {
	s, ok := st.byID[id]
	if !ok {
		return nil, &Error{Op: op, Server: id, GPU: -1, Kind: ErrUnknownServer}
	}
	refs := make([]GPURef, len(st.servers[s].holder))
	for i := range refs {
		refs[i] = GPURef{s, i}
	}
	return refs, nil
}

// FailServer marks every GPU of the server failed (a node that went
// unhealthy) and returns their holders, sorted.
func (st *State) FailServer(id string) ([]string, error) {
	refs, err := st.serverRefs("fail server", id)
	if err != nil {
		return nil, err
	}
	return st.Fail(refs...)
}

// RecoverServer marks every GPU of the server healthy.
func (st *State) RecoverServer(id string) error {
	refs, err := st.serverRefs("recover server", id)
	if err != nil {
		return err
	}
	return st.Recover(refs...)
}

// AddServer adds a server, all its GPUs free and healthy, at the end of
// the positions, and returns its position. The server must validate as
// topology does (which caps its GPUs at topology.MaxGPUsPerServer and its
// id at topology.MaxIDLen bytes), the state must stay within
// topology.MaxClusterGPUs, and the server's id and GPU UUIDs must be new
// to the state. O(types x G + S/64) for the index.
func (st *State) AddServer(s topology.Server) (int, error) {
	const op = "add server"
	id := s.ID
	if err := (&topology.Cluster{Servers: []topology.Server{s}}).Validate(); err != nil {
		return 0, &Error{Op: op, Server: id, GPU: -1, Msg: "the server does not validate", Kind: ErrInvalid, cause: err}
	}
	if total := st.numGPUs(); len(s.GPUs) > topology.MaxClusterGPUs-total {
		return 0, &Error{Op: op, Server: id, GPU: -1, Kind: ErrInvalid,
			Msg: fmt.Sprintf("%d GPUs more than the %d held would make more than topology.MaxClusterGPUs (%d)", len(s.GPUs), total, topology.MaxClusterGPUs)}
	}
	if _, dup := st.byID[s.ID]; dup {
		return 0, &Error{Op: op, Server: s.ID, GPU: -1, Msg: "a server of this id exists", Kind: ErrDuplicateServer}
	}
	for i, g := range s.GPUs {
		if g.UUID != "" && st.uuids[g.UUID] {
			return 0, &Error{Op: op, Server: s.ID, GPU: i, Msg: fmt.Sprintf("GPU UUID %q is already in the cluster", g.UUID), Kind: ErrDuplicateServer}
		}
	}
	oldWords := st.words()
	oldMax := make([]int, len(st.types))
	for t := range st.types {
		oldMax[t] = st.types[t].maxPer
	}
	st.appendServer(s)
	p := len(st.servers) - 1
	// Extend the index: new types, taller buckets, longer bitsets.
	w := st.words()
	for t := range st.types {
		ts := &st.types[t]
		if t >= len(oldMax) || ts.maxPer != oldMax[t] || w != oldWords {
			for len(ts.bucket) <= ts.maxPer {
				ts.bucket = append(ts.bucket, nil)
			}
			for f := 1; f <= ts.maxPer; f++ {
				for len(ts.bucket[f]) < w {
					ts.bucket[f] = append(ts.bucket[f], 0)
				}
			}
		}
	}
	for _, c := range st.servers[p].counts {
		st.types[c.t].bucket[c.free][p/64] |= 1 << (p % 64)
	}
	st.sortTypes()
	st.gen++
	st.capGen++
	return p, nil
}

// numGPUs returns the GPUs of every server, healthy or not.
func (st *State) numGPUs() int {
	n := 0
	for t := range st.types {
		n += st.types[t].total
	}
	return n
}

// RemoveServer removes a server. Its GPUs are taken from their holders
// (a holder left with none is forgotten), whose keys it returns, sorted.
// The servers after it move down one position, and so do their GPUs in
// every holding. O(S x types x G / 64 + GPUs held).
func (st *State) RemoveServer(id string) ([]string, error) {
	p, ok := st.byID[id]
	if !ok {
		return nil, &Error{Op: "remove server", Server: id, GPU: -1, Kind: ErrUnknownServer}
	}
	sv := &st.servers[p]
	var affected []string
	for _, h := range sv.holder {
		if h != "" && !slices.Contains(affected, h) {
			affected = append(affected, h)
		}
	}
	slices.Sort(affected)
	for _, h := range affected {
		hd := st.holders[h]
		hd.gpus = slices.DeleteFunc(hd.gpus, func(r GPURef) bool { return r.Server == p })
		if len(hd.gpus) == 0 {
			st.forget(h, hd)
		}
	}
	for _, c := range sv.counts {
		ts := &st.types[c.t]
		ts.total -= c.total
		ts.healthy -= c.healthy
		ts.free -= c.free
	}
	for _, g := range st.topo.Servers[p].GPUs {
		if g.UUID != "" {
			delete(st.uuids, g.UUID)
		}
	}
	delete(st.byID, id)
	st.topo.Servers = slices.Delete(st.topo.Servers, p, p+1)
	st.servers = slices.Delete(st.servers, p, p+1)
	st.free = slices.Delete(st.free, p, p+1)
	for q := p; q < len(st.topo.Servers); q++ {
		st.byID[st.topo.Servers[q].ID] = q
	}
	for _, hd := range st.holders {
		for i := range hd.gpus {
			if hd.gpus[i].Server > p {
				hd.gpus[i].Server--
			}
		}
	}
	// The tallest server of a type may be gone.
	for t := range st.types {
		st.types[t].maxPer = 0
	}
	for q := range st.servers {
		for _, c := range st.servers[q].counts {
			st.types[c.t].maxPer = max(st.types[c.t].maxPer, c.total)
		}
	}
	st.rebuildBuckets()
	st.sortTypes()
	st.gen++
	st.capGen++
	return affected, nil
}

// Check verifies the invariants (see the type's documentation) by
// recomputing everything from the GPUs, and returns an error wrapping
// [ErrInconsistent] for the first that fails. O(GPUs + holders + index).
func (st *State) Check() error {
	bad := func(format string, args ...any) error {
		return newErr(ErrInconsistent, "check", format, args...)
	}
	n := len(st.topo.Servers)
	if len(st.servers) != n || len(st.free) != n || len(st.byID) != n {
		return bad("%d servers, %d states, %d masks, %d ids", n, len(st.servers), len(st.free), len(st.byID))
	}
	type tally struct{ total, healthy, free int }
	byType := make([]tally, len(st.types))
	held := map[string]int{}
	for s := range st.servers {
		srv, sv := &st.topo.Servers[s], &st.servers[s]
		if p, ok := st.byID[srv.ID]; !ok || p != s {
			return bad("server %q at position %d is indexed at %d", srv.ID, s, p)
		}
		if len(sv.holder) != len(srv.GPUs) || len(sv.failed) != len(srv.GPUs) || len(st.free[s]) != len(srv.GPUs) {
			return bad("server %q: per-GPU slices do not match its %d GPUs", srv.ID, len(srv.GPUs))
		}
		perType := map[int]*tally{}
		nFree := 0
		for i, g := range srv.GPUs {
			t, ok := st.typeID[g.Type]
			if !ok || sv.typeOf[i] != t {
				return bad("server %q gpu %d: type %s not indexed", srv.ID, i, g.Type)
			}
			if perType[t] == nil {
				perType[t] = &tally{}
			}
			pt := perType[t]
			pt.total++
			free := sv.holder[i] == "" && !sv.failed[i]
			if st.free[s][i] != free {
				return bad("server %q gpu %d: free flag %v, want %v", srv.ID, i, st.free[s][i], free)
			}
			if !sv.failed[i] {
				pt.healthy++
			}
			if free {
				pt.free++
				nFree++
			}
			if h := sv.holder[i]; h != "" {
				held[h]++
				hd := st.holders[h]
				if hd == nil || slices.Index(hd.gpus, GPURef{s, i}) < 0 {
					return bad("server %q gpu %d: held by %q, who does not list it", srv.ID, i, h)
				}
			}
		}
		if nFree != sv.nFree {
			return bad("server %q: %d free GPUs counted, %d kept", srv.ID, nFree, sv.nFree)
		}
		if len(perType) != len(sv.counts) {
			return bad("server %q: %d types, %d counts kept", srv.ID, len(perType), len(sv.counts))
		}
		for _, c := range sv.counts {
			pt := perType[c.t]
			if pt == nil || pt.total != c.total || pt.healthy != c.healthy || pt.free != c.free {
				return bad("server %q type %s: counts %+v kept, %+v counted", srv.ID, st.types[c.t].name, c, pt)
			}
			byType[c.t].total += c.total
			byType[c.t].healthy += c.healthy
			byType[c.t].free += c.free
			for f := 1; f < len(st.types[c.t].bucket); f++ {
				in := st.types[c.t].bucket[f][s/64]&(1<<(s%64)) != 0
				if in != (f == c.free) {
					return bad("server %q type %s: in the index of %d free: %v, has %d free", srv.ID, st.types[c.t].name, f, in, c.free)
				}
			}
		}
	}
	for t, ts := range st.types {
		if byType[t] != (tally{ts.total, ts.healthy, ts.free}) {
			return bad("type %s: kept %d/%d/%d total/healthy/free, counted %+v", ts.name, ts.total, ts.healthy, ts.free, byType[t])
		}
		if st.typeID[ts.name] != t {
			return bad("type %s: indexed at %d, stored at %d", ts.name, st.typeID[ts.name], t)
		}
	}
	for h, hd := range st.holders {
		if len(hd.gpus) == 0 || held[h] != len(hd.gpus) {
			return bad("holder %q lists %d GPUs, holds %d", h, len(hd.gpus), held[h])
		}
		if _, ok := distinct(hd.gpus); !ok {
			return bad("holder %q lists a GPU twice", h)
		}
	}
	return nil
}
