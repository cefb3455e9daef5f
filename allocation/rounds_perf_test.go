package allocation

import (
	"cmp"
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
			es[i] = entry{rank: int32(rng.IntN(ranks)), u: unit{i, -1}}
		}
		want := slices.Clone(es)
		groups := groupByRank(es, ranks)
		var got []entry
		for g, grp := range groups {
			for _, e := range grp {
				if int(e.rank) != g {
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

// entryHeap pops entries in the order of a sort by entryBefore (ties in
// lag and share broken by unit and rank), per type or globally.
func TestEntryHeapOrder(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for trial := range 200 {
		global := trial%2 == 0
		es := make([]entry, rng.IntN(80))
		for i := range es {
			es[i] = entry{u: unit{rng.IntN(20), -1 + rng.IntN(2)*(20+rng.IntN(5))}, rank: int32(rng.IntN(3)),
				lag: float64(rng.IntN(4)), x: float64(rng.IntN(3)) / 2}
		}
		// Units are unique per rank.
		slices.SortFunc(es, func(a, b entry) int {
			return cmp.Or(cmp.Compare(a.u.a, b.u.a), cmp.Compare(a.u.b, b.u.b), cmp.Compare(a.rank, b.rank))
		})
		es = slices.CompactFunc(es, func(a, b entry) bool { return a.u == b.u && a.rank == b.rank })
		want := slices.Clone(es)
		slices.SortFunc(want, func(a, b entry) int {
			switch {
			case entryBefore(&a, &b, global):
				return -1
			case entryBefore(&b, &a, global):
				return 1
			}
			t.Fatalf("trial %d: entries %+v and %+v tie", trial, a, b)
			return 0
		})
		h := &entryHeap{s: es, global: global}
		h.init()
		for i := range want {
			if got := h.pop(); got != want[i] {
				t.Fatalf("trial %d: pop %d is %+v, want %+v", trial, i, got, want[i])
			}
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

// entryCompare is entryBefore as a three-way comparison, on random pairs
// with many ties in every field, per type and globally.
func TestEntryCompare(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	draw := func() entry {
		return entry{u: unit{rng.IntN(4), -1 + rng.IntN(2)*(4+rng.IntN(2))}, rank: int32(rng.IntN(3)),
			lag: float64(rng.IntN(3)), x: float64(rng.IntN(3)) / 2}
	}
	for trial := range 20000 {
		global := trial%2 == 0
		a, b := draw(), draw()
		want := 0
		switch {
		case entryBefore(&a, &b, global):
			want = -1
		case entryBefore(&b, &a, global):
			want = 1
		}
		if got := entryCompare(&a, &b, global); got != want {
			t.Fatalf("trial %d: entryCompare(%+v, %+v, %v) = %d, want %d", trial, a, b, global, got, want)
		}
	}
}
