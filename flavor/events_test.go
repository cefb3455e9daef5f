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

// Two tenants with 4 GPUs of each of V100, P100 and K80 (the flavors in
// that order: fastest first): gpusched's steering of Kueue against Kueue
// alone on 100 jobs. The values are the simulator's, recorded in
// docs/kueue.md.
func TestSteeredAgainstKueue(t *testing.T) {
	types := []topology.GPUType{"v100", "p100", "k80"}
	var queues []flavor.Queue
	for _, n := range []string{"team-a", "team-b"} {
		q := flavor.Queue{Name: n}
		for k, ty := range types {
			q.Flavors = append(q.Flavors, fl(string(ty), k, 4, none, none))
		}
		queues = append(queues, q)
	}
	queueOf := func(id int) int { return id % 2 }
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
