package lp

import (
	"io"
	"math"
	"testing"
)

// fuzzValues are the numbers a fuzzed model draws from, bad ones included.
var fuzzValues = []float64{0, 1, -1, 2, 0.5, -3, 10, 1e-9, 1e9, math.Inf(1), math.Inf(-1), math.NaN()}

// FuzzModel builds small models from bytes: valid ones must export, invalid
// ones must say so, and nothing may panic.
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
		start, rows, _ := m.Columns()
		if start[nv] != len(rows) || len(rows) != m.NumNonzeros() {
			t.Fatalf("columns have %d entries, model %d", len(rows), m.NumNonzeros())
		}
	})
}
