package allocation

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// groupByRank puts every entry in the group of its rank, keeping the
// multiset of entries.
func TestGroupByRank(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for trial := range 200 {
		ranks := 1 + rng.IntN(5)
		es := make([]entry, rng.IntN(60))
		for i := range es {
			es[i] = entry{rank: rng.IntN(ranks), u: unit{i, -1}}
		}
		want := slices.Clone(es)
		groups := groupByRank(es, ranks)
		var got []entry
		for g, grp := range groups {
			for _, e := range grp {
				if e.rank != g {
					t.Fatalf("trial %d: rank %d in group %d", trial, e.rank, g)
				}
			}
			got = append(got, grp...)
		}
		key := func(a, b entry) int { return a.u.a - b.u.a }
		slices.SortFunc(got, key)
		slices.SortFunc(want, key)
		if !slices.Equal(got, want) {
			t.Fatalf("trial %d: entries lost or duplicated", trial)
		}
	}
}

// With one GPU per server, takeFirst takes what takeWorkers takes.
func TestTakeFirstMatchesTakeWorkers(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for trial := range 300 {
		n := 1 + rng.IntN(40)
		a := make([]bool, n)
		for i := range a {
			a[i] = rng.IntN(3) == 0
		}
		b := slices.Clone(a)
		next := 0
		for range 1 + rng.IntN(8) {
			k := 1 + rng.IntN(4)
			want := takeWorkers(a, k, 1)
			var got []int
			got, next = takeFirst(b, k, next)
			if !slices.Equal(want, got) && (len(want) != 0 || len(got) != 0) {
				t.Fatalf("trial %d: takeWorkers %v, takeFirst %v", trial, want, got)
			}
		}
	}
}
