package lp_test

import (
	"context"
	"testing"

	"github.com/gpusched/gpusched/allocation/lp"
	"github.com/gpusched/gpusched/allocation/lp/lptest"
)

const netlibDir = "testdata/netlib"

// netlibShort are the problems -short runs: small ones of every kind
// (degenerate, ranged, free variables, infeasible).
var netlibShort = map[string]bool{
	"afiro": true, "adlittle": true, "blend": true, "e226": true, "israel": true, "kb2": true,
	"sc50a": true, "sc105": true, "share2b": true, "boeing2": true, "forest6": true, "galenet": true,
	"woodinfe": true, "gams10am": true, "recipe": true, "vtp.base": true, "stocfor1": true, "scagr7": true,
}

// TestNetlib solves the netlib LP test set with the default options and
// checks each status and optimum (1e-6 relative, objective constant
// included). -short runs a subset.
func TestNetlib(t *testing.T) {
	problems, err := lptest.Netlib(netlibDir)
	if err != nil {
		t.Fatal(err)
	}
	if len(problems) != 96 {
		t.Fatalf("%d netlib problems, want 96", len(problems))
	}
	for _, p := range problems {
		if testing.Short() && !netlibShort[p.Name] {
			continue
		}
		t.Run(p.Name, func(t *testing.T) {
			m, err := p.Load()
			if err != nil {
				t.Fatal(err)
			}
			if m.NumRows() != p.Rows || m.NumVars() != p.Cols || m.NumNonzeros() != p.Nonzeros {
				t.Fatalf("read %d rows, %d columns, %d nonzeros; want %d, %d, %d with the objective", m.NumRows(), m.NumVars(), m.NumNonzeros(), p.Rows, p.Cols, p.Nonzeros)
			}
			sol, err := (&lp.InteriorPoint{}).Solve(context.Background(), m)
			if sol == nil || sol.Status != p.Status {
				status := lp.Failed
				if sol != nil {
					status = sol.Status
				}
				t.Fatalf("got %v, %v; want status %v", status, err, p.Status)
			}
			if p.Status != lp.Optimal {
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !lptest.RelClose(sol.Objective, p.Objective, 1e-6) {
				t.Errorf("objective %.10e, want %.10e", sol.Objective, p.Objective)
			}
		})
	}
}

// BenchmarkNetlib times each netlib problem (the read excluded).
func BenchmarkNetlib(b *testing.B) {
	problems, err := lptest.Netlib(netlibDir)
	if err != nil {
		b.Fatal(err)
	}
	for _, p := range problems {
		m, err := p.Load()
		if err != nil {
			b.Fatal(err)
		}
		b.Run(p.Name, func(b *testing.B) {
			for b.Loop() {
				sol, err := (&lp.InteriorPoint{}).Solve(context.Background(), m)
				if sol == nil || sol.Status != p.Status {
					b.Fatalf("got %v, %v", sol, err)
				}
			}
		})
	}
}
