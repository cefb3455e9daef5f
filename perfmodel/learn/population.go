package learn

import (
	"cmp"
	"math"
	"slices"
)

// Population is what the jobs observed so far say about every job: a
// low-rank model of the jobs-by-types matrix of log rates and the
// reference rows a new job is matched against.
//
// The model (Gavel's matrix completion, Narayanan et al., OSDI 2020,
// section 6, applied to isolated rates instead of co-location ratios) is
//
//	y_jt = m_t + a_j + u_j . v_t + e
//
// with a level m_t per type, a level a_j per job (its size, batch and GPU
// count), and factors u_j, v_t of rank k (0 to 3, at most the number of
// types less 2), fitted to the observed entries by alternating ridge
// least squares with the ridge scaled by each row's and column's entries
// (ALS-WR: Zhou, Wilkinson, Schreiber and Pan, "Large-Scale Parallel
// Collaborative Filtering for the Netflix Prize", AAIM 2008) and Huber
// weights on the residuals (iteratively reweighted; Huber, "Robust
// Estimation of a Location Parameter", Annals of Mathematical Statistics,
// 1964), so that a few jobs of an unusual shape (Gavel's Recommendation
// jobs run slower on a V100 than on a P100) do not bend the factors of the
// others. The fit completes the reference rows: the rows with the most
// measured types (the most recent first), their missing entries filled by
// the model.
//
// A Population is immutable once built and safe for concurrent use.
type Population struct {
	k    int       // rank
	cols int       // types
	rows int       // rows fitted
	m    []float64 // per type: m_t
	v    []float64 // per type: v_t, k values each
	n    []int     // per type: rows that measured it
	s2   float64   // residual variance of the measured entries
	// refs are the reference rows: refVal their log rates (refs x cols,
	// measured or completed), refVar the variance of each entry (0 where
	// measured).
	refs   int
	refVal []float64
	refVar []float64
}

// popInput is the matrix a fit starts from.
type popInput struct {
	y    []float64 // rows x cols, NaN where not measured
	rows int
	cols int
	// rank orders the rows for the choice of references: more measured
	// types first, then the higher rank (more recent).
	rank []uint64
}

// fitParams are the settings of a fit (from Config).
type fitParams struct {
	rank       int
	lambda     float64
	huber      float64
	iterations int
	references int
}

// popFit is the work of one fit.
type popFit struct {
	in     *popInput
	k      int
	lambda float64
	delta  float64
	z      []float64 // rows x (k+1): a_j, u_j
	m, v   []float64 // per type: m_t; v_t (k values)
	w      []float64 // the entries' Huber weights
	cnt    []int     // entries per row
	colCnt []int     // entries per column
	as     []small   // per column: normal equations
	bs     []vec
}

// ridgeLevel is the tiny ridge on the levels a_j and m_t, which keeps the
// normal equations positive definite where a row or column has one entry
// (the two levels are confounded by a constant, which the ridge pins).
const ridgeLevel = 1e-6

// effectiveRank is the rank a fit of cols types uses: at most the number
// of types less 2, so that a row measured on every type has an entry more
// than its level and factors.
func effectiveRank(rank, cols int) int { return max(0, min(rank, cols-2, maxRank)) }

// fitPopulation fits the model to in and completes the reference rows.
// warm, a previous fit of the same rank, starts the factors of the types
// it has. Cost: O(iterations * (nnz * (k+1)^2 + (rows + cols) * (k+1)^3))
// for nnz measured entries, plus O(rows log rows) to choose the
// references; memory O(rows * (k+1) + references * cols).
func fitPopulation(in *popInput, fp fitParams, warm *Population) *Population {
	k := effectiveRank(fp.rank, in.cols)
	f := &popFit{in: in, k: k, lambda: fp.lambda, delta: fp.huber,
		z: make([]float64, in.rows*(k+1)), m: make([]float64, in.cols), v: make([]float64, in.cols*k),
		w: make([]float64, len(in.y)), cnt: make([]int, in.rows), colCnt: make([]int, in.cols),
		as: make([]small, in.cols), bs: make([]vec, in.cols)}
	f.init(warm)
	for range fp.iterations {
		f.solveRows()
		f.solveCols()
		f.reweight()
	}
	f.solveRows()
	return f.result(fp.references)
}

// init counts the entries, sets the types' levels to the column means of
// the rows' centred values and the factors to a fixed pseudo-random
// pattern (or warm's).
func (f *popFit) init(warm *Population) {
	in := f.in
	rowMean := make([]float64, in.rows)
	for j := range in.rows {
		s := 0.0
		for t, y := range in.y[j*in.cols : (j+1)*in.cols] {
			if !math.IsNaN(y) {
				s += y
				f.cnt[j]++
				f.colCnt[t]++
				f.w[j*in.cols+t] = 1
			}
		}
		if f.cnt[j] > 0 {
			rowMean[j] = s / float64(f.cnt[j])
		}
	}
	for j := range in.rows {
		for t, y := range in.y[j*in.cols : (j+1)*in.cols] {
			if !math.IsNaN(y) {
				f.m[t] += (y - rowMean[j]) / float64(f.colCnt[t])
			}
		}
	}
	seed := uint64(0x9e3779b97f4a7c15)
	for i := range f.v {
		seed = splitmix(seed)
		f.v[i] = 0.1 * (float64(seed>>11)/(1<<53)*2 - 1)
	}
	if warm != nil && warm.k == f.k && len(warm.m) > 0 {
		n := min(warm.cols, in.cols)
		copy(f.m[:n], warm.m[:n])
		copy(f.v[:n*f.k], warm.v[:n*f.k])
	}
}

// splitmix is one step of the SplitMix64 generator (Steele, Lea and
// Flood, OOPSLA 2014): a fixed, portable pseudo-random sequence.
func splitmix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// typeVec returns h_t = (1, v_t).
func (f *popFit) typeVec(t int) vec {
	var h vec
	h[0] = 1
	copy(h[1:1+f.k], f.v[t*f.k:])
	return h
}

// solveRows sets each row's z = (a_j, u_j) to the weighted ridge solution
// given the types' values.
func (f *popFit) solveRows() {
	in, dim := f.in, f.k+1
	for j := range in.rows {
		var a small
		var b vec
		for t, y := range in.y[j*in.cols : (j+1)*in.cols] {
			if math.IsNaN(y) {
				continue
			}
			h := f.typeVec(t)
			w := f.w[j*in.cols+t]
			a.addOuter(&h, w, dim)
			r := w * (y - f.m[t])
			for i := range dim {
				b[i] += h[i] * r
			}
		}
		f.ridge(&a, f.cnt[j])
		l := cholesky(&a, dim)
		z := l.solve(&b, dim)
		copy(f.z[j*dim:(j+1)*dim], z[:dim])
	}
}

// ridge adds the ridge to the diagonal of normal equations over n
// entries: lambda * n on the factors (ALS-WR), ridgeLevel on the level.
func (f *popFit) ridge(a *small, n int) {
	a[0] += ridgeLevel
	for i := 1; i <= f.k; i++ {
		a[i*maxDim+i] += f.lambda * float64(max(n, 1))
	}
}

// solveCols sets each type's (m_t, v_t) to the weighted ridge solution
// given the rows' values, in one pass over the matrix.
func (f *popFit) solveCols() {
	in, dim := f.in, f.k+1
	clear(f.as)
	clear(f.bs)
	for j := range in.rows {
		zj := f.z[j*dim : (j+1)*dim]
		var g vec
		g[0] = 1
		copy(g[1:dim], zj[1:])
		for t, y := range in.y[j*in.cols : (j+1)*in.cols] {
			if math.IsNaN(y) {
				continue
			}
			w := f.w[j*in.cols+t]
			f.as[t].addOuter(&g, w, dim)
			r := w * (y - zj[0])
			for i := range dim {
				f.bs[t][i] += g[i] * r
			}
		}
	}
	for t := range in.cols {
		if f.colCnt[t] == 0 {
			continue
		}
		f.ridge(&f.as[t], f.colCnt[t])
		l := cholesky(&f.as[t], dim)
		w := l.solve(&f.bs[t], dim)
		f.m[t] = w[0]
		copy(f.v[t*f.k:(t+1)*f.k], w[1:dim])
	}
}

// predict is the model's value of row j on type t.
func (f *popFit) predict(j, t int) float64 {
	dim := f.k + 1
	h := f.typeVec(t)
	p := f.m[t]
	for i := range dim {
		p += h[i] * f.z[j*dim+i]
	}
	return p
}

// reweight sets the entries' Huber weights from their residuals: 1 within
// delta of the fit, delta/|r| beyond.
func (f *popFit) reweight() {
	if !(f.delta > 0) {
		return
	}
	in := f.in
	for j := range in.rows {
		for t, y := range in.y[j*in.cols : (j+1)*in.cols] {
			if !math.IsNaN(y) {
				f.w[j*in.cols+t] = min(1, f.delta/math.Abs(y-f.predict(j, t)))
			}
		}
	}
}

// result computes the residual variance, chooses and completes the
// reference rows, and returns the model.
func (f *popFit) result(references int) *Population {
	in, dim := f.in, f.k+1
	p := &Population{k: f.k, cols: in.cols, rows: in.rows, m: f.m, n: f.colCnt}
	p.v = f.v
	ss, dof := 0.0, -in.cols*f.k
	for j := range in.rows {
		for t, y := range in.y[j*in.cols : (j+1)*in.cols] {
			if !math.IsNaN(y) {
				r := y - f.predict(j, t)
				ss += r * r
			}
		}
		dof += max(f.cnt[j]-dim, 0)
	}
	p.s2 = ss / float64(max(dof, 1))
	order := make([]int, 0, in.rows)
	for j := range in.rows {
		if f.cnt[j] > 0 {
			order = append(order, j)
		}
	}
	slices.SortStableFunc(order, func(a, b int) int {
		if c := cmp.Compare(f.cnt[b], f.cnt[a]); c != 0 {
			return c
		}
		return cmp.Compare(in.rank[b], in.rank[a])
	})
	order = order[:min(len(order), references)]
	p.refs = len(order)
	p.refVal = make([]float64, p.refs*in.cols)
	p.refVar = make([]float64, p.refs*in.cols)
	for r, j := range order {
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
