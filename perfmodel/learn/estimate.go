package learn

import (
	"cmp"
	"math"
	"slices"

	"github.com/gpusched/gpusched/perfmodel"
	"github.com/gpusched/gpusched/topology"
)

// Bounds of a log rate (those of perfmodel's tables).
var (
	minLogRate = math.Log(perfmodel.MinRate)
	maxLogRate = math.Log(perfmodel.MaxRate)
)

// trackVal is one track's measurement, computed once per call.
type trackVal struct {
	typ, gpus         int
	mean, vari        float64
	ok                bool // measured
	windows, segments int
}

// trackVals returns the measurements of j's tracks in buf.
func (l *Learner) trackVals(j *job, buf []trackVal) []trackVal {
	buf = buf[:0]
	for k := range j.tracks {
		tr := &j.tracks[k]
		tv := trackVal{typ: tr.typ, gpus: tr.gpus, windows: tr.windows, segments: tr.segments}
		if j.running && j.seg.track == k && j.seg.n > 0 {
			tv.segments++
		}
		tv.mean, tv.vari, tv.ok = l.trackMeasure(j, k)
		buf = append(buf, tv)
	}
	return buf
}

// scaling returns the job's exponent of GPU count b and its variance: the
// prior N(1, ScalingSigma^2) (linear scaling, which Sia and Pollux assume
// before measuring) combined, by precision, with the weighted
// least-squares slope of the measured log capability on log GPU count of
// each type measured at two counts or more. The mean is clamped to [0, 1]
// (more GPUs never slow a job down, nor speed it up more than linearly).
func (l *Learner) scaling(tvs []trackVal) (b, bvar float64) {
	s0 := l.cfg.ScalingSigma
	prec, num := 1/(s0*s0), 1/(s0*s0)
	for i := range tvs {
		if slices.ContainsFunc(tvs[:i], func(o trackVal) bool { return o.typ == tvs[i].typ }) {
			continue // the type's first track sums them all
		}
		var sw, sx, sy, sxx, sxy float64
		counts := 0
		for _, tv := range tvs[i:] {
			if tv.typ != tvs[i].typ || !tv.ok {
				continue
			}
			w, x := 1/tv.vari, math.Log(float64(tv.gpus))
			sw, sx, sy, sxx, sxy = sw+w, sx+w*x, sy+w*tv.mean, sxx+w*x*x, sxy+w*x*tv.mean
			counts++
		}
		if counts < 2 {
			continue
		}
		sxxc := sxx - sx*sx/sw
		if !(sxxc > 0) {
			continue
		}
		slope := (sxy - sx*sy/sw) / sxxc
		prec += sxxc
		num += slope * sxxc
	}
	b = min(max(num/prec, 0), 1)
	return b, 1 / prec
}

// measured returns j's measured log rate on type ti at its reference GPU
// count ref: each track on ti projected by the scaling exponent, weighed
// by precision; with the windows and segments of those tracks.
func measured(tvs []trackVal, ti, ref int, b, bvar float64) (mean, vari float64, windows, segments int, ok bool) {
	logRef := math.Log(float64(max(ref, 1)))
	sw, swm := 0.0, 0.0
	for _, tv := range tvs {
		if tv.typ != ti {
			continue
		}
		windows += tv.windows
		segments += tv.segments
		if !tv.ok {
			continue
		}
		d := logRef - math.Log(float64(tv.gpus))
		m, v := tv.mean+b*d, tv.vari+bvar*d*d
		sw += 1 / v
		swm += m / v
	}
	if sw == 0 {
		return 0, 0, windows, segments, false
	}
	return swm / sw, 1 / sw, windows, segments, true
}

// row returns j's measured log rates at its reference GPU count by type
// index (NaN where not measured) in buf, and how many types it measured.
func (l *Learner) row(j *job, buf []float64, tvs []trackVal) ([]float64, []trackVal, int) {
	buf = buf[:0]
	tvs = l.trackVals(j, tvs)
	b, bvar := l.scaling(tvs)
	n := 0
	for ti := range l.types {
		m, _, _, _, ok := measured(tvs, ti, j.ref, b, bvar)
		if !ok {
			m = math.NaN()
		} else {
			n++
		}
		buf = append(buf, m)
	}
	return buf, tvs, n
}

// view is what Estimates needs of a job, computed once: its evidence per
// type (measured, else claimed) and the scaling.
type view struct {
	j       *job
	b, bvar float64
	ev      []evidence
	// lev is the measured part of ev (by the job or its group): the
	// job's level for the priors (a claim is evidence on its own type
	// only: a claim of 100 on one type set the priors on the others from
	// it, issue #41's review).
	lev      []evidence
	byType   []int // index in ev of each type's evidence, or -1
	measured []bool
	grouped  []bool   // the evidence is the group's (groupEvidence)
	counts   [][2]int // windows, segments per type
	buf      []weighted
	// all are the reference rows' weights on all the evidence, for the
	// types without evidence of their own (computed once).
	all    []refWeight
	hasAll bool
	one    []refWeight // scratch for a type with evidence of its own
}

// view gathers j's evidence.
func (l *Learner) view(j *job) *view {
	v := &view{j: j, byType: make([]int, len(l.types)), measured: make([]bool, len(l.types)), grouped: make([]bool, len(l.types)), counts: make([][2]int, len(l.types))}
	tvs := l.trackVals(j, nil)
	v.b, v.bvar = l.scaling(tvs)
	for ti, t := range l.types {
		v.byType[ti] = -1
		m, vari, w, s, ok := measured(tvs, ti, j.ref, v.b, v.bvar)
		v.counts[ti] = [2]int{w, s}
		if ok {
			v.measured[ti] = true
		} else if m, vari, ok = l.groupEvidence(j, ti); ok {
			v.grouped[ti] = true
		} else if c := j.info.Claims[t]; c > 0 {
			m, vari, ok = math.Log(c), l.cfg.ClaimSigma*l.cfg.ClaimSigma, true
		}
		if ok {
			v.byType[ti] = len(v.ev)
			v.ev = append(v.ev, evidence{typ: ti, mean: m, vari: vari})
			if v.measured[ti] || v.grouped[ti] {
				v.lev = append(v.lev, evidence{typ: ti, mean: m, vari: vari})
			}
		}
	}
	return v
}

// prior returns the prior of the log rate on type ti: the population's
// match and the table's, combined by precision.
func (l *Learner) prior(v *view, ti int) (mean, vari float64, ok bool) {
	prec, num := 0.0, 0.0
	if l.pop.covers(ti) {
		if m, vr, ok := l.popPrior(v, ti); ok {
			prec += 1 / vr
			num += m / vr
		}
	}
	if m, vr, has := l.modelPrior(v, ti); has {
		prec += 1 / vr
		num += m / vr
	}
	if prec == 0 {
		return 0, 0, false
	}
	return num / prec, 1 / prec, true
}

// popPrior returns the population's prior on type ti (covered) of v's
// job, its own measurement on ti left out: from the fit's grid when the
// rest of its measured evidence is on one type at most, else by matching
// it to the reference rows.
func (l *Learner) popPrior(v *view, ti int) (mean, vari float64, ok bool) {
	p := l.pop
	if p.grid != nil {
		m, e, n := -1, 0.0, 0
		for _, x := range v.lev {
			if p.usable(x, ti) {
				m, e = x.typ, x.mean
				n++
			}
		}
		if n <= 1 {
			if mean, vari, ok := p.grid.prior(m, e, ti); ok {
				return mean, vari, true
			}
		}
	}
	ws := v.all
	if v.measured[ti] || v.grouped[ti] { // its evidence on ti left out of its prior
		v.one = p.refWeights(v.lev, ti, l.kernel(), v.one)
		ws = v.one
	} else if !v.hasAll {
		v.all, v.hasAll = p.refWeights(v.lev, -1, l.kernel(), nil), true
		ws = v.all
	}
	if v.buf == nil {
		v.buf = make([]weighted, 0, p.refs)
	}
	return p.fromWeights(ws, ti, l.kernel(), v.buf)
}

// kernel returns the match's widths.
func (l *Learner) kernel() kernel {
	return kernel{level: l.cfg.LevelWidth, shape: l.cfg.ShapeWidth, minSigma: l.cfg.MinPriorSigma}
}

// modelPrior returns the table prior of the job's kind on type ti: the
// model's log rate moved to the job's level (the precision-weighted mean
// of its evidence on the other types less the model's rates there), with
// variance ModelSigma^2 plus that of the level. Without evidence the
// model's rate itself, with variance ModelSigma^2.
func (l *Learner) modelPrior(v *view, ti int) (mean, vari float64, ok bool) {
	kind := v.j.info.Kind
	if l.cfg.Model == nil || kind == nil {
		return 0, 0, false
	}
	k := kind.WithScaleFactor(max(v.j.ref, 1))
	mt, ok := l.modelRate(k, ti)
	if !ok {
		return 0, 0, false
	}
	s2 := l.cfg.ModelSigma * l.cfg.ModelSigma
	sw, swd := 0.0, 0.0
	for _, e := range v.lev {
		if e.typ == ti {
			continue
		}
		if ms, has := l.modelRate(k, e.typ); has {
			w := 1 / (e.vari + s2)
			sw += w
			swd += w * (e.mean - ms)
		}
	}
	if sw == 0 {
		return mt, s2, true
	}
	return mt + swd/sw, s2 + 1/sw, true
}

// modelRate is the log of Config.Model's rate of k on type ti.
func (l *Learner) modelRate(k perfmodel.JobKey, ti int) (float64, bool) {
	r, err := l.cfg.Model.Throughput(k, l.types[ti])
	if err != nil || !(r >= perfmodel.MinRate && r <= perfmodel.MaxRate) {
		return 0, false
	}
	return math.Log(r), true
}

// estimate returns the estimate of v's job on type ti: the prior and the
// job's own evidence on ti (measured, else claimed) combined by
// precision.
func (l *Learner) estimate(v *view, ti int) Estimate {
	e := Estimate{Type: l.types[ti], GPUs: v.j.ref, Scaling: v.b, Windows: v.counts[ti][0], Segments: v.counts[ti][1]}
	pm, pv, hasPrior := l.prior(v, ti)
	prec, num := 0.0, 0.0
	if hasPrior {
		e.Source = SourcePrior
		e.PriorMean, e.PriorSigma = pm, math.Sqrt(pv)
		prec, num = 1/pv, pm/pv
	}
	if i := v.byType[ti]; i >= 0 {
		own := v.ev[i]
		prec += 1 / own.vari
		num += own.mean / own.vari
		switch {
		case v.measured[ti]:
			e.Source = SourceMeasured
		case v.grouped[ti]:
			e.Source = SourceGroup
		default:
			e.Source = SourceClaim
		}
	}
	if prec == 0 {
		return Estimate{Type: e.Type, GPUs: e.GPUs, Scaling: e.Scaling, Windows: e.Windows, Segments: e.Segments}
	}
	e.LogMean = min(max(num/prec, minLogRate), maxLogRate)
	e.Mean = math.Exp(e.LogMean)
	e.Sigma = math.Sqrt(1 / prec)
	return e
}

// Estimate returns job's estimate on type t (see Estimator). Cost: that
// of Estimates for one type.
func (l *Learner) Estimate(name string, t topology.GPUType) Estimate {
	l.mu.RLock()
	defer l.mu.RUnlock()
	j, ti, ok := l.jobs[name], 0, false
	if j != nil {
		ti, ok = l.typeIdx[t]
	}
	if !ok {
		return Estimate{Type: t, Scaling: 1}
	}
	v := l.view(j)
	return l.estimate(v, ti)
}

// Estimates appends job's estimate on every type the learner knows, in
// the order of the types' names (see Estimator); an unknown job appends
// nothing. Cost: for a job measured on one type at most (every job
// under Kueue), O(tracks^2 + types) from the fit's grid of priors (about
// 2 us for 8 types; a point of the grid not yet filled costs
// O(References * types) once per fit, and a prior across a step of the
// weighted median, or beyond the grid, is computed as below); otherwise
// O(tracks^2 + types * References * (measured types + 1)), about 0.1 ms
// of CPU for 8 types and 256 references (BenchmarkEstimates,
// BenchmarkEstimatesOneType).
func (l *Learner) Estimates(name string, dst []Estimate) []Estimate {
	l.mu.RLock()
	defer l.mu.RUnlock()
	j := l.jobs[name]
	if j == nil {
		return dst
	}
	v := l.view(j)
	for _, ti := range l.byName {
		dst = append(dst, l.estimate(v, ti))
	}
	return dst
}

// Tracks returns what the learner holds of job by GPU type and count, in
// the order the job first ran on them; nil for an unknown job.
func (l *Learner) Tracks(name string) []Track {
	l.mu.RLock()
	defer l.mu.RUnlock()
	j := l.jobs[name]
	if j == nil {
		return nil
	}
	out := make([]Track, 0, len(j.tracks))
	for k := range j.tracks {
		tr := &j.tracks[k]
		t := Track{Type: l.types[tr.typ], GPUs: tr.gpus, Windows: tr.windows, Segments: tr.segments, Resets: tr.resets}
		if m, v, ok := l.trackMeasure(j, k); ok {
			t.Rate, t.Sigma = math.Exp(m), math.Sqrt(v)
		}
		if tr.hasMedian {
			t.Median = math.Exp(tr.median)
		}
		if j.running && j.seg.track == k {
			t.Running = true
			if j.seg.n > 0 {
				t.Median = math.Exp(j.seg.quantile(0.5))
				t.Segments++
			}
		}
		out = append(out, t)
	}
	return out
}

// Jobs returns the number of active jobs and of finished jobs remembered.
func (l *Learner) Jobs() (active, remembered int) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return len(l.jobs), len(l.history)
}

// Refresh refits the population from the measured rates of the active
// jobs that are not Private and of the remembered ones (see the package
// documentation), when at least Config.Tolerance of the rows changed
// since the last fit (see Tolerance; always without a fit, or after a
// new type or a Restore); otherwise it returns the last fit's FitStats.
// It copies the matrix under the read lock (O(jobs * tracks^2)), fits
// without the lock, and installs the fit; concurrent calls run one after
// the other. A fit changes every job's Version only where it moved the
// reference rows beyond Tolerance. Cost: O(1) without a fit; with one,
// under 100 ms at 10,000 jobs by 8 types (see docs/learning.md).
func (l *Learner) Refresh() FitStats {
	l.refreshMu.Lock()
	defer l.refreshMu.Unlock()
	l.mu.Lock()
	tol := l.cfg.Tolerance
	if l.pop != nil && !l.forceFit && tol >= 0 && float64(l.changed) < max(1, tol*float64(l.rowsAtFit)) {
		st := l.fitStats
		l.mu.Unlock()
		return st
	}
	l.changed, l.forceFit = 0, false
	l.epoch++
	l.mu.Unlock()
	l.mu.RLock()
	in := l.matrix()
	warm, gen := l.pop, l.gen
	fp := fitParams{rank: l.cfg.Rank, huber: l.cfg.Huber, iterations: l.cfg.Iterations, references: l.cfg.References}
	kn := l.kernel()
	l.mu.RUnlock()
	st := FitStats{Rows: in.rows}
	var p *population
	if in.rows > 0 {
		groups := groupsOf(in)
		p = fitPopulation(mergeGroups(in, groups), fp, warm)
		p.groups = groups
		if p.refs >= minGridRefs {
			p.grid = newPriorGrid(p, kn)
		}
		st.Rank, st.References, st.ResidualSigma, st.Sweeps = p.k, p.refs, math.Sqrt(p.s2), p.sweeps
		for _, n := range p.n {
			st.Entries += n
			if n > 0 {
				st.Types++
			}
		}
	}
	l.mu.Lock()
	if l.gen == gen {
		old := l.pop
		l.pop, l.fitStats, l.rowsAtFit = p, st, in.rows
		if tol < 0 || l.bumped.moved(p, tol/2, tol*kn.minSigma*kn.minSigma) {
			l.bumpAll()
			l.bumped = p
		} else {
			l.bumpGroups(old, p)
		}
	}
	l.mu.Unlock()
	return st
}

// matrix copies the measured rows (active jobs, then the history).
func (l *Learner) matrix() *popInput {
	cols := len(l.types)
	in := &popInput{cols: cols}
	var buf []float64
	var tvs []trackVal
	type entry struct {
		seq uint64
		j   *job
	}
	jobs := make([]entry, 0, len(l.jobs))
	for _, j := range l.jobs {
		if !j.info.Private && j.seq > 0 {
			jobs = append(jobs, entry{j.seq, j})
		}
	}
	// In the order of their latest window (unique), so that a fit does
	// not depend on the map's order.
	slices.SortFunc(jobs, func(a, b entry) int { return cmp.Compare(a.seq, b.seq) })
	for _, e := range jobs {
		j := e.j
		var n int
		buf, tvs, n = l.row(j, buf, tvs)
		if n == 0 {
			continue
		}
		in.y = append(in.y, buf...)
		in.rank = append(in.rank, j.seq)
		in.group = append(in.group, groupKey{j.info.Group, j.ref})
		in.id = append(in.id, j.id)
		in.rows++
	}
	for _, h := range l.history {
		for t := range cols {
			if t < len(h.vals) {
				in.y = append(in.y, h.vals[t])
			} else {
				in.y = append(in.y, math.NaN())
			}
		}
		in.rank = append(in.rank, h.seq)
		in.group = append(in.group, h.group)
		in.id = append(in.id, h.id)
		in.rows++
	}
	return in
}
