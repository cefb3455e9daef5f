// Package lptest holds a conformance suite and problem generators for
// implementations of [lp.Solver]: hand-solved problems with known optima and
// duals, infeasible, unbounded, degenerate and free-variable cases, equality
// and ranged rows, and seeded allocation-shaped problems like those of
// Gavel's policies (Narayanan et al., OSDI 2020, section 4). Both of
// gpusched's backends run it; so can any solver an embedder plugs in.
package lptest

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gpusched/gpusched/allocation/lp"
)

// Case is a problem with its known answer.
type Case struct {
	Name  string
	Build func() *lp.Model
	// Status is the expected outcome, and Err the error kind that goes
	// with it (nil for Optimal).
	Status lp.Status
	Err    error
	// Objective is the optimal value (for Optimal cases).
	Objective float64
	// X and Duals, when not nil, are the unique optimal primal and dual
	// solutions.
	X, Duals []float64
}

// Cases returns the conformance problems.
func Cases() []Case {
	inf := lp.Inf
	return []Case{
		{
			// max x + y s.t. x + 2y <= 4, 3x + y <= 6: optimum 2.8 at (1.6, 1.2),
			// duals (0.4, 0.2).
			Name: "textbook max",
			Build: func() *lp.Model {
				m := lp.NewModel(lp.Maximize)
				x, y := m.AddVar(0, inf, 1), m.AddVar(0, inf, 1)
				m.AddRow(-inf, 4, []int{x, y}, []float64{1, 2})
				m.AddRow(-inf, 6, []int{x, y}, []float64{3, 1})
				return m
			},
			Objective: 2.8, X: []float64{1.6, 1.2}, Duals: []float64{0.4, 0.2},
		},
		{
			// The textbook max beside 5e-324 x <= 1, a subnormal entry
			// (x <= 2e323): InteriorPoint reported a point violating
			// x + 2y <= 4 by 2.8 as optimal.
			Name:      "subnormal coefficient",
			Build:     textbookWith(1, []float64{5e-324, 0}),
			Objective: 2.8, X: []float64{1.6, 1.2}, Duals: []float64{0.4, 0.2, 0},
		},
		{
			// The textbook max beside 1e-300 x + y <= 1 (y <= 1 to any
			// precision): optimum 8/3 at (5/3, 1), duals (0, 1/3, 2/3).
			Name:      "tiny coefficient beside a normal one",
			Build:     textbookWith(1, []float64{1e-300, 1}),
			Objective: 8.0 / 3, X: []float64{5.0 / 3, 1}, Duals: []float64{0, 1.0 / 3, 2.0 / 3},
		},
		{
			// The textbook max beside the row x <= 1e19, which never binds
			// (CLP reads 1e20 and beyond as no bound).
			Name:      "row bound of 1e19",
			Build:     textbookWith(1e19, []float64{1, 0}),
			Objective: 2.8, X: []float64{1.6, 1.2}, Duals: []float64{0.4, 0.2, 0},
		},
		{
			Name: "textbook min",
			Build: func() *lp.Model {
				m := lp.NewModel(lp.Minimize)
				x, y := m.AddVar(0, inf, -1), m.AddVar(0, inf, -1)
				m.AddRow(-inf, 4, []int{y, x}, []float64{2, 1})
				m.AddRow(-inf, 6, []int{x, y}, []float64{3, 1})
				return m
			},
			Objective: -2.8, X: []float64{1.6, 1.2}, Duals: []float64{-0.4, -0.2},
		},
		{
			// Beale's example, which makes the textbook simplex cycle:
			// optimum -5/4 at x4 = 1, x6 = 1.
			Name: "Beale degenerate",
			Build: func() *lp.Model {
				m := lp.NewModel(lp.Minimize)
				x4, x5, x6, x7 := m.AddVar(0, inf, -0.75), m.AddVar(0, inf, 20), m.AddVar(0, inf, -0.5), m.AddVar(0, inf, 6)
				m.AddRow(-inf, 0, []int{x4, x5, x6, x7}, []float64{0.25, -8, -1, 9})
				m.AddRow(-inf, 0, []int{x4, x5, x6, x7}, []float64{0.5, -12, -0.5, 3})
				m.AddRow(-inf, 1, []int{x6}, []float64{1})
				return m
			},
			Objective: -1.25, X: []float64{1, 0, 1, 0},
		},
		{
			// x free: min x s.t. x - y >= -3, 0 <= y <= 2 gives x = -3.
			Name: "free variable",
			Build: func() *lp.Model {
				m := lp.NewModel(lp.Minimize)
				x, y := m.AddVar(-inf, inf, 1), m.AddVar(0, 2, 0)
				m.AddRow(-3, inf, []int{x, y}, []float64{1, -1})
				return m
			},
			Objective: -3, X: []float64{-3, 0}, Duals: []float64{1},
		},
		{
			// min x + 2y s.t. x + y = 3, 1 <= x - y <= 2: x = 2.5, y = 0.5.
			Name: "equality and ranged rows",
			Build: func() *lp.Model {
				m := lp.NewModel(lp.Minimize)
				x, y := m.AddVar(0, inf, 1), m.AddVar(0, inf, 2)
				m.AddRow(3, 3, []int{x, y}, []float64{1, 1})
				m.AddRow(1, 2, []int{x, y}, []float64{1, -1})
				return m
			},
			Objective: 3.5, X: []float64{2.5, 0.5}, Duals: []float64{1.5, -0.5},
		},
		{
			// Bounds only, including a fixed and a negative-bounded variable.
			Name: "bounds only",
			Build: func() *lp.Model {
				m := lp.NewModel(lp.Maximize)
				m.AddVar(1, 5, 2)
				m.AddVar(-4, -1, -1)
				m.AddVar(7, 7, 1)
				return m
			},
			Objective: 10 + 4 + 7, X: []float64{5, -4, 7}, Duals: []float64{},
		},
		{
			Name: "infeasible rows",
			Build: func() *lp.Model {
				m := lp.NewModel(lp.Minimize)
				x, y := m.AddVar(0, inf, 1), m.AddVar(0, inf, 1)
				m.AddRow(-inf, 1, []int{x, y}, []float64{1, 1})
				m.AddRow(2, inf, []int{x, y}, []float64{1, 1})
				return m
			},
			Status: lp.Infeasible, Err: lp.ErrInfeasible,
		},
		{
			Name: "infeasible with bounds",
			Build: func() *lp.Model {
				m := lp.NewModel(lp.Maximize)
				x, y := m.AddVar(0, 1, 1), m.AddVar(0, 1, 1)
				m.AddRow(5, inf, []int{x, y}, []float64{1, 1})
				return m
			},
			Status: lp.Infeasible, Err: lp.ErrInfeasible,
		},
		{
			Name: "unbounded",
			Build: func() *lp.Model {
				m := lp.NewModel(lp.Maximize)
				x, y := m.AddVar(0, inf, 1), m.AddVar(0, inf, 1)
				m.AddRow(-inf, 1, []int{x, y}, []float64{1, -1})
				return m
			},
			Status: lp.Unbounded, Err: lp.ErrUnbounded,
		},
		{
			// min -x0 - 3 x1 - x3 s.t. 2 x0 + 3 x4 <= 0, x1 >= 2, x3 >= 1,
			// x2 free: x1 grows without limit while the row pins x0 and x4
			// to 0 (a dual that vanishes with the ray must not pass for a
			// proof of infeasibility).
			Name: "unbounded beside a tight row",
			Build: func() *lp.Model {
				m := lp.NewModel(lp.Minimize)
				m.AddVar(0, inf, -1)
				m.AddVar(2, inf, -3)
				m.AddVar(-inf, inf, 0)
				m.AddVar(1, inf, -1)
				m.AddVar(0, inf, 0)
				m.AddRow(-inf, 0, []int{0, 4}, []float64{2, 3})
				return m
			},
			Status: lp.Unbounded, Err: lp.ErrUnbounded,
		},
		{
			Name: "unbounded free variable",
			Build: func() *lp.Model {
				m := lp.NewModel(lp.Minimize)
				m.AddVar(-inf, inf, 1)
				return m
			},
			Status: lp.Unbounded, Err: lp.ErrUnbounded,
		},
	}
}

// textbookWith builds the textbook max (x + 2y <= 4, 3x + y <= 6) with
// a third row a'(x, y) <= up.
func textbookWith(up float64, a []float64) func() *lp.Model {
	return func() *lp.Model {
		m := lp.NewModel(lp.Maximize)
		x, y := m.AddVar(0, lp.Inf, 1), m.AddVar(0, lp.Inf, 1)
		m.AddRow(-lp.Inf, 4, []int{x, y}, []float64{1, 2})
		m.AddRow(-lp.Inf, 6, []int{x, y}, []float64{3, 1})
		m.AddRow(-lp.Inf, up, []int{x, y}, a)
		return m
	}
}

// Tolerances of the conformance suite.
const (
	ObjectiveTol   = 1e-6 // relative, on the objective
	FeasibilityTol = 1e-7 // absolute, on bounds and rows
	ValueTol       = 1e-6 // absolute, on unique X and duals
)

// Run solves every case of [Cases] with s and checks the answers.
func Run(t *testing.T, s lp.Solver) {
	t.Helper()
	for _, c := range Cases() {
		t.Run(c.Name, func(t *testing.T) {
			m := c.Build()
			sol, err := s.Solve(context.Background(), m)
			if c.Err != nil {
				if !errors.Is(err, c.Err) {
					t.Fatalf("error %v, want %v", err, c.Err)
				}
				if sol == nil || sol.Status != c.Status {
					t.Fatalf("solution %+v, want status %v", sol, c.Status)
				}
				return
			}
			if err != nil {
				t.Fatalf("solve: %v", err)
			}
			Check(t, m, sol, c.Objective)
			CheckDuals(t, m, sol, 1e-6)
			if c.X != nil {
				near(t, "X", sol.X, c.X)
			}
			if c.Duals != nil {
				near(t, "duals", sol.Duals, c.Duals)
			}
		})
	}
}

// Check verifies an optimal solution of m: status, objective (against want,
// relative), primal feasibility, and the consistency of the reported
// objective with X.
func Check(t testing.TB, m *lp.Model, sol *lp.Solution, want float64) {
	t.Helper()
	if sol.Status != lp.Optimal {
		t.Fatalf("status %v, want optimal", sol.Status)
	}
	if !RelClose(sol.Objective, want, ObjectiveTol) {
		t.Errorf("objective %.12g, want %.12g", sol.Objective, want)
	}
	if got := m.ObjectiveValue(sol.X); !RelClose(got, sol.Objective, 1e-9) {
		t.Errorf("reported objective %.12g but c'x = %.12g", sol.Objective, got)
	}
	if v := lp.CheckFeasible(m, sol.X); v > FeasibilityTol {
		t.Errorf("solution violates the constraints by %g", v)
	}
	if len(sol.Duals) != m.NumRows() {
		t.Errorf("%d duals for %d rows", len(sol.Duals), m.NumRows())
	}
}

// RelClose reports whether a and b agree to tol relative to max(1, |b|).
func RelClose(a, b, tol float64) bool {
	return math.Abs(a-b) <= tol*math.Max(1, math.Abs(b))
}

func near(t *testing.T, what string, got, want []float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s has %d values, want %d", what, len(got), len(want))
	}
	for i := range want {
		if math.Abs(got[i]-want[i]) > ValueTol {
			t.Errorf("%s[%d] = %.9g, want %.9g", what, i, got[i], want[i])
		}
	}
}

// Allocation builds the max-min allocation LP that benchmarks and
// cross-checks use, shaped like Gavel's max-min fairness policy: jobs x types
// variables x_jk in [0, 1] and one variable t to maximise, with
//
//	sum_k x_jk <= 1                     for each job j
//	sum_j g_j x_jk <= c_k               for each type k
//	t - sum_k (T_jk / N_j) x_jk <= 0    for each job j (epigraph row)
//
// where g_j in {1, 2, 4, 8} is the job's scale factor (drawn 70/10/15/5 % as
// in Gavel), T_jk a throughput drawn from [0.5, 10] (0 with probability
// 0.1, a type the job cannot use), N_j normalises each job's best rate to 1,
// and c_k gives the cluster about half as many GPUs as the jobs ask for.
// The same seed gives the same model.
func Allocation(seed uint64, jobs, types int) *lp.Model { return allocation(seed, jobs, types, true) }

// Throughput builds the same jobs and cluster as [Allocation] with Gavel's
// max-sum-throughput objective instead of the max-min level: maximise
// sum_jk (T_jk / N_j) x_jk over the per-job and capacity rows only
// (J*K columns, J + K rows).
func Throughput(seed uint64, jobs, types int) *lp.Model { return allocation(seed, jobs, types, false) }

func allocation(seed uint64, jobs, types int, maxMin bool) *lp.Model {
	rng := rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15))
	m := lp.NewModel(lp.Maximize)
	x := m.AddVars(jobs*types, 0, 1, 0)
	t := -1
	if maxMin {
		t = m.AddVar(0, lp.Inf, 1)
	}
	demand := 0
	g := make([]float64, jobs)
	idx := make([]int, types+1)
	val := make([]float64, types+1)
	ones := make([]float64, types)
	for k := range ones {
		ones[k] = 1
	}
	for j := range jobs {
		r := rng.Float64()
		switch {
		case r < 0.7:
			g[j] = 1
		case r < 0.8:
			g[j] = 2
		case r < 0.95:
			g[j] = 4
		default:
			g[j] = 8
		}
		demand += int(g[j])
		best := 0.0
		for k := range types {
			tput := 0.5 + 9.5*rng.Float64()
			if rng.Float64() < 0.1 && k > 0 {
				tput = 0
			}
			val[k] = tput
			best = max(best, tput)
		}
		for k := range types {
			idx[k] = x + j*types + k
		}
		m.AddRow(-lp.Inf, 1, idx[:types], ones)
		for k := range types {
			val[k] = -val[k] / best
		}
		if !maxMin {
			for k := range types {
				m.SetObjective(idx[k], -val[k])
			}
			continue
		}
		idx[types], val[types] = t, 1
		m.AddRow(-lp.Inf, 0, idx, val)
	}
	capIdx := make([]int, jobs)
	capVal := make([]float64, jobs)
	for k := range types {
		for j := range jobs {
			capIdx[j], capVal[j] = x+j*types+k, g[j]
		}
		m.AddRow(-lp.Inf, math.Max(1, math.Round(float64(demand)/2/float64(types))), capIdx, capVal)
	}
	return m
}

// DualGap returns the gap between sol's objective and the dual objective
// that its duals and reduced costs certify, relative to max(1, |objective|),
// and the largest dual infeasibility: a multiplier that pushes against an
// infinite bound, or reduced costs that disagree with c - A'y. Together
// they are zero, up to rounding, exactly when sol is optimal, so a solver
// cannot pass this check with a merely feasible point.
func DualGap(m *lp.Model, sol *lp.Solution) (gap, dualInfeasibility float64) {
	sense := float64(m.Sense()) // +1 minimise, -1 maximise
	rowLo, rowUp := m.RowBounds()
	colLo, colUp := m.VarBounds()
	c := m.Objective()
	dual := m.ObjectiveConstant()
	pick := func(mult, lo, up float64) float64 {
		// For a minimisation a positive multiplier holds the lower bound.
		b := lo
		if mult*sense < 0 {
			b = up
		}
		if math.IsInf(b, 0) {
			dualInfeasibility = max(dualInfeasibility, math.Abs(mult))
			return 0
		}
		return mult * b
	}
	d := make([]float64, len(c))
	copy(d, c)
	for i := range rowLo {
		dual += pick(sol.Duals[i], rowLo[i], rowUp[i])
		idx, val := m.Row(i)
		for k, j := range idx {
			d[j] -= val[k] * sol.Duals[i]
		}
	}
	for j := range c {
		dual += pick(d[j], colLo[j], colUp[j])
		if sol.ReducedCosts != nil {
			dualInfeasibility = max(dualInfeasibility, math.Abs(d[j]-sol.ReducedCosts[j]))
		}
	}
	return math.Abs(dual-sol.Objective) / math.Max(1, math.Abs(sol.Objective)), dualInfeasibility
}

// CheckDuals fails t unless sol's duals certify its optimality to tol.
func CheckDuals(t testing.TB, m *lp.Model, sol *lp.Solution, tol float64) {
	t.Helper()
	gap, inf := DualGap(m, sol)
	if gap > tol || inf > tol {
		t.Errorf("duals do not certify optimality: relative gap %g, dual infeasibility %g", gap, inf)
	}
}

// Random builds a feasible, bounded LP with rows x cols variables: boxed,
// lower-bounded (with a cost that does not pull them down without limit),
// fixed and free variables (free ones cost nothing), and equality,
// one-sided and ranged rows of one to six entries built around a point x0
// that satisfies them all. The same seed gives the same model.
func Random(seed uint64, rows, cols int) *lp.Model {
	rng := rand.New(rand.NewPCG(seed, 0x2545f4914f6cdd1d))
	sense := lp.Minimize
	if rng.IntN(2) == 1 {
		sense = lp.Maximize
	}
	m := lp.NewModel(sense)
	x0 := make([]float64, cols)
	for j := range cols {
		c := math.Round(rng.NormFloat64()*4) / 2
		// cs is the cost as seen by a minimisation.
		cs := c * float64(sense)
		switch r := rng.Float64(); {
		case r < 0.5:
			lo := math.Round(rng.NormFloat64() * 3)
			up := lo + 1 + float64(rng.IntN(5))
			x0[j] = lo + rng.Float64()*(up-lo)
			m.AddVar(lo, up, c)
		case r < 0.75:
			lo := math.Round(rng.NormFloat64() * 3)
			x0[j] = lo + rng.Float64()*3
			if cs < 0 {
				c = -c
			}
			m.AddVar(lo, lp.Inf, c)
		case r < 0.85:
			up := math.Round(rng.NormFloat64() * 3)
			x0[j] = up - rng.Float64()*3
			if cs > 0 {
				c = -c
			}
			m.AddVar(-lp.Inf, up, c)
		case r < 0.92:
			v := math.Round(rng.NormFloat64() * 3)
			x0[j] = v
			m.AddVar(v, v, c)
		default:
			x0[j] = rng.NormFloat64()
			m.AddVar(-lp.Inf, lp.Inf, 0)
		}
	}
	for range rows {
		k := 1 + rng.IntN(min(6, cols))
		idx := rng.Perm(cols)[:k]
		val := make([]float64, k)
		act := 0.0
		for e, j := range idx {
			val[e] = math.Round(rng.NormFloat64()*8) / 4
			if val[e] == 0 {
				val[e] = 1
			}
			act += val[e] * x0[j]
		}
		lo, up := act-rng.Float64()*2, act+rng.Float64()*2
		switch rng.IntN(4) {
		case 0:
			lo, up = act, act
		case 1:
			lo = -lp.Inf
		case 2:
			up = lp.Inf
		}
		m.AddRow(lo, up, idx, val)
	}
	return m
}
