package scheduler

import (
	"cmp"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/gpusched/gpusched/allocation"
	"github.com/gpusched/gpusched/cluster"
	"github.com/gpusched/gpusched/topology"
)

// snapshotVersion is the format of Snapshot.
const snapshotVersion = 1

// maxSnapshotJobs bounds the jobs a snapshot may hold.
const maxSnapshotJobs = 1 << 22

type snapshot struct {
	Version int         `json:"version"`
	NextID  int         `json:"next_id"`
	Jobs    []snapJob   `json:"jobs"`
	Leases  []snapLease `json:"leases,omitempty"`
	Failed  []Device    `json:"failed,omitempty"`
	Tiers   []snapTier  `json:"tiers,omitempty"`
}

type snapJob struct {
	Key      string                       `json:"key"`
	ID       int                          `json:"id"`
	Spec     JobSpec                      `json:"spec"`
	Arrival  float64                      `json:"arrival"`
	Attained map[topology.GPUType]float64 `json:"attained,omitempty"`
	Rounds   int                          `json:"rounds,omitempty"`
}

type snapLease struct {
	Jobs    []string         `json:"jobs"`
	Type    topology.GPUType `json:"type"`
	Devices []Device         `json:"devices"`
}

// snapTier holds a tier's mechanism state (allocation.Rounds.Snapshot).
type snapTier struct {
	Priority int             `json:"priority"`
	Rounds   json.RawMessage `json:"rounds,omitempty"`
}

// Snapshot returns the scheduler's state as JSON: the jobs with their
// specs, arrivals and attained service, the leases (which job holds which
// devices, by server id and NVML index) and the failed devices, so that a
// restarted scheduler (Restore) keeps its jobs where they run.
func (s *Scheduler) Snapshot() ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	snap := snapshot{Version: snapshotVersion, NextID: s.nextID}
	all := make([]*job, 0, len(s.jobs))
	for _, j := range s.jobs {
		all = append(all, j)
	}
	slices.SortFunc(all, func(a, b *job) int { return cmp.Compare(a.id, b.id) })
	for _, j := range all {
		sj := snapJob{Key: j.key, ID: j.id, Spec: j.spec, Arrival: j.arrival, Rounds: j.rounds}
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
			if !slices.Contains(l.extra, r) { // elastic extras are decided each round
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
		st := snapTier{Priority: t.priority}
		if len(t.jobs) > 0 {
			raw, err := t.mech.Snapshot()
			if err != nil {
				return nil, fmt.Errorf("scheduler: snapshot of priority %d: %w", t.priority, err)
			}
			st.Rounds = raw
		}
		snap.Tiers = append(snap.Tiers, st)
	}
	return json.Marshal(snap)
}

// Restore loads a Snapshot into a scheduler that has no jobs yet, built
// with the same configuration and the cluster as it is now (servers added
// first). Jobs keep their keys, IDs, specs, arrivals and attained service;
// each tier's round mechanism keeps its allocation, time counters and
// deficits (allocation.Rounds.Restore); devices marked failed are failed
// again; leases are bound again where their devices still exist and are
// free, and dropped otherwise (logged), so a restart never double-books a
// device. A snapshot that does not parse, or whose jobs or mechanism
// states do not validate, is an error wrapping ErrInvalid and changes
// nothing.
func (s *Scheduler) Restore(data []byte) error {
	var snap snapshot
	if err := json.Unmarshal(data, &snap); err != nil {
		return fmt.Errorf("%w: snapshot: %w", ErrInvalid, err)
	}
	if snap.Version != snapshotVersion {
		return fmt.Errorf("%w: snapshot version %d (want %d)", ErrInvalid, snap.Version, snapshotVersion)
	}
	if len(snap.Jobs) > maxSnapshotJobs || snap.NextID < 0 || snap.NextID > 1<<40 {
		return fmt.Errorf("%w: snapshot of %d jobs, next id %d", ErrInvalid, len(snap.Jobs), snap.NextID)
	}
	keys := map[string]bool{}
	ids := map[int]bool{}
	for i := range snap.Jobs {
		sj := &snap.Jobs[i]
		if err := checkKey(sj.Key); err != nil {
			return fmt.Errorf("snapshot job %d: %w", i, err)
		}
		if err := sj.Spec.validate(s.cfg.Throughput != nil); err != nil {
			return fmt.Errorf("snapshot job %q: %w", sj.Key, err)
		}
		switch {
		case keys[sj.Key] || ids[sj.ID]:
			return fmt.Errorf("%w: snapshot job %q (id %d) appears twice", ErrInvalid, sj.Key, sj.ID)
		case sj.ID < 0 || sj.ID >= snap.NextID:
			return fmt.Errorf("%w: snapshot job %q: id %d outside [0, %d)", ErrInvalid, sj.Key, sj.ID, snap.NextID)
		case !validTime(sj.Arrival) || sj.Rounds < 0:
			return fmt.Errorf("%w: snapshot job %q: arrival %v, rounds %d", ErrInvalid, sj.Key, sj.Arrival, sj.Rounds)
		}
		for t, v := range sj.Attained {
			if !finiteNonNeg(v) {
				return fmt.Errorf("%w: snapshot job %q: attained %v on %s", ErrInvalid, sj.Key, v, t)
			}
		}
		keys[sj.Key], ids[sj.ID] = true, true
	}
	prios := map[int]bool{}
	for _, st := range snap.Tiers {
		if prios[st.Priority] {
			return fmt.Errorf("%w: snapshot: priority %d twice", ErrInvalid, st.Priority)
		}
		prios[st.Priority] = true
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.jobs) > 0 {
		return fmt.Errorf("%w: restore into a scheduler that has %d jobs", ErrInvalid, len(s.jobs))
	}
	// The mechanisms first: they are the last part that can fail.
	mechs := map[int]*allocation.Rounds{}
	for _, st := range snap.Tiers {
		if len(st.Rounds) == 0 {
			continue
		}
		m := s.newMechanism()
		if err := m.Restore(st.Rounds); err != nil {
			return fmt.Errorf("%w: snapshot of priority %d: %w", ErrInvalid, st.Priority, err)
		}
		mechs[st.Priority] = m
	}
	for _, d := range snap.Failed {
		if r, err := s.st.Lookup(d.Server, d.Index); err == nil {
			_, _ = s.st.Fail(r)
		}
	}
	s.refreshTypes()
	for i := range snap.Jobs {
		sj := &snap.Jobs[i]
		j := &job{key: sj.Key, id: sj.ID, spec: cloneSpec(sj.Spec), arrival: sj.Arrival, pidx: -1, class: -1, rounds: sj.Rounds}
		if err := s.ratesFor(j); err != nil {
			s.log.Warn("restore: job rates", "job", j.key, "err", err)
		}
		if s.classes != nil && j.spec.Model != nil {
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
	slices.SortFunc(s.order, func(a, b *job) int { return cmp.Compare(a.id, b.id) })
	s.refreshAll()
	for prio, m := range mechs {
		s.tierOf(prio).mech = m
	}
	s.nextID = snap.NextID
	for _, sl := range snap.Leases {
		if err := s.restoreLease(sl); err != nil {
			s.log.Warn("restore: lease dropped", "jobs", sl.Jobs, "err", err)
		}
	}
	return nil
}

func (s *Scheduler) restoreLease(sl snapLease) error {
	if len(sl.Jobs) < 1 || len(sl.Jobs) > 2 || len(sl.Devices) == 0 {
		return fmt.Errorf("%w: a lease of %d jobs and %d devices", ErrInvalid, len(sl.Jobs), len(sl.Devices))
	}
	var l lease
	for i, key := range sl.Jobs {
		j := s.jobs[key]
		if j == nil {
			return fmt.Errorf("%w: %q", ErrUnknownJob, key)
		}
		l.jobs[i] = j
	}
	l.holder = l.jobs[0].key
	if l.jobs[1] != nil {
		l.holder = pairHolder(l.jobs[0], l.jobs[1])
	}
	k, ok := s.typeIdx[sl.Type]
	if !ok {
		return fmt.Errorf("%w: type %s not in the cluster", ErrInvalid, sl.Type)
	}
	l.typ, l.typeName = k, sl.Type
	refs := make([]cluster.GPURef, 0, len(sl.Devices))
	for _, d := range sl.Devices {
		r, err := s.st.Lookup(d.Server, d.Index)
		if err != nil {
			return err
		}
		if s.st.Server(r.Server).GPUs[r.GPU].Type != sl.Type {
			return fmt.Errorf("%w: device %s/%d is not a %s", ErrInvalid, d.Server, d.Index, sl.Type)
		}
		refs = append(refs, r)
	}
	for _, j := range l.jobs {
		if j != nil && j.lease != nil {
			return fmt.Errorf("%w: job %q is in two leases", ErrInvalid, j.key)
		}
	}
	if err := s.st.Bind(l.holder, refs); err != nil {
		return err
	}
	nl := s.newLease()
	*nl = l
	nl.extra = nil
	s.addLease(nl)
	return nil
}
