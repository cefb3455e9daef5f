package sim

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/gpusched/gpusched/allocation"
	"github.com/gpusched/gpusched/perfmodel"
	"github.com/gpusched/gpusched/perfmodel/gavel"
	"github.com/gpusched/gpusched/topology"
)

// Config describes a simulation in Gavel's model (Narayanan et al., OSDI
// 2020, section 7; scheduler.py: simulate): time advances in rounds; jobs
// that arrived by the start of a round are admitted; the policy's
// allocation is turned into the round's assignments by the round mechanism
// (allocation.Rounds); each assigned job runs min(floor(T x round), R)
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
	// simulations), used by the mechanism to consolidate jobs.
	GPUsPerServer []int
	// Throughput gives job rates; nil means gavel.Simulation().
	Throughput perfmodel.ThroughputModel
	// Colocation gives co-located rates; set it to let policies share GPUs
	// (Gavel's table implements it).
	Colocation perfmodel.ColocationModel
	// Policy allocates; RoundLength (default 360 s, else in [MinPeriod,
	// MaxPeriod]) and MinResetInterval (default 1920 s) configure the
	// mechanism, as in allocation.Rounds.
	Policy           allocation.Policy
	RoundLength      float64
	MinResetInterval float64
	// GlobalQueue, TypeOrder, ShuffleTypes, Seed and LeaveIdle configure
	// the mechanism, as in allocation.Rounds.
	GlobalQueue  bool
	TypeOrder    []topology.GPUType
	ShuffleTypes bool
	Seed         uint64
	LeaveIdle    bool
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
	Compat allocation.Compat
	// JobsToComplete, when set, ends the simulation as soon as these jobs
	// (by ID) have finished, as Gavel's continuous experiments do (jobs
	// keep arriving while the measured ones run); jobs still running then
	// are not recorded.
	JobsToComplete []int
	// Prices per GPU-hour of each type, for the cost metric (default:
	// allocation.DefaultPrices where known, else 0); one per type, finite
	// and >= 0.
	Prices []float64
	// Progress, if set, is called after every round with the jobs
	// finished so far and the total.
	Progress func(done, total int)
	// MaxRounds bounds the rounds (0 means DefaultMaxSteps).
	MaxRounds int
}

// Record is what happened to one job.
// It is a plain value, safe for concurrent reads.
type Record struct {
	Job
	// Start is when the job first ran, Finish when it completed (seconds;
	// -1 if never).
	Start, Finish float64
	// Rounds counts the rounds the job ran in, Preemptions the times it
	// was stopped before finishing.
	Rounds, Preemptions int
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
	prices       []float64
}

// Sample is one point of a time series.
// It is a plain value, safe for concurrent use.
type Sample struct{ Time, Value float64 }

type running struct {
	rec       *Record
	remaining float64
	tput      []float64
	ranLast   bool
	// crowd integrates the number of jobs present over the job's life.
	crowd float64
	// failures counts Gavel's failed micro-tasks in a row (Config.Compat).
	failures int
}

// gavelMaxFailures is scheduler.py's MAX_FAILED_ATTEMPTS.
const gavelMaxFailures = 5

// Run simulates jobs (in any order) to completion. Configurations and jobs
// out of range give an error wrapping ErrInvalid (rates, steps, weights,
// times and capacities in package allocation's ranges; RoundLength 0 or
// in [MinPeriod, MaxPeriod]). A job that would need more than MaxRounds
// rounds even at its best rate is refused up front, and a run that
// reaches MaxRounds stops, both with ErrNoProgress.
func Run(ctx context.Context, cfg Config, jobs []Job) (*Result, error) {
	if err := checkCluster(cfg.Types, cfg.Capacity); err != nil {
		return nil, err
	}
	if cfg.Policy == nil {
		return nil, invalid("no policy")
	}
	if err := checkPeriod("round length", cfg.RoundLength); err != nil {
		return nil, err
	}
	if math.IsNaN(cfg.MinResetInterval) || math.IsInf(cfg.MinResetInterval, 0) {
		return nil, invalid("minimum reset interval %v s", cfg.MinResetInterval)
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
	model := cfg.Throughput
	if model == nil {
		model = gavel.Simulation()
	}
	length := cfg.RoundLength
	if length <= 0 {
		length = 360
	}
	res := &Result{Types: cfg.Types, Capacity: cfg.Capacity, prices: prices(cfg)}
	order := slices.Clone(jobs)
	slices.SortStableFunc(order, func(a, b Job) int { return cmp.Or(cmp.Compare(a.Arrival, b.Arrival), cmp.Compare(a.ID, b.ID)) })
	// Look up every job's rates once, and drop the ones that cannot run.
	var all []*running
	ids := map[int]bool{}
	for _, j := range order {
		if ids[j.ID] {
			return nil, invalid("job ID %d appears twice", j.ID)
		}
		ids[j.ID] = true
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
		// A job makes at most rate x length steps a round: it needs at
		// least steps / (rate x length) rounds.
		if need := j.Steps / (best * length); need > float64(limit) {
			return nil, fmt.Errorf("%w: job %d needs at least %.3g rounds of %g s (%g steps at %g steps/s), more than MaxRounds (%d)",
				ErrNoProgress, j.ID, need, length, j.Steps, best, limit)
		}
		all = append(all, &running{rec: &Record{Job: j, Start: -1, Finish: -1, GPUSeconds: make([]float64, len(cfg.Types))}, remaining: j.Steps, tput: tput})
	}
	pairs, err := newPairCache(cfg, all)
	if err != nil {
		return nil, err
	}
	mech := &allocation.Rounds{
		Policy: cfg.Policy, RoundLength: cfg.RoundLength, MinResetInterval: cfg.MinResetInterval,
		GPUsPerServer: cfg.GPUsPerServer, GlobalQueue: cfg.GlobalQueue, TypeOrder: cfg.TypeOrder, ShuffleTypes: cfg.ShuffleTypes,
		Seed: cfg.Seed, LeaveIdle: cfg.LeaveIdle, Compat: cfg.Compat,
	}
	gavel := cfg.Compat == allocation.CompatGavel
	waiting := map[int]bool{} // JobsToComplete not finished yet
	for _, id := range cfg.JobsToComplete {
		if !ids[id] {
			return nil, invalid("job %d to complete is not in the trace", id)
		}
		waiting[id] = true
	}
	for _, j := range res.Unschedulable {
		delete(waiting, j.ID)
	}
	// Gavel credits a round from the end of the last round in which
	// anything ran (0 before the first).
	gavelStart, gavelEnd := 0.0, -1.0
	totalGPUs := 0
	for _, c := range cfg.Capacity {
		totalGPUs += c
	}
	var active []*running
	byID := map[int]*running{}
	next, done := 0, 0
	t := 0.0
	if len(all) > 0 {
		t = all[0].rec.Arrival
	}
	idle := 0
	emptied := false
	for done < len(all) && (len(cfg.JobsToComplete) == 0 || len(waiting) > 0) {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if res.Rounds >= limit {
			return nil, fmt.Errorf("%w: %d rounds (to %.0f s) with %d of %d jobs left, MaxRounds reached", ErrNoProgress, res.Rounds, t, len(all)-done, len(all))
		}
		for next < len(all) && all[next].rec.Arrival <= t {
			active = append(active, all[next])
			byID[all[next].rec.ID] = all[next]
			next++
		}
		if len(active) == 0 {
			if gavel && emptied {
				// Gavel's loop schedules once more on the empty cluster
				// (a reset, a shuffle) before it jumps to the next arrival.
				empty := &allocation.Problem{Types: cfg.Types, Capacity: cfg.Capacity, Now: t}
				if pairs != nil {
					empty.Pairs = pairs.view(nil)
				}
				if _, err := mech.Next(ctx, empty, t); err != nil {
					return nil, fmt.Errorf("sim: round at %.0f s: %w", t, err)
				}
			}
			emptied = false
			t = all[next].rec.Arrival
			continue
		}
		p := &allocation.Problem{Types: cfg.Types, Capacity: cfg.Capacity, Now: t}
		p.Jobs = make([]allocation.Job, len(active))
		for m, r := range active {
			p.Jobs[m] = allocation.Job{ID: r.rec.ID, Weight: r.rec.Weight, ScaleFactor: r.rec.Key.ScaleFactor, RemainingSteps: r.remaining,
				Throughput: r.tput, Arrival: r.rec.Arrival}
			if r.rec.SLO > 0 {
				p.Jobs[m].Deadline = r.rec.Arrival + r.rec.SLO
			}
		}
		if pairs != nil {
			p.Pairs = pairs.view(active)
		}
		rd, err := mech.Next(ctx, p, t)
		if err != nil {
			return nil, fmt.Errorf("sim: round at %.0f s: %w", t, err)
		}
		res.Rounds++
		if rd.Reset {
			res.Allocations++
			res.SolveTime += rd.Stats.SolveTime
			if rd.Stats.LP != nil {
				res.LPIterations += rd.Stats.LP.Iterations
			}
		}
		end := t
		busy := 0.0
		ran := map[int]bool{}
		report := allocation.RoundReport{Start: rd.Start}
		for _, as := range rd.Assignments {
			var rates []float64
			if len(as.JobIDs) == 1 {
				rates = []float64{byID[as.JobIDs[0]].tput[as.TypeIndex]}
			} else {
				a, b := indexOf(active, as.JobIDs[0]), indexOf(active, as.JobIDs[1])
				ta, tb := p.Pairs.Rates(a, b, as.TypeIndex)
				rates = []float64{ta, tb}
			}
			longest := 0.0
			failed := false
			for i, id := range as.JobIDs {
				r := byID[id]
				rate := rates[i]
				if rate <= 0 {
					continue
				}
				steps := math.Min(math.Floor(rate*length), r.remaining)
				if steps <= 0 {
					steps = math.Min(rate*length, r.remaining)
				}
				d := steps / rate
				longest = math.Max(longest, d)
				if sf := r.rec.Key.ScaleFactor; gavel && sf > 1 && steps < float64(sf) {
					// Each of the job's workers but the last gets
					// floor(steps / sf) = 0 steps: the micro-task fails.
					r.failures++
					failed = true
					continue
				}
				r.failures = 0
				if r.remaining-steps == r.remaining {
					return nil, fmt.Errorf("%w: job %d's %g remaining steps do not change by %g", ErrNoProgress, id, r.remaining, steps)
				}
				r.remaining -= steps
				if r.remaining <= 1e-9*r.rec.Steps {
					r.remaining = 0
				}
				ran[id] = true
				if r.rec.Start < 0 {
					r.rec.Start = t
				}
				r.rec.Rounds++
				r.rec.GPUSeconds[as.TypeIndex] += float64(r.rec.Key.ScaleFactor) * d
				if r.remaining == 0 {
					r.rec.Finish = t + d
				}
			}
			if gavel && len(as.JobIDs) == 2 {
				// Gavel stamps both jobs of a pair with the pair's end.
				for _, id := range as.JobIDs {
					if r := byID[id]; r.remaining == 0 {
						r.rec.Finish = t + longest
					}
				}
			}
			busy += float64(len(as.Workers)) * longest
			end = math.Max(end, t+longest)
			if !failed {
				report.Ran = append(report.Ran, allocation.UnitRun{JobIDs: as.JobIDs, Type: as.Type, Seconds: longest})
			}
		}
		if gavel && end > t {
			if gavelEnd >= 0 {
				gavelStart = gavelEnd
			}
			gavelEnd = end
			for i := range report.Ran {
				// finish - round start, rounded as Gavel does.
				report.Ran[i].Seconds = (t + report.Ran[i].Seconds) - gavelStart
			}
		}
		if err := mech.Report(report); err != nil {
			return nil, fmt.Errorf("sim: round at %.0f s: %w", t, err)
		}
		if end == t {
			// Nothing ran: wait a round for arrivals or the next reset
			// (Gavel: jump to the next arrival, or force a reset if none).
			idle++
			if idle > 100000 {
				return nil, fmt.Errorf("%w at %.0f s with %d jobs waiting", ErrStalled, t, len(active))
			}
			end = t + length
			if end == t {
				return nil, fmt.Errorf("%w: time %g s does not advance by a round of %g s", ErrNoProgress, t, length)
			}
			if gavel {
				if next < len(all) {
					end = all[next].rec.Arrival
				} else if idle == 1 {
					mech.ForceReset()
					end = t
				}
			}
		} else {
			idle = 0
		}
		if end > t {
			res.Utilisation = append(res.Utilisation, Sample{t, busy / (float64(totalGPUs) * (end - t))})
		}
		for _, r := range active {
			r.crowd += float64(len(active)) * (end - t)
		}
		kept := active[:0]
		for _, r := range active {
			if r.ranLast && !ran[r.rec.ID] && r.remaining > 0 {
				r.rec.Preemptions++
			}
			r.ranLast = ran[r.rec.ID]
			if r.failures >= gavelMaxFailures {
				done++
				delete(byID, r.rec.ID)
				delete(waiting, r.rec.ID)
				res.Dropped = append(res.Dropped, *r.rec)
				continue
			}
			if r.remaining == 0 {
				done++
				delete(byID, r.rec.ID)
				delete(waiting, r.rec.ID)
				r.rec.Isolated = isolatedTime(r, cfg.Capacity)
				res.Records = append(res.Records, *r.rec)
				res.End = math.Max(res.End, r.rec.Finish)
				continue
			}
			kept = append(kept, r)
		}
		emptied = len(kept) == 0
		active = kept
		t = end
		if cfg.Progress != nil {
			cfg.Progress(done, len(all))
		}
	}
	slices.SortFunc(res.Records, func(a, b Record) int { return cmp.Compare(a.ID, b.ID) })
	return res, nil
}

func indexOf(active []*running, id int) int {
	for m, r := range active {
		if r.rec.ID == id {
			return m
		}
	}
	return -1
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
