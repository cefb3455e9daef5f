package gang

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"sort"
)

// Order ranks jobs: the scheduler serves jobs in increasing Key, breaking
// ties by arrival and ID. Implementations should be safe for concurrent use
// (this package's are: they hold no state, or none that Key changes).
type Order interface {
	Key(j JobView, now float64) float64
}

// ByArrival is FIFO order. It is safe for concurrent use.
type ByArrival struct{}

// Key implements Order.
func (ByArrival) Key(j JobView, _ float64) float64 { return j.Arrival }

// bestRate is the job's fastest rate on any type.
func bestRate(j JobView) float64 {
	r := 0.0
	for _, v := range j.Throughput {
		r = math.Max(r, v)
	}
	return r
}

// ShortestJob is SJF: the job's whole duration, the trace's when it has
// one, else its steps at its fastest rate. It is safe for concurrent use.
type ShortestJob struct{}

// Key implements Order.
func (ShortestJob) Key(j JobView, _ float64) float64 {
	if j.Duration > 0 {
		return j.Duration
	}
	return j.Steps / bestRate(j)
}

// ShortestRemaining is SRTF: the remaining steps at the fastest rate. It
// is safe for concurrent use.
type ShortestRemaining struct{}

// Key implements Order.
func (ShortestRemaining) Key(j JobView, _ float64) float64 { return j.Remaining / bestRate(j) }

// DefaultThresholds are Tiresias's queue limits in GPU-seconds (its
// simulator's defaults).
var DefaultThresholds = []float64{3250, 7200, 18000}

// LAS2D is Tiresias's discretised two-dimensional least attained service
// (Gu et al., "Tiresias: A GPU Cluster Manager for Distributed Deep
// Learning", NSDI 2019, section 4.2): a job's attained service is GPUs x
// executed time; queue k holds the jobs whose service lies between the
// (k-1)th and kth threshold; lower queues go first, FIFO inside a queue. A
// job that has waited at least Starvation times its executed time is moved
// back to the first queue (Tiresias's starvation guard; 0 disables it).
// Thresholds must be finite, positive and increasing, Starvation finite and
// >= 0 (Priority.Decide returns an error wrapping ErrInvalid otherwise). A
// LAS2D is safe for concurrent use.
type LAS2D struct {
	Thresholds []float64 // nil means DefaultThresholds
	Starvation float64
}

func (l LAS2D) validate() error {
	for i, v := range l.Thresholds {
		if !(v > 0) || math.IsInf(v, 0) || i > 0 && !(v > l.Thresholds[i-1]) {
			return fmt.Errorf("%w: 2D-LAS thresholds %v, want finite, positive and increasing", ErrInvalid, l.Thresholds)
		}
	}
	if !(l.Starvation >= 0) || math.IsInf(l.Starvation, 0) {
		return fmt.Errorf("%w: 2D-LAS starvation factor %v, want finite and >= 0", ErrInvalid, l.Starvation)
	}
	return nil
}

// Key implements Order: queue index, then arrival within the queue.
func (l LAS2D) Key(j JobView, now float64) float64 {
	q := queueOf(l.Thresholds, j.Attained)
	if l.Starvation > 0 && j.Type < 0 && j.Attained > 0 {
		executed := j.Attained / float64(j.ScaleFactor)
		if now-j.Queued >= l.Starvation*executed {
			q = 0
		}
	}
	return float64(q)*1e12 + j.Arrival
}

func queueOf(th []float64, attained float64) int {
	if th == nil {
		th = DefaultThresholds
	}
	q := 0
	for q < len(th) && attained >= th[q] {
		q++
	}
	return q
}

// Gittins2D is Tiresias's 2D-Gittins order (section 4.2): with S the GPU
// time of a job drawn from a known distribution (Samples, such as the YARN
// traces Tiresias ships) and a the service a job has attained, its index is
//
//	G(a) = P(S - a <= D | S > a) / E[min(S - a, D) | S > a]
//
// with quantum D (Quantum, default 3250 GPU-seconds); higher indices go
// first. The index is taken at a rounded down to a multiple of D, so that
// the order changes, and jobs are preempted, only as they cross quanta.
// Build it with NewGittins2D. It is immutable once built and safe for
// concurrent use.
type Gittins2D struct {
	Quantum float64
	sorted  []float64
	prefix  []float64 // prefix sums of sorted
}

// NewGittins2D prepares the index over GPU-time samples, which must be
// finite and positive, with quantum D (0 means 3250 GPU-seconds; else
// finite and positive). Bad samples or quantum give an error wrapping
// ErrInvalid that names the first.
func NewGittins2D(samples []float64, quantum float64) (*Gittins2D, error) {
	if quantum == 0 {
		quantum = 3250
	}
	if !(quantum > 0) || math.IsInf(quantum, 0) {
		return nil, fmt.Errorf("%w: 2D-Gittins quantum %v GPU-s, want finite and positive", ErrInvalid, quantum)
	}
	for i, v := range samples {
		if !(v > 0) || math.IsInf(v, 0) {
			return nil, fmt.Errorf("%w: 2D-Gittins sample %d is %v GPU-s, want finite and positive", ErrInvalid, i, v)
		}
	}
	g := &Gittins2D{Quantum: quantum, sorted: slices.Clone(samples)}
	slices.Sort(g.sorted)
	g.prefix = make([]float64, len(g.sorted)+1)
	for i, v := range g.sorted {
		g.prefix[i+1] = g.prefix[i] + v
	}
	return g, nil
}

func (g *Gittins2D) validate() error {
	if !(g.Quantum > 0) || math.IsInf(g.Quantum, 0) {
		return fmt.Errorf("%w: 2D-Gittins quantum %v GPU-s (build it with NewGittins2D)", ErrInvalid, g.Quantum)
	}
	return nil
}

// Index returns G(a).
func (g *Gittins2D) Index(a float64) float64 {
	d := g.Quantum
	n := len(g.sorted)
	lo := sort.SearchFloat64s(g.sorted, math.Nextafter(a, math.Inf(1))) // first S > a
	count := n - lo
	if count == 0 {
		return math.Inf(1) // beyond every sample: finishing soon is all we know
	}
	hi := sort.SearchFloat64s(g.sorted, math.Nextafter(a+d, math.Inf(1))) // first S > a + d
	within := hi - lo
	// E[min(S - a, D)]: (S - a) for the samples within, D for the others.
	sumWithin := g.prefix[hi] - g.prefix[lo] - a*float64(within)
	expect := (sumWithin + d*float64(n-hi)) / float64(count)
	if expect <= 0 {
		return math.Inf(1)
	}
	return float64(within) / float64(count) / expect
}

// Key implements Order: minus the index at the quantised service.
func (g *Gittins2D) Key(j JobView, _ float64) float64 {
	a := math.Floor(j.Attained/g.Quantum) * g.Quantum
	return -g.Index(a)
}

// Backfilling says whether and how jobs may pass a waiting job that does
// not fit. Its zero value, Greedy, lets them: gpusched's one default,
// that of gang.FIFO, allocation.FIFO and Kueue's BestEffortFIFO (issue
// #43). Its values are constants, safe for concurrent use.
type Backfilling int

const (
	// Greedy: later jobs take any GPUs left, even if that delays the
	// first blocked job. The zero value.
	Greedy Backfilling = iota
	// NoBackfill: strict order; a job that does not fit blocks the ones
	// ranked after it (FIFO.Strict; Kueue's StrictFIFO).
	NoBackfill
	// EASY: the first blocked job gets a reservation at the earliest time
	// enough GPUs of one type free up (from the running jobs' remaining
	// work at their rates, or, for a job given by its duration, the
	// duration estimate); later jobs may start now only if they do not
	// delay it: they finish before the reservation, or use GPUs it does
	// not need (Lifka's EASY backfilling; Mu'alem and Feitelson, IEEE TPDS
	// 12(6), 2001).
	EASY
	// Conservative: every waiting job, in order, gets a reservation at the
	// earliest time its GPUs stay free for its estimated run time on some
	// type, given the running jobs and the reservations ahead of it; a job
	// starts now only if that time is now, so no job delays any job ranked
	// before it (Mu'alem and Feitelson, IEEE TPDS 12(6), 2001, section 2).
	// Where types tie on the earliest time, the fastest is taken. The plan
	// is recomputed at every event, so reservations move earlier as jobs
	// finish ahead of their estimates.
	Conservative
)

// Priority is a priority scheduler over an Order, with gang admission: at
// every event it ranks all jobs, waiting and running, and keeps or starts
// them in that order while all of a job's GPUs fit on one type (its
// fastest with room, or its current type while running), so a job runs
// with all its workers or not at all. A running job that no longer fits is
// preempted, unless NoPreemption is set, in which case running jobs keep
// their GPUs and only waiting jobs are ranked (non-preemptive SJF, FIFO).
// Backfill says what happens behind a waiting job that does not fit: its
// zero value, Greedy, lets later jobs pass, as FIFO's zero value does;
// NoBackfill is strict (that job blocks the ones behind it). Before issue
// #43 the zero value was strict (SRTF on ITP 63.86 h strict, 51.73 h
// with Greedy). Decide returns an error wrapping ErrInvalid, never panics, on
// inconsistent input (duplicate job IDs, a nil Throughput, a scale factor
// below 1, a running job on a type that does not exist, ...). A Priority
// holds no state and is safe for concurrent use (if its Order is).
type Priority struct {
	Order        Order
	NoPreemption bool
	Backfill     Backfilling
	// Depth bounds how many waiting jobs conservative backfilling plans
	// at each decision (0: all); the jobs after them wait for the next
	// decision, as with Slurm's bf_max_job_test. Planning is quadratic in
	// the jobs planned, so long queues want a bound.
	Depth int
}

// estimate is the time a job still needs on type k.
func estimate(j JobView, k int) float64 {
	if r := j.Throughput[k]; r > 0 {
		return j.Remaining / r
	}
	return math.Inf(1)
}

// rank orders the jobs the scheduler may start or keep (waiting ones, and
// running ones unless NoPreemption) and returns the GPUs of each type they
// share: those free, plus those of running jobs when they are ranked.
func (p Priority) rank(now float64, free []int, waiting, running []JobView) ([]*JobView, []int) {
	// Sorting pointers with their keys, not JobViews, keeps long queues
	// cheap: the views are large and hold slices the collector scans.
	type ranked struct {
		key float64
		j   *JobView
	}
	n := len(waiting)
	if !p.NoPreemption {
		n += len(running)
	}
	all := make([]ranked, 0, n)
	for i := range waiting {
		all = append(all, ranked{p.Order.Key(waiting[i], now), &waiting[i]})
	}
	capacity := slices.Clone(free)
	if !p.NoPreemption {
		for i := range running {
			all = append(all, ranked{p.Order.Key(running[i], now), &running[i]})
			capacity[running[i].Type] += running[i].ScaleFactor
		}
	}
	slices.SortStableFunc(all, func(a, b ranked) int {
		return cmp.Or(cmp.Compare(a.key, b.key), cmp.Compare(a.j.Arrival, b.j.Arrival), cmp.Compare(a.j.ID, b.j.ID))
	})
	jobs := make([]*JobView, len(all))
	for i, r := range all {
		jobs[i] = r.j
	}
	return jobs, capacity
}

// check checks the settings and the input of a decision.
func (p Priority) check(now float64, free []int, waiting, running []JobView) error {
	switch {
	case p.Order == nil:
		return fmt.Errorf("%w: Priority has no Order", ErrInvalid)
	case p.Backfill < Greedy || p.Backfill > Conservative:
		return fmt.Errorf("%w: backfilling %d", ErrInvalid, p.Backfill)
	case p.Depth < 0:
		return fmt.Errorf("%w: depth %d, want >= 0 (0: all)", ErrInvalid, p.Depth)
	}
	if v, ok := p.Order.(validator); ok {
		if err := v.validate(); err != nil {
			return err
		}
	}
	return checkViews(now, free, waiting, running)
}

// Decide implements Scheduler.
func (p Priority) Decide(now float64, free []int, waiting, running []JobView) (Decision, error) {
	if err := p.check(now, free, waiting, running); err != nil {
		return Decision{}, err
	}
	if p.Backfill == Conservative {
		d, _ := p.conservative(now, free, waiting, running)
		return d, nil
	}
	all, capacity := p.rank(now, free, waiting, running)
	keep := map[int]bool{}
	var starts []Start
	blocked := false
	// The EASY reservation: type, time, and GPUs to spare at that time.
	resType, resTime, spare := -1, 0.0, 0
	for _, jp := range all {
		j := *jp
		if j.Type >= 0 {
			if capacity[j.Type] >= j.ScaleFactor {
				capacity[j.Type] -= j.ScaleFactor
				keep[j.ID] = true
			}
			continue
		}
		if blocked && p.Backfill == NoBackfill {
			continue
		}
		best := -1
		for k, n := range capacity {
			if n < j.ScaleFactor || j.Throughput[k] <= 0 {
				continue
			}
			if blocked && p.Backfill == EASY && k == resType && now+estimate(j, k) > resTime && j.ScaleFactor > spare {
				continue // would still hold GPUs the reservation needs
			}
			if best < 0 || j.Throughput[k] > j.Throughput[best] {
				best = k
			}
		}
		if best < 0 {
			if !blocked && p.Backfill == EASY {
				resType, resTime, spare = reserve(j, capacity, running, keep, !p.NoPreemption, now)
			}
			blocked = true
			continue
		}
		if blocked && p.Backfill == EASY && best == resType && now+estimate(j, best) > resTime {
			spare -= j.ScaleFactor
		}
		capacity[best] -= j.ScaleFactor
		starts = append(starts, Start{JobID: j.ID, Type: best})
	}
	var d Decision
	if !p.NoPreemption {
		for _, j := range running {
			if !keep[j.ID] {
				d.Preempt = append(d.Preempt, j.ID)
			}
		}
	}
	d.Start = starts
	return d, nil
}

// reserve finds the earliest time the blocked job j fits on some type as
// running jobs finish (with preemption, only those ranked before it, which
// keep their GPUs), and how many GPUs of that type are left over then.
func reserve(j JobView, capacity []int, running []JobView, keep map[int]bool, preemptive bool, now float64) (int, float64, int) {
	bestType, bestTime, bestSpare := -1, math.Inf(1), 0
	for k := range capacity {
		if j.Throughput[k] <= 0 {
			continue
		}
		freeNow := capacity[k]
		type fin struct {
			t  float64
			sf int
		}
		var ends []fin
		for _, r := range running {
			if r.Type == k && (keep[r.ID] || !preemptive) {
				ends = append(ends, fin{now + estimate(r, k), r.ScaleFactor})
			}
		}
		slices.SortFunc(ends, func(a, b fin) int { return cmp.Compare(a.t, b.t) })
		t, avail := now, freeNow
		for _, e := range ends {
			if avail >= j.ScaleFactor {
				break
			}
			t, avail = e.t, avail+e.sf
		}
		if avail >= j.ScaleFactor && t < bestTime {
			bestType, bestTime, bestSpare = k, t, avail-j.ScaleFactor
		}
	}
	return bestType, bestTime, bestSpare
}
