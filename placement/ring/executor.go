package ring

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/gpusched/gpusched/cluster"
	"github.com/gpusched/gpusched/perfmodel"
	"github.com/gpusched/gpusched/placement"
	"github.com/gpusched/gpusched/topology"
)

// Job is a gang of ring-all-reduce workers, one per GPU, run for a
// number of iterations without preemption or migration (Yu et al., MobiHoc
// 2022, section 4.1): G_j is GPUs, F_j Iterations. Time is slotted;
// Arrival is the slot the job may start from (0 in the paper's offline
// setting), at most MaxSlot. A Job is a plain value, safe for concurrent
// reads.
type Job struct {
	ID         int
	GPUs       int
	Iterations int
	Arrival    int
	// Ring holds the job's sizes and times for perfmodel.RingModel; its
	// Workers field is ignored (it is GPUs).
	Ring perfmodel.RingJob
	// Estimate is rho^_j, the execution time in slots the schedulers
	// budget for (SJF-BCO's U_g). Zero means the contention-free time on
	// the fewest servers that hold the job (the paper's lower bound l_rho).
	Estimate float64
}

// State is the cluster as a Placer sees it at slot Now. The executor
// owns it and changes it between calls; placers only read it, during the
// call: it is not safe for concurrent use.
type State struct {
	Now int
	// Free[s][i] tells whether GPU i of server s is idle: free in the live
	// cluster.State the executor runs on (healthy, held by nobody). It is
	// that state's read-only FreeMasks view.
	Free [][]bool
	// FreeCount[s] is the number of idle GPUs of server s, and TotalFree
	// their sum.
	FreeCount []int
	TotalFree int
	// Load[s][i] is U_g of the paper: the estimated execution time (slots)
	// of every job placed on the GPU so far, finished or not.
	Load [][]float64
	// LoadSum[s] is the sum of Load[s].
	LoadSum []float64
	// Hosts[s] is the number of running jobs with GPUs on server s, and
	// Spanning[s] how many of them span several servers (the crowd of
	// eq. 6).
	Hosts, Spanning []int
}

// Placer decides where the next job goes. Place returns the GPUs for job
// j now, with exactly j.GPUs idle GPUs, or nil to make it wait for a job
// to finish; it must not modify st. est is the job's rho^ (slots). Placers
// see the jobs one at a time in the scheduler's order; the executor keeps
// the state. Whether a placer is safe for concurrent use is its own (see
// each); an Executor run calls it from one goroutine.
type Placer interface {
	Place(c *topology.Cluster, st *State, j *Job, est float64) (placement.GPUSet, error)
}

// Outcome is what happened to one job. It is a plain value, safe for
// concurrent reads.
type Outcome struct {
	ID            int
	Start, Finish int
	GPUs          placement.GPUSet
	// Servers is the number of servers spanned, MaxContention the largest
	// p_j (eq. 6) seen while it ran, and Estimate the rho^ it was budgeted.
	Servers, MaxContention int
	Estimate               float64
}

// Schedule is an executed schedule: one outcome per job, in the order
// of the jobs given, with the makespan (the last finish) and the mean JCT.
// It is a plain value, safe for concurrent reads.
type Schedule struct {
	Jobs     []Outcome
	Makespan int
	MeanJCT  float64
	// Events is the number of slots at which something started or ended.
	Events int
}

// Executor runs ring-all-reduce jobs on a cluster, slot by slot from
// event to event, with the speed of every job following the contention
// model as others start and finish (Yu et al., section 4.1: phi_j =
// floor(1/tau_j) iterations per slot, tau_j from eq. 8 with p_j of eq. 6;
// a job slower than one iteration per slot advances 1/tau_j per slot).
// Jobs are offered to the Placer in the order given (SJF-BCO sorts them
// first); with Strict, a job that must wait blocks those behind it, as in
// the paper's algorithms, otherwise later jobs may pass it. Placement is
// fixed for a job's whole run, as in the paper.
//
// Run changes nothing in the Executor: several runs may share one when its
// Placer is safe for concurrent use (FirstFit is; placers with scratch
// space, such as ListScheduling, Random, FAFFP and LBSGF, are not).
type Executor struct {
	Model  perfmodel.RingModel
	Placer Placer
	Strict bool
	// Horizon, if positive, abandons a run once the clock passes it
	// (ErrHorizon): SJF-BCO's T.
	Horizon int
}

type ringRun struct {
	job     int // index into jobs
	servers []perfmodel.ServerShare
	spans   bool
	left    float64 // iterations
	speed   float64 // iterations per slot
}

// minServers is the fewest servers whose GPUs hold n, given the servers'
// sizes largest first.
func minServers(desc []int, n int) int {
	k := 0
	for n > 0 && k < len(desc) {
		n -= desc[k]
		k++
	}
	return k
}

// speed is iterations per slot for iteration time tau.
func speed(tau float64) float64 {
	if tau <= 0 {
		return math.Inf(1)
	}
	if tau > 1 {
		return 1 / tau
	}
	// 1e-9 absorbs rounding: tau = 0.1 + 0.15 must give 4 per slot.
	return math.Floor(1/tau + 1e-9)
}

// validateJobs checks the jobs against a cluster of total GPUs; errors
// wrap ErrInvalidJob.
func validateJobs(jobs []Job, total int) error {
	seen := newIDSet(jobs)
	for i := range jobs {
		j := &jobs[i]
		switch {
		case j.GPUs < 1 || j.GPUs > total:
			return fmt.Errorf("%w: job %d asks for %d GPUs, the cluster has %d", ErrInvalidJob, j.ID, j.GPUs, total)
		case j.Iterations < 1:
			return fmt.Errorf("%w: job %d has %d iterations, want at least 1", ErrInvalidJob, j.ID, j.Iterations)
		case j.Arrival < 0 || j.Arrival > MaxSlot:
			return fmt.Errorf("%w: job %d arrives at slot %d, outside [0, %d]", ErrInvalidJob, j.ID, j.Arrival, MaxSlot)
		case seen.add(j.ID):
			return fmt.Errorf("%w: job ID %d appears twice", ErrInvalidJob, j.ID)
		case !(j.Estimate >= 0 && j.Estimate <= MaxSlot):
			return fmt.Errorf("%w: job %d has estimate %v slots, outside [0, %d]", ErrInvalidJob, j.ID, j.Estimate, MaxSlot)
		}
	}
	return nil
}

// idSet is a set of job IDs: a bitset over [lo, lo+len) when the IDs are
// that dense (the usual 0..n-1 or 1..n), else a map.
type idSet struct {
	lo   int
	bits []uint64
	m    map[int]bool
}

func newIDSet(jobs []Job) idSet {
	if len(jobs) == 0 {
		return idSet{}
	}
	lo, hi := jobs[0].ID, jobs[0].ID
	for i := range jobs {
		lo, hi = min(lo, jobs[i].ID), max(hi, jobs[i].ID)
	}
	if span := uint64(hi) - uint64(lo); span < 64*uint64(len(jobs)+1) {
		return idSet{lo: lo, bits: make([]uint64, span/64+1)}
	}
	return idSet{m: make(map[int]bool, len(jobs))}
}

// add adds id and reports whether it was there already.
func (s idSet) add(id int) bool {
	if s.m != nil {
		had := s.m[id]
		s.m[id] = true
		return had
	}
	k := uint64(id) - uint64(s.lo)
	w, b := k/64, uint64(1)<<(k%64)
	had := s.bits[w]&b != 0
	s.bits[w] |= b
	return had
}

// Estimates returns rho^ for every job: its Estimate, or the
// contention-free execution time on the fewest servers that hold it.
// Invalid jobs give an error wrapping ErrInvalidJob, and a job that would
// not finish by slot MaxSlot even alone one wrapping ErrNoProgress.
func (e *Executor) Estimates(c *topology.Cluster, jobs []Job) ([]float64, error) {
	sizes := make([]int, len(c.Servers))
	total := 0
	for s := range c.Servers {
		sizes[s] = len(c.Servers[s].GPUs)
		total += sizes[s]
	}
	if err := validateJobs(jobs, total); err != nil {
		return nil, err
	}
	slices.SortFunc(sizes, func(a, b int) int { return b - a })
	est := make([]float64, len(jobs))
	for i := range jobs {
		j := &jobs[i]
		if j.Estimate > 0 {
			est[i] = j.Estimate
			continue
		}
		r := j.Ring
		r.Workers = j.GPUs
		servers := minServers(sizes, j.GPUs)
		tau, err := e.Model.IterationTime(r, servers, 0)
		if err != nil {
			return nil, fmt.Errorf("job %d: %w", j.ID, err)
		}
		est[i] = math.Ceil(float64(j.Iterations) / speed(tau))
		if !(est[i] <= MaxSlot) {
			return nil, fmt.Errorf("%w: job %d needs %g slots alone on %d servers (%g slots per iteration), more than MaxSlot (%d)",
				ErrNoProgress, j.ID, est[i], servers, tau, MaxSlot)
		}
	}
	return est, nil
}

// Run executes the jobs in the order given on a cluster of idle GPUs: it
// is RunOn over a fresh [cluster.State] of c, which the run alone uses
// (c must validate; otherwise the error wraps ErrInvalidSetting and the
// topology error). est may be nil (Estimates is called); else it holds one
// estimate per job, finite and in [0, MaxSlot]. A run whose next event
// lies beyond slot MaxSlot stops with an error wrapping ErrNoProgress; a
// cancelled ctx stops it with ctx's error.
func (e *Executor) Run(ctx context.Context, c *topology.Cluster, jobs []Job, est []float64) (*Schedule, error) {
	live, err := cluster.New(c)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidSetting, err)
	}
	return e.RunOn(ctx, live, jobs, est)
}

// HolderKey is the holder key under which RunOn binds job id's GPUs in the
// live cluster state: "ring/" and the id in decimal.
func HolderKey(id int) string { return "ring/" + strconv.Itoa(id) }

// holderKeys returns HolderKey of every job, all in one allocation (the
// keys are substrings of one string).
func holderKeys(jobs []Job) []string {
	const prefix = "ring/"
	var tmp [24]byte
	n := 0
	for i := range jobs {
		n += len(prefix) + len(strconv.AppendInt(tmp[:0], int64(jobs[i].ID), 10))
	}
	var b strings.Builder
	b.Grow(n)
	for i := range jobs {
		b.WriteString(prefix)
		b.Write(strconv.AppendInt(tmp[:0], int64(jobs[i].ID), 10))
	}
	all := b.String()
	keys := make([]string, len(jobs))
	from := 0
	for i := range jobs {
		to := from + len(prefix) + len(strconv.AppendInt(tmp[:0], int64(jobs[i].ID), 10))
		keys[i] = all[from:to]
		from = to
	}
	return keys
}

// RunOn executes the jobs on the live cluster state: the GPUs free in live
// (healthy and held by nobody) when a job is offered are the idle GPUs its
// Placer sees in State.Free (a read-only view of live.FreeMasks), a job
// that starts is bound in live under HolderKey(ID) and released when it
// finishes, and GPUs that other holders hold or that are failed stay out
// of every ring. The run owns live while it runs: nothing else may read or
// change it meanwhile (cluster.State is not safe for concurrent use), and
// its servers must not come or go. On return, with or without an error,
// every holder the run bound is released, so live is as it was.
//
// A job's holder key must be held by nobody when the run starts (an error
// wrapping ErrInvalidSetting otherwise). Jobs are validated against every
// GPU of live's topology, failed or held or not; a job that can never fit
// on the GPUs left to it ends the run with ErrUnplaceable once the
// cluster idles. Errors are as for Run; a bind refused by live (a Placer
// that named a GPU the view showed busy) wraps ErrBadPlacement and the
// cluster error.
func (e *Executor) RunOn(ctx context.Context, live *cluster.State, jobs []Job, est []float64) (*Schedule, error) {
	if live == nil {
		panic("ring: RunOn with a nil cluster state")
	}
	if e.Placer == nil {
		return nil, fmt.Errorf("%w: no placer", ErrInvalidSetting)
	}
	if e.Horizon > MaxSlot {
		return nil, fmt.Errorf("%w: horizon %d beyond MaxSlot (%d)", ErrInvalidSetting, e.Horizon, MaxSlot)
	}
	c := live.Topology()
	if est == nil {
		var err error
		if est, err = e.Estimates(c, jobs); err != nil {
			return nil, err
		}
	} else {
		if err := validateJobs(jobs, c.NumGPUs()); err != nil {
			return nil, err
		}
		if len(est) != len(jobs) {
			return nil, fmt.Errorf("%w: %d estimates for %d jobs", ErrInvalidSetting, len(est), len(jobs))
		}
		for i, v := range est {
			if !(v >= 0 && v <= MaxSlot) {
				return nil, fmt.Errorf("%w: estimate %v slots for job %d, outside [0, %d]", ErrInvalidSetting, v, jobs[i].ID, MaxSlot)
			}
		}
	}
	keys := holderKeys(jobs)
	if err := checkKeys(live, jobs, keys); err != nil {
		return nil, err
	}
	return e.runOn(ctx, live, &runScratch{}, jobs, est, keys)
}

// checkKeys reports a job whose holder key live already uses.
func checkKeys(live *cluster.State, jobs []Job, keys []string) error {
	if live.NumHolders() == 0 {
		return nil
	}
	for i, k := range keys {
		if live.Held(k) != nil {
			return fmt.Errorf("%w: job %d's holder %q already holds GPUs in the cluster state", ErrInvalidSetting, jobs[i].ID, k)
		}
	}
	return nil
}

// runScratch is the working memory of executions besides their results.
// One is kept per worker of SJFBCO and reused by its executions, which then
// allocate little more than their schedule.
type runScratch struct {
	st      State
	runs    []ringRun // by job index: a job starts at most once a run
	running []*ringRun
	order   []int
	queue   []int
	refs    []cluster.GPURef
}

// reset readies the scratch for a run of n jobs on live.
func (sc *runScratch) reset(live *cluster.State, n int) {
	ns := live.NumServers()
	st := &sc.st
	*st = State{Free: live.FreeMasks(), FreeCount: zeroed(st.FreeCount, ns), Load: grow(st.Load, ns),
		LoadSum: zeroed(st.LoadSum, ns), Hosts: zeroed(st.Hosts, ns), Spanning: zeroed(st.Spanning, ns)}
	for s := range ns {
		st.FreeCount[s] = live.ServerFree(s)
		st.TotalFree += st.FreeCount[s]
		st.Load[s] = zeroed(st.Load[s], len(st.Free[s]))
	}
	sc.runs = grow(sc.runs, n)
	sc.running = sc.running[:0]
	sc.queue = sc.queue[:0]
}

// grow returns s with length n, reusing its memory where it can; the
// elements it keeps are as they were (their own slices are reused).
func grow[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	return s[:n]
}

// zeroed is grow with every element zero.
func zeroed[T any](s []T, n int) []T {
	s = grow(s, n)
	clear(s)
	return s
}

// runOn is RunOn after validation: keys[i] is job i's holder key, held by
// nobody in live, and sc is working memory of the caller's (reset here).
// Whatever the run bound is released on return.
func (e *Executor) runOn(ctx context.Context, live *cluster.State, sc *runScratch, jobs []Job, est []float64, keys []string) (*Schedule, error) {
	sc.reset(live, len(jobs))
	defer func() {
		// Leave live as it was found: release what is still bound (only
		// after an error does anything remain).
		for _, r := range sc.running {
			live.Release(keys[r.job])
		}
		sc.running = sc.running[:0]
	}()
	return e.run(ctx, live, sc, keys, jobs, est)
}

// run is RunOn's loop, from event to event; sc.running is what is bound,
// for runOn to release after an error.
func (e *Executor) run(ctx context.Context, live *cluster.State, sc *runScratch, keys []string, jobs []Job, est []float64) (*Schedule, error) {
	c := live.Topology()
	st := &sc.st
	// Jobs by arrival (stable: the given order among equal arrivals).
	order := grow(sc.order, len(jobs))
	sc.order = order
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return jobs[a].Arrival - jobs[b].Arrival })
	out := &Schedule{Jobs: make([]Outcome, len(jobs))}
	queue := sc.queue // indices of arrived, waiting jobs, in the given order
	defer func() { sc.queue = queue[:0] }()
	next := 0 // next arrival in order
	t := 0
	done := 0
	for step := 0; done < len(jobs); step++ {
		if step%64 == 0 {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
		}
		if e.Horizon > 0 && t > e.Horizon {
			return nil, fmt.Errorf("%w: %d of %d jobs left at slot %d (horizon %d)", ErrHorizon, len(jobs)-done, len(jobs), t, e.Horizon)
		}
		changed := false
		// Finish.
		kept := sc.running[:0]
		for _, r := range sc.running {
			if r.left > 1e-9 {
				kept = append(kept, r)
				continue
			}
			out.Jobs[r.job].Finish = t
			done++
			changed = true
			live.Release(keys[r.job])
			for _, sh := range r.servers {
				st.resync(live, sh.Server)
				st.Hosts[sh.Server]--
				if r.spans {
					st.Spanning[sh.Server]--
				}
			}
		}
		sc.running = kept
		// Arrive, keeping the given order in the queue.
		arrived := false
		for next < len(order) && jobs[order[next]].Arrival <= t {
			queue = append(queue, order[next])
			next++
			arrived = true
		}
		if arrived {
			slices.Sort(queue)
		}
		// Place.
		st.Now = t
		kq := queue[:0]
		blocked := false
		for _, ji := range queue {
			if blocked {
				kq = append(kq, ji)
				continue
			}
			j := &jobs[ji]
			var set placement.GPUSet
			if j.GPUs <= st.TotalFree {
				var err error
				if set, err = e.Placer.Place(c, st, j, est[ji]); err != nil {
					return nil, fmt.Errorf("job %d: %w", j.ID, err)
				}
			}
			if set == nil {
				kq = append(kq, ji)
				blocked = e.Strict
				continue
			}
			r, err := e.start(live, sc, set, j, ji, keys[ji], est[ji])
			if err != nil {
				return nil, err
			}
			out.Jobs[ji] = Outcome{ID: j.ID, Start: t, GPUs: set, Servers: len(r.servers), Estimate: est[ji]}
			sc.running = append(sc.running, r)
			changed = true
		}
		queue = kq
		if changed {
			out.Events++
			if err := e.speeds(st, jobs, sc.running, out); err != nil {
				return nil, err
			}
		}
		if len(sc.running) == 0 {
			if done == len(jobs) {
				break
			}
			if next == len(order) {
				return nil, fmt.Errorf("%w: %d jobs wait on an idle cluster at slot %d (first: job %d, %d GPUs)", ErrUnplaceable, len(queue), t, jobs[queue[0]].ID, jobs[queue[0]].GPUs)
			}
			t = jobs[order[next]].Arrival
			continue
		}
		// Advance to the next finish or arrival, computed in float64 so
		// that a job too slow to finish is caught, not wrapped around.
		dt, slowest := math.Inf(1), -1
		for _, r := range sc.running {
			if d := math.Ceil(r.left/r.speed - 1e-9); d < dt || slowest < 0 {
				dt, slowest = d, r.job
			}
		}
		if next < len(order) {
			dt = min(dt, float64(jobs[order[next]].Arrival-t))
		}
		dt = max(dt, 1)
		if float64(t)+dt > MaxSlot {
			return nil, fmt.Errorf("%w: at slot %d the next event is %g slots away (job %d runs %g iterations per slot), beyond MaxSlot (%d)",
				ErrNoProgress, t, dt, jobs[slowest].ID, speedOf(sc.running, slowest), MaxSlot)
		}
		for _, r := range sc.running {
			r.left -= r.speed * dt
		}
		t += int(dt)
	}
	sum := 0.0
	for i, o := range out.Jobs {
		out.Makespan = max(out.Makespan, o.Finish)
		sum += float64(o.Finish - jobs[i].Arrival)
	}
	if len(jobs) > 0 {
		out.MeanJCT = sum / float64(len(jobs))
	}
	return out, nil
}

// speedOf is the speed of the running job of index ji.
func speedOf(running []*ringRun, ji int) float64 {
	for _, r := range running {
		if r.job == ji {
			return r.speed
		}
	}
	return 0
}

// start checks a placement and takes its GPUs; the job's run is
// sc.runs[ji].
func (e *Executor) start(live *cluster.State, sc *runScratch, set placement.GPUSet, j *Job, ji int, key string, est float64) (*ringRun, error) {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: job %d: %s", ErrBadPlacement, j.ID, fmt.Sprintf(format, args...))
	}
	if n := set.Count(); n != j.GPUs {
		return nil, bad("%d GPUs for a job of %d", n, j.GPUs)
	}
	st := &sc.st
	r := &sc.runs[ji]
	*r = ringRun{job: ji, left: float64(j.Iterations), servers: r.servers[:0]}
	for srv, gpus := range set {
		if srv < 0 || srv >= len(st.Free) {
			return nil, bad("server %d out of range", srv)
		}
		for k, g := range gpus {
			if g < 0 || g >= len(st.Free[srv]) || !st.Free[srv][g] || slices.Contains(gpus[:k], g) {
				return nil, bad("GPU %d of server %d is not idle", g, srv)
			}
		}
		if len(gpus) > 0 {
			r.servers = append(r.servers, perfmodel.ServerShare{Server: srv, GPUs: len(gpus)})
		}
	}
	slices.SortFunc(r.servers, func(a, b perfmodel.ServerShare) int { return a.Server - b.Server })
	r.spans = len(r.servers) > 1
	refs := sc.refs[:0]
	for _, sh := range r.servers {
		for _, g := range set[sh.Server] {
			refs = append(refs, cluster.GPURef{Server: sh.Server, GPU: g})
		}
	}
	sc.refs = refs
	if err := live.Bind(key, refs); err != nil {
		return nil, fmt.Errorf("%w: job %d: %w", ErrBadPlacement, j.ID, err)
	}
	for srv, gpus := range set {
		for _, g := range gpus {
			st.Load[srv][g] += est
		}
		st.LoadSum[srv] += est * float64(len(gpus))
	}
	for _, sh := range r.servers {
		st.resync(live, sh.Server)
		st.Hosts[sh.Server]++
		if r.spans {
			st.Spanning[sh.Server]++
		}
	}
	return r, nil
}

// resync reads server s's idle GPUs from the live state after a bind or a
// release on it.
func (st *State) resync(live *cluster.State, s int) {
	n := live.ServerFree(s)
	st.TotalFree += n - st.FreeCount[s]
	st.FreeCount[s] = n
}

// speeds recomputes every running job's speed from the contention of eq. 6.
// A job on one server never contends, so its speed is set once.
func (e *Executor) speeds(st *State, jobs []Job, running []*ringRun, out *Schedule) error {
	for _, r := range running {
		if !r.spans && r.speed > 0 {
			continue
		}
		p := 0
		if r.spans {
			for _, sh := range r.servers {
				p = max(p, st.Spanning[sh.Server])
			}
		}
		j := &jobs[r.job]
		rj := j.Ring
		rj.Workers = j.GPUs
		tau, err := e.Model.IterationTime(rj, len(r.servers), p)
		if err != nil {
			return fmt.Errorf("job %d: %w", j.ID, err)
		}
		r.speed = speed(tau)
		o := &out.Jobs[r.job]
		o.MaxContention = max(o.MaxContention, p)
	}
	return nil
}
