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

// The wait rule: ResNet-50 runs 4.39/0.62 = 7.08 times faster on a V100
// than on a K80. With the V100 taken, max-min fairness would start it on
// the free K80 at once, for its life; with Patience 1 it waits for the
// V100 as long as the K80 would cost it: T * (7.08 - 1), T its time left
// on the V100 (an hour when unknown: 21,890 s). The K80 goes meanwhile to
// a job that is fastest there.
func TestSteerPatience(t *testing.T) {
	loss := 3600 * (resnet50[0]/resnet50[1] - 1)
	require.InDelta(t, 21890.3, loss, 0.1)
	steer := func(s flavor.Steerer, now float64, pending ...flavor.Workload) []flavor.Decision {
		t.Helper()
		q := oneEach(t, "a")
		require.NoError(t, q.Add(0, 0, 1)) // a job runs on the V100
		running := []flavor.Workload{{ID: 0, Queue: 0, GPUs: 1, Rates: resnet50, Flavor: 0}}
		res, err := s.Steer(context.Background(), now, q, running, pending)
		require.NoError(t, err)
		return res.Decisions
	}
	resnet := pendingJob(1, 0, resnet50, 100)
	d := steer(flavor.Steerer{Types: twoTypes}, 200, resnet)
	assert.Equal(t, flavor.Start, d[0].Why, "without the rule it takes the K80")
	assert.Equal(t, 1, d[0].Type)

	s := flavor.Steerer{Types: twoTypes, Patience: 1}
	d = steer(s, 200, resnet)
	assert.Equal(t, flavor.Held, d[0].Why)
	assert.Equal(t, 0, d[0].Type, "it waits for the V100")
	assert.Equal(t, 0, d[0].Flavor)
	assert.Equal(t, 1, d[0].HeldFrom)
	assert.InDelta(t, 100+loss, d[0].Until, 1e-6)
	assert.Equal(t, "held", d[0].Why.String())
	d = steer(s, 100+loss-1, resnet)
	assert.Equal(t, flavor.Held, d[0].Why, "a second before its time")
	d = steer(s, 100+loss, resnet)
	assert.Equal(t, flavor.Start, d[0].Why, "its wait has cost what the K80 would")
	assert.Equal(t, 1, d[0].Type)
	assert.Zero(t, d[0].Until)

	// Half the patience, half the wait; a known remaining work (10
	// minutes on the V100) scales it too.
	d = steer(flavor.Steerer{Types: twoTypes, Patience: 0.5}, 200, resnet)
	assert.InDelta(t, 100+loss/2, d[0].Until, 1e-6)
	short := resnet
	short.Remaining = 600 * resnet50[0]
	d = steer(s, 200, short)
	assert.InDelta(t, 100+loss/6, d[0].Until, 1e-6)
	d = steer(flavor.Steerer{Types: twoTypes, Patience: 1, Duration: 600}, 200, resnet)
	assert.InDelta(t, 100+loss/6, d[0].Until, 1e-6, "Duration stands in for the unknown")

	// A job on its fastest type is never held: the K80 goes to the
	// Recommendation job, and ResNet-50 waits for the V100.
	d = steer(s, 200, resnet, pendingJob(2, 0, recommendation, 150))
	assert.Contains(t, []flavor.Why{flavor.Held, flavor.Busy}, d[0].Why)
	assert.Equal(t, 0, d[0].Type)
	assert.Equal(t, flavor.Decision{ID: 2, Flavor: 1, Type: 1, Why: flavor.Start, Share: d[1].Share, Best: d[1].Best}, d[1])
}

// An idle ClusterQueue's quota is no capacity for the others: without a
// cohort queue a can use only its own V100, so the policy's shares of the
// V100 add up to one GPU, not to the two the queues' quotas hold (with
// two, max-min fairness gave both ResNet-50 jobs the V100 for all their
// time, and the workload it could not start waited for a V100 that queue
// a would never have).
func TestSteerIdleQueueNoCapacity(t *testing.T) {
	q := oneEach(t, "a", "b")
	pending := []flavor.Workload{pendingJob(0, 0, resnet50, 0), pendingJob(1, 0, resnet50, 10)}
	res, err := (&flavor.Steerer{Types: twoTypes}).Steer(context.Background(), 100, q, nil, pending)
	require.NoError(t, err)
	v100 := 0.0
	for _, x := range res.Allocation.X {
		v100 += x[0]
	}
	assert.InDelta(t, 1, v100, 1e-6, "queue a's one V100")
	assert.Equal(t, flavor.Start, res.Decisions[0].Why)
	assert.Equal(t, flavor.Start, res.Decisions[1].Why, "the other takes the K80: queue b's V100 is not a's")
}

// fixedPolicy allocates the shares it is given, in the problem's job
// order (running workloads first).
type fixedPolicy [][]float64

func (f fixedPolicy) Allocate(_ context.Context, p *allocation.Problem) (*allocation.Allocation, error) {
	ids := make([]int, len(p.Jobs))
	for i, j := range p.Jobs {
		ids[i] = j.ID
	}
	return &allocation.Allocation{Types: p.Types, JobIDs: ids, X: f}, nil
}

// With three types a held workload is held from the slower type whose
// wait ends first, and waits for the types faster than that one: rates
// 1, 0.5 and 0.14 on V100, P100 and K80, the V100 taken, a larger share
// of the K80 than of the P100. Its P100 wait (an hour times 1) ends
// before its K80 wait (an hour times 6.14): held from the P100 until
// 3,600 s, waiting for the V100; at 3,600 s it starts on the P100.
func TestSteerHeldFromSoonest(t *testing.T) {
	types := []topology.GPUType{"v100", "p100", "k80"}
	q, err := flavor.NewQuotas([]flavor.Queue{{Name: "a", Flavors: []flavor.Flavor{
		fl("v100", 0, 1, none, none), fl("p100", 1, 1, none, none), fl("k80", 2, 1, none, none)}}}, 3)
	require.NoError(t, err)
	require.NoError(t, q.Add(0, 0, 1))
	rates := []float64{1, 0.5, 0.14}
	running := []flavor.Workload{{ID: 0, Queue: 0, GPUs: 1, Rates: rates, Flavor: 0}}
	pending := []flavor.Workload{pendingJob(1, 0, rates, 0)}
	s := flavor.Steerer{Types: types, Patience: 1, Policy: fixedPolicy{{1, 0, 0}, {0, 0.3, 0.7}}}
	res, err := s.Steer(context.Background(), 100, q, running, pending)
	require.NoError(t, err)
	d := res.Decisions[0]
	assert.Equal(t, flavor.Held, d.Why)
	assert.Equal(t, 1, d.HeldFrom, "the P100's wait ends first")
	assert.InDelta(t, 3600, d.Until, 1e-6)
	assert.Equal(t, 0, d.Type, "it waits for the V100, the only type faster than the P100")
	res, err = s.Steer(context.Background(), 3600, q, running, pending)
	require.NoError(t, err)
	assert.Equal(t, flavor.Start, res.Decisions[0].Why)
	assert.Equal(t, 1, res.Decisions[0].Type)
}
