package ring

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"runtime"
	"slices"
	"sync"

	"github.com/gpusched/gpusched/cluster"
	"github.com/gpusched/gpusched/perfmodel"
	"github.com/gpusched/gpusched/topology"
)

// SJFBCO is Algorithm 1 of Yu, Ji, Rajan and Liu, "On Scheduling
// Ring-All-Reduce Learning Jobs in Multi-Tenant GPU Clusters with
// Communication Contention", ACM MobiHoc 2022 (smallest job first,
// balancing contention and overhead): jobs sorted by GPU count ascending
// (ties by the order given), a bisection on the per-GPU cap theta over
// [1, T], and for each theta a sweep over kappa, jobs of at most kappa GPUs
// placed by FA-FFP (Algorithm 2), larger ones by LBSGF (Algorithm 3) with
// the knob lambda; each (theta, kappa) is executed by an Executor
// (strict order: a job that must wait blocks those behind it, "wait for a
// running job to finish and retry") under the contention model, and the
// schedule with the smallest makespan is kept.
//
// Readings of ours, where the paper leaves room:
//   - U_g and theta are in slots: U_g sums the estimates rho^_j (Job.s
//     Estimate) of the jobs placed on GPU g; the paper writes rho^_j/u.
//   - The bisection follows the paper: a theta that improves the best
//     makespan moves the right end below it, any other moves the left end
//     above it. A (theta, kappa) run whose makespan passes T, or that
//     leaves a job unplaceable under the cap, is infeasible.
//   - kappa only matters through which jobs have G_j <= kappa, so the
//     sweep 1..max G_j tries kappa = 1 and every distinct job size, which
//     gives the same schedules as the full sweep.
//   - FA-FFP's reading is Reading (LeastLoadedGPUs, the pseudo-code, by
//     default).
//
// Schedule builds its own placers for every run: one SJFBCO is safe for
// concurrent use.
type SJFBCO struct {
	Model perfmodel.RingModel
	// Horizon is T, 0 to MaxSlot; zero means the sum of the jobs'
	// estimates (running them one after another, which any cap admits)
	// plus one. On a live state where some GPUs are held by others or
	// failed (ScheduleOn), the estimates, times on the whole topology, may
	// fall short of what the jobs take on the GPUs left, so zero then
	// means at least the makespan of the run under a cap that binds
	// nothing (the sum above): the bisection's last cap reaches it, and a
	// schedule is found whenever the jobs fit.
	Horizon int
	// Kappas, if not empty, replaces the sweep (Fig. 5 of the paper fixes
	// it); at most MaxKappas, each at least 1.
	Kappas []int
	// Lambda >= 1 is LBSGF's spread; zero means 1.
	Lambda  float64
	Reading FAFFPReading
	// Sequential runs the kappa sweep on one goroutine.
	Sequential bool
}

// MaxKappas bounds SJFBCO.Kappas: every theta of the bisection runs the
// executor once per kappa.
const MaxKappas = 1024

// SJFBCOResult is the schedule SJFBCO chose and how it got there. It is a
// plain value, safe for concurrent reads.
type SJFBCOResult struct {
	*Schedule
	Theta, Kappa int
	// Runs is the number of (theta, kappa) executions.
	Runs int
}

// Schedule runs Algorithm 1 on jobs (all present from their arrival; the
// paper's are at slot 0) and returns the best schedule found, its outcomes
// in the order of jobs. Its executions run on fresh cluster states of c
// (one per worker, reused by the worker's executions), so c must validate.
// A cluster that does not, or settings out of range (lambda below 1 or
// NaN, a horizon negative or beyond MaxSlot, a kappa below 1, an unknown
// reading), give an error wrapping ErrInvalidSetting; no cap finding a
// schedule by the horizon gives one wrapping ErrHorizon; a cancelled ctx
// stops the search with its error.
func (b SJFBCO) Schedule(ctx context.Context, c *topology.Cluster, jobs []Job) (*SJFBCOResult, error) {
	return b.schedule(ctx, c, nil, jobs)
}

// ScheduleOn is Schedule on the live cluster state: every execution runs
// (Executor.RunOn) on a replica of live as it is now (one per worker,
// reused by its executions, each leaving it as it found it), so the GPUs
// that other holders hold or that are failed there stay out of every
// ring. It only reads live, binds nothing there and changes nothing, so it
// returns a plan; the caller owns live and must not change it during the
// call (reads may go on). Jobs are validated against every GPU of live's
// topology; a job of more GPUs than are free in live (healthy and held by
// nobody) can never run and gives an error wrapping ErrUnplaceable that
// names it, as RunOn's; holder keys of the jobs (HolderKey) that live
// already uses give an error wrapping ErrInvalidSetting. The default
// horizon is as Horizon says (one run more when live has GPUs held or
// failed).
func (b SJFBCO) ScheduleOn(ctx context.Context, live *cluster.State, jobs []Job) (*SJFBCOResult, error) {
	if live == nil {
		panic("ring: ScheduleOn with a nil cluster state")
	}
	for i := range jobs {
		if k := HolderKey(jobs[i].ID); live.Held(k) != nil {
			return nil, fmt.Errorf("%w: job %d's holder %q already holds GPUs in the cluster state", ErrInvalidSetting, jobs[i].ID, k)
		}
	}
	return b.schedule(ctx, live.Topology(), live, jobs)
}

// replica returns a state of live's topology with the same holders and
// failed GPUs, for a worker's executions. It only reads live.
func replica(live *cluster.State) (*cluster.State, error) {
	r, err := cluster.New(live.Topology())
	if err != nil {
		return nil, err
	}
	for _, h := range live.Holders() {
		if err := r.Bind(h, live.Held(h)); err != nil {
			return nil, err
		}
	}
	var failed []cluster.GPURef
	for s := range live.NumServers() {
		for i := range live.Server(s).GPUs {
			if g := (cluster.GPURef{Server: s, GPU: i}); live.Failed(g) {
				failed = append(failed, g)
			}
		}
	}
	if _, err := r.Fail(failed...); err != nil {
		return nil, err
	}
	return r, nil
}

// schedule is Schedule, its executions on replicas of live when live is
// not nil (c is then live's topology).
func (b SJFBCO) schedule(ctx context.Context, c *topology.Cluster, live *cluster.State, jobs []Job) (*SJFBCOResult, error) {
	switch {
	case b.Lambda != 0 && !(b.Lambda >= 1):
		return nil, fmt.Errorf("%w: lambda %v, want >= 1 (0 means 1)", ErrInvalidSetting, b.Lambda)
	case b.Horizon < 0:
		return nil, fmt.Errorf("%w: Horizon %d negative, want 0 (the default) to MaxSlot (%d)", ErrInvalidSetting, b.Horizon, MaxSlot)
	case b.Horizon > MaxSlot:
		return nil, fmt.Errorf("%w: horizon %d beyond MaxSlot (%d)", ErrInvalidSetting, b.Horizon, MaxSlot)
	case b.Reading != LeastLoadedGPUs && b.Reading != PackedServers:
		return nil, fmt.Errorf("%w: FA-FFP reading %d", ErrInvalidSetting, b.Reading)
	case len(b.Kappas) > MaxKappas:
		return nil, fmt.Errorf("%w: %d kappas, at most %d", ErrInvalidSetting, len(b.Kappas), MaxKappas)
	}
	for i, k := range b.Kappas {
		if k < 1 {
			return nil, fmt.Errorf("%w: Kappas[%d] is %d, want at least 1 (jobs of at most kappa GPUs go to FA-FFP)", ErrInvalidSetting, i, k)
		}
	}
	probe := Executor{Model: b.Model}
	est, err := probe.Estimates(c, jobs)
	if err != nil {
		return nil, err
	}
	// Smallest job first, stable.
	idx := make([]int, len(jobs))
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(a, b int) int { return cmp.Compare(jobs[a].GPUs, jobs[b].GPUs) })
	sorted := make([]Job, len(jobs))
	sest := make([]float64, len(jobs))
	for k, i := range idx {
		sorted[k], sest[k] = jobs[i], est[i]
	}
	// On a live state, only the GPUs free there (healthy, held by no
	// other holder) are usable: a job larger than them all never runs.
	short := false // some GPUs of live are not usable
	if live != nil {
		usable := 0
		for s := range live.NumServers() {
			usable += live.ServerFree(s)
		}
		for i := range jobs {
			if jobs[i].GPUs > usable {
				return nil, fmt.Errorf("%w: job %d needs %d GPUs, %d of the cluster state's %d are usable (the others are held or failed)",
					ErrUnplaceable, jobs[i].ID, jobs[i].GPUs, usable, c.NumGPUs())
			}
		}
		short = usable < c.NumGPUs()
	}
	horizon := b.Horizon
	if horizon == 0 {
		sum := 0.0
		for _, e := range est {
			sum += e
		}
		horizon = int(math.Min(math.Ceil(sum)+1, math.MaxInt32))
	}
	kappas := b.Kappas
	if len(kappas) == 0 {
		kappas = []int{1}
		for _, j := range sorted {
			if j.GPUs > kappas[len(kappas)-1] {
				kappas = append(kappas, j.GPUs)
			}
		}
	}
	keys := holderKeys(sorted)
	// Workers: each execution runs on a worker's own cluster state (a
	// replica of live, or a fresh state of c) and scratch, reused by the
	// worker's later executions (a run leaves its state as it found it).
	// At most GOMAXPROCS run at once, made as needed.
	nw := 1
	if !b.Sequential {
		nw = max(1, min(runtime.GOMAXPROCS(0), len(kappas)))
	}
	pool := make(chan *ringWorker, nw)
	for range nw {
		pool <- nil
	}
	newWorker := func() (*ringWorker, error) {
		var st *cluster.State
		var err error
		if live == nil {
			if st, err = cluster.New(c); err != nil {
				return nil, fmt.Errorf("%w: %w", ErrInvalidSetting, err)
			}
		} else if st, err = replica(live); err != nil {
			return nil, fmt.Errorf("%w: copying the cluster state: %w", ErrInvalidSetting, err)
		}
		return &ringWorker{live: st}, nil
	}
	var best *SJFBCOResult
	runs := 0
	// try runs every kappa under cap theta, abandoning runs past slot
	// limit (none if 0), and returns the best schedule (nil if none).
	try := func(theta, limit int) (*SJFBCOResult, error) {
		res := make([]*Schedule, len(kappas))
		errs := make([]error, len(kappas))
		run := func(k int, w *ringWorker) {
			// The placers keep only scratch space between calls.
			p := &w.placer
			p.kappa = kappas[k]
			p.small.Theta, p.small.Reading = float64(theta), b.Reading
			p.large.Theta, p.large.Lambda = float64(theta), b.Lambda
			ex := Executor{Model: b.Model, Strict: true, Horizon: limit, Placer: &w.placer}
			res[k], errs[k] = ex.runOn(ctx, w.live, &w.scratch, sorted, sest, keys)
		}
		var wg sync.WaitGroup
		for k := range kappas {
			w := <-pool
			if w == nil {
				var err error
				if w, err = newWorker(); err != nil {
					pool <- nil
					errs[k] = err
					continue
				}
			}
			if nw == 1 {
				run(k, w)
				pool <- w
				continue
			}
			wg.Go(func() {
				defer func() { pool <- w }()
				run(k, w)
			})
		}
		wg.Wait()
		runs += len(kappas)
		var out *SJFBCOResult
		for k, r := range res {
			if errs[k] != nil {
				if errors.Is(errs[k], ErrHorizon) || errors.Is(errs[k], ErrUnplaceable) {
					continue
				}
				return nil, errs[k]
			}
			if out == nil || r.Makespan < out.Makespan {
				out = &SJFBCOResult{Schedule: r, Theta: theta, Kappa: kappas[k]}
			}
		}
		return out, nil
	}
	if b.Horizon == 0 && short {
		// The estimates are times on the whole topology; on the GPUs left
		// the jobs may take longer. A cap of the horizon binds nothing (no
		// GPU's load passes the sum of the estimates), so the makespan of
		// that run is within reach of the bisection's last cap: the
		// horizon is at least that.
		r, err := try(horizon, 0)
		if err != nil {
			return nil, err
		}
		if r != nil && r.Makespan > horizon {
			horizon = r.Makespan
		}
	}
	for left, right := 1, horizon; left <= right; {
		theta := left + (right-left)/2
		r, err := try(theta, horizon)
		if err != nil {
			return nil, err
		}
		if r != nil && (best == nil || r.Makespan < best.Makespan) {
			best = r
			right = theta - 1
		} else {
			left = theta + 1
		}
	}
	if best == nil {
		return nil, fmt.Errorf("%w: no cap theta in [1, %d] gives a schedule finishing by slot %d", ErrHorizon, horizon, horizon)
	}
	// Outcomes back in the caller's order.
	out := make([]Outcome, len(jobs))
	for k, i := range idx {
		out[i] = best.Jobs[k]
	}
	best.Schedule = &Schedule{Jobs: out, Makespan: best.Makespan, MeanJCT: best.MeanJCT, Events: best.Events}
	best.Runs = runs
	return best, nil
}

// ringWorker is what one SJFBCO worker keeps between its executions: its
// cluster state (left as it was found by every run), the executor's
// scratch and the placers' (scratch only).
type ringWorker struct {
	live    *cluster.State
	scratch runScratch
	placer  byKappa
}
