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

// negligible is the log of the weight, relative to the heaviest row's,
// below which a reference row is left out of the match (1e-9: it could
// move the weighted median only if the heavier rows' weights fell within
// 1e-9 of a half).
var negligible = math.Log(1e-9)

// weighted is one reference row's prediction and weight.
type weighted struct{ v, w float64 }

// covers reports whether the population gives a prior on type t.
func (p *population) covers(t int) bool {
	return p != nil && t < p.cols && p.n[t] >= minTypeRows && p.refs > 0
}

// refWeight is a reference row's level shift and weight (relative to the
// heaviest row's; 0 if negligible).
type refWeight struct{ d, w float64 }

// refWeights and fromWeights give the population's prior of the log rate
// on type t of a job with evidence ev (less its entries of type t), by
// matching the job to the reference rows: Gavel's fingerprint, which picks the one
// reference job of the smallest cosine distance (Narayanan et al., OSDI
// 2020, section 6; scheduler/throughput_estimator.py), made soft. Each
// reference row r is moved to the job's level by d_r, the weighted mean
// of the job's evidence less the row's values, and weighs
//
//	w_r = exp(-d_r^2 / (2 level^2) - sum_s (e_s - y_rs - d_r)^2 / (2 (shape^2 + var_s)))
//
// (near in level: jobs of similar work per step gain alike from a faster
// type; near in shape: alike on the types measured), and by shape^2 /
// (shape^2 + v) when its rate on t is completed with variance v. The
// prior is the weighted median of the rows' values on t moved by d_r,
// with sigma the
// weighted median absolute deviation (times 1.4826), at least minSigma,
// inflated by 1 + 1/n_eff for n_eff = (sum w)^2 / sum w^2 effective rows,
// plus the weighted mean variance of the rows' values on t (0 where
// measured). Cost: O(references * len(ev)).
//
// refWeights returns each reference row's level shift and weight for the
// evidence ev less its entries of type skip (-1 for none), in out.
func (p *population) refWeights(ev []evidence, skip int, kn kernel, out []refWeight) []refWeight {
	out = out[:0]
	hiLog := math.Inf(-1)
	for r := range p.refs {
		d, logw := p.distance(ev, skip, p.refVal[r*p.cols:(r+1)*p.cols], p.refVar[r*p.cols:(r+1)*p.cols], kn)
		out = append(out, refWeight{d, logw})
		hiLog = max(hiLog, logw)
	}
	for i := range out {
		if out[i].w < hiLog+negligible {
			out[i].w = 0
		} else {
			out[i].w = math.Exp(out[i].w - hiLog)
		}
	}
	return out
}

// fromWeights is the prior on type t from the reference rows' weights ws;
// ok is false when no row weighs (the evidence is not a number).
func (p *population) fromWeights(ws []refWeight, t int, kn kernel, buf []weighted) (mean, variance float64, ok bool) {
	buf = buf[:0]
	sw, sw2, swv := 0.0, 0.0, 0.0
	s2 := kn.shape * kn.shape
	for r, x := range ws {
		if x.w == 0 {
			continue
		}
		// A row whose rate on t is completed, not measured, weighs less:
		// by shape^2 / (shape^2 + its variance).
		vr := p.refVar[r*p.cols+t]
		w := x.w * s2 / (s2 + vr)
		sw += w
		sw2 += w * w
		swv += w * vr
		buf = append(buf, weighted{v: p.refVal[r*p.cols+t] + x.d, w: w})
	}
	if !(sw > 0 && sw < math.Inf(1)) {
		return 0, 0, false // no row weighs (not a number in the evidence)
	}
	mean = weightedMedian(buf, sw)
	for i := range buf {
		buf[i].v = math.Abs(buf[i].v - mean)
	}
	sigma := max(1.4826*weightedMedian(buf, sw), kn.minSigma)
	return mean, sigma*sigma*(1+sw2/(sw*sw)) + swv/sw, true
}

// distance returns the level shift d of a reference row (values val,
// variances vr) to the job's evidence less its entries of type skip, and
// the log of the row's weight.
func (p *population) distance(ev []evidence, skip int, val, vr []float64, kn kernel) (d, logw float64) {
	sw, swd := 0.0, 0.0
	for _, e := range ev {
		if !p.usable(e, skip) {
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
	s2 := kn.shape * kn.shape
	for _, e := range ev {
		if !p.usable(e, skip) {
			continue
		}
		r := e.mean - val[e.typ] - d
		logw -= r * r / (2 * (s2 + e.vari + vr[e.typ]))
	}
	return d, logw
}

// usable reports whether evidence e counts in the match when type skip is
// left out: of another type, which the population has measured.
func (p *population) usable(e evidence, skip int) bool {
	return e.typ != skip && e.typ < p.cols && p.n[e.typ] > 0
}

// weightedMedian returns the weighted median of buf (total weight sw):
// the least value whose cumulative weight in sorted order reaches sw/2,
// found by a three-way quickselect (Hoare, "Algorithm 65: Find", CACM
// 1961) on the weights, in O(len(buf)) expected time. It reorders buf.
func weightedMedian(buf []weighted, sw float64) float64 {
	target := sw / 2
	lo, hi := 0, len(buf)
	for hi-lo > 16 {
		s := buf[lo:hi]
		a, b, c := s[0].v, s[len(s)/2].v, s[len(s)-1].v
		pivot := max(min(a, b), min(max(a, b), c)) // median of three
		// s[:lt] < pivot, s[lt:gt] == pivot, s[gt:] > pivot.
		lt, i, gt := 0, 0, len(s)
		wLess, wEq := 0.0, 0.0
		for i < gt {
			switch x := s[i]; {
			case x.v < pivot:
				s[lt], s[i] = s[i], s[lt]
				wLess += x.w
				lt++
				i++
			case x.v > pivot:
				gt--
				s[gt], s[i] = s[i], s[gt]
			default:
				wEq += x.w
				i++
			}
		}
		switch {
		case wLess >= target:
			hi = lo + lt
		case wLess+wEq >= target:
			return pivot
		default:
			target -= wLess + wEq
			lo += gt
		}
	}
	s := buf[lo:hi]
	slices.SortFunc(s, func(a, b weighted) int { return cmp.Compare(a.v, b.v) })
	acc := 0.0
	for _, x := range s {
		acc += x.w
		if acc >= target {
			return x.v
		}
	}
	return s[len(s)-1].v
}
