package flavor_test

import (
	"context"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/gpusched/gpusched/flavor"
	"github.com/gpusched/gpusched/gang"
	"github.com/gpusched/gpusched/perfmodel"
	"github.com/gpusched/gpusched/perfmodel/gavel"
	"github.com/gpusched/gpusched/sim"
	"github.com/gpusched/gpusched/topology"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Kueue's walk in the event engine: the first flavor with room, in the
// queue's order, whatever the job; a job waits for quota, not for the
// cluster.
func TestKueueDecide(t *testing.T) {
	k := &flavor.Kueue{Queues: []flavor.Queue{
		{Name: "a", Flavors: []flavor.Flavor{fl("v100", 0, 1, none, none), fl("k80", 1, 2, none, none)}},
		{Name: "b", Strict: true, Flavors: []flavor.Flavor{fl("v100", 0, 1, none, none)}},
	}, QueueOf: func(id int) int { return id / 10 }}
	view := func(id int, sf int, arrival float64) gang.JobView {
		return gang.JobView{ID: id, ScaleFactor: sf, Throughput: recommendation, Type: -1, Arrival: arrival}
	}
	waiting := []gang.JobView{view(0, 1, 0), view(1, 1, 1), view(2, 2, 2), view(3, 1, 3), view(10, 2, 0), view(11, 1, 1)}
	d, err := k.Decide(0, []int{4, 4}, waiting, nil)
	require.NoError(t, err)
	assert.Equal(t, []gang.Start{{JobID: 0, Type: 0}, {JobID: 1, Type: 1}, {JobID: 3, Type: 1}}, d.Start,
		"job 2 (2 GPUs) fits no flavor of a once job 1 has a K80; b's first job (2 GPUs) blocks its queue (StrictFIFO)")
	running := []gang.JobView{{ID: 0, ScaleFactor: 1, Throughput: recommendation, Type: 0}}
	d, err = k.Decide(0, []int{3, 4}, []gang.JobView{view(1, 1, 1), view(11, 1, 1)}, running)
	require.NoError(t, err)
	assert.Equal(t, []gang.Start{{JobID: 1, Type: 1}, {JobID: 11, Type: 0}}, d.Start, "a's V100 is taken; b's is free")
	_, err = k.Decide(0, []int{4, 4}, []gang.JobView{view(99, 1, 0)}, nil)
	assert.ErrorIs(t, err, flavor.ErrInvalid, "job of a queue that does not exist")
}

// trace is the comparison's workload: Gavel's single-GPU job types drawn
// at random, Poisson arrivals, 15 minutes to 1.5 hours on the job's fastest
// type, alternating between two tenants.
func trace(n int, perHour float64, seed uint64) []sim.Job {
	tab := gavel.Simulation()
	var keys []perfmodel.JobKey
	for _, k := range tab.Jobs() {
		if k.ScaleFactor == 1 {
			keys = append(keys, k)
		}
	}
	r := rand.New(rand.NewPCG(seed, 30))
	jobs := make([]sim.Job, n)
	at := 0.0
	for i := range jobs {
		k := keys[r.IntN(len(keys))]
		best := 0.0
		for _, t := range tab.GPUTypes() {
			v, _ := tab.Throughput(k, t)
			best = max(best, v)
		}
		at += r.ExpFloat64() / perHour * 3600
		jobs[i] = sim.Job{ID: i, Arrival: at, Key: k, Steps: (0.25 + 1.25*r.Float64()) * 3600 * best}
	}
	return jobs
}

// comparison is the comparison's cluster: two tenants (jobs alternate
// between them) with 4 GPUs of each of V100, P100 and K80, the flavors in
// that order (fastest first).
func comparison() ([]topology.GPUType, []flavor.Queue, func(int) int) {
	types := []topology.GPUType{"v100", "p100", "k80"}
	var queues []flavor.Queue
	for _, n := range []string{"team-a", "team-b"} {
		q := flavor.Queue{Name: n}
		for k, ty := range types {
			q.Flavors = append(q.Flavors, fl(string(ty), k, 4, none, none))
		}
		queues = append(queues, q)
	}
	return types, queues, func(id int) int { return id % 2 }
}

// Two tenants with 4 GPUs of each of V100, P100 and K80 (the flavors in
// that order: fastest first): gpusched's steering of Kueue against Kueue
// alone on 100 jobs. The values are the simulator's, recorded in
// docs/kueue.md.
func TestSteeredAgainstKueue(t *testing.T) {
	types, queues, queueOf := comparison()
	jobs := trace(100, 30, 1)
	run := func(s sim.EventScheduler) sim.Summary {
		res, err := sim.RunEvents(context.Background(), sim.EventConfig{Types: types, Capacity: []int{8, 8, 8}, Throughput: gavel.Simulation(), Scheduler: s}, jobs)
		require.NoError(t, err)
		require.Len(t, res.Records, len(jobs))
		return res.Summarise(0, len(jobs))
	}
	alone := run(&flavor.Kueue{Queues: queues, QueueOf: queueOf})
	steered := run(&flavor.Steered{Queues: queues, QueueOf: queueOf, Types: types})
	t.Logf("kueue alone: mean JCT %.2f h, makespan %.2f h; kueue+gpusched: mean JCT %.2f h, makespan %.2f h",
		alone.MeanJCT/3600, alone.Makespan/3600, steered.MeanJCT/3600, steered.Makespan/3600)
	assert.Less(t, steered.MeanJCT, 0.9*alone.MeanJCT, "gpusched shortens the mean JCT by more than 10%")
	assert.Less(t, steered.Makespan, alone.Makespan)
}

// A Steerer, a Kueue and a Steered are shared by goroutines (run with
// -race).
func TestConcurrentUse(t *testing.T) {
	types := []topology.GPUType{"v100", "k80"}
	queues := []flavor.Queue{{Name: "a", Flavors: []flavor.Flavor{fl("v100", 0, 2, none, none), fl("k80", 1, 2, none, none)}}}
	schedulers := []sim.EventScheduler{&flavor.Kueue{Queues: queues}, &flavor.Steered{Queues: queues, Types: types}}
	st := &flavor.Steerer{Types: types}
	q, err := flavor.NewQuotas(queues, 2)
	require.NoError(t, err)
	jobs := trace(20, 60, 2)
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Go(func() {
			_, err := sim.RunEvents(context.Background(), sim.EventConfig{Types: []topology.GPUType{"v100", "k80"}, Capacity: []int{2, 2},
				Throughput: gavel.Simulation(), Scheduler: schedulers[i%2]}, jobs)
			assert.NoError(t, err)
			_, err = st.Steer(context.Background(), 0, q, nil, []flavor.Workload{pendingJob(0, 0, resnet50, 0)})
			assert.NoError(t, err)
		})
	}
	wg.Wait()
}

// The rule's guarantee (ski rental's break-even): a job that the slow
// type could take on arrival finishes within twice the better of starting
// there and waiting for its fastest type. One V100 and one K80; a 3-hour
// job holds the V100 from 0; ResNet-50 arrives at 1 s with an hour of work
// on a V100 (7.08 hours on the K80). Waiting is better (it finishes at 4
// h); with Patience 1 it waits the 3 hours for the V100 (a wait shorter
// than the 6.08 h break-even), without the rule it ends at 7.08 h. A
// 10-hour job on the V100 instead: it waits the break-even 6.08 h, then
// runs on the K80 to 13.16 h, within twice the best (7.08 h).
func TestSteeredPatienceBound(t *testing.T) {
	types := twoTypes
	queues := []flavor.Queue{{Name: "a", Flavors: []flavor.Flavor{fl("v100", 0, 1, none, none), fl("k80", 1, 1, none, none)}}}
	slow := resnet50[0] / resnet50[1]
	tab := fixedRates{"blocker": {1, 1e-3}, "resnet": resnet50}
	for _, c := range []struct {
		blocker        float64 // hours on the V100
		without, rule  float64 // ResNet-50's finish, hours
		waits, runsK80 bool
	}{
		{3, slow, 4, true, false},
		{10, slow, slow - 1 + slow, true, true},
	} {
		jobs := []sim.Job{
			{ID: 0, Arrival: 0, Key: perfmodel.JobKey{Model: "blocker", ScaleFactor: 1}, Steps: c.blocker * 3600},
			{ID: 1, Arrival: 1, Key: perfmodel.JobKey{Model: "resnet", ScaleFactor: 1}, Steps: 3600 * resnet50[0]},
		}
		finish := func(p float64) (float64, int) {
			res, err := sim.RunEvents(context.Background(), sim.EventConfig{Types: types, Capacity: []int{1, 1}, Throughput: tab,
				Scheduler: &flavor.Steered{Queues: queues, Types: types, Patience: p}}, jobs)
			require.NoError(t, err)
			for _, r := range res.Records {
				if r.ID == 1 {
					typ := 0
					if r.GPUSeconds[1] > 0 {
						typ = 1
					}
					return r.Finish / 3600, typ
				}
			}
			t.Fatal("ResNet-50 did not finish")
			return 0, 0
		}
		end, typ := finish(0)
		assert.InDelta(t, c.without, end, 1e-3, "blocker %g h, no rule", c.blocker)
		assert.Equal(t, 1, typ)
		end, typ = finish(1)
		assert.InDelta(t, c.rule, end, 1e-3, "blocker %g h, patience 1", c.blocker)
		assert.Equal(t, c.runsK80, typ == 1)
		assert.LessOrEqual(t, end, 2*min(c.without, c.blocker+1)+1e-3, "within twice the better choice")
	}
}

// fixedRates is a throughput table by model name, one rate per type.
type fixedRates map[string][]float64

func (f fixedRates) Throughput(k perfmodel.JobKey, t topology.GPUType) (float64, error) {
	for i, ty := range twoTypes {
		if ty == t {
			return f[k.Model][i], nil
		}
	}
	return 0, perfmodel.ErrUnknownJob
}

// The wait rule on the comparison's workload: twelve traces (20, 30 and
// 40 jobs an hour, four seeds each) of 100 jobs, two tenants with 4 GPUs
// of each of V100, P100 and K80. Without the rule a job the policy
// starts on a K80, where it runs many times slower, stays there and often
// ends last; with Patience 1 (remaining work unknown, an hour assumed, as
// the controller does) the makespan falls and the mean JCT with it. The
// values are the simulator's, recorded in docs/kueue.md.
func TestSteeredPatience(t *testing.T) {
	if testing.Short() {
		t.Skip("72 simulations (7 s, minutes under -race): run without -short")
	}
	types, queues, queueOf := comparison()
	var sum [3][2]float64 // alone, steered, patient: mean JCT, makespan (hours)
	better := 0
	others := []float64{0.25, 0.5, 2} // other patiences: mean JCT, largest makespan
	var otherJCT, otherMax [3]float64
	for _, load := range []float64{20, 30, 40} {
		for seed := uint64(1); seed <= 4; seed++ {
			jobs := trace(100, load, seed)
			var row [3][2]float64
			for i, s := range []sim.EventScheduler{
				&flavor.Kueue{Queues: queues, QueueOf: queueOf},
				&flavor.Steered{Queues: queues, QueueOf: queueOf, Types: types},
				&flavor.Steered{Queues: queues, QueueOf: queueOf, Types: types, Patience: 1},
			} {
				res, err := sim.RunEvents(context.Background(), sim.EventConfig{Types: types, Capacity: []int{8, 8, 8}, Throughput: gavel.Simulation(), Scheduler: s}, jobs)
				require.NoError(t, err)
				require.Len(t, res.Records, len(jobs))
				m := res.Summarise(0, len(jobs))
				row[i] = [2]float64{m.MeanJCT / 3600, m.Makespan / 3600}
				sum[i][0] += row[i][0] / 12
				sum[i][1] += row[i][1] / 12
			}
			if row[2][0] <= row[1][0] {
				better++
			}
			for i, p := range others {
				res, err := sim.RunEvents(context.Background(), sim.EventConfig{Types: types, Capacity: []int{8, 8, 8}, Throughput: gavel.Simulation(),
					Scheduler: &flavor.Steered{Queues: queues, QueueOf: queueOf, Types: types, Patience: p}}, jobs)
				require.NoError(t, err)
				m := res.Summarise(0, len(jobs))
				otherJCT[i] += m.MeanJCT / 3600 / 12
				otherMax[i] = max(otherMax[i], m.Makespan/3600)
			}
			t.Logf("| %.0f | %d | %.2f / %.2f | %.2f / %.2f | %.2f / %.2f |", load, seed, row[0][0], row[0][1], row[1][0], row[1][1], row[2][0], row[2][1])
		}
	}
	t.Logf("| mean | | %.2f / %.2f | %.2f / %.2f | %.2f / %.2f |", sum[0][0], sum[0][1], sum[1][0], sum[1][1], sum[2][0], sum[2][1])
	for i, p := range others {
		t.Logf("patience %g: mean JCT %.2f h, largest makespan %.2f h", p, otherJCT[i], otherMax[i])
	}
	assert.Less(t, sum[2][1], 0.7*sum[1][1], "the rule shortens the mean makespan by more than 30%")
	assert.Less(t, sum[2][0], sum[1][0], "and the mean JCT")
	assert.GreaterOrEqual(t, better, 10, "the mean JCT is no worse in 10 of the 12 traces")
}
