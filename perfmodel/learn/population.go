package learn

import (
	"cmp"
	"math"
	"slices"

	"gonum.org/v1/gonum/mat"
)

// population is what the jobs observed so far say about every job: a
// low-rank model of the jobs-by-types matrix of log rates and the
// reference rows a new job is matched against.
//
// The model (Gavel's matrix completion, Narayanan et al., OSDI 2020,
// section 6, applied to isolated rates instead of co-location ratios) is
//
//	y_jt = m_t + a_j + u_j . v_t + e,   e ~ N(0, s^2)
//
// with a level m_t per type, a level a_j per job (its size, batch and GPU
// count), and factors u_j, v_t of rank k (0 to 3, at most the number of
// types less 2). It is fitted to the measured entries by alternating
// least squares as the maximum a posteriori of probabilistic matrix
// factorisation (Salakhutdinov and Mnih, "Probabilistic Matrix
// Factorization", NIPS 2007): u_j ~ N(0, diag(p)) and v_t ~ N(0, I), so
// the ridges are s^2/p_l on the jobs' factors and s^2 on the types'; s^2
// and p (one variance per factor, so that a factor the data do not
// support shrinks to nothing) are re-estimated at each sweep from the
// residuals and the factors, with the factors of the types rescaled to
// unit mean square. The regularisation thus follows the data: little on a
// large, consistent matrix, much on a few noisy rows. Each residual is
// weighed by Huber's function (iteratively reweighted; Huber, "Robust
// Estimation of a Location Parameter", Annals of Mathematical Statistics,
// 1964), so that a few jobs of an unusual shape (Gavel's Recommendation
// jobs run slower on a V100 than on a P100) do not bend the factors of the
// others. The fit then completes the reference rows: the rows with the
// most measured types (the most recent first), their missing entries
// filled by the model.
//
// A population is immutable once built and safe for concurrent use.
type population struct {
	k    int       // rank
	cols int       // types
	rows int       // rows fitted
	m    []float64 // per type: m_t
	v    []float64 // per type: v_t, k values each
	n    []int     // per type: rows that measured it
	s2   float64   // residual variance of the measured entries
	p    vec       // variance of each factor of the rows (p[1:])
	// sweeps are the alternating sweeps the fit took.
	sweeps int
	// refs are the reference rows: refVal their log rates (refs x cols,
	// measured or completed), refVar the variance of each entry (0 where
	// measured).
	refs   int
	refVal []float64
	refVar []float64
	refRow []int // each reference's row in the fit's input
	// groups are what each group's rows measured per type (groupsOf).
	groups map[groupKey][]groupStat
	// refID is each reference row's id (popInput.id), if given.
	refID []uint64
	// grid tabulates the priors of jobs with evidence on one type at
	// most (nil: every prior is computed exactly); set before the
	// population is installed.
	grid *priorGrid
}

// popInput is the matrix a fit starts from.
type popInput struct {
	y    []float64 // rows x cols, NaN where not measured
	rows int
	cols int
	// rank orders the rows for the choice of references: more measured
	// types first, then the references of the last fit (by id), then the
	// higher rank (more recent). id identifies a row across fits (nil:
	// none).
	rank []uint64
	// group is each row's group (JobInfo.Group and reference GPU count;
	// an empty name for none).
	group []groupKey
	id    []uint64
}

// fitParams are the settings of a fit (from Config).
type fitParams struct {
	rank       int
	huber      float64
	iterations int
	references int
}

// popFit is the work of one fit.
type popFit struct {
	in    *popInput
	k     int
	delta float64
	z     []float64 // rows x (k+1): a_j, u_j
	m, v  []float64 // per type: m_t; v_t (k values)
	h     []vec     // per type: (1, v_t)
	// The measured entries by row (compressed sparse rows): row j's are
	// col[start[j]:start[j+1]] and val[...], with their Huber weights w.
	start  []int
	col    []int32
	val    []float64
	w      []float64
	cnt    []int   // entries per row
	colCnt []int   // entries per column
	as     []small // per column: normal equations
	bs     []vec
	s2     float64 // residual variance
	p      vec     // variance of each factor of the rows (p[1:])
	ss     float64 // weighted sum of squared residuals of the last row sweep
	colEff float64 // effective parameters of the types' solutions
}

// Bounds of the fit's variances: s^2 is at least minResidual (a residual
// sigma of 0.01), and ridgeLevel is the tiny ridge on the levels a_j and
// m_t, which keeps the normal equations positive definite where a row or
// column has one entry (the two levels are confounded by a constant,
// which the ridge pins).
const (
	minResidual = 1e-4
	ridgeLevel  = 1e-6
	// maxFactor bounds a factor's variance p (a log-rate spread of 10,
	// e^10 in rate, is beyond any job's): the rows' ridge s^2/p stays
	// above s^2/maxFactor, so that a type measured by one row, whose
	// factor the data do not pin, cannot trade scale with the rows'
	// factors until they overflow (a fit went to p = +Inf, and every
	// completed rate to NaN, on a simulated trace: issue #41).
	maxFactor = 100
)

// effectiveRank is the rank a fit of cols types uses: at most the number
// of types less 2, so that a row measured on every type has an entry more
// than its level and factors. (A matrix with fewer entries than the model
// has parameters is left to the priors on the factors, which shrink what
// the data do not support.)
func effectiveRank(rank, cols int) int { return max(0, min(rank, cols-2, maxRank)) }

// fitPopulation fits the model to in and completes the reference rows.
// warm, a previous fit of the same rank and types, is the starting point.
// Cost: O(iterations * (nnz * (k+1)^2 + (rows + cols) * (k+1)^3)) for nnz
// measured entries, plus O(cols^3) for the start and O(rows log rows) to
// choose the references; memory O(rows * (k+1) + references * cols).
func fitPopulation(in *popInput, fp fitParams, warm *population) *population {
	k := effectiveRank(fp.rank, in.cols)
	f := &popFit{in: in, k: k, delta: fp.huber,
		z: make([]float64, in.rows*(k+1)), m: make([]float64, in.cols), v: make([]float64, in.cols*k), h: make([]vec, in.cols),
		start: make([]int, in.rows+1), cnt: make([]int, in.rows), colCnt: make([]int, in.cols),
		as: make([]small, in.cols), bs: make([]vec, in.cols)}
	f.init(warm)
	prev, sweeps := math.Inf(1), 0
	for i := range fp.iterations {
		f.solveRows(i > 0, true)
		f.solveCols()
		f.normalise()
		sweeps++
		// Stop when a sweep no longer moves the weighted residuals.
		if i > 0 && math.Abs(prev-f.ss) <= convergence*f.ss {
			break
		}
		prev = f.ss
	}
	f.solveRows(true, false)
	p := f.result(fp.references, warm)
	p.sweeps = sweeps
	return p
}

// convergence is the relative change of the weighted sum of squared
// residuals under which the sweeps stop.
const convergence = 1e-3

// init compresses the entries, fits the levels of the additive model
// y = m_t + a_j, sets the residual variance to its, and the factors to a
// spectral start (or warm's).
func (f *popFit) init(warm *population) {
	rowMean := f.compress()
	f.additive(rowMean)
	ss := 0.0
	for j := range f.in.rows {
		for e := f.start[j]; e < f.start[j+1]; e++ {
			r := f.val[e] - rowMean[j] - f.m[f.col[e]]
			ss += r * r
		}
	}
	f.s2 = max(ss/float64(max(len(f.col), 1)), minResidual)
	if warm != nil && warm.k == f.k && warm.cols == f.in.cols && warm.finite() {
		copy(f.m, warm.m)
		copy(f.v, warm.v)
		f.s2, f.p = max(warm.s2, minResidual), warm.p
	} else {
		f.spectralInit(rowMean)
	}
	f.normalise()
}

// compress stores the measured entries by row, counts them by row and
// type, sets their weights to 1, and returns the rows' means.
func (f *popFit) compress() []float64 {
	in := f.in
	rowMean := make([]float64, in.rows)
	for j := range in.rows {
		f.start[j] = len(f.col)
		s := 0.0
		for t, y := range in.y[j*in.cols : (j+1)*in.cols] {
			if !math.IsNaN(y) {
				s += y
				f.col = append(f.col, int32(t))
				f.val = append(f.val, y)
				f.colCnt[t]++
			}
		}
		f.cnt[j] = len(f.col) - f.start[j]
		if f.cnt[j] > 0 {
			rowMean[j] = s / float64(f.cnt[j])
		}
	}
	f.start[in.rows] = len(f.col)
	f.w = make([]float64, len(f.col))
	for e := range f.w {
		f.w[e] = 1
	}
	return rowMean
}

// additive fits the additive model y = m_t + a_j by a few alternating
// means (a row's plain mean is biased by the types it measured), into
// f.m and rowMean.
func (f *popFit) additive(rowMean []float64) {
	for range 4 {
		clear(f.m)
		for j := range f.in.rows {
			for e := f.start[j]; e < f.start[j+1]; e++ {
				t := f.col[e]
				f.m[t] += (f.val[e] - rowMean[j]) / float64(f.colCnt[t])
			}
		}
		for j := range f.in.rows {
			if f.cnt[j] == 0 {
				continue
			}
			s := 0.0
			for e := f.start[j]; e < f.start[j+1]; e++ {
				s += f.val[e] - f.m[f.col[e]]
			}
			rowMean[j] = s / float64(f.cnt[j])
		}
	}
}

// spectralInit starts the types' factors from the leading eigenvectors
// of the pairwise covariance of the rows' residuals after the levels, the
// spectral start of alternating minimisation (Jain, Netrapalli and
// Sanghavi, "Low-rank Matrix Completion using Alternating Minimization",
// STOC 2013), with a factor's variance p its eigenvalue and s^2 the mean
// of the other eigenvalues (the levels' residuals overstate it by the
// factors' whole variance); a direction with no variance gets a fixed
// small pseudo-random one.
func (f *popFit) spectralInit(rowMean []float64) {
	cols := f.in.cols
	var eig mat.EigenSym
	ok := f.k > 0 && eig.Factorize(f.residualCovariance(rowMean), true)
	var vecs mat.Dense
	var vals []float64
	if ok {
		vals = eig.Values(nil) // ascending
		eig.VectorsTo(&vecs)
		rest := 0.0
		for _, v := range vals[:max(cols-f.k, 0)] {
			rest += max(v, 0)
		}
		f.s2 = max(rest/float64(max(cols-f.k, 1)), minResidual)
	}
	seed := uint64(0x9e3779b97f4a7c15)
	for l := range f.k {
		c := cols - 1 - l
		lead := ok && c >= 0 && vals[c] > 0
		f.p[1+l] = f.s2
		if lead {
			f.p[1+l] = max(vals[c], minResidual)
		}
		for t := range cols {
			seed = splitmix(seed)
			f.v[t*f.k+l] = 0.01 * (float64(seed>>11)/(1<<53)*2 - 1)
			if lead {
				f.v[t*f.k+l] += vecs.At(t, c)
			}
		}
	}
}

// residualCovariance returns the covariance of the rows' residuals after
// the levels, each pair of types over the rows that measured both.
func (f *popFit) residualCovariance(rowMean []float64) *mat.SymDense {
	cols := f.in.cols
	cov := mat.NewSymDense(cols, nil)
	pairs := make([]float64, cols*cols)
	res := make([]float64, cols)
	for j := range f.in.rows {
		for t := range res {
			res[t] = math.NaN()
		}
		for e := f.start[j]; e < f.start[j+1]; e++ {
			res[f.col[e]] = f.val[e] - f.m[f.col[e]] - rowMean[j]
		}
		for s := range cols {
			for t := s; t < cols && !math.IsNaN(res[s]); t++ {
				if !math.IsNaN(res[t]) {
					cov.SetSym(s, t, cov.At(s, t)+res[s]*res[t])
					pairs[s*cols+t]++
				}
			}
		}
	}
	for s := range cols {
		for t := s; t < cols; t++ {
			if n := pairs[s*cols+t]; n > 0 {
				cov.SetSym(s, t, cov.At(s, t)/n)
			}
		}
	}
	return cov
}

// splitmix is one step of the SplitMix64 generator (Steele, Lea and
// Flood, OOPSLA 2014): a fixed, portable pseudo-random sequence.
func splitmix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// normalise rescales each factor of the types to unit mean square over
// the measured types (the rows' factors take the inverse scale, so the
// model is unchanged) and caches h_t = (1, v_t).
func (f *popFit) normalise() {
	for l := range f.k {
		ms, n := 0.0, 0
		for t := range f.in.cols {
			if f.colCnt[t] > 0 {
				ms += f.v[t*f.k+l] * f.v[t*f.k+l]
				n++
			}
		}
		if !(ms > 0 && ms < math.Inf(1)) || n == 0 {
			continue
		}
		c := math.Sqrt(ms / float64(n))
		for t := range f.in.cols {
			f.v[t*f.k+l] /= c
		}
		for j := range f.in.rows {
			f.z[j*(f.k+1)+1+l] *= c
		}
		f.p[1+l] = min(f.p[1+l]*c*c, maxFactor)
	}
	for t := range f.in.cols {
		if f.colCnt[t] == 0 {
			// A type no row measured has no factor: rescaled with the
			// others sweep after sweep, fit after fit (warm starts), its
			// start value grew to +Inf.
			clear(f.v[t*f.k : (t+1)*f.k])
		}
		f.h[t][0] = 1
		copy(f.h[t][1:1+f.k], f.v[t*f.k:])
	}
}

// solveRows sets each row's z = (a_j, u_j) to the weighted ridge solution
// given the types' values; with reweight, it first sets the Huber weights
// of the row's entries from their residuals under the current values,
// and then re-estimates s^2 from them. It re-estimates p from the new
// factors. With cols, it also sums the types' normal equations given the
// new rows (for solveCols), while the row's entries are at hand.
func (f *popFit) solveRows(reweight, cols bool) {
	in, dim := f.in, f.k+1
	var ridge vec
	ridge[0] = ridgeLevel
	for l := 1; l < dim; l++ {
		ridge[l] = f.s2 / max(f.p[l], minResidual*minResidual)
	}
	ss, sw, rowEff := 0.0, 0.0, 0.0
	var pu vec
	if cols {
		clear(f.as)
		clear(f.bs)
	}
	for j := range in.rows {
		zj := f.z[j*dim : (j+1)*dim]
		var a small
		var b vec
		for e := f.start[j]; e < f.start[j+1]; e++ {
			t := f.col[e]
			h := &f.h[t]
			y := f.val[e] - f.m[t]
			if reweight {
				r := y
				for d := range dim {
					r -= h[d] * zj[d]
				}
				f.w[e] = f.huber(r)
				ss += f.w[e] * r * r
				sw += f.w[e]
			}
			a.addLower(h, f.w[e], dim)
			r := f.w[e] * y
			for d := range dim {
				b[d] += h[d] * r
			}
		}
		for d := range dim {
			a[d*maxDim+d] += ridge[d]
		}
		l := cholesky(&a, dim)
		z := l.solve(&b, dim)
		copy(zj, z[:dim])
		if reweight {
			rowEff += effective(&l, &ridge, dim)
		}
		if cols {
			f.sumCols(j)
		}
		for d := 1; d < dim; d++ {
			pu[d] += z[d] * z[d]
		}
	}
	if reweight && sw > 0 {
		// The residuals' degrees of freedom: the weighted entries less
		// the effective parameters of the rows and of the types.
		f.ss = ss
		f.s2 = max(ss/max(sw-rowEff-f.colEff, 1), minResidual)
	}
	for d := 1; d < dim; d++ {
		f.p[d] = min(pu[d]/float64(max(in.rows, 1))+minResidual*minResidual, maxFactor)
	}
}

// effective returns the effective number of parameters of a ridge
// solution with normal equations factored as l (data plus ridge) and
// ridge the diagonal: tr((X'WX + R)^-1 X'WX) = dim - sum_d R_dd
// ((X'WX + R)^-1)_dd (Hastie, Tibshirani and Friedman, "The Elements of
// Statistical Learning", 2009, section 3.4.1). A factor the priors shrink
// counts for less than one.
// The level's tiny ridge is left out (it counts for less than 1e-6).
func effective(l *small, ridge *vec, dim int) float64 {
	eff := float64(dim)
	for d := 1; d < dim; d++ {
		var e vec
		e[d] = 1
		y := l.forward(&e, dim)
		inv := 0.0
		for i := range dim {
			inv += y[i] * y[i]
		}
		eff -= ridge[d] * inv
	}
	return max(eff, 0)
}

// huber is the weight of a residual r: 1 within delta, delta/|r| beyond.
func (f *popFit) huber(r float64) float64 {
	if !(f.delta > 0) || math.Abs(r) <= f.delta {
		return 1
	}
	return f.delta / math.Abs(r)
}

// sumCols adds row j's entries to the types' normal equations for
// (m_t, v_t) given the row's (a_j, u_j).
func (f *popFit) sumCols(j int) {
	dim := f.k + 1
	zj := f.z[j*dim : (j+1)*dim]
	var g vec
	g[0] = 1
	copy(g[1:dim], zj[1:])
	for e := f.start[j]; e < f.start[j+1]; e++ {
		t := f.col[e]
		w := f.w[e]
		f.as[t].addLower(&g, w, dim)
		r := w * (f.val[e] - zj[0])
		for d := range dim {
			f.bs[t][d] += g[d] * r
		}
	}
}

// solveCols sets each type's (m_t, v_t) to the weighted ridge solution
// of the normal equations solveRows summed; the ridge on v_t is s^2 (its
// prior is N(0, I)).
func (f *popFit) solveCols() {
	in, dim := f.in, f.k+1
	var ridge vec
	ridge[0] = ridgeLevel
	for l := 1; l < dim; l++ {
		ridge[l] = f.s2
	}
	f.colEff = 0
	for t := range in.cols {
		if f.colCnt[t] == 0 {
			continue
		}
		a := &f.as[t]
		for d := range dim {
			a[d*maxDim+d] += ridge[d]
		}
		l := cholesky(a, dim)
		f.colEff += effective(&l, &ridge, dim)
		w := l.solve(&f.bs[t], dim)
		f.m[t] = w[0]
		copy(f.v[t*f.k:(t+1)*f.k], w[1:dim])
	}
}

// predict is the model's value of row j on type t.
func (f *popFit) predict(j, t int) float64 {
	dim := f.k + 1
	p := f.m[t]
	for d := range dim {
		p += f.h[t][d] * f.z[j*dim+d]
	}
	return p
}

// result chooses and completes the reference rows and returns the model.
func (f *popFit) result(references int, warm *population) *population {
	in, dim := f.in, f.k+1
	p := &population{k: f.k, cols: in.cols, rows: in.rows, m: f.m, v: f.v, n: f.colCnt, s2: f.s2, p: f.p}
	order := make([]int, 0, in.rows)
	for j := range in.rows {
		if f.cnt[j] > 0 {
			order = append(order, j)
		}
	}
	// A reference row stays one while no row with more measured types
	// displaces it, so that a refit moves the priors only as much as
	// the rows' values moved (Config.Tolerance).
	var was map[uint64]bool
	if warm != nil && in.id != nil {
		was = make(map[uint64]bool, len(warm.refID))
		for _, id := range warm.refID {
			was[id] = true
		}
	}
	kept := func(j int) bool { return was != nil && was[in.id[j]] }
	slices.SortStableFunc(order, func(a, b int) int {
		if c := cmp.Compare(f.cnt[b], f.cnt[a]); c != 0 {
			return c
		}
		if ka, kb := kept(a), kept(b); ka != kb {
			if ka {
				return -1
			}
			return 1
		}
		return cmp.Compare(in.rank[b], in.rank[a])
	})
	order = order[:min(len(order), references)]
	p.refs = len(order)
	p.refVal = make([]float64, p.refs*in.cols)
	p.refVar = make([]float64, p.refs*in.cols)
	p.refRow = order
	if in.id != nil {
		p.refID = make([]uint64, p.refs)
	}
	for r, j := range order {
		if in.id != nil {
			p.refID[r] = in.id[j]
		}
		for t, y := range in.y[j*in.cols : (j+1)*in.cols] {
			i := r*in.cols + t
			if math.IsNaN(y) {
				p.refVal[i] = f.predict(j, t)
				p.refVar[i] = p.s2 * (1 + float64(dim)/float64(f.cnt[j]))
			} else {
				p.refVal[i] = y
			}
		}
	}
	return p
}

// moved reports whether the priors of q may differ from p's by more than
// about tol in log rate: a population on one side only, other reference
// rows (by id, in any order), another type covered, a reference value
// moved by more than tol, or a variance of one by more than vtol. (Each
// prior is a weighted median of the rows' values on its type, moved to
// the job's level: it moves by about as much as they do, and by up to a
// step of the median where the rows' weights cross one.)
func (p *population) moved(q *population, tol, vtol float64) bool {
	switch {
	case p == nil || q == nil:
		return p != q
	case p.cols != q.cols || p.refs != q.refs || p.refID == nil || q.refID == nil:
		return true
	}
	for t := range p.cols {
		if p.covers(t) != q.covers(t) || (p.n[t] > 0) != (q.n[t] > 0) {
			return true
		}
	}
	at := make(map[uint64]int, p.refs)
	for r, id := range p.refID {
		at[id] = r
	}
	for r, id := range q.refID {
		pr, ok := at[id]
		if !ok {
			return true
		}
		for t := range p.cols {
			a, b := pr*p.cols+t, r*q.cols+t
			if math.Abs(p.refVal[a]-q.refVal[b]) > tol || math.Abs(p.refVar[a]-q.refVar[b]) > vtol {
				return true
			}
		}
	}
	return false
}

// finite reports whether the fit's values are all numbers, as a warm
// start must be.
func (p *population) finite() bool {
	for _, xs := range [][]float64{p.m, p.v, p.p[:]} {
		for _, x := range xs {
			if math.IsNaN(x) || math.IsInf(x, 0) {
				return false
			}
		}
	}
	return true
}
