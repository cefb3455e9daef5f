package flavor_test

import (
	"errors"
	"testing"

	"github.com/gpusched/gpusched/flavor"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const none = flavor.NoLimit

// fl is a flavor "rf-a" of type 0 with a quota and limits.
func fl(name string, typ, nominal, borrow, lend int) flavor.Flavor {
	return flavor.Flavor{Name: name, Type: typ, Nominal: nominal, BorrowingLimit: borrow, LendingLimit: lend}
}

// The test plan of Kueue's KEP-1224 (lending limits), in a cohort of one
// flavor: how much cq-a can borrow, with and without its borrowing limit,
// when the others lend all or part of their nominal quota. Nominal
// quotas 10 each; cq-b lends at most 4, cq-c at most 3 (when set); cq-a
// borrows at most 5 (when set).
func TestQuotasKEP1224(t *testing.T) {
	cases := []struct {
		name               string
		borrowA, lendB     int
		withC              bool
		lendC              int
		canBorrow          int // what the KEP says cq-a can borrow
		wantPotentialA     int
		wantAvailableAfter int // cq-a's available once cq-b uses all its nominal quota
	}{
		{"b lends 4, a unlimited", none, 4, false, 0, 4, 14, 10},
		{"b lends 4, a borrows at most 5", 5, 4, false, 0, 4, 14, 10},
		{"b lends 4, a borrows at most 3", 3, 4, false, 0, 3, 13, 10},
		{"b lends 4, c all, a unlimited", none, 4, true, none, 14, 24, 20},
		{"b lends 4, c all, a borrows at most 5", 5, 4, true, none, 5, 15, 15},
		{"b lends 4, c 3, a unlimited", none, 4, true, 3, 7, 17, 13},
		{"b lends 4, c 3, a borrows at most 5", 5, 4, true, 3, 5, 15, 13},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			qs := []flavor.Queue{
				{Name: "cq-a", Cohort: "co", Flavors: []flavor.Flavor{fl("rf", 0, 10, c.borrowA, none)}},
				{Name: "cq-b", Cohort: "co", Flavors: []flavor.Flavor{fl("rf", 0, 10, none, c.lendB)}},
			}
			if c.withC {
				qs = append(qs, flavor.Queue{Name: "cq-c", Cohort: "co", Flavors: []flavor.Flavor{fl("rf", 0, 10, none, c.lendC)}})
			}
			q, err := flavor.NewQuotas(qs, 1)
			require.NoError(t, err)
			assert.Equal(t, 10+c.canBorrow, q.Potential(0, 0), "cq-a: its nominal quota and what it can borrow")
			assert.Equal(t, c.wantPotentialA, q.Potential(0, 0))
			assert.Equal(t, q.Potential(0, 0), q.Available(0, 0), "nothing used yet")
			require.NoError(t, q.Add(1, 0, 10))
			assert.Equal(t, c.wantAvailableAfter, q.Available(0, 0), "cq-b uses its own quota, its local part first")
			// cq-b keeps its local quota (nominal - lending limit) even when
			// cq-a borrows all it can.
			require.NoError(t, q.Remove(1, 0, 10))
			require.NoError(t, q.Add(0, 0, q.Available(0, 0)))
			assert.GreaterOrEqual(t, q.Available(1, 0), 10-c.lendB)
			if c.borrowA == none {
				assert.Equal(t, 10-c.lendB, q.Available(1, 0), "cq-a took all that was lent")
			}
		})
	}
}

// Usage flows to the cohort only beyond a queue's local quota, and comes
// back in the same order.
func TestQuotasAccounting(t *testing.T) {
	q, err := flavor.NewQuotas([]flavor.Queue{
		{Name: "a", Cohort: "co", Flavors: []flavor.Flavor{fl("v100", 0, 4, none, 1), fl("k80", 1, 2, none, none)}},
		{Name: "b", Cohort: "co", Flavors: []flavor.Flavor{fl("v100", 0, 4, 2, none)}},
		{Name: "solo", Flavors: []flavor.Flavor{fl("k80", 1, 3, none, none)}},
	}, 2)
	require.NoError(t, err)
	// a keeps 3 V100s to itself and lends 1; b lends its 4.
	assert.Equal(t, 8, q.Potential(0, 0))
	assert.Equal(t, 5, q.Potential(1, 0), "b: its 4 and the 1 a lends (its borrowing limit of 2 is not the bound)")
	assert.Equal(t, 3, q.Potential(2, 0), "no cohort: nominal only")
	require.NoError(t, q.Add(0, 0, 3)) // within a's local quota
	assert.Equal(t, 5, q.Available(1, 0), "b: its 4 and a's lent 1 (up to its limit of 2 more)")
	require.NoError(t, q.Add(1, 0, 5))
	assert.Equal(t, 0, q.Available(0, 0), "a's lent V100 is in use by b")
	assert.Equal(t, 0, q.Available(1, 0))
	require.NoError(t, q.Remove(1, 0, 5))
	assert.Equal(t, 5, q.Available(1, 0))
	assert.Equal(t, 5, q.Available(0, 0))
	require.NoError(t, q.Add(2, 0, 3))
	assert.Equal(t, 0, q.Available(2, 0))
	assert.Equal(t, 2, q.Available(0, 1), "solo's K80s are not in the cohort")
	c := q.Clone()
	require.NoError(t, c.Add(0, 1, 2))
	assert.Equal(t, 2, q.Available(0, 1), "a clone is independent")
	assert.ErrorIs(t, q.Remove(2, 0, 4), flavor.ErrInvalid)
	assert.ErrorIs(t, q.Add(0, 5, 1), flavor.ErrInvalid)
	assert.ErrorIs(t, q.Add(0, 0, -1), flavor.ErrInvalid)
}

// Kueue's walk: flavors in order, those the workload's selector rejects
// skipped, the first with room taken; with whenCanBorrow TryNextFlavor a
// flavor that fits only by borrowing is passed over for a later one that
// fits without.
func TestWalk(t *testing.T) {
	qs := []flavor.Queue{
		{Name: "a", Cohort: "co", Flavors: []flavor.Flavor{fl("v100", 0, 1, none, none), fl("p100", 1, 2, none, none), fl("k80", 2, 4, none, none)}},
		{Name: "b", Cohort: "co", Flavors: []flavor.Flavor{fl("v100", 0, 4, none, none)}},
	}
	q, err := flavor.NewQuotas(qs, 3)
	require.NoError(t, err)
	assert.Equal(t, 0, q.Walk(0, 1, nil), "the first flavor")
	assert.Equal(t, 1, q.Walk(0, 1, func(k int) bool { return k != 0 }), "v100 excluded by the selector")
	assert.Equal(t, 0, q.Walk(0, 2, nil), "2 V100s fit by borrowing one of b's: MayStopSearch takes it")
	assert.Equal(t, 2, q.Walk(0, 3, func(k int) bool { return k == 2 }))
	assert.Equal(t, -1, q.Walk(0, 6, func(k int) bool { return k != 0 }), "fits nowhere")

	qs[0].WhenCanBorrow = flavor.TryNextFlavor
	q, err = flavor.NewQuotas(qs, 3)
	require.NoError(t, err)
	assert.Equal(t, 1, q.Walk(0, 2, nil), "TryNextFlavor: P100s fit without borrowing")
	assert.Equal(t, 0, q.Walk(0, 5, func(k int) bool { return k != 2 }), "no flavor fits without borrowing: the first that fits by borrowing")
	require.NoError(t, q.Add(1, 0, 4))
	assert.Equal(t, 0, q.Walk(0, 1, nil), "a's own V100")
	require.NoError(t, q.Add(0, 0, 1))
	assert.Equal(t, 1, q.Walk(0, 1, nil), "V100s all taken: next flavor")
}

func TestNewQuotasRefuses(t *testing.T) {
	for name, qs := range map[string][]flavor.Queue{
		"two queues of one name":   {{Name: "a"}, {Name: "a"}},
		"a flavor twice":           {{Name: "a", Flavors: []flavor.Flavor{fl("x", 0, 1, none, none), fl("x", 0, 1, none, none)}}},
		"type out of range":        {{Name: "a", Flavors: []flavor.Flavor{fl("x", 3, 1, none, none)}}},
		"negative nominal":         {{Name: "a", Flavors: []flavor.Flavor{fl("x", 0, -1, none, none)}}},
		"borrowing limit below -1": {{Name: "a", Flavors: []flavor.Flavor{fl("x", 0, 1, -2, none)}}},
		"lending limit too large":  {{Name: "a", Flavors: []flavor.Flavor{fl("x", 0, 1, none, flavor.MaxQuota+1)}}},
		"no flavor name":           {{Name: "a", Flavors: []flavor.Flavor{fl("", 0, 1, none, none)}}},
		"negative weight":          {{Name: "a", Weight: -1}},
	} {
		_, err := flavor.NewQuotas(qs, 2)
		assert.True(t, errors.Is(err, flavor.ErrInvalid), "%s: %v", name, err)
	}
}
