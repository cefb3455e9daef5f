package lp_test

import (
	"context"
	"fmt"
	"math"
	"testing"

	"github.com/gpusched/gpusched/allocation/lp"
	"github.com/gpusched/gpusched/allocation/lp/lptest"
)

// lasModel is the max-min LP of heterogeneity-agnostic max-min fairness
// (Gavel's LAS) for jobs single-GPU jobs on types types of equal rates and
// capacity jobs/(2 types): every job gets time 1/2, split across the types
// as it likes, so the optimal face is large and its centre far from a
// vertex.
func lasModel(jobs, types int) *lp.Model {
	m := lp.NewModel(lp.Maximize)
	x := m.AddVars(jobs*types, 0, 1, 0)
	t := m.AddVar(0, lp.Inf, 1)
	for j := range jobs {
		idx := make([]int, types)
		ones := make([]float64, types)
		for k := range types {
			idx[k], ones[k] = x+j*types+k, 1
		}
		m.AddRow(-lp.Inf, 1, idx, ones)
		val := make([]float64, types+1)
		for k := range val {
			val[k] = -1
		}
		val[types] = 1
		m.AddRow(-lp.Inf, 0, append(idx, t), val)
	}
	for k := range types {
		idx := make([]int, jobs)
		ones := make([]float64, jobs)
		for j := range jobs {
			idx[j], ones[j] = x+j*types+k, 1
		}
		m.AddRow(-lp.Inf, float64(jobs)/float64(2*types), idx, ones)
	}
	return m
}

// isVertex reports whether x is a basic solution of m: the columns of the
// variables strictly inside their bounds, with the slacks of the rows
// strictly inside theirs, are linearly independent (checked by the rank of
// a dense elimination).
func isVertex(m *lp.Model, x []float64, tol float64) bool {
	lo, up := m.VarBounds()
	rlo, rup := m.RowBounds()
	rows := m.NumRows()
	var cols [][]float64
	for j := range m.NumVars() {
		if x[j]-lo[j] > tol*(1+math.Abs(lo[j])) && up[j]-x[j] > tol*(1+math.Abs(up[j])) {
			col := make([]float64, rows)
			for i := range rows {
				idx, val := m.Row(i)
				for k, v := range idx {
					if v == j {
						col[i] = val[k]
					}
				}
			}
			cols = append(cols, col)
		}
	}
	for i := range rows {
		idx, val := m.Row(i)
		act := 0.0
		for k, j := range idx {
			act += val[k] * x[j]
		}
		if act-rlo[i] > tol*(1+math.Abs(rlo[i])) && rup[i]-act > tol*(1+math.Abs(rup[i])) {
			col := make([]float64, rows)
			col[i] = -1
			cols = append(cols, col)
		}
	}
	// Gaussian elimination with partial pivoting on the columns.
	rank := 0
	for r := 0; r < rows && rank < len(cols); r++ {
		best, piv := 0.0, -1
		for c := rank; c < len(cols); c++ {
			if a := math.Abs(cols[c][r]); a > best {
				best, piv = a, c
			}
		}
		if best < 1e-9 {
			continue
		}
		cols[rank], cols[piv] = cols[piv], cols[rank]
		for c := rank + 1; c < len(cols); c++ {
			f := cols[c][r] / cols[rank][r]
			for i := r; i < rows; i++ {
				cols[c][i] -= f * cols[rank][i]
			}
		}
		rank++
	}
	return rank == len(cols)
}

// Crossover returns a vertex with the interior point's objective, on the
// conformance problems, random LPs and allocation LPs (whose centre is far
// from a vertex: the optimal face of a max-min LP is large).
func TestCrossoverVertex(t *testing.T) {
	var models []*lp.Model
	for _, c := range lptest.Cases() {
		if c.Err == nil {
			models = append(models, c.Build())
		}
	}
	for seed := range uint64(30) {
		models = append(models, lptest.Random(seed, 5+int(seed%20), 5+int(seed*3%25)))
	}
	models = append(models, lptest.Allocation(1, 40, 3), lptest.Allocation(2, 200, 4), lptest.Throughput(3, 100, 3))
	faces := len(models)
	models = append(models, lasModel(30, 3), lasModel(500, 4))
	for k, m := range models {
		t.Run(fmt.Sprint(k), func(t *testing.T) {
			centre, err := (&lp.InteriorPoint{}).Solve(context.Background(), m)
			if err != nil {
				t.Fatal(err)
			}
			sol, err := (&lp.InteriorPoint{Crossover: true}).Solve(context.Background(), m)
			if err != nil {
				t.Fatal(err)
			}
			if !sol.Vertex {
				t.Fatal("crossover failed")
			}
			lptest.Check(t, m, sol, centre.Objective)
			lptest.CheckDuals(t, m, sol, 1e-6)
			if !isVertex(m, sol.X, 1e-9) {
				t.Error("the solution is not a vertex")
			}
			if k >= faces && isVertex(m, centre.X, 1e-9) {
				t.Error("the centre of a large optimal face is a vertex: the test proves nothing")
			}
		})
	}
}
