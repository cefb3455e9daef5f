package allocation

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"

	"github.com/gpusched/gpusched/internal/pyrand"
	"github.com/gpusched/gpusched/topology"
)

// RoundReport says what really ran in a round, for Rounds.Report.
//
// A RoundReport is a plain value: safe for concurrent reads, not for writes
// while others read it.
type RoundReport struct {
	// Start is the round's Start, as Next returned it.
	Start float64 `json:"start"`
	// Ran lists what ran: units (one job, or the two jobs of a pair) on
	// a type, for so many seconds. A unit left out ran for 0 s.
	Ran []UnitRun `json:"ran"`
}

// UnitRun is a unit's time on a type in a round.
//
// A UnitRun is a plain value: safe for concurrent reads, not for writes
// while others read it.
type UnitRun struct {
	JobIDs  []int            `json:"job_ids"`
	Type    topology.GPUType `json:"type"`
	Seconds float64          `json:"seconds"`
}

// Report credits the last round with what really ran (a job that failed
// to start or stopped early is credited only with its time), instead of
// the full round Next would credit otherwise. Call it at most once per
// round, after the round and before the next call of Next. It returns an
// error wrapping ErrInvalidReport, and credits nothing, if the report names
// another round, comes twice, or names jobs absent from the round's problem,
// types outside it, or seconds that are negative or not finite. Units that
// the mechanism keeps no time for (a job outside the allocation) are
// accepted and ignored.
func (r *Rounds) Report(rep RoundReport) error {
	rd := r.st.lastRound
	switch {
	case rd == nil:
		return fmt.Errorf("%w: no round has run", ErrInvalidReport)
	case rep.Start != rd.Start:
		return fmt.Errorf("%w: it is for the round at %v s, the last round started at %v s", ErrInvalidReport, rep.Start, rd.Start)
	case r.st.reported:
		return fmt.Errorf("%w: the round at %v s is already credited", ErrInvalidReport, rd.Start)
	}
	credits := r.scratch.credits[:0]
	for i, run := range rep.Ran {
		if n := len(run.JobIDs); n < 1 || n > 2 || (n == 2 && run.JobIDs[0] == run.JobIDs[1]) {
			return fmt.Errorf("%w: entry %d: job IDs %v (want one job or two distinct ones)", ErrInvalidReport, i, run.JobIDs)
		}
		for _, id := range run.JobIDs {
			if !r.st.present[id] {
				return fmt.Errorf("%w: entry %d: job %d was not in the round's problem", ErrInvalidReport, i, id)
			}
		}
		k := -1 // the last index, as a map from type to index would keep
		for i, t := range r.st.types {
			if t == run.Type {
				k = i
			}
		}
		if k < 0 {
			return fmt.Errorf("%w: entry %d: GPU type %q is not in the round's problem", ErrInvalidReport, i, run.Type)
		}
		if math.IsNaN(run.Seconds) || math.IsInf(run.Seconds, 0) || run.Seconds < 0 {
			return fmt.Errorf("%w: entry %d: %v seconds", ErrInvalidReport, i, run.Seconds)
		}
		credits = append(credits, unitCredit{unitOf(run.JobIDs), k, run.Seconds})
	}
	r.scratch.credits = credits
	for _, c := range credits {
		r.credit(c.u, c.k, c.d)
	}
	r.st.reported = true
	return nil
}

// snapshotVersion is the version Snapshot writes and Restore reads.
const snapshotVersion = 1

type roundsSnapshot struct {
	Version   int                `json:"version"`
	Compat    string             `json:"compat"`
	Started   bool               `json:"started"`
	Forced    bool               `json:"forced,omitempty"`
	LastReset float64            `json:"last_reset"`
	Alloc     *Allocation        `json:"allocation,omitempty"`
	Types     []topology.GPUType `json:"types"`
	Capacity  []int              `json:"capacity"`
	Order     []int              `json:"order"`
	Jobs      []int              `json:"jobs"`
	Present   []int              `json:"present"`
	Units     []unitSnapshot     `json:"units"`
	Worker    []float64          `json:"worker_time,omitempty"`
	LastRound *Round             `json:"last_round,omitempty"`
	Reported  bool               `json:"reported"`
	PCG       []byte             `json:"pcg,omitempty"`
	Python    *pyrand.State      `json:"python_rng,omitempty"`
}

type unitSnapshot struct {
	JobIDs   []int     `json:"job_ids"`
	X        []float64 `json:"x"`
	Received []float64 `json:"received"`
	Deficit  []float64 `json:"deficit"`
	Ran      bool      `json:"ran,omitempty"`
	InAlloc  bool      `json:"in_allocation,omitempty"`
}

// Snapshot returns the mechanism's state as versioned JSON: the allocation
// in force, each unit's targets, time received and deficits, the last
// reset, the last round (and whether it was reported), the shape of the
// problem at the last reset, and the random generators. A Rounds
// configured alike (the same settings and Compat) that Restores it
// continues exactly as this one would. The policy's own state (FIFO with
// Sticky or Compat, FinishTimeFairness) is not part of it.
func (r *Rounds) Snapshot() ([]byte, error) {
	s := roundsSnapshot{
		Version: snapshotVersion, Compat: r.Compat.String(), Started: r.st.started, Forced: r.st.forced, LastReset: r.st.lastReset,
		Alloc: r.st.alloc, Types: r.st.types, Capacity: r.st.capacity, Order: r.st.order, Jobs: sortedIDs(r.st.jobs),
		Present: sortedIDs(r.st.present), Worker: r.st.worker, Reported: r.st.reported,
	}
	for u, st := range r.st.units {
		s.Units = append(s.Units, unitSnapshot{JobIDs: u.ids(), X: st.x, Received: st.received, Deficit: st.deficit, Ran: st.ran, InAlloc: st.inAlloc})
	}
	slices.SortFunc(s.Units, func(a, b unitSnapshot) int { return slices.Compare(a.JobIDs, b.JobIDs) })
	if rd := r.st.lastRound; rd != nil {
		cp := *rd
		cp.Allocation = nil // the allocation in force, saved once
		s.LastRound = &cp
	}
	if r.st.pcg != nil {
		b, err := r.st.pcg.MarshalBinary()
		if err != nil {
			return nil, err
		}
		s.PCG = b
	}
	if r.st.py != nil {
		ps := r.st.py.State()
		s.Python = &ps
	}
	return json.Marshal(s)
}

func sortedIDs(set map[int]bool) []int {
	out := make([]int, 0, len(set))
	for id := range set {
		out = append(out, id)
	}
	slices.Sort(out)
	return out
}

// Restore replaces the mechanism's state with one written by Snapshot. It
// returns an error wrapping ErrInvalidSnapshot, and changes nothing, if the
// data is not such a snapshot (another version or Compat mode, lengths
// that do not agree, indices out of range).
func (r *Rounds) Restore(data []byte) error {
	var s roundsSnapshot
	if err := json.Unmarshal(data, &s); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidSnapshot, err)
	}
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrInvalidSnapshot, fmt.Sprintf(format, args...))
	}
	if s.Version != snapshotVersion {
		return bad("version %d (want %d)", s.Version, snapshotVersion)
	}
	if s.Compat != r.Compat.String() {
		return bad("written in compatibility mode %s, restoring into %s", s.Compat, r.Compat)
	}
	nk := len(s.Types)
	if len(s.Capacity) != nk {
		return bad("%d types and %d capacities", nk, len(s.Capacity))
	}
	for _, k := range s.Order {
		if k < 0 || k >= nk {
			return bad("type index %d in the order of %d types", k, nk)
		}
	}
	if s.Worker != nil && len(s.Worker) != nk {
		return bad("%d worker times for %d types", len(s.Worker), nk)
	}
	if a := s.Alloc; a != nil {
		if len(a.X) != len(a.JobIDs) {
			return bad("allocation with %d rows for %d jobs", len(a.X), len(a.JobIDs))
		}
		for _, row := range a.X {
			if len(row) != nk {
				return bad("allocation row of %d shares for %d types", len(row), nk)
			}
		}
		for _, pr := range a.Pairs {
			if pr.A < 0 || pr.A >= len(a.JobIDs) || pr.B < 0 || pr.B >= len(a.JobIDs) || len(pr.X) != nk {
				return bad("allocation pair (%d, %d) out of range", pr.A, pr.B)
			}
		}
	}
	units := make(map[unit]*unitState, len(s.Units))
	for _, us := range s.Units {
		if n := len(us.JobIDs); n < 1 || n > 2 {
			return bad("unit of %d jobs", n)
		}
		u := unitOf(us.JobIDs)
		if len(us.X) != len(us.Received) || len(us.X) != len(us.Deficit) || (s.Started && len(us.X) != nk) {
			return bad("unit %v has %d, %d and %d values for %d types", us.JobIDs, len(us.X), len(us.Received), len(us.Deficit), nk)
		}
		if units[u] != nil {
			return bad("unit %v twice", us.JobIDs)
		}
		units[u] = &unitState{x: us.X, received: us.Received, deficit: us.Deficit, ran: us.Ran, inAlloc: us.InAlloc}
	}
	if rd := s.LastRound; rd != nil {
		for _, as := range rd.Assignments {
			if as.TypeIndex < 0 || as.TypeIndex >= nk || as.Type != s.Types[as.TypeIndex] || len(as.JobIDs) < 1 || len(as.JobIDs) > 2 {
				return bad("last round assigns %v to type %d (%s)", as.JobIDs, as.TypeIndex, as.Type)
			}
		}
		rd.Allocation = s.Alloc
	}
	var pcg *rand.PCG
	if s.PCG != nil {
		pcg = &rand.PCG{}
		if err := pcg.UnmarshalBinary(s.PCG); err != nil {
			return fmt.Errorf("%w: random generator: %w", ErrInvalidSnapshot, err)
		}
	}
	var py *pyrand.Rand
	if s.Python != nil {
		py = pyrand.New(0)
		if err := py.SetState(*s.Python); err != nil {
			return fmt.Errorf("%w: %w", ErrInvalidSnapshot, err)
		}
	}
	st := roundsState{
		started: s.Started, forced: s.Forced, lastReset: s.LastReset, alloc: s.Alloc, types: s.Types, capacity: s.Capacity,
		order: s.Order, jobs: idSet(s.Jobs), present: idSet(s.Present), units: units, worker: s.Worker, lastRound: s.LastRound,
		reported: s.Reported, pcg: pcg, py: py,
	}
	if pcg != nil {
		st.rng = rand.New(pcg)
	}
	r.st = st
	return nil
}

func idSet(ids []int) map[int]bool {
	out := make(map[int]bool, len(ids))
	for _, id := range ids {
		out[id] = true
	}
	return out
}
