package allocation

import (
	"context"

	"github.com/gpusched/gpusched/allocation/lp"
)

// program is the base linear program of Gavel's policies (Narayanan et
// al., OSDI 2020, section 4; policy.py: get_base_constraints) over the time
// fractions X[m][k]:
//
//	0 <= X[m][k] <= 1,  sum_k X[m][k] <= 1,  sum_m sf_m X[m][k] <= n_k.
//
// Unlike Gavel, a variable exists only where the job can run (a positive
// rate in the throughput matrix used for feasibility, and at least
// sf_m GPUs of the type), so no time is ever given where it is wasted.
type program struct {
	p *Problem
	m *lp.Model
	// x[m][k] is the LP variable of X[m][k], or -1.
	x [][]int
	// idx and val are scratch space for building rows.
	idx []int
	val []float64
}

// newProgram starts the base program; real holds the throughputs that say
// where each job can run.
func newProgram(p *Problem, sense lp.Sense, real [][]float64) *program {
	return newProgramOn(p, sense, real, nil, nil)
}

// newProgramOn starts the base program over some of the jobs (indices into
// p.Jobs, in order; nil means all) on capacities caps (GPUs of each type,
// nil means p.Capacity): a job gets no variable on a type whose capacity
// there is 0, and the others none at all.
func newProgramOn(p *Problem, sense lp.Sense, real [][]float64, jobs []int, caps []float64) *program {
	g := &program{p: p, m: lp.NewModel(sense), x: make([][]int, len(p.Jobs))}
	capacity := func(k int) float64 {
		if caps == nil {
			return float64(p.Capacity[k])
		}
		return caps[k]
	}
	n := len(p.Jobs)
	if jobs != nil {
		n = len(jobs)
	}
	for i := range n {
		m := i
		if jobs != nil {
			m = jobs[i]
		}
		g.x[m] = make([]int, len(p.Types))
		g.idx, g.val = g.idx[:0], g.val[:0]
		for k := range p.Types {
			g.x[m][k] = -1
			if p.runnable(m, k, real[m]) && capacity(k) > 0 {
				g.x[m][k] = g.m.AddVar(0, 1, 0)
				g.idx = append(g.idx, g.x[m][k])
				g.val = append(g.val, 1)
			}
		}
		if len(g.idx) > 1 {
			g.m.AddRow(-lp.Inf, 1, g.idx, g.val)
		}
	}
	for k := range p.Types {
		g.idx, g.val = g.idx[:0], g.val[:0]
		for m, row := range g.x {
			if row == nil {
				continue
			}
			if v := row[k]; v >= 0 {
				g.idx = append(g.idx, v)
				g.val = append(g.val, float64(p.Jobs[m].ScaleFactor)*p.Jobs[m].count())
			}
		}
		if len(g.idx) > 0 {
			g.m.AddRow(-lp.Inf, capacity(k), g.idx, g.val)
		}
	}
	return g
}

// rate adds to the scratch row the terms scale * tput[k] * X[m][k].
func (g *program) rate(m int, tput []float64, scale float64) {
	for k, v := range g.x[m] {
		if v >= 0 && tput[k] != 0 {
			g.idx = append(g.idx, v)
			g.val = append(g.val, scale*tput[k])
		}
	}
}

// runs reports whether job m has any variable.
func (g *program) runs(m int) bool {
	for _, v := range g.x[m] {
		if v >= 0 {
			return true
		}
	}
	return false
}

// solve runs the program and reads X (clipped to [0, 1], as Gavel does).
func (g *program) solve(ctx context.Context, s lp.Solver) (*Allocation, *lp.Solution, error) {
	if s == nil {
		s = &lp.InteriorPoint{}
	}
	sol, err := solveLP(ctx, s, g.m)
	if err != nil {
		return nil, sol, err
	}
	a := newAllocation(g.p)
	for m, row := range g.x {
		for k, v := range row {
			if v >= 0 {
				a.X[m][k] = clip(sol.X[v])
			}
		}
	}
	return a.fit(g.p), sol, nil
}

// lpSolver returns s, or the default solver, the pure-Go interior point,
// asked for a vertex of the optimal face when vertex is set.
func lpSolver(s lp.Solver, vertex bool) lp.Solver {
	if s != nil {
		return s
	}
	return &lp.InteriorPoint{Crossover: vertex}
}

// matrix returns the jobs' throughputs as a matrix.
func (p *Problem) matrix() [][]float64 {
	t := make([][]float64, len(p.Jobs))
	for m := range p.Jobs {
		t[m] = p.Jobs[m].Throughput
	}
	return t
}

// ones returns the all-ones throughput matrix of heterogeneity-agnostic
// max-min fairness (Gavel: every T_mj = 1.0).
func (p *Problem) ones() [][]float64 {
	t := make([][]float64, len(p.Jobs))
	for m := range t {
		t[m] = make([]float64, len(p.Types))
		for k := range t[m] {
			t[m][k] = 1
		}
	}
	return t
}
