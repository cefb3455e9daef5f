package learn

import (
	"cmp"
	"math"
	"slices"
)

// evidence is what a job's own data say of its log rate on one type (a
// measurement or a claim): a mean and a variance.
type evidence struct {
	typ  int
	mean float64
	vari float64
}

// kernel are the widths of the match of a job to the reference rows.
type kernel struct {
	level    float64 // of the level difference, in log rate
	shape    float64 // of the shape difference, per measured type
	minSigma float64 // floor of the prior's sigma
}

// minTypeRows is the fewest rows of the population measured on a type for
// the population to give a prior on it.
const minTypeRows = 2

// weighted is one reference row's prediction and weight.
type weighted struct{ v, w float64 }

// match returns the population's prior of the log rate on type t of a job
// with evidence ev (entries of type t are left out), by matching the job
// to the reference rows: Gavel's fingerprint, which picks the one
// reference job of the smallest cosine distance (Narayanan et al., OSDI
// 2020, section 6; scheduler/throughput_estimator.py), made soft. Each
// reference row r is moved to the job's level by d_r, the weighted mean
// of the job's evidence less the row's values, and weighs
//
//	w_r = exp(-d_r^2 / (2 level^2) - sum_s (e_s - y_rs - d_r)^2 / (2 (shape^2 + var_s)))
//
// (near in level: jobs of similar work per step gain alike from a faster
// type; near in shape: alike on the types measured). The prior is the
// weighted median of the rows' values on t moved by d_r, with sigma the
// weighted median absolute deviation (times 1.4826), at least minSigma,
// inflated by 1 + 1/n_eff for n_eff = (sum w)^2 / sum w^2 effective rows.
// ok is false when the population has fewer than two rows measured on t.
// Cost: O(references * (len(ev) + log references)).
func (p *Population) match(ev []evidence, t int, kn kernel, buf []weighted) (mean, variance float64, ok bool) {
	if p == nil || t >= p.cols || p.n[t] < minTypeRows || p.refs == 0 {
		return 0, 0, false
	}
	buf = buf[:0]
	hiLog := math.Inf(-1)
	for r := range p.refs {
		val := p.refVal[r*p.cols : (r+1)*p.cols]
		vr := p.refVar[r*p.cols : (r+1)*p.cols]
		d, logw := p.distance(ev, t, val, vr, kn)
		buf = append(buf, weighted{v: val[t] + d, w: logw})
		hiLog = max(hiLog, logw)
	}
	sw, sw2 := 0.0, 0.0
	for i := range buf {
		buf[i].w = math.Exp(buf[i].w - hiLog)
		sw += buf[i].w
		sw2 += buf[i].w * buf[i].w
	}
	mean = weightedMedian(buf, sw)
	for i := range buf {
		buf[i].v = math.Abs(buf[i].v - mean)
	}
	sigma := max(1.4826*weightedMedian(buf, sw), kn.minSigma)
	return mean, sigma * sigma * (1 + sw2/(sw*sw)), true
}

// distance returns the level shift d of a reference row (values val,
// variances vr) to the job's evidence, and the log of its weight.
func (p *Population) distance(ev []evidence, t int, val, vr []float64, kn kernel) (d, logw float64) {
	sw, swd := 0.0, 0.0
	for _, e := range ev {
		if !p.usable(e, t) {
			continue
		}
		w := 1 / (e.vari + vr[e.typ] + ridgeLevel)
		sw += w
		swd += w * (e.mean - val[e.typ])
	}
	if sw == 0 {
		return 0, 0
	}
	d = swd / sw
	logw = -d * d / (2 * kn.level * kn.level)
	for _, e := range ev {
		if !p.usable(e, t) {
			continue
		}
		r := e.mean - val[e.typ] - d
		logw -= r * r / (2 * (kn.shape*kn.shape + e.vari + vr[e.typ]))
	}
	return d, logw
}

// usable reports whether evidence e counts in the match for type t: of
// another type, which the population has measured.
func (p *Population) usable(e evidence, t int) bool {
	return e.typ != t && e.typ < p.cols && p.n[e.typ] > 0
}

// weightedMedian returns the weighted median of buf (total weight sw),
// sorting buf by value.
func weightedMedian(buf []weighted, sw float64) float64 {
	slices.SortFunc(buf, func(a, b weighted) int { return cmp.Compare(a.v, b.v) })
	acc := 0.0
	for _, x := range buf {
		acc += x.w
		if acc >= sw/2 {
			return x.v
		}
	}
	return buf[len(buf)-1].v
}
