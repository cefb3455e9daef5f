package kueue_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// kueuePerfObjects is Kueue's scheduler performance test shape
// (test/performance/scheduler/configs/baseline/generator.yaml) in GPUs: 5
// cohorts of 6 ClusterQueues (nominal 20 of each of three GPU flavors,
// borrowing limit 100), 500 pending Workloads each (350 of 1 GPU, 100 of 5,
// 50 of 20; priorities 50, 100, 200), with Gavel job kinds: 15,000.
func kueuePerfObjects() []*unstructured.Unstructured {
	objs := []*unstructured.Unstructured{flavorObj("v100", v100), flavorObj("p100", p100), flavorObj("k80", k80)}
	kinds := []map[string]string{
		{"gpusched.io/job-kind": "ResNet-50", "gpusched.io/batch-size": "64"},
		{"gpusched.io/job-kind": "Transformer", "gpusched.io/batch-size": "128"},
		{"gpusched.io/job-kind": "A3C"},
		{"gpusched.io/job-kind": "CycleGAN"},
		{"gpusched.io/throughput": "v100=13.28,p100=30.74,k80=20.05"},
	}
	for c := range 5 {
		for i := range 6 {
			name := fmt.Sprintf("cq-%d-%d", c, i)
			objs = append(objs, cqObj(name, fmt.Sprintf("cohort-%d", c), "", quota{"v100", 20, 100, -1}, quota{"p100", 20, 100, -1}, quota{"k80", 20, 100, -1}))
			ns := "ns-" + name
			objs = append(objs, lqObj(ns, "q", name))
			for n := range 500 {
				gpus, pri := 1, 50
				switch {
				case n >= 450:
					gpus, pri = 20, 200
				case n >= 350:
					gpus, pri = 5, 100
				}
				w := wl{ns: ns, name: fmt.Sprintf("w-%03d", n), queue: "q", gpus: 1, count: gpus, ann: kinds[n%len(kinds)], priority: pri, created: int64(n)}
				objs = append(objs, w.objects()[0])
			}
		}
	}
	return objs
}

// BenchmarkRoundKueuePerf is a steering round over 15,000 pending
// Workloads in 30 ClusterQueues, from the informers' stores (a fake API):
// the first round writes the node selectors of the workloads in the
// policy's problem; the benchmark times the rounds after it, which find
// them in place.
func BenchmarkRoundKueuePerf(b *testing.B) {
	c := newCluster(b, nil, kueuePerfObjects()...)
	c.settle()
	first, err := c.ctrl.Round(context.Background())
	require.NoError(b, err)
	require.Equal(b, 15000, first.Pending)
	for b.Loop() {
		if _, err := c.ctrl.Round(context.Background()); err != nil {
			b.Fatal(err)
		}
	}
	// After the loop: b.Loop's start clears metrics reported before it.
	b.ReportMetric(float64(first.Writes), "writes/first-round")
	b.ReportMetric(first.Took.Seconds(), "s/first-round")
}
