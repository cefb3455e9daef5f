package sim

import (
	"cmp"
	"context"
	"fmt"
	"iter"
	"math"
	"slices"

	"github.com/gpusched/gpusched/multires"
	"github.com/gpusched/gpusched/topology"
)

// SynergyJob is a job of the multi-resource engine (RunSynergy): the
// common fields (ID, Arrival, Steps as iterations, Name as its model),
// its GPUs and the profile that says how fast it runs with how much CPU
// and memory. A SynergyJob is a plain value, safe for concurrent use.
type SynergyJob struct {
	Job
	GPUs    int
	Profile *multires.Profile
}

// SynergyOrder is the queue policy beneath the allocator: which jobs get
// GPUs first in each round (Synergy, section 5: FIFO, SRTF, LAS and
// finish-time fairness). It is a plain value, safe for concurrent use.
type SynergyOrder int

// The queue policies. Except FIFO, a job that has waited longer than
// Starvation since it last ran goes ahead of those that have not, as in
// Synergy's artifact.
const (
	// SynergyFIFO: by arrival.
	SynergyFIFO SynergyOrder = iota
	// SynergySRTF: least remaining time first, at the rate the job last
	// ran at (before it ran, the rate the allocator gives it alone).
	SynergySRTF
	// SynergyLAS: least attained service (GPUs x seconds held) first.
	// Only the jobs admitted by GPUs are offered to the allocator, largest
	// first (the artifact's LAS: no job behind them takes GPUs a job of
	// theirs could not use).
	SynergyLAS
	// SynergyFTF: finish-time fairness (Themis, NSDI 2020): the largest
	// rho = (time so far + remaining time) / time alone at the proportional
	// share first. (The artifact sorts rho ascending, serving the jobs
	// that are already ahead; ours follows Themis.)
	SynergyFTF
)

var synergyOrderNames = [...]string{"FIFO", "SRTF", "LAS", "FTF"}

func (o SynergyOrder) String() string {
	if o >= 0 && int(o) < len(synergyOrderNames) {
		return synergyOrderNames[o]
	}
	return fmt.Sprintf("SynergyOrder(%d)", int(o))
}

// Starvation is how long a job may go without running before it goes
// ahead of the others (1,000 hours, the artifact's).
const Starvation = 1000 * 3600.0

// SynergyConfig configures RunSynergy. It is a plain value, safe for
// concurrent use.
type SynergyConfig struct {
	// Servers is the cluster: GPUs, CPUs and memory per server.
	Servers []multires.Server
	// Allocator splits each round's GPUs, CPUs and memory.
	Allocator multires.Allocator
	// Order is the queue policy.
	Order SynergyOrder
	// Round is the lease length in seconds; 0 means 300 (Synergy's).
	Round float64
	// From and To: the run ends when the jobs at these positions in order
	// of arrival, [From, To), have finished (Synergy measures jobs 4,000
	// to 5,000 of a continuous arrival); To <= 0 means every job of the
	// sequence, which must then be finite.
	From, To int
	// MaxRounds bounds the run; 0 means DefaultMaxSteps.
	MaxRounds int
}

// SynergyResult is RunSynergy's outcome: the records of the jobs that
// finished (Result.Records, in order of finish; Summarise(From, To)
// gives the measured window's metrics), GPU utilisation per round, and
// CPU and memory allocated per round. It is a plain value: safe for
// concurrent reads.
type SynergyResult struct {
	Result
	// CPU and Memory sample the share of the cluster's CPUs and memory
	// allocated in each round.
	CPU, Memory []Sample
	// Demotions counts the jobs x rounds the allocator ran below their
	// best-case demand.
	Demotions int
}

type synJob struct {
	SynergyJob
	pos      int
	done     float64 // iterations done
	attained float64 // seconds held
	lastRan  float64 // end of its last lease, or its arrival
	rate     float64 // its last rate, or what it gets alone
	urgent   bool    // waited longer than Starvation
	rec      Record
}

// RunSynergy simulates Synergy's round-based scheduler (Mohan et al.,
// OSDI 2022; its artifact's simulator/runner.py): every Round seconds the
// jobs present are ordered by cfg.Order and offered, in that order, to
// cfg.Allocator, which places them with CPUs and memory; every placed job
// runs the whole round at its placement's rate, credited as whole
// iterations of its profile's iteration time over that rate, and a job
// whose work is done ends at the round's end. Every round places every
// job afresh (as the artifact's simulation does: preemption costs
// nothing). Jobs are drawn from jobs lazily, in arrival order.
func RunSynergy(ctx context.Context, cfg SynergyConfig, jobs iter.Seq[SynergyJob]) (*SynergyResult, error) {
	if err := cfg.check(); err != nil {
		return nil, err
	}
	e := &synEngine{cfg: cfg, round: cmp.Or(cfg.Round, 300.0), alone: map[synKey]float64{}}
	for _, s := range cfg.Servers {
		e.gpus += s.GPUs
		e.cpus += s.CPUs
		e.mem += s.MemGB
	}
	next, stop := iter.Pull(jobs)
	defer stop()
	e.next = next
	return e.run(ctx)
}

func (c *SynergyConfig) check() error {
	if c.Allocator == nil {
		return invalid("SynergyConfig.Allocator is nil")
	}
	if c.Order < SynergyFIFO || c.Order > SynergyFTF {
		return invalid("SynergyConfig.Order %d: want SynergyFIFO to SynergyFTF", int(c.Order))
	}
	if err := checkPeriod("SynergyConfig.Round", c.Round); err != nil {
		return err
	}
	if c.MaxRounds < 0 || c.From < 0 {
		return invalid("SynergyConfig: MaxRounds %d, From %d: want >= 0", c.MaxRounds, c.From)
	}
	if err := multires.CheckServers(c.Servers); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	return nil
}

type synKey struct {
	p *multires.Profile
	g int
}

type synEngine struct {
	cfg          SynergyConfig
	round        float64
	gpus         int
	cpus, mem    float64
	next         func() (SynergyJob, bool)
	pending      *SynergyJob // the next arrival, drawn already
	drawn        int
	present      []*synJob
	measuredLeft int
	res          SynergyResult
	alone        map[synKey]float64
	lastArrival  float64
	exhausted    bool
}

func (e *synEngine) run(ctx context.Context) (*SynergyResult, error) {
	maxRounds := cmp.Or(e.cfg.MaxRounds, DefaultMaxSteps)
	e.res.Types, e.res.Capacity = []topology.GPUType{"gpu"}, []int{e.gpus}
	for t := 0.0; ; t += e.round {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if err := e.arrive(ctx, t); err != nil {
			return nil, err
		}
		if e.finished() {
			e.res.End = t
			return &e.res, nil
		}
		if len(e.present) == 0 && e.pending != nil {
			// Nothing to run: one idle sample, then on to the round in
			// which the next job arrives (a sparse workload would
			// otherwise step through empty rounds by the million).
			e.sample(t, 0, 0, 0)
			t = max(t, e.round*(math.Ceil(e.pending.Arrival/e.round)-1))
			continue
		}
		if e.res.Rounds >= maxRounds {
			return nil, fmt.Errorf("%w: %d rounds (SynergyConfig.MaxRounds) with %d jobs present", ErrNoProgress, maxRounds, len(e.present))
		}
		if err := e.schedule(ctx, t); err != nil {
			return nil, err
		}
		e.res.Rounds++
	}
}

// finished says whether the measured jobs are done (or, with To <= 0,
// every job).
func (e *synEngine) finished() bool {
	if e.cfg.To > 0 {
		return (e.drawn >= e.cfg.To || (e.exhausted && e.pending == nil)) && e.measuredLeft == 0
	}
	return e.exhausted && e.pending == nil && len(e.present) == 0
}

// arrive admits the jobs that arrived by t.
func (e *synEngine) arrive(ctx context.Context, t float64) error {
	for {
		if e.pending == nil && !e.exhausted {
			if e.cfg.To > 0 && e.drawn >= e.cfg.To && e.measuredLeft == 0 {
				return nil
			}
			j, ok := e.next()
			if !ok {
				e.exhausted = true
				return nil
			}
			if err := e.checkJob(&j); err != nil {
				return err
			}
			e.pending = &j
		}
		if e.pending == nil || e.pending.Arrival > t {
			return nil
		}
		if err := e.admit(ctx, *e.pending); err != nil {
			return err
		}
		e.pending = nil
	}
}

func (e *synEngine) checkJob(j *SynergyJob) error {
	switch {
	case e.drawn >= MaxJobs:
		return invalid("more than %d jobs", MaxJobs)
	case j.Profile == nil:
		return invalid("job %d: no profile", j.ID)
	case j.GPUs < 1 || j.GPUs > e.gpus:
		return invalid("job %d: %d GPUs: want 1 to the cluster's %d", j.ID, j.GPUs, e.gpus)
	case !(j.Arrival >= e.lastArrival) || math.IsInf(j.Arrival, 0):
		return invalid("job %d: arrival %g before the previous job's %g: jobs must come in order of arrival", j.ID, j.Arrival, e.lastArrival)
	case !(j.Steps > 0 && j.Steps <= 1e15):
		return invalid("job %d: %g iterations: want (0, 1e15]", j.ID, j.Steps)
	}
	if err := j.Profile.Validate(); err != nil {
		return fmt.Errorf("%w: job %d: %w", ErrInvalid, j.ID, err)
	}
	e.lastArrival = j.Arrival
	return nil
}

func (e *synEngine) admit(ctx context.Context, j SynergyJob) error {
	rate, err := e.aloneRate(ctx, j)
	if err != nil {
		return err
	}
	sj := &synJob{SynergyJob: j, pos: e.drawn, lastRan: j.Arrival, rate: rate}
	sj.rec = Record{Job: j.Job, Start: -1, Finish: -1, GPUSeconds: []float64{0}, Isolated: j.Profile.IterTime * j.Steps}
	if sj.rec.Weight == 0 {
		sj.rec.Weight = 1
	}
	e.drawn++
	if e.measured(sj) {
		e.measuredLeft++
	}
	e.present = append(e.present, sj)
	return nil
}

func (e *synEngine) measured(j *synJob) bool {
	return j.pos >= e.cfg.From && (e.cfg.To <= 0 || j.pos < e.cfg.To)
}

// aloneRate is the rate the allocator gives a job alone on the cluster:
// SRTF's and FTF's estimate before it runs.
func (e *synEngine) aloneRate(ctx context.Context, j SynergyJob) (float64, error) {
	k := synKey{j.Profile, j.GPUs}
	if r, ok := e.alone[k]; ok {
		return r, nil
	}
	plan, err := e.cfg.Allocator.Allocate(ctx, e.cfg.Servers, []multires.Job{{ID: j.ID, GPUs: j.GPUs, Profile: j.Profile}})
	if err != nil {
		return 0, err
	}
	r := 1.0
	if len(plan.Placements) == 1 && plan.Placements[0].Placed && plan.Placements[0].Rate > 0 {
		r = plan.Placements[0].Rate
	}
	e.alone[k] = r
	return r, nil
}

// key returns j's rank under the order at time t: smaller first.
func (e *synEngine) key(j *synJob, t float64) float64 {
	remaining := j.Profile.IterTime * (j.Steps - j.done) / j.rate
	switch e.cfg.Order {
	case SynergySRTF:
		return remaining
	case SynergyLAS:
		return j.attained * float64(j.GPUs)
	case SynergyFTF:
		return -(t - j.Arrival + remaining) / (j.Profile.IterTime * j.Steps)
	}
	return j.Arrival
}

type synRank struct {
	j      *synJob
	urgent bool
	key    float64
}

// order sorts the jobs present by the queue policy and marks those that
// have starved (for the next round's order, as the artifact does).
func (e *synEngine) order(t float64) []*synJob {
	ranks := make([]synRank, len(e.present))
	for i, j := range e.present {
		ranks[i] = synRank{j, j.urgent && e.cfg.Order != SynergyFIFO, e.key(j, t)}
	}
	slices.SortStableFunc(ranks, func(a, b synRank) int {
		if a.urgent != b.urgent {
			if a.urgent {
				return -1
			}
			return 1
		}
		return cmp.Or(cmp.Compare(a.key, b.key), cmp.Compare(a.j.Arrival, b.j.Arrival), a.j.pos-b.j.pos)
	})
	out := make([]*synJob, len(ranks))
	for i, r := range ranks {
		out[i] = r.j
		if t-r.j.lastRan > Starvation {
			r.j.urgent = true
		}
	}
	return out
}

// candidates returns the jobs offered to the allocator: every job in
// order, or for LAS those admitted by GPUs, largest first.
func (e *synEngine) candidates(sorted []*synJob) []*synJob {
	if e.cfg.Order != SynergyLAS {
		return sorted
	}
	free := e.gpus
	var sel []*synJob
	for _, j := range sorted {
		if j.GPUs <= free {
			sel = append(sel, j)
			free -= j.GPUs
		}
	}
	slices.SortStableFunc(sel, func(a, b *synJob) int { return b.GPUs - a.GPUs })
	return sel
}

func (e *synEngine) schedule(ctx context.Context, t float64) error {
	cand := e.candidates(e.order(t))
	mj := make([]multires.Job, len(cand))
	for i, j := range cand {
		mj[i] = multires.Job{ID: j.ID, GPUs: j.GPUs, Profile: j.Profile}
	}
	plan, err := e.cfg.Allocator.Allocate(ctx, e.cfg.Servers, mj)
	if err != nil {
		return err
	}
	if len(plan.Placements) != len(cand) {
		return fmt.Errorf("%w: the allocator placed %d jobs of %d", ErrBadDecision, len(plan.Placements), len(cand))
	}
	e.res.Demotions += plan.Demoted
	var gpus int
	var cpus, mem float64
	ran := make(map[*synJob]bool, len(cand))
	for i, j := range cand {
		p := &plan.Placements[i]
		if !p.Placed {
			continue
		}
		for _, pt := range p.Parts {
			cpus += pt.CPUs
			mem += pt.MemGB
		}
		gpus += j.GPUs
		ran[j] = true
		e.progress(j, p.Rate, t)
	}
	e.sample(t, gpus, cpus, mem)
	e.retire(ran, t)
	return nil
}

// progress credits one round at rate: whole iterations, as the artifact
// counts them.
func (e *synEngine) progress(j *synJob, rate, t float64) {
	if j.rec.Start < 0 {
		j.rec.Start = t
	}
	if rate > 0 {
		eff := j.Profile.IterTime / rate
		j.done = math.Min(j.Steps, j.done+math.Floor(e.round/eff))
		j.rate = rate
	}
	j.attained += e.round
	j.lastRan = t + e.round
	j.rec.Rounds++
	j.rec.GPUSeconds[0] += float64(j.GPUs) * e.round
}

func (e *synEngine) sample(t float64, gpus int, cpus, mem float64) {
	e.res.Utilisation = append(e.res.Utilisation, Sample{t, float64(gpus) / float64(e.gpus)})
	e.res.CPU = append(e.res.CPU, Sample{t, cpus / e.cpus})
	e.res.Memory = append(e.res.Memory, Sample{t, mem / e.mem})
}

// retire records the jobs that finished this round (at its end) and
// counts preemptions.
func (e *synEngine) retire(ran map[*synJob]bool, t float64) {
	kept := e.present[:0]
	for _, j := range e.present {
		if !ran[j] {
			if j.rec.Rounds > 0 && j.lastRan == t {
				j.rec.Preemptions++
			}
			kept = append(kept, j)
			continue
		}
		if j.done < j.Steps {
			kept = append(kept, j)
			continue
		}
		j.rec.Finish = t + e.round
		e.res.Records = append(e.res.Records, j.rec)
		if e.measured(j) {
			e.measuredLeft--
		}
	}
	clear(e.present[len(kept):])
	e.present = kept
}
