package scheduler

import (
	"fmt"
	"math"
	"slices"

	"github.com/gpusched/gpusched/allocation"
	"github.com/gpusched/gpusched/topology"
)

// RoundReport says what really happened in a round: which jobs ran, for
// how long, how many steps they made, which could not start, and which
// held GPUs outside their turn. What ran and what was held are credited
// to the mechanism's time counters. A RoundReport is a plain value, safe
// for concurrent reads; Report does not keep it.
type RoundReport struct {
	// Start is the Start of the round reported on (the last one).
	Start float64 `json:"start"`
	// Ran lists the jobs that ran. A job of the round that is not listed
	// did not run: it is not credited.
	Ran []Ran `json:"ran"`
	// Failed lists jobs of the round that could not start (a pod that
	// failed, a node that refused); their GPUs are released and they are
	// placed afresh at the next round. A job is listed at most once, in
	// Ran or in Failed (ErrInvalid otherwise).
	Failed []string `json:"failed,omitempty"`
	// Held lists GPU time jobs held in the round outside their turn, which
	// no other job could use: GPUs a job's processes kept after its lease
	// ended (a preempted job whose pods are still terminating), or beyond
	// its lease while it ran (processes of its earlier run still going
	// beside those of its new one: a Job's pods deleted and replaced).
	// Each is charged as if it had run for that time (see Held), a job
	// listed in Ran as well for its run. A job is listed at most once per
	// type (ErrInvalid otherwise).
	Held []Held `json:"held,omitempty"`
}

// Held is GPU time one job held on one type in a round outside its turn
// (after its lease, or beyond it): a plain value, safe for concurrent
// reads.
//
// The unit is the GPU-second (one GPU held for one second), the time an
// embedder measures on its nodes, where a preempted job's processes go one
// by one. The core counts a job's time (its attained time and its round
// mechanism's received time, per type) in seconds of the whole job
// running, so a job is charged GPUSeconds / JobSpec.GPUs seconds (its GPUs
// at the report): 4 GPUs held for 35 s charge a 4-GPU job 35 s, 2 of them
// for 35 s charge it 17.5 s, and the same 4 GPUs charge an 8-GPU job
// 17.5 s. A job holds at most its GPUs for the round so (beside its run,
// if it ran): GPUSeconds is in [0, round length x JobSpec.GPUs], summed
// over the job's entries, as a run is at most the round (an elastic job's
// extra GPUs are not charged, as they are not while it runs).
type Held struct {
	Job  string           `json:"job"`
	Type topology.GPUType `json:"type"`
	// GPUSeconds is the sum over the GPUs of Type it held of the seconds
	// each was held in the round.
	GPUSeconds float64 `json:"gpu_seconds"`
}

// heldCredit is a Held entry checked: its job, its type (by index among
// the scheduler's types, and by name) and the seconds it is charged.
type heldCredit struct {
	j    *job
	k    int
	typ  topology.GPUType
	secs float64
}

// Ran is one job's part of a round: a plain value, safe for concurrent
// reads.
type Ran struct {
	Job string `json:"job"`
	// Seconds is how long it ran, at most the round's length.
	Seconds float64 `json:"seconds"`
	// Steps is the work it did; it counts RemainingSteps down, when they
	// are known (above 0). A job whose known steps reach 0 has finished:
	// it leaves the rounds and the next Round lists it in Finished.
	Steps float64 `json:"steps,omitempty"`
}

// Report records what ran in the last round, before the next Round. A
// round left without a report is credited in full (every job for the
// round's length). Seconds
// are at most the round's length, and the longest of them is when the
// round ended (the next may start then). With Config.Compat set to
// allocation.CompatGavel a job may be credited more than a round (Gavel
// credits from the end of the last busy round), up to allocation.MaxTime
// seconds; attained times saturate far above any reachable time.
//
// The GPU time of RoundReport.Held is charged to each job's attained time
// on the type and, as a run of the job alone on that type, to its tier's
// round mechanism, so that the mechanism owes it that much less
// (allocation.Rounds.Report). A job the mechanism cannot be told about (not
// in its tier's problem of the round: submitted or moved to another
// priority since, or finished before it) is charged attained time only;
// one whose mechanism keeps no time for it alone (outside the allocation)
// is charged there nothing. Held time is charged within the round (at most
// its length, whatever Compat says) and does not count as a round run
// (JobStatus.Rounds). An entry for a job not submitted wraps
// ErrStaleReport and ErrUnknownJob; one twice for a job and type, for a
// type the cluster has none of, or with GPU-seconds out of range or NaN
// wraps ErrInvalid.
//
// A report is taken whole or not at all: an error changes nothing (no
// attained time, round count, remaining work, lease or mechanism), and
// the report may be sent again, corrected. An entry it refuses is a
// *ReportError naming the field (FieldRan, FieldFailed, FieldHeld) and
// the entry; an entry of Ran or Failed for a job that did not run in the
// round wraps ErrStaleReport, and ErrUnknownJob too when no such job is
// submitted; the mechanisms' own refusal (allocation.Rounds.Report: a
// round they no longer have) is not, and neither are a stale round or a
// report sent twice.
func (s *Scheduler) Report(rep RoundReport) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.last == nil || rep.Start != s.last.Start {
		return fmt.Errorf("%w: the report is for the round at %v", ErrStaleReport, rep.Start)
	}
	if s.reported {
		return fmt.Errorf("%w: the round at %v is already reported", ErrStaleReport, rep.Start)
	}
	// Check everything before changing anything: the entries, then the
	// mechanisms (which may still refuse, and are rolled back if one
	// does); only then the jobs.
	s.mark++
	ran, err := s.checkRan(rep)
	if err != nil {
		return err
	}
	if err := s.checkFailed(rep); err != nil {
		return err
	}
	held, err := s.checkHeld(rep.Held)
	if err != nil {
		return err
	}
	if err := s.creditReport(held); err != nil {
		return err
	}
	s.applyReport(rep, ran, held)
	return nil
}

// inRound returns the job of the last round under a key (nil if none): a
// job of the round has unit != nil.
func (s *Scheduler) inRound(key string) *job {
	if j := s.jobs[key]; j != nil && j.unit != nil {
		return j
	}
	return nil
}

// checkRan checks a report's Ran entries and returns their jobs, in
// order, in memory reused from report to report; each carries s.mark
// (counted once) and the seconds it ran (ranFor).
func (s *Scheduler) checkRan(rep RoundReport) ([]*job, error) {
	ran := s.scratch.reported[:0]
	for i, r := range rep.Ran {
		j := s.inRound(r.Job)
		var err error
		switch {
		case j == nil:
			err = s.notInRound(r.Job, "job", rep.Start)
		case j.mark == s.mark:
			err = fmt.Errorf("%w: job %q reported twice", ErrInvalid, r.Job)
		case !(r.Seconds >= 0 && r.Seconds <= allocation.MaxTime) || r.Seconds > s.last.Length*(1+1e-9) && s.cfg.Compat != allocation.CompatGavel:
			err = fmt.Errorf("%w: job %q ran %v s in a round of %v s", ErrInvalid, r.Job, r.Seconds, s.last.Length)
		case !finiteNonNeg(r.Steps):
			err = fmt.Errorf("%w: job %q: %v steps", ErrInvalid, r.Job, r.Steps)
		}
		if err != nil {
			s.scratch.reported = ran
			return nil, &ReportError{Field: FieldRan, Index: i, Err: err}
		}
		j.mark, j.ranFor = s.mark, r.Seconds
		ran = append(ran, j)
	}
	s.scratch.reported = ran
	return ran, nil
}

// notInRound is the error of a report's entry for a job that did not run
// in the round at start: ErrStaleReport, and ErrUnknownJob too when no
// such job is submitted (never was, or was removed).
func (s *Scheduler) notInRound(key, what string, start float64) error {
	if _, ok := s.jobs[key]; !ok {
		return fmt.Errorf("%w: %w: %s %q is not submitted (never, or removed since)", ErrStaleReport, ErrUnknownJob, what, key)
	}
	return fmt.Errorf("%w: %s %q did not run in the round at %v", ErrStaleReport, what, key, start)
}

// checkFailed checks a report's Failed entries (after checkRan): jobs of
// the round, not in Ran, each once.
func (s *Scheduler) checkFailed(rep RoundReport) error {
	if len(rep.Failed) == 0 {
		return nil
	}
	failed := make(map[string]bool, len(rep.Failed))
	for i, key := range rep.Failed {
		j := s.inRound(key)
		var err error
		switch {
		case j == nil:
			err = s.notInRound(key, "failed job", rep.Start)
		case j.mark == s.mark:
			err = fmt.Errorf("%w: job %q is reported both as run and as failed", ErrInvalid, key)
		case failed[key]:
			err = fmt.Errorf("%w: job %q reported failed twice", ErrInvalid, key)
		}
		if err != nil {
			return &ReportError{Field: FieldFailed, Index: i, Err: err}
		}
		failed[key] = true
	}
	return nil
}

// creditReport credits the tiers' mechanisms with a checked report: each
// is checkpointed first (allocation.Rounds.Checkpoint), and if one
// refuses, those credited already are rolled back, so that nothing
// changed. Jobs of the report's Ran carry s.mark.
func (s *Scheduler) creditReport(held []heldCredit) error {
	for _, t := range s.tiers {
		t.mech.Checkpoint()
	}
	secs := func(j *job) (float64, bool) {
		if j.mark != s.mark {
			return 0, false // not in this report (ranFor is an older report's)
		}
		return j.ranFor, true
	}
	// A unit (a job, or a pair) is credited for the longest time one of
	// its jobs ran.
	err := s.creditMechanisms(func(u *unit) (float64, bool) {
		d, ok := secs(u.jobs[0])
		if u.jobs[1] != nil {
			d2, ok2 := secs(u.jobs[1])
			d, ok = max(d, d2), ok || ok2
		}
		return d, ok
	}, held)
	for _, t := range s.tiers {
		if err != nil {
			t.mech.Rollback()
		} else {
			t.mech.Commit()
		}
	}
	return err
}

// applyReport credits a checked report (its mechanisms' part done): the
// attained times of what ran and what was held, the round counts, the
// remaining work (a job whose work is done leaves the rounds), and the
// leases of the jobs that failed.
func (s *Scheduler) applyReport(rep RoundReport, ran []*job, held []heldCredit) {
	end := s.last.Start
	var finished []*job
	for i, r := range rep.Ran {
		j := ran[i]
		if s.cfg.Compat != allocation.CompatGavel {
			end = max(end, s.last.Start+min(r.Seconds, s.last.Length))
		}
		if k := j.unit.typ; k >= 0 { // -1: every GPU of its type left
			j.attained[k] = min(j.attained[k]+r.Seconds, maxAttained)
		}
		j.rounds++
		if r.Steps > 0 && j.spec.RemainingSteps > 0 && s.countDown(j, r.Steps) {
			finished = append(finished, j)
		}
	}
	for _, c := range held {
		c.j.attained[c.k] = min(c.j.attained[c.k]+c.secs, maxAttained)
	}
	for _, key := range rep.Failed {
		if j := s.inRound(key); j.lease != nil {
			s.evict(j.lease.holder)
		}
	}
	s.reported = true
	s.lastEnd = end
	for _, j := range finished {
		// It leaves the rounds (its GPUs are released at the next one).
		j.finished = true
		s.auditDone(j)
		if g := j.spec.Gang; g != "" {
			s.refreshGang(g)
		} else {
			s.settle(j)
		}
	}
}

// countDown counts a job's remaining work down by the steps it made, in
// its spec and its tier's problem; it reports whether the work is done.
func (s *Scheduler) countDown(j *job, steps float64) bool {
	j.spec.RemainingSteps = math.Max(0, j.spec.RemainingSteps-steps)
	if t := j.tier; !t.dirty && j.pidx >= 0 && j.pidx < len(t.problem.Jobs) && t.problem.Jobs[j.pidx].ID == j.id {
		t.problem.Jobs[j.pidx].RemainingSteps = j.spec.RemainingSteps
	}
	return j.spec.RemainingSteps == 0
}

// checkHeld checks a report's Held entries against the last round (of
// length s.last.Length) and returns the charges, in memory reused from
// report to report.
func (s *Scheduler) checkHeld(held []Held) ([]heldCredit, error) {
	if len(held) == 0 {
		return nil, nil
	}
	seen := make(map[heldKey]bool, len(held))
	total := make(map[*job]float64, len(held))
	out := s.scratch.held[:0]
	for i, h := range held {
		c, err := s.checkHeldEntry(h, seen, total)
		if err != nil {
			s.scratch.held = out
			return nil, &ReportError{Field: FieldHeld, Index: i, Err: err}
		}
		out = append(out, c)
	}
	s.scratch.held = out
	return out, nil
}

// heldKey is a job and a type (by index) of a report's Held entries.
type heldKey struct {
	j *job
	k int
}

// checkHeldEntry checks one Held entry, given the job and type pairs of
// those before it (seen) and the GPU-seconds of each job so far (total),
// which it updates.
func (s *Scheduler) checkHeldEntry(h Held, seen map[heldKey]bool, total map[*job]float64) (heldCredit, error) {
	j := s.jobs[h.Job]
	if j == nil {
		return heldCredit{}, fmt.Errorf("%w: held GPUs: %w %q", ErrStaleReport, ErrUnknownJob, h.Job)
	}
	k := s.typeIndex(h.Type)
	length := s.last.Length
	most := length * float64(j.spec.GPUs)
	switch {
	case k < 0:
		return heldCredit{}, fmt.Errorf("%w: job %q held GPUs of type %q, which the cluster has none of", ErrInvalid, h.Job, h.Type)
	case seen[heldKey{j, k}]:
		return heldCredit{}, fmt.Errorf("%w: job %q held %s GPUs reported twice", ErrInvalid, h.Job, h.Type)
	case !(h.GPUSeconds >= 0 && total[j]+h.GPUSeconds <= most*(1+1e-9)):
		return heldCredit{}, fmt.Errorf("%w: job %q held %v GPU-seconds of %s (want 0 to %g in all: its %d GPUs for the round of %v s)",
			ErrInvalid, h.Job, h.GPUSeconds, h.Type, most, j.spec.GPUs, length)
	}
	seen[heldKey{j, k}] = true
	total[j] += h.GPUSeconds
	return heldCredit{j: j, k: k, typ: h.Type, secs: min(h.GPUSeconds/float64(j.spec.GPUs), length)}, nil
}

// creditMechanisms reports to each tier's mechanism the units of the last
// round that ran, for the seconds secs gives (units it skips did not run),
// and the jobs that held GPUs outside their turn, each as a unit of its
// own, where the mechanism takes it (allocation.Rounds.Reportable).
func (s *Scheduler) creditMechanisms(secs func(u *unit) (float64, bool), held []heldCredit) error {
	units := s.scratch.units[s.scratch.cur]
	ids := slices.Grow(s.scratch.ids[:0], 2*len(units)) // Rounds.Report keeps none
	for _, t := range s.tiers {
		if t.last == nil {
			continue
		}
		rep := allocation.RoundReport{Start: t.last.Start, Ran: s.scratch.ran[:0]}
		for i := range units {
			u := &units[i]
			if u.tier != t || !u.placed {
				continue
			}
			d, ok := secs(u)
			if !ok {
				continue
			}
			start := len(ids)
			ids = append(ids, u.jobs[0].id)
			if u.jobs[1] != nil {
				ids = append(ids, u.jobs[1].id)
			}
			rep.Ran = append(rep.Ran, allocation.UnitRun{JobIDs: ids[start:len(ids):len(ids)], Type: u.tname, Seconds: d})
		}
		for _, c := range held {
			if c.j.tier != t || !t.mech.Reportable(c.j.id, c.typ) {
				continue
			}
			ids = append(ids, c.j.id)
			rep.Ran = append(rep.Ran, allocation.UnitRun{JobIDs: ids[len(ids)-1 : len(ids) : len(ids)], Type: c.typ, Seconds: c.secs})
		}
		s.scratch.ran = rep.Ran
		s.scratch.ids = ids
		if err := t.mech.Report(rep); err != nil {
			return fmt.Errorf("scheduler: crediting the round at %v: %w", t.last.Start, err)
		}
	}
	return nil
}

// creditUnreported credits the last round, if it was not reported, in
// full: every job that ran gets the time to now, at most a round, in its
// attained time and in its mechanism.
func (s *Scheduler) creditUnreported(now float64) error {
	if s.last == nil || s.reported {
		return nil
	}
	d := math.Min(now-s.last.Start, s.last.Length)
	for _, j := range s.ranBefore {
		if j.unit != nil && s.jobs[j.key] == j {
			c := creditedJob{j: j, k: j.unit.typ, rounds: j.rounds}
			if k := j.unit.typ; k >= 0 { // -1: every GPU of its type left
				c.attained = j.attained[k]
				j.attained[k] = min(j.attained[k]+d, maxAttained)
			}
			s.scratch.credited = append(s.scratch.credited, c) // for undo
			j.rounds++
		}
	}
	s.reported = true
	return s.creditMechanisms(func(*unit) (float64, bool) { return d, true }, nil)
}
