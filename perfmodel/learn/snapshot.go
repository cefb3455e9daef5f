package learn

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/gpusched/gpusched/internal/strictjson"
	"github.com/gpusched/gpusched/perfmodel"
	"github.com/gpusched/gpusched/topology"
)

// SnapshotVersion is the format Snapshot writes and Restore reads.
const SnapshotVersion = 1

// MaxSnapshotBytes bounds a snapshot Restore reads.
const MaxSnapshotBytes = 256 << 20

// snapshot is the JSON form of a learner's state (not its settings, nor
// the population fit, which Refresh recomputes).
type snapshot struct {
	Version int                `json:"version"`
	Types   []topology.GPUType `json:"types"`
	Seq     uint64             `json:"seq"`
	Jobs    []snapJob          `json:"jobs"`
	History []snapRow          `json:"history,omitempty"`
}

type snapJob struct {
	Name    string       `json:"name"`
	GPUs    int          `json:"gpus"`
	Info    snapInfo     `json:"info"`
	Seen    bool         `json:"seen,omitempty"`
	Last    float64      `json:"last,omitempty"`
	Seq     uint64       `json:"seq,omitempty"`
	Tracks  []snapTrack  `json:"tracks,omitempty"`
	Segment *snapSegment `json:"segment,omitempty"`
}

type snapInfo struct {
	GPUs    int                          `json:"gpus,omitempty"`
	Kind    *snapKind                    `json:"kind,omitempty"`
	Claims  map[topology.GPUType]float64 `json:"claims,omitempty"`
	Private bool                         `json:"private,omitempty"`
	Group   string                       `json:"group,omitempty"`
}

type snapKind struct {
	Model     string `json:"model"`
	BatchSize int    `json:"batch_size,omitempty"`
}

type snapTrack struct {
	Type     int      `json:"type"`
	GPUs     int      `json:"gpus"`
	Has      bool     `json:"has,omitempty"`
	Mean     float64  `json:"mean,omitempty"`
	Var      float64  `json:"var,omitempty"`
	Windows  int      `json:"windows,omitempty"`
	Segments int      `json:"segments,omitempty"`
	Resets   int      `json:"resets,omitempty"`
	Median   *float64 `json:"median,omitempty"`
}

type snapSegment struct {
	ID          uint64    `json:"id"`
	Track       int       `json:"track"`
	Steps       float64   `json:"steps"`
	Time        float64   `json:"time"`
	WindowSteps float64   `json:"window_steps"`
	WindowTime  float64   `json:"window_time"`
	Closed      int       `json:"closed,omitempty"`
	Windows     []float64 `json:"windows,omitempty"`
	Streak      int       `json:"streak,omitempty"`
}

type snapRow struct {
	Seq      uint64    `json:"seq,omitempty"`
	Group    string    `json:"group,omitempty"`
	GPUs     int       `json:"gpus,omitempty"` // the group's reference GPU count
	Types    []int     `json:"types"`
	LogRates []float64 `json:"log_rates"`
}

// Snapshot returns the learner's state as JSON (version SnapshotVersion):
// its types, jobs (declarations, tracks, running segments with their
// windows) and remembered rows; not its settings, nor the population
// fit (call Refresh after Restore). Jobs are in the order of their
// names, so that equal states give equal bytes. Its size is O(jobs *
// (tracks + MaxWindows) + history * types).
func (l *Learner) Snapshot() ([]byte, error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	s := snapshot{Version: SnapshotVersion, Types: slices.Clone(l.types), Seq: l.seq, Jobs: make([]snapJob, 0, len(l.jobs))}
	names := make([]string, 0, len(l.jobs))
	for n := range l.jobs {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		s.Jobs = append(s.Jobs, snapOfJob(n, l.jobs[n]))
	}
	for i := range l.history {
		h := &l.history[(l.histAt+i)%len(l.history)]
		r := snapRow{Seq: h.seq, Group: h.group.name, GPUs: h.group.ref, Types: []int{}, LogRates: []float64{}}
		for t, v := range h.vals {
			if !math.IsNaN(v) {
				r.Types = append(r.Types, t)
				r.LogRates = append(r.LogRates, v)
			}
		}
		s.History = append(s.History, r)
	}
	return json.Marshal(s)
}

// snapOfJob is the JSON form of job j.
func snapOfJob(name string, j *job) snapJob {
	sj := snapJob{Name: name, GPUs: j.ref, Seen: j.seen, Last: j.last, Seq: j.seq,
		Info: snapInfo{GPUs: j.info.GPUs, Private: j.info.Private, Group: j.info.Group}}
	if k := j.info.Kind; k != nil {
		sj.Info.Kind = &snapKind{Model: k.Model, BatchSize: k.BatchSize}
	}
	if len(j.info.Claims) > 0 {
		sj.Info.Claims = j.info.Claims
	}
	for _, tr := range j.tracks {
		st := snapTrack{Type: tr.typ, GPUs: tr.gpus, Has: tr.has, Windows: tr.windows, Segments: tr.segments, Resets: tr.resets}
		if tr.has {
			st.Mean, st.Var = tr.mean, tr.vari
		}
		if tr.hasMedian {
			m := tr.median
			st.Median = &m
		}
		sj.Tracks = append(sj.Tracks, st)
	}
	if j.running {
		s := &j.seg
		sj.Segment = &snapSegment{ID: s.id, Track: s.track, Steps: s.steps, Time: s.time, WindowSteps: s.wSteps,
			WindowTime: s.wTim, Closed: s.closed, Windows: s.windows(), Streak: s.streak}
	}
	return sj
}

// Restore replaces the learner's state with a snapshot's (see
// Snapshot), or returns an error of kind ErrMalformedSnapshot naming
// the value at fault and leaves the state as it was. The snapshot must
// fit this learner's Config: its types (within Config.Types, when set),
// and its bounds on jobs, types, tracks, windows and history. The
// population fit is dropped: call Refresh. Cost: O(len(data)).
func (l *Learner) Restore(data []byte) error {
	if len(data) > MaxSnapshotBytes {
		return fail("", "", ErrMalformedSnapshot, fmt.Sprintf("%d bytes, more than %d", len(data), MaxSnapshotBytes))
	}
	var s snapshot
	if err := strictjson.Decode(data, &s); err != nil {
		var je *strictjson.Error
		if errors.As(err, &je) {
			return fail("", je.Where(), ErrMalformedSnapshot, je.Problem())
		}
		return fail("", "", ErrMalformedSnapshot, err.Error())
	}
	n, err := l.restored(&s)
	if err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.types, l.typeIdx, l.byName = n.types, n.typeIdx, n.byName
	l.jobs, l.history, l.histAt, l.seq, l.ids = n.jobs, n.history, 0, n.seq, n.ids
	l.first, l.last, l.clock = n.first, n.last, max(l.clock, n.clock)
	l.pop, l.bumped = nil, nil
	l.gen++
	l.bumpAll()
	return nil
}

// restored builds a state from s, checking every value.
func (l *Learner) restored(s *snapshot) (*Learner, error) {
	n := &Learner{cfg: l.cfg, qZ: l.qZ, qVar: l.qVar, typeIdx: map[topology.GPUType]int{}, jobs: map[string]*job{}, seq: s.Seq}
	if err := l.checkSizes(s); err != nil {
		return nil, err
	}
	if err := l.restoreTypes(n, s.Types); err != nil {
		return nil, err
	}
	for i := range s.Jobs {
		if err := n.restoreJob(&s.Jobs[i], i); err != nil {
			return nil, err
		}
	}
	for i := range s.History {
		if err := n.restoreRow(&s.History[i], i); err != nil {
			return nil, err
		}
	}
	return n, nil
}

// checkSizes checks a snapshot's version and sizes against l's bounds.
func (l *Learner) checkSizes(s *snapshot) error {
	switch {
	case s.Version != SnapshotVersion:
		return fail("", "version", ErrMalformedSnapshot, fmt.Sprintf("%d (want %d)", s.Version, SnapshotVersion))
	case len(s.Types) > l.cfg.MaxTypes:
		return fail("", "types", ErrMalformedSnapshot, fmt.Sprintf("%d types, more than MaxTypes %d", len(s.Types), l.cfg.MaxTypes))
	case len(s.Jobs) > l.cfg.MaxJobs:
		return fail("", "jobs", ErrMalformedSnapshot, fmt.Sprintf("%d jobs, more than MaxJobs %d", len(s.Jobs), l.cfg.MaxJobs))
	case len(s.History) > l.cfg.MaxHistory:
		return fail("", "history", ErrMalformedSnapshot, fmt.Sprintf("%d rows, more than MaxHistory %d", len(s.History), l.cfg.MaxHistory))
	}
	return nil
}

// restoreTypes checks a snapshot's types and adds them to n: valid,
// distinct, and, when l has Config.Types, those types in their order
// (the snapshot may hold the first of them only).
func (l *Learner) restoreTypes(n *Learner, types []topology.GPUType) error {
	for i, t := range types {
		where := fmt.Sprintf("types[%d]", i)
		if err := t.Validate(); err != nil {
			return fail("", where, ErrMalformedSnapshot, err.Error())
		}
		if _, dup := n.typeIdx[t]; dup {
			return fail("", where, ErrMalformedSnapshot, fmt.Sprintf("%s twice", t))
		}
		if l.fixed && (i >= len(l.cfg.Types) || l.cfg.Types[i] != t) {
			return fail("", where, ErrMalformedSnapshot, fmt.Sprintf("%s is not type %d of Config.Types", t, i))
		}
		n.addType(t)
	}
	if l.fixed {
		for _, t := range l.cfg.Types[len(types):] {
			n.addType(t)
		}
	}
	return nil
}

// message is what an error of this package says after its kind.
func message(err error) string {
	if e, ok := errors.AsType[*Error](err); ok {
		if e.Field == "" {
			return e.Msg
		}
		return e.Field + ": " + e.Msg
	}
	return err.Error()
}

// snapNumber checks that v is a finite number in [lo, hi].
func snapNumber(where string, v, lo, hi float64) error {
	if !(v >= lo && v <= hi) {
		return fail("", where, ErrMalformedSnapshot, fmt.Sprintf("%v (want %g to %g)", v, lo, hi))
	}
	return nil
}

// snapCount checks that v is in [lo, hi].
func snapCount(where string, v, lo, hi int) error {
	if v < lo || v > hi {
		return fail("", where, ErrMalformedSnapshot, fmt.Sprintf("%d (want %d to %d)", v, lo, hi))
	}
	return nil
}

// Bounds of the variances a snapshot may hold, in log rate squared.
const maxSnapVar = 100

// restoreJob checks and adds job i of a snapshot.
func (n *Learner) restoreJob(sj *snapJob, i int) error {
	where := fmt.Sprintf("jobs[%d]", i)
	if _, dup := n.jobs[sj.Name]; dup {
		return fail(sj.Name, where+".name", ErrMalformedSnapshot, "the job is in the snapshot twice")
	}
	if err := n.checkName(sj.Name); err != nil {
		return fail(sj.Name, where+".name", ErrMalformedSnapshot, message(err))
	}
	info := JobInfo{GPUs: sj.Info.GPUs, Claims: sj.Info.Claims, Private: sj.Info.Private, Group: sj.Info.Group}
	if k := sj.Info.Kind; k != nil {
		info.Kind = &perfmodel.JobKey{Model: k.Model, BatchSize: k.BatchSize, ScaleFactor: 1}
	}
	info, err := checkInfo(sj.Name, info)
	if err != nil {
		return fail(sj.Name, where+".info", ErrMalformedSnapshot, message(err))
	}
	if err := snapCount(where+".gpus", sj.GPUs, 0, topology.MaxClusterGPUs); err != nil {
		return err
	}
	if err := snapNumber(where+".last", sj.Last, 0, MaxTime); err != nil {
		return err
	}
	if sj.Seq > n.seq {
		return fail(sj.Name, where+".seq", ErrMalformedSnapshot, fmt.Sprintf("%d, after the learner's %d", sj.Seq, n.seq))
	}
	if len(sj.Tracks) > n.cfg.MaxTracks {
		return fail(sj.Name, where+".tracks", ErrMalformedSnapshot, fmt.Sprintf("%d tracks, more than MaxTracks %d", len(sj.Tracks), n.cfg.MaxTracks))
	}
	j := n.newJob(sj.Name)
	j.info, j.ref, j.seen, j.last, j.seq = info, sj.GPUs, sj.Seen, sj.Last, sj.Seq
	for k := range sj.Tracks {
		tr, err := n.restoreTrack(&sj.Tracks[k], fmt.Sprintf("%s.tracks[%d]", where, k))
		if err != nil {
			return err
		}
		if j.findTrack(tr.typ, tr.gpus) >= 0 {
			return fail(sj.Name, fmt.Sprintf("%s.tracks[%d]", where, k), ErrMalformedSnapshot, "a second track of the same type and GPU count")
		}
		j.tracks = append(j.tracks, tr)
	}
	if sj.Segment != nil {
		if err := n.restoreSegment(sj.Name, j, sj.Segment, where+".segment"); err != nil {
			return err
		}
	}
	n.baseline(j)
	for k := range j.tracks {
		tr := &j.tracks[k]
		tr.rowMean, tr.rowOK = tr.verMean, tr.verOK
	}
	return nil
}

// restoreTrack checks a track.
func (n *Learner) restoreTrack(st *snapTrack, where string) (track, error) {
	tr := track{typ: st.Type, gpus: st.GPUs, has: st.Has, windows: st.Windows, segments: st.Segments, resets: st.Resets}
	if err := snapCount(where+".type", st.Type, 0, len(n.types)-1); err != nil {
		return tr, err
	}
	if err := snapCount(where+".gpus", st.GPUs, 1, topology.MaxClusterGPUs); err != nil {
		return tr, err
	}
	for _, c := range []struct {
		name string
		v    int
	}{{"windows", st.Windows}, {"segments", st.Segments}, {"resets", st.Resets}} {
		if err := snapCount(where+"."+c.name, c.v, 0, math.MaxInt32); err != nil {
			return tr, err
		}
	}
	if st.Has {
		if err := snapNumber(where+".mean", st.Mean, minLogRate, maxLogRate); err != nil {
			return tr, err
		}
		if err := snapNumber(where+".var", st.Var, 1e-12, maxSnapVar); err != nil {
			return tr, err
		}
		tr.mean, tr.vari = st.Mean, st.Var
	}
	if st.Median != nil {
		if err := snapNumber(where+".median", *st.Median, minLogRate, maxLogRate); err != nil {
			return tr, err
		}
		tr.median, tr.hasMedian = *st.Median, true
	}
	return tr, nil
}

// restoreSegment checks and sets j's running segment.
func (n *Learner) restoreSegment(name string, j *job, ss *snapSegment, where string) error {
	if !j.seen {
		return fail(name, where, ErrMalformedSnapshot, "a running segment of a job without reports")
	}
	if err := snapCount(where+".track", ss.Track, 0, len(j.tracks)-1); err != nil {
		return err
	}
	checks := []struct {
		name   string
		v, max float64
	}{
		{"steps", ss.Steps, MaxSteps}, {"window_steps", ss.WindowSteps, ss.Steps},
		{"time", ss.Time, j.last}, {"window_time", ss.WindowTime, ss.Time},
	}
	for _, c := range checks {
		if err := snapNumber(where+"."+c.name, c.v, 0, c.max); err != nil {
			return err
		}
	}
	if len(ss.Windows) > n.cfg.MaxWindows {
		return fail(name, where+".windows", ErrMalformedSnapshot, fmt.Sprintf("%d windows, more than MaxWindows %d", len(ss.Windows), n.cfg.MaxWindows))
	}
	if err := snapCount(where+".closed", ss.Closed, len(ss.Windows), math.MaxInt32); err != nil {
		return err
	}
	if err := snapCount(where+".streak", ss.Streak, 1-n.cfg.PhaseWindows, n.cfg.PhaseWindows-1); err != nil {
		return err
	}
	s := &j.seg
	s.reset(ss.ID, ss.Track, ss.Steps, ss.Time)
	s.wSteps, s.wTim, s.closed, s.streak = ss.WindowSteps, ss.WindowTime, ss.Closed, ss.Streak
	for k, w := range ss.Windows {
		if err := snapNumber(fmt.Sprintf("%s.windows[%d]", where, k), w, minLogRate, maxLogRate); err != nil {
			return err
		}
		s.add(w)
	}
	j.running = true
	return nil
}

// restoreRow checks and adds a remembered row.
func (n *Learner) restoreRow(sr *snapRow, i int) error {
	where := fmt.Sprintf("history[%d]", i)
	if len(sr.Types) != len(sr.LogRates) || len(sr.Types) == 0 {
		return fail("", where, ErrMalformedSnapshot, fmt.Sprintf("%d types and %d log rates (want as many, at least 1)", len(sr.Types), len(sr.LogRates)))
	}
	if sr.Seq > n.seq {
		return fail("", where+".seq", ErrMalformedSnapshot, fmt.Sprintf("%d, after the learner's %d", sr.Seq, n.seq))
	}
	if len(sr.Group) > MaxGroupLen {
		return fail("", where+".group", ErrMalformedSnapshot, fmt.Sprintf("%d bytes, more than %d", len(sr.Group), MaxGroupLen))
	}
	if err := snapCount(where+".gpus", sr.GPUs, 0, topology.MaxClusterGPUs); err != nil {
		return err
	}
	vals := make([]float64, len(n.types))
	for t := range vals {
		vals[t] = math.NaN()
	}
	for k, t := range sr.Types {
		if err := snapCount(fmt.Sprintf("%s.types[%d]", where, k), t, 0, len(n.types)-1); err != nil {
			return err
		}
		if !math.IsNaN(vals[t]) {
			return fail("", fmt.Sprintf("%s.types[%d]", where, k), ErrMalformedSnapshot, fmt.Sprintf("type %d twice", t))
		}
		if err := snapNumber(fmt.Sprintf("%s.log_rates[%d]", where, k), sr.LogRates[k], minLogRate, maxLogRate); err != nil {
			return err
		}
		vals[t] = sr.LogRates[k]
	}
	n.ids++
	n.history = append(n.history, histRow{vals: vals, seq: sr.Seq, id: n.ids, group: groupKey{sr.Group, sr.GPUs}})
	return nil
}
