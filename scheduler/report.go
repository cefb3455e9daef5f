package scheduler

import (
	"fmt"
	"math"
	"slices"

	"github.com/gpusched/gpusched/allocation"
)

// RoundReport says what really happened in a round: which jobs ran, for
// how long, how many steps they made, and which could not start. Only
// what ran is credited to the mechanism's time counters. A RoundReport is
// a plain value, safe for concurrent reads; Report does not keep it.
type RoundReport struct {
	// Start is the Start of the round reported on (the last one).
	Start float64 `json:"start"`
	// Ran lists the jobs that ran. A job of the round that is not listed
	// did not run: it is not credited.
	Ran []Ran `json:"ran"`
	// Failed lists jobs of the round that could not start (a pod that
	// failed, a node that refused); their GPUs are released and they are
	// placed afresh at the next round.
	Failed []string `json:"failed,omitempty"`
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
func (s *Scheduler) Report(rep RoundReport) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.last == nil || rep.Start != s.last.Start {
		return fmt.Errorf("%w: the report is for the round at %v", ErrStaleReport, rep.Start)
	}
	if s.reported {
		return fmt.Errorf("%w: the round at %v is already reported", ErrStaleReport, rep.Start)
	}
	// Check everything before changing anything. A job of the round has
	// unit != nil; mark counts it once.
	inRound := func(key string) *job {
		if j := s.jobs[key]; j != nil && j.unit != nil {
			return j
		}
		return nil
	}
	s.mark++
	ran := s.scratch.reported[:0]
	for _, r := range rep.Ran {
		j := inRound(r.Job)
		switch {
		case j == nil:
			return fmt.Errorf("%w: job %q did not run in the round at %v", ErrStaleReport, r.Job, rep.Start)
		case j.mark == s.mark:
			return fmt.Errorf("%w: job %q reported twice", ErrInvalid, r.Job)
		case !(r.Seconds >= 0 && r.Seconds <= allocation.MaxTime) || r.Seconds > s.last.Length*(1+1e-9) && s.cfg.Compat != allocation.CompatGavel:
			return fmt.Errorf("%w: job %q ran %v s in a round of %v s", ErrInvalid, r.Job, r.Seconds, s.last.Length)
		case !finiteNonNeg(r.Steps):
			return fmt.Errorf("%w: job %q: %v steps", ErrInvalid, r.Job, r.Steps)
		}
		j.mark, j.ranFor = s.mark, r.Seconds
		ran = append(ran, j)
	}
	s.scratch.reported = ran
	for _, key := range rep.Failed {
		if inRound(key) == nil {
			return fmt.Errorf("%w: failed job %q did not run in the round at %v", ErrStaleReport, key, rep.Start)
		}
	}
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
		if r.Steps > 0 && j.spec.RemainingSteps > 0 {
			j.spec.RemainingSteps = math.Max(0, j.spec.RemainingSteps-r.Steps)
			if t := j.tier; !t.dirty && j.pidx >= 0 && j.pidx < len(t.problem.Jobs) && t.problem.Jobs[j.pidx].ID == j.id {
				t.problem.Jobs[j.pidx].RemainingSteps = j.spec.RemainingSteps
			}
			if j.spec.RemainingSteps == 0 {
				finished = append(finished, j)
			}
		}
	}

	for _, key := range rep.Failed {
		if j := inRound(key); j.lease != nil {
			s.evict(j.lease.holder)
		}
	}
	// Credit the mechanisms with what ran: a unit (a job, or a pair) for
	// the longest time one of its jobs ran.
	secs := func(j *job) (float64, bool) {
		if j.mark != s.mark {
			return 0, false // not in this report (ranFor is an older report's)
		}
		return j.ranFor, true
	}
	if err := s.creditMechanisms(func(u *unit) (float64, bool) {
		d, ok := secs(u.jobs[0])
		if u.jobs[1] != nil {
			d2, ok2 := secs(u.jobs[1])
			d, ok = max(d, d2), ok || ok2
		}
		return d, ok
	}); err != nil {
		return err
	}
	s.reported = true
	s.lastEnd = end
	for _, j := range finished {
		// It leaves the rounds (its GPUs are released at the next one).
		j.finished = true
		if g := j.spec.Gang; g != "" {
			s.refreshGang(g)
		} else {
			s.settle(j)
		}
	}
	return nil
}

// creditMechanisms reports to each tier's mechanism the units of the last
// round that ran, for the seconds secs gives (units it skips did not run).
func (s *Scheduler) creditMechanisms(secs func(u *unit) (float64, bool)) error {
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
			if k := j.unit.typ; k >= 0 { // -1: every GPU of its type left
				j.attained[k] = min(j.attained[k]+d, maxAttained)
			}
			j.rounds++
		}
	}
	s.reported = true
	return s.creditMechanisms(func(*unit) (float64, bool) { return d, true })
}
