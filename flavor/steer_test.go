package flavor_test

import (
	"context"
	"testing"

	"github.com/gpusched/gpusched/allocation"
	"github.com/gpusched/gpusched/flavor"
	"github.com/gpusched/gpusched/topology"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var twoTypes = []topology.GPUType{"v100", "k80"}

// Gavel's measured rates (simulation_throughputs.json, steps/s on one GPU),
// v100 then k80: Recommendation (batch size 1024) runs faster on a K80,
// ResNet-50 (batch size 64) seven times faster on a V100.
var (
	recommendation = []float64{13.28, 20.05}
	resnet50       = []float64{4.39, 0.62}
)

func oneEach(t *testing.T, queues ...string) *flavor.Quotas {
	t.Helper()
	var qs []flavor.Queue
	for _, n := range queues {
		qs = append(qs, flavor.Queue{Name: n, Flavors: []flavor.Flavor{fl("v100", 0, 1, none, none), fl("k80", 1, 1, none, none)}})
	}
	q, err := flavor.NewQuotas(qs, 2)
	require.NoError(t, err)
	return q
}

func pendingJob(id, queue int, rates []float64, arrival float64) flavor.Workload {
	return flavor.Workload{ID: id, Queue: queue, GPUs: 1, Rates: rates, Arrival: arrival, Flavor: -1}
}

// Kueue's walk gives the V100, first in the list, to the older
// Recommendation job and the K80 to ResNet-50; Gavel's heterogeneity-aware
// max-min fairness swaps them, which makes both faster.
func TestSteerSwapsTypes(t *testing.T) {
	q := oneEach(t, "a")
	pending := []flavor.Workload{pendingJob(0, 0, recommendation, 0), pendingJob(1, 0, resnet50, 10)}
	assert.Equal(t, 0, q.Walk(0, 1, nil), "Kueue alone: the Recommendation job gets the V100")
	s := flavor.Steerer{Types: twoTypes}
	res, err := s.Steer(context.Background(), 100, q, nil, pending)
	require.NoError(t, err)
	require.Len(t, res.Decisions, 2)
	assert.Equal(t, flavor.Decision{ID: 0, Flavor: 1, Type: 1, Why: flavor.Start, Share: res.Decisions[0].Share, Best: res.Decisions[0].Best}, res.Decisions[0])
	assert.Equal(t, 0, res.Decisions[1].Type)
	assert.Equal(t, flavor.Start, res.Decisions[1].Why)
	// Max-min fairness: the Recommendation job's best alone is the whole
	// K80, 20.05 / ((13.28 + 20.05) / 2) = 1.203 in normalized throughput;
	// ResNet-50 needs 1.203 / (4.39 / ((4.39 + 0.62) / 2)) = 0.687 of the
	// V100 to reach it (any more is optimal too).
	assert.InDelta(t, 1, res.Decisions[0].Share, 1e-3, "the whole K80")
	assert.GreaterOrEqual(t, res.Decisions[1].Share, 0.686)
	assert.Equal(t, 2, res.Considered)
	assert.Equal(t, 0, q.Used(0, 0), "Steer leaves the caller's quotas alone")
}

// A workload whose best type is taken waits for it; the decision names
// the type and says why; the running workload keeps its type.
func TestSteerWaits(t *testing.T) {
	q := oneEach(t, "a")
	require.NoError(t, q.Add(0, 0, 1)) // a job runs on the V100
	running := []flavor.Workload{{ID: 0, Queue: 0, GPUs: 1, Rates: resnet50, Flavor: 0}}
	pending := []flavor.Workload{pendingJob(1, 0, resnet50, 10), pendingJob(2, 0, recommendation, 20)}
	s := flavor.Steerer{Types: twoTypes}
	res, err := s.Steer(context.Background(), 100, q, running, pending)
	require.NoError(t, err)
	assert.Equal(t, flavor.Start, res.Decisions[1].Why, "the Recommendation job takes the free K80")
	assert.Equal(t, 1, res.Decisions[1].Type)
	assert.Equal(t, 0, res.Decisions[0].Type, "ResNet-50 waits for a V100")
	assert.Contains(t, []flavor.Why{flavor.Busy, flavor.NoShare}, res.Decisions[0].Why)
	assert.Equal(t, 0, res.Decisions[0].Flavor)
}

// Higher priority first; MaxJobs keeps the youngest out; a workload no
// flavor can hold is said so.
func TestSteerOrderAndBounds(t *testing.T) {
	q := oneEach(t, "a")
	pending := []flavor.Workload{
		pendingJob(0, 0, resnet50, 0), pendingJob(1, 0, resnet50, 10), pendingJob(2, 0, resnet50, 20),
		{ID: 3, Queue: 0, GPUs: 2, Rates: resnet50, Flavor: -1},
	}
	pending[1].Priority = 5
	s := flavor.Steerer{Types: twoTypes, MaxJobs: 2}
	res, err := s.Steer(context.Background(), 100, q, nil, pending)
	require.NoError(t, err)
	assert.Equal(t, flavor.Start, res.Decisions[1].Why)
	assert.Equal(t, 0, res.Decisions[1].Type, "the high-priority job gets the V100")
	assert.Equal(t, flavor.Start, res.Decisions[0].Why)
	assert.Equal(t, 1, res.Decisions[0].Type, "the oldest the K80")
	assert.Equal(t, flavor.Outside, res.Decisions[2].Why)
	assert.Equal(t, -1, res.Decisions[2].Flavor)
	assert.Equal(t, flavor.NoFlavor, res.Decisions[3].Why, "2 GPUs: no flavor has 2")
	assert.Equal(t, 2, res.Considered)
}

// Without a cohort a ClusterQueue cannot use another's quota, whatever
// the policy wants; in a cohort it borrows.
func TestSteerQuotasPerQueue(t *testing.T) {
	q := oneEach(t, "a", "b")
	pending := []flavor.Workload{pendingJob(0, 0, resnet50, 0), pendingJob(1, 0, resnet50, 10), pendingJob(2, 0, resnet50, 20)}
	s := flavor.Steerer{Types: twoTypes}
	res, err := s.Steer(context.Background(), 100, q, nil, pending)
	require.NoError(t, err)
	started := 0
	for _, d := range res.Decisions {
		if d.Why == flavor.Start {
			started++
		}
	}
	assert.Equal(t, 2, started, "queue a has two GPUs; b's are not a's")

	qs := []flavor.Queue{
		{Name: "a", Cohort: "co", Flavors: []flavor.Flavor{fl("v100", 0, 1, none, none), fl("k80", 1, 1, none, none)}},
		{Name: "b", Cohort: "co", Flavors: []flavor.Flavor{fl("v100", 0, 1, none, none), fl("k80", 1, 1, none, none)}},
	}
	qc, err := flavor.NewQuotas(qs, 2)
	require.NoError(t, err)
	res, err = s.Steer(context.Background(), 100, qc, nil, pending)
	require.NoError(t, err)
	for i, d := range res.Decisions {
		assert.Equal(t, flavor.Start, d.Why, "job %d borrows from b", i)
	}
}

// The ClusterQueues are the policy's entities, with their fair-sharing
// weights: under hierarchical water-filling a queue of weight 3 gets three
// times the normalized throughput of one of weight 1.
func TestSteerWeights(t *testing.T) {
	qs := []flavor.Queue{
		{Name: "a", Cohort: "co", Weight: 3, Flavors: []flavor.Flavor{fl("v100", 0, 1, none, none), fl("k80", 1, 1, none, none)}},
		{Name: "b", Cohort: "co", Weight: 1, Flavors: []flavor.Flavor{fl("v100", 0, 1, none, none), fl("k80", 1, 1, none, none)}},
	}
	q, err := flavor.NewQuotas(qs, 2)
	require.NoError(t, err)
	pending := []flavor.Workload{pendingJob(0, 0, resnet50, 0), pendingJob(1, 0, resnet50, 0), pendingJob(2, 1, resnet50, 0), pendingJob(3, 1, resnet50, 0)}
	s := flavor.Steerer{Types: twoTypes, Policy: &allocation.WaterFilling{Hierarchical: true}}
	res, err := s.Steer(context.Background(), 100, q, nil, pending)
	require.NoError(t, err)
	x := res.Allocation.X
	tput := func(queue int) float64 { // normalized, as the policy measures it
		v := 0.0
		for _, m := range []int{2 * queue, 2*queue + 1} {
			v += (x[m][0]*resnet50[0] + x[m][1]*resnet50[1]) / ((resnet50[0] + resnet50[1]) / 2)
		}
		return v
	}
	assert.InDelta(t, 3, tput(0)/tput(1), 0.05)
	started := map[int]int{}
	for _, d := range res.Decisions {
		if d.Why == flavor.Start {
			started[d.Type]++
		}
	}
	assert.Equal(t, map[int]int{0: 2, 1: 2}, started, "four GPUs, four jobs")
}

func TestSteerRefuses(t *testing.T) {
	q := oneEach(t, "a")
	s := flavor.Steerer{Types: twoTypes}
	for name, c := range map[string]struct{ run, pend []flavor.Workload }{
		"duplicate ID":     {pend: []flavor.Workload{pendingJob(0, 0, resnet50, 0), pendingJob(0, 0, resnet50, 0)}},
		"unknown queue":    {pend: []flavor.Workload{pendingJob(0, 3, resnet50, 0)}},
		"one rate":         {pend: []flavor.Workload{pendingJob(0, 0, []float64{1}, 0)}},
		"negative rate":    {pend: []flavor.Workload{pendingJob(0, 0, []float64{-1, 1}, 0)}},
		"no GPUs":          {pend: []flavor.Workload{{ID: 0, Rates: resnet50, Flavor: -1}}},
		"pending flavor":   {pend: []flavor.Workload{{ID: 0, GPUs: 1, Rates: resnet50, Flavor: 0}}},
		"running nowhere":  {run: []flavor.Workload{{ID: 0, GPUs: 1, Rates: resnet50, Flavor: -1}}},
		"running flavor 9": {run: []flavor.Workload{{ID: 0, GPUs: 1, Rates: resnet50, Flavor: 9}}},
	} {
		_, err := s.Steer(context.Background(), 0, q, c.run, c.pend)
		assert.ErrorIs(t, err, flavor.ErrInvalid, name)
	}
	_, err := (&flavor.Steerer{Types: []topology.GPUType{"v100"}}).Steer(context.Background(), 0, q, nil, nil)
	assert.ErrorIs(t, err, flavor.ErrInvalid, "quotas over other types")
}
