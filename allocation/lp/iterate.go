package lp

import "math"

// iterate holds the primal-dual point of the interior-point method on a
// stdForm: x >= 0 with slacks w = u - x >= 0 where x has an upper bound,
// duals y, z >= 0 for x >= 0 and v >= 0 for x <= u:
//
//	A x = b,  x + w = u,  A'y + z - v = c,  x z = mu,  w v = mu.
type iterate struct {
	sf *stdForm
	ne *normalEq
	ub []bool
	nu int // number of upper-bounded columns

	x, z, w, v []float64
	y          []float64
	// Residuals and scaled quantities.
	rb, rc, ru     []float64
	theta, rhat    []float64
	rxz, rwv       []float64
	dx, dz, dw, dv []float64
	dy, res        []float64
	// Affine direction, kept for the corrector.
	ax, az, aw, av      []float64
	normB, normC, normU float64
}

func newIterate(sf *stdForm, ne *normalEq) *iterate {
	n, m := sf.n, sf.m
	vec := func(k int) []float64 { return make([]float64, k) }
	it := &iterate{sf: sf, ne: ne, ub: make([]bool, n)}
	for j, u := range sf.u {
		if !math.IsInf(u, 1) {
			it.ub[j] = true
			it.nu++
		}
	}
	it.x, it.z, it.w, it.v, it.y = vec(n), vec(n), vec(n), vec(n), vec(m)
	it.rb, it.rc, it.ru = vec(m), vec(n), vec(n)
	it.theta, it.rhat, it.rxz, it.rwv = vec(n), vec(n), vec(n), vec(n)
	it.dx, it.dz, it.dw, it.dv, it.dy, it.res = vec(n), vec(n), vec(n), vec(n), vec(m), vec(m)
	it.ax, it.az, it.aw, it.av = vec(n), vec(n), vec(n), vec(n)
	it.normB, it.normC = normInf(sf.b), normInf(sf.c)
	for j, u := range sf.u {
		if it.ub[j] {
			it.normU = max(it.normU, math.Abs(u))
		}
	}
	return it
}

// start sets Mehrotra's starting point: the least-norm solution of A x = b
// and the least-squares duals, shifted into the positive orthant.
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
	// y = (AA')^-1 A c, z = c - A'y.
	it.aMul(sf.c, it.y)
	it.ne.solve(it.y)
	it.atMul(it.y, it.z)
	for j := range n {
		it.z[j] = sf.c[j] - it.z[j]
	}
	for j := range n {
		if it.ub[j] {
			it.w[j] = sf.u[j] - it.x[j]
			zj := it.z[j]
			it.z[j], it.v[j] = zj/2, -zj/2
		}
	}
	// Shift primal and dual into the interior.
	minP, minD := math.Inf(1), math.Inf(1)
	for j := range n {
		minP, minD = min(minP, it.x[j]), min(minD, it.z[j])
		if it.ub[j] {
			minP, minD = min(minP, it.w[j]), min(minD, it.v[j])
		}
	}
	dp, dd := max(-1.5*minP, 0), max(-1.5*minD, 0)
	if n == 0 {
		dp, dd = 0, 0
	}
	xz, sx, sz := 0.0, 0.0, 0.0
	for j := range n {
		xj, zj := it.x[j]+dp, it.z[j]+dd
		xz += xj * zj
		sx += xj
		sz += zj
		if it.ub[j] {
			wj, vj := it.w[j]+dp, it.v[j]+dd
			xz += wj * vj
			sx += wj
			sz += vj
		}
	}
	hp, hd := 0.0, 0.0
	if sz > 0 {
		hp = 0.5 * xz / sz
	}
	if sx > 0 {
		hd = 0.5 * xz / sx
	}
	for j := range n {
		it.x[j] = max(it.x[j]+dp+hp, 1e-4)
		it.z[j] = max(it.z[j]+dd+hd, 1e-4)
		if it.ub[j] {
			it.w[j] = max(it.w[j]+dp+hp, 1e-4)
			it.v[j] = max(it.v[j]+dd+hd, 1e-4)
			// Keep x inside its box even when the shift overshoots.
			if it.x[j]+it.w[j] > 1.5*sf.u[j] && sf.u[j] > 0 {
				it.x[j], it.w[j] = sf.u[j]/2, sf.u[j]/2
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

// residuals computes rb = b - Ax, ru = u - x - w, rc = c - A'y - z + v.
func (it *iterate) residuals() {
	sf := it.sf
	it.aMul(it.x, it.rb)
	for i := range it.rb {
		it.rb[i] = sf.b[i] - it.rb[i]
	}
	it.atMul(it.y, it.rc)
	for j := range sf.n {
		it.rc[j] = sf.c[j] - it.rc[j] - it.z[j]
		it.ru[j] = 0
		if it.ub[j] {
			it.rc[j] += it.v[j]
			it.ru[j] = sf.u[j] - it.x[j] - it.w[j]
		}
	}
}

func (it *iterate) mu() float64 {
	k := len(it.x) + it.nu
	if k == 0 {
		return 0
	}
	s := 0.0
	for j := range it.x {
		s += it.x[j] * it.z[j]
		if it.ub[j] {
			s += it.w[j] * it.v[j]
		}
	}
	return s / float64(k)
}

// objectives returns c'x and b'y - u'v.
func (it *iterate) objectives() (p, d float64) {
	sf := it.sf
	p = dot(sf.c, it.x)
	d = dot(sf.b, it.y)
	for j := range sf.n {
		if it.ub[j] {
			d -= sf.u[j] * it.v[j]
		}
	}
	return p, d
}

func (it *iterate) converged(tol float64) bool {
	it.residuals()
	p, d := it.objectives()
	for i, r := range it.rb {
		// Rows are checked one by one, so that a large right-hand side
		// elsewhere does not loosen the test of the small ones.
		if math.Abs(r) > tol*(1+math.Abs(it.sf.b[i])) {
			return false
		}
	}
	return normInf(it.ru) <= tol*(1+it.normU) &&
		normInf(it.rc) <= tol*(1+it.normC) &&
		math.Abs(p-d) <= tol*(1+math.Abs(p))
}

// diverged reports iterates so large that the problem is taken to be
// infeasible or unbounded.
func (it *iterate) diverged() bool {
	const big = 1e12
	scale := 1 + max(it.normB, it.normC, it.normU)
	return normInf(it.x) > big*scale || normInf(it.y) > big*scale || normInf(it.z) > big*scale
}

// step takes one predictor-corrector step; residuals are current.
func (it *iterate) step() error {
	sf := it.sf
	n := sf.n
	for j := range n {
		d := it.z[j] / it.x[j]
		if it.ub[j] {
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
		it.rxz[j] = -it.x[j] * it.z[j]
		it.rwv[j] = -it.w[j] * it.v[j]
	}
	it.direction()
	ap, ad := it.stepLengths()
	copy(it.ax, it.dx)
	copy(it.az, it.dz)
	copy(it.aw, it.dw)
	copy(it.av, it.dv)
	muAff := 0.0
	for j := range n {
		muAff += (it.x[j] + ap*it.dx[j]) * (it.z[j] + ad*it.dz[j])
		if it.ub[j] {
			muAff += (it.w[j] + ap*it.dw[j]) * (it.v[j] + ad*it.dv[j])
		}
	}
	if k := n + it.nu; k > 0 {
		muAff /= float64(k)
	}
	sigma := 0.0
	if mu > 0 {
		r := muAff / mu
		sigma = r * r * r
	}
	sigma = min(max(sigma, 0), 1)
	// Corrector.
	for j := range n {
		it.rxz[j] = sigma*mu - it.x[j]*it.z[j] - it.ax[j]*it.az[j]
		if it.ub[j] {
			it.rwv[j] = sigma*mu - it.w[j]*it.v[j] - it.aw[j]*it.av[j]
		}
	}
	it.direction()
	ap, ad = it.stepLengths()
	const eta = 0.9995
	ap, ad = min(1, eta*ap), min(1, eta*ad)
	axpy(ap, it.dx, it.x)
	axpy(ad, it.dz, it.z)
	axpy(ad, it.dy, it.y)
	for j := range n {
		if it.ub[j] {
			it.w[j] += ap * it.dw[j]
			it.v[j] += ad * it.dv[j]
		}
	}
	return nil
}

// direction solves the Newton system for the current right-hand sides
// (rb, ru, rc from residuals; rxz, rwv set by the caller).
func (it *iterate) direction() {
	sf := it.sf
	n := sf.n
	for j := range n {
		r := it.rc[j] - it.rxz[j]/it.x[j]
		if it.ub[j] {
			r += (it.rwv[j] - it.v[j]*it.ru[j]) / it.w[j]
		}
		it.rhat[j] = r
		it.dx[j] = it.theta[j] * r // temporarily Theta rhat
	}
	// dy = M^-1 (rb + A Theta rhat), dx = Theta (A'dy - rhat), then
	// refine on the primal equation A dx = rb itself: forming the residual
	// from dx keeps the cancellation per component instead of across the
	// huge entries of Theta near the optimum.
	it.aMul(it.dx, it.dy)
	axpy(1, it.rb, it.dy)
	it.ne.solve(it.dy)
	it.primalStep()
	// The step needs A dx = rb only well below the size of rb and of the
	// final tolerance on it.
	target := max(1e-6*normInf(it.rb), 1e-12*(1+it.normB))
	for range 4 {
		it.aMul(it.dx, it.res)
		for i := range it.res {
			it.res[i] = it.rb[i] - it.res[i]
		}
		if normInf(it.res) <= target {
			break
		}
		it.ne.solve(it.res)
		axpy(1, it.res, it.dy)
		it.primalStep()
	}
	for j := range n {
		it.dz[j] = (it.rxz[j] - it.z[j]*it.dx[j]) / it.x[j]
		if it.ub[j] {
			it.dw[j] = it.ru[j] - it.dx[j]
			it.dv[j] = (it.rwv[j] - it.v[j]*it.dw[j]) / it.w[j]
		} else {
			it.dw[j], it.dv[j] = 0, 0
		}
	}
}

// primalStep sets dx = Theta (A'dy - rhat).
func (it *iterate) primalStep() {
	it.atMul(it.dy, it.dx)
	for j := range it.dx {
		it.dx[j] = it.theta[j] * (it.dx[j] - it.rhat[j])
	}
}

// stepLengths returns the largest primal and dual steps that keep the
// iterate nonnegative (capped at 1 after scaling by the caller).
func (it *iterate) stepLengths() (ap, ad float64) {
	ap, ad = 1.0, 1.0
	ratio := func(a, v, dv float64) float64 {
		if dv < 0 {
			return min(a, -v/dv)
		}
		return a
	}
	for j := range it.x {
		ap = ratio(ap, it.x[j], it.dx[j])
		ad = ratio(ad, it.z[j], it.dz[j])
		if it.ub[j] {
			ap = ratio(ap, it.w[j], it.dw[j])
			ad = ratio(ad, it.v[j], it.dv[j])
		}
	}
	return ap, ad
}
