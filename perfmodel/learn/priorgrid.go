package learn

import (
	"math"
	"sync/atomic"
)

// priorGrid tabulates, per fit, the population's prior of a job whose
// usable evidence is on one type m at most (most jobs: under Kueue a job
// runs on one type). With one evidence e on m, each reference row's
// level shift is d_r = e - y_rm and its shape residual is 0, so the
// rows' weights, and the prior on every other type, are functions of e
// alone (not of the evidence's variance); with none, the prior is one
// value per type. The grid holds those functions at points h apart
// (Config.LevelWidth / gridPerWidth), each point's priors on every type
// computed exactly when first asked for (lazily, at most once per point
// kept: points are pure functions of the fit, so goroutines that race to
// fill one store the same values); a prior between two points is
// interpolated linearly, and evidence beyond the grid (gridMargin
// widths past the reference rows' values on m) is computed exactly.
//
// The interpolation's error is bounded by the prior's variation between
// two points: the weighted median is a step function of e, whose steps
// are the gaps between the rows' values, small where the rows are many
// (TestPriorGridError measures it against the exact prior).
//
// A priorGrid is safe for concurrent use.
type priorGrid struct {
	p    *population
	kn   kernel
	h    float64
	lo   []float64                     // per type m: the first point
	pts  [][]atomic.Pointer[priorCell] // per type m, per point
	zero atomic.Pointer[priorCell]     // without evidence
}

// priorCell is the prior on every type at one point of the grid: its
// mean less the evidence (g) and its variance; NaN where there is none.
type priorCell struct{ g, vari []float64 }

// Bounds of the grid: the fewest reference rows for a grid (with fewer,
// an exact prior costs little, and the steps of its weighted median are
// the largest), points per kernel width (LevelWidth), the widths past the
// rows' values it extends, and the most points per type (the spacing
// grows beyond).
const (
	minGridRefs  = 64
	gridPerWidth = 32
	gridMargin   = 1
	maxGridPts   = 4096
	// gridStep is the most the prior's mean (log rate) or sigma
	// (relative) may move between two points for an interpolation; a
	// larger move is a step of the weighted median, computed exactly.
	gridStep = 0.005
)

// newPriorGrid returns the (empty) grid of p's priors under kernel kn.
// Cost: O(references * types) and O(types * points) pointers.
func newPriorGrid(p *population, kn kernel) *priorGrid {
	g := &priorGrid{p: p, kn: kn, h: kn.level / gridPerWidth, lo: make([]float64, p.cols), pts: make([][]atomic.Pointer[priorCell], p.cols)}
	span := make([]float64, p.cols)
	for m := range p.cols {
		lo, hi := math.Inf(1), math.Inf(-1)
		for r := range p.refs {
			y := p.refVal[r*p.cols+m]
			lo, hi = min(lo, y), max(hi, y)
		}
		if !(hi >= lo) || math.IsInf(hi-lo, 0) {
			continue
		}
		g.lo[m] = lo - gridMargin*kn.level
		span[m] = hi - lo + 2*gridMargin*kn.level
		if span[m]/g.h > maxGridPts-1 {
			g.h = span[m] / (maxGridPts - 1)
		}
	}
	for m := range p.cols {
		if span[m] > 0 {
			g.pts[m] = make([]atomic.Pointer[priorCell], int(math.Ceil(span[m]/g.h))+1)
		}
	}
	return g
}

// cell computes the priors on every type of a job with evidence e on
// type m (m < 0: none), exactly (refWeights and fromWeights).
func (g *priorGrid) cell(m int, e float64) *priorCell {
	p := g.p
	var ev []evidence
	if m >= 0 {
		ev = []evidence{{typ: m, mean: e}}
	}
	ws := p.refWeights(ev, -1, g.kn, make([]refWeight, 0, p.refs))
	buf := make([]weighted, 0, p.refs)
	c := &priorCell{g: make([]float64, p.cols), vari: make([]float64, p.cols)}
	for t := range p.cols {
		c.g[t], c.vari[t] = math.NaN(), math.NaN()
		if t == m || !p.covers(t) {
			continue
		}
		if mean, vr, ok := p.fromWeights(ws, t, g.kn, buf); ok {
			c.g[t], c.vari[t] = mean-e, vr // e is 0 without evidence
		}
	}
	return c
}

// load returns the cell at ptr, computed and stored if empty.
func (g *priorGrid) load(ptr *atomic.Pointer[priorCell], m int, e float64) *priorCell {
	if c := ptr.Load(); c != nil {
		return c
	}
	c := g.cell(m, e)
	if !ptr.CompareAndSwap(nil, c) {
		return ptr.Load()
	}
	return c
}

// prior returns the population's prior on type t of a job whose only
// usable evidence is e on type m (m < 0: none); ok is false when the
// grid cannot say (e beyond it, or no row weighs): compute it exactly.
// Cost: O(1) once the points are filled; filling a point costs
// O(References * types).
func (g *priorGrid) prior(m int, e float64, t int) (mean, vari float64, ok bool) {
	if m < 0 {
		c := g.load(&g.zero, -1, 0)
		return c.g[t], c.vari[t], !math.IsNaN(c.g[t])
	}
	pts := g.pts[m]
	x := (e - g.lo[m]) / g.h
	if !(x >= 0 && x < float64(len(pts)-1)) {
		return 0, 0, false
	}
	i := int(x)
	f := x - float64(i)
	a := g.load(&pts[i], m, g.lo[m]+float64(i)*g.h)
	b := g.load(&pts[i+1], m, g.lo[m]+float64(i+1)*g.h)
	ga, gb, va, vb := a.g[t], b.g[t], a.vari[t], b.vari[t]
	if math.IsNaN(ga+gb+va+vb) || math.Abs(gb-ga) > gridStep || math.Abs(vb-va) > 2*gridStep*min(va, vb) {
		return 0, 0, false // a step of the weighted median between the points
	}
	return e + ga + f*(gb-ga), va + f*(vb-va), true
}
