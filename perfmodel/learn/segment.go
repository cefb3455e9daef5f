package learn

import (
	"math"
	"slices"
)

// track is what a job measured on one GPU type and count: a Kalman
// filter over its closed segments' capabilities (log rates).
type track struct {
	typ, gpus int
	has       bool    // the filter holds a closed segment
	mean      float64 // of the log capability
	vari      float64
	windows   int // measured windows, every segment
	segments  int // segments with a measured window
	resets    int // phase changes
	median    float64
	hasMedian bool // median is the latest closed segment's
	// verMean, verVar and verOK are the filter's measurement (the running
	// segment folded in) at the job's last Version change (drifted);
	// rowMean and rowOK its log capability at the row's last change
	// (settle).
	verMean, verVar float64
	verOK           bool
	rowMean         float64
	rowOK           bool
}

// segment is a job's current run: its windows, in arrival order (a ring)
// and sorted (for the quantiles).
type segment struct {
	id           uint64
	track        int // index in the job's tracks
	steps, time  float64
	wSteps, wTim float64 // the open window's start
	closed       int     // windows closed, warm-up included
	ring         []float64
	head, n      int
	sorted       []float64
	streak       int // consecutive windows beyond the phase bound, signed
}

// reset empties the segment for a new run starting at (steps, time).
func (s *segment) reset(id uint64, track int, steps, time float64) {
	s.id, s.track = id, track
	s.steps, s.time, s.wSteps, s.wTim = steps, time, steps, time
	s.closed, s.head, s.n, s.streak = 0, 0, 0, 0
	s.sorted = s.sorted[:0]
}

// add appends a window's log rate w, dropping the oldest when the ring is
// full. Cost: O(len(ring)) moves, no allocation.
func (s *segment) add(w float64) {
	if s.n == len(s.ring) {
		old := s.ring[s.head]
		i, _ := slices.BinarySearch(s.sorted, old)
		s.sorted = slices.Delete(s.sorted, i, i+1)
		s.ring[s.head] = w
		s.head = (s.head + 1) % len(s.ring)
	} else {
		s.ring[(s.head+s.n)%len(s.ring)] = w
		s.n++
	}
	i, _ := slices.BinarySearch(s.sorted, w)
	s.sorted = slices.Insert(s.sorted, i, w)
}

// keepLast keeps only the newest k windows.
func (s *segment) keepLast(k int) {
	if k >= s.n {
		return
	}
	last := make([]float64, 0, k)
	for i := s.n - k; i < s.n; i++ {
		last = append(last, s.ring[(s.head+i)%len(s.ring)])
	}
	s.head, s.n = 0, 0
	s.sorted = s.sorted[:0]
	for _, w := range last {
		s.add(w)
	}
}

// windows returns the kept windows' log rates, oldest first.
func (s *segment) windows() []float64 {
	out := make([]float64, s.n)
	for i := range s.n {
		out[i] = s.ring[(s.head+i)%len(s.ring)]
	}
	return out
}

// quantile returns the q-quantile of the kept windows (linear
// interpolation between order statistics, Hyndman and Fan's type 7).
func (s *segment) quantile(q float64) float64 {
	if s.n == 1 {
		return s.sorted[0]
	}
	x := q * float64(s.n-1)
	i := int(x)
	if i >= s.n-1 {
		return s.sorted[s.n-1]
	}
	return s.sorted[i] + (x-float64(i))*(s.sorted[i+1]-s.sorted[i])
}

// minSpreadWindows are the windows a segment needs before its own spread
// replaces Config.WindowSigma.
const minSpreadWindows = 8

// spread returns the windows' log-rate standard deviation, robustly: the
// interquartile range over 1.349 once there are minSpreadWindows windows,
// else the prior one.
func (s *segment) spread(prior float64) float64 {
	if s.n < minSpreadWindows {
		return prior
	}
	return (s.quantile(0.75) - s.quantile(0.25)) / 1.349
}

// measure is the segment's capability and its variance under the
// learner's settings; ok is false before its first measured window.
func (l *Learner) measure(s *segment) (z, r float64, ok bool) {
	if s.n == 0 {
		return 0, 0, false
	}
	sw := s.spread(l.cfg.WindowSigma)
	z = s.quantile(l.cfg.Quantile)
	r = max(l.qVar*sw*sw/float64(s.n), l.cfg.NoiseFloor*l.cfg.NoiseFloor)
	return z, r, true
}

// kalman folds a measurement (z, r) into a filter (mean, vari), the
// filter's variance first grown by the process noise q: the scalar
// Kalman update (Kalman, "A New Approach to Linear Filtering and
// Prediction Problems", 1960), with gain k = v / (v + r).
func kalman(has bool, mean, vari, z, r, q float64) (float64, float64) {
	if !has {
		return z, r
	}
	vari += q
	k := vari / (vari + r)
	return mean + k*(z-mean), (1 - k) * vari
}

// trackMeasure returns track k of j's filter with its running segment
// folded in, if it is running there.
func (l *Learner) trackMeasure(j *job, k int) (mean, vari float64, ok bool) {
	tr := &j.tracks[k]
	mean, vari, ok = tr.mean, tr.vari, tr.has
	if j.running && j.seg.track == k {
		if z, r, has := l.measure(&j.seg); has {
			mean, vari = kalman(ok, mean, vari, z, r, l.drift2())
			ok = true
		}
	}
	return mean, vari, ok
}

// drift2 is the process noise's variance.
func (l *Learner) drift2() float64 { return l.cfg.Drift * l.cfg.Drift }

// closeSegment folds j's running segment into its track.
func (l *Learner) closeSegment(j *job) {
	if !j.running {
		return
	}
	j.running = false
	s := &j.seg
	tr := &j.tracks[s.track]
	z, r, ok := l.measure(s)
	if !ok {
		return
	}
	tr.mean, tr.vari = kalman(tr.has, tr.mean, tr.vari, z, r, l.drift2())
	tr.has = true
	tr.segments++
	tr.median, tr.hasMedian = s.quantile(0.5), true
}

// window takes a closed window's log rate w into j's running segment:
// the phase test, then the ring.
func (l *Learner) window(j *job, w float64) {
	s := &j.seg
	s.closed++
	if s.closed <= l.cfg.WarmupWindows {
		return
	}
	tr := &j.tracks[s.track]
	if l.phaseChange(j, w) {
		tr.has = false
		tr.resets++
		s.keepLast(l.cfg.PhaseWindows - 1)
		s.streak = 0
	}
	s.add(w)
	tr.windows++
}

// phaseChange runs the innovation test on window w: it counts the windows
// in a row beyond PhaseSigmas sigmas of the track's estimate, on one side,
// and reports a phase change at PhaseWindows of them. The window's
// expected value is the capability less z_q window sigmas (the capability
// is the Quantile of the windows, not their centre); its variance the
// estimate's plus a window's.
func (l *Learner) phaseChange(j *job, w float64) bool {
	s := &j.seg
	mean, vari, ok := l.trackMeasure(j, s.track)
	if !ok {
		return false
	}
	sw := s.spread(l.cfg.WindowSigma)
	nu := w - (mean - l.qZ*sw)
	bound := l.cfg.PhaseSigmas * math.Sqrt(vari+sw*sw)
	switch {
	case nu > bound:
		s.streak = max(s.streak, 0) + 1
	case nu < -bound:
		s.streak = min(s.streak, 0) - 1
	default:
		s.streak = 0
	}
	return s.streak >= l.cfg.PhaseWindows || -s.streak >= l.cfg.PhaseWindows
}
