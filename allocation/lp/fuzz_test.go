package lp

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math"
	"testing"
)

// fuzzValues are the numbers a fuzzed model draws from, bad ones included.
var fuzzValues = []float64{0, 1, -1, 2, 0.5, -3, 10, 1e-9, 1e9, math.Inf(1), math.Inf(-1), math.NaN(), 5e-324, 1e-300, 1e30, -1e25}

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
			// The final check's promise: within DefaultModelTolerance on
			// the model as given (a row x0 = 0 beside x0 + 1e30 x2 in
			// [0, 1] ends 2.3e-6 off).
			if r := ModelResiduals(m, sol.X, sol.Duals); r.Primal > DefaultModelTolerance || r.Dual > DefaultModelTolerance || r.Gap > DefaultModelTolerance {
				i, v := worstRow(m, sol.X)
				t.Fatalf("optimal solution has residuals %+v on the model (row %d violated by %g)", r, i, v)
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

// FuzzReadMPS reads arbitrary bytes as MPS: the reader must return a valid
// model or an *MPSError, never panic, and a model it returns must survive
// WriteMPS and ReadMPS unchanged (row bounds of ranged rows to rounding).
func FuzzReadMPS(f *testing.F) {
	f.Add([]byte(fixedMPS))
	f.Add([]byte("NAME m FREE\nOBJSENSE MAX\nROWS\n N o\n G c\n E e\nCOLUMNS\n x o 1 c 1\n y e 2\nRHS\n R c 1 o -3\nRANGES\n R e -1\nBOUNDS\n UP B x -2\n BV B y\nENDATA\n"))
	f.Add([]byte("NAME\nROWS\n N COST\n L LIM1\nCOLUMNS\n    X1        COST         1.0   LIM1         1.0\nRHS\n    RHS       LIM1         4.0\nENDATA\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		rd := &MPSReader{MaxRows: 1000, MaxCols: 1000, MaxNonzeros: 10000, MaxLineBytes: 4096}
		m, err := rd.Read(bytes.NewReader(data))
		if err != nil {
			var me *MPSError
			if !errors.As(err, &me) || !errors.Is(err, ErrMPS) {
				t.Fatalf("error %v is not an MPSError", err)
			}
			return
		}
		if err := m.Validate(); err != nil {
			t.Fatalf("reader returned an invalid model: %v", err)
		}
		var buf bytes.Buffer
		if err := m.WriteMPS(&buf); err != nil {
			t.Fatalf("write: %v", err)
		}
		back, err := ReadMPS(&buf)
		if err != nil {
			t.Fatalf("reading back: %v\n%s", err, buf.String())
		}
		if back.NumVars() != m.NumVars() || back.NumRows() != m.NumRows() || back.NumNonzeros() != m.NumNonzeros() ||
			back.Sense() != m.Sense() || back.ObjectiveConstant() != m.ObjectiveConstant() {
			t.Fatalf("round trip changed the model's shape")
		}
		close := func(a, b float64) bool {
			return a == b || math.Abs(a-b) <= 1e-15*max(math.Abs(a), math.Abs(b))
		}
		for j := range m.NumVars() {
			if m.obj[j] != back.obj[j] || m.colLo[j] != back.colLo[j] || m.colUp[j] != back.colUp[j] {
				t.Fatalf("column %d changed", j)
			}
		}
		for i := range m.NumRows() {
			if !close(m.rowLo[i], back.rowLo[i]) || !close(m.rowUp[i], back.rowUp[i]) {
				t.Fatalf("row %d bounds [%v, %v] came back [%v, %v]", i, m.rowLo[i], m.rowUp[i], back.rowLo[i], back.rowUp[i])
			}
		}
	})
}
