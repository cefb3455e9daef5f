package sim

import (
	"cmp"
	"errors"
	"fmt"
	"slices"

	"github.com/gpusched/gpusched/allocation"
	"github.com/gpusched/gpusched/perfmodel"
	"github.com/gpusched/gpusched/topology"
)

// Errors of the simulation engines; test them with errors.Is. (Trace
// readers wrap ErrMalformedTrace; RunElastic's input errors wrap
// elastic.ErrInvalid.)
var (
	// ErrInvalid: a configuration or job that cannot be simulated (lengths
	// that disagree, values out of the ranges below or of package
	// allocation's, a throughput model's rate out of range).
	ErrInvalid = errors.New("sim: invalid input")
	// ErrStalled reports a simulation in which jobs remain but none can
	// make progress.
	ErrStalled = errors.New("sim: simulation stalled")
	// ErrBadDecision reports an EventScheduler's impossible decision.
	ErrBadDecision = errors.New("sim: impossible scheduling decision")
	// ErrNoProgress reports a simulation that would not end in a bounded
	// number of steps: a job that needs more rounds, timer events or
	// intervals than the limit even at its best rate, a run that reaches
	// the limit, or time or work that stops changing in float64.
	ErrNoProgress = errors.New("sim: no progress")
)

// Limits of the engines.
const (
	// DefaultMaxSteps is the default of Config.MaxRounds,
	// EventConfig.MaxEvents and ElasticConfig.MaxIntervals: ten million
	// rounds, events or intervals (Gavel's 5,000-job runs take tens of
	// thousands of rounds; 59 days of ITP trace 85,000 intervals).
	DefaultMaxSteps = 10_000_000
	// MinPeriod and MaxPeriod bound round lengths, timers and scheduling
	// intervals, in seconds (0 means the default): below a second a GPU
	// job could not even restart, and periods only multiply the steps.
	MinPeriod, MaxPeriod = 1.0, 1e7
	// MaxJobs bounds the jobs GavelWorkload.Generate makes, the scaled
	// job count of RingPaperSetup, and the jobs Run, RunEvents,
	// RunElastic and RunHetero take (refused before anything is built for
	// them; MaxTraceRows bounds a trace's alike).
	MaxJobs = 1 << 22
	// MaxRingServers bounds RingPaperSetup's servers: 4,096 servers of up
	// to 32 GPUs with their link matrices take at most 64 MiB (the paper's
	// largest setup has 1,250).
	MaxRingServers = 1 << 12
)

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalid, fmt.Sprintf(format, args...))
}

// checkPeriod checks a period: 0 (the default) or in [MinPeriod,
// MaxPeriod].
func checkPeriod(name string, v float64) error {
	if v != 0 && !(v >= MinPeriod && v <= MaxPeriod) {
		return invalid("%s %v s, outside [%g, %g] (0 means the default)", name, v, MinPeriod, MaxPeriod)
	}
	return nil
}

// checkCluster checks types and capacities.
func checkCluster(types []topology.GPUType, capacity []int) error {
	if len(types) == 0 || len(types) != len(capacity) {
		return invalid("%d GPU types and %d capacities", len(types), len(capacity))
	}
	seen := make(map[topology.GPUType]bool, len(types))
	for k, t := range types {
		if seen[t] {
			return invalid("GPU type %s appears twice", t)
		}
		seen[t] = true
		if c := capacity[k]; c < 0 || c > allocation.MaxCapacity {
			return invalid("capacity of %s is %d, outside [0, %d]", t, c, allocation.MaxCapacity)
		}
	}
	return nil
}

// checkJob checks a trace job's values against package allocation's
// ranges.
func checkJob(j *Job) error {
	inRange := func(v, lo, hi float64) bool { return v >= lo && v <= hi }
	switch {
	case !(j.Steps > 0) || j.Steps > allocation.MaxSteps:
		return invalid("job %d: steps %v, outside (0, %g]", j.ID, j.Steps, allocation.MaxSteps)
	case !inRange(j.Arrival, -allocation.MaxTime, allocation.MaxTime):
		return invalid("job %d: arrival %v, outside [%g, %g] s", j.ID, j.Arrival, -allocation.MaxTime, allocation.MaxTime)
	case j.Weight != 0 && !inRange(j.Weight, allocation.MinWeight, allocation.MaxWeight):
		return invalid("job %d: weight %v, outside [%g, %g] (0 means 1)", j.ID, j.Weight, allocation.MinWeight, allocation.MaxWeight)
	case !inRange(j.SLO, 0, allocation.MaxTime):
		return invalid("job %d: SLO %v, outside [0, %g] s", j.ID, j.SLO, allocation.MaxTime)
	case !inRange(j.Duration, 0, allocation.MaxTime):
		return invalid("job %d: duration %v, outside [0, %g] s", j.ID, j.Duration, allocation.MaxTime)
	case j.Key.ScaleFactor < 1 || j.Key.ScaleFactor > allocation.MaxCapacity:
		return invalid("job %d: scale factor %d, outside [1, %d]", j.ID, j.Key.ScaleFactor, allocation.MaxCapacity)
	}
	return nil
}

// jobRates looks up a job's rate on every type, checks them against
// package allocation's range, and returns them with the job's best rate
// on a type that has room for it (0 if none: it can run nowhere).
func jobRates(model perfmodel.ThroughputModel, types []topology.GPUType, capacity []int, j *Job) (tput []float64, best float64, err error) {
	tput = make([]float64, len(types))
	for k, t := range types {
		v, err := model.Throughput(j.Key, t)
		if err != nil {
			return nil, 0, fmt.Errorf("sim: job %d: %w", j.ID, err)
		}
		if !allocation.ValidRate(v) {
			return nil, 0, invalid("job %d: throughput %v on %s, outside [%g, %g] steps/s (0 means it cannot run there)",
				j.ID, v, t, allocation.MinRate, allocation.MaxRate)
		}
		tput[k] = v
		if v > 0 && capacity[k] >= j.Key.ScaleFactor {
			best = max(best, v)
		}
	}
	return tput, best, nil
}

// checkJobCount refuses more than MaxJobs jobs.
func checkJobCount(n int) error {
	if n > MaxJobs {
		return invalid("%d jobs, more than MaxJobs (%d)", n, MaxJobs)
	}
	return nil
}

// byArrival returns the positions of jobs in order of arrival, then ID,
// then position: the engines' order, without copying the jobs. There are
// at most MaxJobs (checkJobCount).
func byArrival(jobs []Job) []int32 {
	order := make([]int32, len(jobs))
	for i := range order {
		order[i] = int32(i)
	}
	slices.SortFunc(order, func(a, b int32) int {
		ja, jb := &jobs[a], &jobs[b]
		return cmp.Or(cmp.Compare(ja.Arrival, jb.Arrival), cmp.Compare(ja.ID, jb.ID), cmp.Compare(a, b))
	})
	return order
}

// maxSteps returns a configured limit, or DefaultMaxSteps for 0; a
// negative limit is an error.
func maxSteps(name string, v int) (int, error) {
	switch {
	case v < 0:
		return 0, invalid("%s %d, want >= 0 (0 means %d)", name, v, DefaultMaxSteps)
	case v == 0:
		return DefaultMaxSteps, nil
	}
	return v, nil
}
