package lp

import (
	"context"
	"errors"
	"io"
	"math"
	"testing"
)

// fuzzValues are the numbers a fuzzed model draws from, bad ones included.
var fuzzValues = []float64{0, 1, -1, 2, 0.5, -3, 10, 1e-9, 1e9, math.Inf(1), math.Inf(-1), math.NaN()}

// FuzzModel builds small models from bytes: valid ones must export and
// solve to a typed outcome (an optimal solution that satisfies the model, or
// an error of the status's kind), invalid ones must say so, and nothing may
// panic.
func FuzzModel(f *testing.F) {
	f.Add([]byte{2, 2, 1, 0, 3, 1, 1, 0, 2, 0, 1, 1, 2})
	f.Add([]byte{0, 1, 11, 11})
	f.Fuzz(func(t *testing.T, data []byte) {
		next := func() int {
			if len(data) == 0 {
				return 0
			}
			b := int(data[0])
			data = data[1:]
			return b
		}
		val := func() float64 { return fuzzValues[next()%len(fuzzValues)] }
		m := NewModel(Minimize)
		if next()%2 == 1 {
			m = NewModel(Maximize)
		}
		nv, nr := next()%6, next()%6
		for range nv {
			m.AddVar(val(), val(), val())
		}
		for range nr {
			k := next() % 4
			idx := make([]int, k)
			vals := make([]float64, k)
			for e := range k {
				idx[e] = next()%(nv+2) - 1
				vals[e] = val()
			}
			m.AddRow(val(), val(), idx, vals)
		}
		if err := m.Validate(); err != nil {
			return
		}
		if err := m.WriteMPS(io.Discard); err != nil {
			t.Fatalf("valid model did not export: %v", err)
		}
		x := make([]float64, nv)
		_ = CheckFeasible(m, x)
		sol, err := (&InteriorPoint{}).Solve(context.Background(), m)
		switch {
		case err == nil && sol.Status != Optimal:
			t.Fatalf("status %v without an error", sol.Status)
		case err == nil:
			if i, v := worstRow(m, sol.X); v > 1e-6 {
				t.Fatalf("optimal solution violates row %d by %g (relative)", i, v)
			}
		case sol == nil:
			t.Fatalf("no solution with error %v", err)
		case !errors.Is(err, StatusError(sol.Status, nil)):
			t.Fatalf("status %v with error %v", sol.Status, err)
		}
		start, rows, _ := m.Columns()
		if start[nv] != len(rows) || len(rows) != m.NumNonzeros() {
			t.Fatalf("columns have %d entries, model %d", len(rows), m.NumNonzeros())
		}
	})
}

// worstRow returns the row (or -1 for the bounds) that x violates most,
// relative to the size of the row's terms and bounds, and that violation.
func worstRow(m *Model, x []float64) (int, float64) {
	worst, at := 0.0, -1
	rel := func(v, lo, up, scale float64) float64 {
		for _, b := range []float64{lo, up} {
			if !math.IsInf(b, 0) {
				scale = max(scale, math.Abs(b))
			}
		}
		return max(lo-v, v-up, 0) / (1 + scale)
	}
	for j := range m.obj {
		worst = max(worst, rel(x[j], m.colLo[j], m.colUp[j], 0))
	}
	for i := range m.rowLo {
		idx, val := m.Row(i)
		s, scale := 0.0, 0.0
		for k, j := range idx {
			s += val[k] * x[j]
			scale = max(scale, math.Abs(val[k]*x[j]), math.Abs(val[k]))
		}
		if v := rel(s, m.rowLo[i], m.rowUp[i], scale); v > worst {
			worst, at = v, i
		}
	}
	return at, worst
}
