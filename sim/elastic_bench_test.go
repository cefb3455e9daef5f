package sim

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/gpusched/gpusched/elastic"
)

// Lyra's configuration with loaning and scaling on the whole ITP cluster 04
// trace (15,802 jobs over 59 days) on 64 training and 64 inference
// servers of 8 GPUs, half the jobs elastic.
func BenchmarkElasticLyraITP(b *testing.B) {
	f, err := os.Open(filepath.Join("testdata", "itp", "cluster04.csv"))
	if err != nil {
		b.Fatal(err)
	}
	trace, err := ReadITP(f, "cluster04.csv")
	_ = f.Close()
	if err != nil {
		b.Fatal(err)
	}
	jobs, err := ElasticSpec{Fraction: 0.5, MinFactor: 0.5, MaxFactor: 2, MaxWorkers: 512, Seed: 1}.Jobs(trace)
	if err != nil {
		b.Fatal(err)
	}
	cfg := ElasticConfig{TrainingServers: 64, GPUsPerServer: 8, InferenceServers: 64, Headroom: 0.02, RestartOverhead: 30,
		Usage: Diurnal{Mean: 0.7, Amplitude: 0.25, Noise: 0.05, Peak: 14 * 3600, Seed: 1}, Policy: elastic.Lyra{}}
	for b.Loop() {
		if _, err := RunElastic(context.Background(), cfg, jobs); err != nil {
			b.Fatal(err)
		}
	}
}

// Pollux's workload 1 (160 jobs) under the Pollux-style policy, called
// every 60 s.
func BenchmarkElasticPolluxWorkload(b *testing.B) {
	fsys := os.DirFS(filepath.Join("testdata", "pollux"))
	apps := map[string]*PolluxApp{}
	for _, n := range PolluxApps {
		a, err := LoadPolluxApp(fsys, "app-profiles", n)
		if err != nil {
			b.Fatal(err)
		}
		apps[n] = a
	}
	f, err := fsys.Open("workloads/workload-1.csv")
	if err != nil {
		b.Fatal(err)
	}
	trace, err := ReadPollux(f, "workload-1.csv")
	_ = f.Close()
	if err != nil {
		b.Fatal(err)
	}
	cfg := ElasticConfig{TrainingServers: 16, GPUsPerServer: 4, RestartOverhead: 30, ChargeStart: true, EveryInterval: true, Pack: true, Policy: elastic.Pollux{}}
	for b.Loop() {
		b.StopTimer()
		jobs, err := PolluxJobs(trace, apps, 4, 64, true, false)
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		if _, err := RunElastic(context.Background(), cfg, jobs); err != nil {
			b.Fatal(err)
		}
	}
}
