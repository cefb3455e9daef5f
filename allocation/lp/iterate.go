package lp

import "math"

// iterate holds the primal-dual point of the interior-point method on a
// stdForm: x with gaps g = x - l >= 0 where x has a lower bound and
// w = u - x >= 0 where it has an upper bound, duals y, z >= 0 for the lower
// and v >= 0 for the upper bounds:
//
//	A x = b,  x - g = l,  x + w = u,  A'y + z - v = c,  g z = mu,  w v = mu.
type iterate struct {
	sf         *stdForm
	ne         *normalEq
	hasL, hasU []bool
	pairs      int // number of complementarity pairs

	x, g, w, z, v []float64
	y             []float64
	// Residuals: rb = b - Ax, rl = l - x + g, ru = u - x - w,
	// rc = c - A'y - z + v; right-hand sides of the complementarity rows.
	rb, rl, ru, rc []float64
	rgz, rwv       []float64
	theta, rhat    []float64
	// Direction, and the affine direction kept for the corrector.
	dx, dg, dw, dz, dv []float64
	dy, res            []float64
	cgz, cgp, cgq      []float64 // conjugate-gradient vectors (rows)
	cgt                []float64 // and one of columns
	ag, aw, az, av     []float64
	normC              float64
}

func newIterate(sf *stdForm, ne *normalEq) *iterate {
	n, m := sf.n, sf.m
	vec := func(k int) []float64 { return make([]float64, k) }
	it := &iterate{sf: sf, ne: ne, hasL: make([]bool, n), hasU: make([]bool, n)}
	for j := range n {
		it.hasL[j] = !math.IsInf(sf.l[j], -1)
		it.hasU[j] = !math.IsInf(sf.u[j], 1)
		if it.hasL[j] {
			it.pairs++
		}
		if it.hasU[j] {
			it.pairs++
		}
	}
	it.x, it.g, it.w, it.z, it.v, it.y = vec(n), vec(n), vec(n), vec(n), vec(n), vec(m)
	it.rb, it.rl, it.ru, it.rc = vec(m), vec(n), vec(n), vec(n)
	it.rgz, it.rwv, it.theta, it.rhat = vec(n), vec(n), vec(n), vec(n)
	it.dx, it.dg, it.dw, it.dz, it.dv = vec(n), vec(n), vec(n), vec(n), vec(n)
	it.dy, it.res = vec(m), vec(m)
	it.cgz, it.cgp, it.cgq, it.cgt = vec(m), vec(m), vec(m), vec(n)
	it.ag, it.aw, it.az, it.av = vec(n), vec(n), vec(n), vec(n)
	it.normC = normInf(sf.c)
	return it
}

// start sets Mehrotra's starting point: the least-norm solution of A x = b
// and the least-squares duals, with gaps and bound duals shifted into the
// positive orthant.
func (it *iterate) start() error {
	sf := it.sf
	n := sf.n
	for j := range n {
		it.theta[j] = 1
	}
	if err := it.ne.factor(it.theta); err != nil {
		return err
	}
	// x = A'(AA')^-1 b.
	copy(it.dy, sf.b)
	it.ne.solve(it.dy)
	it.atMul(it.dy, it.x)
	// y = (AA')^-1 A c, z - v = c - A'y.
	it.aMul(sf.c, it.y)
	it.ne.solve(it.y)
	it.atMul(it.y, it.rc)
	minP, minD := math.Inf(1), math.Inf(1)
	for j := range n {
		d := sf.c[j] - it.rc[j]
		switch {
		case it.hasL[j] && it.hasU[j]:
			it.z[j], it.v[j] = d/2, -d/2
		case it.hasL[j]:
			it.z[j] = d
		case it.hasU[j]:
			it.v[j] = -d
		}
		if it.hasL[j] {
			it.g[j] = it.x[j] - sf.l[j]
			minP, minD = min(minP, it.g[j]), min(minD, it.z[j])
		}
		if it.hasU[j] {
			it.w[j] = sf.u[j] - it.x[j]
			minP, minD = min(minP, it.w[j]), min(minD, it.v[j])
		}
	}
	if it.pairs == 0 {
		return nil
	}
	dp, dd := max(-1.5*minP, 0), max(-1.5*minD, 0)
	prod, sp, sd := 0.0, 0.0, 0.0
	for j := range n {
		if it.hasL[j] {
			prod += (it.g[j] + dp) * (it.z[j] + dd)
			sp += it.g[j] + dp
			sd += it.z[j] + dd
		}
		if it.hasU[j] {
			prod += (it.w[j] + dp) * (it.v[j] + dd)
			sp += it.w[j] + dp
			sd += it.v[j] + dd
		}
	}
	hp, hd := 0.0, 0.0
	if sd > 0 {
		hp = 0.5 * prod / sd
	}
	if sp > 0 {
		hd = 0.5 * prod / sp
	}
	for j := range n {
		if it.hasL[j] {
			it.g[j] = max(it.g[j]+dp+hp, 1e-4)
			it.z[j] = max(it.z[j]+dd+hd, 1e-4)
		}
		if it.hasU[j] {
			it.w[j] = max(it.w[j]+dp+hp, 1e-4)
			it.v[j] = max(it.v[j]+dd+hd, 1e-4)
		}
		if it.hasL[j] && it.hasU[j] {
			// Keep the gaps within the box when the shift overshoots.
			if width := sf.u[j] - sf.l[j]; it.g[j]+it.w[j] > 1.5*width {
				it.g[j], it.w[j] = max(width/2, 1e-4), max(width/2, 1e-4)
				it.x[j] = sf.l[j] + width/2
			}
		}
	}
	return nil
}

// aMul sets out = A v; atMul sets out = A'y.
func (it *iterate) aMul(v, out []float64) {
	sf := it.sf
	clear(out)
	for j := range sf.n {
		if v[j] == 0 {
			continue
		}
		for a := sf.colPtr[j]; a < sf.colPtr[j+1]; a++ {
			out[sf.rowIdx[a]] += sf.vals[a] * v[j]
		}
	}
}

func (it *iterate) atMul(y, out []float64) {
	sf := it.sf
	for j := range sf.n {
		s := 0.0
		for a := sf.colPtr[j]; a < sf.colPtr[j+1]; a++ {
			s += sf.vals[a] * y[sf.rowIdx[a]]
		}
		out[j] = s
	}
}

// residuals computes rb, rl, ru and rc.
func (it *iterate) residuals() {
	sf := it.sf
	it.aMul(it.x, it.rb)
	for i := range it.rb {
		it.rb[i] = sf.b[i] - it.rb[i]
	}
	it.atMul(it.y, it.rc)
	for j := range sf.n {
		it.rc[j] = sf.c[j] - it.rc[j]
		it.rl[j], it.ru[j] = 0, 0
		if it.hasL[j] {
			it.rc[j] -= it.z[j]
			it.rl[j] = sf.l[j] - it.x[j] + it.g[j]
		}
		if it.hasU[j] {
			it.rc[j] += it.v[j]
			it.ru[j] = sf.u[j] - it.x[j] - it.w[j]
		}
	}
}

func (it *iterate) mu() float64 {
	if it.pairs == 0 {
		return 0
	}
	s := 0.0
	for j := range it.x {
		if it.hasL[j] {
			s += it.g[j] * it.z[j]
		}
		if it.hasU[j] {
			s += it.w[j] * it.v[j]
		}
	}
	return s / float64(it.pairs)
}

// objectives returns c'x and the dual objective b'y + l'z - u'v.
func (it *iterate) objectives() (p, d float64) {
	sf := it.sf
	p = dot(sf.c, it.x)
	d = dot(sf.b, it.y)
	for j := range sf.n {
		if it.hasL[j] {
			d += sf.l[j] * it.z[j]
		}
		if it.hasU[j] {
			d -= sf.u[j] * it.v[j]
		}
	}
	return p, d
}

// converged computes the residuals and reports whether every primal
// residual is below tol relative to its own right-hand side, the dual
// residual below tol relative to the costs, and the duality gap below tol
// relative to the objective.
func (it *iterate) converged(tol float64) bool {
	it.residuals()
	sf := it.sf
	for i, r := range it.rb {
		if math.Abs(r) > tol*(1+math.Abs(sf.b[i])) {
			return false
		}
	}
	for j := range sf.n {
		if math.Abs(it.rl[j]) > tol*(1+math.Abs(sf.l[j])) && it.hasL[j] ||
			math.Abs(it.ru[j]) > tol*(1+math.Abs(sf.u[j])) && it.hasU[j] {
			return false
		}
	}
	p, d := it.objectives()
	return normInf(it.rc) <= tol*(1+it.normC) && math.Abs(p-d) <= tol*(1+math.Abs(p))
}

// diverged reports iterates so large that the problem is taken to be
// infeasible or unbounded.
func (it *iterate) diverged() bool {
	const big = 1e12
	scale := 1 + max(normInf(it.sf.b), it.normC, normInf(it.g), normInf(it.w))
	return normInf(it.x) > big*scale || normInf(it.y) > big*scale || normInf(it.z) > big*scale || normInf(it.v) > big*scale
}

// step takes one predictor-corrector step; residuals are current.
func (it *iterate) step() error {
	n := it.sf.n
	for j := range n {
		d := 0.0
		if it.hasL[j] {
			d += it.z[j] / it.g[j]
		}
		if it.hasU[j] {
			d += it.v[j] / it.w[j]
		}
		it.theta[j] = 1 / (d + 1e-14)
	}
	if err := it.ne.factor(it.theta); err != nil {
		return err
	}
	mu := it.mu()
	// Predictor (affine scaling).
	for j := range n {
		it.rgz[j] = -it.g[j] * it.z[j]
		it.rwv[j] = -it.w[j] * it.v[j]
	}
	it.direction()
	ap, ad := it.stepLengths()
	copy(it.ag, it.dg)
	copy(it.aw, it.dw)
	copy(it.az, it.dz)
	copy(it.av, it.dv)
	muAff := 0.0
	for j := range n {
		if it.hasL[j] {
			muAff += (it.g[j] + ap*it.dg[j]) * (it.z[j] + ad*it.dz[j])
		}
		if it.hasU[j] {
			muAff += (it.w[j] + ap*it.dw[j]) * (it.v[j] + ad*it.dv[j])
		}
	}
	sigma := 0.0
	if it.pairs > 0 && mu > 0 {
		r := muAff / float64(it.pairs) / mu
		sigma = min(max(r*r*r, 0), 1)
	}
	// Corrector.
	for j := range n {
		it.rgz[j] = sigma*mu - it.g[j]*it.z[j] - it.ag[j]*it.az[j]
		it.rwv[j] = sigma*mu - it.w[j]*it.v[j] - it.aw[j]*it.av[j]
	}
	it.direction()
	ap, ad = it.stepLengths()
	const eta = 0.9995
	ap, ad = min(1, eta*ap), min(1, eta*ad)
	axpy(ap, it.dx, it.x)
	axpy(ad, it.dy, it.y)
	for j := range n {
		if it.hasL[j] {
			it.g[j] += ap * it.dg[j]
			it.z[j] += ad * it.dz[j]
		}
		if it.hasU[j] {
			it.w[j] += ap * it.dw[j]
			it.v[j] += ad * it.dv[j]
		}
	}
	return nil
}

// direction solves the Newton system for the current residuals and the
// complementarity right-hand sides rgz and rwv.
func (it *iterate) direction() {
	n := it.sf.n
	for j := range n {
		r := it.rc[j]
		if it.hasL[j] {
			r -= (it.rgz[j] + it.z[j]*it.rl[j]) / it.g[j]
		}
		if it.hasU[j] {
			r += (it.rwv[j] - it.v[j]*it.ru[j]) / it.w[j]
		}
		it.rhat[j] = r
		it.dx[j] = it.theta[j] * r // temporarily Theta rhat
	}
	// dy = M^-1 (rb + A Theta rhat) and dx = Theta (A'dy - rhat), with the
	// Cholesky factor of M = A Theta A' as the first solve and as the
	// preconditioner of conjugate gradients on M dy = rb + A Theta rhat.
	// The residual of that system is rb - A dx, the primal equation itself,
	// which is where the accuracy is needed.
	it.aMul(it.dx, it.dy)
	axpy(1, it.rb, it.dy)
	it.ne.solve(it.dy)
	it.primalStep()
	it.pcg()
	for j := range n {
		it.dg[j], it.dz[j], it.dw[j], it.dv[j] = 0, 0, 0, 0
		if it.hasL[j] {
			it.dg[j] = it.dx[j] - it.rl[j]
			it.dz[j] = (it.rgz[j] - it.z[j]*it.dg[j]) / it.g[j]
		}
		if it.hasU[j] {
			it.dw[j] = it.ru[j] - it.dx[j]
			it.dv[j] = (it.rwv[j] - it.v[j]*it.dw[j]) / it.w[j]
		}
	}
}

// pcg refines dy by preconditioned conjugate gradients until the primal
// residual rb - A dx is well below the size of rb and of the final
// tolerance on it, then sets dx.
func (it *iterate) pcg() {
	r, z, p, q, t := it.res, it.cgz, it.cgp, it.cgq, it.cgt
	it.aMul(it.dx, r)
	for i := range r {
		r[i] = it.rb[i] - r[i]
	}
	target := max(1e-6*normInf(it.rb), 1e-12*(1+normInf(it.sf.b)))
	if normInf(r) <= target {
		return
	}
	copy(z, r)
	it.ne.solve(z)
	copy(p, z)
	rz := dot(r, z)
	for range 30 {
		// q = A Theta A' p.
		it.atMul(p, t)
		for j := range t {
			t[j] *= it.theta[j]
		}
		it.aMul(t, q)
		pq := dot(p, q)
		if !(pq > 0) || !(rz > 0) {
			break
		}
		alpha := rz / pq
		axpy(alpha, p, it.dy)
		axpy(-alpha, q, r)
		if normInf(r) <= target {
			break
		}
		copy(z, r)
		it.ne.solve(z)
		rzNew := dot(r, z)
		beta := rzNew / rz
		rz = rzNew
		for i := range p {
			p[i] = z[i] + beta*p[i]
		}
	}
	it.primalStep()
}

// primalStep sets dx = Theta (A'dy - rhat).
func (it *iterate) primalStep() {
	it.atMul(it.dy, it.dx)
	for j := range it.dx {
		it.dx[j] = it.theta[j] * (it.dx[j] - it.rhat[j])
	}
}

// stepLengths returns the largest primal and dual steps, up to 1, that keep
// the gaps and bound duals nonnegative.
func (it *iterate) stepLengths() (ap, ad float64) {
	ap, ad = 1.0, 1.0
	ratio := func(a, v, dv float64) float64 {
		if dv < 0 {
			return min(a, -v/dv)
		}
		return a
	}
	for j := range it.x {
		if it.hasL[j] {
			ap = ratio(ap, it.g[j], it.dg[j])
			ad = ratio(ad, it.z[j], it.dz[j])
		}
		if it.hasU[j] {
			ap = ratio(ap, it.w[j], it.dw[j])
			ad = ratio(ad, it.v[j], it.dv[j])
		}
	}
	return ap, ad
}
