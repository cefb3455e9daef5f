package gang

import (
	"cmp"
	"slices"
)

// JobView is what a Scheduler sees of a job. A JobView is a plain value:
// safe for concurrent reads, not for writes while others read it.
type JobView struct {
	ID          int
	Arrival     float64
	ScaleFactor int
	Weight      float64
	// Steps and Remaining are the job's total and remaining work.
	Steps, Remaining float64
	// Throughput gives its rate on each type (0: cannot run there).
	Throughput []float64
	// Attained is the GPU time it has received so far (GPUs x seconds).
	Attained float64
	// Type is the type it runs on, or -1 while it waits.
	Type int
	// Started is when it last started (running jobs), and Queued when it
	// last began to wait (arrival or preemption; waiting jobs).
	Started, Queued float64
	// Duration is the trace's duration hint, if any.
	Duration float64
}

// Decision is a scheduler's answer: Start places a waiting job on GPUs of
// one type; Preempt stops a running job, which then waits again with its
// remaining work. A Decision is a plain value: safe for concurrent reads,
// not for writes while others read it.
type Decision struct {
	Start   []Start
	Preempt []int
	// Wake, if after now, asks to be called again at that time even if no
	// job arrives or ends before it: for a scheduler that waits for a
	// time, not an event (flavor.Steered's wait rule). 0, a time not
	// after now, NaN and +Inf mean no wake; the event engine
	// (sim.RunEvents) keeps the earliest wake asked for, and the
	// scheduler asks again when it is called.
	Wake float64
}

// Start runs job JobID on ScaleFactor GPUs of type Type. It is a plain
// value, safe for concurrent use.
type Start struct {
	JobID, Type int
}

// Scheduler decides at each event. free holds the idle GPUs of each
// type after the preemptions it asks for have taken effect; a Decision that
// starts more GPUs than are free, or an unknown or running job, is an error
// of the engine. A scheduler returns an error, never panics, when its input
// is inconsistent (errors of this package's schedulers wrap ErrInvalid);
// the engine then stops. Decide may reorder waiting and running and change
// free; the slices are the engine's and valid during the call only (the
// simulator refills them at every event), so a scheduler that keeps a
// view copies it. Whether an implementation is safe for concurrent use is its own:
// this package's stateless ones (FIFO, Priority) are, OnServers is not.
type Scheduler interface {
	Decide(now float64, free []int, waiting, running []JobView) (Decision, error)
}

// FIFO starts waiting jobs in order of arrival (then ID) whenever
// enough GPUs of a type they can use are free, taking the fastest such
// type; with Strict, a job that does not fit blocks the ones behind it
// (head-of-line), as in a plain FIFO queue; otherwise (the zero value)
// later jobs may pass it, as with Priority's zero value (Backfill
// Greedy): every queue of gpusched lets later jobs pass unless told not
// to. It holds no state and is safe for concurrent use.
type FIFO struct {
	Strict bool
}

// Decide implements Scheduler.
func (f FIFO) Decide(now float64, free []int, waiting, running []JobView) (Decision, error) {
	if err := checkViews(now, free, waiting, running); err != nil {
		return Decision{}, err
	}
	slices.SortStableFunc(waiting, func(a, b JobView) int { return cmp.Or(cmp.Compare(a.Arrival, b.Arrival), cmp.Compare(a.ID, b.ID)) })
	var d Decision
	for _, j := range waiting {
		best := -1
		for k, n := range free {
			if n >= j.ScaleFactor && j.Throughput[k] > 0 && (best < 0 || j.Throughput[k] > j.Throughput[best]) {
				best = k
			}
		}
		if best < 0 {
			if f.Strict {
				break
			}
			continue
		}
		free[best] -= j.ScaleFactor
		d.Start = append(d.Start, Start{JobID: j.ID, Type: best})
	}
	return d, nil
}
