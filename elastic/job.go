package elastic

import (
	"fmt"
	"math"
)

// Curve gives a job's throughput, in units of its work per second, on a
// number of workers. Policies only compare throughputs of the same job, so
// the unit is the job's own (iterations, samples, or "seconds of work at
// one worker"). Curves without state (Linear, Table) are safe for
// concurrent use; a ProgressCurve, or one that caches, need not be.
type Curve interface {
	Throughput(workers int) float64
}

// PlacedCurve is a Curve whose throughput also depends on where its
// workers are (synchronisation across servers is slower): perServer gives
// the workers on each server the job spans, in increasing server ID.
// Throughput is the policy's view (workers packed); a simulator asks
// ThroughputOn for the placement it made. It is safe for concurrent use
// when it holds no state, as for Curve.
type PlacedCurve interface {
	Curve
	ThroughputOn(perServer []int) float64
}

// ProgressCurve is a Curve that changes as the job trains (Pollux's
// statistical efficiency follows the gradient noise scale, which grows
// during training); a simulator tells it the work done so far before it
// asks for throughputs. SetProgress changes the curve: a ProgressCurve is
// not safe for concurrent use.
type ProgressCurve interface {
	Curve
	SetProgress(done float64)
}

// Linear is Lyra's scaling assumption (EuroSys 2023, section 3): throughput
// proportional to the workers, PerWorker each. It is a plain value, safe
// for concurrent use.
type Linear struct{ PerWorker float64 }

// Throughput returns PerWorker x workers, and 0 for fewer than one worker
// (as Table does; a negative count used to give a negative throughput).
func (l Linear) Throughput(workers int) float64 {
	if workers < 1 {
		return 0
	}
	return l.PerWorker * float64(workers)
}

// Table is a measured or modelled scaling curve: Table[w-1] is the
// throughput on w workers. Beyond its end the last entry holds (no gain
// from workers the table does not cover), and 0 workers give 0. Build it
// from a throughput model (for example perfmodel's tables at each scale
// factor) with NewTable. It is safe for concurrent reads.
type Table []float64

// Throughput looks the curve up.
func (t Table) Throughput(workers int) float64 {
	switch {
	case workers <= 0 || len(t) == 0:
		return 0
	case workers > len(t):
		return t[len(t)-1]
	}
	return t[workers-1]
}

// NewTable samples f at 1..maxWorkers workers (at most MaxWorkers); every
// value must be positive and finite, or the error wraps ErrInvalid.
func NewTable(maxWorkers int, f func(workers int) (float64, error)) (Table, error) {
	if maxWorkers < 1 || maxWorkers > MaxWorkers {
		return nil, fmt.Errorf("%w: a table of %d workers, want 1 to %d", ErrInvalid, maxWorkers, MaxWorkers)
	}
	t := make(Table, maxWorkers)
	for w := 1; w <= maxWorkers; w++ {
		x, err := f(w)
		if err != nil {
			return nil, fmt.Errorf("elastic: throughput on %d workers: %w", w, err)
		}
		if !(x > 0) || math.IsInf(x, 0) {
			return nil, fmt.Errorf("%w: throughput %v on %d workers", ErrInvalid, x, w)
		}
		t[w-1] = x
	}
	return t, nil
}

// Job is an elastic or inelastic training job in Lyra's model (section 3):
// it runs on between MinWorkers (its base demand, w_min) and MaxWorkers
// (w_max) workers of GPUsPerWorker GPUs each; a job with MinWorkers equal
// to MaxWorkers is inelastic. Work is the total work in the Curve's units.
// On a heterogeneous cluster (pools of GPU types, TypedPolicy) Curves gives
// its curve on each pool, in the same units of work (nil where it cannot
// run), and Curve is not used; a job without Curves runs at Curve on every
// pool.
// A Job is a plain value: safe for concurrent reads if its curves are.
type Job struct {
	ID                     int
	Arrival                float64
	MinWorkers, MaxWorkers int
	GPUsPerWorker          int
	Work                   float64
	Curve                  Curve
	Curves                 []Curve
	// RestartCost is the time, in seconds, the job makes no progress after
	// each restart or resize (checkpoint and restore; Sia measured 25 to
	// 250 s by model, SOSP 2023, section 3.3): Sia's S_i, and what a
	// simulator charges it; 0 means the simulator's default. At most
	// MaxRestartCost.
	RestartCost float64
}

// On returns the job's curve on pool k: Curves[k], or Curve when the job
// has no Curves (nil when k is out of range or the job cannot run there).
func (j *Job) On(k int) Curve {
	if j.Curves == nil {
		return j.Curve
	}
	if k < 0 || k >= len(j.Curves) {
		return nil
	}
	return j.Curves[k]
}

// Elastic reports whether the job can change its number of workers.
func (j *Job) Elastic() bool { return j.MaxWorkers > j.MinWorkers }

// Validate returns an error wrapping ErrInvalid when the job cannot run:
// bounds that cross or are below one (or above MaxWorkers), GPUs per
// worker outside 1 to MaxGPUsPerServer, work that is not positive and
// finite, an arrival beyond MaxTime, a missing curve (Curves, when given,
// holds 1 to MaxPools entries, at least one not nil), or a curve not
// positive and finite at its bounds (policies never choose a count in
// between where the curve gives nothing, and a simulator reports one as an
// error).
func (j *Job) Validate() error {
	switch {
	case j.MinWorkers < 1 || j.MaxWorkers < j.MinWorkers || j.MaxWorkers > MaxWorkers:
		return fmt.Errorf("%w: job %d has workers %d to %d (want 1 <= min <= max <= %d)", ErrInvalid, j.ID, j.MinWorkers, j.MaxWorkers, MaxWorkers)
	case j.GPUsPerWorker < 1 || j.GPUsPerWorker > MaxGPUsPerServer:
		return fmt.Errorf("%w: job %d has %d GPUs per worker, want 1 to %d", ErrInvalid, j.ID, j.GPUsPerWorker, MaxGPUsPerServer)
	case !(j.Work > 0) || math.IsInf(j.Work, 0):
		return fmt.Errorf("%w: job %d has work %v", ErrInvalid, j.ID, j.Work)
	case j.Curve == nil && j.Curves == nil:
		return fmt.Errorf("%w: job %d has no scaling curve", ErrInvalid, j.ID)
	case j.Curves != nil && (len(j.Curves) == 0 || len(j.Curves) > MaxPools):
		return fmt.Errorf("%w: job %d has curves on %d pools, want 1 to %d", ErrInvalid, j.ID, len(j.Curves), MaxPools)
	case !(j.Arrival >= -MaxTime && j.Arrival <= MaxTime):
		return fmt.Errorf("%w: job %d arrives at %v s, outside [%g, %g]", ErrInvalid, j.ID, j.Arrival, -MaxTime, MaxTime)
	case !(j.RestartCost >= 0 && j.RestartCost <= MaxRestartCost):
		return fmt.Errorf("%w: job %d has a restart cost of %v s, want 0 to %v", ErrInvalid, j.ID, j.RestartCost, MaxRestartCost)
	}
	curves := j.Curves
	if curves == nil {
		curves = []Curve{j.Curve}
	}
	some := false
	for k, c := range curves {
		if c == nil {
			continue
		}
		some = true
		for _, w := range []int{j.MinWorkers, j.MaxWorkers} {
			if x := c.Throughput(w); !(x > 0) || math.IsInf(x, 0) {
				if j.Curves == nil {
					return fmt.Errorf("%w: job %d has throughput %v on %d workers", ErrInvalid, j.ID, x, w)
				}
				return fmt.Errorf("%w: job %d has throughput %v on %d workers of pool %d", ErrInvalid, j.ID, x, w, k)
			}
		}
	}
	if !some {
		return fmt.Errorf("%w: job %d can run on no pool (every curve is nil)", ErrInvalid, j.ID)
	}
	return nil
}

// State is a job as a policy sees it: how much work is left and how many
// workers it holds now (0 when queued); Age (seconds since arrival) and
// Restarts (times it was resized or restarted) feed restart penalties;
// Attained (GPU-seconds held so far) and Waiting (seconds since it last
// arrived or was stopped, 0 while it runs) feed least-attained-service
// orders (Tiresias). On a heterogeneous cluster Pool is the pool its
// workers are on (0 on a cluster of one pool), and Seen[k] the most
// workers it has held on pool k so far (nil when the simulator does not
// say; Sia's throughput estimates and scale-up limit read it; policies
// must not change it). A State is a plain value, safe for concurrent reads
// as its Job is.
type State struct {
	*Job
	Remaining float64
	Workers   int
	Age       float64
	Restarts  int
	Attained  float64
	Waiting   float64
	Pool      int
	Seen      []int
}

// Time returns the time the job still needs on w workers (+Inf for none).
func (s *State) Time(w int) float64 {
	x := s.Curve.Throughput(w)
	if !(x > 0) {
		return math.Inf(1)
	}
	return s.Remaining / x
}

// Policy chooses the number of workers of every job given the GPUs there
// are: 0 (queued) or a count between the job's bounds, using at most gpus
// GPUs in all. Policies keep running jobs running (at least at their base
// demand), preemption being the orchestrator's business when it reclaims
// servers, except those that preempt by rank, as Tiresias does: a running
// job given 0 workers is stopped (a simulator counts a preemption and
// charges its restart). The policies of this package hold no state: one is safe for
// concurrent use when the jobs' curves are (Linear and Table are). gpus is
// at most MaxGPUs.
type Policy interface {
	Allocate(jobs []State, gpus int) ([]int, error)
}

func validate(jobs []State, gpus int) error {
	if gpus < 0 || gpus > MaxGPUs {
		return fmt.Errorf("%w: %d GPUs, want 0 to %d", ErrInvalid, gpus, MaxGPUs)
	}
	for i := range jobs {
		if err := jobs[i].Validate(); err != nil {
			return err
		}
		s := &jobs[i]
		if s.Workers != 0 && (s.Workers < s.MinWorkers || s.Workers > s.MaxWorkers) {
			return fmt.Errorf("%w: job %d runs %d workers outside %d to %d", ErrInvalid, s.ID, s.Workers, s.MinWorkers, s.MaxWorkers)
		}
		if !(s.Remaining > 0) || math.IsInf(s.Remaining, 0) {
			return fmt.Errorf("%w: job %d has %v work left", ErrInvalid, s.ID, s.Remaining)
		}
		if err := checkService(s); err != nil {
			return err
		}
	}
	return nil
}
