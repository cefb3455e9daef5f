package scheduler

import (
	"testing"

	"github.com/gpusched/gpusched/allocation"
	"github.com/gpusched/gpusched/topology"
)

// Restore never panics, and what it accepts leaves a scheduler that runs
// a round and snapshots again.
func FuzzRestore(f *testing.F) {
	c, err := topology.ParseCompact("v100:4:2,k80:2:2", 2)
	if err != nil {
		f.Fatal(err)
	}
	seed, err := New(Config{Policy: &allocation.MaxMinFairness{}, Cluster: c})
	if err != nil {
		f.Fatal(err)
	}
	_ = seed.Submit("a", JobSpec{GPUs: 2, Throughput: map[topology.GPUType]float64{"v100": 2, "k80": 1}, RemainingSteps: 10}, 0)
	_ = seed.Submit("b", JobSpec{GPUs: 1, MaxGPUs: 2, Throughput: map[topology.GPUType]float64{"v100": 1}, Priority: 3, Gang: "g"}, 1)
	if _, err := seed.Round(ctx, 5); err != nil {
		f.Fatal(err)
	}
	data, err := seed.Snapshot()
	if err != nil {
		f.Fatal(err)
	}
	f.Add(data)
	f.Add([]byte(`{"version":1,"next_id":2,"jobs":[{"key":"x","id":1,"spec":{"gpus":1,"throughput":{"v100":1}}}],"leases":[{"jobs":["x"],"type":"v100","devices":[{"server":"v100-0","index":0},{"server":"v100-0","index":0}]}]}`))
	f.Add([]byte(`{"version":1,"failed":[{"server":"k80-0","index":7}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := New(Config{Policy: &allocation.MaxMinFairness{}, Cluster: c})
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Restore(data); err != nil {
			return
		}
		if _, err := s.Round(ctx, 1e6); err != nil {
			t.Fatalf("a restored scheduler fails its round: %v", err)
		}
		if _, err := s.Snapshot(); err != nil {
			t.Fatal(err)
		}
		s.View(func(st *ClusterView) {
			if err := st.Check(); err != nil {
				t.Fatal(err)
			}
		})
	})
}
