package ring

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"

	"github.com/gpusched/gpusched/placement"
	"github.com/gpusched/gpusched/topology"
)

var inf = math.Inf(1)

// gpuRef is one GPU with its load, for choosing the least loaded.
type gpuRef struct {
	s, i int
	u    float64
}

func (a gpuRef) less(b gpuRef) bool {
	return a.u < b.u || a.u == b.u && (a.s < b.s || a.s == b.s && a.i < b.i)
}

// maxHeap keeps the n least loaded GPUs seen, the most loaded on top
// (typed sift operations: container/heap would box every GPU pushed).
type maxHeap []gpuRef

// push adds g.
func (h *maxHeap) push(g gpuRef) {
	*h = append(*h, g)
	a := *h
	for i := len(a) - 1; i > 0; {
		p := (i - 1) / 2
		if !a[p].less(a[i]) {
			break
		}
		a[p], a[i] = a[i], a[p]
		i = p
	}
}

// replaceTop puts g in place of the most loaded and restores the order.
func (h maxHeap) replaceTop(g gpuRef) {
	h[0] = g
	for i, n := 0, len(h); ; {
		c := 2*i + 1
		if c >= n {
			return
		}
		if c+1 < n && h[c].less(h[c+1]) {
			c++
		}
		if !h[i].less(h[c]) {
			return
		}
		h[i], h[c] = h[c], h[i]
		i = c
	}
}

// leastLoaded returns the n idle GPUs of the given servers (all when
// servers is nil) with the smallest load, among those whose load plus est
// stays within limit, or nil if there are fewer than n. buf is scratch.
func leastLoaded(st *State, servers []int, n int, est, limit float64, buf *maxHeap) placement.GPUSet {
	h := (*buf)[:0]
	last := len(servers)
	if servers == nil {
		last = len(st.Free)
	}
	for k := range last {
		s := k
		if servers != nil {
			s = servers[k]
		}
		if st.FreeCount[s] == 0 {
			continue
		}
		free := st.Free[s]
		load := st.Load[s][:len(free)]
		for i, f := range free {
			if !f {
				continue
			}
			u := load[i]
			if u+est > limit {
				continue
			}
			switch g := (gpuRef{s, i, u}); {
			case len(h) < n:
				h.push(g)
			case u > h[0].u:
				// More loaded than the most loaded kept: not less.
			case g.less(h[0]):
				h.replaceTop(g)
			}
		}
	}
	*buf = h
	if len(h) < n {
		return nil
	}
	set := placement.GPUSet{}
	for _, g := range h {
		set[g.s] = append(set[g.s], g.i)
	}
	for _, gpus := range set {
		slices.Sort(gpus)
	}
	return set
}

// FirstFit is the paper's First-Fit baseline (Yu et al., MobiHoc 2022,
// section 7) as we read it: the first server, in index order, with enough
// idle GPUs takes the whole job; if none has, the job takes idle GPUs
// server by server in index order. GPUs inside a server in index order.
// It holds no state and is safe for concurrent use.
type FirstFit struct{ WholeServer bool }

// Place implements Placer.
func (ff FirstFit) Place(c *topology.Cluster, st *State, j *Job, _ float64) (placement.GPUSet, error) {
	for s, f := range st.FreeCount {
		if ff.WholeServer && f >= j.GPUs {
			return placement.GPUSet{s: takeIdle(st, s, j.GPUs)}, nil
		}
	}
	set := placement.GPUSet{}
	left := j.GPUs
	for s, f := range st.FreeCount {
		if f == 0 {
			continue
		}
		m := min(f, left)
		set[s] = takeIdle(st, s, m)
		if left -= m; left == 0 {
			return set, nil
		}
	}
	return nil, nil
}

func takeIdle(st *State, s, m int) []int {
	out := make([]int, 0, m)
	for i, free := range st.Free[s] {
		if len(out) == m {
			break
		}
		if free {
			out = append(out, i)
		}
	}
	return out
}

// ListScheduling is Graham's list scheduling, the paper's List-Scheduling
// baseline (Yu et al., section 7) as we read it: each job, in list order,
// takes the idle GPUs that have carried the least estimated work so far
// (the least U_g, which is what "the machine that frees first" becomes for
// gangs), wherever they are. It is SJF-BCO's FA-FFP without the cap theta,
// the sorting by size or the large-job rule. It keeps scratch space
// between calls: it is not safe for concurrent use (give each Executor run
// its own).
type ListScheduling struct{ buf maxHeap }

// Place implements Placer.
func (l *ListScheduling) Place(c *topology.Cluster, st *State, j *Job, est float64) (placement.GPUSet, error) {
	return leastLoaded(st, nil, j.GPUs, est, inf, &l.buf), nil
}

// Random is the paper's Random baseline: the job takes GPUs drawn
// uniformly from the idle ones (seeded, so runs repeat). Its generator and
// scratch space change with every call: it is not safe for concurrent use
// (give each Executor run its own, as runs must also be repeatable).
type Random struct {
	Rand *rand.Rand
	buf  []gpuRef
}

// NewRandom returns a Random placer seeded with seed.
func NewRandom(seed uint64) *Random { return &Random{Rand: rand.New(rand.NewPCG(seed, 0x5eed))} }

// Place implements Placer.
func (r *Random) Place(c *topology.Cluster, st *State, j *Job, _ float64) (placement.GPUSet, error) {
	if r.Rand == nil {
		r.Rand = rand.New(rand.NewPCG(1, 0x5eed))
	}
	idle := r.buf[:0]
	for s := range st.Free {
		if st.FreeCount[s] == 0 {
			continue
		}
		for i, free := range st.Free[s] {
			if free {
				idle = append(idle, gpuRef{s: s, i: i})
			}
		}
	}
	r.buf = idle
	if len(idle) < j.GPUs {
		return nil, nil
	}
	// Partial Fisher-Yates: the first n are a uniform sample.
	for k := 0; k < j.GPUs; k++ {
		x := k + r.Rand.IntN(len(idle)-k)
		idle[k], idle[x] = idle[x], idle[k]
	}
	set := placement.GPUSet{}
	for _, g := range idle[:j.GPUs] {
		set[g.s] = append(set[g.s], g.i)
	}
	for _, gpus := range set {
		slices.Sort(gpus)
	}
	return set, nil
}

// FAFFPReading chooses between the two readings of FA-FFP (Yu et al.,
// Algorithm 2). Its values are constants, safe for concurrent use.
type FAFFPReading int

const (
	// LeastLoadedGPUs is the pseudo-code: among the idle GPUs whose load
	// plus the job's estimate stays within theta, take the G_j least
	// loaded, wherever they are.
	LeastLoadedGPUs FAFFPReading = iota
	// PackedServers is the prose ("fragment-aware first-fit packing"):
	// small jobs go whole onto one server, the one with the fewest idle
	// GPUs that holds the job under the cap (filling servers already in
	// use before breaking into empty ones), on its least loaded GPUs; a
	// job no single server can hold falls back to the pseudo-code.
	PackedServers
)

// FAFFP is Algorithm 2 of Yu et al. (fragment-aware first-fit packing)
// with cap Theta on every GPU's accumulated estimate U_g, in the reading
// chosen. The job waits if too few GPUs qualify. Theta must be positive
// (not NaN) and Reading one of the two (Place returns an error wrapping
// ErrInvalidSetting otherwise). It keeps scratch space between calls: it
// is not safe for concurrent use.
type FAFFP struct {
	Theta   float64
	Reading FAFFPReading
	buf     maxHeap
	one     []int
}

// Place implements Placer.
func (f *FAFFP) Place(c *topology.Cluster, st *State, j *Job, est float64) (placement.GPUSet, error) {
	if !(f.Theta > 0) || f.Reading != LeastLoadedGPUs && f.Reading != PackedServers {
		return nil, fmt.Errorf("%w: FA-FFP with theta %v and reading %d", ErrInvalidSetting, f.Theta, f.Reading)
	}
	if f.Reading == PackedServers {
		best := -1
		for s, idle := range st.FreeCount {
			if idle < j.GPUs || best >= 0 && idle >= st.FreeCount[best] {
				continue
			}
			n := 0
			for i, free := range st.Free[s] {
				if free && st.Load[s][i]+est <= f.Theta {
					n++
				}
			}
			if n >= j.GPUs {
				best = s
			}
		}
		if best >= 0 {
			f.one = append(f.one[:0], best)
			return leastLoaded(st, f.one, j.GPUs, est, f.Theta, &f.buf), nil
		}
	}
	return leastLoaded(st, nil, j.GPUs, est, f.Theta, &f.buf), nil
}

// LBSGF is Algorithm 3 of Yu et al. (least-busy server-GPU first): servers
// by average load (sum of U_g over their GPUs, over O_s) ascending, ties by
// index; the job may use the shortest prefix whose capacity reaches
// Lambda x G_j (Lambda >= 1 lets it spread wider; 0 means 1), and takes
// there the least loaded idle GPUs within the cap Theta, or waits. Theta
// must be positive (not NaN) and Lambda 0 or at least 1 (Place returns an
// error wrapping ErrInvalidSetting otherwise). It keeps scratch space
// between calls: it is not safe for concurrent use.
type LBSGF struct {
	Theta  float64
	Lambda float64
	buf    maxHeap
	order  []int
	mean   []float64
}

// Place implements Placer.
func (l *LBSGF) Place(c *topology.Cluster, st *State, j *Job, est float64) (placement.GPUSet, error) {
	if !(l.Theta > 0) || l.Lambda != 0 && !(l.Lambda >= 1) {
		return nil, fmt.Errorf("%w: LBSGF with theta %v and lambda %v", ErrInvalidSetting, l.Theta, l.Lambda)
	}
	ns := len(st.Free)
	l.order = l.order[:0]
	l.mean = slices.Grow(l.mean[:0], ns)[:ns]
	for s := range ns {
		if n := len(st.Load[s]); n > 0 {
			l.mean[s] = st.LoadSum[s] / float64(n)
			l.order = append(l.order, s)
		}
	}
	// The shortest prefix of the servers by average load: pop them from a
	// heap (O(n + k log n)) rather than sort all n at every attempt.
	less := func(a, b int) bool { return l.mean[a] < l.mean[b] || l.mean[a] == l.mean[b] && a < b }
	h := l.order
	down := func(i, n int) {
		for {
			c := 2*i + 1
			if c >= n {
				return
			}
			if c+1 < n && less(h[c+1], h[c]) {
				c++
			}
			if !less(h[c], h[i]) {
				return
			}
			h[i], h[c] = h[c], h[i]
			i = c
		}
	}
	for i := len(h)/2 - 1; i >= 0; i-- {
		down(i, len(h))
	}
	need := max(l.Lambda, 1) * float64(j.GPUs)
	capacity, idle, k := 0, 0, 0
	for n := len(h); n > 0 && float64(capacity) < need; k++ {
		// Move the least to the end of the heap part; the prefix builds up
		// at the end of h, most loaded first.
		h[0], h[n-1] = h[n-1], h[0]
		n--
		down(0, n)
		s := h[n]
		capacity += len(st.Free[s])
		idle += st.FreeCount[s]
	}
	if idle < j.GPUs {
		return nil, nil
	}
	return leastLoaded(st, h[len(h)-k:], j.GPUs, est, l.Theta, &l.buf), nil
}

// byKappa sends jobs of at most Kappa GPUs to FA-FFP and the others to
// LBSGF (Algorithm 1's inner loop).
type byKappa struct {
	kappa int
	small FAFFP
	large LBSGF
}

func (b *byKappa) Place(c *topology.Cluster, st *State, j *Job, est float64) (placement.GPUSet, error) {
	if j.GPUs <= b.kappa {
		return b.small.Place(c, st, j, est)
	}
	return b.large.Place(c, st, j, est)
}
