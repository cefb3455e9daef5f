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
	count := map[lp.Status]int{}
	for _, p := range problems {
		count[p.Status]++
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
	if count[lp.Optimal] != 84 || count[lp.Infeasible] != 11 || count[lp.Unbounded] != 1 {
		t.Errorf("%d optimal, %d infeasible, %d unbounded problems; want 84, 11, 1", count[lp.Optimal], count[lp.Infeasible], count[lp.Unbounded])
	}
}
