package sim

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"slices"
	"strconv"
	"time"

	"github.com/gpusched/gpusched/allocation"
	"github.com/gpusched/gpusched/perfmodel"
	"github.com/gpusched/gpusched/perfmodel/gavel"
	"github.com/gpusched/gpusched/placement"
	"github.com/gpusched/gpusched/scheduler"
	"github.com/gpusched/gpusched/topology"
)

// Config describes a simulation in Gavel's model (Narayanan et al., OSDI
// 2020, section 7; scheduler.py: simulate): time advances in rounds; jobs
// that arrived by the start of a round are admitted; the scheduler
// (scheduler.Scheduler) turns the policy's allocation into the round's
// assignments by the round mechanism (allocation.Rounds) and places them
// on the servers; each assigned job runs min(floor(T x round), R)
// steps at its rate T (or its co-located rate when paired) and may finish
// before the round ends; the mechanism is told what ran (Rounds.Report);
// the next round starts when the last assigned job of this one stops, or a
// round later when nothing ran.
//
// By default the mechanism is Gavel's (a queue per type, types fastest
// first) and work-conserving (GPUs the shares leave go to waiting jobs).
// With Compat set to allocation.CompatGavel both the mechanism and this
// loop are Gavel's simulator, quirks included: see Config.Compat.
//
// It is a plain value, safe for concurrent reads (its Policy decides
// whether runs may share it; this package's policies are safe).
type Config struct {
	// Types and Capacity give the cluster: the number of GPUs of each type.
	Types    []topology.GPUType
	Capacity []int
	// GPUsPerServer gives each type's server size (default 1, as Gavel's
	// simulations), where the scheduler consolidates jobs.
	GPUsPerServer []int
	// Throughput gives job rates; nil means gavel.Simulation().
	Throughput perfmodel.ThroughputModel
	// Colocation gives co-located rates; set it to let policies share GPUs
	// (Gavel's table implements it).
	Colocation perfmodel.ColocationModel
	// Policy allocates.
	Policy allocation.Policy
	// Mechanism configures the round mechanism, as scheduler.Config's and
	// allocation.Rounds' do: RoundLength (default 360 s, else in
	// [MinPeriod, MaxPeriod] here), MinResetInterval (default 1920 s),
	// GlobalQueue, TypeOrder, ShuffleTypes, Seed, LeaveIdle and Compat.
	//
	// Compat set to allocation.CompatGavel runs Gavel's mechanism
	// (allocation.Rounds with the same Compat) and Gavel's simulator loop:
	// each job is credited from the end of the last round in which
	// anything ran (so an idle gap counts as time received), the loop
	// takes one scheduling step (and one type shuffle) when the cluster
	// empties, a round in which nothing runs is followed by the next
	// arrival rather than a round later (or, when no job is due, by a
	// forced reset), and a multi-GPU job whose last steps are fewer than
	// its GPUs fails (no progress) and is dropped after 5 failures
	// (Result.Dropped), as scheduler.py's _done_callback does. The policy's
	// own compatibility (allocation.FIFO.Compat) is set apart.
	allocation.Mechanism
	// JobsToComplete, when set, ends the simulation as soon as these jobs
	// (by ID) have finished, as Gavel's continuous experiments do (jobs
	// keep arriving while the measured ones run); jobs still running then
	// are not recorded.
	JobsToComplete []int
	// Prices per GPU-hour of each type, for the cost metric (default:
	// allocation.DefaultPrices where known, else 0); one per type, finite
	// and >= 0.
	Prices []float64
	// Tenants names the tenant of jobs by ID (a job not named has none):
	// the entity of the hierarchical policies and of the quotas
	// TenantQuotas gives, which allocation.QuotaFairness enforces
	// (scheduler.Config.TenantQuotas). Every ID must be a job of the
	// trace.
	Tenants      map[int]string
	TenantQuotas map[string]allocation.Quota
	// Progress, if set, is called after every round with the jobs
	// finished so far and the total.
	Progress func(done, total int)
	// MaxRounds bounds the rounds (0 means DefaultMaxSteps).
	MaxRounds int
	// Hidden, when set, hides the truth (Throughput's rates) from the
	// policies, which see what Hidden.Rates says (learned from the jobs'
	// progress, by default), and makes progress noisy, with a warm-up
	// after every start (issue #41). Not with Compat or Colocation.
	Hidden *Hidden
}

// Record is what happened to one job.
// It is a plain value, safe for concurrent reads.
type Record struct {
	Job
	// Start is when the job first ran, Finish when it completed (seconds;
	// -1 if never).
	Start, Finish float64
	// Rounds counts the rounds the job ran in, Preemptions the times it
	// was stopped before finishing, TypeMoves the runs on another GPU
	// type than its previous run's (the round engine's; 0 in the others).
	Rounds, Preemptions, TypeMoves int
	// GPUSeconds is the GPU time the job used on each type.
	GPUSeconds []float64
	// Isolated is the time the job would have taken with a 1/N share of
	// every type (Gavel's isolated allocation, allocation.Isolated), N
	// being the mean number of jobs present during its life; JCT/Isolated
	// is its finish-time fairness ratio rho (Themis; Gavel section 7).
	Isolated float64
}

// Rho returns the job's finish-time fairness ratio, JCT over its isolated
// time.
func (r *Record) Rho() float64 {
	if r.Isolated <= 0 {
		return 0
	}
	return r.JCT() / r.Isolated
}

// JCT returns the job's completion time, Finish - Arrival.
func (r *Record) JCT() float64 { return r.Finish - r.Arrival }

// Result is a simulation's outcome.
// It is a plain value: safe for concurrent reads (Summarise only reads
// it), not for writes while others read it.
type Result struct {
	Types    []topology.GPUType
	Capacity []int
	Records  []Record
	// Unschedulable lists jobs that can run on no type of the cluster;
	// they are left out of the simulation.
	Unschedulable []Job
	// Utilisation samples the share of busy GPUs in each round.
	Utilisation []Sample
	// Dropped lists jobs Gavel's simulator drops (Config.Compat): multi-GPU
	// jobs that failed 5 times; they are not in Records.
	Dropped []Record
	// End is when the last job finished.
	End    float64
	Rounds int
	// Allocations counts the policy's calls; SolveTime is their total wall
	// time, and LPIterations the iterations of the LPs they solved (when the
	// policy reports them, allocation.Allocation.LP).
	Allocations  int
	SolveTime    time.Duration
	LPIterations int
	// ExploredGPUSeconds is the GPU time the rounds planned for learned
	// jobs on types they explored (Config.Hidden, scheduler.Explore).
	ExploredGPUSeconds float64
	// AuditFailed lists the learned jobs (by ID, in order of their end)
	// whose progress reports did not add up to their work
	// (scheduler.Explore.Audit; Hidden.Misreport).
	AuditFailed []int
	prices      []float64
}

// Sample is one point of a time series.
// It is a plain value, safe for concurrent use.
type Sample struct{ Time, Value float64 }

type running struct {
	key       string
	rec       *Record
	remaining float64
	tput      []float64
	ranLast   bool
	ranNow    bool
	// crowd integrates the number of jobs present over the job's life.
	crowd float64
	// failures counts Gavel's failed micro-tasks in a row (Config.Compat).
	failures int
	// lastType is the index of the type it last ran on, -1 before.
	lastType int
}

// ranOn counts a run of the job on the type of index k: a move when its
// last run was on another type.
func (rj *running) ranOn(k int) {
	if rj.lastType >= 0 && rj.lastType != k {
		rj.rec.TypeMoves++
	}
	rj.lastType = k
	rj.rec.Rounds++
}

// gavelMaxFailures is scheduler.py's MAX_FAILED_ATTEMPTS.
const gavelMaxFailures = 5

// Run simulates jobs (in any order) to completion: a clock and a trace
// around a scheduler.Scheduler, which makes every decision (the policy,
// the round mechanism, placement on the cluster's servers), so that a
// simulated decision is the one the scheduler makes in production.
// Configurations and jobs out of range give an error wrapping ErrInvalid
// (rates, steps, weights, times and capacities in package allocation's
// ranges; RoundLength 0 or in [MinPeriod, MaxPeriod]). A job that would
// need more than MaxRounds rounds even at its best rate is refused up
// front, and a run that reaches MaxRounds stops, both with ErrNoProgress.
func Run(ctx context.Context, cfg Config, jobs []Job) (*Result, error) {
	e, err := newRoundEngine(cfg, jobs)
	if err != nil {
		return nil, err
	}
	for !e.finished() {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if e.res.Rounds >= e.limit {
			return nil, fmt.Errorf("%w: %d rounds (to %.0f s) with %d of %d jobs left, MaxRounds reached", ErrNoProgress, e.res.Rounds, e.t, len(e.all)-e.done, len(e.all))
		}
		present, err := e.admit(ctx)
		if err != nil {
			return nil, err
		}
		if !present {
			continue // nobody present: the clock jumped to the next arrival
		}
		r, err := e.sched.Round(ctx, e.t)
		if err != nil {
			return nil, fmt.Errorf("sim: %w", err) // it names the round
		}
		end, err := e.execute(r)
		if err != nil {
			return nil, err
		}
		if err := e.advance(end); err != nil {
			return nil, err
		}
	}
	return e.result(), nil
}

// roundEngine is Run's state: the trace, the clock, the jobs present and
// the scheduler that decides.
type roundEngine struct {
	cfg    Config
	res    *Result
	sched  *scheduler.Scheduler
	model  perfmodel.ThroughputModel
	gavel  bool
	length float64
	limit  int // MaxRounds
	gpus   int

	all    []*running // by arrival, then ID
	recs   []Record   // the records of all, in the same order
	byKey  map[string]*running
	active []*running
	next   int
	done   int
	// completed counts the jobs done with all their steps (done less
	// those Gavel drops).
	completed int
	t         float64
	idle      int
	emptied   bool
	waiting   map[int]bool // JobsToComplete not finished yet
	// Gavel credits a round from the end of the last round in which
	// anything ran (0 before the first).
	gavelStart, gavelEnd float64
	report               scheduler.RoundReport
	unitEnd              []float64 // per entry of report.Ran, its unit's longest run
	hidden               *hiddenState
}

// newRoundEngine is the preparation step: rates looked up once, jobs that
// can run nowhere set aside, the cluster and the scheduler built.
func newRoundEngine(cfg Config, jobs []Job) (*roundEngine, error) {
	if err := checkCluster(cfg.Types, cfg.Capacity); err != nil {
		return nil, err
	}
	if cfg.Policy == nil {
		return nil, invalid("no policy")
	}
	if err := checkPeriod("round length", cfg.RoundLength); err != nil {
		return nil, err
	}
	if err := cfg.ValidateMechanism(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	if cfg.Prices != nil && len(cfg.Prices) != len(cfg.Types) {
		return nil, invalid("%d prices for %d GPU types", len(cfg.Prices), len(cfg.Types))
	}
	for k, p := range cfg.Prices {
		if !(p >= 0) || math.IsInf(p, 0) {
			return nil, invalid("price of %s is %v, want finite and >= 0", cfg.Types[k], p)
		}
	}
	limit, err := maxSteps("MaxRounds", cfg.MaxRounds)
	if err != nil {
		return nil, err
	}
	e := &roundEngine{cfg: cfg, model: cfg.Throughput, byKey: map[string]*running{}, length: cfg.RoundLength, limit: limit,
		gavel: cfg.Compat == allocation.CompatGavel, waiting: map[int]bool{}, gavelEnd: -1}
	if e.model == nil {
		e.model = gavel.Simulation()
	}
	if e.length <= 0 {
		e.length = 360
	}
	e.res = &Result{Types: cfg.Types, Capacity: cfg.Capacity, prices: prices(cfg)}
	if cfg.Hidden != nil {
		if e.gavel || cfg.Colocation != nil {
			return nil, invalid("Hidden with Compat or Colocation (Gavel's loop and pairs run on the rates the policies see)")
		}
		if e.hidden, err = newHidden(*cfg.Hidden, cfg.Types, e.length); err != nil {
			return nil, err
		}
	}
	if err := checkJobCount(len(jobs)); err != nil {
		return nil, err
	}
	order := byArrival(jobs)
	ids := make(map[int]bool, len(order))
	e.all = make([]*running, 0, len(order))
	// The jobs, their records and their rates and GPU-seconds in a block
	// each, in order of arrival: a round reads the jobs present, which
	// then lie near one another.
	nk := len(cfg.Types)
	runs := make([]running, 0, len(order))
	recs := make([]Record, 0, len(order))
	floats := make([]float64, 2*nk*len(order))
	for _, i := range order {
		j := jobs[i]
		if ids[j.ID] {
			return nil, invalid("job ID %d appears twice", j.ID)
		}
		ids[j.ID] = true
		if err := checkJob(&j); err != nil {
			return nil, err
		}
		tput, best, err := jobRates(e.model, cfg.Types, cfg.Capacity, &j)
		if err != nil {
			return nil, err
		}
		if best == 0 {
			e.res.Unschedulable = append(e.res.Unschedulable, j)
			continue
		}
		// A job makes at most rate x length steps a round: it needs at
		// least steps / (rate x length) rounds.
		if need := j.Steps / (best * e.length); need > float64(limit) {
			return nil, fmt.Errorf("%w: job %d needs at least %.3g rounds of %g s (%g steps at %g steps/s), more than MaxRounds (%d)",
				ErrNoProgress, j.ID, need, e.length, j.Steps, best, limit)
		}
		f := floats[2*nk*len(runs):]
		rate, secs := f[:nk:nk], f[nk:2*nk:2*nk]
		copy(rate, tput)
		if e.hidden != nil {
			e.hidden.truth(rate)
		}
		recs = append(recs, Record{Job: j, Start: -1, Finish: -1, GPUSeconds: secs})
		runs = append(runs, running{key: strconv.Itoa(j.ID), rec: &recs[len(recs)-1], remaining: j.Steps, tput: rate, lastType: -1})
		e.all = append(e.all, &runs[len(runs)-1])
	}
	// The records stay in their block until the end (see result), not
	// copied into a second one as jobs finish.
	e.recs = recs
	for id := range cfg.Tenants {
		if !ids[id] {
			return nil, invalid("job %d of Tenants is not in the trace", id)
		}
	}
	for _, id := range cfg.JobsToComplete {
		if !ids[id] {
			return nil, invalid("job %d to complete is not in the trace", id)
		}
		e.waiting[id] = true
	}
	for _, j := range e.res.Unschedulable {
		delete(e.waiting, j.ID)
	}
	c, err := clusterOf(cfg)
	if err != nil {
		return nil, err
	}
	for k := range cfg.Types {
		e.gpus += cfg.Capacity[k]
	}
	scfg := scheduler.Config{
		Policy: cfg.Policy, Cluster: c, Throughput: e.model, Colocation: cfg.Colocation, Types: cfg.Types,
		Mechanism: cfg.Mechanism, TenantQuotas: cfg.TenantQuotas,
		// Gavel's model: placement does not change rates, so jobs never
		// move for locality, and GPUs are taken in index order.
		Placer: &placement.Consolidated{}, MigrationCost: -1,
		// execute reads each round before the next is asked for.
		ReuseRounds: true,
	}
	if h := e.hidden; h != nil {
		scfg.Throughput, scfg.Estimator, scfg.Explore = nil, h.cfg.Estimator, h.cfg.Explore
	}
	e.sched, err = scheduler.New(scfg)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	if len(e.all) > 0 {
		e.t = e.all[0].rec.Arrival
	}
	return e, nil
}

// clusterOf builds the simulated cluster: per type, servers of
// GPUsPerServer GPUs (1 by default, as in Gavel's simulations), the last
// one smaller if the count does not divide.
func clusterOf(cfg Config) (*topology.Cluster, error) {
	c := &topology.Cluster{}
	for k, t := range cfg.Types {
		if cfg.Capacity[k] < 0 {
			return nil, invalid("capacity %d of %s", cfg.Capacity[k], t)
		}
		g := 1
		if k < len(cfg.GPUsPerServer) && cfg.GPUsPerServer[k] > 0 {
			g = cfg.GPUsPerServer[k]
		}
		for i, left := 0, cfg.Capacity[k]; left > 0; i++ {
			n := min(g, left)
			left -= n
			s := topology.Server{ID: fmt.Sprintf("%s-%d", t, i), GPUs: make([]topology.GPU, n)}
			for j := range s.GPUs {
				s.GPUs[j] = topology.GPU{Index: j, Type: t, MemoryMiB: 16 << 10, NUMANode: -1}
			}
			c.Servers = append(c.Servers, s)
		}
	}
	if len(c.Servers) == 0 {
		return nil, nil
	}
	if err := c.Validate(); err != nil {
		return nil, fmt.Errorf("%w: the cluster of GPUsPerServer: %w", ErrInvalid, err)
	}
	return c, nil
}

func (e *roundEngine) finished() bool {
	return e.done == len(e.all) || len(e.cfg.JobsToComplete) > 0 && len(e.waiting) == 0
}

// admit submits the jobs that arrived by now. With nobody present it moves
// the clock to the next arrival and returns false (Gavel's loop first
// schedules once more on the cluster that just emptied).
func (e *roundEngine) admit(ctx context.Context) (bool, error) {
	for e.next < len(e.all) && e.all[e.next].rec.Arrival <= e.t {
		r := e.all[e.next]
		spec := scheduler.JobSpec{GPUs: r.rec.Key.ScaleFactor, Model: &r.rec.Key, Weight: r.rec.Weight, RemainingSteps: r.remaining,
			Tenant: e.cfg.Tenants[r.rec.ID]}
		if r.rec.SLO > 0 {
			spec.Deadline = r.rec.Arrival + r.rec.SLO
		}
		if e.hidden != nil {
			var err error
			if spec, err = e.hidden.spec(e, r, spec); err != nil {
				return false, err
			}
		}
		if err := e.sched.Submit(r.key, spec, r.rec.Arrival); err != nil {
			return false, fmt.Errorf("sim: job %d: %w", r.rec.ID, err)
		}
		e.active = append(e.active, r)
		e.byKey[r.key] = r
		e.next++
	}
	if len(e.active) > 0 {
		return true, nil
	}
	if e.gavel && e.emptied {
		// A reset and a shuffle on the empty cluster, as scheduler.py.
		if _, err := e.sched.Round(ctx, e.t); err != nil {
			return false, fmt.Errorf("sim: %w", err) // it names the round
		}
	}
	e.emptied = false
	e.t = e.all[e.next].rec.Arrival
	return false, nil
}

// typeIndex returns t's index in cfg.Types (the last if listed twice, 0 if
// absent): a scan of the few types costs less than a map's string hash in
// a loop over every assignment of every round.
func (e *roundEngine) typeIndex(t topology.GPUType) int {
	k := 0
	for i, u := range e.cfg.Types {
		if u == t {
			k = i
		}
	}
	return k
}

// execute runs the round's assignments: each job runs min(floor(T x
// round), R) steps at its rate (its co-located rate when paired) and
// stops early when it finishes; the scheduler is told what ran. It
// returns when the last job of the round stops.
func (e *roundEngine) execute(r *scheduler.Round) (float64, error) {
	e.res.Rounds++
	e.res.ExploredGPUSeconds = r.Stats.ExploredGPUSeconds
	if r.Reset {
		e.res.Allocations += r.Stats.Solves
		e.res.SolveTime += r.Stats.SolveTime
		e.res.LPIterations += r.Stats.LPIterations
	}
	end, busy := e.t, 0.0
	e.report = scheduler.RoundReport{Start: r.Start, Ran: e.report.Ran[:0]}
	e.unitEnd = e.unitEnd[:0]
	for _, as := range r.Assignments {
		k := e.typeIndex(as.Type)
		var rates [2]float64
		jobs := [2]*running{e.byKey[as.Jobs[0]]}
		if len(as.Jobs) == 1 {
			rates[0] = jobs[0].tput[k]
		} else {
			jobs[1] = e.byKey[as.Jobs[1]]
			ta, tb, err := e.cfg.Colocation.Colocated(jobs[0].rec.Key, jobs[1].rec.Key, as.Type)
			if err != nil {
				return 0, fmt.Errorf("sim: round at %.0f s: %w", e.t, err)
			}
			rates = [2]float64{ta, tb}
		}
		longest, failed := 0.0, false
		first := len(e.report.Ran)
		for i, rj := range jobs[:len(as.Jobs)] {
			rate := rates[i]
			if rate <= 0 {
				e.report.Ran = append(e.report.Ran, scheduler.Ran{Job: rj.key})
				continue
			}
			var steps, d float64
			if e.hidden != nil {
				var err error
				if steps, d, err = e.hidden.run(e, rj, rate, as.Type, as.Kept, e.t); err != nil {
					return 0, err
				}
				if steps == 0 { // its warm-up took the round
					longest = math.Max(longest, d)
					rj.ranNow = true
					rj.ranOn(k)
					rj.rec.GPUSeconds[k] += float64(rj.rec.Key.ScaleFactor) * d
					if rj.rec.Start < 0 {
						rj.rec.Start = e.t
					}
					e.report.Ran = append(e.report.Ran, scheduler.Ran{Job: rj.key, Seconds: d})
					continue
				}
			} else {
				steps = math.Min(math.Floor(rate*e.length), rj.remaining)
				if steps <= 0 {
					steps = math.Min(rate*e.length, rj.remaining)
				}
				d = steps / rate
			}
			longest = math.Max(longest, d)
			if sf := rj.rec.Key.ScaleFactor; e.gavel && sf > 1 && steps < float64(sf) {
				// Each of the job's workers but the last gets floor(steps
				// / sf) = 0 steps: the micro-task fails.
				rj.failures++
				failed = true
				continue
			}
			rj.failures = 0
			if rj.remaining-steps == rj.remaining {
				return 0, fmt.Errorf("%w: job %d's %g remaining steps do not change by %g", ErrNoProgress, rj.rec.ID, rj.remaining, steps)
			}
			rj.remaining -= steps
			if rj.remaining <= 1e-9*rj.rec.Steps {
				rj.remaining = 0
			}
			rj.ranNow = true
			if rj.rec.Start < 0 {
				rj.rec.Start = e.t
			}
			rj.ranOn(k)
			rj.rec.GPUSeconds[k] += float64(rj.rec.Key.ScaleFactor) * d
			if rj.remaining == 0 {
				rj.rec.Finish = e.t + d
			}
			e.report.Ran = append(e.report.Ran, scheduler.Ran{Job: rj.key, Seconds: d, Steps: steps})
		}
		if e.gavel && len(as.Jobs) == 2 {
			// Gavel stamps both jobs of a pair with the pair's end.
			for _, rj := range jobs {
				if rj.remaining == 0 {
					rj.rec.Finish = e.t + longest
				}
			}
		}
		busy += float64(len(as.Devices)) * longest
		end = math.Max(end, e.t+longest)
		if failed {
			e.report.Ran = e.report.Ran[:first] // a failed unit is not credited
		}
		for range e.report.Ran[len(e.unitEnd):] {
			e.unitEnd = append(e.unitEnd, longest)
		}
	}
	if e.gavel && end > e.t {
		if e.gavelEnd >= 0 {
			e.gavelStart = e.gavelEnd
		}
		e.gavelEnd = end
	}
	if err := e.credit(); err != nil {
		return 0, err
	}
	if end == e.t {
		// Nothing ran: wait a round for arrivals or the next reset
		// (Gavel: jump to the next arrival, or force a reset if none).
		e.idle++
		if e.idle > 100000 {
			return 0, fmt.Errorf("%w at %.0f s with %d jobs waiting", ErrStalled, e.t, len(e.active))
		}
		end = e.t + e.length
		if end == e.t {
			return 0, fmt.Errorf("%w: time %g s does not advance by a round of %g s", ErrNoProgress, e.t, e.length)
		}
		if e.gavel {
			if e.next < len(e.all) {
				end = e.all[e.next].rec.Arrival
			} else if e.idle == 1 {
				e.sched.ForceReset()
				end = e.t
			}
		}
	} else {
		e.idle = 0
	}
	if end > e.t {
		e.res.Utilisation = append(e.res.Utilisation, Sample{e.t, busy / (float64(e.gpus) * (end - e.t))})
	}
	return end, nil
}

// credit reports what ran. Gavel credits every unit of a round from the
// end of the last busy round to its finish.
func (e *roundEngine) credit() error {
	if e.gavel {
		// From the last busy round's end to the unit's (its longest job's)
		// end, rounded as Gavel does.
		for i := range e.report.Ran {
			e.report.Ran[i].Seconds = (e.t + e.unitEnd[i]) - e.gavelStart
		}
	}
	if err := e.sched.Report(e.report); err != nil {
		return fmt.Errorf("sim: round at %.0f s: %w", e.t, err)
	}
	return nil
}

// advance closes the round at end: preemptions counted, finished (and, in
// Gavel's mode, dropped) jobs recorded and removed from the scheduler, the
// clock moved.
func (e *roundEngine) advance(end float64) error {
	for _, r := range e.active {
		r.crowd += float64(len(e.active)) * (end - e.t)
	}
	kept := e.active[:0]
	for _, r := range e.active {
		if r.ranLast && !r.ranNow && r.remaining > 0 {
			r.rec.Preemptions++
		}
		r.ranLast, r.ranNow = r.ranNow, false
		if r.failures >= gavelMaxFailures || r.remaining == 0 {
			e.done++
			delete(e.byKey, r.key)
			delete(e.waiting, r.rec.ID)
			if e.hidden != nil {
				if st, err := e.sched.Status(r.key); err == nil && st.Audit == scheduler.AuditFailed {
					e.res.AuditFailed = append(e.res.AuditFailed, r.rec.ID)
				}
			}
			if err := e.sched.Remove(r.key); err != nil {
				return fmt.Errorf("sim: %w", err)
			}
			if r.remaining > 0 {
				e.res.Dropped = append(e.res.Dropped, *r.rec)
				continue
			}
			r.rec.Isolated = isolatedTime(r, e.cfg.Capacity)
			e.completed++
			e.res.End = math.Max(e.res.End, r.rec.Finish)
			continue
		}
		kept = append(kept, r)
	}
	e.emptied = len(kept) == 0
	e.active = kept
	e.t = end
	if e.cfg.Progress != nil {
		e.cfg.Progress(e.done, len(e.all))
	}
	return nil
}

// result returns the result, its records those of the jobs that finished
// (remaining steps 0), taken from the engine's block in place: the engine
// is done with them.
func (e *roundEngine) result() *Result {
	if e.completed > 0 {
		out := e.recs[:0]
		for i, r := range e.all {
			if r.remaining == 0 {
				out = append(out, e.recs[i])
			}
		}
		e.res.Records = out
	}
	slices.SortFunc(e.res.Records, func(a, b Record) int { return cmp.Compare(a.ID, b.ID) })
	return e.res
}

func prices(cfg Config) []float64 {
	if cfg.Prices != nil {
		return cfg.Prices
	}
	out := make([]float64, len(cfg.Types))
	for k, t := range cfg.Types {
		out[k] = allocation.DefaultPrices[t]
	}
	return out
}

// isolatedTime is the job's run time with the isolated share of each type
// for the mean number of jobs it shared the cluster with: X_k =
// n_k / (N sf), the row scaled to sum to at most 1.
func isolatedTime(r *running, capacity []int) float64 {
	life := r.rec.Finish - r.rec.Arrival
	n := 1.0
	if life > 0 {
		n = math.Max(1, r.crowd/life)
	}
	sf := float64(r.rec.Key.ScaleFactor)
	sum, rate := 0.0, 0.0
	for k, c := range capacity {
		x := float64(c) / n / sf
		sum += x
		rate += x * r.tput[k]
	}
	if sum > 1 {
		rate /= sum
	}
	if rate <= 0 {
		return 0
	}
	return r.rec.Steps / rate
}
