package lp

import (
	"context"
	"errors"
	"math"
	"slices"

	"github.com/gpusched/gpusched/internal/sparse"
)

// crossover moves an optimal interior point of the scaled standard form to
// a vertex of the optimal face: a basic solution, every nonbasic variable
// at a bound, with the same objective. It is the primal half of
// N. Megiddo's crossover ("On finding primal- and dual-optimal bases",
// ORSA J. Computing 3(1), 1991; R. E. Bixby and M. J. Saltzman,
// "Recovering an optimal LP basis from an interior point solution",
// Oper. Res. Letters 15, 1994): a crash picks a basis among the columns
// farthest inside their bounds (a rank-revealing LU refuses the dependent
// ones, unit columns complete it), then each nonbasic variable not at a
// bound is pushed to its nearer bound while the basic ones follow; when a
// basic variable reaches a bound first it leaves and the pushed one enters
// (a ratio test, with the largest pivot among near-ties). Only columns
// strictly inside their bounds with a zero reduced cost enter the crash
// basis, and a pushed variable goes to the bound its reduced cost points
// to, so the pushes keep the objective but for the rounding of the reduced
// costs times the distances moved; a primal simplex from the final basis
// (Dantzig's pricing, a few pivots in practice) removes that drift and
// leaves an optimal basis. The interior point's duals stay optimal for the
// vertex (strict complementarity is not needed for that).
//
// It works on the standard form before dense columns were split (the
// chains of copies would make the LU fill in). The pushes of variables
// within crossSnapTol of their bounds are tried all at once first (one
// solve); the rest go one by one. The basis factorisation is the sparse LU
// of internal/sparse with product-form updates, rebuilt every
// refactorEvery pushes.
type crossover struct {
	sf   *stdForm
	m, n int // rows and columns before dense columns were split
	// merged holds the entries of each split column, its copies' entries
	// gathered (the crossover works on the problem before splitting: the
	// chains of copies would make its LU fill in).
	merged   map[int][]entry
	x        []float64 // values of the std columns, then the artificials
	basis    []int     // column of each basis position (n+i: artificial of row i)
	inBase   []int     // position of each column in the basis, -1 if nonbasic
	lu       *sparse.LU
	etas     []eta
	work     []float64
	d        []float64
	rowCount []int     // entries per row, for the LU's pivot choice
	dj       []float64 // reduced costs
	pushes   int
}

// eta is one product-form update: basis position r replaced, with the
// transformed entering column d (nonzeros only).
type eta struct {
	r    int
	dr   float64
	idx  []int
	vals []float64
}

const (
	crossFeasTol   = 1e-9 // bound violation allowed to basic variables, relative
	crossPivotTol  = 1e-7 // smallest pivot of a push, relative to the column
	crossSnapTol   = 1e-7 // pushes tried all at once
	crossCrashTol  = 1e-6 // rank threshold of the crash
	refactorEvery  = 100
	crossMaxPushes = 50_000_000
)

var errCrossover = errors.New("crossover lost feasibility")

// lower and upper return the bounds of std column or artificial j.
func (c *crossover) lower(j int) float64 {
	if j >= c.n {
		return 0
	}
	return c.sf.l[j]
}

func (c *crossover) upper(j int) float64 {
	if j >= c.n {
		return 0
	}
	return c.sf.u[j]
}

// column returns the entries of std column or artificial j.
func (c *crossover) column(j int) ([]int, []float64) {
	if j >= c.n {
		return []int{j - c.n}, []float64{1}
	}
	if es, ok := c.merged[j]; ok {
		rows, vals := make([]int, len(es)), make([]float64, len(es))
		for k, e := range es {
			rows[k], vals[k] = e.row, e.val
		}
		return rows, vals
	}
	sf := c.sf
	return sf.rowIdx[sf.colPtr[j]:sf.colPtr[j+1]], sf.vals[sf.colPtr[j]:sf.colPtr[j+1]]
}

// vertex runs the crossover from x (scaled std values) and returns the
// vertex's std values, or an error if it lost feasibility or ctx ended.
func vertex(ctx context.Context, sf *stdForm, x, y []float64) ([]float64, error) {
	m, n := sf.m, sf.n
	if sf.splitFrom != nil {
		m, n = sf.mOrig, sf.nOrig
	}
	c := &crossover{sf: sf, m: m, n: n, x: make([]float64, n+m), basis: make([]int, 0, m),
		inBase: make([]int, n+m), work: make([]float64, m), d: make([]float64, m)}
	if sf.splitFrom != nil {
		c.merged = map[int][]entry{}
		add := func(j, k int) {
			for a := sf.colPtr[k]; a < sf.colPtr[k+1]; a++ {
				if i := sf.rowIdx[a]; i < m {
					c.merged[j] = append(c.merged[j], entry{i, sf.vals[a]})
				}
			}
		}
		for k, j := range sf.splitFrom {
			if _, ok := c.merged[j]; !ok {
				add(j, j)
			}
			add(j, sf.nOrig+k)
		}
	}
	for j := range n {
		c.x[j] = min(max(x[j], sf.l[j]), sf.u[j])
	}
	// Reduced costs c - A'y (scaled), which say which bound a nonbasic
	// variable belongs at.
	c.dj = make([]float64, n+m)
	for j := range n {
		rows, vals := c.column(j)
		d := sf.c[j]
		for k, i := range rows {
			d -= vals[k] * y[i]
		}
		c.dj[j] = d
	}
	for j := range c.inBase {
		c.inBase[j] = -1
	}
	// Crash: the columns clearly inside their bounds (zero reduced cost),
	// sparsest first (a dense column taken early would make the LU fill
	// in), then artificial unit columns, fixed at 0, for the rows left: a
	// column at a bound with a nonzero reduced cost must not move, and the
	// artificials block any push that would move them.
	dist := make([]float64, n)
	count := make([]int, n)
	order := make([]int, n)
	for j := range n {
		order[j] = j
		dist[j] = math.Min(c.x[j]-sf.l[j], sf.u[j]-c.x[j]) / (1 + math.Abs(c.x[j]))
		rows, _ := c.column(j)
		count[j] = len(rows)
	}
	// Inside: off its bounds with a reduced cost of 0 (to dzero): a basic
	// variable moves in the pushes, and the objective with it unless its
	// reduced cost vanishes.
	const inside, dzero = 1e-9, 1e-9
	in := func(j int) bool {
		return dist[j] > inside && math.Abs(c.dj[j]) <= dzero*(1+math.Abs(sf.c[j]))
	}
	slices.SortStableFunc(order, func(a, b int) int {
		ia, ib := in(a), in(b)
		switch {
		case ia != ib:
			if ia {
				return -1
			}
			return 1
		case ia && count[a] != count[b]:
			return count[a] - count[b]
		case dist[a] > dist[b]:
			return -1
		case dist[a] < dist[b]:
			return 1
		}
		return 0
	})
	c.rowCount = make([]int, m)
	for j := range n {
		rows, _ := c.column(j)
		for _, i := range rows {
			c.rowCount[i]++
		}
	}
	c.lu = sparse.NewLU(m)
	c.lu.RowCount = c.rowCount
	for k, j := range order {
		if c.lu.Rank() == m || !in(j) {
			break
		}
		if k&1023 == 0 && ctx.Err() != nil {
			return nil, ctx.Err()
		}
		rows, vals := c.column(j)
		if len(rows) > 0 && c.lu.Add(rows, vals, crossCrashTol) {
			c.inBase[j] = len(c.basis)
			c.basis = append(c.basis, j)
		}
	}
	for i := range m {
		if !c.lu.Pivotal(i) {
			c.lu.Add([]int{i}, []float64{1}, 0)
			c.inBase[n+i] = len(c.basis)
			c.basis = append(c.basis, n+i)
		}
	}
	if err := c.recomputeBasic(); err != nil {
		return nil, err
	}
	c.trace("after crash")
	// Snap the nonbasic variables near a bound all at once.
	if err := c.snap(); err != nil {
		return nil, err
	}
	c.trace("after snap")
	// Push the others one by one (a refactorisation that refuses a drifted
	// column makes it nonbasic again: a second pass takes those).
	for range 3 {
		done := true
		for j := range n + m {
			if c.inBase[j] >= 0 || c.x[j] == c.target(j) {
				continue
			}
			done = false
			if c.pushes&255 == 0 && ctx.Err() != nil {
				return nil, ctx.Err()
			}
			if err := c.push(j); err != nil {
				return nil, err
			}
		}
		if err := c.refactor(); err != nil {
			return nil, err
		}
		if err := c.recomputeBasic(); err != nil {
			return nil, err
		}
		if done {
			break
		}
	}
	c.trace("after pushes")
	// The pushes keep the objective up to the reduced costs' rounding
	// times the distances moved; a primal simplex from the vertex's basis
	// removes that drift (and makes the basis optimal).
	if err := c.cleanup(ctx); err != nil {
		return nil, err
	}
	c.trace("after cleanup")
	for j := range n + m {
		if c.inBase[j] < 0 && c.x[j] != c.target(j) {
			return nil, errCrossover
		}
	}
	for _, j := range c.basis {
		lo, up := c.lower(j), c.upper(j)
		tol := crossFeasTol * (1 + math.Abs(c.x[j]))
		if c.x[j] < lo-tol || c.x[j] > up+tol || math.IsNaN(c.x[j]) {
			return nil, errCrossover
		}
		c.x[j] = min(max(c.x[j], lo), up)
	}
	out := make([]float64, sf.n)
	copy(out, c.x[:n])
	for k, j := range sf.splitFrom {
		out[sf.nOrig+k] = out[j]
	}
	return out, nil
}

// target returns the bound nonbasic column j goes to: the one its reduced
// cost points to (so the objective cannot get worse), the nearer one when
// the reduced cost is 0, 0 for a free column.
func (c *crossover) target(j int) float64 {
	lo, up, v := c.lower(j), c.upper(j), c.x[j]
	const dtol = 1e-9
	switch {
	case math.IsInf(lo, -1) && math.IsInf(up, 1):
		return 0
	case math.IsInf(up, 1):
		return lo
	case math.IsInf(lo, -1):
		return up
	case c.dj[j] > dtol:
		return lo
	case c.dj[j] < -dtol:
		return up
	case v-lo <= up-v:
		return lo
	}
	return up
}

// ftran overwrites r (indexed by row) with B^-1 r (indexed by position).
func (c *crossover) ftran(r []float64) error {
	if err := c.lu.Solve(r); err != nil {
		return err
	}
	for _, e := range c.etas {
		v := r[e.r] / e.dr
		r[e.r] = v
		if v == 0 {
			continue
		}
		for k, i := range e.idx {
			r[i] -= e.vals[k] * v
		}
	}
	return nil
}

// recomputeBasic sets the basic values to B^-1 (b - N x_N).
func (c *crossover) recomputeBasic() error {
	r := c.work
	copy(r, c.sf.b[:c.m])
	for j := range c.n + c.m {
		if c.inBase[j] >= 0 || c.x[j] == 0 {
			continue
		}
		rows, vals := c.column(j)
		for k, i := range rows {
			r[i] -= vals[k] * c.x[j]
		}
	}
	if err := c.ftran(r); err != nil {
		return err
	}
	for p, j := range c.basis {
		c.x[j] = r[p]
	}
	return nil
}

// feasibleAfter reports whether the basic values minus step*d stay within
// their bounds (with the tolerance).
func (c *crossover) feasibleAfter(d []float64, step float64) bool {
	for p, j := range c.basis {
		if d[p] == 0 {
			continue
		}
		v := c.x[j] - step*d[p]
		tol := crossFeasTol * (1 + math.Abs(c.x[j]))
		if v < c.lower(j)-tol || v > c.upper(j)+tol {
			return false
		}
	}
	return true
}

// snap moves the nonbasic variables within crossSnapTol of their bounds to
// them together, if the basic variables stay feasible.
func (c *crossover) snap() error {
	r := c.d
	clear(r)
	var moved []int
	for j := range c.n {
		if c.inBase[j] >= 0 {
			continue
		}
		t := c.target(j)
		delta := t - c.x[j]
		if delta == 0 || math.Abs(delta) > crossSnapTol*(1+math.Abs(t)) {
			continue
		}
		moved = append(moved, j)
		rows, vals := c.column(j)
		for k, i := range rows {
			r[i] += vals[k] * delta
		}
	}
	if len(moved) == 0 {
		return nil
	}
	if err := c.ftran(r); err != nil {
		return err
	}
	if !c.feasibleAfter(r, 1) {
		return nil // leave them to the pushes
	}
	for p, j := range c.basis {
		c.x[j] -= r[p]
	}
	for _, j := range moved {
		c.x[j] = c.target(j)
	}
	return nil
}

// push moves nonbasic column j to its bound, pivoting it into the basis if
// a basic variable blocks it first.
func (c *crossover) push(j int) error {
	t := c.target(j)
	delta := t - c.x[j]
	if delta == 0 {
		return nil
	}
	c.pushes++
	if c.pushes > crossMaxPushes {
		return errCrossover
	}
	d := c.d
	clear(d)
	rows, vals := c.column(j)
	size := 0.0
	for k, i := range rows {
		d[i] = vals[k]
		size = max(size, math.Abs(vals[k]))
	}
	if err := c.ftran(d); err != nil {
		return err
	}
	// Basic values move by -d*delta*theta; find the largest theta in [0, 1]
	// (Harris's two passes: the bound with the tolerance, then among the
	// positions that block within that step the largest pivot).
	theta := 1.0
	for p, b := range c.basis {
		dp := d[p] * delta // x_b decreases by dp*theta
		if math.Abs(d[p]) <= crossPivotTol*size {
			continue
		}
		tol := crossFeasTol * (1 + math.Abs(c.x[b]))
		if dp > 0 && !math.IsInf(c.lower(b), -1) {
			theta = min(theta, (c.x[b]-c.lower(b)+tol)/dp)
		} else if dp < 0 && !math.IsInf(c.upper(b), 1) {
			theta = min(theta, (c.x[b]-c.upper(b)-tol)/dp)
		}
	}
	theta = max(theta, 0)
	leave, best := -1, 0.0
	if theta < 1 {
		for p, b := range c.basis {
			dp := d[p] * delta
			if math.Abs(d[p]) <= crossPivotTol*size {
				continue
			}
			ratio, ok := c.ratio(b, dp)
			if !ok {
				continue
			}
			if ratio <= theta && math.Abs(d[p]) > best {
				leave, best = p, math.Abs(d[p])
			}
		}
	}
	if leave < 0 {
		// j reaches its bound.
		for p, b := range c.basis {
			c.x[b] -= d[p] * delta
		}
		c.x[j] = t
		return nil
	}
	// The basic variable at position leave reaches its bound: it leaves at
	// the bound it hits, j enters with its value moved by the same step.
	lb := c.basis[leave]
	dl := d[leave] * delta
	step := 0.0
	if dl > 0 {
		step = (c.x[lb] - c.lower(lb)) / dl
	} else {
		step = (c.x[lb] - c.upper(lb)) / dl
	}
	step = min(max(step, 0), 1)
	for p, b := range c.basis {
		c.x[b] -= d[p] * delta * step
	}
	c.x[j] += delta * step
	c.exchange(leave, j, d, dl > 0)
	if len(c.etas) >= refactorEvery {
		if err := c.refactor(); err != nil {
			return err
		}
	}
	// If j did not reach its bound it stays basic, which is fine: the
	// vertex has it basic.
	return nil
}

// btran overwrites r (indexed by basis position) with B^-T r (indexed by
// row).
// ratio is how far basic variable b may move at rate dp (per unit of the
// entering column's step) before it meets the bound it moves towards; ok
// is false when that bound is infinite or dp is zero.
func (c *crossover) ratio(b int, dp float64) (ratio float64, ok bool) {
	switch {
	case dp > 0 && !math.IsInf(c.lower(b), -1):
		return (c.x[b] - c.lower(b)) / dp, true
	case dp < 0 && !math.IsInf(c.upper(b), 1):
		return (c.x[b] - c.upper(b)) / dp, true
	}
	return 0, false
}

// exchange makes column enter basic in row leave: the column leaving sits
// at its lower bound when toLower holds (its upper otherwise), and the
// basis change d (the entering column in the basis, from ftran) is kept as
// an eta for later solves.
func (c *crossover) exchange(leave, enter int, d []float64, toLower bool) {
	lb := c.basis[leave]
	if toLower {
		c.x[lb] = c.lower(lb)
	} else {
		c.x[lb] = c.upper(lb)
	}
	c.inBase[lb] = -1
	c.inBase[enter] = leave
	c.basis[leave] = enter
	e := eta{r: leave, dr: d[leave]}
	for p, v := range d {
		if p != leave && v != 0 {
			e.idx = append(e.idx, p)
			e.vals = append(e.vals, v)
		}
	}
	c.etas = append(c.etas, e)
}

func (c *crossover) btran(r []float64) error {
	for k := len(c.etas) - 1; k >= 0; k-- {
		e := &c.etas[k]
		v := r[e.r]
		for q, i := range e.idx {
			v -= e.vals[q] * r[i]
		}
		r[e.r] = v / e.dr
	}
	return c.lu.SolveT(r)
}

// cost returns the scaled cost of std column or artificial j.
func (c *crossover) cost(j int) float64 {
	if j >= c.n {
		return 0
	}
	return c.sf.c[j]
}

// cleanupLimit bounds the simplex iterations of the cleanup, per row.
const cleanupLimit = 2

// cleanup runs the primal simplex from the current basis (Dantzig's
// pricing, the push's ratio test) until no nonbasic variable can improve
// the objective, or the iteration limit.
func (c *crossover) cleanup(ctx context.Context) error {
	y := make([]float64, c.m)
	d := c.d
	for it := 0; it < cleanupLimit*c.m+100; it++ {
		if it&63 == 0 && ctx.Err() != nil {
			return ctx.Err()
		}
		for p, j := range c.basis {
			y[p] = c.cost(j)
		}
		if err := c.btran(y); err != nil {
			return err
		}
		q, dir, best := -1, 0.0, 0.0
		for j := range c.n {
			if c.inBase[j] >= 0 {
				continue
			}
			rows, vals := c.column(j)
			dj := c.sf.c[j]
			for k, i := range rows {
				dj -= vals[k] * y[i]
			}
			tol := 1e-9 * (1 + math.Abs(c.sf.c[j]))
			lo, up, v := c.lower(j), c.upper(j), c.x[j]
			switch {
			case dj < -tol && v < up && -dj > best:
				q, dir, best = j, 1, -dj
			case dj > tol && v > lo && dj > best:
				q, dir, best = j, -1, dj
			}
		}
		if q < 0 {
			return nil
		}
		// Move x_q by dir*step; basic values move by -dir*step*d.
		clear(d)
		rows, vals := c.column(q)
		size := 0.0
		for k, i := range rows {
			d[i] = vals[k]
			size = max(size, math.Abs(vals[k]))
		}
		if err := c.ftran(d); err != nil {
			return err
		}
		step := c.upper(q) - c.lower(q) // a bound flip
		leave, big := -1, 0.0
		for p, b := range c.basis {
			dp := d[p] * dir
			if math.Abs(d[p]) <= crossPivotTol*size {
				continue
			}
			ratio, ok := c.ratio(b, dp)
			if !ok {
				continue
			}
			ratio = max(ratio, 0)
			if ratio < step || ratio == step && math.Abs(d[p]) > big {
				step, leave, big = ratio, p, math.Abs(d[p])
			}
		}
		if math.IsInf(step, 1) {
			return errCrossover // unbounded: cannot be, the point was optimal
		}
		for p, b := range c.basis {
			c.x[b] -= d[p] * dir * step
		}
		c.x[q] += dir * step
		if leave < 0 {
			continue // bound flip
		}
		c.exchange(leave, q, d, d[leave]*dir > 0)
		if len(c.etas) >= refactorEvery {
			if err := c.refactor(); err != nil {
				return err
			}
			if err := c.recomputeBasic(); err != nil {
				return err
			}
		}
	}
	return nil
}

// refactor rebuilds the LU of the current basis (columns by increasing
// count, for sparsity) and drops the updates.
func (c *crossover) refactor() error {
	cols := slices.Clone(c.basis)
	slices.SortStableFunc(cols, func(a, b int) int {
		ra, _ := c.column(a)
		rb, _ := c.column(b)
		return len(ra) - len(rb)
	})
	lu := sparse.NewLU(c.m)
	lu.RowCount = c.rowCount
	basis := c.basis[:0]
	var refused []int
	for _, j := range cols {
		rows, vals := c.column(j)
		if lu.Add(rows, vals, 1e-12) {
			c.inBase[j] = len(basis)
			basis = append(basis, j)
		} else {
			refused = append(refused, j)
		}
	}
	if len(refused) > 0 {
		// The updates drifted into a singular basis; complete it with
		// artificials (the refused columns become nonbasic where they are,
		// and will be pushed) — rare, and the final check catches a loss.
		for _, j := range refused {
			c.inBase[j] = -1
		}
		for i := range c.m {
			if !lu.Pivotal(i) {
				lu.Add([]int{i}, []float64{1}, 0)
				c.inBase[c.n+i] = len(basis)
				basis = append(basis, c.n+i)
			}
		}
	}
	c.basis, c.lu, c.etas = basis, lu, c.etas[:0]
	return nil
}

func (c *crossover) trace(what string) {
	if traceIPM == nil {
		return
	}
	obj, viol := 0.0, 0.0
	for j := range c.n {
		obj += c.sf.c[j] * c.x[j]
	}
	// (the scaled objective: c is divided by cScale)
	for j := range c.n + c.m {
		viol = max(viol, c.lower(j)-c.x[j], c.x[j]-c.upper(j))
	}
	basicBound := 0
	for _, j := range c.basis {
		if c.x[j] == c.lower(j) || c.x[j] == c.upper(j) {
			basicBound++
		}
	}
	traceIPM("crossover %s: objective %.12g, bound violation %.2e, basis %d (%d at a bound), pushes %d\n", what, obj, viol, len(c.basis), basicBound, c.pushes)
}
