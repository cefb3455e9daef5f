package allocation

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"

	"github.com/gpusched/gpusched/internal/pyrand"
	"github.com/gpusched/gpusched/internal/strictjson"
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
// types outside it, or seconds outside [0, MaxTime]. The time counters
// saturate far above any time reached in rounds within MaxTime, so no
// number of reports can make them infinite. Units that
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
		if !inRange(run.Seconds, 0, MaxTime) {
			return fmt.Errorf("%w: entry %d: %v seconds, outside [0, %g]", ErrInvalidReport, i, run.Seconds, MaxTime)
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

// Reportable reports whether Report would take a unit of job id on type
// t for the last round: a round has run, job id was in its problem (an
// assigned job or not) and t is among its types. A caller that credits
// time a job spent outside the round's assignments (the scheduling core's
// RoundReport.Held) checks first, since one entry Report refuses makes it
// credit nothing.
func (r *Rounds) Reportable(id int, t topology.GPUType) bool {
	return r.st.lastRound != nil && r.st.present[id] && slices.Contains(r.st.types, t)
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
		cp.Allocation = nil    // the allocation in force, saved once
		cp.Stats.SolveTime = 0 // a wall time: not state
		if len(cp.Assignments) == 0 {
			cp.Assignments = nil // one spelling of none
		}
		s.LastRound = &cp
	}
	if r.st.pcg != nil {
		b, err := r.st.pcg.MarshalBinary()
		if err != nil {
			return nil, err
		}
		s.PCG = b
	}
	if r.st.py != nil && r.Compat == CompatGavel { // only Gavel's mode draws from it
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
// data is not such a snapshot: another version or Compat mode, malformed
// JSON, or a state no Rounds could have reached. Every field is checked
// before anything is kept: types (valid, distinct), capacities and job IDs
// within their ranges, the visiting order a set of type indices, shares in
// [0, 1], time counters and deficits finite and within 1,000 times MaxTime in magnitude, units
// of one job or two distinct ones, and the last round's assignments on
// types of the snapshot, each job at most once and present (in the round's
// problem), on distinct workers within the type's capacity. What Restore accepts cannot make Next, Report or
// Snapshot panic or fail.
func (r *Rounds) Restore(data []byte) error {
	var s roundsSnapshot
	if err := strictjson.Decode(data, &s); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidSnapshot, err)
	}
	if err := s.check(r.Compat); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidSnapshot, err)
	}
	units := make(map[unit]*unitState, len(s.Units))
	for _, us := range s.Units {
		units[unitOf(us.JobIDs)] = &unitState{x: us.X, received: us.Received, deficit: us.Deficit, ran: us.Ran, inAlloc: us.InAlloc}
	}
	if rd := s.LastRound; rd != nil {
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

// Bounds of a snapshot's sizes.
const (
	// maxSnapshotTypes bounds the GPU types of a snapshot.
	maxSnapshotTypes = 1 << 10
	// maxSnapshotIDs bounds its job IDs and units.
	maxSnapshotIDs = 1 << 24
)

// check verifies a snapshot before Restore keeps any of it (see Restore);
// the error names the field at fault.
func (s *roundsSnapshot) check(compat Compat) error {
	bad := fmt.Errorf
	if s.Version != snapshotVersion {
		return bad("version %d (want %d)", s.Version, snapshotVersion)
	}
	if s.Compat != compat.String() {
		return bad("written in compatibility mode %s, restoring into %s", s.Compat, compat)
	}
	nk := len(s.Types)
	if nk > maxSnapshotTypes {
		return bad("%d GPU types (at most %d)", nk, maxSnapshotTypes)
	}
	seen := make(map[topology.GPUType]bool, nk)
	for _, t := range s.Types {
		if err := t.Validate(); err != nil {
			return bad("types: %w", err)
		}
		if seen[t] {
			return bad("type %s twice", t)
		}
		seen[t] = true
	}
	if len(s.Capacity) != nk {
		return bad("%d types and %d capacities", nk, len(s.Capacity))
	}
	for k, c := range s.Capacity {
		if c < 0 || c > MaxCapacity {
			return bad("capacity %d of %s, outside [0, %d]", c, s.Types[k], MaxCapacity)
		}
	}
	inOrder := make([]bool, nk)
	for _, k := range s.Order {
		if k < 0 || k >= nk || inOrder[k] {
			return bad("type index %d in the order of %d types (out of range or twice)", k, nk)
		}
		inOrder[k] = true
	}
	if !inRange(s.LastReset, -MaxTime, MaxTime) {
		return bad("last reset at %v s, outside [%g, %g]", s.LastReset, -MaxTime, MaxTime)
	}
	if s.Worker != nil && len(s.Worker) != nk {
		return bad("%d worker times for %d types", len(s.Worker), nk)
	}
	if err := counters(s.Worker); err != nil {
		return bad("worker time: %w", err)
	}
	if s.Started && compat == CompatGavel && len(s.Worker) != nk {
		return bad("a started mechanism in Gavel's mode with %d worker times for %d types", len(s.Worker), nk)
	}
	if s.Started && s.Alloc == nil {
		return bad("a started mechanism without an allocation")
	}
	if !s.Started && s.LastRound != nil {
		return bad("a last round before the first reset")
	}
	if len(s.Jobs) > maxSnapshotIDs || len(s.Present) > maxSnapshotIDs || len(s.Units) > maxSnapshotIDs {
		return bad("%d jobs, %d present, %d units (at most %d each)", len(s.Jobs), len(s.Present), len(s.Units), maxSnapshotIDs)
	}
	for _, ids := range [][]int{s.Jobs, s.Present} {
		for _, id := range ids {
			if id < 0 {
				return bad("job ID %d is negative", id)
			}
		}
	}
	if err := s.checkAllocation(nk); err != nil {
		return err
	}
	units := make(map[unit]bool, len(s.Units))
	for _, us := range s.Units {
		if err := checkUnitIDs(us.JobIDs); err != nil {
			return bad("unit: %w", err)
		}
		u := unitOf(us.JobIDs)
		if units[u] {
			return bad("unit %v twice", us.JobIDs)
		}
		units[u] = true
		if len(us.X) != len(us.Received) || len(us.X) != len(us.Deficit) || (s.Started && len(us.X) != nk) || len(us.X) > maxSnapshotTypes {
			return bad("unit %v has %d, %d and %d values for %d types", us.JobIDs, len(us.X), len(us.Received), len(us.Deficit), nk)
		}
		if err := shares(us.X); err != nil {
			return bad("unit %v: %w", us.JobIDs, err)
		}
		if err := counters(us.Received); err != nil {
			return bad("unit %v: time received: %w", us.JobIDs, err)
		}
		if err := counters(us.Deficit); err != nil {
			return bad("unit %v: deficit: %w", us.JobIDs, err)
		}
	}
	return s.checkLastRound(nk)
}

// checkAllocation checks the allocation in force: rows of the snapshot's
// types, distinct job IDs, pairs of two distinct rows, shares in [0, 1].
func (s *roundsSnapshot) checkAllocation(nk int) error {
	a := s.Alloc
	if a == nil {
		return nil
	}
	bad := fmt.Errorf
	if a.Types != nil && !slices.Equal(a.Types, s.Types) {
		return bad("allocation for types %v, the snapshot's are %v", a.Types, s.Types)
	}
	if len(a.X) != len(a.JobIDs) || len(a.X) > maxSnapshotIDs || len(a.Pairs) > maxSnapshotIDs {
		return bad("allocation with %d rows for %d jobs", len(a.X), len(a.JobIDs))
	}
	if math.IsNaN(a.Objective) || math.IsInf(a.Objective, 0) {
		return bad("allocation objective %v", a.Objective)
	}
	ids := make(map[int]bool, len(a.JobIDs))
	for m, row := range a.X {
		id := a.JobIDs[m]
		if id < 0 || ids[id] {
			return bad("allocation row %d for job %d (negative or twice)", m, id)
		}
		ids[id] = true
		if len(row) != nk {
			return bad("allocation row of %d shares for %d types", len(row), nk)
		}
		if err := shares(row); err != nil {
			return bad("allocation of job %d: %w", id, err)
		}
	}
	for _, pr := range a.Pairs {
		if pr.A < 0 || pr.A >= len(a.JobIDs) || pr.B < 0 || pr.B >= len(a.JobIDs) || pr.A == pr.B || len(pr.X) != nk {
			return bad("allocation pair (%d, %d) of %d rows, %d shares for %d types", pr.A, pr.B, len(a.JobIDs), len(pr.X), nk)
		}
		if err := shares(pr.X); err != nil {
			return bad("allocation pair (%d, %d): %w", pr.A, pr.B, err)
		}
	}
	return nil
}

// checkLastRound checks the last round: times in range, assignments on
// the snapshot's types, each job once and among the present ones, workers
// distinct and within the type's capacity.
func (s *roundsSnapshot) checkLastRound(nk int) error {
	rd := s.LastRound
	if rd == nil {
		return nil
	}
	bad := fmt.Errorf
	if !inRange(rd.Start, -MaxTime, MaxTime) || !inRange(rd.Length, 0, MaxTime) {
		return bad("last round at %v s of %v s", rd.Start, rd.Length)
	}
	if len(rd.Assignments) > maxSnapshotIDs {
		return bad("last round of %d assignments", len(rd.Assignments))
	}
	present := idSet(s.Present)
	inRound := map[int]bool{}
	used := make([]map[int]bool, nk)
	for _, as := range rd.Assignments {
		k := as.TypeIndex
		if k < 0 || k >= nk || as.Type != s.Types[k] {
			return bad("last round assigns %v to type %d (%s) of %d", as.JobIDs, k, as.Type, nk)
		}
		if err := checkUnitIDs(as.JobIDs); err != nil {
			return bad("last round: %w", err)
		}
		for _, id := range as.JobIDs {
			if inRound[id] {
				return bad("last round runs job %d twice", id)
			}
			if !present[id] {
				// Report credits only jobs of the round's problem.
				return bad("last round runs job %d, which is not among the jobs present (%d listed)", id, len(s.Present))
			}
			inRound[id] = true
		}
		if len(as.Workers) == 0 || len(as.Workers) > s.Capacity[k] {
			return bad("last round gives %v %d workers of %s, which has %d", as.JobIDs, len(as.Workers), as.Type, s.Capacity[k])
		}
		if used[k] == nil {
			used[k] = map[int]bool{}
		}
		for _, w := range as.Workers {
			if w < 0 || w >= s.Capacity[k] || used[k][w] {
				return bad("last round gives %v worker %d of %s (out of [0, %d) or taken twice)", as.JobIDs, w, as.Type, s.Capacity[k])
			}
			used[k][w] = true
		}
	}
	if rd.Stats.SolveTime < 0 {
		return bad("last round solved in %v", rd.Stats.SolveTime)
	}
	return nil
}

// checkUnitIDs checks a unit's jobs: one job, or two distinct ones, of
// IDs 0 or more.
func checkUnitIDs(ids []int) error {
	if n := len(ids); n < 1 || n > 2 || (n == 2 && ids[0] == ids[1]) {
		return fmt.Errorf("job IDs %v (want one job or two distinct ones)", ids)
	}
	for _, id := range ids {
		if id < 0 {
			return fmt.Errorf("job ID %d is negative", id)
		}
	}
	return nil
}

// shares checks that every share is in [0, 1], within the tolerance of a
// policy's answer.
func shares(xs []float64) error {
	for k, x := range xs {
		if !inRange(x, -answerTolerance, 1+answerTolerance) {
			return fmt.Errorf("share %v on type %d, outside [0, 1]", x, k)
		}
	}
	return nil
}

// counters checks time counters: finite and within +-maxCounter.
func counters(vs []float64) error {
	for k, v := range vs {
		if !inRange(v, -maxCounter, maxCounter) {
			return fmt.Errorf("%v s on type %d, outside [%g, %g]", v, k, -maxCounter, maxCounter)
		}
	}
	return nil
}

func idSet(ids []int) map[int]bool {
	out := make(map[int]bool, len(ids))
	for _, id := range ids {
		out[id] = true
	}
	return out
}
