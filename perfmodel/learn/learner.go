package learn

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/gpusched/gpusched/perfmodel"
	"github.com/gpusched/gpusched/topology"
)

// Learner is the Estimator of this package: per job, per GPU type and
// count, a Kalman filter over segment capabilities fed by windows of
// progress reports; per job and type, an estimate that weighs the job's
// own evidence with priors from the population and the table. See the
// package documentation for the model, the costs and the sources.
//
// A Learner is safe for concurrent use: Observe, Register, Forget and
// Restore take its lock for writing, the readers for reading, and Refresh
// fits outside the lock (it holds it only to copy the measurements and to
// install the fit).
type Learner struct {
	cfg Config
	// qZ and qVar are z_q of the capability's quantile and the variance
	// factor of a sample quantile.
	qZ, qVar float64

	refreshMu sync.Mutex // one Refresh at a time

	mu      sync.RWMutex
	types   []topology.GPUType // by index, in order of arrival
	typeIdx map[topology.GPUType]int
	byName  []int // type indices sorted by name
	fixed   bool  // only Config.Types
	jobs    map[string]*job
	history []histRow // ring of finished jobs' rows
	histAt  int       // next slot of the ring when full
	pop     *population
	gen     uint64 // bumped by Restore: a fit of an older state is dropped
	seq     uint64 // counts the rows' changes: their recency
	// epoch counts the fits; changed counts the rows changed since the
	// last (each once), rowsAtFit the rows it fitted, and fitStats what
	// it said; forceFit asks the next Refresh to fit whatever changed.
	epoch, changed uint64
	rowsAtFit      int
	fitStats       FitStats
	forceFit       bool
	// ids numbers the jobs (their rows' identities); bumped is the fit
	// at the last change of every Version.
	ids    uint64
	bumped *population
	// first and last are the jobs in order of their last change (ver).
	first, last *job
	// clock counts the changes estimates depend on; popVer is the clock
	// at the last change of what every job's do (a fit, a type, a
	// Restore), a job's ver at the last of its own (Version).
	clock, popVer uint64
}

// job is a job's state.
type job struct {
	info    JobInfo
	ref     int // reference GPU count; 0 until known
	tracks  []track
	seg     segment
	running bool    // seg is a live segment
	last    float64 // time of the latest report
	seen    bool    // has had a report
	seq     uint64  // when its row last changed (Learner.seq)
	ver     uint64  // see Learner.clock
	epoch   uint64  // Learner.epoch when its row last counted as changed
	id      uint64  // its row's identity across fits (Learner.ids)
	name    string
	// prev and next link the jobs in order of their last change.
	prev, next *job
}

// histRow is a finished job's measured log rates at its reference GPU
// count, by type index (NaN where not measured).
type histRow struct {
	vals  []float64
	seq   uint64
	id    uint64   // the job's
	group groupKey // JobInfo.Group and reference GPU count
}

// New returns a Learner with the given settings (see Config).
func New(cfg Config) (*Learner, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	cfg.Types = slices.Clone(cfg.Types)
	l := &Learner{cfg: cfg, typeIdx: map[topology.GPUType]int{}, jobs: map[string]*job{}, fixed: len(cfg.Types) > 0}
	l.qZ, l.qVar = quantileZ(cfg.Quantile)
	for _, t := range cfg.Types {
		l.addType(t)
	}
	return l, nil
}

// Config returns the learner's settings, defaults filled in.
func (l *Learner) Config() Config {
	c := l.cfg
	c.Types = slices.Clone(c.Types)
	return c
}

// addType registers type t and returns its index.
func (l *Learner) addType(t topology.GPUType) int {
	i := len(l.types)
	l.types = append(l.types, t)
	l.typeIdx[t] = i
	at, _ := slices.BinarySearchFunc(l.byName, t, func(k int, t topology.GPUType) int { return strings.Compare(string(l.types[k]), string(t)) })
	l.byName = slices.Insert(l.byName, at, i)
	l.bumpAll()
	l.forceFit = true
	return i
}

// bump notes a change of j's own estimates, and moves it to the end of
// the jobs in order of their changes; bumpAll notes one of every job's.
func (l *Learner) bump(j *job) {
	l.clock++
	j.ver = l.clock
	if l.last == j {
		return
	}
	l.unlink(j)
	j.prev, l.last = l.last, j
	if j.prev != nil {
		j.prev.next = j
	} else {
		l.first = j
	}
}

// unlink takes j out of the jobs in order of their changes.
func (l *Learner) unlink(j *job) {
	if j.prev != nil {
		j.prev.next = j.next
	} else if l.first == j {
		l.first = j.next
	}
	if j.next != nil {
		j.next.prev = j.prev
	} else if l.last == j {
		l.last = j.prev
	}
	j.prev, j.next = nil, nil
}

func (l *Learner) bumpAll() { l.clock++; l.popVer = l.clock }

// settle takes what a report changed in j's tracks. j's Version changes
// (bump) when a track is measured for the first time (or no longer is),
// when a track's log capability moved by more than Config.Tolerance since
// the Version last changed, or its variance by more than Tolerance x
// MinPriorSigma^2 (the job's estimates then move by about Tolerance x
// (1 + the distance of its measurement from its prior, in log rate)); the
// variance of the open segment's track is weighed once the segment has
// closed (a new segment widens the variance for its first windows, its
// later windows narrow it again: no reader needs to see that). A log
// capability moved by more than Tolerance since the row last changed
// makes the row recent (its rank among the reference rows) and counts it
// as changed for the next Refresh. Without a tolerance every report
// changes the Version. Cost: O(tracks of the job), no allocation.
func (l *Learner) settle(j *job) {
	tol := max(l.cfg.Tolerance, 0)
	vtol := tol * l.cfg.MinPriorSigma * l.cfg.MinPriorSigma
	row, moved := false, false
	for k := range j.tracks {
		tr := &j.tracks[k]
		m, v, ok := l.trackMeasure(j, k)
		open := j.running && j.seg.track == k && j.seg.n > 0
		moved = moved || ok != tr.verOK || ok && (math.Abs(m-tr.verMean) > tol || !open && math.Abs(v-tr.verVar) > vtol)
		row = row || ok != tr.rowOK || ok && math.Abs(m-tr.rowMean) > tol
	}
	if row {
		for k := range j.tracks {
			tr := &j.tracks[k]
			tr.rowMean, _, tr.rowOK = l.trackMeasure(j, k)
		}
		l.seq++
		j.seq = l.seq
		l.changedRow(j)
	}
	if moved {
		l.baseline(j)
	}
	if moved || l.cfg.Tolerance < 0 {
		l.bump(j)
	}
}

// baseline notes what j's tracks measure now, against which settle
// compares for its Version.
func (l *Learner) baseline(j *job) {
	for k := range j.tracks {
		tr := &j.tracks[k]
		tr.verMean, tr.verVar, tr.verOK = l.trackMeasure(j, k)
	}
}

// changedRow counts j's row of the population as changed since the last
// fit (once per fit).
func (l *Learner) changedRow(j *job) {
	if !j.info.Private && j.epoch != l.epoch {
		j.epoch = l.epoch
		l.changed++
	}
}

// Version identifies what a job's estimates are computed from, within
// Config.Tolerance: it changes whenever they may have moved by more (its
// Register, a type it measured for the first time, what it measured
// moved beyond Tolerance since the Version last changed, a refit that
// moved the reference rows, a new type, a Restore; see
// Config.Tolerance), so that a caller may keep a job's estimates while
// it stays the same (the scheduler's rounds do; Changed lists the jobs
// whose Version changed). Kept estimates may be off by the tolerance,
// and their Windows and Segments counts stale. Without a tolerance it
// changes at every report. 0 for an unknown job. O(1).
func (l *Learner) Version(job string) uint64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	j := l.jobs[job]
	if j == nil {
		return 0
	}
	return max(l.popVer, j.ver)
}

// Changed appends to dst the jobs whose Version changed after clock
// since (a clock an earlier call returned; 0 at first), the latest
// change last, and returns them with the clock now; all reports that
// every job's Version changed since (a refit that moved the reference
// rows, a new type, a Restore; or since is 0), and then appends
// nothing. A reader that keeps the estimates of many jobs asks for the
// changes instead of every job's Version. Cost: O(jobs changed).
func (l *Learner) Changed(since uint64, dst []string) (changed []string, clock uint64, all bool) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if since == 0 || l.popVer > since || since > l.clock {
		return dst, l.clock, true
	}
	start := len(dst)
	for j := l.last; j != nil && j.ver > since; j = j.prev {
		dst = append(dst, j.name)
	}
	slices.Reverse(dst[start:])
	return dst, l.clock, false
}

// checkType returns the index of type t, or -1 if it is new and may be
// added.
func (l *Learner) checkType(job string, t topology.GPUType) (int, error) {
	if i, ok := l.typeIdx[t]; ok {
		return i, nil
	}
	switch {
	case l.fixed:
		return 0, fail(job, "Type", ErrUnknownType, fmt.Sprintf("%q is not one of Config.Types", t))
	case len(l.types) >= l.cfg.MaxTypes:
		return 0, fail(job, "Type", ErrLimit, fmt.Sprintf("%q would be type %d; MaxTypes is %d", t, len(l.types)+1, l.cfg.MaxTypes))
	}
	if err := t.Validate(); err != nil {
		return 0, fail(job, "Type", ErrInvalidObservation, err.Error())
	}
	return -1, nil
}

// checkName validates a new job's name and the bound on jobs.
func (l *Learner) checkName(name string) error {
	switch {
	case name == "":
		return fail(name, "", ErrInvalidJob, "the job has no name")
	case len(name) > MaxKeyLen:
		return fail(name, "", ErrInvalidJob, fmt.Sprintf("a name of %d bytes, more than %d", len(name), MaxKeyLen))
	case !utf8.ValidString(name) || strings.IndexByte(name, 0) >= 0:
		return fail(name, "", ErrInvalidJob, "the name is not valid UTF-8 without NUL bytes")
	case len(l.jobs) >= l.cfg.MaxJobs:
		return fail(name, "", ErrLimit, fmt.Sprintf("MaxJobs is %d", l.cfg.MaxJobs))
	}
	return nil
}

// newJob adds a job (its name checked).
func (l *Learner) newJob(name string) *job {
	l.ids++
	j := &job{id: l.ids, name: name}
	l.bump(j)
	j.seg.ring = make([]float64, l.cfg.MaxWindows)
	j.seg.sorted = make([]float64, 0, l.cfg.MaxWindows)
	l.jobs[name] = j
	return j
}

// Register declares a job or updates its declaration (see Estimator).
// Changing GPUs later re-projects the job's estimates to the new count;
// what it measured is kept by GPU count.
func (l *Learner) Register(name string, info JobInfo) error {
	info, err := checkInfo(name, info)
	if err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	j := l.jobs[name]
	if j == nil {
		if err := l.checkName(name); err != nil {
			return err
		}
		j = l.newJob(name)
	}
	if j.info.Private != info.Private || info.GPUs > 0 && info.GPUs != j.ref {
		l.forceFit = l.forceFit || j.info.Private && !info.Private
		l.changedRow(j) // its row joins, leaves or moves
	}
	j.info = info
	if info.GPUs > 0 {
		j.ref = info.GPUs
	}
	l.bump(j)
	return nil
}

// checkInfo validates a JobInfo and returns a copy that shares nothing
// with the caller's.
func checkInfo(name string, info JobInfo) (JobInfo, error) {
	if info.GPUs < 0 || info.GPUs > topology.MaxClusterGPUs {
		return info, fail(name, "GPUs", ErrInvalidJob, fmt.Sprintf("%d (want 0 to %d)", info.GPUs, topology.MaxClusterGPUs))
	}
	if info.Kind != nil {
		k := info.Kind.WithScaleFactor(1)
		if err := k.Validate(); err != nil {
			return info, fail(name, "Kind", ErrInvalidJob, err.Error())
		}
		info.Kind = &k
	}
	if len(info.Group) > MaxGroupLen {
		return info, fail(name, "Group", ErrInvalidJob, fmt.Sprintf("%d bytes, more than %d", len(info.Group), MaxGroupLen))
	}
	if len(info.Claims) > MaxClaims {
		return info, fail(name, "Claims", ErrInvalidJob, fmt.Sprintf("%d claims, more than %d", len(info.Claims), MaxClaims))
	}
	claims := make(map[topology.GPUType]float64, len(info.Claims))
	for t, r := range info.Claims {
		if err := t.Validate(); err != nil {
			return info, fail(name, "Claims", ErrInvalidJob, err.Error())
		}
		if r != 0 && !(r >= perfmodel.MinRate && r <= perfmodel.MaxRate) {
			return info, fail(name, "Claims", ErrInvalidJob, fmt.Sprintf("%v steps/s on %s (want 0, or %g to %g)", r, t, float64(perfmodel.MinRate), float64(perfmodel.MaxRate)))
		}
		if r > 0 {
			claims[t] = r
		}
	}
	info.Claims = claims
	return info, nil
}

// checkObservation validates the fields an observation holds on its own.
func checkObservation(name string, o *Observation) error {
	switch {
	case o.GPUs < 1 || o.GPUs > topology.MaxClusterGPUs:
		return fail(name, "GPUs", ErrInvalidObservation, fmt.Sprintf("%d (want 1 to %d)", o.GPUs, topology.MaxClusterGPUs))
	case !(o.Steps >= 0 && o.Steps <= MaxSteps):
		return fail(name, "Steps", ErrInvalidObservation, fmt.Sprintf("%v (want 0 to %g)", o.Steps, float64(MaxSteps)))
	case !(o.Time >= 0 && o.Time <= MaxTime):
		return fail(name, "Time", ErrInvalidObservation, fmt.Sprintf("%v s (want 0 to %g)", o.Time, float64(MaxTime)))
	}
	return nil
}

// Observe takes one progress report of a job (see Observation). A report
// in the running segment closes a window when Config.Window seconds have
// passed since the last one closed; a report of a new segment closes the
// running one. The job is registered if new. Errors, of kinds
// ErrInvalidObservation, ErrOutOfOrder, ErrUnknownType, ErrLimit and
// ErrInvalidJob, name the field and leave the state as it was.
// Cost: O(1) map lookups plus O(MaxWindows) moves when a window closes
// (the sorted windows), O(tracks of the job) when a segment starts; no
// allocation once the job and its track exist.
func (l *Learner) Observe(name string, o Observation) error {
	if err := checkObservation(name, &o); err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	ti, err := l.checkType(name, o.Type)
	if err != nil {
		return err
	}
	j := l.jobs[name]
	if j == nil {
		if err := l.checkName(name); err != nil {
			return err
		}
	} else if err := l.checkOrder(name, j, ti, &o); err != nil {
		return err
	}
	if ti < 0 {
		ti = l.addType(o.Type)
	}
	if j == nil {
		j = l.newJob(name)
	}
	l.apply(j, ti, &o)
	return nil
}

// checkOrder checks o against j's state: time, segment, steps, the new
// window's rate, the job's bound on tracks.
func (l *Learner) checkOrder(name string, j *job, ti int, o *Observation) error {
	s := &j.seg
	switch {
	case j.seen && o.Time < j.last:
		return fail(name, "Time", ErrOutOfOrder, fmt.Sprintf("%v s after %v s", o.Time, j.last))
	case j.seen && o.Segment < s.id:
		return fail(name, "Segment", ErrOutOfOrder, fmt.Sprintf("%d after %d", o.Segment, s.id))
	}
	if !j.running || o.Segment != s.id {
		if ti < 0 || j.findTrack(ti, o.GPUs) < 0 {
			if len(j.tracks) >= l.cfg.MaxTracks {
				return fail(name, "GPUs", ErrLimit, fmt.Sprintf("%s x%d would be the job's track %d; MaxTracks is %d", o.Type, o.GPUs, len(j.tracks)+1, l.cfg.MaxTracks))
			}
		}
		return nil
	}
	tr := &j.tracks[s.track]
	switch {
	case tr.typ != ti:
		return fail(name, "Type", ErrInvalidObservation, fmt.Sprintf("%s in segment %d, which runs on %s", o.Type, s.id, l.types[tr.typ]))
	case tr.gpus != o.GPUs:
		return fail(name, "GPUs", ErrInvalidObservation, fmt.Sprintf("%d in segment %d, which runs on %d", o.GPUs, s.id, tr.gpus))
	case o.Steps < s.steps:
		return fail(name, "Steps", ErrOutOfOrder, fmt.Sprintf("%v after %v in segment %d", o.Steps, s.steps, s.id))
	}
	if dt := o.Time - s.wTim; dt >= l.cfg.Window {
		if rate := (o.Steps - s.wSteps) / dt; rate > perfmodel.MaxRate {
			return fail(name, "Steps", ErrInvalidObservation, fmt.Sprintf("%v steps in %v s is %.3g steps/s, more than %g", o.Steps-s.wSteps, dt, rate, float64(perfmodel.MaxRate)))
		}
	}
	return nil
}

// findTrack returns the index of j's track on type ti and count gpus, or
// -1.
func (j *job) findTrack(ti, gpus int) int {
	for k := range j.tracks {
		if j.tracks[k].typ == ti && j.tracks[k].gpus == gpus {
			return k
		}
	}
	return -1
}

// apply takes a checked observation, then settles j's Version.
func (l *Learner) apply(j *job, ti int, o *Observation) {
	if j.ref == 0 {
		j.ref = o.GPUs
		l.bump(j)
	}
	l.observe(j, ti, o)
	l.settle(j)
}

// observe takes a checked observation into j's segments and tracks.
func (l *Learner) observe(j *job, ti int, o *Observation) {
	j.seen, j.last = true, o.Time
	s := &j.seg
	if !j.running || o.Segment != s.id {
		l.closeSegment(j)
		k := j.findTrack(ti, o.GPUs)
		if k < 0 {
			k = len(j.tracks)
			j.tracks = append(j.tracks, track{typ: ti, gpus: o.GPUs})
		}
		s.reset(o.Segment, k, o.Steps, o.Time)
		j.running = true
		return
	}
	s.steps, s.time = o.Steps, o.Time
	if dt := o.Time - s.wTim; dt >= l.cfg.Window {
		rate := max((o.Steps-s.wSteps)/dt, perfmodel.MinRate)
		s.wSteps, s.wTim = o.Steps, o.Time
		l.window(j, math.Log(rate))
	}
}

// Forget drops a job: its running segment is closed and, unless it is
// Private, its measured rates join the population's history (the oldest
// remembered job is evicted past Config.MaxHistory). An unknown job is
// ignored.
func (l *Learner) Forget(name string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	j := l.jobs[name]
	if j == nil {
		return
	}
	l.closeSegment(j)
	delete(l.jobs, name)
	l.unlink(j)
	if j.info.Private {
		return
	}
	if l.cfg.MaxHistory == 0 {
		l.changed++ // its row leaves
		return
	}
	vals, _, n := l.row(j, nil, nil)
	if n == 0 {
		return
	}
	if len(l.history) == l.cfg.MaxHistory {
		l.changed++ // the oldest remembered row leaves
	}
	l.remember(histRow{vals: vals, seq: j.seq, id: j.id, group: groupKey{j.info.Group, j.ref}})
}

// remember adds a row to the history ring.
func (l *Learner) remember(r histRow) {
	if len(l.history) < l.cfg.MaxHistory {
		l.history = append(l.history, r)
		return
	}
	l.history[l.histAt] = r
	l.histAt = (l.histAt + 1) % len(l.history)
}
