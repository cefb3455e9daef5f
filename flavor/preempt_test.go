package flavor_test

import (
	"context"
	"testing"

	"github.com/gpusched/gpusched/flavor"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// runningIn returns n running 1-GPU workloads of a queue on its flavor 0,
// IDs from id, created a second apart from arrival, and charges them.
func runningIn(t *testing.T, q *flavor.Quotas, id, queue, n, priority int, arrival float64) []flavor.Workload {
	t.Helper()
	var out []flavor.Workload
	for i := range n {
		out = append(out, flavor.Workload{ID: id + i, Queue: queue, GPUs: 1, Rates: []float64{1}, Priority: priority, Arrival: arrival + float64(i), Flavor: 0})
		require.NoError(t, q.Add(queue, 0, 1))
	}
	return out
}

func whys(res *flavor.Result) []flavor.Why {
	var out []flavor.Why
	for _, d := range res.Decisions {
		out = append(out, d.Why)
	}
	return out
}

// Reclaim: queue a lends its 4 idle nominal V100s to b (nominal 0), whose
// four 1-GPU workloads take them; then a's three 2-GPU workloads arrive.
// Kueue, with a's reclaimWithinCohort Any, would preempt b's workloads to
// give a back its nominal quota, two of them per workload, the most
// recent first: the first two of a's workloads get Preempt, with b's 3
// and 2, then 1 and 0, as victims; the third would exceed a's nominal
// quota and waits. With Kueue's default (Never) none is released.
func TestSteerPreemptReclaims(t *testing.T) {
	steer := func(p flavor.Preemption) (*flavor.Result, []flavor.Workload) {
		t.Helper()
		a := v100Queue("a", "co", 0, 4)
		a.Preemption = p
		q, err := flavor.NewQuotas([]flavor.Queue{a, v100Queue("b", "co", 0, 0)}, 1)
		require.NoError(t, err)
		running := runningIn(t, q, 0, 1, 4, 0, 0)
		var pending []flavor.Workload
		for i := range 3 {
			pending = append(pending, flavor.Workload{ID: 10 + i, Queue: 0, GPUs: 2, Rates: []float64{1}, Arrival: 100 + float64(i), Flavor: -1})
		}
		res, err := (&flavor.Steerer{Types: v100Only}).Steer(context.Background(), 200, q, running, pending)
		require.NoError(t, err)
		return res, pending
	}
	res, _ := steer(flavor.Preemption{})
	assert.NotContains(t, whys(res), flavor.Preempt, "Kueue's default never preempts")
	assert.NotContains(t, whys(res), flavor.Start)

	res, _ = steer(flavor.Preemption{ReclaimWithinCohort: flavor.PreemptAny})
	assert.Equal(t, flavor.Preempt, res.Decisions[0].Why)
	assert.Equal(t, 0, res.Decisions[0].Flavor)
	assert.Equal(t, 0, res.Decisions[0].Type)
	assert.Equal(t, flavor.Victims{IDs: []int{3, 2}, Reclaimed: 2}, res.Decisions[0].Victims)
	assert.Equal(t, flavor.Victims{IDs: []int{1, 0}, Reclaimed: 2}, res.Decisions[1].Victims)
	assert.NotEqual(t, flavor.Preempt, res.Decisions[2].Why, "a's nominal 4 is used: no more to reclaim")
	assert.Equal(t, "preempt", flavor.Preempt.String())

	res, _ = steer(flavor.Preemption{ReclaimWithinCohort: flavor.PreemptLowerPriority})
	assert.NotContains(t, whys(res), flavor.Preempt, "LowerPriority: b's are of equal priority")
}

// Priority: a workload of priority 100000 preempts priority-0 ones of its
// own ClusterQueue (withinClusterQueue LowerPriority), the most recent
// first, as many as its GPUs need; a pending workload of priority 0 does
// not. LowerOrNewerEqualPriority also preempts newer workloads of equal
// priority.
func TestSteerPreemptByPriority(t *testing.T) {
	steer := func(p flavor.Preemption, pending ...flavor.Workload) *flavor.Result {
		t.Helper()
		a := v100Queue("a", "", 0, 4)
		a.Preemption = p
		q, err := flavor.NewQuotas([]flavor.Queue{a}, 1)
		require.NoError(t, err)
		running := runningIn(t, q, 0, 0, 4, 0, 0)
		res, err := (&flavor.Steerer{Types: v100Only}).Steer(context.Background(), 200, q, running, pending)
		require.NoError(t, err)
		return res
	}
	high := flavor.Workload{ID: 10, Queue: 0, GPUs: 2, Rates: []float64{1}, Priority: 100000, Arrival: 100, Flavor: -1}
	low := flavor.Workload{ID: 11, Queue: 0, GPUs: 1, Rates: []float64{1}, Arrival: 50, Flavor: -1}
	res := steer(flavor.Preemption{}, high, low)
	assert.Equal(t, []flavor.Why{flavor.Busy, flavor.Busy}, whys(res), "Kueue's default: both wait for the V100s")

	res = steer(flavor.Preemption{WithinClusterQueue: flavor.PreemptLowerPriority}, high, low)
	assert.Equal(t, flavor.Preempt, res.Decisions[0].Why)
	assert.Equal(t, flavor.Victims{IDs: []int{3, 2}, InQueue: 2}, res.Decisions[0].Victims)
	assert.NotEqual(t, flavor.Preempt, res.Decisions[1].Why, "priority 0 preempts nothing")

	// An older workload of equal priority (it was created before the
	// running ones, e.g. preempted and pending again).
	old := flavor.Workload{ID: 12, Queue: 0, GPUs: 2, Rates: []float64{1}, Arrival: 1.5, Flavor: -1}
	res = steer(flavor.Preemption{WithinClusterQueue: flavor.PreemptLowerPriority}, old)
	assert.NotEqual(t, flavor.Preempt, res.Decisions[0].Why)
	res = steer(flavor.Preemption{WithinClusterQueue: flavor.PreemptLowerOrNewerEqualPriority}, old)
	assert.Equal(t, flavor.Victims{IDs: []int{3, 2}, InQueue: 2}, res.Decisions[0].Victims, "the two created after it")
}

// borrowWithinCohort: queue a (nominal 0) needs to borrow; b borrows the
// pool's 4 V100s with priority-0 workloads. a's priority-100 workload
// preempts two of them while borrowing, only with borrowWithinCohort
// LowerPriority and a threshold b's workloads are within.
func TestSteerPreemptWhileBorrowing(t *testing.T) {
	steer := func(p flavor.Preemption) flavor.Decision {
		t.Helper()
		a := v100Queue("a", "co", 0, 0)
		a.Preemption = p
		q, err := flavor.NewQuotas([]flavor.Queue{a, v100Queue("b", "co", 0, 0), v100Queue("pool", "co", 0, 4)}, 1)
		require.NoError(t, err)
		running := runningIn(t, q, 0, 1, 4, 0, 0)
		pending := []flavor.Workload{{ID: 10, Queue: 0, GPUs: 2, Rates: []float64{1}, Priority: 100, Arrival: 100, Flavor: -1}}
		res, err := (&flavor.Steerer{Types: v100Only}).Steer(context.Background(), 200, q, running, pending)
		require.NoError(t, err)
		return res.Decisions[0]
	}
	d := steer(flavor.Preemption{ReclaimWithinCohort: flavor.PreemptLowerPriority})
	assert.NotEqual(t, flavor.Preempt, d.Why, "2 GPUs above a's nominal 0: no preemption without borrowWithinCohort")
	d = steer(flavor.Preemption{ReclaimWithinCohort: flavor.PreemptLowerPriority, BorrowWithinCohort: flavor.PreemptLowerPriority})
	assert.Equal(t, flavor.Preempt, d.Why)
	assert.Equal(t, flavor.Victims{IDs: []int{3, 2}, WhileBorrowing: 2, Borrowing: true}, d.Victims)
	d = steer(flavor.Preemption{ReclaimWithinCohort: flavor.PreemptLowerPriority, BorrowWithinCohort: flavor.PreemptLowerPriority, HasThreshold: true, MaxPriorityThreshold: -1})
	assert.NotEqual(t, flavor.Preempt, d.Why, "b's priority 0 is above the threshold -1")
}

// A workload that fits on another flavor is admitted there by Kueue
// without preemption (whenCanPreempt TryNextFlavor, the default): with
// the wait rule holding ResNet-50 for the V100s (two lower-priority
// workloads hold them) rather than start it on the free K80s, it stays
// Held; with MayStopSearch Kueue would stop at the V100s and preempt
// there, so it is released for that. Without the wait rule it starts on
// the K80s and nothing is preempted.
func TestSteerPreemptOnlyWithoutRoom(t *testing.T) {
	steer := func(stops bool, patience float64) flavor.Decision {
		t.Helper()
		a := flavor.Queue{Name: "a", Flavors: []flavor.Flavor{fl("v100", 0, 2, none, none), fl("k80", 1, 2, none, none)},
			Preemption: flavor.Preemption{WithinClusterQueue: flavor.PreemptLowerPriority}, PreemptStops: stops}
		q, err := flavor.NewQuotas([]flavor.Queue{a}, 2)
		require.NoError(t, err)
		var running []flavor.Workload
		for i := range 2 {
			running = append(running, flavor.Workload{ID: i, Queue: 0, GPUs: 1, Rates: resnet50, Flavor: 0, Arrival: float64(i)})
			require.NoError(t, q.Add(0, 0, 1))
		}
		pending := []flavor.Workload{{ID: 10, Queue: 0, GPUs: 2, Rates: resnet50, Priority: 100, Arrival: 100, Flavor: -1}}
		res, err := (&flavor.Steerer{Types: twoTypes, Patience: patience}).Steer(context.Background(), 200, q, running, pending)
		require.NoError(t, err)
		return res.Decisions[0]
	}
	d := steer(false, 0)
	assert.Equal(t, flavor.Start, d.Why, "the K80s are free: it starts there, nothing preempted")
	assert.Equal(t, 1, d.Type)
	assert.Equal(t, flavor.Held, steer(false, 1).Why, "TryNextFlavor: Kueue would take the K80s, not preempt")
	d = steer(true, 1)
	assert.Equal(t, flavor.Preempt, d.Why, "MayStopSearch: Kueue preempts on the V100s")
	assert.Equal(t, 0, d.Type)
	assert.Equal(t, flavor.Victims{IDs: []int{1, 0}, InQueue: 2}, d.Victims)
}

func TestPreemptionRefused(t *testing.T) {
	for _, p := range []flavor.Preemption{
		{ReclaimWithinCohort: flavor.PreemptLowerOrNewerEqualPriority},
		{WithinClusterQueue: flavor.PreemptAny},
		{ReclaimWithinCohort: flavor.PreemptAny, BorrowWithinCohort: flavor.PreemptAny},
		{BorrowWithinCohort: flavor.PreemptLowerPriority},
		{ReclaimWithinCohort: 9},
	} {
		q := v100Queue("a", "", 0, 1)
		q.Preemption = p
		_, err := flavor.NewQuotas([]flavor.Queue{q}, 1)
		assert.ErrorIs(t, err, flavor.ErrInvalid, "%+v", p)
	}
}

// Only the workloads in the policy's problem are walked for preemption
// (review of #40): with MaxJobs 4, queue a's 4 running priority-0
// workloads (one aggregate) leave its 10 pending priority-10 ones 3
// places; those 3 are released for preemption, one victim each, and the
// other 7 keep waiting Outside with their number in a's order. Before,
// every pending workload was walked (O(pending x flavors x running) a
// round, unbounded by MaxJobs): the 4th, Outside, was turned into
// Preempt too (4 released, its Rank lost).
func TestSteerPreemptWithinTheProblem(t *testing.T) {
	a := v100Queue("a", "", 0, 4)
	a.Preemption = flavor.Preemption{WithinClusterQueue: flavor.PreemptLowerPriority}
	q, err := flavor.NewQuotas([]flavor.Queue{a}, 1)
	require.NoError(t, err)
	running := runningIn(t, q, 0, 0, 4, 0, 0)
	pending := pendingIn(10, 0, 10, 100)
	for i := range pending {
		pending[i].Priority = 10
	}
	res, err := (&flavor.Steerer{Types: v100Only, Policy: evenPolicy{}, MaxJobs: 4}).Steer(context.Background(), 200, q, running, pending)
	require.NoError(t, err)
	assert.Equal(t, []int{3}, res.Places)
	for i, d := range res.Decisions {
		if i < 3 {
			assert.Equal(t, flavor.Preempt, d.Why, "workload %d", i)
			assert.Equal(t, flavor.Victims{IDs: []int{3 - i}, InQueue: 1}, d.Victims, "workload %d: the most recent first", i)
			continue
		}
		assert.Equal(t, flavor.Outside, d.Why, "workload %d", i)
		assert.Equal(t, i+1, d.Rank, "workload %d", i)
	}
}
