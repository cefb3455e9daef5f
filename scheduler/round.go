package scheduler

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/gpusched/gpusched/allocation"
	"github.com/gpusched/gpusched/cluster"
	"github.com/gpusched/gpusched/elastic"
	"github.com/gpusched/gpusched/perfmodel/learn"
	"github.com/gpusched/gpusched/topology"
)

// Round is what runs from Start for Length seconds. It is the caller's,
// safe for concurrent reads, unless Config.ReuseRounds is set: the next
// Round call, from any goroutine, then overwrites it, and reading it
// meanwhile is a data race.
type Round struct {
	Start, Length float64
	// Assignments are the jobs that run, each on its GPUs.
	Assignments []Assignment
	// Preempted are the jobs that ran in the last round and do not run in
	// this one (finished ones aside), sorted: an embedder stops them.
	Preempted []string
	// Waiting lists every job that does not run in this round, in order of
	// submission, with its state (Waiting or Unrunnable) and the reason;
	// with Assignments and Finished, a Round says what became of every
	// job submitted (jobs that finished in an earlier round aside).
	Waiting []JobFate
	// Finished lists the jobs whose known remaining steps reached 0 at the
	// last report, sorted: they left the rounds. Each is listed once.
	Finished []string
	// Reset reports that a policy solved its allocation for this round.
	Reset bool
	Stats RoundStats
}

// Assignment is one job (or two sharing GPUs) on its GPUs for a round.
// It is part of its Round and as safe for concurrent reads (see Round).
type Assignment struct {
	// Jobs is one job's key, or the keys of two jobs sharing the GPUs.
	Jobs []string
	Type topology.GPUType
	// Devices are the GPUs: the job's GPUs, then its Extra elastic ones.
	Devices []Device
	Extra   int
	// Kept reports that the job runs on the same GPUs as in the last round
	// (its lease is extended; no restart).
	Kept bool
}

// RoundStats describe one round, for observers: a plain value, safe for
// concurrent reads (OnRound gets a copy).
type RoundStats struct {
	Start float64
	// Jobs counts the jobs submitted, Tiers their priority tiers.
	Jobs, Tiers int
	// Reset reports that a policy solved; Solves counts its solves (one
	// per tier that re-solved) and SolveTime their wall time.
	Reset     bool
	Solves    int
	SolveTime time.Duration
	// LPSolves and LPIterations count the linear programs the solves
	// went through and their iterations; LPRows, LPColumns and LPNonzeros
	// give the size of the largest (when the policy reports them,
	// allocation.LPStats).
	LPSolves, LPIterations        int
	LPRows, LPColumns, LPNonzeros int
	// Assigned counts the units (jobs, or pairs of jobs sharing GPUs) the
	// mechanism chose; Placed those that got GPUs and run; Kept those on
	// the same GPUs as before; Moves the running jobs that changed GPUs;
	// Preemptions the jobs that ran last round and do not now; Unplaced
	// the units that found no GPUs (fragmentation, single-server jobs);
	// GangsDropped the gangs not admitted whole; Refilled the jobs given
	// the GPUs left free after a gang was dropped (see the package
	// documentation's round steps).
	Assigned, Placed, Kept, Moves, Preemptions, Unplaced, GangsDropped, Refilled int
	// ElasticGPUs counts the extra GPUs given to elastic jobs.
	ElasticGPUs int
	// BusyGPUs and HealthyGPUs count the GPUs held after the round and the
	// healthy ones.
	BusyGPUs, HealthyGPUs int
	// Exploring counts the learned jobs placed on a type their rate there
	// was optimistic about (Explore); ExploredGPUSeconds is the GPU time
	// the rounds planned for them so far, in all.
	Exploring          int
	ExploredGPUSeconds float64
	// AuditFailed lists the learned jobs that failed the conservation
	// audit (Explore.Audit) since the last round, in the order they
	// failed.
	AuditFailed []string
	// Took is the round's wall time, solves included.
	Took time.Duration
}

// lease is a holder of GPUs in the state: one job, or a pair.
type lease struct {
	holder   string
	jobs     [2]*job
	typ      int
	typeName topology.GPUType
	extra    []cluster.GPURef
	epoch    uint64
	pos      int // in Scheduler.leaseList
}

// tierSolve is a tier's learned and solved, for undo.
type tierSolve struct {
	learned bool
	solved  float64
}

// unit is one assignment of the round being built.
type unit struct {
	jobs   [2]*job
	holder string
	tier   *tier
	typ    int
	tname  topology.GPUType
	gpus   int
	kept   bool
	placed bool
	moved  bool
	extra  int
}

type scratch struct {
	ran      []allocation.UnitRun
	ids      []int
	held     []heldCredit // Report's
	ranSpare []*job       // the buffer of ranBefore before last
	// With Config.ReuseRounds, the blocks of the last round's devices and
	// keys.
	devs     []Device
	keys     []string
	reported []*job
	units    [2][]unit
	cur      int
	refs     []cluster.GPURef
	old      []cluster.GPURef
	order    []int
	// credited and lasts are what a round changes before it may fail
	// (creditUnreported's attained times, the tiers' last rounds), for
	// undo.
	credited []creditedJob
	lasts    []*allocation.Round
	solves   []tierSolve
	// estimates, learnRates and learnOpt are refreshLearned's buffers.
	estimates  []learn.Estimate
	learnRates []float64
	learnOpt   []bool
	// learnSaved and refitSaved are what refreshLearned changed, for undo.
	learnSaved []savedLearn
	refitSaved refitState
	// checkSaved are the jobs whose versions were found unchanged, with
	// their readAt before, for undo.
	checkSaved []savedCheck
	feedSaved  feedState
	// changed and pending are refreshLearned's buffers for the jobs a
	// changer lists and the jobs it looks at.
	changed []string
	pending []*job
}

// creditedJob is a job's attained time on one type and rounds before
// creditUnreported credited it.
type creditedJob struct {
	j        *job
	k        int
	attained float64
	rounds   int
}

// Round computes the round that starts at now (seconds on the clock of
// Submit). A round starts where the last one ended or later: at its
// Start plus Length, or, once reported, at its Start plus the longest
// Seconds its report gives (a round whose jobs all stopped early ended
// early; under allocation.CompatGavel, whose reports credit more than the
// round, a reported round ends at its Start); an earlier start is an
// error wrapping ErrInvalid. A cancelled ctx is an error, whether or not
// a policy solves. Each tier's
// policy and round mechanism choose the jobs to run and their GPU types,
// the jobs are placed on GPUs of the live state, gangs are admitted whole
// or not at all, and elastic jobs grow into GPUs left over. The last
// round is credited with its report, or in full without one. It returns
// the assignments; the GPUs are held in the state until the next round.
// A round that returns an error changes nothing (the tiers' mechanisms,
// the credit of the last round and its report are as they were), save a
// stateful policy's own state (FIFO with Sticky, FinishTimeFairness).
func (s *Scheduler) Round(ctx context.Context, now float64) (*Round, error) {
	r, stats, err := s.lockedRound(ctx, now)
	if err != nil {
		return nil, err
	}
	if s.cfg.OnRound != nil {
		s.cfg.OnRound(stats)
	}
	return r, nil
}

// lockedRound runs a round under the lock, released on every path (a
// policy that panics included), and returns its statistics read under
// it: with ReuseRounds, r is the next round's memory, which another
// goroutine's Round may overwrite at once.
func (s *Scheduler) lockedRound(ctx context.Context, now float64) (*Round, RoundStats, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, err := s.round(ctx, now)
	if err != nil {
		return nil, RoundStats{}, err
	}
	return r, r.Stats, nil
}

// round is the engine: named steps around one Rounds call per tier.
func (s *Scheduler) round(ctx context.Context, now float64) (*Round, error) {
	t0 := time.Now()
	if !validTime(now) {
		return nil, fmt.Errorf("%w: round at %v (want 0 to %g s)", ErrInvalid, now, allocation.MaxTime)
	}
	if s.last != nil && now < s.lastEnd {
		return nil, fmt.Errorf("%w: round at %v before the last one ended (it started at %v and ran until %v)", ErrInvalid, now, s.last.Start, s.lastEnd)
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("scheduler: round at %v: %w", now, err)
	}
	// Crediting the last round and the tiers' mechanisms may fail (a
	// policy's error, ctx cancelled during a solve): what they changed is
	// undone, so that a round that fails changes nothing (but the
	// estimator's refit and a claim it withdrew: its state, not the
	// scheduler's).
	s.checkpoint()
	stats, reported := s.stats, s.reported
	s.refreshLearned(now) // the learned rates, saved for undo
	if err := s.creditUnreported(now); err != nil {
		s.undo(stats, reported)
		return nil, err
	}
	s.stats = RoundStats{Start: now, Jobs: len(s.jobs)}
	if err := s.allocate(ctx, now); err != nil {
		s.undo(stats, reported)
		return nil, err
	}
	for _, t := range s.tiers {
		t.mech.Commit() // nothing fails after this
	}
	s.epoch++
	units := s.plan()
	s.releaseStale()
	s.place(units)
	units = s.refill(units, s.admitGangs(units))
	s.consolidate(units)
	s.grow(units)
	s.newSegments(units, now)
	r := s.publish(units, now)
	s.countExplore(units, r.Length)
	s.stats.AuditFailed, s.auditFailed = s.auditFailed, nil
	s.stats.Took = time.Since(t0)
	r.Stats = s.stats
	s.last = r
	s.lastEnd = now + r.Length
	s.reported = false
	s.roundsRun++
	s.log.Debug("round", "start", now, "jobs", s.stats.Jobs, "reset", s.stats.Reset, "placed", s.stats.Placed,
		"kept", s.stats.Kept, "moves", s.stats.Moves, "preemptions", s.stats.Preemptions, "unplaced", s.stats.Unplaced, "took", s.stats.Took)
	return r, nil
}

// checkpoint records what a round changes before it may fail: each
// tier's mechanism (allocation.Rounds.Checkpoint, in memory reused from
// round to round) and last round; creditUnreported records the attained
// times it changes.
func (s *Scheduler) checkpoint() {
	s.scratch.lasts = s.scratch.lasts[:0]
	s.scratch.solves = s.scratch.solves[:0]
	for _, t := range s.tiers {
		t.mech.Checkpoint()
		s.scratch.lasts = append(s.scratch.lasts, t.last)
		s.scratch.solves = append(s.scratch.solves, tierSolve{t.learned, t.solved})
	}
	s.scratch.credited = s.scratch.credited[:0]
}

// undo returns a round that failed to the state checkpoint recorded: the
// tiers' mechanisms and last rounds, the attained times and the report
// flag creditUnreported changed, the statistics.
func (s *Scheduler) undo(stats RoundStats, reported bool) {
	s.undoLearned()
	for i, t := range s.tiers {
		t.mech.Rollback()
		t.last = s.scratch.lasts[i]
		t.learned, t.solved = s.scratch.solves[i].learned, s.scratch.solves[i].solved
	}
	for _, c := range slices.Backward(s.scratch.credited) {
		if c.k >= 0 {
			c.j.attained[c.k] = c.attained
		}
		c.j.rounds = c.rounds
	}
	s.stats, s.reported = stats, reported
}

// allocate runs each tier's mechanism, highest priority first; a lower
// tier sees the capacity the tiers above leave.
func (s *Scheduler) allocate(ctx context.Context, now float64) error {
	s.refreshTypes()
	reserved := make([]int, len(s.types))
	for i, t := range s.tiers {
		if len(t.jobs) == 0 && s.cfg.Compat != allocation.CompatGavel {
			t.last = nil
			continue
		}
		s.stats.Tiers++
		s.buildProblem(t)
		for k, typ := range s.types {
			t.problem.Capacity[k] = max(0, s.st.Capacity(typ)-reserved[k])
		}
		t.problem.Now = now
		if t.learned && now-t.solved >= t.mech.EffectiveResetInterval() {
			t.mech.ForceReset() // learned rates that moved wait no longer
		}
		rd, err := t.mech.Next(ctx, &t.problem, now)
		if err != nil {
			return fmt.Errorf("scheduler: round at %v, priority %d: %w", now, t.priority, s.nameJob(t, err))
		}
		t.last = rd
		if rd.Reset {
			t.learned, t.solved = false, now
			s.stats.Reset = true
			s.stats.Solves++
			s.stats.SolveTime += rd.Stats.SolveTime
			if lp := rd.Stats.LP; lp != nil {
				s.stats.LPSolves += lp.Solves
				s.stats.LPIterations += lp.Iterations
				if lp.Nonzeros > s.stats.LPNonzeros {
					s.stats.LPRows, s.stats.LPColumns, s.stats.LPNonzeros = lp.Rows, lp.Columns, lp.Nonzeros
				}
			}
		}
		if s.lowerTierWaits(i) {
			t.reserved = s.reservedBy(rd.Allocation, t.reserved)
			for k := range reserved {
				reserved[k] += t.reserved[k]
			}
		}
	}
	return nil
}

// nameJob prefixes a problem's error with the key of the job it is about,
// when one job of the tier's problem fails validation on its own (the
// error itself names the job by its internal ID). The specs are checked
// at Submit, so this is a guard for what the checks miss.
func (s *Scheduler) nameJob(t *tier, err error) error {
	if !errors.Is(err, allocation.ErrInvalidProblem) {
		return err
	}
	p := &t.problem
	for m := range p.Jobs {
		one := allocation.Problem{Types: p.Types, Capacity: p.Capacity, Now: p.Now, Jobs: p.Jobs[m : m+1]}
		if one.Validate() != nil {
			if j := s.byID[p.Jobs[m].ID]; j != nil {
				return fmt.Errorf("job %q: %w", j.key, err)
			}
		}
	}
	return err
}

// lowerTierWaits reports whether a tier after the i-th has jobs.
func (s *Scheduler) lowerTierWaits(i int) bool {
	for _, t := range s.tiers[i+1:] {
		if len(t.jobs) > 0 {
			return true
		}
	}
	return false
}

// reservedBy returns the GPUs per type an allocation uses on average
// over the jobs still present, rounded up.
func (s *Scheduler) reservedBy(a *allocation.Allocation, out []int) []int {
	out = resize(out, len(s.types))
	use := make([]float64, len(s.types))
	if a != nil && len(a.Types) == len(s.types) {
		sf := func(i int) float64 {
			if j := s.byID[a.JobIDs[i]]; j != nil && j.spec.GPUs > 0 {
				return float64(j.spec.GPUs)
			}
			return 0 // gone since the allocation
		}
		for m, row := range a.X {
			f := sf(m)
			for k, x := range row {
				use[k] += x * f
			}
		}
		for _, pr := range a.Pairs {
			f := min(sf(pr.A), sf(pr.B))
			for k, x := range pr.X {
				use[k] += x * f
			}
		}
	}
	for k, u := range use {
		out[k] = int(math.Ceil(u - 1e-6))
	}
	return out
}

// buildProblem refreshes a tier's problem: the job list when it changed,
// the capacities and the clock every round.
func (s *Scheduler) buildProblem(t *tier) {
	p := &t.problem
	p.Types = s.types
	p.Capacity = resize(p.Capacity, len(s.types))
	p.EntityWeights = s.cfg.TenantWeights
	p.EntityQuotas = s.cfg.TenantQuotas
	if !t.dirty && len(p.Jobs) == len(t.jobs) {
		return
	}
	p.Jobs = resize(p.Jobs, len(t.jobs))
	for m, j := range t.jobs {
		j.pidx = m
		p.Jobs[m] = allocation.Job{
			ID: j.id, Weight: j.spec.Weight, ScaleFactor: j.spec.GPUs, RemainingSteps: j.spec.RemainingSteps,
			Throughput: j.rates, Deadline: j.spec.Deadline, Arrival: j.arrival, Entity: j.spec.Tenant,
		}
	}
	p.Pairs = nil
	if s.classes != nil {
		t.pairs = s.classes.view(t.jobs, t.pairs)
		p.Pairs = t.pairs
	}
	t.dirty = false
}

// pairHolder is the holder key of two jobs sharing GPUs: their keys,
// the earlier job's first, joined by a NUL byte; when that would be longer
// than cluster.MaxHolderLen (two keys of MaxKeyLen bytes), the later key
// is replaced by two NUL bytes and the hex SHA-256 of it. Job keys hold no
// NUL byte, so no two pairs, and no pair and a job, share a holder.
func pairHolder(a, b *job) string {
	if a.id > b.id {
		a, b = b, a
	}
	if len(a.key)+1+len(b.key) <= cluster.MaxHolderLen {
		return a.key + "\x00" + b.key
	}
	sum := sha256.Sum256([]byte(b.key))
	return a.key + "\x00\x00" + hex.EncodeToString(sum[:])
}

// plan turns the mechanism's assignments into units and extends the
// leases of units that run again as they ran: same holder, type and size.
func (s *Scheduler) plan() []unit {
	sc := &s.scratch
	sc.cur ^= 1
	units := sc.units[sc.cur][:0]
	// Elastic extras are decided afresh every round.
	for _, l := range s.leaseList {
		if len(l.extra) > 0 {
			_ = s.st.ReleaseGPUs(l.holder, l.extra)
			l.extra = l.extra[:0]
		}
	}
	for _, t := range s.tiers {
		if t.last == nil {
			continue
		}
		for _, as := range t.last.Assignments {
			u := unit{tier: t, typ: as.TypeIndex, tname: as.Type}
			u.jobs[0] = s.byID[as.JobIDs[0]]
			u.holder = u.jobs[0].key
			if len(as.JobIDs) == 2 {
				u.jobs[1] = s.byID[as.JobIDs[1]]
				u.holder = pairHolder(u.jobs[0], u.jobs[1])
			}
			u.gpus = u.jobs[0].spec.GPUs
			// A job's lease, when it has one, is the live lease of its
			// holder: the map is read only for other holders.
			l := u.jobs[0].lease
			if l == nil || l.holder != u.holder {
				l = s.leases[u.holder]
			}
			if l != nil && l.typ == u.typ && len(s.st.Held(u.holder)) == u.gpus {
				u.kept, u.placed = true, true
				l.epoch = s.epoch
			}
			units = append(units, u)
		}
	}
	s.stats.Assigned = len(units)
	sc.units[sc.cur] = units
	return units
}

// releaseStale releases the leases no unit of this round extends.
func (s *Scheduler) releaseStale() {
	for i := 0; i < len(s.leaseList); {
		if l := s.leaseList[i]; l.epoch != s.epoch {
			s.releaseLease(l.holder) // moves the last lease to i
			continue
		}
		i++
	}
}

// addLease records a lease whose GPUs are bound in the state.
func (s *Scheduler) addLease(l *lease) {
	s.leases[l.holder] = l
	l.pos = len(s.leaseList)
	s.leaseList = append(s.leaseList, l)
	for _, j := range l.jobs {
		if j != nil {
			j.lease = l
		}
	}
}

// releaseLease releases a holder's GPUs and forgets its lease.
func (s *Scheduler) releaseLease(holder string) {
	s.st.Release(holder)
	l := s.leases[holder]
	if l == nil {
		return
	}
	delete(s.leases, holder)
	last := s.leaseList[len(s.leaseList)-1]
	s.leaseList[l.pos] = last
	last.pos = l.pos
	s.leaseList = s.leaseList[:len(s.leaseList)-1]
	for _, j := range l.jobs {
		if j != nil && j.lease == l {
			j.lease = nil
			j.learn.segGPUs = 0 // its run is over: reports wait for the next
		}
	}
	*l = lease{extra: l.extra[:0]}
	s.freeLeases = append(s.freeLeases, l)
}

// newLease returns a lease from the pool.
func (s *Scheduler) newLease() *lease {
	if n := len(s.freeLeases); n > 0 {
		l := s.freeLeases[n-1]
		s.freeLeases = s.freeLeases[:n-1]
		return l
	}
	return &lease{}
}

// place gives GPUs to the units not kept, largest first (then in the
// mechanism's order), with the consolidated placer.
func (s *Scheduler) place(units []unit) {
	sc := &s.scratch
	sc.order = sc.order[:0]
	for i := range units {
		if !units[i].kept {
			sc.order = append(sc.order, i)
		}
	}
	slices.SortStableFunc(sc.order, func(a, b int) int { return cmp.Compare(units[b].gpus, units[a].gpus) })
	for _, i := range sc.order {
		u := &units[i]
		typ := s.types[u.typ]
		p := &s.placer
		if u.jobs[0].spec.SingleServer || u.jobs[1] != nil && u.jobs[1].spec.SingleServer {
			p = &s.single
		}
		var err error
		if sc.refs, err = p.PlaceOn(s.st, typ, u.gpus, sc.refs); err != nil || sc.refs == nil {
			if err != nil {
				s.log.Warn("place", "holder", u.holder, "err", err) // a bug: New checks the placer, units ask for GPUs
			}
			continue
		}
		if err := s.st.Bind(u.holder, sc.refs); err != nil {
			s.log.Warn("bind", "holder", u.holder, "err", err) // a bug: the placer offered GPUs not free
			continue
		}
		l := s.newLease()
		l.holder, l.jobs, l.typ, l.typeName, l.epoch = u.holder, u.jobs, u.typ, typ, s.epoch
		s.addLease(l)
		u.placed = true
		u.moved = u.jobs[0].unit != nil || u.jobs[1] != nil && u.jobs[1].unit != nil // it ran last round elsewhere
	}
}

// admitGangs drops every gang some of whose jobs do not run this round,
// and returns the GPUs per type it frees (nil when it drops none).
func (s *Scheduler) admitGangs(units []unit) []int {
	var running map[string]int
	for i := range units {
		for _, j := range units[i].jobs {
			if j != nil && j.spec.Gang != "" && units[i].placed {
				if running == nil {
					running = map[string]int{}
				}
				running[j.spec.Gang]++
			}
		}
	}
	if running == nil {
		return nil
	}
	dropped := map[string]bool{}
	for g, n := range running {
		members := 0
		for _, m := range s.gangs[g] {
			if m.inTier {
				members++
			}
		}
		if n < members {
			dropped[g] = true
		}
	}
	if len(dropped) == 0 {
		return nil
	}
	freed := make([]int, len(s.types))
	for i := range units {
		u := &units[i]
		if !u.placed {
			continue
		}
		for _, j := range u.jobs {
			if j != nil && dropped[j.spec.Gang] {
				freed[u.typ] += len(s.st.Held(u.holder))
				s.releaseLease(u.holder)
				u.placed, u.kept, u.moved = false, false, false
				break
			}
		}
	}
	for g := range dropped {
		for _, m := range s.gangs[g] {
			s.waits(m, ReasonGang)
		}
	}
	s.stats.GangsDropped = len(dropped)
	return freed
}

// refill is the rule of progress with gangs: when gang admission dropped
// a gang, the GPUs left free go to the jobs that wait (a dropped gang's
// included), so that no GPU a waiting job or gang could use stays idle
// because a gang was dropped. The jobs and gangs that wait are taken in
// order of priority (a gang's highest), then of least attained service,
// arrival and ID (of a gang's first job in that order); each job goes to
// the fastest type it may run on where the placer finds it room (its own
// server only, for a SingleServer job), largest job of a gang first; a
// gang is placed whole or not at all. With LeaveIdle, only as many GPUs
// of each type as the dropped gangs freed are given. It returns the units
// with those it placed (a job the mechanism chose keeps its unit).
func (s *Scheduler) refill(units []unit, freed []int) []unit {
	if freed == nil {
		return units
	}
	budget := freed
	if !s.cfg.LeaveIdle {
		budget = make([]int, len(s.types))
		for k, t := range s.types {
			budget[k] = s.st.Free(t)
		}
	}
	running := make(map[*job]bool, len(units))
	single := make(map[*job]int) // the job's unplaced unit of its own
	for i := range units {
		u := &units[i]
		for _, j := range u.jobs {
			if j != nil && u.placed {
				running[j] = true
			}
		}
		if !u.placed && u.jobs[1] == nil {
			single[u.jobs[0]] = i
		}
	}
	// The groups that wait: jobs alone, and gangs (after gang admission a
	// gang runs whole or not at all).
	var groups [][]*job
	byGang := map[string]int{}
	for _, j := range s.order {
		if !j.inTier || running[j] {
			continue
		}
		if g := j.spec.Gang; g != "" {
			if i, ok := byGang[g]; ok {
				groups[i] = append(groups[i], j)
				continue
			}
			byGang[g] = len(groups)
		}
		groups = append(groups, []*job{j})
	}
	for _, g := range groups {
		slices.SortFunc(g, refillOrder)
	}
	slices.SortStableFunc(groups, func(a, b []*job) int { return refillOrder(a[0], b[0]) })
	type placed struct {
		j    *job
		k    int
		refs []cluster.GPURef
	}
	var got []placed
	for _, g := range groups {
		members := slices.SortedStableFunc(slices.Values(g), func(a, b *job) int { return cmp.Compare(b.spec.GPUs, a.spec.GPUs) })
		got = got[:0]
		for _, j := range members {
			k, refs := s.refillPlace(j, budget)
			if refs == nil {
				break
			}
			if err := s.st.Bind(j.key, refs); err != nil {
				s.log.Warn("bind", "holder", j.key, "err", err) // a bug: the placer offered GPUs not free
				break
			}
			budget[k] -= len(refs)
			got = append(got, placed{j, k, refs})
		}
		if len(got) < len(members) {
			for _, p := range got { // the gang does not fit whole
				s.st.Release(p.j.key)
				budget[p.k] += len(p.refs)
			}
			continue
		}
		for _, p := range got {
			j := p.j
			i, ok := single[j]
			if !ok {
				units = append(units, unit{jobs: [2]*job{j, nil}, holder: j.key, tier: j.tier})
				i = len(units) - 1
			}
			u := &units[i]
			u.typ, u.tname, u.gpus, u.placed, u.kept = p.k, s.types[p.k], j.spec.GPUs, true, false
			u.moved = j.unit != nil // it ran last round elsewhere
			l := s.newLease()
			l.holder, l.jobs, l.typ, l.typeName, l.epoch = j.key, u.jobs, p.k, s.types[p.k], s.epoch
			s.addLease(l)
			s.stats.Refilled++
		}
	}
	s.scratch.units[s.scratch.cur] = units
	return units
}

// refillOrder orders waiting jobs for refill: higher priority, then less
// attained service, then earlier arrival, then lower ID.
func refillOrder(a, b *job) int {
	return cmp.Or(cmp.Compare(b.spec.Priority, a.spec.Priority), cmp.Compare(sum(a.attained), sum(b.attained)),
		cmp.Compare(a.arrival, b.arrival), cmp.Compare(a.id, b.id))
}

func sum(v []float64) float64 {
	t := 0.0
	for _, x := range v {
		t += x
	}
	return t
}

// refillPlace finds a job room on the fastest type it may run on that
// has room within the budget; it returns the type and the GPUs, or nil.
func (s *Scheduler) refillPlace(j *job, budget []int) (int, []cluster.GPURef) {
	p := &s.placer
	if j.spec.SingleServer {
		p = &s.single
	}
	tried := make([]bool, len(s.types))
	for {
		best := -1
		for k := range s.types {
			if !tried[k] && j.rates[k] > 0 && budget[k] >= j.spec.GPUs && (best < 0 || j.rates[k] > j.rates[best]) {
				best = k
			}
		}
		if best < 0 {
			return -1, nil
		}
		tried[best] = true
		refs, err := p.PlaceOn(s.st, s.types[best], j.spec.GPUs, nil)
		if err != nil {
			s.log.Warn("place", "holder", j.key, "err", err) // a bug: New checks the placer
			continue
		}
		if refs != nil {
			return best, refs
		}
	}
}

// waits records why a job waits in this round, the most telling reason
// kept: its gang, then the loss of its GPUs, then no room, then no
// capacity.
func (s *Scheduler) waits(j *job, r Reason) {
	if j.waitRound != s.epoch || waitRank(r) > waitRank(j.wait) {
		j.wait, j.waitRound = r, s.epoch
	}
}

func waitRank(r Reason) int {
	switch r {
	case ReasonGang:
		return 4
	case ReasonPreempted:
		return 3
	case ReasonNoRoom:
		return 2
	case ReasonNoCapacity:
		return 1
	}
	return 0
}

// consolidate moves kept multi-server units to fewer servers when that
// gains more than the migration cost.
func (s *Scheduler) consolidate(units []unit) {
	cost := s.migrationCost()
	if cost < 0 {
		return
	}
	sc := &s.scratch
	for i := range units {
		u := &units[i]
		if !u.kept || u.gpus < 2 {
			continue
		}
		held := s.st.Held(u.holder)
		span := servers(held)
		if span < 2 {
			continue
		}
		gain := s.spreadPenalty() * s.horizon(u)
		if float64(span-1)*gain <= cost {
			continue // even one server would not pay
		}
		sc.old = append(sc.old[:0], held...)
		s.st.Release(u.holder)
		p := &s.placer
		if u.jobs[0].spec.SingleServer {
			p = &s.single
		}
		var err error
		if sc.refs, err = p.PlaceOn(s.st, s.types[u.typ], u.gpus, sc.refs); err != nil {
			s.log.Warn("place", "holder", u.holder, "err", err) // a bug, as above: the job stays
			sc.refs = nil
		}
		refs := sc.old
		if sc.refs != nil && float64(span-servers(sc.refs))*gain > cost {
			refs = sc.refs
			u.kept, u.moved = false, true
		}
		if err := s.st.Bind(u.holder, refs); err != nil {
			s.log.Warn("rebind", "holder", u.holder, "err", err)
		}
	}
}

// horizon is the time over which a move pays: the shorter of a round and
// the unit's remaining time at its rate.
func (s *Scheduler) horizon(u *unit) float64 {
	h := s.roundLength()
	j := u.jobs[0]
	if r := j.rates[u.typ]; r > 0 && j.spec.RemainingSteps > 0 {
		h = min(h, j.spec.RemainingSteps/r)
	}
	return h
}

// servers counts the distinct servers of a set of GPUs.
func servers(refs []cluster.GPURef) int {
	n := 0
	for i, r := range refs {
		seen := false
		for _, q := range refs[:i] {
			if q.Server == r.Server {
				seen = true
				break
			}
		}
		if !seen {
			n++
		}
	}
	return n
}

// grow shares the GPUs left after the round among the running elastic
// jobs of each type, by Lyra's multiple-choice knapsack over linear
// scaling (elastic.ScalingItems): each extra GPU is worth the running time
// it saves.
func (s *Scheduler) grow(units []unit) {
	var byType map[int][]int
	for i := range units {
		u := &units[i]
		if u.placed && u.jobs[1] == nil && u.jobs[0].spec.maxGPUs() > u.gpus {
			if byType == nil {
				byType = map[int][]int{}
			}
			byType[u.typ] = append(byType[u.typ], i)
		}
	}
	for k, idx := range byType {
		typ := s.types[k]
		free := s.st.Free(typ)
		if free == 0 {
			continue
		}
		groups := make([][]elastic.Item, len(idx))
		for g, i := range idx {
			u := &units[i]
			j := u.jobs[0]
			wMax := min(j.spec.maxGPUs(), u.gpus+free)
			base := s.roundLength() // unknown work: value GPUs alike
			if r := j.rates[k]; r > 0 && j.spec.RemainingSteps > 0 {
				base = j.spec.RemainingSteps / r
			}
			items, err := elastic.ScalingItems(u.gpus, wMax, 1, base*float64(u.gpus)/float64(wMax))
			if err == nil {
				groups[g] = items
			}
		}
		choice, _, err := elastic.MultipleChoiceKnapsack(groups, free)
		if err != nil {
			s.log.Warn("elastic knapsack", "type", typ, "err", err)
			continue
		}
		for g, c := range choice {
			if c < 0 {
				continue
			}
			u := &units[idx[g]]
			u.extra = s.growUnit(u, typ, groups[g][c].Weight)
			s.stats.ElasticGPUs += u.extra
		}
	}
}

// growUnit binds up to n extra GPUs of type typ to a unit, on its own
// servers first, and returns how many it bound.
func (s *Scheduler) growUnit(u *unit, typ topology.GPUType, n int) int {
	l := s.leases[u.holder]
	sc := &s.scratch
	sc.refs = sc.refs[:0]
	for _, r := range s.st.Held(u.holder) {
		if len(sc.refs) == n {
			break
		}
		if containsServer(sc.refs, r.Server) {
			continue
		}
		srv := s.st.Server(r.Server)
		for i, free := range s.st.FreeMask(r.Server) {
			if free && srv.GPUs[i].Type == typ && len(sc.refs) < n {
				sc.refs = append(sc.refs, cluster.GPURef{Server: r.Server, GPU: i})
			}
		}
	}
	if len(sc.refs) < n {
		local := len(sc.refs)
		if err := s.st.Bind(u.holder, sc.refs); err != nil {
			return 0
		}
		l.extra = append(l.extra[:0], sc.refs...)
		if u.jobs[0].spec.SingleServer {
			return local // its own server only
		}
		more, err := s.placer.PlaceOn(s.st, typ, n-local, nil)
		if err == nil && more != nil && s.st.Bind(u.holder, more) == nil {
			l.extra = append(l.extra, more...)
		}
		return len(l.extra)
	}
	if err := s.st.Bind(u.holder, sc.refs); err != nil {
		return 0
	}
	l.extra = append(l.extra[:0], sc.refs...)
	return n
}

func containsServer(refs []cluster.GPURef, s int) bool {
	for _, r := range refs {
		if r.Server == s {
			return true
		}
	}
	return false
}

// fates appends the fate of every job that does not run in this round,
// in order of submission, and records why each waits.
func (s *Scheduler) fates(dst []JobFate) []JobFate {
	dst = slices.Grow(dst, len(s.order)-len(s.ranBefore)) // at most the jobs that do not run
	for _, j := range s.order {
		switch {
		case j.finished || j.unit != nil:
			continue
		case j.unrun != NoReason:
			dst = append(dst, JobFate{Job: j.key, State: Unrunnable, Reason: j.unrun})
			continue
		}
		s.waits(j, ReasonNoCapacity)
		dst = append(dst, JobFate{Job: j.key, State: Waiting, Reason: j.wait})
	}
	return dst
}

// publish builds the round's answer and moves the jobs' pointers to this
// round's units.
func (s *Scheduler) publish(units []unit, now float64) *Round {
	r := &Round{}
	if s.cfg.ReuseRounds && s.last != nil {
		r = s.last
	}
	*r = Round{Start: now, Length: s.roundLength(), Reset: s.stats.Reset, Assignments: r.Assignments[:0], Waiting: r.Waiting[:0]}
	placed, gpus, njobs := 0, 0, 0
	for i := range units {
		if units[i].placed {
			placed++
			gpus += units[i].gpus + units[i].extra
			njobs += 2
		}
	}
	// The assignments, their devices and their jobs' keys in one block
	// each (with ReuseRounds, those of the last round).
	sc := &s.scratch
	var devs []Device
	var keys []string
	if s.cfg.ReuseRounds {
		r.Assignments = slices.Grow(r.Assignments, placed)
		devs = slices.Grow(sc.devs[:0], gpus)
		keys = slices.Grow(sc.keys[:0], njobs)
	} else {
		r.Assignments = make([]Assignment, 0, placed)
		devs = make([]Device, 0, gpus)
		keys = make([]string, 0, njobs)
	}
	prev := s.ranBefore
	for _, j := range prev {
		j.unit = nil
	}
	s.ranBefore = slices.Grow(s.scratch.ranSpare[:0], njobs) // prev's is the other buffer
	for i := range units {
		u := &units[i]
		if !u.placed {
			s.stats.Unplaced++
			continue
		}
		s.stats.Placed++
		if u.kept {
			s.stats.Kept++
		}
		as := Assignment{Type: s.types[u.typ], Kept: u.kept, Extra: u.extra}
		start := len(keys)
		for _, j := range u.jobs {
			if j == nil {
				continue
			}
			if u.moved {
				s.stats.Moves++
			}
			j.unit = u
			keys = append(keys, j.key)
			s.ranBefore = append(s.ranBefore, j)
		}
		as.Jobs = keys[start:len(keys):len(keys)]
		d0 := len(devs)
		devs = s.devices(s.st.Held(u.holder), devs)
		as.Devices = devs[d0:len(devs):len(devs)]
		r.Assignments = append(r.Assignments, as)
	}
	for _, j := range prev {
		if j.unit == nil && s.jobs[j.key] == j && !j.finished {
			r.Preempted = append(r.Preempted, j.key)
			s.waits(j, ReasonPreempted)
		}
	}
	for i := range units {
		if u := &units[i]; !u.placed {
			for _, j := range u.jobs {
				if j != nil {
					s.waits(j, ReasonNoRoom)
				}
			}
		}
	}
	r.Waiting = s.fates(r.Waiting[:0])
	for _, j := range s.order {
		if j.finished && !j.announced {
			j.announced = true
			r.Finished = append(r.Finished, j.key)
		}
	}
	slices.Sort(r.Finished)
	clear(prev)
	s.scratch.ranSpare = prev
	if s.cfg.ReuseRounds {
		sc.devs, sc.keys = devs, keys
	}
	slices.Sort(r.Preempted)
	s.stats.Preemptions = len(r.Preempted)
	for _, t := range s.types {
		s.stats.BusyGPUs += s.st.Capacity(t) - s.st.Free(t)
		s.stats.HealthyGPUs += s.st.Capacity(t)
	}
	return r
}
