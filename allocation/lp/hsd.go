package lp

import "math"

// hsd is the homogeneous self-dual interior-point method on a scaled
// stdForm (minimise c'x subject to A x = b, l <= x <= u). The homogeneous
// model (Y. Ye, M. J. Todd and S. Mizuno, "An O(sqrt(n)L)-iteration
// homogeneous and self-dual linear programming algorithm", Math. Oper.
// Res. 19, 1994; X. Xu, P.-F. Hung and Y. Ye, "A simplified homogeneous
// and self-dual linear programming algorithm and its implementation",
// Annals Oper. Res. 62, 1996; with upper bounds as in E. D. Andersen and
// K. D. Andersen, "The MOSEK interior point optimizer for linear
// programming: an implementation of the homogeneous algorithm", High
// Performance Optimization, 2000) adds a scale tau and a gap variable kappa:
//
//	A x - b tau = 0
//	x - g - l tau = 0                   (columns with a lower bound)
//	x + w - u tau = 0                   (columns with an upper bound)
//	A'y + z - v - c tau = 0
//	-c'x + b'y + l'z - u'v - kappa = 0
//	g, z, w, v, tau, kappa >= 0,  g z = 0,  w v = 0,  tau kappa = 0.
//
// It always has a solution: with tau > 0, (x, y, z, v) / tau is optimal for
// the LP; with tau = 0 and kappa > 0, y is a Farkas certificate of primal
// infeasibility (b'y + l'z - u'v > 0 with A'y + z - v = 0) or x a ray that
// proves the dual infeasible (c'x < 0 with A x = 0). Bounds are not shifted
// to zero (the gap g = x - l tau is a variable of its own), so a huge bound
// far from the optimum costs no precision. A free variable has no
// complementarity pair, so its diagonal in the Newton system is 0; it gets
// the primal regularisation min(freeReg, mu) instead (A. Altman and J. Gondzio,
// "Regularized symmetric indefinite systems in interior point methods for
// linear and quadratic optimization", Optim. Methods Softw. 11, 1999),
// whose error the next iterations' residuals correct, rather than being
// split into two nonnegative parts that drift apart without bound. Each iteration is one
// Mehrotra predictor-corrector step (S. Mehrotra, "On the implementation of
// a primal-dual interior point method", SIAM J. Optim. 2(4), 1992) whose
// Newton system reduces to the normal equations A Theta A' solved twice
// with one factorisation, for the ordinary direction and the tau direction.
type hsd struct {
	sf         *stdForm
	ne         *normalEq
	n, m       int
	hasL, hasU []bool
	pairs      int
	x, g, w    []float64
	z, v, y    []float64
	tau, kappa float64
	// Residuals rp = b tau - A x, rl = l tau - x + g, ru = u tau - x - w,
	// rd = c tau - A'y - z + v, rg = kappa + c'x - b'y - l'z + u'v.
	rp, rl, ru, rd []float64
	rg             float64
	// Sizes of the terms of the residuals, below which rounding makes them
	// meaningless: max_i sum_j |a_ij x_j| and max_j (sum_i |a_ij y_i| + z_j
	// + v_j).
	sizeAx, sizeAy float64
	absAx          []float64
	// Parts of the optimality measures (see measure).
	pStrict, pLoose, pEffect float64
	dStrict, dLoose, dEffect float64
	// The Newton system is solved with every column shifted by sh, its
	// bound nearer to being active (0 for a split free variable):
	// dx = dxi + sh dtau, so that the terms of the bound that is active,
	// (z/g) l and (z/g) l^2, which are huge and cancel, do not arise (see
	// direction). bs = b - A sh.
	sh, bs []float64
	// Work space.
	theta, chat, hl, hu, rho []float64
	p1, q1, r1               []float64
	p2, q2                   []float64
	dx, dg, dz, dw, dv       []float64
	dy                       []float64
	dtau, dkappa             float64
	ag, az, aw, av           []float64
	atau, akappa             float64
	xiGZ, xiWV               []float64
	saved                    [][]float64
	savedTau, savedKappa     float64
	savedXi                  []float64
	cgr, cgz, cgp, cgq       []float64
	cgt                      []float64
	normB                    float64
	// tol is the stopping tolerance, which sets how exactly the normal
	// equations are solved.
	tol float64
	// correctors is how many centrality correctors a step may try: more
	// where a factorisation costs many solves.
	correctors int
}

// hsdVectors is the length of the zeroed block newHSD takes its vectors
// from: 28 of length n and 12 of length m.
func hsdVectors(n, m int) int { return 28*n + 12*m }

// newHSD starts the method on sf with the normal equations ne; its vectors
// are cut from block, which must hold hsdVectors(sf.n, sf.m) zeros.
func newHSD(sf *stdForm, ne *normalEq, tol float64, block []float64) *hsd {
	n, m := sf.n, sf.m
	vec := func(k int) []float64 {
		v := block[:k:k]
		block = block[k:]
		return v
	}
	h := &hsd{sf: sf, ne: ne, n: n, m: m, hasL: sf.hasL, hasU: sf.hasU, tol: tol}
	for j := range n {
		if h.hasL[j] {
			h.pairs++
		}
		if h.hasU[j] {
			h.pairs++
		}
	}
	h.pairs++ // tau kappa
	h.x, h.g, h.w, h.z, h.v, h.y = vec(n), vec(n), vec(n), vec(n), vec(n), vec(m)
	h.rp, h.rl, h.ru, h.rd = vec(m), vec(n), vec(n), vec(n)
	h.theta, h.chat, h.hl, h.hu, h.rho = vec(n), vec(n), vec(n), vec(n), vec(n)
	h.sh, h.bs = vec(n), vec(m)
	h.absAx = vec(m)
	h.p1, h.q1, h.r1 = vec(m), vec(m), vec(m)
	h.p2, h.q2 = vec(n), vec(n)
	h.dx, h.dg, h.dz, h.dw, h.dv, h.dy = vec(n), vec(n), vec(n), vec(n), vec(n), vec(m)
	h.ag, h.az, h.aw, h.av = vec(n), vec(n), vec(n), vec(n)
	h.xiGZ, h.xiWV = vec(n), vec(n)
	h.cgr, h.cgz, h.cgp, h.cgq, h.cgt = vec(m), vec(m), vec(m), vec(m), vec(n)
	h.normB = normInf(sf.b)
	// A solve costs about two passes over L and four over A (the
	// products and the refinement check).
	solve := 2*float64(ne.chol.NonzerosL()) + 4*float64(len(sf.vals)) + 8*float64(n)
	switch ratio := ne.chol.FactorFlops() / solve; {
	case ratio < 4:
		h.correctors = 0
	case ratio < 20:
		h.correctors = 1
	default:
		h.correctors = maxCorrectors
	}
	return h
}

// aMul sets out = A v; atMul sets out = A'y.
// (A column's entries are cut out as slices so that its loop indexes them
// unchecked; the sums are taken in the same order.)
func (h *hsd) aMul(v, out []float64) {
	sf := h.sf
	clear(out)
	colPtr := sf.colPtr[:sf.n+1]
	for j, vj := range v[:sf.n] {
		if vj == 0 {
			continue
		}
		rows := sf.rowIdx[colPtr[j]:colPtr[j+1]]
		vals := sf.vals[colPtr[j]:colPtr[j+1]]
		vals = vals[:len(rows)]
		for k, i := range rows {
			out[i] += vals[k] * vj
		}
	}
}

func (h *hsd) atMul(y, out []float64) {
	sf := h.sf
	colPtr := sf.colPtr[:sf.n+1]
	for j := range out[:sf.n] {
		rows := sf.rowIdx[colPtr[j]:colPtr[j+1]]
		vals := sf.vals[colPtr[j]:colPtr[j+1]]
		vals = vals[:len(rows)]
		s := 0.0
		for k, i := range rows {
			s += vals[k] * y[i]
		}
		out[j] = s
	}
}

// start sets a Mehrotra-style starting point: the least-norm x of A x = b
// and the least-squares duals, with gaps and bound duals shifted into the
// positive orthant, and tau = kappa = 1.
func (h *hsd) start() error {
	sf := h.sf
	n := h.n
	for j := range n {
		h.theta[j] = 1
	}
	if err := h.ne.factor(h.theta); err != nil {
		return err
	}
	// x = A'(AA')^-1 b.
	copy(h.dy, sf.b)
	h.ne.solve(h.dy)
	h.atMul(h.dy, h.x)
	// y = (AA')^-1 A c, z - v = c - A'y.
	h.aMul(sf.c, h.y)
	h.ne.solve(h.y)
	h.atMul(h.y, h.rd)
	minP, minD := math.Inf(1), math.Inf(1)
	for j := range n {
		d := sf.c[j] - h.rd[j]
		h.g[j], h.z[j], h.w[j], h.v[j] = 0, 0, 0, 0
		switch {
		case h.hasL[j] && h.hasU[j]:
			h.z[j], h.v[j] = d/2, -d/2
		case h.hasL[j]:
			h.z[j] = d
		case h.hasU[j]:
			h.v[j] = -d
		}
		if h.hasL[j] {
			h.g[j] = h.x[j] - sf.l[j]
			minP, minD = min(minP, h.g[j]), min(minD, h.z[j])
		}
		if h.hasU[j] {
			h.w[j] = sf.u[j] - h.x[j]
			minP, minD = min(minP, h.w[j]), min(minD, h.v[j])
		}
	}
	dp, dd := max(-1.5*minP, 0), max(-1.5*minD, 0)
	prod, sp, sd := 0.0, 0.0, 0.0
	for j := range n {
		if h.hasL[j] {
			prod += (h.g[j] + dp) * (h.z[j] + dd)
			sp += h.g[j] + dp
			sd += h.z[j] + dd
		}
		if h.hasU[j] {
			prod += (h.w[j] + dp) * (h.v[j] + dd)
			sp += h.w[j] + dp
			sd += h.v[j] + dd
		}
	}
	hp, hd := 0.0, 0.0
	if sd > 0 {
		hp = 0.5 * prod / sd
	}
	if sp > 0 {
		hd = 0.5 * prod / sp
	}
	const floor = 1e-2
	for j := range n {
		if h.hasL[j] {
			h.g[j] = max(h.g[j]+dp+hp, floor)
			h.z[j] = max(h.z[j]+dd+hd, floor)
		}
		if h.hasU[j] {
			h.w[j] = max(h.w[j]+dp+hp, floor)
			h.v[j] = max(h.v[j]+dd+hd, floor)
		}
		if h.hasL[j] && h.hasU[j] {
			// Keep the gaps within the box when the shift overshoots.
			if width := sf.u[j] - sf.l[j]; h.g[j]+h.w[j] > 1.5*width {
				h.g[j], h.w[j] = max(width/2, floor), max(width/2, floor)
				h.x[j] = sf.l[j] + width/2
			}
		}
	}
	h.tau, h.kappa = 1, 1
	return nil
}

// residuals computes rp, rl, ru, rd and rg, the sizes of their terms and
// the parts of the optimality measures (see measure), row by row and
// column by column.
func (h *hsd) residuals() {
	sf := h.sf
	t := h.tau
	clear(h.rp)
	clear(h.absAx)
	h.sizeAy = 0
	h.rg = h.kappa - dot(sf.b, h.y)
	var pStrict, pLoose, pEffect, dStrict, dLoose, dEffect float64
	n := h.n
	colPtr := sf.colPtr[:n+1]
	rp, absAx, y := h.rp, h.absAx, h.y
	x, g, z, w, v := h.x[:n], h.g[:n], h.z[:n], h.w[:n], h.v[:n]
	sl, su, sc := sf.l[:n], sf.u[:n], sf.c[:n]
	hasL, hasU, rls, rus, rds := h.hasL[:n], h.hasU[:n], h.rl[:n], h.ru[:n], h.rd[:n]
	rg, sizeAy := h.rg, h.sizeAy // accumulated here, in the same order
	for j := range n {
		xj := x[j]
		ay, aay := 0.0, 0.0
		rows := sf.rowIdx[colPtr[j]:colPtr[j+1]]
		vals := sf.vals[colPtr[j]:colPtr[j+1]]
		vals = vals[:len(rows)]
		for k, i := range rows {
			tx := vals[k] * xj
			rp[i] += tx
			absAx[i] += math.Abs(tx)
			ty := vals[k] * y[i]
			ay += ty
			aay += math.Abs(ty)
		}
		cj := sc[j]
		rd := cj*t - ay
		rg += cj * xj
		rls[j], rus[j] = 0, 0
		ax := math.Abs(xj)
		if hasL[j] {
			rd -= z[j]
			aay += z[j]
			rl := sl[j]*t - xj + g[j]
			rls[j] = rl
			rg -= sl[j] * z[j]
			r, l := math.Abs(rl), math.Abs(sl[j])
			pStrict = max(pStrict, r/(t*(1+l)))
			pLoose = max(pLoose, r/(t+max(t*l, ax, g[j])))
			pEffect += z[j] * r
		}
		if hasU[j] {
			rd += v[j]
			aay += v[j]
			ru := su[j]*t - xj - w[j]
			rus[j] = ru
			rg += su[j] * v[j]
			r, u := math.Abs(ru), math.Abs(su[j])
			pStrict = max(pStrict, r/(t*(1+u)))
			pLoose = max(pLoose, r/(t+max(t*u, ax, w[j])))
			pEffect += v[j] * r
		}
		rds[j] = rd
		sizeAy = max(sizeAy, aay)
		r := math.Abs(rd)
		dStrict = max(dStrict, r/(t*(1+math.Abs(cj))))
		dLoose = max(dLoose, r/(t+max(t*math.Abs(cj), aay)))
		dEffect += ax * r
	}
	h.rg, h.sizeAy = rg, sizeAy
	sizeAx := 0.0
	b := sf.b[:len(rp)]
	absAx, y = absAx[:len(rp)], y[:len(rp)]
	for i := range rp {
		r := b[i]*t - rp[i]
		rp[i] = r
		sizeAx = max(sizeAx, absAx[i])
		ar, ab := math.Abs(r), math.Abs(b[i])
		pStrict = max(pStrict, ar/(t*(1+ab)))
		pLoose = max(pLoose, ar/(t+max(t*ab, absAx[i])))
		pEffect += math.Abs(y[i]) * ar
	}
	h.sizeAx = sizeAx
	h.pStrict, h.pLoose, h.pEffect = pStrict, pLoose, pEffect
	h.dStrict, h.dLoose, h.dEffect = dStrict, dLoose, dEffect
}

func (h *hsd) mu() float64 {
	s := h.tau * h.kappa
	n := h.n
	hasL, hasU := h.hasL[:n], h.hasU[:n]
	g, z, w, v := h.g[:n], h.z[:n], h.w[:n], h.v[:n]
	for j := range n {
		if hasL[j] {
			s += g[j] * z[j]
		}
		if hasU[j] {
			s += w[j] * v[j]
		}
	}
	return s / float64(h.pairs)
}

// objectives returns c'x and b'y + l'z - u'v (not divided by tau).
func (h *hsd) objectives() (p, d float64) {
	sf := h.sf
	p = dot(sf.c, h.x)
	d = dot(sf.b, h.y)
	for j := range h.n {
		if h.hasL[j] {
			d += sf.l[j] * h.z[j]
		}
		if h.hasU[j] {
			d -= sf.u[j] * h.v[j]
		}
	}
	return p, d
}

// measures are the relative distances of the current point from
// optimality: primal and dual infeasibility and the duality gap.
type measures struct {
	primal, dual, gap float64
}

func (mm measures) worst() float64 { return max(mm.primal, mm.dual, mm.gap) }

// measure computes the optimality measures of x/tau, y/tau, in the scaled
// problem, from the parts residuals computed. Each row's residual passes if
// it is small relative to 1 + its right-hand side; or, when rounding cannot
// get it that small because the row's terms are much larger than its
// right-hand side (rows with zero right-hand sides and solutions of 1e7), if
// it is small relative to the size of its terms and the residuals' effect
// on the objective, sum |y_i r_i|, is small relative to 1 + |c'x|. So the
// measure is max(loose, min(strict, effect)) with loose and strict the
// largest of the rows'. The same for the columns (dual residuals, effect
// sum |x_j r_j|) and the bounds (effect z_j r_j). The gap and the effects
// are relative to 1 + |c'x| in the model's units.
func (h *hsd) measure() measures {
	t := h.tau
	p, d := h.objectives()
	// One unit of the model's objective, in the scaled problem's units (the
	// costs were divided by cScale): the floor of the relative gap, so that
	// an optimum of 0 is reached to tol in the model's units, and an
	// optimum of 1e-4 to tol relative whatever the spread of the scaled
	// costs.
	unit := t / h.sf.cScale
	obj := t * (unit + math.Abs(p))
	var mm measures
	mm.primal = max(h.pLoose, min(h.pStrict, h.pEffect/obj))
	mm.dual = max(h.dLoose, min(h.dStrict, h.dEffect/obj))
	mm.gap = math.Abs(p-d) / (unit + math.Abs(p))
	return mm
}

// infeasibility checks the Farkas certificates; it returns Infeasible
// (primal), Unbounded (a ray: the dual is infeasible) or Optimal for none.
// The tests are relative, as a backward error: y proves infeasibility if
// A'y + z - v vanishes to tol relative to the size of its terms and
// b'y + l'z - u'v is positive by more than tol relative to the size of its
// terms (so a perturbation of A and b by tol could not undo it); x proves
// unboundedness if A x and the bound violations vanish to tol relative to
// the size of their terms and -c'x is larger than tol |c|'|x|. Checked only
// once kappa has overtaken tau.
func (h *hsd) infeasibility(tol float64) Status {
	if h.tau > h.kappa {
		return Optimal
	}
	sf := h.sf
	p, d := h.objectives()
	// kappa = d - p (the gap row): the certificate that carries it is the
	// one the iterates are converging to; the other side may be vanishing
	// with tau and pass a relative test by accident.
	if d > 0 && d >= -p {
		// A'y + z - v = c tau - rd; sizeAy holds the size of its terms.
		worst, scale := 0.0, 0.0
		for j := range h.n {
			worst = max(worst, math.Abs(sf.c[j]*h.tau-h.rd[j]))
			if h.hasL[j] {
				scale += math.Abs(sf.l[j]) * h.z[j]
			}
			if h.hasU[j] {
				scale += math.Abs(sf.u[j]) * h.v[j]
			}
		}
		for i, v := range h.y {
			scale += math.Abs(sf.b[i] * v)
		}
		if worst <= tol*h.sizeAy && d > tol*scale {
			return Infeasible
		}
	}
	if p < 0 && -p > d {
		// A x = b tau - rp, of terms of size sizeAx; for a ray, x >= 0
		// where there is a lower bound and x <= 0 where there is an upper.
		worst, viol, scale, size := 0.0, 0.0, 0.0, 0.0
		for i := range h.m {
			worst = max(worst, math.Abs(sf.b[i]*h.tau-h.rp[i]))
		}
		for j, xj := range h.x {
			if h.hasL[j] {
				viol = max(viol, -xj)
			}
			if h.hasU[j] {
				viol = max(viol, xj)
			}
			scale += math.Abs(sf.c[j] * xj)
			size = max(size, math.Abs(xj))
		}
		if worst <= tol*h.sizeAx && viol <= tol*size && -p > tol*scale {
			return Unbounded
		}
	}
	return Optimal
}

// step takes one predictor-corrector step; the residuals are current. It
// returns the step length.
func (h *hsd) step() (float64, error) {
	sf := h.sf
	n := h.n
	reg := min(freeReg, h.mu()/(h.tau*h.tau))
	tau := h.tau
	hasL, hasU := h.hasL[:n], h.hasU[:n]
	l, u, c := sf.l[:n], sf.u[:n], sf.c[:n]
	x, g, z, w, v := h.x[:n], h.g[:n], h.z[:n], h.w[:n], h.v[:n]
	hl, hu, sh, chat, theta := h.hl[:n], h.hu[:n], h.sh[:n], h.chat[:n], h.theta[:n]
	dg, dz, dw, dv := h.dg[:n], h.dz[:n], h.dw[:n], h.dv[:n]
	ag, az, aw, av := h.ag[:n], h.az[:n], h.aw[:n], h.av[:n]
	xiGZ, xiWV, q2 := h.xiGZ[:n], h.xiWV[:n], h.q2[:n]
	for j := range n {
		d := 0.0
		hl[j], hu[j] = 0, 0
		switch {
		case hasL[j] && (!hasU[j] || g[j] <= w[j]):
			sh[j] = l[j]
		case hasU[j]:
			sh[j] = u[j]
		default:
			sh[j] = 0
		}
		if hasL[j] {
			r := z[j] / g[j]
			d += r
			hl[j] = r * (l[j] - sh[j])
		}
		if hasU[j] {
			r := v[j] / w[j]
			d += r
			hu[j] = r * (u[j] - sh[j])
		}
		chat[j] = c[j] - hl[j] - hu[j]
		if !hasL[j] && !hasU[j] {
			xj := x[j] / tau
			d = reg / (1 + xj*xj)
		}
		theta[j] = 1 / max(d, 1e-300)
	}
	h.aMul(h.sh, h.bs)
	for i := range h.bs {
		h.bs[i] = sf.b[i] - h.bs[i]
	}
	if err := h.ne.factor(h.theta); err != nil {
		return 0, err
	}
	// q1 = M^-1 (bs + A Theta chat), q2 = Theta (A'q1 - chat).
	for j := range n {
		q2[j] = theta[j] * chat[j]
	}
	h.aMul(h.q2, h.q1)
	axpy(1, h.bs, h.q1)
	h.ne.solve(h.q1)
	h.atMul(h.q1, h.q2)
	for j := range n {
		q2[j] = theta[j] * (q2[j] - chat[j])
	}
	mu := h.mu()
	// Predictor: eta = 1, complementarity to zero.
	for j := range n {
		xiGZ[j] = -g[j] * z[j]
		xiWV[j] = -w[j] * v[j]
	}
	h.direction(1, -h.tau*h.kappa, false)
	alpha := h.stepLength()
	copy(h.ag, h.dg)
	copy(h.az, h.dz)
	copy(h.aw, h.dw)
	copy(h.av, h.dv)
	h.atau, h.akappa = h.dtau, h.dkappa
	muAff := (h.tau + alpha*h.dtau) * (h.kappa + alpha*h.dkappa)
	for j := range n {
		if hasL[j] {
			muAff += (g[j] + alpha*dg[j]) * (z[j] + alpha*dz[j])
		}
		if hasU[j] {
			muAff += (w[j] + alpha*dw[j]) * (v[j] + alpha*dv[j])
		}
	}
	muAff /= float64(h.pairs)
	sigma := 0.0
	if mu > 0 {
		r := muAff / mu
		sigma = min(max(r*r*r, 0), 1)
	}
	// Corrector.
	sm := sigma * mu
	for j := range n {
		xiGZ[j], xiWV[j] = 0, 0
		if hasL[j] {
			xiGZ[j] = sm - g[j]*z[j] - ag[j]*az[j]
		}
		if hasU[j] {
			xiWV[j] = sm - w[j]*v[j] - aw[j]*av[j]
		}
	}
	xiTK := sm - h.tau*h.kappa - h.atau*h.akappa
	h.direction(1-sigma, xiTK, true)
	alpha = h.stepLength()
	alpha = h.centralityCorrectors(1-sigma, xiTK, sm, alpha)
	if alpha < 0.1 {
		// The second-order term blocked the step: try the plain centring
		// direction with more centring and keep the longer step.
		h.saveDirection()
		sm = max(sigma, 0.5) * mu
		for j := range n {
			xiGZ[j], xiWV[j] = 0, 0
			if hasL[j] {
				xiGZ[j] = sm - g[j]*z[j]
			}
			if hasU[j] {
				xiWV[j] = sm - w[j]*v[j]
			}
		}
		h.direction(1-sm/mu, sm-h.tau*h.kappa, true)
		if a := h.stepLength(); a > alpha {
			alpha = a
		} else {
			h.restoreDirection()
		}
	}
	alpha = min(1, 0.9995*alpha)
	axpy(alpha, h.dx, h.x)
	axpy(alpha, h.dy, h.y)
	for j := range n {
		if hasL[j] {
			g[j] += alpha * dg[j]
			z[j] += alpha * dz[j]
		}
		if hasU[j] {
			w[j] += alpha * dw[j]
			v[j] += alpha * dv[j]
		}
	}
	h.tau += alpha * h.dtau
	h.kappa += alpha * h.dkappa
	return alpha, nil
}

// Gondzio's multiple centrality correctors (J. Gondzio, "Multiple
// centrality corrections in a primal-dual method for linear programming",
// Comput. Optim. Appl. 6, 1996): aim at a longer step alpha + gondzioDelta
// and push the complementarity products that step would make back into
// [gondzioMin, gondzioMax] times sigma mu, by one more solve with the same
// factorisation; keep the correction while it lengthens the step enough.
const (
	maxCorrectors = 3
	gondzioDelta  = 0.2
	gondzioMin    = 0.1
	gondzioMax    = 10
	gondzioGain   = 0.1
)

// centralityCorrectors applies the correctors to the direction just
// computed with eta and xiTK (whose step is alpha) and returns the new step.
func (h *hsd) centralityCorrectors(eta, xiTK, sm, alpha float64) float64 {
	n := h.n
	lo, hi := gondzioMin*sm, gondzioMax*sm
	corr := func(t float64) float64 {
		switch {
		case t < lo:
			return lo - t
		case t > hi:
			return max(hi-t, -hi)
		}
		return 0
	}
	for range h.correctors {
		if alpha >= 0.99 || sm <= 0 {
			break
		}
		target := min(1, alpha+gondzioDelta)
		h.saveDirection()
		h.savedXi = append(h.savedXi[:0], h.xiGZ...)
		h.savedXi = append(h.savedXi, h.xiWV...)
		for j := range n {
			if h.hasL[j] {
				h.xiGZ[j] += corr((h.g[j] + target*h.dg[j]) * (h.z[j] + target*h.dz[j]))
			}
			if h.hasU[j] {
				h.xiWV[j] += corr((h.w[j] + target*h.dw[j]) * (h.v[j] + target*h.dv[j]))
			}
		}
		tk := xiTK + corr((h.tau+target*h.dtau)*(h.kappa+target*h.dkappa))
		h.direction(eta, tk, true)
		if a := h.stepLength(); a >= alpha+gondzioGain*gondzioDelta {
			alpha, xiTK = a, tk
			continue
		}
		h.restoreDirection()
		copy(h.xiGZ, h.savedXi[:n])
		copy(h.xiWV, h.savedXi[n:])
		break
	}
	return alpha
}

// saveDirection and restoreDirection keep a direction aside.
func (h *hsd) saveDirection() {
	if h.saved == nil {
		h.saved = make([][]float64, 6)
	}
	for k, v := range [][]float64{h.dx, h.dy, h.dg, h.dz, h.dw, h.dv} {
		h.saved[k] = append(h.saved[k][:0], v...)
	}
	h.savedTau, h.savedKappa = h.dtau, h.dkappa
}

func (h *hsd) restoreDirection() {
	for k, v := range [][]float64{h.dx, h.dy, h.dg, h.dz, h.dw, h.dv} {
		copy(v, h.saved[k])
	}
	h.dtau, h.dkappa = h.savedTau, h.savedKappa
}

// direction solves the Newton system whose right-hand sides are eta times
// the residuals and xiGZ, xiWV and xiTK for the complementarity rows:
//
//	A dx - b dtau = eta rp,  dx - dg - l dtau = eta rl,  dx + dw - u dtau = eta ru,
//	A'dy + dz - dv - c dtau = eta rd,  -c'dx + b'dy + l'dz - u'dv - dkappa = eta rg,
//	Z dg + G dz = xiGZ,  V dw + W dv = xiWV,  kappa dtau + tau dkappa = xiTK.
//
// It substitutes dx = dxi + sh dtau: the system in dxi is the same with b,
// l and u replaced by bs = b - A sh, l - sh and u - sh, and the gap row's
// right-hand side by eta (rg - sh'rd) (the dual equations turn
// l'dz - u'dv + b'dy into bs'dy + (l-sh)'dz - (u-sh)'dv + sh'(c dtau +
// eta rd)). Then with D = G^-1 Z + W^-1 V, Theta = D^-1, hl = G^-1 Z
// (l - sh), hu = W^-1 V (u - sh) and chat = c - hl - hu: dxi = Theta (A'dy
// - rho - chat dtau) with rho = eta rd - G^-1 (xiGZ + Z eta rl) + W^-1
// (xiWV - V eta ru), and M dy = eta rp + A Theta rho + (bs + A Theta chat)
// dtau, so dy = p1 + q1 dtau and dxi = p2 + q2 dtau (q is computed in
// step); the gap row gives dtau.
func (h *hsd) direction(eta, xiTK float64, refine bool) {
	sf := h.sf
	n := h.n
	// The vectors cut to n (or m), so that the loops index them unchecked.
	hasL, hasU := h.hasL[:n], h.hasU[:n]
	l, u, c := sf.l[:n], sf.u[:n], sf.c[:n]
	rd, rl, ru, sh := h.rd[:n], h.rl[:n], h.ru[:n], h.sh[:n]
	g, z, w, v := h.g[:n], h.z[:n], h.w[:n], h.v[:n]
	xiGZ, xiWV, hl, hu := h.xiGZ[:n], h.xiWV[:n], h.hl[:n], h.hu[:n]
	rho, p2, q2, theta := h.rho[:n], h.p2[:n], h.q2[:n], h.theta[:n]
	kl, ku := 0.0, 0.0 // (l-sh)'G^-1 (xiGZ + Z eta rl) and (u-sh)'W^-1 (xiWV - V eta ru)
	lam := 0.0         // (l-sh)'hl + (u-sh)'hu
	shrd := 0.0        // sh'rd
	for j := range n {
		r := eta * rd[j]
		shrd += sh[j] * rd[j]
		if hasL[j] {
			t := (xiGZ[j] + z[j]*eta*rl[j]) / g[j]
			r -= t
			ls := l[j] - sh[j]
			kl += ls * t
			lam += hl[j] * ls
		}
		if hasU[j] {
			t := (xiWV[j] - v[j]*eta*ru[j]) / w[j]
			r += t
			us := u[j] - sh[j]
			ku += us * t
			lam += hu[j] * us
		}
		rho[j] = r
		p2[j] = theta[j] * r
	}
	h.aMul(h.p2, h.p1)
	p1 := h.p1
	rp := h.rp[:len(p1)]
	for i := range p1 {
		p1[i] += eta * rp[i]
	}
	h.ne.solve(h.p1)
	h.atMul(h.p1, h.p2)
	for j := range n {
		p2[j] = theta[j] * (p2[j] - rho[j])
	}
	ch, cq := 0.0, 0.0 // (c + hl + hu)'p2 and (c + hl + hu)'q2
	for j := range n {
		e := c[j] + hl[j] + hu[j]
		ch += e * p2[j]
		cq += e * q2[j]
	}
	num := eta*(h.rg-shrd) + ch - dot(h.bs, h.p1) - kl + ku + xiTK/h.tau
	den := -cq + dot(h.bs, h.q1) + lam + h.kappa/h.tau
	h.dtau = 0
	if den > 0 {
		h.dtau = num / den
	}
	dt := h.dtau
	// dy = p1 + q1 dtau and dxi = p2 + q2 dtau, refined together on the
	// primal equation A dxi = eta rp + bs dtau.
	dy := h.dy
	rhs, q1, bs := h.r1[:len(dy)], h.q1[:len(dy)], h.bs[:len(dy)]
	p1, rp = p1[:len(dy)], rp[:len(dy)]
	for i := range dy {
		dy[i] = p1[i] + q1[i]*dt
		rhs[i] = eta*rp[i] + bs[i]*dt
	}
	axpy(dt, h.q2, h.p2)
	if refine {
		h.refine(h.dy, h.p2, rhs, max(1e-2*eta*normInf(h.rp), 0.1*h.tol*h.tau*(1+h.normB)))
	}
	dx, dg, dz, dw, dv := h.dx[:n], h.dg[:n], h.dz[:n], h.dw[:n], h.dv[:n]
	for j := range n {
		dxi := p2[j]
		dx[j] = dxi + sh[j]*dt
		dg[j], dz[j], dw[j], dv[j] = 0, 0, 0, 0
		if hasL[j] {
			d := dxi - (l[j]-sh[j])*dt - eta*rl[j]
			dg[j] = d
			dz[j] = (xiGZ[j] - z[j]*d) / g[j]
		}
		if hasU[j] {
			d := eta*ru[j] - dxi + (u[j]-sh[j])*dt
			dw[j] = d
			dv[j] = (xiWV[j] - v[j]*d) / w[j]
		}
	}
	h.dkappa = (xiTK - h.kappa*dt) / h.tau
}

// refine improves a solution (p1, p2) of M p1 = r + A Theta rho,
// p2 = Theta (A'p1 - rho) by preconditioned conjugate gradients on the
// equation that matters, A p2 = r: its residual is computed from p2
// directly, not as a difference of the large terms of the normal equations
// (which the scaling Theta, from 1e-10 to 1e10 near the optimum, makes
// meaningless); each correction moves p1 by d and p2 by Theta A'd, so that
// p2 keeps the form Theta (A'p1 - rho), and the Cholesky factor is the
// preconditioner, which keeps the iterations few when it is accurate and
// converging when it is not. It stops below target.
func (h *hsd) refine(p1, p2, r []float64, target float64) {
	res, zz, p, q, t := h.cgr, h.cgz, h.cgp, h.cgq, h.cgt
	h.aMul(p2, res)
	for i := range res {
		res[i] = r[i] - res[i]
	}
	nr := normInf(res)
	if nr <= target {
		return
	}
	copy(zz, res)
	h.ne.solve(zz)
	copy(p, zz)
	rz := dot(res, zz)
	for k := 0; k < maxRefine; k++ {
		// q = M p, and t = Theta A'p for the p2 update.
		h.atMul(p, t)
		for j := range t {
			t[j] *= h.theta[j]
		}
		h.aMul(t, q)
		pq := dot(p, q)
		if !(pq > 0) || !(rz > 0) {
			return
		}
		alpha := rz / pq
		axpy(alpha, p, p1)
		axpy(alpha, t, p2)
		axpy(-alpha, q, res)
		nr = normInf(res)
		if traceIPM != nil {
			traceIPM("    cg %d: %.2e (target %.2e)\n", k, nr, target)
		}
		if nr <= target {
			return
		}
		copy(zz, res)
		h.ne.solve(zz)
		rzNew := dot(res, zz)
		beta := rzNew / rz
		rz = rzNew
		for i := range p {
			p[i] = zz[i] + beta*p[i]
		}
	}
}

// freeReg is the diagonal regularisation of a free variable in the scaled
// problem, whose matrix entries are at most 1 and costs at most 1.
const freeReg = 1e-8

// maxRefine bounds the conjugate-gradient steps of one solve.
const maxRefine = 25

// stepLength returns the largest step, up to 1, that keeps g, z, w, v, tau
// and kappa nonnegative.
func (h *hsd) stepLength() float64 {
	a := 1.0
	n := len(h.hasL)
	hasU := h.hasU[:n]
	g, z, w, vv := h.g[:n], h.z[:n], h.w[:n], h.v[:n]
	dg, dz, dw, dvv := h.dg[:n], h.dz[:n], h.dw[:n], h.dv[:n]
	// v + a dv >= 0 holds unless dv < 0 and a > -v/dv: divide only then.
	for j, hl := range h.hasL {
		if hl {
			if v, dv := g[j], dg[j]; v+a*dv < 0 {
				a = -v / dv
			}
			if v, dv := z[j], dz[j]; v+a*dv < 0 {
				a = -v / dv
			}
		}
		if hasU[j] {
			if v, dv := w[j], dw[j]; v+a*dv < 0 {
				a = -v / dv
			}
			if v, dv := vv[j], dvv[j]; v+a*dv < 0 {
				a = -v / dv
			}
		}
	}
	if h.tau+a*h.dtau < 0 {
		a = -h.tau / h.dtau
	}
	if h.kappa+a*h.dkappa < 0 {
		a = -h.kappa / h.dkappa
	}
	return max(a, 0)
}
