package scheduler

import (
	"cmp"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"

	"github.com/gpusched/gpusched/allocation"
	"github.com/gpusched/gpusched/cluster"
	"github.com/gpusched/gpusched/perfmodel"
	"github.com/gpusched/gpusched/perfmodel/learn"
	"github.com/gpusched/gpusched/placement"
	"github.com/gpusched/gpusched/topology"
)

// Config configures a Scheduler. Only Policy and Cluster are required.
// A Config is a plain value, safe for concurrent reads; the Scheduler
// keeps what it refers to (the policy, the models, TenantWeights,
// TenantQuotas, Types), which must not change while it is in use.
type Config struct {
	// Policy allocates each tier's jobs (allocation.MaxMinFairness for
	// Gavel's heterogeneity-aware max-min fairness, or any other).
	Policy allocation.Policy
	// Cluster is the cluster at start; nil or empty for one whose servers
	// are all added later (AddServer).
	Cluster *topology.Cluster
	// Throughput gives the rates of jobs given by a model key (JobSpec.Model).
	Throughput perfmodel.ThroughputModel
	// Estimator, when set, gives the rates of the jobs that learn them
	// (JobSpec.Learn) from their progress (Progress): each round refits
	// it (learn.Estimator.Refresh) and reads their estimates, within
	// Explore's bounds. It must be safe for concurrent use; the embedder
	// snapshots it beside the scheduler and restores it first
	// (learn.Learner's Snapshot and Restore), so that a restored
	// scheduler makes the rounds the other would have. perfmodel/learn's
	// *Learner is one.
	Estimator learn.Estimator
	// Explore bounds the exploration of learned jobs' types and when
	// their estimates re-solve the policy (zero value: the defaults).
	Explore Explore
	// Colocation, when set, gives the rates of two model-keyed jobs
	// sharing GPUs, and lets space-sharing policies pair them. A pair the
	// model returns an error for on a type cannot share GPUs of that type
	// (at Submit and when types change alike); rates neither 0 nor in
	// [allocation.MinRate, allocation.MaxRate] make Submit refuse the job.
	Colocation perfmodel.ColocationModel
	// Types orders the GPU types in the problems the policies see (the
	// order of their allocations, and of the mechanism's ties); the
	// cluster's types it does not list follow by name. Default: by name.
	Types []topology.GPUType

	// Mechanism configures each tier's round mechanism (allocation.Rounds):
	// RoundLength (default 360 s), MinResetInterval (default 1920 s; a
	// negative value re-solves at every change), GlobalQueue, TypeOrder
	// (default fastest first), ShuffleTypes, Seed, LeaveIdle (default
	// work-conserving) and Compat, as sim.Config's do.
	allocation.Mechanism

	// Placer places jobs on servers; the default is Consolidated with a
	// GPUChooser inside servers (fewest servers, best links). A Chooser's
	// ExactLimit must be in [0, placement.MaxExactLimit].
	Placer *placement.Consolidated
	// MigrationCost is what moving a running job to other GPUs costs it, in
	// seconds of lost work (checkpoint, restart, warm-up); 0 means 60 s and
	// a negative value forbids moves that are not forced. A job keeps its
	// GPUs from round to round unless it must move (its type or size
	// changed, a GPU failed or left) or a placement on fewer servers gains
	// more than this: SpreadPenalty of its speed per server saved, over the
	// shorter of a round and its remaining time.
	MigrationCost float64
	// SpreadPenalty is the share of a job's speed lost per extra server it
	// spans; 0 means 0.1.
	SpreadPenalty float64

	// TenantWeights weights tenants for hierarchical policies.
	TenantWeights map[string]float64
	// TenantQuotas gives tenants (JobSpec.Tenant) guaranteed shares and
	// limits, per GPU type or in normalised throughput, which
	// allocation.QuotaFairness enforces (other policies ignore them; see
	// allocation.Quota); each priority tier's problem carries them, over
	// the GPUs that tier sees.
	TenantQuotas map[string]allocation.Quota

	// Logger receives a debug record per round, and records of capacity
	// changes and evictions; nil logs nothing.
	Logger *slog.Logger
	// OnRound, if set, is called after every round with its statistics,
	// outside the scheduler's lock (it may call the scheduler).
	OnRound func(RoundStats)
	// ReuseRounds lets Round reuse the memory of the Round it returned
	// last: that Round and its Assignments with their Jobs and Devices are
	// then valid only until the next call of Round, from any goroutine,
	// which overwrites them (for a caller that reads each round before it
	// asks for the next, such as a simulator: a round then allocates
	// almost nothing). Off, the default, every Round is the caller's to
	// keep.
	ReuseRounds bool
}

// Scheduler is gpusched's composed scheduling core, the part a real
// scheduler embeds: jobs keyed by strings (pod-group UIDs, trace ids), and
// every round the policy's allocation, Gavel's round mechanism, placement
// on the GPUs of a live cluster.State (consolidated across servers,
// topology-aware inside them, sticky from round to round), gang admission
// and elastic growth. See the package documentation for the round's steps.
//
// It is safe for concurrent use: one mutex serialises every method (a
// round holds it while the policy solves). OnRound runs outside it.
type Scheduler struct {
	mu  sync.Mutex
	cfg Config
	st  *cluster.State
	log *slog.Logger

	placer placement.Consolidated
	single placement.Consolidated // the placer, strict

	types   []topology.GPUType
	typeIdx map[topology.GPUType]int

	jobs   map[string]*job
	byID   map[int]*job
	order  []*job            // the jobs by ID (order of submission)
	gangs  map[string][]*job // the jobs of each gang
	nextID int
	tiers  []*tier // by priority, highest first

	classes *classTable

	leases     map[string]*lease
	leaseList  []*lease // the same leases, for iteration
	freeLeases []*lease
	epoch      uint64
	mark       uint64 // Report's

	last      *Round  // the last round, for Report
	lastEnd   float64 // when it ended (see Round)
	reported  bool
	ranBefore []*job // the jobs of the last round's units
	stats     RoundStats
	scratch   scratch
	roundsRun int

	// learned counts the jobs that learn their rates; explored and
	// clusterTime are the GPU-seconds the rounds planned for exploration
	// and the cluster's GPU-seconds over them (see Explore).
	learned               int
	explored, clusterTime float64
	// auditFailed are the jobs that failed the audit since the last
	// round (RoundStats.AuditFailed).
	auditFailed []string
	refitted    bool    // the estimator was refitted
	lastRefit   float64 // when, on the clock of the rounds
	// feed is where the rounds stand with an estimator that lists its
	// changes; pending are the learned jobs to look at in the next
	// round (see refreshLearned).
	feed    feedState
	pending []*job
}

// tier holds the jobs of one priority and their round mechanism.
type tier struct {
	priority int
	mech     *allocation.Rounds
	jobs     []*job // in ID order
	dirty    bool   // jobs added or removed since the problem was built
	problem  allocation.Problem
	pairs    *pairView
	last     *allocation.Round
	reserved []int // GPUs per type its allocation uses, for lower tiers
	// learned says learned rates changed since the policy last solved
	// (at solved): they count at its next solve, forced once
	// MinResetInterval has passed (Explore.Resolve).
	learned bool
	solved  float64
}

// New returns a scheduler for cfg.
func New(cfg Config) (*Scheduler, error) {
	if cfg.Policy == nil {
		return nil, fmt.Errorf("%w: no policy", ErrInvalid)
	}
	if err := cfg.ValidateMechanism(); err != nil {
		return nil, fmt.Errorf("%w: Config.Mechanism: %w", ErrInvalid, err)
	}
	for _, f := range []struct {
		name string
		v    float64
	}{{"MigrationCost", cfg.MigrationCost}, {"SpreadPenalty", cfg.SpreadPenalty}} {
		if !(f.v >= -allocation.MaxTime && f.v <= allocation.MaxTime) {
			return nil, fmt.Errorf("%w: Config.%s %v (want a number from %g to %g)", ErrInvalid, f.name, f.v, -allocation.MaxTime, allocation.MaxTime)
		}
	}
	if err := cfg.Explore.validate(); err != nil {
		return nil, err
	}
	if cfg.SpreadPenalty < 0 || cfg.SpreadPenalty > 1 {
		return nil, fmt.Errorf("%w: Config.SpreadPenalty %v (want 0 to 1)", ErrInvalid, cfg.SpreadPenalty)
	}
	for tenant, w := range cfg.TenantWeights {
		if err := checkName("tenant", tenant); err != nil {
			return nil, fmt.Errorf("Config.TenantWeights: %w", err)
		}
		if !(w >= allocation.MinWeight && w <= allocation.MaxWeight) {
			return nil, fmt.Errorf("%w: tenant %q weight %v (want %g to %g)", ErrInvalid, tenant, w, allocation.MinWeight, allocation.MaxWeight)
		}
	}
	for tenant := range cfg.TenantQuotas {
		if err := checkName("tenant", tenant); err != nil {
			return nil, fmt.Errorf("Config.TenantQuotas: %w", err)
		}
	}
	if err := (&allocation.Problem{EntityQuotas: cfg.TenantQuotas}).Validate(); err != nil {
		return nil, fmt.Errorf("%w: Config.TenantQuotas: %w", ErrInvalid, err)
	}
	st, err := cluster.New(cfg.Cluster)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	s := &Scheduler{
		cfg: cfg, st: st, log: cfg.Logger,
		jobs: map[string]*job{}, byID: map[int]*job{}, gangs: map[string][]*job{}, leases: map[string]*lease{},
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	s.placer = placement.Consolidated{Chooser: &placement.GPUChooser{}}
	if cfg.Placer != nil {
		if ch := cfg.Placer.Chooser; ch != nil && (ch.ExactLimit < 0 || ch.ExactLimit > placement.MaxExactLimit) {
			return nil, fmt.Errorf("%w: placer's exact limit %d, want 0 to %d", ErrInvalid, ch.ExactLimit, placement.MaxExactLimit)
		}
		s.placer = *cfg.Placer
	}
	s.single = s.placer
	s.single.Strict = true
	if cfg.Colocation != nil {
		s.classes = newClassTable(cfg.Colocation)
	}
	s.refreshTypes()
	return s, nil
}

func (s *Scheduler) roundLength() float64 { return s.cfg.EffectiveRoundLength() }

func (s *Scheduler) migrationCost() float64 {
	if s.cfg.MigrationCost == 0 {
		return 60
	}
	return s.cfg.MigrationCost
}

func (s *Scheduler) spreadPenalty() float64 {
	if s.cfg.SpreadPenalty > 0 {
		return s.cfg.SpreadPenalty
	}
	return 0.1
}

// refreshTypes follows the state's types; when they change, every job's
// rates and every problem are rebuilt.
func (s *Scheduler) refreshTypes() {
	present := s.st.Types()
	if len(present) == len(s.types) && s.sameTypes(present) {
		return
	}
	types := make([]topology.GPUType, 0, len(present))
	for _, t := range s.cfg.Types {
		if _, ok := slices.BinarySearch(present, t); ok && !slices.Contains(types, t) {
			types = append(types, t)
		}
	}
	for _, t := range present {
		if !slices.Contains(types, t) {
			types = append(types, t)
		}
	}
	oldTypes := s.types
	s.types = types
	s.typeIdx = make(map[topology.GPUType]int, len(types))
	for k, t := range s.types {
		s.typeIdx[t] = k
	}
	for _, j := range s.jobs {
		if j.spec.Learn {
			s.remapLearned(j, oldTypes)
		}
		// The rates were valid for the old types; a model that cannot rate
		// a new type leaves the job off it.
		if err := s.ratesFor(j); err != nil {
			s.log.Warn("job rates", "job", j.key, "err", err)
		}
		att := make([]float64, len(s.types))
		for k, t := range oldTypes {
			if n, ok := s.typeIdx[t]; ok && k < len(j.attained) {
				att[n] = j.attained[k]
			}
		}
		j.attained = att
	}
	for _, t := range s.tiers {
		t.dirty = true
	}
	if s.classes != nil {
		s.classes.setTypes(s.types)
	}
	// Leases and the last round's units (credited by its report, or by
	// the next round) remember their type by index too, and by name: the
	// index follows the name, -1 for a type that left (its time is then
	// dropped, as the attained time of a type that left is above).
	for _, l := range s.leaseList {
		l.typ = s.typeIndex(l.typeName)
	}
	units := s.scratch.units[s.scratch.cur]
	for i := range units {
		units[i].typ = s.typeIndex(units[i].tname)
	}
}

// typeIndex returns the index of a type among the scheduler's, -1 if the
// cluster has none of it.
func (s *Scheduler) typeIndex(t topology.GPUType) int {
	if k, ok := s.typeIdx[t]; ok {
		return k
	}
	return -1
}

// sameTypes reports whether the scheduler's types are those present.
func (s *Scheduler) sameTypes(present []topology.GPUType) bool {
	for _, t := range present {
		if _, ok := s.typeIdx[t]; !ok {
			return false
		}
	}
	return true
}

// tierOf returns the tier of a priority, creating it.
func (s *Scheduler) tierOf(priority int) *tier {
	i, found := slices.BinarySearchFunc(s.tiers, priority, func(t *tier, p int) int { return cmp.Compare(p, t.priority) })
	if found {
		return s.tiers[i]
	}
	t := &tier{priority: priority, dirty: true}
	t.mech = s.newMechanism()
	s.tiers = slices.Insert(s.tiers, i, t)
	return t
}

// newMechanism returns a round mechanism configured by s.cfg. Its rounds
// reuse memory: a tier's round is read (plan, reports) before the next.
func (s *Scheduler) newMechanism() *allocation.Rounds {
	return &allocation.Rounds{
		Policy: s.cfg.Policy, Mechanism: s.cfg.Mechanism, ReuseRounds: true,
	}
}

// ForceReset makes every tier's policy solve again at the next round.
func (s *Scheduler) ForceReset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, t := range s.tiers {
		t.mech.ForceReset()
	}
}

// Submit adds a job that arrived at now (seconds, on the clock of the
// rounds). Its key must be new; the spec must validate. O(types) plus the
// model's lookups.
func (s *Scheduler) Submit(key string, spec JobSpec, now float64) error {
	if err := checkKey(key); err != nil {
		return err
	}
	if !validTime(now) {
		return fmt.Errorf("%w: job %q: arrival %v (want 0 to %g s)", ErrInvalid, key, now, allocation.MaxTime)
	}
	if err := spec.validate(s.cfg.Throughput != nil, s.cfg.Estimator != nil); err != nil {
		return fmt.Errorf("job %q: %w", key, err)
	}
	spec = cloneSpec(spec)
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, dup := s.jobs[key]; dup {
		return fmt.Errorf("%w: %q", ErrDuplicateJob, key)
	}
	j := &job{key: key, id: s.nextID, spec: spec, arrival: now, pidx: -1, class: -1}
	if spec.Learn {
		if err := s.register(key, spec, nil, false); err != nil {
			return err
		}
		s.scratch.estimates, _, _ = s.learnRates(j, s.exploreLeft(), s.scratch.estimates)
		s.markLearn(j) // read at the next round
	}
	if err := s.ratesFor(j); err != nil {
		if spec.Learn {
			s.cfg.Estimator.Forget(key)
		}
		return err
	}
	if s.classes != nil && spec.Model != nil && !spec.Learn {
		c, err := s.classes.classOf(s.modelKey(j))
		if err != nil {
			return fmt.Errorf("%w: job %q: %w", ErrInvalid, key, err)
		}
		j.class = c
	}
	j.attained = make([]float64, len(s.types))
	s.nextID++
	if spec.Learn {
		s.learned++
	}
	s.jobs[key] = j
	s.byID[j.id] = j
	s.order = append(s.order, j)
	j.tier = s.tierOf(spec.Priority)
	s.joinGang(j)
	s.refreshJob(j)
	return nil
}

func (s *Scheduler) modelKey(j *job) perfmodel.JobKey { return modelKeyOf(j.spec) }

func cloneSpec(spec JobSpec) JobSpec {
	spec.Types = slices.Clone(spec.Types)
	if spec.Throughput != nil {
		m := make(map[topology.GPUType]float64, len(spec.Throughput))
		for t, v := range spec.Throughput {
			m[t] = v
		}
		spec.Throughput = m
	}
	if spec.Model != nil {
		k := *spec.Model
		spec.Model = &k
	}
	return spec
}

// Update changes a job's spec (its rates as they are measured, its
// remaining steps, its weight). The job keeps its arrival and its place in
// the rounds; a change of GPUs, types, rates, priority or gang takes
// effect at the next round, which re-solves when the policy sees a change
// of jobs. GPUs it holds that no longer fit the spec (another count, a
// type it may no longer run on, elastic GPUs beyond MaxGPUs) are
// released at once. Its fate is looked at again (it may become
// unrunnable, or runnable). A finished job returns to the rounds when the
// spec gives it remaining steps, and stays finished otherwise. Its model
// key cannot change.
func (s *Scheduler) Update(key string, spec JobSpec) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	j, ok := s.jobs[key]
	if !ok {
		return fmt.Errorf("%w: %q", ErrUnknownJob, key)
	}
	if err := spec.validate(s.cfg.Throughput != nil, s.cfg.Estimator != nil); err != nil {
		return fmt.Errorf("job %q: %w", key, err)
	}
	spec = cloneSpec(spec)
	if (spec.Model == nil) != (j.spec.Model == nil) || spec.Model != nil && modelKeyOf(spec) != s.modelKey(j) {
		return fmt.Errorf("%w: job %q: the model key cannot change", ErrInvalid, key)
	}
	if spec.Learn != j.spec.Learn {
		return fmt.Errorf("%w: job %q: Learn cannot change", ErrInvalid, key)
	}
	if err := s.register(key, spec, j.learn.withdrawn, j.learn.audit == AuditFailed); err != nil {
		return err
	}
	old := j.spec
	j.spec = spec
	if spec.Learn && (spec.GPUs != old.GPUs || !slices.Equal(spec.Types, old.Types) || !maps.Equal(spec.Throughput, old.Throughput)) {
		j.learn.rates = nil // read again at the new size, types or claims
		j.learn.ver = 0
		s.scratch.estimates, _, _ = s.learnRates(j, s.exploreLeft(), s.scratch.estimates)
		s.markLearn(j)
	}
	if err := s.ratesFor(j); err != nil {
		j.spec = old
		_ = s.ratesFor(j)
		return err
	}
	if spec.Priority != old.Priority && j.inTier {
		s.detach(j)
	}
	j.tier = s.tierOf(spec.Priority)
	if j.finished && spec.RemainingSteps > 0 {
		j.finished, j.announced = false, false
		if j.learn.audit == AuditPassed {
			j.learn.audit = AuditNone // audited again when its new work is done
		}
	}
	if j.finished {
		j.spec.RemainingSteps = 0
	}
	if l := j.lease; l != nil && l.jobs[1] == nil && len(l.extra) > j.spec.maxGPUs()-j.spec.GPUs {
		_ = s.st.ReleaseGPUs(l.holder, l.extra) // elastic GPUs beyond its new range
		l.extra = l.extra[:0]
	}
	if l := j.lease; l != nil && !s.leaseFits(l) {
		s.releaseLease(l.holder) // its size or type no longer fits the spec
	}
	if old.Gang != spec.Gang {
		j.spec.Gang = old.Gang
		s.leaveGang(j)
		j.spec.Gang = spec.Gang
		s.joinGang(j)
		if old.Gang != "" {
			s.refreshGang(old.Gang)
		}
	}
	s.refreshJob(j)
	if j.inTier {
		j.tier.dirty = true
	}
	return nil
}

// leaseFits tells whether a lease still fits its jobs' specs: base GPUs
// as many as each asks for, of a type each may run on with a rate, and
// extras within their elastic range.
func (s *Scheduler) leaseFits(l *lease) bool {
	base := len(s.st.Held(l.holder)) - len(l.extra)
	for _, j := range l.jobs {
		if j == nil {
			continue
		}
		if base != j.spec.GPUs || l.typ < 0 || !j.allows(l.typeName) || j.rates[l.typ] <= 0 {
			return false
		}
		if l.jobs[1] == nil && len(l.extra) > j.spec.maxGPUs()-j.spec.GPUs {
			return false
		}
	}
	return true
}

// detach takes a job out of its tier's list.
func (s *Scheduler) detach(j *job) {
	t := j.tier
	if i := slices.Index(t.jobs, j); i >= 0 {
		t.jobs = slices.Delete(t.jobs, i, i+1)
	}
	j.inTier, j.pidx = false, -1
	t.dirty = true
	if len(t.jobs) == 0 {
		// An empty tier keeps its mechanism: the next job of its priority
		// resumes it.
		t.last = nil
	}
}

// Remove forgets a job (finished or cancelled) and releases its GPUs; a
// partner it shared GPUs with loses them too and is placed afresh next
// round. O(jobs of its tier).
func (s *Scheduler) Remove(key string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	j, ok := s.jobs[key]
	if !ok {
		return fmt.Errorf("%w: %q", ErrUnknownJob, key)
	}
	if j.lease != nil {
		s.releaseLease(j.lease.holder)
	}
	if j.inTier {
		s.detach(j)
	}
	delete(s.jobs, key)
	delete(s.byID, j.id)
	if j.spec.Learn {
		s.learned--
		s.cfg.Estimator.Forget(key)
	}
	if i, ok := slices.BinarySearchFunc(s.order, j.id, func(a *job, id int) int { return a.id - id }); ok {
		s.order = slices.Delete(s.order, i, i+1)
	}
	s.leaveGang(j)
	if g := j.spec.Gang; g != "" {
		s.refreshGang(g) // the gang may run without it
	}
	return nil
}

// ---- Capacity: the live state's changes go through the scheduler so
// that holders are evicted cleanly. ----

// AddServer adds a server (a node joined); the next round re-solves.
func (s *Scheduler) AddServer(srv topology.Server) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, err := s.st.AddServer(srv); err != nil {
		return err
	}
	s.refreshTypes()
	s.refreshAll()
	s.log.Info("server added", "server", srv.ID, "gpus", len(srv.GPUs))
	return nil
}

// RemoveServer removes a server (a node left) and evicts the jobs that
// held its GPUs (they lose all their GPUs and wait for the next round);
// it returns their keys, sorted.
func (s *Scheduler) RemoveServer(id string) ([]string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok := s.st.ServerIndex(id)
	if !ok {
		return nil, &cluster.Error{Op: "remove server", Server: id, GPU: -1, Kind: cluster.ErrUnknownServer}
	}
	evicted := s.evictOn(p, nil)
	if _, err := s.st.RemoveServer(id); err != nil {
		return nil, err
	}
	// The servers after it moved down one position, in the state's
	// holdings and in the leases' elastic GPUs alike (no lease holds a
	// GPU of the server any more).
	for _, l := range s.leaseList {
		for i := range l.extra {
			if l.extra[i].Server > p {
				l.extra[i].Server--
			}
		}
	}
	s.refreshTypes()
	s.refreshAll()
	s.log.Info("server removed", "server", id, "evicted", evicted)
	return evicted, nil
}

// FailGPUs marks GPUs of a server (by NVML index) failed and evicts the
// jobs that held them; it returns their keys, sorted. With no index, every
// GPU of the server fails (a node that went unhealthy).
func (s *Scheduler) FailGPUs(server string, indices ...int) ([]string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	refs, err := s.refsOf(server, indices)
	if err != nil {
		return nil, err
	}
	holders, err := s.st.Fail(refs...)
	if err != nil {
		return nil, err
	}
	var evicted []string
	for _, h := range holders {
		evicted = append(evicted, s.evict(h)...)
	}
	slices.Sort(evicted)
	evicted = slices.Compact(evicted)
	s.log.Info("GPUs failed", "server", server, "gpus", len(refs), "evicted", evicted)
	return evicted, nil
}

// RecoverGPUs marks GPUs of a server (by NVML index; all with none)
// healthy again.
func (s *Scheduler) RecoverGPUs(server string, indices ...int) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	refs, err := s.refsOf(server, indices)
	if err != nil {
		return err
	}
	if err := s.st.Recover(refs...); err != nil {
		return err
	}
	s.log.Info("GPUs recovered", "server", server, "gpus", len(refs))
	return nil
}

// refsOf resolves NVML indices of a server to positions; all GPUs when
// indices is empty.
func (s *Scheduler) refsOf(server string, indices []int) ([]cluster.GPURef, error) {
	p, ok := s.st.ServerIndex(server)
	if !ok {
		return nil, &cluster.Error{Op: "lookup", Server: server, GPU: -1, Kind: cluster.ErrUnknownServer}
	}
	if len(indices) == 0 {
		refs := make([]cluster.GPURef, len(s.st.Server(p).GPUs))
		for i := range refs {
			refs[i] = cluster.GPURef{Server: p, GPU: i}
		}
		return refs, nil
	}
	refs := make([]cluster.GPURef, 0, len(indices))
	for _, idx := range indices {
		r, err := s.st.Lookup(server, idx)
		if err != nil {
			return nil, err
		}
		refs = append(refs, r)
	}
	return refs, nil
}

// evictOn evicts every lease holding a GPU of server p.
func (s *Scheduler) evictOn(p int, evicted []string) []string {
	var on []string
	for _, l := range s.leaseList {
		for _, r := range s.st.Held(l.holder) {
			if r.Server == p {
				on = append(on, l.holder)
				break
			}
		}
	}
	for _, h := range on {
		evicted = append(evicted, s.evict(h)...)
	}
	slices.Sort(evicted)
	return slices.Compact(evicted)
}

// evict releases a lease and returns its jobs' keys.
func (s *Scheduler) evict(holder string) []string {
	l := s.leases[holder]
	if l == nil {
		s.st.Release(holder)
		return nil
	}
	keys := []string{l.jobs[0].key}
	if l.jobs[1] != nil {
		keys = append(keys, l.jobs[1].key)
	}
	s.releaseLease(holder)
	return keys
}

// Bind records GPUs a job already holds, by server id and NVML index (a
// scheduler that restarts rebuilds its state from the annotations of the
// pods it placed): they become the job's lease, which the next round keeps
// if the job runs again on as many GPUs of that type. All or nothing: GPUs
// that are unknown, failed or held, or of several types, are an error and
// bind nothing, and so are devices other than as many as the job's GPUs,
// or of a type it may not run on or has no rate for. Every refusal wraps
// ErrInvalid, and one about the cluster (an unknown server, a GPU named
// twice, held or failed) the cluster package's kind as well. A job binds
// once; Remove or a round releases it.
func (s *Scheduler) Bind(key string, devices []Device) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	j, ok := s.jobs[key]
	if !ok {
		return fmt.Errorf("%w: %q", ErrUnknownJob, key)
	}
	if j.lease != nil {
		return fmt.Errorf("%w: job %q already holds GPUs", ErrInvalid, key)
	}
	if j.finished {
		return fmt.Errorf("%w: job %q has finished", ErrInvalid, key)
	}
	if len(devices) != j.spec.GPUs {
		return fmt.Errorf("%w: job %q: %d devices to bind for a job of %d GPUs", ErrInvalid, key, len(devices), j.spec.GPUs)
	}
	refs := make([]cluster.GPURef, 0, len(devices))
	var typ topology.GPUType
	for i, d := range devices {
		r, err := s.st.Lookup(d.Server, d.Index)
		if err != nil {
			return fmt.Errorf("%w: job %q: %w", ErrInvalid, key, err)
		}
		t := s.st.Server(r.Server).GPUs[r.GPU].Type
		if i > 0 && t != typ {
			return fmt.Errorf("%w: job %q: devices of types %s and %s", ErrInvalid, key, typ, t)
		}
		typ = t
		refs = append(refs, r)
	}
	if k, ok := s.typeIdx[typ]; !ok || !j.allows(typ) || j.raw[k] <= 0 {
		return fmt.Errorf("%w: job %q cannot run on %s (not among its types, or no rate there)", ErrInvalid, key, typ)
	}
	if err := s.st.Bind(key, refs); err != nil {
		return fmt.Errorf("%w: job %q: %w", ErrInvalid, key, err)
	}
	l := s.newLease()
	l.holder, l.jobs, l.typ, l.typeName = key, [2]*job{j, nil}, s.typeIdx[typ], typ
	s.addLease(l)
	return nil
}

// View calls fn with read-only access to the live cluster state, under
// the scheduler's lock, for readers such as a Kubernetes plugin's Filter
// and Score. The view is valid until fn returns; fn must not call the
// scheduler (its lock is held).
func (s *Scheduler) View(fn func(v *ClusterView)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v := &ClusterView{st: s.st}
	defer func() { v.st = nil }()
	fn(v)
}

// JobStatus is what the scheduler knows of a job: a copy the caller
// owns, safe for concurrent reads.
type JobStatus struct {
	Spec JobSpec
	// State is where the job stands now, and Reason why it waits or
	// cannot run (NoReason while it runs or once it has finished).
	State  JobState
	Reason Reason
	// RemainingKnown tells whether Spec.RemainingSteps is known: false
	// when the spec gave none (0: unknown work, the job runs until it is
	// removed); true when it gave some, counted down by reports, and for
	// a finished job (0 left).
	RemainingKnown bool
	Arrival        float64
	// Devices are the GPUs the job holds now (after the last round), and
	// Type their type; none while it waits.
	Devices []Device
	Type    topology.GPUType
	// Attained is the time it has run on each type, in seconds, from the
	// reports (or the rounds, for rounds not reported), credited to the
	// type it ran on by name. The time of a type that has left the cluster
	// (its last server removed) is dropped, also for the last round when
	// the type leaves before it is credited.
	Attained map[topology.GPUType]float64
	// Rounds counts the rounds it ran in.
	Rounds int
	// Estimates are a learned job's (JobSpec.Learn) estimates on every
	// type the estimator knows, with their uncertainty and source
	// (measured, group, claim, prior, none); Exploring the types its rate is
	// optimistic on now (Explore). Both nil for other jobs.
	Estimates []learn.Estimate
	Exploring []topology.GPUType
	// ReportedSteps is the work a learned job's progress reports add up
	// to (each run's last steps less its first), and Audit the
	// conservation audit's verdict (Explore.Audit, JobSpec.TotalSteps).
	ReportedSteps float64
	Audit         Audit
}

// Status returns a job's status.
func (s *Scheduler) Status(key string) (JobStatus, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	j, ok := s.jobs[key]
	if !ok {
		return JobStatus{}, fmt.Errorf("%w: %q", ErrUnknownJob, key)
	}
	out := JobStatus{Spec: cloneSpec(j.spec), Arrival: j.arrival, Rounds: j.rounds, Attained: map[topology.GPUType]float64{},
		RemainingKnown: j.finished || j.spec.RemainingSteps > 0}
	out.State, out.Reason = s.fate(j)
	for k, v := range j.attained {
		if v > 0 {
			out.Attained[s.types[k]] = v
		}
	}
	if l := j.lease; l != nil {
		out.Type = l.typeName
		out.Devices = s.devices(s.st.Held(l.holder), nil)
	}
	if j.spec.Learn {
		out.Estimates = s.cfg.Estimator.Estimates(key, nil)
		out.ReportedSteps, out.Audit = j.learn.reported, j.learn.audit
		for k, v := range j.learn.optimistic {
			if v {
				out.Exploring = append(out.Exploring, s.types[k])
			}
		}
	}
	return out, nil
}

// Jobs returns the keys of the jobs submitted and not removed, in order of
// submission.
func (s *Scheduler) Jobs() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	all := make([]*job, 0, len(s.jobs))
	for _, j := range s.jobs {
		all = append(all, j)
	}
	slices.SortFunc(all, func(a, b *job) int { return cmp.Compare(a.id, b.id) })
	out := make([]string, len(all))
	for i, j := range all {
		out[i] = j.key
	}
	return out
}

// Device names one GPU as the outside world does: its server's id and its
// NVML index, with its position in the live state at the time it was
// handed out. A Device is a plain value, safe for concurrent use.
type Device struct {
	Server string         `json:"server"`
	Index  int            `json:"index"`
	Ref    cluster.GPURef `json:"-"`
}

func (s *Scheduler) devices(refs []cluster.GPURef, dst []Device) []Device {
	for _, r := range refs {
		srv := s.st.Server(r.Server)
		dst = append(dst, Device{Server: srv.ID, Index: srv.GPUs[r.GPU].Index, Ref: r})
	}
	return dst
}
