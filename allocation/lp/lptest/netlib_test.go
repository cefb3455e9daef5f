package lptest

import (
	"testing"

	"github.com/gpusched/gpusched/allocation/lp"
)

// Every netlib file reads, with the sizes optima.csv records.
func TestNetlibLoads(t *testing.T) {
	problems, err := Netlib("../testdata/netlib")
	if err != nil {
		t.Fatal(err)
	}
	if len(problems) != 96 {
		t.Fatalf("%d problems, want 96", len(problems))
	}
	infeasible := 0
	for _, p := range problems {
		if p.Status == lp.Infeasible {
			infeasible++
		}
		if testing.Short() && p.Nonzeros > 5000 {
			continue
		}
		m, err := p.Load()
		if err != nil {
			t.Fatal(err)
		}
		nz := m.NumNonzeros()
		if m.NumRows() != p.Rows || m.NumVars() != p.Cols || nz != p.Nonzeros {
			t.Errorf("%s: %d rows, %d columns, %d nonzeros; want %d, %d, %d", p.Name, m.NumRows(), m.NumVars(), nz, p.Rows, p.Cols, p.Nonzeros)
		}
	}
	if infeasible != 12 {
		t.Errorf("%d infeasible problems, want 12", infeasible)
	}
}
