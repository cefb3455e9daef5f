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
func RunEvents(ctx context.Context, cfg EventConfig, jobs []Job) (*Result, error) {
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
	model := cfg.Throughput
	if model == nil {
		model = gavel.Simulation()
	}
	res := &Result{Types: cfg.Types, Capacity: cfg.Capacity, prices: prices(Config{Types: cfg.Types})}
	order := slices.Clone(jobs)
	slices.SortStableFunc(order, func(a, b Job) int { return cmp.Or(cmp.Compare(a.Arrival, b.Arrival), cmp.Compare(a.ID, b.ID)) })
	var all []*evJob
	byID := map[int]*evJob{}
	for _, j := range order {
		if byID[j.ID] != nil {
			return nil, invalid("job ID %d appears twice", j.ID)
		}
		if err := checkJob(&j); err != nil {
			return nil, err
		}
		tput, best, err := jobRates(model, cfg.Types, cfg.Capacity, &j)
		if err != nil {
			return nil, err
		}
		if best == 0 {
			res.Unschedulable = append(res.Unschedulable, j)
			continue
		}
		// The timer fires while the job is present, at least its run time
		// at its best rate.
		if need := j.Steps / best / cfg.Timer; cfg.Timer > 0 && need > float64(limit) {
			return nil, fmt.Errorf("%w: job %d runs at least %g s (%g steps at %g steps/s): %.3g timer events of %g s, more than MaxEvents (%d)",
				ErrNoProgress, j.ID, j.Steps/best, j.Steps, best, need, cfg.Timer, limit)
		}
		e := &evJob{rec: &Record{Job: j, Start: -1, Finish: -1, GPUSeconds: make([]float64, len(cfg.Types))}}
		e.view = JobView{ID: j.ID, Arrival: j.Arrival, ScaleFactor: j.Key.ScaleFactor, Weight: j.Weight, Steps: j.Steps, Remaining: j.Steps,
			Throughput: tput, Type: -1, Duration: j.Duration, Queued: j.Arrival}
		all = append(all, e)
		byID[j.ID] = e
	}
	free := slices.Clone(cfg.Capacity)
	total := 0
	for _, c := range cfg.Capacity {
		total += c
	}
	var waiting, running []*evJob
	h := &eventHeap{}
	next, done := 0, 0
	t := 0.0
	lastUtil := -1.0
	sample := func() {
		busy := 0
		for k, c := range cfg.Capacity {
			busy += c - free[k]
		}
		if t != lastUtil {
			res.Utilisation = append(res.Utilisation, Sample{t, float64(busy) / float64(total)})
			lastUtil = t
		} else {
			res.Utilisation[len(res.Utilisation)-1].Value = float64(busy) / float64(total)
		}
	}
	// advance credits running jobs with the time from t to now.
	advance := func(now float64) {
		for _, e := range running {
			d := now - t
			rate := e.view.Throughput[e.view.Type]
			lost := math.Min(d, e.restart)
			e.restart -= lost
			e.view.Remaining = math.Max(0, e.view.Remaining-rate*(d-lost))
			sf := float64(e.view.ScaleFactor)
			e.view.Attained += sf * d
			e.rec.GPUSeconds[e.view.Type] += sf * d
		}
		t = now
	}
	schedule := func(e *evJob) {
		rate := e.view.Throughput[e.view.Type]
		e.version++
		e.finish = t + e.restart + e.view.Remaining/rate
		heap.Push(h, event{t: e.finish, job: e, version: e.version})
	}
	views := func(list []*evJob) []JobView {
		out := make([]JobView, len(list))
		for i, e := range list {
			out[i] = e.view
		}
		return out
	}
	decide := func() error {
		d, err := cfg.Scheduler.Decide(t, slices.Clone(free), views(waiting), views(running))
		if err != nil {
			return fmt.Errorf("sim: scheduler at %v s: %w", t, err)
		}
		for _, id := range d.Preempt {
			e := byID[id]
			i := slices.Index(running, e)
			if e == nil || i < 0 {
				return fmt.Errorf("%w: preempt job %d, which is not running", ErrBadDecision, id)
			}
			running = slices.Delete(running, i, i+1)
			free[e.view.Type] += e.view.ScaleFactor
			e.view.Type, e.view.Queued = -1, t
			e.version++
			e.rec.Preemptions++
			e.restart = 0
			waiting = append(waiting, e)
		}
		for _, s := range d.Start {
			e := byID[s.JobID]
			i := slices.Index(waiting, e)
			switch {
			case e == nil || i < 0:
				return fmt.Errorf("%w: start job %d, which is not waiting", ErrBadDecision, s.JobID)
			case s.Type < 0 || s.Type >= len(free) || free[s.Type] < e.view.ScaleFactor:
				return fmt.Errorf("%w: job %d needs %d GPUs of type %d", ErrBadDecision, s.JobID, e.view.ScaleFactor, s.Type)
			case e.view.Throughput[s.Type] <= 0:
				return fmt.Errorf("%w: job %d cannot run on %s", ErrBadDecision, s.JobID, cfg.Types[s.Type])
			}
			waiting = slices.Delete(waiting, i, i+1)
			free[s.Type] -= e.view.ScaleFactor
			e.view.Type, e.view.Started = s.Type, t
			if e.rec.Start < 0 {
				e.rec.Start = t
			} else {
				e.restart = cfg.Restart
			}
			e.rec.Rounds++
			running = append(running, e)
			schedule(e)
		}
		sample()
		return nil
	}
	idleTimers := 0
	for events := 0; done < len(all); events++ {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if events >= limit {
			return nil, fmt.Errorf("%w: %d events (to %.0f s) with %d of %d jobs left, MaxEvents reached", ErrNoProgress, events, t, len(all)-done, len(all))
		}
		// The next event: an arrival, a completion or a timer.
		nextT := math.Inf(1)
		if next < len(all) {
			nextT = all[next].view.Arrival
		}
		for h.Len() > 0 && ((*h)[0].job != nil && (*h)[0].version != (*h)[0].job.version) {
			heap.Pop(h)
		}
		if h.Len() > 0 {
			nextT = math.Min(nextT, (*h)[0].t)
		}
		if cfg.Timer > 0 && (len(waiting) > 0 || len(running) > 0) {
			nextT = math.Min(nextT, t+cfg.Timer)
		}
		if math.IsInf(nextT, 1) {
			return nil, fmt.Errorf("%w at %.0f s: %d jobs wait and nothing runs", ErrStalled, t, len(waiting))
		}
		if nextT <= t && cfg.Timer > 0 && t+cfg.Timer == t {
			return nil, fmt.Errorf("%w: time %g s does not advance by a timer of %g s", ErrNoProgress, t, cfg.Timer)
		}
		advance(nextT)
		changed := false
		for h.Len() > 0 && (*h)[0].t <= t {
			ev := heap.Pop(h).(event)
			e := ev.job
			if e == nil || ev.version != e.version {
				continue
			}
			i := slices.Index(running, e)
			running = slices.Delete(running, i, i+1)
			free[e.view.Type] += e.view.ScaleFactor
			e.view.Remaining = 0
			e.rec.Finish = t
			e.rec.Isolated = 0
			res.Records = append(res.Records, *e.rec)
			res.End = math.Max(res.End, t)
			done++
			changed = true
		}
		for next < len(all) && all[next].view.Arrival <= t {
			waiting = append(waiting, all[next])
			next++
			changed = true
		}
		if !changed && cfg.Timer <= 0 {
			continue
		}
		if !changed && len(running) == 0 {
			idleTimers++
			if idleTimers > 100000 {
				return nil, fmt.Errorf("%w at %.0f s: the scheduler starts none of %d waiting jobs", ErrStalled, t, len(waiting))
			}
		} else {
			idleTimers = 0
		}
		res.Rounds++
		if err := decide(); err != nil {
			return nil, err
		}
		if len(running) == 0 && len(waiting) > 0 && next == len(all) && cfg.Timer <= 0 {
			return nil, fmt.Errorf("%w at %.0f s: the scheduler starts none of %d waiting jobs", ErrStalled, t, len(waiting))
		}
		if cfg.Progress != nil {
			cfg.Progress(done, len(all))
		}
	}
	slices.SortFunc(res.Records, func(a, b Record) int { return cmp.Compare(a.ID, b.ID) })
	return res, nil
}
