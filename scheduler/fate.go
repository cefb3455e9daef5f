package scheduler

import (
	"fmt"
	"slices"

	"github.com/gpusched/gpusched/topology"
)

// JobState is where a job stands: Waiting, Running, Finished or
// Unrunnable ([JobStatus.State], [JobFate.State]). It is a number, safe
// for concurrent use; it reads and writes as its name in JSON.
type JobState uint8

const (
	// Waiting: the job does not run now, and may run in a later round;
	// its Reason says why it waits.
	Waiting JobState = iota
	// Running: the job holds GPUs (it runs in the last round, or holds
	// GPUs bound or restored since).
	Running
	// Finished: its remaining steps, known, reached 0 after a report. It
	// leaves the rounds, is listed once in Round.Finished, and stays
	// Finished (Status answers for it) until Remove, or until Update
	// gives it remaining steps again.
	Finished
	// Unrunnable: the job cannot run on the cluster as it is; its Reason
	// says why. It leaves the rounds, is listed in every Round.Waiting,
	// and is looked at again whenever servers join or leave and when its
	// spec or its gang changes.
	Unrunnable
)

var stateNames = [...]string{"waiting", "running", "finished", "unrunnable"}

// String returns the state's name: waiting, running, finished or
// unrunnable.
func (s JobState) String() string {
	if int(s) < len(stateNames) {
		return stateNames[s]
	}
	return fmt.Sprintf("JobState(%d)", uint8(s))
}

// MarshalText writes the state's name.
func (s JobState) MarshalText() ([]byte, error) {
	if int(s) >= len(stateNames) {
		return nil, fmt.Errorf("%w: job state %d", ErrInvalid, uint8(s))
	}
	return []byte(s.String()), nil
}

// UnmarshalText reads a state's name.
func (s *JobState) UnmarshalText(b []byte) error {
	if i := slices.Index(stateNames[:], string(b)); i >= 0 {
		*s = JobState(i)
		return nil
	}
	return fmt.Errorf("%w: job state %q (want waiting, running, finished or unrunnable)", ErrInvalid, b)
}

// Reason says why a job waits or cannot run. It is a number, safe for
// concurrent use; it reads and writes as its name in JSON.
type Reason uint8

const (
	// NoReason: the job runs or has finished.
	NoReason Reason = iota

	// ReasonNew (waiting): submitted, or returned to the rounds by Update
	// or by servers that joined, since the last round.
	ReasonNew
	// ReasonNoCapacity (waiting): this round's GPUs went to other jobs
	// (the policy's shares and the round mechanism's order chose them).
	ReasonNoCapacity
	// ReasonNoRoom (waiting): the mechanism chose the job, but no server
	// had room for it (GPUs of its type spread thin, or fewer on any one
	// server than a SingleServer job needs).
	ReasonNoRoom
	// ReasonPreempted (waiting): the job held GPUs in the last round and
	// lost them: to other jobs at this round, or since, to a failure, a
	// server that left, or a report that said it failed to start.
	ReasonPreempted
	// ReasonGang (waiting): the job's gang could not run whole this
	// round, so none of its jobs runs.
	ReasonGang

	// ReasonNoType (unrunnable): none of the GPU types present is one the
	// job may run on (JobSpec.Types).
	ReasonNoType
	// ReasonNoRate (unrunnable): the job has no rate (0, or none its
	// model gives) on any type present that it may run on.
	ReasonNoRate
	// ReasonTooLarge (unrunnable): it asks for more GPUs than the cluster
	// has, failed or not, of every type present that it may run on.
	ReasonTooLarge
	// ReasonServerTooSmall (unrunnable): a SingleServer job that asks for
	// more GPUs than any one server has of every type it may run on.
	ReasonServerTooSmall
	// ReasonGangUnrunnable (unrunnable): another job of its gang is
	// unrunnable, so the gang can never run whole.
	ReasonGangUnrunnable
)

var reasonNames = [...]string{"", "new", "no-capacity", "no-room", "preempted", "gang", "no-type", "no-rate", "too-large", "server-too-small", "gang-unrunnable"}

// String returns the reason's name ("" for NoReason; new, no-capacity,
// no-room, preempted, gang, no-type, no-rate, too-large,
// server-too-small, gang-unrunnable).
func (r Reason) String() string {
	if int(r) < len(reasonNames) {
		return reasonNames[r]
	}
	return fmt.Sprintf("Reason(%d)", uint8(r))
}

// MarshalText writes the reason's name.
func (r Reason) MarshalText() ([]byte, error) {
	if int(r) >= len(reasonNames) {
		return nil, fmt.Errorf("%w: reason %d", ErrInvalid, uint8(r))
	}
	return []byte(r.String()), nil
}

// UnmarshalText reads a reason's name.
func (r *Reason) UnmarshalText(b []byte) error {
	if i := slices.Index(reasonNames[:], string(b)); i >= 0 {
		*r = Reason(i)
		return nil
	}
	return fmt.Errorf("%w: reason %q", ErrInvalid, b)
}

// unrunnable tells whether the reason is one of an unrunnable job.
func (r Reason) unrunnable() bool { return r >= ReasonNoType }

// JobFate is a job that does not run in a round, and why: a plain value,
// safe for concurrent reads.
type JobFate struct {
	Job    string   `json:"job"`
	State  JobState `json:"state"`  // Waiting or Unrunnable
	Reason Reason   `json:"reason"` // never NoReason
}

// allows reports whether the job may run on type t (JobSpec.Types).
func (j *job) allows(t topology.GPUType) bool {
	return len(j.spec.Types) == 0 || slices.Contains(j.spec.Types, t)
}

// ownReason says whether the job can run on the cluster as it is, on its
// own (its gang aside): NoReason, or the reason it cannot. O(types).
func (s *Scheduler) ownReason(j *job) Reason {
	allowed, rated, fits := false, false, false
	for k, t := range s.types {
		if !j.allows(t) {
			continue
		}
		allowed = true
		if k >= len(j.raw) || j.raw[k] <= 0 {
			continue
		}
		rated = true
		if j.spec.GPUs > s.st.Total(t) {
			continue
		}
		fits = true
		if !j.spec.SingleServer || j.spec.GPUs <= s.st.LargestServer(t) {
			return NoReason
		}
	}
	switch {
	case !allowed:
		return ReasonNoType
	case !rated:
		return ReasonNoRate
	case !fits:
		return ReasonTooLarge
	}
	return ReasonServerTooSmall
}

// active tells whether a job takes part in the rounds: neither finished
// nor unrunnable.
func (j *job) active() bool { return !j.finished && j.unrun == NoReason }

// settle puts a job in its tier's list or out of it, as its fate says.
func (s *Scheduler) settle(j *job) {
	in := j.inTier
	if j.active() == in {
		return
	}
	if in {
		s.detach(j)
		return
	}
	t := j.tier
	i, _ := slices.BinarySearchFunc(t.jobs, j.id, func(a *job, id int) int { return a.id - id })
	t.jobs = slices.Insert(t.jobs, i, j)
	t.dirty = true
	j.inTier = true
	j.wait = ReasonNew // in the rounds from the next one
}

// refreshJob recomputes a job's own fate and settles it; a job of a gang
// settles with its gang.
func (s *Scheduler) refreshJob(j *job) {
	j.own = s.ownReason(j)
	if j.spec.Gang != "" {
		s.refreshGang(j.spec.Gang)
		return
	}
	j.unrun = j.own
	s.settle(j)
}

// refreshGang settles the jobs of a gang: all unrunnable (the others with
// ReasonGangUnrunnable) when one that has not finished is.
func (s *Scheduler) refreshGang(name string) {
	members := s.gangs[name]
	blocked := false
	for _, m := range members {
		if !m.finished && m.own != NoReason {
			blocked = true
			break
		}
	}
	for _, m := range members {
		m.unrun = m.own
		if blocked && m.own == NoReason {
			m.unrun = ReasonGangUnrunnable
		}
		s.settle(m)
	}
}

// joinGang and leaveGang keep the index of gangs' jobs.
func (s *Scheduler) joinGang(j *job) {
	if g := j.spec.Gang; g != "" {
		s.gangs[g] = append(s.gangs[g], j)
	}
}

func (s *Scheduler) leaveGang(j *job) {
	g := j.spec.Gang
	if g == "" {
		return
	}
	s.gangs[g] = slices.DeleteFunc(s.gangs[g], func(m *job) bool { return m == j })
	if len(s.gangs[g]) == 0 {
		delete(s.gangs, g)
	}
}

// refreshAll recomputes every job's fate, after the cluster changed.
// O(jobs x types).
func (s *Scheduler) refreshAll() {
	for _, j := range s.order {
		if j.spec.SingleServer && s.maskRates(j) && j.inTier {
			j.tier.dirty = true // the largest server of a type changed
		}
		j.own = s.ownReason(j)
		if j.spec.Gang == "" {
			j.unrun = j.own
			s.settle(j)
		}
	}
	for _, name := range sortedKeys(s.gangs) {
		s.refreshGang(name)
	}
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// fate returns a job's state and reason now.
func (s *Scheduler) fate(j *job) (JobState, Reason) {
	switch {
	case j.finished:
		return Finished, NoReason
	case j.unrun != NoReason:
		return Unrunnable, j.unrun
	case j.lease != nil:
		return Running, NoReason
	case j.unit != nil:
		return Waiting, ReasonPreempted // it ran in the last round
	}
	return Waiting, j.wait
}
