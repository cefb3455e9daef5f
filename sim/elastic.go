package sim

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"slices"

	"github.com/gpusched/gpusched/elastic"
)

// UsageSignal gives the share of the inference cluster's servers that
// inference needs at a time (seconds), in [0, 1].
// Implementations should be safe for concurrent use (Diurnal and
// UsageTrace are).
type UsageSignal interface {
	Usage(t float64) float64
}

// Diurnal is a seeded daily inference load: Mean + Amplitude x
// cos(2 pi (t - Peak) / Period) plus noise uniform in [-Noise, Noise] that
// changes every NoiseStep seconds (300 if zero), clamped to [0, 1]. Period
// is a day when zero. Lyra's inference clusters follow such a pattern,
// busy by day and idle at night (EuroSys 2023, section 2.2, Fig. 2).
// It is a plain value, safe for concurrent use.
type Diurnal struct {
	Mean, Amplitude, Noise float64
	Period, Peak           float64
	NoiseStep              float64
	Seed                   uint64
}

// Validate checks that every field is a finite number, and that Noise,
// Period and NoiseStep are not negative (RunElastic and RunHetero call it
// before they start); errors wrap elastic.ErrInvalid. A NaN Mean used to
// make every Usage NaN.
func (d Diurnal) Validate() error {
	for _, f := range []struct {
		name     string
		v        float64
		negative bool
	}{{"mean", d.Mean, true}, {"amplitude", d.Amplitude, true}, {"noise", d.Noise, false},
		{"period", d.Period, false}, {"peak", d.Peak, true}, {"noise step", d.NoiseStep, false}} {
		if math.IsNaN(f.v) || math.IsInf(f.v, 0) || !f.negative && f.v < 0 {
			want := "a finite number"
			if !f.negative {
				want += " >= 0"
			}
			return fmt.Errorf("%w: diurnal usage: %s %v (want %s)", elastic.ErrInvalid, f.name, f.v, want)
		}
	}
	return nil
}

// Usage implements UsageSignal.
func (d Diurnal) Usage(t float64) float64 {
	period, step := d.Period, d.NoiseStep
	if period <= 0 {
		period = 86400
	}
	if step <= 0 {
		step = 300
	}
	u := d.Mean + d.Amplitude*math.Cos(2*math.Pi*(t-d.Peak)/period)
	if d.Noise > 0 {
		k := uint64(int64(math.Floor(t / step)))
		u += d.Noise * (2*rand.New(rand.NewPCG(d.Seed, k)).Float64() - 1)
	}
	return math.Min(1, math.Max(0, u))
}

// UsageTrace is a measured usage signal: Values[i] holds from Times[i] to
// Times[i+1]; before the first time the first value holds.
// It is only read by Usage: safe for concurrent use.
type UsageTrace struct{ Times, Values []float64 }

// Usage implements UsageSignal.
func (u *UsageTrace) Usage(t float64) float64 {
	n := min(len(u.Times), len(u.Values))
	if n == 0 {
		return 0
	}
	i, _ := slices.BinarySearch(u.Times[:n], t)
	if i < n && u.Times[i] == t {
		return u.Values[i]
	}
	return u.Values[max(i-1, 0)]
}

// ReadUsage reads an inference usage signal: a CSV file with columns time
// (s, increasing) and usage (the share of inference servers busy, in
// [0, 1]). Malformed rows give a *ParseError.
func ReadUsage(r io.Reader, name string) (*UsageTrace, error) {
	u := &UsageTrace{}
	err := csvRows(r, name, []string{"time", "usage"}, func(r *row) {
		t, v := r.seconds("time"), r.number("usage", 0, 1, "a share")
		switch {
		case r.err != nil:
		case len(u.Times) > 0 && t <= u.Times[len(u.Times)-1]:
			r.fail("time %v not after %v", t, u.Times[len(u.Times)-1])
		default:
			u.Times, u.Values = append(u.Times, t), append(u.Values, v)
		}
	})
	if err != nil {
		return nil, err
	}
	if len(u.Times) == 0 {
		return nil, &ParseError{File: name, Line: 2, Msg: "no rows"}
	}
	return u, nil
}

// ElasticConfig describes a simulation of a training cluster with elastic
// jobs and capacity loaned from an inference cluster, in Lyra's model
// (Li et al., "Lyra: Elastic Scheduling for Deep Learning Clusters",
// EuroSys 2023, sections 3 to 5): every OrchestratorInterval the
// orchestrator loans the inference servers that inference does not need
// (keeping Headroom of them) or reclaims servers with Lyra's heuristic,
// preempting or scaling in the jobs on them; every Interval the Policy
// allocates workers, jobs start, grow or shrink (paying RestartOverhead on
// every resize and every restart after a preemption; their progress is
// checkpointed), and run at their curve's throughput.
//
// It is a plain value, safe for concurrent reads (its Policy and Usage
// decide whether runs may share it).
type ElasticConfig struct {
	TrainingServers, GPUsPerServer int
	// InferenceServers lend capacity when Usage is set. A Usage with a
	// Validate method (Diurnal) is validated before the run starts, and
	// a NaN usage stops the run with an error wrapping elastic.ErrInvalid.
	InferenceServers int
	Usage            UsageSignal
	// Headroom is the share of inference servers never loaned (Lyra: 2%).
	Headroom float64
	Policy   elastic.Policy
	// Interval is the job scheduler's period (60 s if zero);
	// OrchestratorInterval the orchestrator's (Lyra: 300 s, the default).
	// Both are 0 or in [MinPeriod, MaxPeriod].
	Interval, OrchestratorInterval float64
	// RestartOverhead is the time a job makes no progress after a resize
	// or a restart, in seconds; with ChargeStart also after its first
	// start (as the Pollux artifact's simulator does).
	RestartOverhead float64
	ChargeStart     bool
	// EveryInterval calls the policy every interval, not only after an
	// arrival, a completion or a change of capacity (for policies whose
	// answer changes as jobs progress, such as Pollux's).
	EveryInterval bool
	// Pack places every job on as few servers as possible instead of in
	// Lyra's server groups (elastic.Cluster.SetPacking), for jobs whose
	// curves slow down across servers.
	Pack bool
	// MaxIntervals bounds the scheduler's intervals (0 means
	// DefaultMaxSteps).
	MaxIntervals int
}

// ElasticRecord is one job's outcome.
// It is a plain value, safe for concurrent use.
type ElasticRecord struct {
	ID                     int
	Arrival, Start, Finish float64
	// Preemptions counts reclaims that stopped the job; Resizes the
	// changes of its number of workers while it ran.
	Preemptions, Resizes int
	GPUSeconds           float64
}

// ElasticResult is the outcome of RunElastic.
// It is a plain value: safe for concurrent reads, not for writes while
// others read it.
type ElasticResult struct {
	Records []ElasticRecord
	End     float64
	// GPU-seconds of capacity and of busy GPUs, on training servers and
	// on loaned servers, over the run.
	TrainingCapacity, TrainingBusy, LoanedCapacity, LoanedBusy float64
	// Loans and Reclaims count the servers lent and handed back.
	Loans, Reclaims int
	// Allocations counts the policy's calls.
	Allocations int
	// PoolBusy gives the busy GPU-seconds on each pool (RunHetero's GPU
	// types; one entry, training and loaned servers together, for
	// RunElastic).
	PoolBusy []float64
}

// ElasticSummary gives Lyra's metrics (Table 5).
// It is a plain value, safe for concurrent use.
type ElasticSummary struct {
	Jobs                                  int
	MeanQueue, MedianQueue, P95Queue      float64
	MeanJCT, MedianJCT, P95JCT            float64
	TrainingUsage, OverallUsage           float64
	PreemptionRatio, ResizesPerJob        float64
	LoanedServerHours, MeanLoanedBusyRate float64
}

// Summarise computes the metrics over all jobs. Usage is busy over
// capacity GPU-seconds: on training servers, and over training plus
// loaned servers.
func (r *ElasticResult) Summarise() ElasticSummary {
	s := ElasticSummary{Jobs: len(r.Records)}
	if s.Jobs == 0 {
		return s
	}
	q := make([]float64, 0, s.Jobs)
	jct := make([]float64, 0, s.Jobs)
	pre, rs := 0, 0
	for _, rec := range r.Records {
		q = append(q, rec.Start-rec.Arrival)
		jct = append(jct, rec.Finish-rec.Arrival)
		if rec.Preemptions > 0 {
			pre++
		}
		rs += rec.Resizes
	}
	slices.Sort(q)
	slices.Sort(jct)
	mean := func(x []float64) float64 {
		t := 0.0
		for _, v := range x {
			t += v
		}
		return t / float64(len(x))
	}
	n := float64(s.Jobs)
	s.MeanQueue, s.MedianQueue, s.P95Queue = mean(q), quantile(q, 0.5), quantile(q, 0.95)
	s.MeanJCT, s.MedianJCT, s.P95JCT = mean(jct), quantile(jct, 0.5), quantile(jct, 0.95)
	s.PreemptionRatio, s.ResizesPerJob = float64(pre)/n, float64(rs)/n
	if r.TrainingCapacity > 0 {
		s.TrainingUsage = r.TrainingBusy / r.TrainingCapacity
		s.OverallUsage = (r.TrainingBusy + r.LoanedBusy) / (r.TrainingCapacity + r.LoanedCapacity)
	}
	if r.LoanedCapacity > 0 {
		s.MeanLoanedBusyRate = r.LoanedBusy / r.LoanedCapacity
	}
	return s
}

// bestRate is the largest throughput of a job whose curves are Linear or
// Table, over its pools; ok is false when a curve is of another kind,
// whose maximum is not known.
func bestRate(j *elastic.Job, pools int) (rate float64, ok bool) {
	for k := range pools {
		switch c := j.On(k).(type) {
		case nil:
		case elastic.Linear:
			rate = math.Max(rate, c.PerWorker*float64(j.MaxWorkers))
		case elastic.Table:
			for w := 1; w <= min(j.MaxWorkers, len(c)); w++ {
				rate = math.Max(rate, c[w-1])
			}
		default:
			return 0, false
		}
	}
	return rate, rate > 0
}

// throughputOn is a curve's throughput on a job's placement, and how many
// of its workers are on loaned servers; buf is scratch space.
func throughputOn(c *elastic.Cluster, curve elastic.Curve, id, w int, buf *[]int) (float64, int) {
	perServer, onLoan := c.Span(id, (*buf)[:0])
	*buf = perServer
	if pc, ok := curve.(elastic.PlacedCurve); ok {
		return pc.ThroughputOn(perServer), onLoan
	}
	return curve.Throughput(w), onLoan
}

// apply moves the pools to the policy's answer: preemptions, shrinks and
// moves off a pool first, in the jobs' order (shrink), then starts (on the
// new pool for a move) and growths, the jobs with the largest workers
// first (best fit decreasing: grow). A move restarts the job (a resize); a
// start that does not fit (fragmentation) leaves the job waiting and sets
// unplaced.
func (e *elasticEngine) apply(want []elastic.Assignment) (unplaced bool, err error) {
	if len(want) != len(e.states) {
		return false, fmt.Errorf("%w: the policy answered for %d of %d jobs", elastic.ErrInvalid, len(want), len(e.states))
	}
	changes, err := e.shrink(want)
	if err != nil {
		return false, err
	}
	slices.SortStableFunc(changes, func(a, b change) int {
		return cmp.Or(cmp.Compare(b.j.job.GPUsPerWorker, a.j.job.GPUsPerWorker), cmp.Compare((b.w-b.from)*b.j.job.GPUsPerWorker, (a.w-a.from)*a.j.job.GPUsPerWorker))
	})
	for _, g := range changes {
		placed, err := e.grow(g)
		if err != nil {
			return false, err
		}
		unplaced = unplaced || !placed
	}
	return unplaced, nil
}

// change is a start or growth to make: job j to w workers on pool (from
// the from it holds there; moved when it just left another pool).
type change struct {
	j             *elJob
	pool, from, w int
	moved         bool
}

// shrink stops, shrinks and moves off their pools the jobs the answer
// takes GPUs from, and returns the starts and growths left to make.
func (e *elasticEngine) shrink(want []elastic.Assignment) ([]change, error) {
	var grow []change
	for i, j := range e.active {
		from, pool := e.states[i].Workers, e.states[i].Pool
		to, w := want[i].Pool, want[i].Workers
		if w > 0 && (to < 0 || to >= len(e.pools) || j.job.On(to) == nil) {
			return nil, fmt.Errorf("%w: the policy put job %d on pool %d, where it cannot run", elastic.ErrInvalid, j.job.ID, to)
		}
		c := e.pools[pool]
		switch {
		case w == from && (w == 0 || to == pool):
		case w == 0:
			// Policies keep running jobs; a policy that stops one preempts it.
			c.Release(j.job.ID)
			j.rec.Preemptions++
			j.overhead = e.restartOf(j)
			j.queued = e.t
		case from > 0 && to != pool:
			c.Release(j.job.ID)
			j.rec.Resizes++
			j.overhead = e.restartOf(j)
			grow = append(grow, change{j, to, 0, w, true})
		case from > 0 && w < from:
			if _, err := c.Resize(j.job, w); err != nil {
				return nil, err
			}
			j.rec.Resizes++
			j.overhead = e.restartOf(j)
		default:
			grow = append(grow, change{j, to, from, w, false})
		}
	}
	return grow, nil
}

// grow makes one start or growth; placed is false when a start did not
// fit (the job waits).
func (e *elasticEngine) grow(g change) (placed bool, err error) {
	j, c := g.j, e.pools[g.pool]
	if g.from > 0 {
		n, err := c.Resize(j.job, g.w)
		if err != nil {
			return false, err
		}
		if n != g.from {
			j.rec.Resizes++
			j.overhead = e.restartOf(j)
		}
		return true, nil
	}
	if _, err := c.Place(j.job, g.w); err != nil {
		if errors.Is(err, elastic.ErrUnplaceable) {
			if g.moved {
				j.queued = e.t // it stopped on its old pool
			}
			return false, nil // fragmented: it waits
		}
		return false, err
	}
	j.pool = g.pool
	if !j.started {
		j.started = true
		j.rec.Start = e.t
		if e.cfg.ChargeStart {
			j.overhead = e.restartOf(j)
		}
	}
	return true, nil
}

// ElasticSpec turns trace jobs, which give only a GPU count and a
// duration, into elastic jobs for RunElastic. Traces do not say which jobs
// could scale; Lyra's production trace had elastic and inelastic jobs
// side by side (section 7.1). A seeded share Fraction of the jobs becomes
// elastic with MinWorkers = max(1, ceil(requested x MinFactor)) and
// MaxWorkers = max(MinWorkers, floor(requested x MaxFactor)), at most
// MaxWorkers when that is positive; the rest keep their requested GPUs.
// Every worker is one GPU and scales linearly (Lyra's assumption), and
// the work is the trace's GPU time, so a job on its requested GPUs runs
// for the trace's duration. Fraction is in [0, 1], the factors in
// [0, elastic.MaxWorkers]. It is a plain value, safe for concurrent use.
type ElasticSpec struct {
	Fraction             float64
	MinFactor, MaxFactor float64
	MaxWorkers           int
	Seed                 uint64
}

// Jobs converts trace jobs (ReadITP, ReadPhilly, ...): IDs and arrivals
// are kept; jobs without a duration or GPUs are an error.
func (s ElasticSpec) Jobs(trace []Job) ([]elastic.Job, error) {
	factor := func(v float64) bool { return v >= 0 && v <= elastic.MaxWorkers }
	if !(s.Fraction >= 0 && s.Fraction <= 1) || !factor(s.MinFactor) || !factor(s.MaxFactor) || s.MaxWorkers < 0 {
		return nil, fmt.Errorf("%w: elastic share %v (want 0 to 1), factors %v and %v (want 0 to %d), at most %d workers", elastic.ErrInvalid, s.Fraction, s.MinFactor, s.MaxFactor, elastic.MaxWorkers, s.MaxWorkers)
	}
	rng := rand.New(rand.NewPCG(s.Seed, 0x1a7a))
	out := make([]elastic.Job, len(trace))
	for i, j := range trace {
		req := j.Key.ScaleFactor
		if req < 1 || !(j.Duration > 0) {
			return nil, fmt.Errorf("%w: job %d has %d GPUs and duration %v", elastic.ErrInvalid, j.ID, req, j.Duration)
		}
		lo, hi := req, req
		if rng.Float64() < s.Fraction {
			lo = max(1, int(math.Ceil(float64(req)*s.MinFactor-1e-9)))
			hi = max(lo, int(math.Floor(float64(req)*s.MaxFactor+1e-9)))
			if s.MaxWorkers > 0 {
				hi = max(lo, min(hi, s.MaxWorkers))
			}
		}
		out[i] = elastic.Job{ID: j.ID, Arrival: j.Arrival, MinWorkers: lo, MaxWorkers: hi, GPUsPerWorker: 1,
			Work: j.Duration * float64(req), Curve: elastic.Linear{PerWorker: 1}}
	}
	return out, nil
}
