package scheduler

import (
	"cmp"
	"errors"
	"fmt"
	"iter"
	"math"
	"slices"

	"github.com/gpusched/gpusched/allocation"
	"github.com/gpusched/gpusched/perfmodel/learn"
	"github.com/gpusched/gpusched/topology"
)

// Explore bounds how the scheduler explores the GPU types of jobs whose
// rates it learns (JobSpec.Learn, Config.Estimator), and when their
// estimates re-solve the policy (issue #41). The zero value means the
// defaults. A plain value, safe for concurrent reads.
//
// A learned job's rate on a type is its estimate's median, exp(LogMean)
// (learn.Estimate.Rate at the job's GPUs). On a type where the job is not
// measured, and only where the decision could change, it is optimistic:
// exp(LogMean + Sigmas x Sigma), the upper confidence bound of UCB1
// (Auer, Cesa-Bianchi and Fischer, 2002) as a bandit would explore. The
// decision could change where that bound is above the job's best rate on
// a type it was measured on (or it has none): measuring the type may make
// it the job's best; below, the policy would move the job there no more
// than its prior says already. Exploration is bounded: while the GPU time
// the rounds planned for jobs on types they were optimistic about is
// above Budget of the cluster's GPU time so far, every learned rate is a
// median. A round reports what it planned to explore
// (RoundStats.Exploring, ExploredGPUSeconds).
type Explore struct {
	// Budget is the most of the cluster's GPU time (healthy GPUs x round
	// length, summed over the rounds) planned for exploration: 0 means
	// 0.05, a negative value none (medians only); at most 1.
	Budget float64
	// Sigmas is how far above the median, in posterior sigmas of the log
	// rate, an optimistic rate sits: 0 means 1; at most 10.
	Sigmas float64
	// Resolve is the relative change of a learned rate (up or down) that
	// updates the rates the policy sees: 0 means 0.1; at most 10. Smaller
	// changes leave them as they are (no churn from noise). An update
	// takes effect at the policy's next solve (jobs come or go), at the
	// latest MinResetInterval after its last one, and at the next round
	// when a rate changed by a factor of 2 or more, or to or from 0.
	Resolve float64
	// Refit is the least time between two refits of the estimator's
	// population (learn.Estimator.Refresh), in seconds on the clock of
	// the rounds: 0 means 1,800 (5 rounds of 360 s); negative: every
	// round; at most allocation.MaxTime. With an estimator that versions
	// its estimates (learn.Learner.Version), it is also the most time a
	// changed job's rates go unread once it has run on every type it
	// will: they are read again at the round after it first runs on a
	// type, and otherwise once its version changed and its last read is
	// Refit old (a version that follows the estimator's tolerance does
	// not change for what moved less); what other jobs measured counts at
	// the next refit.
	Refit float64
	// Normalise divides each learned job's rates by its fastest one, so
	// that the policies see the shape of its rates, never their scale:
	// what its reports say of its speed against other jobs'. Policies
	// that add rates across jobs (allocation.MaxThroughput, cost,
	// makespan) otherwise give more to a job that inflates every report
	// (issue #41: x3 inflated reports cut a liar's mean JCT by 30% under
	// max throughput); the fair ones normalise already. The controllers'
	// claims are normalised alike (kube/tenancy's MaxRatio).
	Normalise bool
	// Audit is the slack of the conservation audit of the jobs that
	// declare their work (JobSpec.TotalSteps): a job whose reports add up
	// (each run's last steps less its first, over its runs) to more than
	// TotalSteps times 1+Audit, or, once its known work is done
	// (RemainingSteps counted down to 0), to less than TotalSteps times
	// 1-Audit, fails it: its measurements leave the population and its
	// group (learn.JobInfo.Private), so that what it misreported moves no
	// other job's prior, and JobStatus.Audit and RoundStats.AuditFailed
	// say so. Work done again after a restart from a checkpoint counts
	// twice (the slack covers up to that much). 0 means 0.1; negative:
	// no audit; at most 1.
	Audit float64
	// Probe tries every type a learned job may run on, once, Sia's way
	// (Jayaram Subramanya et al., SOSP 2023, section 4.1: each job is
	// profiled on every GPU type at submission) rather than only where
	// the decision could change: while a job has a type it was not
	// measured on, its rate there is optimistic and above its best
	// measured one (twice it), so that the policy runs it there; a
	// round's run measures it (past the warm-up), and the job moves on to
	// the next. Within Budget, as all exploration.
	Probe bool
}

// Defaults of Explore.
const (
	DefaultExploreBudget  = 0.05
	DefaultExploreSigmas  = 1.0
	DefaultExploreResolve = 0.1
	DefaultExploreRefit   = 1800.0
	DefaultExploreAudit   = 0.1
)

func (e Explore) validate() error {
	for _, f := range []struct {
		name string
		v    float64
		most float64
	}{{"Budget", e.Budget, 1}, {"Sigmas", e.Sigmas, 10}, {"Resolve", e.Resolve, 10}, {"Refit", e.Refit, allocation.MaxTime}, {"Audit", e.Audit, 1}} {
		signed := f.name == "Budget" || f.name == "Refit" || f.name == "Audit"
		if math.IsNaN(f.v) || f.v > f.most || f.v < 0 && !signed || f.v < -1 && (f.name == "Budget" || f.name == "Audit") || f.v < -allocation.MaxTime {
			return fmt.Errorf("%w: Config.Explore.%s %v (want 0 for the default, or up to %g)", ErrInvalid, f.name, f.v, f.most)
		}
	}
	return nil
}

// orDefault reads a setting where 0 means def and a negative value none.
func orDefault(v, def float64) float64 {
	switch {
	case v == 0:
		return def
	case v < 0:
		return 0
	}
	return v
}

func (e Explore) budget() float64 { return orDefault(e.Budget, DefaultExploreBudget) }

// audit is the audit's slack; 0 without an audit.
func (e Explore) audit() float64 { return orDefault(e.Audit, DefaultExploreAudit) }

func (e Explore) sigmas() float64 {
	if e.Sigmas == 0 {
		return DefaultExploreSigmas
	}
	return e.Sigmas
}

func (e Explore) refit() float64 {
	if e.Refit == 0 {
		return DefaultExploreRefit
	}
	return max(e.Refit, 0)
}

func (e Explore) resolve() float64 {
	if e.Resolve == 0 {
		return DefaultExploreResolve
	}
	return e.Resolve
}

// learnState is a learned job's part of the scheduler: the rates the
// rounds see (per scheduler type, as raw), which of them are optimistic,
// and the segment its progress reports fall in.
type learnState struct {
	rates      []float64
	optimistic []bool
	// ver is the estimator's Version of the job when its rates were
	// read (0: not read), at readAt, when it had run on readTypes of
	// the types ran, with explore the budget's answer then.
	ver       uint64
	readAt    float64
	readTypes int
	ran       []topology.GPUType
	explore   bool
	// est are the estimates read then (their rates are computed again
	// from them when only the budget's answer changed); pending marks a
	// job in Scheduler.pending.
	est     []learn.Estimate
	pending bool
	// withdrawn are the types whose claims were withdrawn: the job ran
	// there a whole round and reported nothing the estimator measured.
	withdrawn []topology.GPUType
	// segment numbers the job's uninterrupted runs (a new lease, a move,
	// another GPU count); segStart is when the current one started and
	// segGPUs and segType its GPUs (0: none, its lease released) and
	// their type.
	segment  uint64
	segStart float64
	segGPUs  int
	segType  topology.GPUType
	// reported is the work the job's reports add up to (each segment's
	// last steps less its first); last is its latest report's steps, in
	// segment lastSeg (0: none yet); audit the conservation audit's
	// verdict (Explore.Audit).
	reported float64
	last     float64
	lastSeg  uint64
	audit    Audit
}

// register declares a learned job to the estimator: its reference GPU
// count, its kind (Model), its group, its tenant's claims (Throughput)
// and, when it failed the audit (private), that its measurements stay
// out of the population.
func (s *Scheduler) register(key string, spec JobSpec, withdrawn []topology.GPUType, private bool) error {
	if !spec.Learn {
		return nil
	}
	info := learn.JobInfo{GPUs: spec.GPUs, Kind: spec.Model, Group: spec.Group, Private: private}
	for t, v := range spec.Throughput {
		if !slices.Contains(withdrawn, t) {
			if info.Claims == nil {
				info.Claims = make(map[topology.GPUType]float64, len(spec.Throughput))
			}
			info.Claims[t] = v
		}
	}
	if err := s.cfg.Estimator.Register(key, info); err != nil {
		return fmt.Errorf("%w: job %q: the estimator refused it: %w", ErrInvalid, key, err)
	}
	return nil
}

// learnRates computes a learned job's rates from the estimator into
// j.learn (see Explore); explore tells whether the budget allows
// optimism. It reports whether they moved beyond Explore.Resolve (or
// between 0 and not 0) from those it had, and whether by forceFactor or
// more (or from none).
func (s *Scheduler) learnRates(j *job, explore bool, buf []learn.Estimate) ([]learn.Estimate, bool, bool) {
	buf = s.cfg.Estimator.Estimates(j.key, buf[:0])
	j.learn.est = append(j.learn.est[:0], buf...)
	moved, force := s.ratesFrom(j, explore, buf)
	return buf, moved, force
}

// ratesFrom computes a learned job's rates from its estimates est into
// j.learn, as learnRates; est may be changed.
func (s *Scheduler) ratesFrom(j *job, explore bool, buf []learn.Estimate) (moved, force bool) {
	ls := &j.learn
	n := len(s.types)
	old := ls.rates
	if len(old) != n {
		old = nil
	}
	if s.silent(j, buf) {
		buf = buf[:0] // type-agnostic: 1 on every type (below)
	}
	byType := func(t topology.GPUType) (learn.Estimate, bool) {
		for _, e := range buf {
			if e.Type == t {
				return e, e.Source != learn.SourceNone
			}
		}
		return learn.Estimate{}, false
	}
	// The job's best measured rate, and the mean of what it knows: the
	// rate of a type it knows nothing about (none known: 1 on every
	// type, type-agnostic).
	best, sum, known := 0.0, 0.0, 0
	for _, t := range s.types {
		if e, ok := byType(t); ok && j.allows(t) {
			if e.Source == learn.SourceMeasured || e.Source == learn.SourceGroup {
				best = max(best, e.Rate(j.spec.GPUs))
			}
			sum += math.Log(e.Rate(j.spec.GPUs))
			known++
		}
	}
	fallback := 1.0
	if known > 0 {
		fallback = math.Exp(sum / float64(known))
	}
	sc := &s.scratch
	sc.learnRates, sc.learnOpt = resize(sc.learnRates, n), resize(sc.learnOpt, n)
	rates, opt := sc.learnRates, sc.learnOpt
	clear(rates)
	clear(opt)
	k := s.cfg.Explore.sigmas()
	for i, t := range s.types {
		if !j.allows(t) {
			continue
		}
		e, ok := byType(t)
		if !ok {
			rates[i] = clampRate(fallback)
			continue
		}
		v := e.Rate(j.spec.GPUs)
		if !(v > 0 && v < math.Inf(1)) || math.IsNaN(e.Sigma) {
			rates[i] = clampRate(fallback) // not a number: as if unknown
			continue
		}
		if explore && e.Source != learn.SourceMeasured && e.Source != learn.SourceGroup {
			up := v * math.Exp(k*e.Sigma)
			switch {
			case s.cfg.Explore.Probe && best > 0:
				v, opt[i] = max(up, 2*best), true
			case best == 0 || up > best:
				v, opt[i] = up, true
			}
		}
		rates[i] = clampRate(v)
	}
	if s.cfg.Explore.Normalise {
		if top := slices.Max(rates); top > 0 {
			for i, v := range rates {
				if v > 0 {
					rates[i] = clampRate(v / top)
				}
			}
		}
	}
	moved, force = old == nil, old == nil
	if !moved {
		limit := math.Log1p(s.cfg.Explore.resolve())
		for i := range rates {
			switch {
			case (rates[i] == 0) != (old[i] == 0):
				moved, force = true, true
			case rates[i] > 0:
				d := math.Abs(math.Log(rates[i] / old[i]))
				moved = moved || d > limit
				force = force || d >= math.Ln2
			}
		}
	}
	if moved {
		ls.rates = append(resize(ls.rates, 0), rates...)
		ls.optimistic = append(resize(ls.optimistic, 0), opt...)
	} else {
		copy(ls.optimistic, opt) // optimism may change with the budget alone
	}
	return moved, force
}

// silent reports whether a learned job has run a whole round and has
// been measured on no type (est its estimates): it does not report its
// progress, and its rates are type-agnostic, 1 on every type, as a job
// that does not learn with no rates of its own; not the population's
// prior, which would rate a job that never shows what it does as the
// median job (issue #41's review: a silent job outran measured ones
// under throughput maximisation).
func (s *Scheduler) silent(j *job, est []learn.Estimate) bool {
	if sum(j.attained) < s.roundLength() {
		return false
	}
	for _, e := range est {
		if e.Source == learn.SourceMeasured {
			return false
		}
	}
	return true
}

// clampRate keeps a learned rate in the policies' range.
func clampRate(v float64) float64 {
	return min(max(v, allocation.MinRate), allocation.MaxRate)
}

// refitState is when the estimator was last refitted, for undo.
type refitState struct {
	done bool
	at   float64
}

// savedLearn is a learned job's state before a round read its rates, and
// its tier's dirty flag then, for undo.
type savedLearn struct {
	j     *job
	st    learnState
	dirty bool
}

// savedCheck is a learned job's readAt before a round found its version
// unchanged, for undo.
type savedCheck struct {
	j  *job
	at float64
}

// clone copies a learnState, its slices too.
func (ls learnState) clone() learnState {
	ls.rates, ls.optimistic, ls.est = slices.Clone(ls.rates), slices.Clone(ls.optimistic), slices.Clone(ls.est)
	ls.ran, ls.withdrawn = slices.Clone(ls.ran), slices.Clone(ls.withdrawn)
	return ls
}

// undoLearned returns the learned jobs a failed round read to what they
// were before it (their withdrawn claims stay: the estimator's), and
// their rates with them.
func (s *Scheduler) undoLearned() {
	sc := &s.scratch
	for _, sv := range slices.Backward(sc.learnSaved) {
		withdrawn, pending := sv.j.learn.withdrawn, sv.j.learn.pending
		sv.j.learn = sv.st
		sv.j.learn.withdrawn, sv.j.learn.pending = withdrawn, pending
		s.markLearn(sv.j) // looked at again at the next round
		_ = s.ratesFor(sv.j)
		if sv.j.inTier {
			sv.j.tier.dirty = sv.j.tier.dirty || sv.dirty
		}
	}
	sc.learnSaved = sc.learnSaved[:0]
	for _, c := range slices.Backward(sc.checkSaved) {
		c.j.learn.readAt = c.at
	}
	sc.checkSaved = sc.checkSaved[:0]
	s.refitted, s.lastRefit = sc.refitSaved.done, sc.refitSaved.at
	s.feed = sc.feedSaved
}

// versioner is an estimator that tells when a job's estimates may have
// changed (learn.Learner.Version): a job whose version and exploration
// budget did not change keeps its rates without reading its estimates.
type versioner interface{ Version(job string) uint64 }

// changer is an estimator that lists the jobs whose versions changed
// (learn.Learner.Changed): a round then looks only at those, the jobs
// that ran on a new type, and the jobs still waiting for their read.
type changer interface {
	Changed(since uint64, dst []string) ([]string, uint64, bool)
}

// feedState is where the rounds stand with a changer: its clock at the
// last round and the budget's answer then, for undo.
type feedState struct {
	clock   uint64
	explore bool
}

// refreshLearned is a round's first step with an estimator: the
// population refit (Refresh, at most every Explore.Refit seconds), then
// every learned job's rates (those whose estimates may have changed),
// each tier with a job whose rates moved beyond Explore.Resolve solving
// again. With an estimator that lists its changes (changer), it looks
// at the jobs whose version changed, ran on a new type or wait for their
// read (every job when the budget's answer changed): O(those jobs), not
// O(learned jobs).
func (s *Scheduler) refreshLearned(now float64) {
	if s.cfg.Estimator == nil || s.learned == 0 {
		return
	}
	sc := &s.scratch
	sc.learnSaved, sc.refitSaved = sc.learnSaved[:0], refitState{s.refitted, s.lastRefit}
	sc.checkSaved = sc.checkSaved[:0]
	sc.feedSaved = s.feed
	if !s.refitted || now-s.lastRefit >= s.cfg.Explore.refit() {
		s.cfg.Estimator.Refresh()
		s.refitted, s.lastRefit = true, now
	}
	explore := s.exploreLeft()
	vs, _ := s.cfg.Estimator.(versioner)
	ch, _ := s.cfg.Estimator.(changer)
	jobs := s.order
	if ch != nil && vs != nil {
		var all bool
		sc.changed, s.feed.clock, all = ch.Changed(s.feed.clock, sc.changed[:0])
		if !all && explore == s.feed.explore {
			for _, key := range sc.changed {
				if j := s.jobs[key]; j != nil {
					s.markLearn(j)
				}
			}
			jobs = s.takePending()
		} else {
			s.dropPending()
		}
		s.feed.explore = explore
	}
	buf := s.scratch.estimates
	for _, j := range jobs {
		if !j.spec.Learn || j.finished || s.jobs[j.key] != j {
			continue
		}
		var wait bool
		buf, wait = s.learnJob(j, now, explore, vs, buf)
		if wait && ch != nil && vs != nil {
			s.markLearn(j)
		}
	}
	s.scratch.estimates = buf
}

// markLearn notes a learned job to look at in the next round (with a
// changer): its version changed, it ran on a new type, or it waits for
// its read.
func (s *Scheduler) markLearn(j *job) {
	if !j.learn.pending && j.spec.Learn {
		j.learn.pending = true
		s.pending = append(s.pending, j)
	}
}

// takePending returns the jobs marked by markLearn, in the order of the
// jobs (by ID), and unmarks them.
func (s *Scheduler) takePending() []*job {
	sc := &s.scratch
	sc.pending = append(sc.pending[:0], s.pending...)
	s.dropPending()
	slices.SortFunc(sc.pending, func(a, b *job) int { return cmp.Compare(a.id, b.id) })
	return sc.pending
}

// dropPending unmarks every job.
func (s *Scheduler) dropPending() {
	for _, j := range s.pending {
		j.learn.pending = false
	}
	s.pending = s.pending[:0]
}

// learnJob reads a learned job's estimates where they may have changed:
// always without versions; else where its version moved and it ran on a
// new type or was last read (or found unchanged) Refit ago (the version
// asked only then). Where only the budget's answer changed, its rates are
// computed again from the estimates it read. It reports whether it waits
// for a read that is not due yet.
func (s *Scheduler) learnJob(j *job, now float64, explore bool, vs versioner, buf []learn.Estimate) ([]learn.Estimate, bool) {
	sc := &s.scratch
	ls := &j.learn
	read := vs == nil || ls.ver == 0
	var v uint64
	due := len(ls.ran) != ls.readTypes || now-ls.readAt >= s.cfg.Explore.refit()
	if !read && due {
		v = vs.Version(j.key)
		read = v == 0 || v != ls.ver
		if !read && len(ls.ran) == ls.readTypes {
			sc.checkSaved = append(sc.checkSaved, savedCheck{j, ls.readAt})
			ls.readAt = now // as current as a read now
		}
	}
	wait := !read && !due
	if !read && explore != ls.explore && ls.est == nil {
		read = true // no estimates kept (a restored scheduler)
	}
	if !read && explore == ls.explore {
		return buf, wait
	}
	sc.learnSaved = append(sc.learnSaved, savedLearn{j, ls.clone(), j.tier.dirty})
	var moved, force bool
	if !read {
		// Only the budget's answer changed: the same estimates,
		// optimistic or not.
		ls.explore = explore
		buf = append(buf[:0], ls.est...)
		moved, force = s.ratesFrom(j, explore, buf)
	} else {
		if vs != nil {
			if v == 0 {
				v = vs.Version(j.key)
			}
			ls.ver, ls.explore, ls.readAt, ls.readTypes = v, explore, now, len(ls.ran)
		}
		buf, moved, force = s.learnRates(j, explore, buf)
		if s.withdrawClaims(j, buf) {
			j.learn.ver = 0 // read again, without them
			var m, f bool
			buf, m, f = s.learnRates(j, explore, buf)
			moved, force = moved || m, force || f
		}
	}
	if !moved {
		return buf, wait
	}
	_ = s.ratesFor(j) // learned rates are in range: no error
	if j.inTier {
		j.tier.dirty, j.tier.learned = true, true
		if force {
			j.tier.mech.ForceReset()
		}
	}
	s.refreshJob(j)
	return buf, wait
}

// withdrawClaims withdraws a learned job's claims on the types it ran on
// for a whole round (its attained time there) with nothing measured there
// (its estimate's source, in est, still the claim): a job
// that claims a rate and never reports keeps no claimed rate on a type
// where it could have shown it (issue #41's review: under max
// throughput a silent claimer took every round). It reports whether it
// withdrew any (the job is registered again without them).
func (s *Scheduler) withdrawClaims(j *job, est []learn.Estimate) bool {
	ls := &j.learn
	if len(j.spec.Throughput) == 0 || len(ls.ran) == 0 {
		return false
	}
	changed := false
	for _, t := range ls.ran {
		k, ok := s.typeIdx[t]
		if !ok || !(j.spec.Throughput[t] > 0) || slices.Contains(ls.withdrawn, t) || k >= len(j.attained) || j.attained[k] < s.roundLength() {
			continue
		}
		for _, e := range est {
			if e.Type == t && e.Source == learn.SourceClaim {
				ls.withdrawn = append(ls.withdrawn, t)
				changed = true
			}
		}
	}
	if changed {
		if err := s.register(j.key, j.spec, ls.withdrawn, ls.audit == AuditFailed); err != nil {
			s.log.Warn("withdraw claims", "job", j.key, "err", err)
		}
	}
	return changed
}

// exploreLeft tells whether the exploration budget allows optimism this
// round.
func (s *Scheduler) exploreLeft() bool {
	b := s.cfg.Explore.budget()
	return b > 0 && s.explored <= b*s.clusterTime
}

// countExplore adds a published round's planned GPU time to the
// cluster's, and that of the units whose job runs on a type its rate
// there was optimistic about to the explored time.
func (s *Scheduler) countExplore(units []unit, length float64) {
	if s.cfg.Estimator == nil {
		return
	}
	s.clusterTime += float64(s.stats.HealthyGPUs) * length
	for u, j := range learnedRuns(units) {
		if u.typ >= 0 && u.typ < len(j.learn.optimistic) && j.learn.optimistic[u.typ] {
			s.stats.Exploring++
			s.explored += float64(u.gpus+u.extra) * length
		}
	}
	s.stats.ExploredGPUSeconds = s.explored
}

// learnedRuns yields each learned job of a round's placed units, with its
// unit.
func learnedRuns(units []unit) iter.Seq2[*unit, *job] {
	return func(yield func(*unit, *job) bool) {
		for i := range units {
			u := &units[i]
			if !u.placed {
				continue
			}
			for _, j := range u.jobs {
				if j != nil && j.spec.Learn && !yield(u, j) {
					return
				}
			}
		}
	}
}

// newSegments starts a new segment for each learned job of a published
// round that does not run on as it did (a new lease, a move, another GPU
// count): its progress reports from then on are a new run's.
func (s *Scheduler) newSegments(units []unit, now float64) {
	if s.cfg.Estimator == nil {
		return
	}
	for u, j := range learnedRuns(units) {
		gpus := u.gpus + u.extra
		if !u.kept || u.moved || j.learn.segGPUs != gpus || j.learn.segType != s.types[u.typ] || j.learn.segment == 0 {
			j.learn.segment++
			j.learn.segStart, j.learn.segGPUs, j.learn.segType = now, gpus, s.types[u.typ]
			if t := s.types[u.typ]; !slices.Contains(j.learn.ran, t) {
				j.learn.ran = append(j.learn.ran, t)
				s.markLearn(j) // read at the next round
			}
		}
	}
}

// ErrNotRunning is returned by Progress for a job that holds no GPUs, or
// a report from before its current run started.
var ErrNotRunning = fmt.Errorf("%w: the job does not run", ErrInvalid)

// Progress feeds the estimator one progress report of a learned job: its
// cumulative steps (a training loop's global step) at time at, on the
// clock of the rounds. The GPU type and count are the scheduler's (where
// the job runs now), never the reporter's: a job's reports measure it on
// the type it really runs on, and reach other jobs only as one row of the
// estimator's population, which sets their priors on types they have not
// run on. A report of a job that holds no GPUs, from before its current
// run started, or after its GPUs changed outside a round, is refused
// (ErrNotRunning); so are steps or times that go back within a run, a
// time past the round's end and a round, and values out of range (the
// estimator's errors, wrapped). Cost: the
// estimator's Observe (O(1), no allocation once the job's track exists).
func (s *Scheduler) Progress(key string, steps, at float64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	j, ok := s.jobs[key]
	switch {
	case !ok:
		return fmt.Errorf("%w: %q", ErrUnknownJob, key)
	case !j.spec.Learn || s.cfg.Estimator == nil:
		return fmt.Errorf("%w: job %q does not learn its rates (JobSpec.Learn)", ErrInvalid, key)
	case j.lease == nil || j.learn.segment == 0 || j.learn.segGPUs == 0:
		return fmt.Errorf("%w: job %q holds no GPUs", ErrNotRunning, key)
	case j.lease.typeName != j.learn.segType || len(s.st.Held(j.lease.holder)) != j.learn.segGPUs:
		// Its GPUs changed outside a round (bound again, elastic GPUs
		// released): its reports resume with the next round's run.
		return fmt.Errorf("%w: job %q: its GPUs changed since its run started; reports resume at the next round", ErrNotRunning, key)
	case !(at >= j.learn.segStart):
		return fmt.Errorf("%w: job %q: a report at %v s, before its run started at %v s", ErrNotRunning, key, at, j.learn.segStart)
	case at > s.lastEnd+s.roundLength():
		return fmt.Errorf("%w: job %q: a report at %v s, past the round's end (%v s) and a round", ErrInvalid, key, at, s.lastEnd)
	}
	o := learn.Observation{Type: j.lease.typeName, GPUs: j.learn.segGPUs, Segment: j.learn.segment, Steps: steps, Time: at}
	err := s.cfg.Estimator.Observe(key, o)
	if err != nil && stepsWentBack(err) {
		// Steps that went back where the job runs on: it restarted in
		// place (its container, from a checkpoint). Its next run starts
		// here, its warm-up left out as after any start.
		j.learn.segment++
		j.learn.segStart = at
		o.Segment = j.learn.segment
		err = s.cfg.Estimator.Observe(key, o)
	}
	if err != nil {
		return fmt.Errorf("%w: job %q: %w", ErrInvalid, key, err)
	}
	// What the reports add up to: every step forward of the job's count,
	// within a run and across runs (a run resumes where the last ended:
	// the steps between its last report and the next run's first count
	// too); a count that went back (a restart from a checkpoint) starts
	// again from its new value.
	ls := &j.learn
	if ls.lastSeg != 0 && steps > ls.last {
		ls.reported = min(ls.reported+steps-ls.last, maxReported)
	}
	ls.last, ls.lastSeg = steps, o.Segment
	if slack := s.cfg.Explore.audit(); ls.audit == AuditNone && slack > 0 && j.spec.TotalSteps > 0 && ls.reported > j.spec.TotalSteps*(1+slack) {
		s.failAudit(j)
	}
	return nil
}

// Audit is a learned job's conservation audit's verdict (Explore.Audit):
// a plain value, safe for concurrent use.
type Audit string

// Audit verdicts.
const (
	// AuditNone: not audited (no JobSpec.TotalSteps, no audit), or not
	// yet (its work is not done and its reports are within the total).
	AuditNone Audit = ""
	// AuditPassed: its work is done and its reports add up to its total.
	AuditPassed Audit = "passed"
	// AuditFailed: its reports passed its total by more than the slack,
	// or fell short of it when its work was done.
	AuditFailed Audit = "failed"
)

// maxReported bounds what a job's reports add up to.
const maxReported = 1e18

// failAudit marks a job whose reports do not add up: its measurements
// leave the population and its group (it is registered again, Private),
// and the next round's stats name it.
func (s *Scheduler) failAudit(j *job) {
	j.learn.audit = AuditFailed
	s.auditFailed = append(s.auditFailed, j.key)
	if err := s.register(j.key, j.spec, j.learn.withdrawn, j.learn.audit == AuditFailed); err != nil {
		s.log.Warn("audit: register a job as private", "job", j.key, "err", err)
	}
	s.log.Info("audit failed: the job's reports do not add up to its work", "job", j.key, "reported", j.learn.reported, "total", j.spec.TotalSteps)
}

// auditDone audits a learned job whose known work is done: its reports
// must add up to its total, less the slack.
func (s *Scheduler) auditDone(j *job) {
	slack := s.cfg.Explore.audit()
	if !j.spec.Learn || j.learn.audit != AuditNone || slack == 0 || j.spec.TotalSteps == 0 {
		return
	}
	if j.learn.reported < j.spec.TotalSteps*(1-slack) {
		s.failAudit(j)
		return
	}
	j.learn.audit = AuditPassed
}

// stepsWentBack reports whether err is the estimator's refusal of steps
// that went back (apart, so that a report that succeeds allocates nothing:
// errors.As's target escapes).
func stepsWentBack(err error) bool {
	le := (*learn.Error)(nil)
	return errors.As(err, &le) && le.Field == "Steps" && errors.Is(err, learn.ErrOutOfOrder)
}

// snapLearned records a learned job's rates, optimism and segment.
func (s *Scheduler) snapLearned(j *job, sj *snapJob) {
	ls := &j.learn
	for k, v := range ls.rates {
		if v > 0 && k < len(s.types) {
			if sj.Learned == nil {
				sj.Learned = map[topology.GPUType]float64{}
			}
			sj.Learned[s.types[k]] = v
		}
	}
	for k, v := range ls.optimistic {
		if v && k < len(s.types) {
			sj.Optimistic = append(sj.Optimistic, s.types[k])
		}
	}
	sj.Segment, sj.SegStart, sj.SegGPUs, sj.SegType = ls.segment, ls.segStart, ls.segGPUs, ls.segType
	sj.Ran = slices.Clone(ls.ran)
	sj.Withdrawn = slices.Clone(ls.withdrawn)
	sj.Reported, sj.Last, sj.LastSegment, sj.Audit = ls.reported, ls.last, ls.lastSeg, ls.audit
	if ls.ver != 0 {
		sj.Read = &snapRead{At: ls.readAt, Types: ls.readTypes, Explore: ls.explore, Stale: true}
		if vs, ok := s.cfg.Estimator.(versioner); ok {
			sj.Read.Stale = vs.Version(j.key) != ls.ver
		}
	}
}

// restoreLearned sets a learned job's state from its snapshot, over the
// scheduler's types (a type the snapshot lacks gets no rate until the
// next round reads the estimator).
func (s *Scheduler) restoreLearned(j *job, sj *snapJob) {
	ls := &j.learn
	ls.rates = make([]float64, len(s.types))
	ls.optimistic = make([]bool, len(s.types))
	for k, t := range s.types {
		ls.rates[k] = sj.Learned[t]
	}
	for _, t := range sj.Optimistic {
		if k, ok := s.typeIdx[t]; ok {
			ls.optimistic[k] = true
		}
	}
	ls.segment, ls.segStart, ls.segGPUs, ls.segType = sj.Segment, sj.SegStart, sj.SegGPUs, sj.SegType
	ls.ran = slices.Clone(sj.Ran)
	ls.withdrawn = slices.Clone(sj.Withdrawn)
	ls.reported, ls.last, ls.lastSeg, ls.audit = sj.Reported, sj.Last, sj.LastSegment, sj.Audit
	if vs, ok := s.cfg.Estimator.(versioner); ok && vs.Version(j.key) == 0 {
		// An estimator that does not know the job (restored from a
		// snapshot taken before it came, or a new one): its claims, kind
		// and reference GPU count, as at Submit.
		if err := s.register(j.key, j.spec, ls.withdrawn, ls.audit == AuditFailed); err != nil {
			s.log.Warn("restore: register a learned job", "job", j.key, "err", err)
		}
	}
	if r := sj.Read; r != nil {
		ls.readAt, ls.readTypes, ls.explore = r.At, r.Types, r.Explore
		// The restored estimator's versions are its own: the job's now,
		// unless its estimates may have changed since they were read
		// (then none equals it, as none equalled it before).
		ls.ver = staleVersion
		if vs, ok := s.cfg.Estimator.(versioner); ok && !r.Stale {
			ls.ver = vs.Version(j.key)
		}
	}
}

// staleVersion is a version no estimator's equals (see restoreLearned).
const staleVersion = math.MaxUint64

// remapLearned moves a learned job's rates and optimism from the old
// types' order to the scheduler's; a new type gets the estimator's rate
// (a median: its optimism is decided at the next round).
func (s *Scheduler) remapLearned(j *job, oldTypes []topology.GPUType) {
	ls := &j.learn
	rates := make([]float64, len(s.types))
	opt := make([]bool, len(s.types))
	for k, t := range oldTypes {
		if n, ok := s.typeIdx[t]; ok && k < len(ls.rates) {
			rates[n], opt[n] = ls.rates[k], ls.optimistic[k]
		}
	}
	for n, t := range s.types {
		if rates[n] == 0 && j.allows(t) {
			if e := s.cfg.Estimator.Estimate(j.key, t); e.Source != learn.SourceNone {
				rates[n] = clampRate(e.Rate(j.spec.GPUs))
			}
		}
	}
	ls.rates, ls.optimistic = rates, opt
	ls.ver = 0 // read again at the next round, with the new types
	s.markLearn(j)
}
