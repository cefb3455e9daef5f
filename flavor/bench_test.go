package flavor_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/gpusched/gpusched/allocation"
	"github.com/gpusched/gpusched/flavor"
	"github.com/gpusched/gpusched/topology"
)

// perfShape is Kueue's own scheduler performance test
// (test/performance/scheduler/configs/baseline/generator.yaml): 5 cohorts
// of 6 ClusterQueues, each with a nominal quota of 20 and a borrowing
// limit of 100, and 500 workloads per queue (350 of 1, 100 of 5 and 50 of
// 20 units, priorities 50, 100 and 200): 15,000 pending workloads over 30
// queues. Here the quota is in GPUs of three flavors (v100, p100, k80,
// nominal 20 each) and the workloads' rates are Gavel's job types'.
func perfShape(b testing.TB) (*flavor.Quotas, []flavor.Workload) {
	var queues []flavor.Queue
	for c := range 5 {
		for i := range 6 {
			q := flavor.Queue{Name: fmt.Sprintf("cq-%d-%d", c, i), Cohort: fmt.Sprintf("cohort-%d", c)}
			for k, n := range []string{"v100", "p100", "k80"} {
				q.Flavors = append(q.Flavors, flavor.Flavor{Name: n, Type: k, Nominal: 20, BorrowingLimit: 100, LendingLimit: flavor.NoLimit})
			}
			queues = append(queues, q)
		}
	}
	q, err := flavor.NewQuotas(queues, 3)
	if err != nil {
		b.Fatal(err)
	}
	rates := [][]float64{{32.35, 35.87, 4.80}, {4.39, 2.62, 0.62}, {5.45, 3.07, 0.98}, {64.74, 58.17, 17.14}, {13.28, 30.74, 20.05}, {7.18, 5.68, 3.44}, {4.43, 2.40, 0.50}}
	r := rand.New(rand.NewPCG(7, 7))
	var pending []flavor.Workload
	for qi := range queues {
		for n := range 500 {
			gpus, pri := 1, 50
			switch {
			case n >= 450:
				gpus, pri = 20, 200
			case n >= 350:
				gpus, pri = 5, 100
			}
			pending = append(pending, flavor.Workload{ID: len(pending), Queue: qi, GPUs: gpus, Rates: flavor.Normalize(rates[r.IntN(len(rates))], 10),
				Priority: pri, Arrival: float64(n), Flavor: -1})
		}
	}
	return q, pending
}

// BenchmarkSteerKueuePerf is one steering round over Kueue's performance
// test shape (15,000 pending workloads, 30 ClusterQueues), with the
// default bound of 2,048 workloads in the policy's problem.
func BenchmarkSteerKueuePerf(b *testing.B) {
	q, pending := perfShape(b)
	for _, c := range []struct {
		name string
		pol  allocation.Policy
	}{{"max-min-fairness", &allocation.MaxMinFairness{}}, {"fifo", &allocation.FIFO{Perf: true}}} {
		b.Run(c.name, func(b *testing.B) {
			s := flavor.Steerer{Types: []topology.GPUType{"v100", "p100", "k80"}, Policy: c.pol}
			for b.Loop() {
				if _, err := s.Steer(context.Background(), 0, q, nil, pending); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkSteerPreemptBacklog is a round of a ClusterQueue that may
// preempt (withinClusterQueue LowerPriority) with a backlog of 20,000
// pending workloads, each of 1,500 GPUs, that no preemption can admit:
// queue a (nominal 2,000 V100s) runs 1,000 priority-0 1-GPU workloads
// and lends the rest of its quota to b's 1,000 (reclaimWithinCohort
// Never), so each walk removes a's 1,000 candidates before it fails.
// Only the 2,046 workloads of the policy's problem are walked (before
// the review of #40, all 20,000).
func BenchmarkSteerPreemptBacklog(b *testing.B) {
	qa := flavor.Queue{Name: "a", Cohort: "co", Flavors: []flavor.Flavor{{Name: "v100", Nominal: 2000, BorrowingLimit: flavor.NoLimit, LendingLimit: flavor.NoLimit}},
		Preemption: flavor.Preemption{WithinClusterQueue: flavor.PreemptLowerPriority}}
	qb := flavor.Queue{Name: "b", Cohort: "co", Flavors: []flavor.Flavor{{Name: "v100", BorrowingLimit: flavor.NoLimit, LendingLimit: flavor.NoLimit}}}
	q, err := flavor.NewQuotas([]flavor.Queue{qa, qb}, 1)
	if err != nil {
		b.Fatal(err)
	}
	var running, pending []flavor.Workload
	for i := range 2000 {
		w := flavor.Workload{ID: i, Queue: i / 1000, GPUs: 1, Rates: []float64{1}, Arrival: float64(i), Flavor: 0}
		if err := q.Add(w.Queue, 0, 1); err != nil {
			b.Fatal(err)
		}
		running = append(running, w)
	}
	for i := range 20000 {
		pending = append(pending, flavor.Workload{ID: 2000 + i, Queue: 0, GPUs: 1500, Rates: []float64{1}, Priority: 10, Arrival: float64(3000 + i), Flavor: -1})
	}
	s := flavor.Steerer{Types: []topology.GPUType{"v100"}, Policy: evenPolicy{}}
	for b.Loop() {
		res, err := s.Steer(context.Background(), 0, q, running, pending)
		if err != nil {
			b.Fatal(err)
		}
		if res.Decisions[0].Why == flavor.Preempt {
			b.Fatal("no preemption admits a workload of 1,500 GPUs here")
		}
	}
}
