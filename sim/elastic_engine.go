package sim

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"slices"

	"github.com/gpusched/gpusched/elastic"
)

type elJob struct {
	job       *elastic.Job
	rec       *ElasticRecord
	remaining float64
	overhead  float64 // seconds of restart left
	queued    float64 // when it arrived or was last stopped
	started   bool
	pool      int   // the pool its workers are on (while it holds some)
	seen      []int // the most workers it has held on each pool
}

// RunElastic simulates the jobs (in any order) to completion. Input out of
// range is an error wrapping elastic.ErrInvalid: jobs (elastic.Job.Validate),
// intervals (0 or in [MinPeriod, MaxPeriod]), restart overhead (at most
// MaxPeriod), more than elastic.MaxServers training and inference servers
// together. A job whose curve is Linear or Table and that would need more
// than MaxIntervals intervals even at its best rate is refused up front; a
// run that reaches MaxIntervals, or whose time or work stops changing,
// stops with ErrNoProgress; one whose waiting jobs never get capacity with
// ErrStalled.
//
// Each interval takes these steps in turn: arrivals, loans and reclaims
// (the orchestrator), allocation (the policy), sampling of the capacity,
// execution of the interval, and the clock's advance.
func RunElastic(ctx context.Context, cfg ElasticConfig, jobs []elastic.Job) (*ElasticResult, error) {
	e, err := newElasticEngine(cfg, jobs)
	if err != nil {
		return nil, err
	}
	return e.loop(ctx)
}

// loop runs the engine's intervals until every job has finished.
func (e *elasticEngine) loop(ctx context.Context) (*ElasticResult, error) {
	if len(e.all) == 0 {
		return e.res, nil
	}
	for intervals := 0; e.done < len(e.all); intervals++ {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if intervals >= e.limit {
			return nil, fmt.Errorf("%w: %d intervals (to %.0f s) with %d of %d jobs left, MaxIntervals reached", ErrNoProgress, intervals, e.t, len(e.all)-e.done, len(e.all))
		}
		e.arrivals()
		if err := e.orchestrate(); err != nil {
			return nil, err
		}
		if err := e.allocate(); err != nil {
			return nil, err
		}
		e.sample()
		if err := e.execute(); err != nil {
			return nil, err
		}
		if err := e.advance(); err != nil {
			return nil, err
		}
	}
	e.res.End = e.t
	slices.SortFunc(e.res.Records, func(a, b ElasticRecord) int { return cmp.Compare(a.ID, b.ID) })
	for _, c := range e.pools {
		if err := c.Check(); err != nil {
			return nil, err
		}
	}
	return e.res, nil
}

// elasticEngine is RunElastic's state: the cluster, the jobs by arrival,
// the clock, and the step's scratch space.
type elasticEngine struct {
	cfg        ElasticConfig
	dt, orchDT float64 // the scheduler's and the orchestrator's periods
	limit      int     // MaxIntervals
	// pools are the clusters of each GPU type (one for RunElastic, whose
	// loans go to it: c); typed and shape are RunHetero's policy and pools.
	pools        []*elastic.Cluster
	c            *elastic.Cluster
	typed        elastic.TypedPolicy
	shape        []elastic.Pool
	res          *ElasticResult
	all          []*elJob // by arrival
	byID         map[int]*elJob
	active       []*elJob // arrived, unfinished, by arrival
	next, done   int
	t, nextOrch  float64
	dirty        bool    // the policy is due: an arrival, a completion, a change of capacity or a start that did not fit
	lastRun      float64 // the last time a job ran or arrived
	total, loans int     // GPUs held, and those on loaned servers, this interval
	assign       []elastic.Assignment
	states       []elastic.State
	spanBuf      []int
}

// stallAfter is how long the engine waits, with every job arrived and
// nothing running, before it reports ErrStalled.
const stallAfter = 30 * 86400.0

// checkElastic validates a configuration's settings and returns the
// scheduler's and the orchestrator's periods and the interval limit.
func checkElastic(cfg ElasticConfig) (dt, orchDT float64, limit int, err error) {
	if cfg.Policy == nil {
		return 0, 0, 0, fmt.Errorf("%w: no policy", elastic.ErrInvalid)
	}
	bad := func(x float64) bool { return !(x >= 0) || math.IsInf(x, 0) }
	if cfg.InferenceServers < 0 || bad(cfg.Headroom) || cfg.Headroom > 1 || bad(cfg.RestartOverhead) || bad(cfg.Interval) || bad(cfg.OrchestratorInterval) {
		return 0, 0, 0, fmt.Errorf("%w: %d inference servers, headroom %v, restart %v s, intervals %v and %v s", elastic.ErrInvalid, cfg.InferenceServers, cfg.Headroom, cfg.RestartOverhead, cfg.Interval, cfg.OrchestratorInterval)
	}
	for _, p := range []struct {
		name string
		v    float64
	}{{"interval", cfg.Interval}, {"orchestrator interval", cfg.OrchestratorInterval}} {
		if p.v != 0 && !(p.v >= MinPeriod && p.v <= MaxPeriod) {
			return 0, 0, 0, fmt.Errorf("%w: %s %v s, outside [%g, %g] (0 means the default)", elastic.ErrInvalid, p.name, p.v, MinPeriod, MaxPeriod)
		}
	}
	if cfg.RestartOverhead > MaxPeriod {
		return 0, 0, 0, fmt.Errorf("%w: restart overhead %v s, more than %g", elastic.ErrInvalid, cfg.RestartOverhead, MaxPeriod)
	}
	if cfg.TrainingServers < 0 || cfg.InferenceServers > elastic.MaxServers-max(cfg.TrainingServers, 0) {
		return 0, 0, 0, fmt.Errorf("%w: %d training and %d inference servers, more than %d together", elastic.ErrInvalid, cfg.TrainingServers, cfg.InferenceServers, elastic.MaxServers)
	}
	if v, ok := cfg.Usage.(interface{ Validate() error }); ok {
		if err := v.Validate(); err != nil {
			return 0, 0, 0, err
		}
	}
	limit = cfg.MaxIntervals
	if limit < 0 {
		return 0, 0, 0, fmt.Errorf("%w: MaxIntervals %d, want >= 0 (0 means %d)", elastic.ErrInvalid, limit, DefaultMaxSteps)
	}
	if limit == 0 {
		limit = DefaultMaxSteps
	}
	dt, orchDT = cfg.Interval, cfg.OrchestratorInterval
	if dt == 0 {
		dt = 60
	}
	if orchDT == 0 {
		orchDT = 300
	}
	return dt, orchDT, limit, nil
}

// newElasticEngine is the preparation step: the settings checked, the
// cluster built, every job validated against what the cluster can ever
// hold, and the jobs sorted by arrival.
func newElasticEngine(cfg ElasticConfig, jobs []elastic.Job) (*elasticEngine, error) {
	dt, orchDT, limit, err := checkElastic(cfg)
	if err != nil {
		return nil, err
	}
	c, err := elastic.NewCluster(cfg.TrainingServers, cfg.GPUsPerServer)
	if err != nil {
		return nil, err
	}
	c.SetPacking(cfg.Pack)
	// The most servers training can ever hold: its own and every
	// inference server but the headroom.
	maxServers := cfg.TrainingServers
	if cfg.Usage != nil {
		maxServers += cfg.InferenceServers - int(math.Ceil(float64(cfg.InferenceServers)*cfg.Headroom-1e-9))
	}
	shape := []elastic.Pool{{Nodes: maxServers, GPUsPerNode: cfg.GPUsPerServer}}
	return prepareElastic(cfg, dt, orchDT, limit, []*elastic.Cluster{c}, shape, jobs)
}

// prepareElastic builds the engine over its pools (shape gives the most
// each can hold) and checks and sorts the jobs.
func prepareElastic(cfg ElasticConfig, dt, orchDT float64, limit int, pools []*elastic.Cluster, shape []elastic.Pool, jobs []elastic.Job) (*elasticEngine, error) {
	if len(jobs) > MaxJobs {
		return nil, fmt.Errorf("%w: %d jobs, more than MaxJobs (%d)", elastic.ErrInvalid, len(jobs), MaxJobs)
	}
	e := &elasticEngine{cfg: cfg, dt: dt, orchDT: orchDT, limit: limit, pools: pools, c: pools[0], byID: map[int]*elJob{}, dirty: true,
		all: make([]*elJob, len(jobs)), res: &ElasticResult{Records: make([]ElasticRecord, len(jobs)), PoolBusy: make([]float64, len(pools))}}
	seen := map[int]bool{}
	for i := range jobs {
		j := &jobs[i]
		if err := e.checkJob(j, seen, shape); err != nil {
			return nil, err
		}
		e.res.Records[i] = ElasticRecord{ID: j.ID, Arrival: j.Arrival, Start: math.NaN(), Finish: math.NaN()}
		e.all[i] = &elJob{job: j, rec: &e.res.Records[i], remaining: j.Work, queued: j.Arrival, seen: make([]int, len(pools))}
	}
	slices.SortStableFunc(e.all, func(a, b *elJob) int { return cmp.Compare(a.job.Arrival, b.job.Arrival) })
	if len(e.all) > 0 {
		e.t = e.all[0].job.Arrival
		e.nextOrch, e.lastRun = e.t, e.t
	}
	return e, nil
}

// checkJob refuses a job that is invalid, repeats an ID, can never fit
// on a pool it has a curve for (shape gives the most servers each pool can
// hold), or would need more than MaxIntervals intervals.
func (e *elasticEngine) checkJob(j *elastic.Job, seen map[int]bool, shape []elastic.Pool) error {
	if err := j.Validate(); err != nil {
		return err
	}
	if seen[j.ID] {
		return fmt.Errorf("%w: job ID %d twice", elastic.ErrInvalid, j.ID)
	}
	seen[j.ID] = true
	if j.Curves != nil && len(j.Curves) != len(shape) {
		return fmt.Errorf("%w: job %d has curves on %d pools, the cluster has %d", elastic.ErrInvalid, j.ID, len(j.Curves), len(shape))
	}
	fits := false
	for k, p := range shape {
		if j.On(k) != nil && j.GPUsPerWorker <= p.GPUsPerNode && j.MinWorkers <= p.Nodes*(p.GPUsPerNode/j.GPUsPerWorker) {
			fits = true
		}
	}
	if !fits {
		if len(shape) == 1 {
			return fmt.Errorf("%w: job %d needs %d workers of %d GPUs; the cluster never holds more than %d servers of %d GPUs", elastic.ErrInvalid, j.ID, j.MinWorkers, j.GPUsPerWorker, shape[0].Nodes, shape[0].GPUsPerNode)
		}
		return fmt.Errorf("%w: job %d needs %d workers of %d GPUs, more than any pool it can run on holds", elastic.ErrInvalid, j.ID, j.MinWorkers, j.GPUsPerWorker)
	}
	if rate, ok := bestRate(j, len(shape)); ok && j.Work/rate/e.dt > float64(e.limit) {
		return fmt.Errorf("%w: job %d needs at least %.3g intervals of %g s (work %g at %g per second), more than MaxIntervals (%d)",
			ErrNoProgress, j.ID, j.Work/rate/e.dt, e.dt, j.Work, rate, e.limit)
	}
	return nil
}

// restartOf is the time a restart costs the job: its own RestartCost, or
// the configuration's RestartOverhead.
func (e *elasticEngine) restartOf(j *elJob) float64 {
	if j.job.RestartCost > 0 {
		return j.job.RestartCost
	}
	return e.cfg.RestartOverhead
}

// arrivals admits the jobs that have arrived by now.
func (e *elasticEngine) arrivals() {
	for e.next < len(e.all) && e.all[e.next].job.Arrival <= e.t {
		j := e.all[e.next]
		e.active = append(e.active, j)
		e.byID[j.job.ID] = j
		e.next++
		e.dirty, e.lastRun = true, e.t
	}
}

// orchestrate is the orchestrator's step, when it is due: it loans the
// inference servers that inference does not need (keeping the headroom)
// or reclaims servers with Lyra's heuristic, charging a restart to the
// jobs it preempts or scales in.
func (e *elasticEngine) orchestrate() error {
	cfg := &e.cfg
	if cfg.Usage == nil || e.t < e.nextOrch {
		return nil
	}
	e.nextOrch += e.orchDT * math.Max(1, math.Floor((e.t-e.nextOrch)/e.orchDT)+1)
	u := cfg.Usage.Usage(e.t)
	if math.IsNaN(u) {
		// It used to count as full use, silently.
		return fmt.Errorf("%w: the usage signal gave NaN at %v s (want a share from 0 to 1)", elastic.ErrInvalid, e.t)
	}
	u = math.Min(1, math.Max(0, u))
	want := max(0, cfg.InferenceServers-int(math.Ceil(float64(cfg.InferenceServers)*(u+cfg.Headroom)-1e-9)))
	have := e.c.Loaned()
	switch {
	case want > have:
		if _, err := e.c.Loan(want - have); err != nil {
			return err
		}
		e.res.Loans += want - have
		e.dirty = true
	case want < have:
		r, err := e.c.Reclaim(have - want)
		if err != nil {
			return err
		}
		e.res.Reclaims += have - want
		for _, id := range r.Preempted {
			j := e.byID[id]
			j.rec.Preemptions++
			j.overhead = e.restartOf(j)
			j.queued = e.t
		}
		for _, id := range r.ScaledIn {
			j := e.byID[id]
			j.rec.Resizes++
			j.overhead = e.restartOf(j)
		}
		e.dirty = true
	}
	return nil
}

// allocate asks the policy for every job's workers (and pool), when it is
// due, and moves the pools to its answer.
func (e *elasticEngine) allocate() error {
	if !e.dirty && !e.cfg.EveryInterval {
		return nil
	}
	e.states = e.states[:0]
	for _, j := range e.active {
		setProgress(j.job, j.job.Work-j.remaining, len(e.pools))
		st := elastic.State{Job: j.job, Remaining: j.remaining, Workers: e.pools[j.pool].Workers(j.job.ID),
			Age: e.t - j.job.Arrival, Restarts: j.rec.Resizes + j.rec.Preemptions, Attained: j.rec.GPUSeconds, Pool: j.pool, Seen: j.seen}
		if st.Workers == 0 {
			st.Waiting = e.t - j.queued
		}
		e.states = append(e.states, st)
	}
	var err error
	if e.typed != nil {
		e.assign, err = e.typed.AllocateTyped(e.states, e.shape)
	} else {
		total, _ := e.c.GPUs()
		var want []int
		want, err = e.cfg.Policy.Allocate(e.states, total)
		e.assign = e.assign[:0]
		for _, w := range want {
			e.assign = append(e.assign, elastic.Assignment{Workers: w})
		}
	}
	e.res.Allocations++
	if err != nil {
		return fmt.Errorf("sim: elastic policy at %v s: %w", e.t, err)
	}
	unplaced, err := e.apply(e.assign)
	if err != nil {
		return fmt.Errorf("sim: at %v s: %w", e.t, err)
	}
	// A start that did not fit (fragmentation): ask again next interval
	// rather than leave the GPUs set aside for it idle.
	e.dirty = unplaced
	return nil
}

// setProgress tells the job's progress curves (on every pool) the work
// done.
func setProgress(j *elastic.Job, done float64, pools int) {
	if j.Curves == nil {
		if pc, ok := j.Curve.(elastic.ProgressCurve); ok {
			pc.SetProgress(done)
		}
		return
	}
	for k := range pools {
		if pc, ok := j.On(k).(elastic.ProgressCurve); ok {
			pc.SetProgress(done)
		}
	}
}

// sample accounts the interval's capacity, on training and on loaned
// servers.
func (e *elasticEngine) sample() {
	e.total, _ = e.c.GPUs()
	for _, c := range e.pools[1:] {
		t, _ := c.GPUs()
		e.total += t
	}
	e.loans, _ = e.c.LoanedGPUs()
	e.res.TrainingCapacity += float64(e.total-e.loans) * e.dt
	e.res.LoanedCapacity += float64(e.loans) * e.dt
}

// execute runs one interval: every placed job pays its restart time left
// and progresses at its placement's throughput; a job that finishes
// within the interval releases its GPUs.
func (e *elasticEngine) execute() error {
	kept := e.active[:0]
	for _, j := range e.active {
		finished, err := e.run(j)
		if err != nil {
			return err
		}
		if !finished {
			kept = append(kept, j)
		}
	}
	e.active = kept
	return nil
}

// run runs one job for the interval and reports whether it finished.
func (e *elasticEngine) run(j *elJob) (bool, error) {
	c := e.pools[j.pool]
	w := c.Workers(j.job.ID)
	if w == 0 {
		return false, nil
	}
	j.seen[j.pool] = max(j.seen[j.pool], w)
	dt, t := e.dt, e.t
	run := dt
	if j.overhead > 0 {
		o := math.Min(j.overhead, dt)
		j.overhead -= o
		run -= o
	}
	curve := j.job.On(j.pool)
	if pc, ok := curve.(elastic.ProgressCurve); ok {
		pc.SetProgress(j.job.Work - j.remaining)
	}
	x, onLoan := throughputOn(c, curve, j.job.ID, w, &e.spanBuf)
	if !(x > 0) || math.IsInf(x, 0) {
		return false, fmt.Errorf("%w: job %d has throughput %v on %d workers at %v s", elastic.ErrInvalid, j.job.ID, x, w, t)
	}
	e.lastRun = t
	held := dt
	finished := x*run >= j.remaining
	if finished {
		j.rec.Finish = t + (dt - run) + j.remaining/x
		held = j.rec.Finish - t
	}
	g := float64(j.job.GPUsPerWorker)
	j.rec.GPUSeconds += float64(w) * g * held
	e.res.TrainingBusy += float64(w-onLoan) * g * held
	e.res.LoanedBusy += float64(onLoan) * g * held
	e.res.PoolBusy[j.pool] += float64(w) * g * held
	if finished {
		j.remaining = 0
		c.Release(j.job.ID)
		e.done++
		e.dirty = true
		return true, nil
	}
	if j.remaining-x*run == j.remaining && run > 0 {
		return false, fmt.Errorf("%w: job %d's %g remaining work does not change by %g", ErrNoProgress, j.job.ID, j.remaining, x*run)
	}
	j.remaining -= x * run
	return false, nil
}

// advance moves the clock an interval on, jumping over idle time to the
// interval of the next arrival (the servers held count as idle capacity
// meanwhile), and reports a stall.
func (e *elasticEngine) advance() error {
	if e.t+e.dt == e.t {
		return fmt.Errorf("%w: time %g s does not advance by an interval of %g s", ErrNoProgress, e.t, e.dt)
	}
	e.t += e.dt
	if len(e.active) == 0 && e.next < len(e.all) && e.all[e.next].job.Arrival > e.t {
		skip := math.Floor((e.all[e.next].job.Arrival-e.t)/e.dt) * e.dt
		e.res.TrainingCapacity += float64(e.total-e.loans) * skip
		e.res.LoanedCapacity += float64(e.loans) * skip
		e.t += skip
	}
	if e.next == len(e.all) && e.t-e.lastRun > stallAfter {
		a := e.active[0].job
		return fmt.Errorf("%w: %d jobs have waited %v s with nothing running (job %d needs %d workers of %d GPUs)",
			ErrStalled, len(e.active), e.t-e.lastRun, a.ID, a.MinWorkers, a.GPUsPerWorker)
	}
	return nil
}
