package sim

import (
	"cmp"
	"container/heap"
	"context"
	"fmt"
	"math"
	"slices"

	"github.com/gpusched/gpusched/gang"
	"github.com/gpusched/gpusched/perfmodel"
	"github.com/gpusched/gpusched/perfmodel/gavel"
	"github.com/gpusched/gpusched/topology"
)

// Event-driven simulation: instead of rounds, the scheduler is asked what
// to do whenever a job arrives or finishes, and jobs start as soon as GPUs
// free up and run until they finish or are preempted. This is the model of
// queue-based schedulers (FIFO, SJF, Tiresias) and of placement-driven ones.

// The scheduler's view and answers are package gang's, so that queue and
// gang policies need not import the simulator.
type (
	// JobView is what an EventScheduler sees of a job (gang.JobView: a
	// plain value, safe for concurrent reads).
	JobView = gang.JobView
	// Decision is an EventScheduler's answer (gang.Decision: a plain
	// value, safe for concurrent reads).
	Decision = gang.Decision
	// Start places a waiting job (gang.Start: safe for concurrent use).
	Start = gang.Start
	// EventScheduler decides at each event (gang.Scheduler: whether it is
	// safe for concurrent use is each implementation's).
	EventScheduler = gang.Scheduler
	// EventFIFO is gang.FIFO (safe for concurrent use).
	EventFIFO = gang.FIFO
)

// EventConfig describes an event-driven simulation.
// It is a plain value, safe for concurrent reads (its Scheduler decides
// whether runs may share it: gang.Priority and gang.FIFO may,
// gang.OnServers may not).
type EventConfig struct {
	Types      []topology.GPUType
	Capacity   []int
	Throughput perfmodel.ThroughputModel
	Scheduler  EventScheduler
	// Timer, if positive, also calls the scheduler every Timer seconds while
	// jobs wait or run (for schedulers that act on attained service); it is
	// 0 or in [MinPeriod, MaxPeriod].
	Timer float64
	// Restart is the time a job loses each time it starts after a
	// preemption (checkpoint and restore), in seconds (at most MaxPeriod).
	Restart  float64
	Progress func(done, total int)
	// MaxEvents bounds the events handled (0 means DefaultMaxSteps).
	MaxEvents int
}

type evJob struct {
	view    JobView
	rec     *Record
	finish  float64 // pending completion time while running
	version int     // invalidates stale completion events
	restart float64 // time still lost to the restart
}

type event struct {
	t       float64
	job     *evJob // nil for an arrival marker or a timer
	version int
}

type eventHeap []event

func (h eventHeap) Len() int { return len(h) }
func (h eventHeap) Less(i, j int) bool {
	if h[i].t != h[j].t {
		return h[i].t < h[j].t
	}
	return h[i].job != nil && h[j].job == nil // completions before timers
}
func (h eventHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *eventHeap) Push(x any)   { *h = append(*h, x.(event)) }
func (h *eventHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// RunEvents simulates jobs under an event-driven scheduler. Configurations
// and jobs out of range give an error wrapping ErrInvalid (as for Run;
// Timer 0 or in [MinPeriod, MaxPeriod], Restart finite and >= 0). With a
// timer, a job that would need more than MaxEvents timer events even at
// its best rate is refused up front; a run that reaches MaxEvents events,
// or whose clock stops advancing, stops with ErrNoProgress. A scheduler's
// error stops the run and is returned wrapped.
//
// Each event takes these steps in turn: the next event's time, execution
// up to it, completions, arrivals, and the scheduler's decision (with a
// utilisation sample). Events are arrivals, completions, timer ticks and
// the wakes a scheduler asks for (Decision.Wake); a run in which jobs
// wait, none runs and none will arrive stops with ErrStalled unless a
// wake is pending.
func RunEvents(ctx context.Context, cfg EventConfig, jobs []Job) (*Result, error) {
	e, err := newEventEngine(cfg, jobs)
	if err != nil {
		return nil, err
	}
	for events := 0; e.done < len(e.all); events++ {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if events >= e.limit {
			return nil, fmt.Errorf("%w: %d events (to %.0f s) with %d of %d jobs left, MaxEvents reached", ErrNoProgress, events, e.t, len(e.all)-e.done, len(e.all))
		}
		nextT, err := e.nextTime()
		if err != nil {
			return nil, err
		}
		e.execute(nextT)
		finished, woke := e.completions()
		arrived := e.arrivals()
		changed := finished || arrived || woke
		if !changed && cfg.Timer <= 0 {
			continue
		}
		if err := e.watchIdle(changed); err != nil {
			return nil, err
		}
		e.res.Rounds++
		if err := e.decide(); err != nil {
			return nil, err
		}
		if len(e.running) == 0 && len(e.waiting) > 0 && e.next == len(e.all) && cfg.Timer <= 0 && e.wakeAt <= e.t {
			return nil, fmt.Errorf("%w at %.0f s: the scheduler starts none of %d waiting jobs", ErrStalled, e.t, len(e.waiting))
		}
		if cfg.Progress != nil {
			cfg.Progress(e.done, len(e.all))
		}
	}
	if len(e.recs) > 0 {
		e.res.Records = e.recs // every job finished, and the engine is done with them
	}
	slices.SortFunc(e.res.Records, func(a, b Record) int { return cmp.Compare(a.ID, b.ID) })
	return e.res, nil
}

// eventEngine is RunEvents' state: the jobs by arrival, the free GPUs of
// each type, the waiting and running jobs, the pending completions and
// the clock.
type eventEngine struct {
	cfg              EventConfig
	res              *Result
	limit            int // MaxEvents
	all              []*evJob
	byID             map[int]*evJob
	free             []int
	total            int // GPUs of the cluster
	waiting, running []*evJob
	h                eventHeap
	next, done       int
	t                float64
	lastUtil         float64 // the time of the last utilisation sample
	idleTimers       int     // timer events in a row with nothing run or changed
	wakeAt           float64 // the earliest pending wake (Decision.Wake)
	// The views handed to the scheduler, refilled at each event: building
	// them afresh made an event's garbage as large as its queues, and
	// the collector's work grew with the trace (a 3-million-job run).
	waitViews, runViews []JobView
	// The jobs, records and GPU-seconds in a block each (see add).
	jobs []evJob
	recs []Record
	secs []float64
}

// maxIdleTimers is how many timer events in a row may find nothing
// running and nothing changed before the run stalls.
const maxIdleTimers = 100000

// newEventEngine is the preparation step: the settings checked, rates
// looked up once, jobs that can run nowhere set aside, the jobs sorted by
// arrival.
func newEventEngine(cfg EventConfig, jobs []Job) (*eventEngine, error) {
	if err := checkCluster(cfg.Types, cfg.Capacity); err != nil {
		return nil, err
	}
	if cfg.Scheduler == nil {
		return nil, invalid("no scheduler")
	}
	if err := checkPeriod("timer", cfg.Timer); err != nil {
		return nil, err
	}
	if !(cfg.Restart >= 0 && cfg.Restart <= MaxPeriod) {
		return nil, invalid("restart time %v s, outside [0, %g]", cfg.Restart, MaxPeriod)
	}
	limit, err := maxSteps("MaxEvents", cfg.MaxEvents)
	if err != nil {
		return nil, err
	}
	if cfg.Throughput == nil {
		cfg.Throughput = gavel.Simulation()
	}
	e := &eventEngine{cfg: cfg, limit: limit, byID: map[int]*evJob{}, free: slices.Clone(cfg.Capacity), lastUtil: -1,
		res: &Result{Types: cfg.Types, Capacity: cfg.Capacity, prices: prices(Config{Types: cfg.Types})}}
	if err := checkJobCount(len(jobs)); err != nil {
		return nil, err
	}
	order := byArrival(jobs)
	e.jobs = make([]evJob, 0, len(order))
	e.recs = make([]Record, 0, len(order))
	e.secs = make([]float64, 0, len(order)*len(cfg.Types))
	e.all = make([]*evJob, 0, len(order))
	for _, i := range order {
		if err := e.add(jobs[i]); err != nil {
			return nil, err
		}
	}
	// Every job finishes before the run ends: the records stay in their
	// block and become the result's (see RunEvents).
	for _, c := range cfg.Capacity {
		e.total += c
	}
	return e, nil
}

// add prepares a job, or sets it aside when no type can run it.
func (e *eventEngine) add(j Job) error {
	if e.byID[j.ID] != nil {
		return invalid("job ID %d appears twice", j.ID)
	}
	if err := checkJob(&j); err != nil {
		return err
	}
	cfg := &e.cfg
	tput, best, err := jobRates(cfg.Throughput, cfg.Types, cfg.Capacity, &j)
	if err != nil {
		return err
	}
	if best == 0 {
		e.res.Unschedulable = append(e.res.Unschedulable, j)
		return nil
	}
	// The timer fires while the job is present, at least its run time at
	// its best rate.
	if need := j.Steps / best / cfg.Timer; cfg.Timer > 0 && need > float64(e.limit) {
		return fmt.Errorf("%w: job %d runs at least %g s (%g steps at %g steps/s): %.3g timer events of %g s, more than MaxEvents (%d)",
			ErrNoProgress, j.ID, j.Steps/best, j.Steps, best, need, cfg.Timer, e.limit)
	}
	// Blocks sized for every job, so that the collector has a few large
	// objects to scan rather than three per job.
	nk := len(cfg.Types)
	e.secs = e.secs[:len(e.secs)+nk]
	e.recs = append(e.recs, Record{Job: j, Start: -1, Finish: -1, GPUSeconds: e.secs[len(e.secs)-nk : len(e.secs) : len(e.secs)]})
	e.jobs = append(e.jobs, evJob{rec: &e.recs[len(e.recs)-1]})
	ej := &e.jobs[len(e.jobs)-1]
	ej.view = JobView{ID: j.ID, Arrival: j.Arrival, ScaleFactor: j.Key.ScaleFactor, Weight: j.Weight, Steps: j.Steps, Remaining: j.Steps,
		Throughput: tput, Type: -1, Duration: j.Duration, Queued: j.Arrival}
	e.all = append(e.all, ej)
	e.byID[j.ID] = ej
	return nil
}

// nextTime is the time of the next event: an arrival, a completion or a
// timer; stale completions (of jobs preempted or rescheduled since) are
// dropped.
func (e *eventEngine) nextTime() (float64, error) {
	nextT := math.Inf(1)
	if e.next < len(e.all) {
		nextT = e.all[e.next].view.Arrival
	}
	h := &e.h
	for h.Len() > 0 && ((*h)[0].job != nil && (*h)[0].version != (*h)[0].job.version) {
		heap.Pop(h)
	}
	if h.Len() > 0 {
		nextT = math.Min(nextT, (*h)[0].t)
	}
	timer := e.cfg.Timer
	if timer > 0 && (len(e.waiting) > 0 || len(e.running) > 0) {
		nextT = math.Min(nextT, e.t+timer)
	}
	if math.IsInf(nextT, 1) {
		return 0, fmt.Errorf("%w at %.0f s: %d jobs wait and nothing runs", ErrStalled, e.t, len(e.waiting))
	}
	if nextT <= e.t && timer > 0 && e.t+timer == e.t {
		return 0, fmt.Errorf("%w: time %g s does not advance by a timer of %g s", ErrNoProgress, e.t, timer)
	}
	return nextT, nil
}

// execute credits the running jobs with the time from the clock to now
// (less what is left of their restarts) and moves the clock there.
func (e *eventEngine) execute(now float64) {
	for _, j := range e.running {
		d := now - e.t
		rate := j.view.Throughput[j.view.Type]
		lost := math.Min(d, j.restart)
		j.restart -= lost
		j.view.Remaining = math.Max(0, j.view.Remaining-rate*(d-lost))
		sf := float64(j.view.ScaleFactor)
		j.view.Attained += sf * d
		j.rec.GPUSeconds[j.view.Type] += sf * d
	}
	e.t = now
}

// completions records the jobs whose completion is due and frees their
// GPUs; it reports whether any finished, and whether a wake the
// scheduler asked for (Decision.Wake) is due.
func (e *eventEngine) completions() (changed, woke bool) {
	for e.h.Len() > 0 && e.h[0].t <= e.t {
		ev := heap.Pop(&e.h).(event)
		j := ev.job
		if j == nil {
			// A wake; one superseded by an earlier wake is stale.
			woke = woke || ev.t == e.wakeAt
			continue
		}
		if ev.version != j.version {
			continue
		}
		i := slices.Index(e.running, j)
		e.running = slices.Delete(e.running, i, i+1)
		e.free[j.view.Type] += j.view.ScaleFactor
		j.view.Remaining = 0
		j.rec.Finish = e.t
		j.rec.Isolated = 0
		e.res.End = math.Max(e.res.End, e.t)
		e.done++
		changed = true
	}
	return changed, woke
}

// arrivals queues the jobs that have arrived by now and reports whether
// any did.
func (e *eventEngine) arrivals() bool {
	changed := false
	for e.next < len(e.all) && e.all[e.next].view.Arrival <= e.t {
		e.waiting = append(e.waiting, e.all[e.next])
		e.next++
		changed = true
	}
	return changed
}

// watchIdle counts timer events that change nothing while nothing runs,
// and stops a run whose scheduler never starts its waiting jobs.
func (e *eventEngine) watchIdle(changed bool) error {
	if changed || len(e.running) > 0 {
		e.idleTimers = 0
		return nil
	}
	e.idleTimers++
	if e.idleTimers > maxIdleTimers {
		return fmt.Errorf("%w at %.0f s: the scheduler starts none of %d waiting jobs", ErrStalled, e.t, len(e.waiting))
	}
	return nil
}

// schedule queues a running job's completion at its current rate.
func (e *eventEngine) schedule(j *evJob) {
	rate := j.view.Throughput[j.view.Type]
	j.version++
	j.finish = e.t + j.restart + j.view.Remaining/rate
	heap.Push(&e.h, event{t: j.finish, job: j, version: j.version})
}

// views fills buf with the views of list, in buf's memory when it is
// large enough.
func views(buf *[]JobView, list []*evJob) []JobView {
	out := slices.Grow((*buf)[:0], len(list))[:len(list)]
	for i, j := range list {
		out[i] = j.view
	}
	*buf = out
	return out
}

// decide asks the scheduler what to do now, checks and applies its
// preemptions and starts, and samples the utilisation.
func (e *eventEngine) decide() error {
	d, err := e.cfg.Scheduler.Decide(e.t, slices.Clone(e.free), views(&e.waitViews, e.waiting), views(&e.runViews, e.running))
	if err != nil {
		return fmt.Errorf("sim: scheduler at %v s: %w", e.t, err)
	}
	for _, id := range d.Preempt {
		if err := e.preempt(id); err != nil {
			return err
		}
	}
	for _, s := range d.Start {
		if err := e.start(s); err != nil {
			return err
		}
	}
	// A wake the scheduler asks for: a timer event, unless an earlier one
	// is pending (the scheduler asks again when it is called). MaxEvents
	// bounds a scheduler that keeps asking.
	if d.Wake > e.t && !math.IsInf(d.Wake, 1) && (e.wakeAt <= e.t || d.Wake < e.wakeAt) {
		e.wakeAt = d.Wake
		heap.Push(&e.h, event{t: d.Wake})
	}
	e.sample()
	return nil
}

// preempt stops a running job and queues it again.
func (e *eventEngine) preempt(id int) error {
	j := e.byID[id]
	i := slices.Index(e.running, j)
	if j == nil || i < 0 {
		return fmt.Errorf("%w: preempt job %d, which is not running", ErrBadDecision, id)
	}
	e.running = slices.Delete(e.running, i, i+1)
	e.free[j.view.Type] += j.view.ScaleFactor
	j.view.Type, j.view.Queued = -1, e.t
	j.version++
	j.rec.Preemptions++
	j.restart = 0
	e.waiting = append(e.waiting, j)
	return nil
}

// start runs a waiting job on a type; a job that ran before pays the
// restart time.
func (e *eventEngine) start(s Start) error {
	j := e.byID[s.JobID]
	i := slices.Index(e.waiting, j)
	switch {
	case j == nil || i < 0:
		return fmt.Errorf("%w: start job %d, which is not waiting", ErrBadDecision, s.JobID)
	case s.Type < 0 || s.Type >= len(e.free) || e.free[s.Type] < j.view.ScaleFactor:
		return fmt.Errorf("%w: job %d needs %d GPUs of type %d", ErrBadDecision, s.JobID, j.view.ScaleFactor, s.Type)
	case j.view.Throughput[s.Type] <= 0:
		return fmt.Errorf("%w: job %d cannot run on %s", ErrBadDecision, s.JobID, e.cfg.Types[s.Type])
	}
	e.waiting = slices.Delete(e.waiting, i, i+1)
	e.free[s.Type] -= j.view.ScaleFactor
	j.view.Type, j.view.Started = s.Type, e.t
	if j.rec.Start < 0 {
		j.rec.Start = e.t
	} else {
		j.restart = e.cfg.Restart
	}
	j.rec.Rounds++
	e.running = append(e.running, j)
	e.schedule(j)
	return nil
}

// sample records the share of busy GPUs now (replacing a sample taken at
// the same time).
func (e *eventEngine) sample() {
	busy := 0
	for k, c := range e.cfg.Capacity {
		busy += c - e.free[k]
	}
	u := float64(busy) / float64(e.total)
	if e.t != e.lastUtil {
		e.res.Utilisation = append(e.res.Utilisation, Sample{e.t, u})
		e.lastUtil = e.t
	} else {
		e.res.Utilisation[len(e.res.Utilisation)-1].Value = u
	}
}
