package lp

import "math"

// ModelResiduals measures a point (x, with the duals y) on the model as it
// was given, unscaled: the largest violation of a row, relative to 1 plus
// the larger of the row's violated bound and the size of its terms
// (sum |a_ij x_j|); the largest violation of the dual constraints, each
// reduced cost c_j - (A'y)_j of a wrong sign for the bounds of x_j (or
// not zero for a free variable) relative to 1 plus the size of its terms,
// and each dual of a wrong sign for its row's bounds (or not zero for a
// free row) relative to 1 plus the largest dual; and the duality gap, the
// difference between c'x and the dual objective (the duals times the
// bounds they price, the terms of infinite bounds left to the dual
// measure), relative to 1 plus |c'x|. Variables outside their bounds count
// as row violations do. Signs follow a minimisation (a maximisation's
// objective and duals are negated first). x has one value per variable and
// y one per row; y may be nil, for the primal measure alone.
func ModelResiduals(m *Model, x, y []float64) Residuals {
	var r Residuals
	s := float64(m.sense)
	for j := range m.obj {
		r.Primal = max(r.Primal, boundViolation(x[j], m.colLo[j], m.colUp[j], math.Abs(x[j])))
	}
	for i := range m.rowLo {
		idx, val := m.Row(i)
		act, size := 0.0, 0.0
		for k, j := range idx {
			t := val[k] * x[j]
			act += t
			size += math.Abs(t)
		}
		r.Primal = max(r.Primal, boundViolation(act, m.rowLo[i], m.rowUp[i], size))
	}
	if y == nil {
		return r
	}
	// The dual constraints and objective, as for min s c'x.
	ymax := 0.0
	for _, v := range y {
		ymax = max(ymax, math.Abs(v))
	}
	d := make([]float64, len(m.obj))
	size := make([]float64, len(m.obj))
	for j, c := range m.obj {
		d[j], size[j] = s*c, math.Abs(c)
	}
	dualObj := 0.0
	for i := range m.rowLo {
		yi := s * y[i]
		idx, val := m.Row(i)
		for k, j := range idx {
			d[j] -= val[k] * yi
			size[j] += math.Abs(val[k] * yi)
		}
		wrong, term := dualSign(yi, m.rowLo[i], m.rowUp[i])
		r.Dual = max(r.Dual, wrong/(1+ymax))
		dualObj += term
	}
	primalObj := 0.0
	for j, dj := range d {
		primalObj += s * m.obj[j] * x[j]
		wrong, term := dualSign(dj, m.colLo[j], m.colUp[j])
		r.Dual = max(r.Dual, wrong/(1+size[j]))
		dualObj += term
	}
	r.Gap = math.Abs(primalObj-dualObj) / (1 + math.Abs(primalObj))
	if math.IsNaN(r.Primal) || math.IsNaN(r.Dual) || math.IsNaN(r.Gap) {
		r = Residuals{Primal: math.Inf(1), Dual: math.Inf(1), Gap: math.Inf(1)}
	}
	return r
}

// boundViolation returns how far v is outside [lo, up], relative to 1
// plus the larger of the bound it crosses and size, the size of v's terms.
func boundViolation(v, lo, up, size float64) float64 {
	switch {
	case v < lo:
		return (lo - v) / (1 + max(math.Abs(lo), size))
	case v > up:
		return (v - up) / (1 + max(math.Abs(up), size))
	case math.IsNaN(v):
		return math.Inf(1)
	}
	return 0
}

// dualSign returns the part of the dual value v (of a row or a reduced
// cost, for a minimisation) whose sign its bounds do not allow (a positive
// value prices the lower bound, a negative one the upper), and its term
// of the dual objective: v times the bound it prices, 0 when that bound is
// infinite.
func dualSign(v, lo, up float64) (wrong, term float64) {
	switch {
	case v > 0 && math.IsInf(lo, -1):
		return v, 0
	case v > 0:
		return 0, v * lo
	case v < 0 && math.IsInf(up, 1):
		return -v, 0
	case v < 0:
		return 0, v * up
	}
	return 0, 0
}
