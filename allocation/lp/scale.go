package lp

import (
	"context"
	"math"
)

// scale scales the std form in place so that the solver works on numbers
// near 1 whatever the model's units: rows and columns of A by passes of
// geometric-mean scaling (each row, then each column, divided by the
// geometric mean of its largest and smallest entry: J. A. Tomlin, "On
// scaling linear programming problems", Math. Programming Study 4, 1975;
// the scheme of CLP and HiGHS), then equilibrated so that the largest entry
// of every column is 1; scale factors are powers of 2, so scaling rounds
// nothing. The costs are then divided by a power of 2 near their largest
// magnitude, so that the dual values and the free-variable regularisation
// are on the scale of 1.
//
// In the scaled problem the columns are x~ = S^-1 x and the duals
// y~ = R^-1 y / cScale.
func (s *stdForm) scale(ctx context.Context, cols [][]entry) error {
	const passes = 8
	m, n := s.m, len(cols)
	s.rowScale = make([]float64, m)
	s.colScale = make([]float64, n)
	r, c := s.rowScale, s.colScale
	for i := range r {
		r[i] = 1
	}
	for j := range c {
		c[j] = 1
	}
	rowMax := make([]float64, m)
	rowMin := make([]float64, m)
	spread := func() float64 {
		lo, hi := math.Inf(1), 0.0
		for j, es := range cols {
			for _, e := range es {
				if v := math.Abs(e.val) * r[e.row] * c[j]; v > 0 {
					lo, hi = min(lo, v), max(hi, v)
				}
			}
		}
		if hi == 0 {
			return 1
		}
		return hi / lo
	}
	prev := spread()
	for range passes {
		if err := ctx.Err(); err != nil {
			return err
		}
		for i := range m {
			rowMax[i], rowMin[i] = 0, math.Inf(1)
		}
		for j, es := range cols {
			for _, e := range es {
				if v := math.Abs(e.val) * c[j]; v > 0 {
					rowMax[e.row], rowMin[e.row] = max(rowMax[e.row], v), min(rowMin[e.row], v)
				}
			}
		}
		for i := range m {
			if rowMax[i] > 0 {
				r[i] = pow2(1 / geoMean(rowMax[i], rowMin[i]))
			}
		}
		for j, es := range cols {
			hi, lo := 0.0, math.Inf(1)
			for _, e := range es {
				if v := math.Abs(e.val) * r[e.row]; v > 0 {
					hi, lo = max(hi, v), min(lo, v)
				}
			}
			if hi > 0 {
				c[j] = pow2(1 / geoMean(hi, lo))
			}
		}
		cur := spread()
		if cur > 0.9*prev {
			break
		}
		prev = cur
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	// Equilibrate the columns.
	for j, es := range cols {
		hi := 0.0
		for _, e := range es {
			hi = max(hi, math.Abs(e.val)*r[e.row])
		}
		if hi > 0 {
			c[j] = pow2(1 / hi)
		}
	}
	for j, es := range cols {
		for k := range es {
			es[k].val *= r[es[k].row] * c[j]
		}
		s.c[j] *= c[j]
		s.l[j] /= c[j]
		s.u[j] /= c[j]
	}
	for i := range m {
		s.b[i] *= r[i]
	}
	s.cScale = 1
	cMax := 0.0
	for _, v := range s.c {
		cMax = max(cMax, math.Abs(v))
	}
	if cMax > 0 {
		s.cScale = pow2(cMax)
		for j := range s.c {
			s.c[j] /= s.cScale
		}
	}
	return nil
}

// geoMean returns sqrt(hi lo) for hi >= lo > 0, as sqrt(hi) sqrt(lo) where
// the product would leave the normal range: the square of an entry of
// 1e-200 is 0 in float64, and its row was then left unscaled.
func geoMean(hi, lo float64) float64 {
	if p := hi * lo; p >= smallestNormal && p <= math.MaxFloat64 {
		return math.Sqrt(p)
	}
	return math.Sqrt(hi) * math.Sqrt(lo)
}

// pow2 returns the power of 2 nearest to v > 0 (in the logarithm).
func pow2(v float64) float64 {
	if !(v > 0) || math.IsInf(v, 0) {
		return 1
	}
	// v = frac 2^exp with frac in [0.5, 1): the nearest power is 2^exp
	// when log2(frac) > -0.5 (frac > 1/sqrt 2), 2^(exp-1) below. Near the
	// boundary, where rounding decides, the logarithm is taken as before.
	frac, exp := frexp(v)
	switch {
	case frac > 0.7072:
	case frac < 0.7070:
		exp--
	default:
		return ldexp1(int(math.Round(math.Log2(v))))
	}
	return ldexp1(exp)
}

// frexp is math.Frexp for v > 0 and finite, read off the bits when v is
// normal (the scaling calls it for every row and column of every pass).
func frexp(v float64) (float64, int) {
	b := math.Float64bits(v)
	e := int(b>>52) & 0x7ff
	if e == 0 {
		return math.Frexp(v) // subnormal
	}
	// v = 1.f 2^(e-1023) = (0.5 x 1.f) 2^(e-1022).
	return math.Float64frombits(b&(1<<52-1) | 1022<<52), e - 1022
}

// ldexp1 is math.Ldexp(1, k), built from the bits when 2^k is normal.
func ldexp1(k int) float64 {
	if k < -1022 || k > 1023 {
		return math.Ldexp(1, k)
	}
	return math.Float64frombits(uint64(k+1023) << 52)
}
