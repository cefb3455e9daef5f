package scheduler

import (
	"encoding/json"
	"fmt"
	"slices"
	"unicode/utf8"

	"github.com/gpusched/gpusched/allocation"
	"github.com/gpusched/gpusched/cluster"
	"github.com/gpusched/gpusched/internal/strictjson"
	"github.com/gpusched/gpusched/perfmodel"
	"github.com/gpusched/gpusched/perfmodel/learn"
	"github.com/gpusched/gpusched/topology"
)

// snapshotVersion is the format Snapshot writes. Version 1 (before the
// record of the cluster, the configuration and the last round) is read
// by Adopt only.
const snapshotVersion = 2

// Bounds of what a snapshot may hold.
const (
	maxSegment          = 1 << 53 // a learned job's runs (see learnState)
	maxSnapshotJobs     = 1 << 22
	maxSnapshotServers  = 1 << 20
	maxSnapshotDevices  = 1 << 24
	maxSnapshotTiers    = 1 << 16
	maxSnapshotSettings = 64
)

type snapshot struct {
	Version int `json:"version"`
	// Settings and Cluster record what the snapshot was taken on
	// (settings, servers in the state's order); Restore checks them.
	Settings map[string]string `json:"settings,omitempty"`
	Cluster  []snapServer      `json:"cluster,omitempty"`
	NextID   int               `json:"next_id"`
	// Classes are the co-location classes (model keys) in the order the
	// class table numbered them.
	Classes []perfmodel.JobKey `json:"classes,omitempty"`
	Jobs    []snapJob          `json:"jobs"`
	Leases  []snapLease        `json:"leases,omitempty"`
	Failed  []Device           `json:"failed,omitempty"`
	Tiers   []snapTier         `json:"tiers,omitempty"`
	Last    *snapRound         `json:"last_round,omitempty"`
	// Explored and ClusterTime: the exploration's account (Explore).
	Explored    float64 `json:"explored,omitempty"`
	ClusterTime float64 `json:"cluster_time,omitempty"`
	// Refitted and LastRefit: whether and when the estimator was last
	// refitted (Explore.Refit).
	Refitted  bool    `json:"refitted,omitempty"`
	LastRefit float64 `json:"last_refit,omitempty"`
}

// snapServer is a server of the cluster a snapshot was taken on: its id,
// its GPUs (counts by type), and a digest of its whole description (GPUs,
// links, bandwidths, labels).
type snapServer struct {
	ID     string `json:"id"`
	GPUs   string `json:"gpus"`
	Digest string `json:"digest"`
}

type snapJob struct {
	Key      string                       `json:"key"`
	ID       int                          `json:"id"`
	Spec     JobSpec                      `json:"spec"`
	Arrival  float64                      `json:"arrival"`
	Attained map[topology.GPUType]float64 `json:"attained,omitempty"`
	Rounds   int                          `json:"rounds,omitempty"`
	// Finished and Announced: see job; Wait is why it waited in the last
	// round.
	Finished  bool   `json:"finished,omitempty"`
	Announced bool   `json:"announced,omitempty"`
	Wait      Reason `json:"wait,omitempty"`
	// Learned, Optimistic and the segment: a learned job's rates as the
	// rounds see them (by type), the types they are optimistic on, and
	// its current run (see learnState).
	Learned    map[topology.GPUType]float64 `json:"learned,omitempty"`
	Optimistic []topology.GPUType           `json:"optimistic,omitempty"`
	Segment    uint64                       `json:"segment,omitempty"`
	SegStart   float64                      `json:"segment_start,omitempty"`
	SegGPUs    int                          `json:"segment_gpus,omitempty"`
	SegType    topology.GPUType             `json:"segment_type,omitempty"`
	// Ran are the types a learned job ran on; Read when its rates were
	// last read (see learnState), nil before.
	Ran  []topology.GPUType `json:"ran,omitempty"`
	Read *snapRead          `json:"read,omitempty"`
	// Withdrawn are the types whose claims were withdrawn.
	Withdrawn []topology.GPUType `json:"withdrawn,omitempty"`
	// Reported, Last, LastSegment and Audit: what a learned job's reports
	// add up to, its latest report, and the audit's verdict (see
	// learnState).
	Reported    float64 `json:"reported,omitempty"`
	Last        float64 `json:"last,omitempty"`
	LastSegment uint64  `json:"last_segment,omitempty"`
	Audit       Audit   `json:"audit,omitempty"`
}

// snapRead is when a learned job's rates were last read: at At, after
// it ran on Types types, with Explore the budget's answer; Stale says its
// estimates may have changed since.
type snapRead struct {
	At      float64 `json:"at"`
	Types   int     `json:"types"`
	Explore bool    `json:"explore,omitempty"`
	Stale   bool    `json:"stale,omitempty"`
}

type snapLease struct {
	Jobs    []string         `json:"jobs"`
	Type    topology.GPUType `json:"type"`
	Devices []Device         `json:"devices"`
	// Extra are the elastic GPUs of this round, bound after Devices.
	Extra []Device `json:"extra,omitempty"`
}

// snapTier holds a tier's mechanism state (allocation.Rounds.Snapshot)
// and whether its last round is in force (credited by the next report).
type snapTier struct {
	Priority int             `json:"priority"`
	Rounds   json.RawMessage `json:"rounds,omitempty"`
	Last     bool            `json:"last,omitempty"`
	// Learned and Solved: learned rates changed since the policy solved,
	// at Solved (see tier).
	Learned bool    `json:"learned,omitempty"`
	Solved  float64 `json:"solved,omitempty"`
}

// snapRound is the last round: when it started and ended, whether it was
// reported, and the units that ran in it.
type snapRound struct {
	Start    float64    `json:"start"`
	Length   float64    `json:"length"`
	End      float64    `json:"end"`
	Reported bool       `json:"reported,omitempty"`
	Units    []snapUnit `json:"units,omitempty"`
}

// snapUnit is a unit that ran in the last round: its jobs (keys and IDs:
// a job removed since is still credited to the mechanism), its type, its
// tier.
type snapUnit struct {
	Jobs     []string         `json:"jobs"`
	IDs      []int            `json:"ids"`
	Type     topology.GPUType `json:"type"`
	Priority int              `json:"priority"`
}

// Snapshot returns the scheduler's state as versioned JSON: the cluster
// and configuration it was taken on (what Restore checks), the jobs with
// their specs, arrivals, attained service and fates, the leases (which
// job holds which devices, by server id and NVML index), the failed
// devices, each tier's round mechanism, and the last round (its units,
// its end, whether it was reported), so that a Restore continues exactly
// as this scheduler would. It fails only on a policy's allocation that
// JSON cannot hold.
func (s *Scheduler) Snapshot() ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	snap := snapshot{Version: snapshotVersion, NextID: s.nextID, Settings: s.settings(), Cluster: s.servers(),
		Explored: s.explored, ClusterTime: s.clusterTime, Refitted: s.refitted, LastRefit: s.lastRefit}
	if s.classes != nil {
		snap.Classes = s.classes.keys
	}
	for _, j := range s.order {
		sj := snapJob{Key: j.key, ID: j.id, Spec: j.spec, Arrival: j.arrival, Rounds: j.rounds, Finished: j.finished, Announced: j.announced, Wait: j.wait}
		if j.spec.Learn {
			s.snapLearned(j, &sj)
		}
		for k, v := range j.attained {
			if v > 0 {
				if sj.Attained == nil {
					sj.Attained = map[topology.GPUType]float64{}
				}
				sj.Attained[s.types[k]] = v
			}
		}
		snap.Jobs = append(snap.Jobs, sj)
	}
	holders := make([]string, 0, len(s.leases))
	for h := range s.leases {
		holders = append(holders, h)
	}
	slices.Sort(holders)
	for _, h := range holders {
		l := s.leases[h]
		sl := snapLease{Type: l.typeName}
		for _, r := range s.st.Held(h) {
			if slices.Contains(l.extra, r) {
				sl.Extra = s.devices([]cluster.GPURef{r}, sl.Extra)
			} else {
				sl.Devices = s.devices([]cluster.GPURef{r}, sl.Devices)
			}
		}
		for _, j := range l.jobs {
			if j != nil {
				sl.Jobs = append(sl.Jobs, j.key)
			}
		}
		snap.Leases = append(snap.Leases, sl)
	}
	for p := range s.st.NumServers() {
		srv := s.st.Server(p)
		for i := range srv.GPUs {
			if s.st.Failed(cluster.GPURef{Server: p, GPU: i}) {
				snap.Failed = append(snap.Failed, Device{Server: srv.ID, Index: srv.GPUs[i].Index})
			}
		}
	}
	for _, t := range s.tiers {
		raw, err := t.mech.Snapshot()
		if err != nil {
			return nil, fmt.Errorf("scheduler: snapshot of priority %d: %w", t.priority, err)
		}
		snap.Tiers = append(snap.Tiers, snapTier{Priority: t.priority, Rounds: raw, Last: t.last != nil, Learned: t.learned, Solved: t.solved})
	}
	if s.last != nil {
		lr := &snapRound{Start: s.last.Start, Length: s.last.Length, End: s.lastEnd, Reported: s.reported}
		units := s.scratch.units[s.scratch.cur]
		for i := range units {
			u := &units[i]
			if !u.placed {
				continue
			}
			su := snapUnit{Type: u.tname, Priority: u.tier.priority}
			for _, j := range u.jobs {
				if j != nil {
					su.Jobs = append(su.Jobs, j.key)
					su.IDs = append(su.IDs, j.id)
				}
			}
			lr.Units = append(lr.Units, su)
		}
		snap.Last = lr
	}
	return json.Marshal(snap)
}

// Restore loads a Snapshot into a scheduler that has no jobs, built with
// the same configuration on the same cluster, so that it continues
// exactly as the scheduler that took the snapshot would have: the same
// Rounds (Preempted, Waiting and Stats included, wall times aside), the
// same reports accepted, the same snapshots. "The same cluster" is the
// same servers (ids, GPUs, links) added in the same order, with no GPU
// failed that was healthy in the snapshot (the snapshot's failed GPUs are
// failed again); "the same configuration" is every setting that changes
// decisions (the policy's type and settings, the round mechanism's
// settings, Types, the placer, MigrationCost, SpreadPenalty, the tenants'
// weights and quotas, the models' types). A snapshot taken on another
// cluster or configuration is refused with a *MismatchError that lists
// what differs (it wraps ErrInvalid; Adopt loads such a snapshot,
// dropping what no longer fits). Every field is checked before anything
// is kept: keys, IDs and specs as Submit checks them, times, attained
// service and counters in their ranges, leases of one job or two distinct
// ones whose devices exist, are of the lease's type, are healthy and held
// once, and are as many as the jobs' specs ask for (plus elastic GPUs
// within their range), the last round's units and each tier's mechanism
// (allocation.Rounds.Restore), each against the other (a unit's tier has
// a last round; the units of a round not yet reported are a report their
// tier's mechanism accepts: its jobs present in the round, on its types,
// the round not credited yet). A snapshot that fails a check is an error
// wrapping ErrInvalid, and changes nothing. What Restore accepts cannot
// make a later Round, Report, Status or Snapshot panic.
//
// After Restore, the embedder's workloads are where the snapshot says:
// each job with a lease runs on its devices (Status), and the next Round
// lists in Preempted the jobs it stops, as it would have without the
// restart. A stateful policy's own state (FIFO with Sticky or Compat,
// FinishTimeFairness) is not part of a snapshot.
func (s *Scheduler) Restore(data []byte) error {
	snap, err := parseSnapshot(data)
	if err != nil {
		return err
	}
	if snap.Version == 1 {
		return fmt.Errorf("%w: snapshot version 1 holds no record of the cluster and configuration it was taken on, nor of the last round: Restore cannot continue it exactly (Adopt loads it)", ErrInvalid)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.jobs) > 0 {
		return fmt.Errorf("%w: restore into a scheduler that has %d jobs", ErrInvalid, len(s.jobs))
	}
	if err := snap.check(s.cfg.Throughput != nil, s.cfg.Colocation != nil, s.cfg.Estimator != nil); err != nil {
		return err
	}
	if diffs := s.differences(snap); len(diffs) > 0 {
		return &MismatchError{Differences: diffs}
	}
	p, err := s.planRestore(snap, true)
	if err != nil {
		return err
	}
	s.apply(snap, p)
	return nil
}

// Adoption is what Adopt kept and dropped of a snapshot: a plain value,
// safe for concurrent reads.
type Adoption struct {
	// Differences lists how the snapshot's cluster and configuration
	// differ from this scheduler's (empty when Restore would have
	// accepted it).
	Differences []Difference
	// Released lists the jobs whose leases were not bound again (a device
	// gone, failed, or of another type now), sorted: they hold no GPUs,
	// and the embedder stops their workloads.
	Released []string
	// Reset reports that every tier's policy solves again at the next
	// round, because the configuration differs; MechanismsDropped that
	// the tiers' mechanism states were dropped (another Compat mode),
	// their time counters and deficits with them.
	Reset, MechanismsDropped bool
}

// Adopt loads a snapshot into a scheduler that has no jobs, whatever
// cluster and configuration it was taken on, and says what it dropped.
// It checks every field as Restore does and refuses (ErrInvalid, nothing
// changed) a snapshot that fails a check; then it keeps the jobs, their
// fates and attained service, fails again the snapshot's failed devices
// that still exist (GPUs failed now stay failed), binds again the leases
// whose devices all still exist, are of the lease's type, healthy and
// free (the others are released: Adoption.Released), keeps each tier's
// mechanism state (dropped for another Compat mode) and the last round's
// units, and when the configuration differs makes every tier's policy
// solve again at the next round. A version 1 snapshot (no record of its
// cluster, configuration or last round) is adopted as well. Unlike after
// Restore, the next rounds may differ from those the snapshot's scheduler
// would have made.
func (s *Scheduler) Adopt(data []byte) (*Adoption, error) {
	snap, err := parseSnapshot(data)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.jobs) > 0 {
		return nil, fmt.Errorf("%w: adopt into a scheduler that has %d jobs", ErrInvalid, len(s.jobs))
	}
	if err := snap.check(s.cfg.Throughput != nil, s.cfg.Colocation != nil, s.cfg.Estimator != nil); err != nil {
		return nil, err
	}
	ad := &Adoption{Differences: s.differences(snap)}
	if snap.Version == 1 {
		ad.Differences = append([]Difference{{What: "snapshot version", Snapshot: "1 (no record of its cluster and configuration)", Now: fmt.Sprint(snapshotVersion)}}, ad.Differences...)
	}
	p, err := s.planRestore(snap, false)
	if err != nil {
		return nil, err
	}
	s.apply(snap, p)
	ad.Released = p.released
	ad.MechanismsDropped = p.mechsDropped
	if s.settingsDiffer(snap) {
		ad.Reset = true
		for _, t := range s.tiers {
			t.mech.ForceReset()
		}
	}
	for _, k := range p.released {
		s.log.Warn("adopt: lease released", "job", k)
	}
	return ad, nil
}

// parseSnapshot reads a snapshot's JSON and version. The JSON is read
// strictly (internal/strictjson): a key unknown to the format, or twice in
// one object, is an error; so are bytes that are not UTF-8, which
// encoding/json would read as U+FFFD (Snapshot writes none), so that a
// name would silently become another.
func parseSnapshot(data []byte) (*snapshot, error) {
	if !utf8.Valid(data) {
		return nil, fmt.Errorf("%w: snapshot: not valid UTF-8 (at byte %d)", ErrInvalid, invalidUTF8At(data))
	}
	var snap snapshot
	if err := strictjson.Decode(data, &snap); err != nil {
		return nil, fmt.Errorf("%w: snapshot: %w", ErrInvalid, err)
	}
	if snap.Version != 1 && snap.Version != snapshotVersion {
		return nil, fmt.Errorf("%w: snapshot version %d (this scheduler reads 1 and %d)", ErrInvalid, snap.Version, snapshotVersion)
	}
	return &snap, nil
}

// invalidUTF8At returns the offset of the first byte of data that is not
// part of valid UTF-8.
func invalidUTF8At(data []byte) int {
	for i := 0; i < len(data); {
		r, n := utf8.DecodeRune(data[i:])
		if r == utf8.RuneError && n <= 1 {
			return i
		}
		i += n
	}
	return len(data)
}

// check verifies what a snapshot says of itself, before the cluster is
// looked at: hasModel and hasColocation say whether the scheduler has a
// throughput model and a co-location model. Errors wrap ErrInvalid and
// name the field.
func (snap *snapshot) check(hasModel, hasColocation, hasEstimator bool) error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: snapshot: %s", ErrInvalid, fmt.Sprintf(format, args...))
	}
	switch {
	case len(snap.Jobs) > maxSnapshotJobs || len(snap.Leases) > maxSnapshotJobs || len(snap.Classes) > maxSnapshotJobs:
		return bad("%d jobs, %d leases, %d classes (at most %d each)", len(snap.Jobs), len(snap.Leases), len(snap.Classes), maxSnapshotJobs)
	case snap.NextID < 0 || snap.NextID > 1<<40:
		return bad("next id %d", snap.NextID)
	case len(snap.Cluster) > maxSnapshotServers || len(snap.Failed) > maxSnapshotDevices:
		return bad("%d servers, %d failed devices", len(snap.Cluster), len(snap.Failed))
	case len(snap.Tiers) > maxSnapshotTiers || len(snap.Settings) > maxSnapshotSettings:
		return bad("%d tiers, %d settings", len(snap.Tiers), len(snap.Settings))
	case !(snap.Explored >= 0 && snap.Explored <= maxAttained) || !(snap.ClusterTime >= 0 && snap.ClusterTime <= maxAttained*MaxJobGPUs*1e3):
		return bad("explored %v GPU-seconds of %v", snap.Explored, snap.ClusterTime)
	case !validTime(snap.LastRefit) || snap.LastRefit != 0 && !snap.Refitted:
		return bad("last refit at %v s (refitted %v)", snap.LastRefit, snap.Refitted)
	}
	jobs := make(map[string]*snapJob, len(snap.Jobs))
	ids := make(map[int]*snapJob, len(snap.Jobs))
	for i := range snap.Jobs {
		sj := &snap.Jobs[i]
		if err := checkKey(sj.Key); err != nil {
			return fmt.Errorf("snapshot job %d: %w", i, err)
		}
		if err := sj.Spec.validate(hasModel, hasEstimator); err != nil {
			return fmt.Errorf("snapshot job %q: %w", sj.Key, err)
		}
		for t, v := range sj.Learned {
			if err := t.Validate(); err != nil || !allocation.ValidRate(v) || v == 0 {
				return bad("job %q: learned rate %v on %q (want %g to %g steps/s)", sj.Key, v, t, allocation.MinRate, allocation.MaxRate)
			}
		}
		if sj.SegType != "" {
			if err := sj.SegType.Validate(); err != nil {
				return bad("job %q: segment type: %v", sj.Key, err)
			}
		}
		for _, t := range slices.Concat(sj.Optimistic, sj.Ran, sj.Withdrawn) {
			if err := t.Validate(); err != nil {
				return bad("job %q: optimistic or ran type: %v", sj.Key, err)
			}
		}
		switch {
		case jobs[sj.Key] != nil || ids[sj.ID] != nil:
			return bad("job %q (id %d) appears twice", sj.Key, sj.ID)
		case sj.ID < 0 || sj.ID >= snap.NextID:
			return bad("job %q: id %d outside [0, %d)", sj.Key, sj.ID, snap.NextID)
		case i > 0 && sj.ID < snap.Jobs[i-1].ID:
			return bad("job %q: id %d after id %d (jobs are in order of submission)", sj.Key, sj.ID, snap.Jobs[i-1].ID)
		case !validTime(sj.Arrival) || sj.Rounds < 0:
			return bad("job %q: arrival %v, rounds %d", sj.Key, sj.Arrival, sj.Rounds)
		case sj.Finished && sj.Spec.RemainingSteps != 0:
			return bad("job %q: finished with %v steps left", sj.Key, sj.Spec.RemainingSteps)
		case sj.Announced && !sj.Finished:
			return bad("job %q: announced as finished but not finished", sj.Key)
		case !sj.Spec.Learn && (sj.Learned != nil || sj.Optimistic != nil || sj.Segment != 0 || sj.SegStart != 0 || sj.SegGPUs != 0 || sj.SegType != ""):
			return bad("job %q: learned rates or a segment for a job that does not learn", sj.Key)
		case !sj.Spec.Learn && (sj.Reported != 0 || sj.Last != 0 || sj.LastSegment != 0 || sj.Audit != AuditNone):
			return bad("job %q: reports audited for a job that does not learn", sj.Key)
		case !(sj.Reported >= 0 && sj.Reported <= maxReported) || !(sj.Last >= 0 && sj.Last <= learn.MaxSteps) || sj.LastSegment > sj.Segment ||
			sj.Audit != AuditNone && sj.Audit != AuditPassed && sj.Audit != AuditFailed:
			return bad("job %q: reports add up to %v, the last %v in segment %d of %d, audit %q", sj.Key, sj.Reported, sj.Last, sj.LastSegment, sj.Segment, sj.Audit)
		case !sj.Spec.Learn && (sj.Ran != nil || sj.Read != nil || sj.Withdrawn != nil):
			return bad("job %q: types ran or a read for a job that does not learn", sj.Key)
		case sj.Read != nil && (!validTime(sj.Read.At) || sj.Read.Types < 0 || sj.Read.Types > len(sj.Ran)):
			return bad("job %q: read at %v s after %d types of %d", sj.Key, sj.Read.At, sj.Read.Types, len(sj.Ran))
		case len(sj.Learned) > 1024 || len(sj.Optimistic) > 1024 || len(sj.Ran) > 1024 || len(sj.Withdrawn) > 1024 || !validTime(sj.SegStart) || sj.SegGPUs < 0 || sj.SegGPUs > MaxJobGPUs || sj.Segment > maxSegment || (sj.Segment == 0) != (sj.SegGPUs == 0) && sj.SegGPUs != 0:
			return bad("job %q: %d learned rates, %d optimistic types, segment from %v s on %d GPUs", sj.Key, len(sj.Learned), len(sj.Optimistic), sj.SegStart, sj.SegGPUs)
		case sj.Wait.unrunnable() || int(sj.Wait) >= len(reasonNames):
			return bad("job %q: waits for %v", sj.Key, sj.Wait)
		case len(sj.Attained) > 1024:
			return bad("job %q: attained time on %d types", sj.Key, len(sj.Attained))
		}
		for t, v := range sj.Attained {
			if err := t.Validate(); err != nil {
				return bad("job %q: attained time: %v", sj.Key, err)
			}
			if !(v >= 0 && v <= maxAttained) {
				return bad("job %q: attained %v s on %s (want 0 to %g)", sj.Key, v, t, maxAttained)
			}
		}
		jobs[sj.Key], ids[sj.ID] = sj, sj
	}
	classes := make(map[perfmodel.JobKey]bool, len(snap.Classes))
	for _, k := range snap.Classes {
		if err := k.Validate(); err != nil || classes[k] {
			return bad("co-location class %v (invalid or twice)", k)
		}
		classes[k] = true
	}
	if hasColocation && snap.Version > 1 {
		for _, sj := range snap.Jobs {
			if sj.Spec.Model != nil && !classes[modelKeyOf(sj.Spec)] {
				return bad("job %q: its model %v has no co-location class", sj.Key, modelKeyOf(sj.Spec))
			}
		}
	}
	if err := snap.checkLeases(jobs); err != nil {
		return err
	}
	prios := map[int]bool{}
	for _, st := range snap.Tiers {
		if prios[st.Priority] {
			return bad("priority %d twice", st.Priority)
		}
		if !validTime(st.Solved) {
			return bad("priority %d: solved at %v s", st.Priority, st.Solved)
		}
		prios[st.Priority] = true
	}
	for k, v := range snap.Settings {
		if len(k) > 64 || len(v) > 1<<20 {
			return bad("setting of %d bytes, value of %d bytes", len(k), len(v))
		}
	}
	seen := map[string]bool{}
	for _, sv := range snap.Cluster {
		if sv.ID == "" || seen[sv.ID] || len(sv.ID) > 1<<10 || len(sv.GPUs) > 1<<16 || len(sv.Digest) > 128 {
			return bad("server %q (empty, twice or too long)", sv.ID)
		}
		seen[sv.ID] = true
	}
	return snap.checkLast(jobs, ids, prios)
}

// checkLeases checks the leases against the jobs' specs.
func (snap *snapshot) checkLeases(jobs map[string]*snapJob) error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: snapshot: %s", ErrInvalid, fmt.Sprintf(format, args...))
	}
	leased := map[string]bool{}
	devices := map[Device]bool{}
	for i, sl := range snap.Leases {
		if len(sl.Jobs) < 1 || len(sl.Jobs) > 2 || len(sl.Jobs) == 2 && sl.Jobs[0] == sl.Jobs[1] {
			return bad("lease %d: jobs %q (want one job or two distinct ones)", i, sl.Jobs)
		}
		if err := sl.Type.Validate(); err != nil {
			return bad("lease %d: %v", i, err)
		}
		for _, key := range sl.Jobs {
			sj := jobs[key]
			switch {
			case sj == nil:
				return bad("lease %d: no job %q", i, key)
			case leased[key]:
				return bad("lease %d: job %q is in two leases", i, key)
			case len(sl.Devices) != sj.Spec.GPUs:
				return bad("lease %d: %d devices for job %q of %d GPUs", i, len(sl.Devices), key, sj.Spec.GPUs)
			case len(sj.Spec.Types) > 0 && !slices.Contains(sj.Spec.Types, sl.Type):
				return bad("lease %d: job %q may not run on %s", i, key, sl.Type)
			case sj.Spec.Throughput != nil && !sj.Spec.Learn && !(sj.Spec.Throughput[sl.Type] > 0):
				return bad("lease %d: job %q has no rate on %s", i, key, sl.Type)
			}
			leased[key] = true
		}
		sj := jobs[sl.Jobs[0]]
		if len(sl.Extra) > 0 && (len(sl.Jobs) == 2 || len(sl.Extra) > sj.Spec.maxGPUs()-sj.Spec.GPUs) {
			return bad("lease %d: %d elastic GPUs for jobs %q", i, len(sl.Extra), sl.Jobs)
		}
		for _, d := range slices.Concat(sl.Devices, sl.Extra) {
			if devices[d] {
				return bad("lease %d: device %s/%d is held twice", i, d.Server, d.Index)
			}
			devices[d] = true
		}
	}
	return nil
}

// checkLast checks the last round against the jobs and tiers.
func (snap *snapshot) checkLast(jobs map[string]*snapJob, ids map[int]*snapJob, prios map[int]bool) error {
	lr := snap.Last
	if lr == nil {
		return nil
	}
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: snapshot: last round: %s", ErrInvalid, fmt.Sprintf(format, args...))
	}
	if !validTime(lr.Start) || !(lr.Length > 0 && lr.Length <= allocation.MaxTime) || !(lr.End >= lr.Start && lr.End <= lr.Start+lr.Length) {
		return bad("start %v, length %v, end %v", lr.Start, lr.Length, lr.End)
	}
	if len(lr.Units) > maxSnapshotJobs {
		return bad("%d units", len(lr.Units))
	}
	ran := map[int]bool{}
	for i, u := range lr.Units {
		if len(u.Jobs) < 1 || len(u.Jobs) > 2 || len(u.IDs) != len(u.Jobs) {
			return bad("unit %d: jobs %q, ids %v", i, u.Jobs, u.IDs)
		}
		if err := u.Type.Validate(); err != nil {
			return bad("unit %d: %v", i, err)
		}
		if !prios[u.Priority] {
			return bad("unit %d: priority %d has no tier", i, u.Priority)
		}
		for n, key := range u.Jobs {
			id := u.IDs[n]
			if err := checkKey(key); err != nil {
				return bad("unit %d: %v", i, err)
			}
			switch {
			case id < 0 || id >= snap.NextID || ran[id]:
				return bad("unit %d: job id %d (out of [0, %d) or twice)", i, id, snap.NextID)
			case jobs[key] != nil && jobs[key].ID != id || ids[id] != nil && ids[id].Key != key:
				return bad("unit %d: job %q with id %d, the snapshot's jobs say otherwise", i, key, id)
			}
			ran[id] = true
		}
	}
	return nil
}

// restorePlan is what a restore binds and keeps, resolved against the
// cluster before anything changes.
type restorePlan struct {
	failed       []cluster.GPURef
	leases       []plannedLease
	mechs        map[int]*allocation.Rounds
	released     []string
	mechsDropped bool
}

type plannedLease struct {
	sl          *snapLease
	refs, extra []cluster.GPURef
}

// planRestore resolves a checked snapshot against the cluster: the
// failed devices, each lease's devices, each tier's mechanism. Strict
// (Restore), a lease that cannot be bound or a mechanism that does not
// restore is an error; otherwise (Adopt) the lease is released and the
// mechanism dropped (for another Compat mode; a mechanism state that does
// not validate is an error all the same).
func (s *Scheduler) planRestore(snap *snapshot, strict bool) (*restorePlan, error) {
	p := &restorePlan{mechs: map[int]*allocation.Rounds{}}
	failed := map[cluster.GPURef]bool{}
	for _, d := range snap.Failed {
		r, err := s.st.Lookup(d.Server, d.Index)
		if err != nil {
			if strict {
				return nil, fmt.Errorf("%w: snapshot: failed device: %w", ErrInvalid, err)
			}
			continue
		}
		if !failed[r] {
			failed[r] = true
			p.failed = append(p.failed, r)
		}
	}
	for i := range snap.Leases {
		sl := &snap.Leases[i]
		refs, extra, err := s.resolveLease(sl, failed)
		if err != nil {
			if strict {
				return nil, fmt.Errorf("%w: snapshot: lease of %q: %w", ErrInvalid, sl.Jobs, err)
			}
			p.released = append(p.released, sl.Jobs...)
			continue
		}
		p.leases = append(p.leases, plannedLease{sl, refs, extra})
	}
	slices.Sort(p.released)
	for _, st := range snap.Tiers {
		if len(st.Rounds) == 0 {
			continue
		}
		m := s.newMechanism()
		if err := m.Restore(st.Rounds); err != nil {
			var head struct {
				Compat string `json:"compat"`
			}
			if !strict && json.Unmarshal(st.Rounds, &head) == nil && head.Compat != s.cfg.Compat.String() {
				p.mechsDropped = true // another Compat mode: dropped
				continue
			}
			return nil, fmt.Errorf("%w: snapshot of priority %d: %w", ErrInvalid, st.Priority, err)
		}
		if st.Last && m.Last() == nil || st.Last && snap.Last != nil && m.Last().Start != snap.Last.Start {
			return nil, fmt.Errorf("%w: snapshot of priority %d: its last round is not the scheduler's", ErrInvalid, st.Priority)
		}
		if err := s.checkTierReport(snap, &st); err != nil {
			return nil, err
		}
		p.mechs[st.Priority] = m
	}
	if snap.Last != nil && strict {
		for i, u := range snap.Last.Units {
			if p.mechs[u.Priority] == nil || !slices.ContainsFunc(snap.Tiers, func(st snapTier) bool { return st.Priority == u.Priority && st.Last }) {
				return nil, fmt.Errorf("%w: snapshot: last round: unit %d: priority %d has no last round of its own", ErrInvalid, i, u.Priority)
			}
		}
	}
	return p, nil
}

// checkTierReport checks a tier's mechanism against the scheduler's last
// round, when that round is not reported yet: the report the next Report
// or Round will give the mechanism (the tier's units of the round) must
// be one it accepts (the round not credited yet, its jobs present in the
// round's problem, its types the problem's). A mechanism state of jobs
// absent from its round (present [] or [99]) used to be restored, and the
// next round then failed. The check reports to a copy restored from the
// same bytes; Restore is rare, and this keeps the mechanism's API as it
// is.
func (s *Scheduler) checkTierReport(snap *snapshot, st *snapTier) error {
	if !st.Last || snap.Last == nil || snap.Last.Reported {
		return nil
	}
	rep := allocation.RoundReport{Start: snap.Last.Start}
	for _, u := range snap.Last.Units {
		if u.Priority == st.Priority {
			rep.Ran = append(rep.Ran, allocation.UnitRun{JobIDs: u.IDs, Type: u.Type})
		}
	}
	trial := s.newMechanism()
	err := trial.Restore(st.Rounds)
	if err == nil {
		err = trial.Report(rep)
	}
	if err != nil {
		return fmt.Errorf("%w: snapshot of priority %d: the last round's units do not fit its mechanism: %w", ErrInvalid, st.Priority, err)
	}
	return nil
}

// resolveLease finds a lease's devices in the state: each must exist, be
// of the lease's type, be healthy (failed is what the restore fails) and
// free.
func (s *Scheduler) resolveLease(sl *snapLease, failed map[cluster.GPURef]bool) (refs, extra []cluster.GPURef, err error) {
	resolve := func(devs []Device) ([]cluster.GPURef, error) {
		out := make([]cluster.GPURef, 0, len(devs))
		for _, d := range devs {
			r, err := s.st.Lookup(d.Server, d.Index)
			if err != nil {
				return nil, err
			}
			switch {
			case s.st.Server(r.Server).GPUs[r.GPU].Type != sl.Type:
				return nil, fmt.Errorf("device %s/%d is not a %s", d.Server, d.Index, sl.Type)
			case failed[r] || s.st.Failed(r):
				return nil, fmt.Errorf("device %s/%d has failed", d.Server, d.Index)
			case s.st.Holder(r) != "":
				return nil, fmt.Errorf("device %s/%d is held by %q", d.Server, d.Index, s.st.Holder(r))
			}
			out = append(out, r)
		}
		return out, nil
	}
	if refs, err = resolve(sl.Devices); err != nil {
		return nil, nil, err
	}
	if extra, err = resolve(sl.Extra); err != nil {
		return nil, nil, err
	}
	return refs, extra, nil
}

// apply replaces the scheduler's state with a checked and planned
// snapshot. It cannot fail.
func (s *Scheduler) apply(snap *snapshot, p *restorePlan) {
	// What a scheduler without jobs may still hold from its past (tiers
	// of jobs removed, its last round) is replaced.
	s.tiers = nil
	s.jobs, s.byID, s.gangs, s.order = map[string]*job{}, map[int]*job{}, map[string][]*job{}, nil
	s.last, s.lastEnd, s.reported = nil, 0, false
	s.ranBefore = s.ranBefore[:0]
	s.scratch.units[s.scratch.cur] = s.scratch.units[s.scratch.cur][:0]
	if len(p.failed) > 0 {
		_, _ = s.st.Fail(p.failed...) // positions checked by planRestore
	}
	s.refreshTypes()
	if s.cfg.Colocation != nil {
		s.classes = newClassTable(s.cfg.Colocation)
		s.classes.types = s.types
		for _, k := range snap.Classes {
			_, _ = s.classes.add(k, true)
		}
	}
	for _, st := range snap.Tiers {
		t := s.tierOf(st.Priority)
		if m := p.mechs[st.Priority]; m != nil {
			t.mech = m
		}
		t.learned, t.solved = st.Learned, st.Solved
	}
	for i := range snap.Jobs {
		sj := &snap.Jobs[i]
		j := &job{key: sj.Key, id: sj.ID, spec: cloneSpec(sj.Spec), arrival: sj.Arrival, pidx: -1, class: -1, rounds: sj.Rounds,
			finished: sj.Finished, announced: sj.Announced}
		if j.spec.Learn {
			s.restoreLearned(j, sj)
			s.learned++
		}
		if err := s.ratesFor(j); err != nil {
			s.log.Warn("restore: job rates", "job", j.key, "err", err)
		}
		if s.classes != nil && j.spec.Model != nil && !j.spec.Learn {
			if c, err := s.classes.classOf(s.modelKey(j)); err == nil {
				j.class = c
			}
		}
		j.attained = make([]float64, len(s.types))
		for t, v := range sj.Attained {
			if k, ok := s.typeIdx[t]; ok {
				j.attained[k] = v
			}
		}
		s.jobs[j.key] = j
		s.byID[j.id] = j
		s.order = append(s.order, j)
		j.tier = s.tierOf(j.spec.Priority)
		s.joinGang(j)
	}
	s.nextID = snap.NextID
	s.explored, s.clusterTime = snap.Explored, snap.ClusterTime
	s.refitted, s.lastRefit = snap.Refitted, snap.LastRefit
	s.refreshAll()
	for i, j := range s.order {
		j.wait = snap.Jobs[i].Wait
	}
	for _, pl := range p.leases {
		var l lease
		for i, key := range pl.sl.Jobs {
			l.jobs[i] = s.jobs[key]
		}
		l.holder = l.jobs[0].key
		if l.jobs[1] != nil {
			l.holder = pairHolder(l.jobs[0], l.jobs[1])
		}
		l.typ, l.typeName = s.typeIndex(pl.sl.Type), pl.sl.Type
		_ = s.st.Bind(l.holder, pl.refs) // checked free and healthy by planRestore
		_ = s.st.Bind(l.holder, pl.extra)
		nl := s.newLease()
		*nl = l
		nl.extra = append(nl.extra[:0], pl.extra...)
		s.addLease(nl)
	}
	if lr := snap.Last; lr != nil {
		s.last = &Round{Start: lr.Start, Length: lr.Length}
		s.lastEnd, s.reported = lr.End, lr.Reported
		units := s.scratch.units[s.scratch.cur][:0]
		for _, su := range lr.Units {
			u := unit{tier: s.tierOf(su.Priority), tname: su.Type, typ: s.typeIndex(su.Type), placed: true}
			for n, key := range su.Jobs {
				j := s.jobs[key]
				if j == nil {
					j = &job{key: key, id: su.IDs[n], pidx: -1, class: -1} // removed since: credited to the mechanism only
				}
				u.jobs[n] = j
			}
			u.holder = u.jobs[0].key
			if u.jobs[1] != nil {
				u.holder = pairHolder(u.jobs[0], u.jobs[1])
			}
			u.gpus = u.jobs[0].spec.GPUs
			units = append(units, u)
		}
		s.scratch.units[s.scratch.cur] = units
		for i := range units {
			for _, j := range units[i].jobs {
				if j != nil {
					j.unit = &units[i]
					s.ranBefore = append(s.ranBefore, j)
				}
			}
		}
		for _, st := range snap.Tiers {
			if m := p.mechs[st.Priority]; m != nil && st.Last {
				s.tierOf(st.Priority).last = m.Last()
			}
		}
	}
}

// modelKeyOf is a spec's model key with its scale factor.
func modelKeyOf(spec JobSpec) perfmodel.JobKey {
	k := *spec.Model
	if k.ScaleFactor == 0 {
		k.ScaleFactor = spec.GPUs
	}
	return k
}
