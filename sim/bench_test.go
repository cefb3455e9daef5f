package sim

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/gpusched/gpusched/allocation"
	"github.com/gpusched/gpusched/perfmodel"
	"github.com/gpusched/gpusched/perfmodel/gavel"
	"github.com/gpusched/gpusched/placement/ring"
	"github.com/gpusched/gpusched/topology"
)

// loadTrace reads a whole trace and gives its jobs Gavel job types
// (AssignModels, seed 1), as the simulation table of docs/benchmarks.md does.
func loadTrace(tb testing.TB, path string, read func(io.Reader, string) ([]Job, error)) []Job {
	tb.Helper()
	f, err := os.Open(path)
	if err != nil {
		tb.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	jobs, err := read(f, path)
	if err != nil {
		tb.Fatal(err)
	}
	if err := (&AssignModels{Seed: 1}).Apply(jobs); err != nil {
		tb.Fatal(err)
	}
	return jobs
}

// Whole public traces on a 2,000-GPU heterogeneous cluster (700 V100, 650
// P100, 650 K80), jobs given Gavel models by AssignModels, rates
// extrapolated above 8 GPUs.
func BenchmarkTraces(b *testing.B) {
	traces := []struct {
		name string
		path string
		read func(io.Reader, string) ([]Job, error)
	}{
		{"philly", filepath.Join("testdata", "philly", "philly-jobs.csv"), ReadPhilly},
		{"itp-cluster04", filepath.Join("testdata", "itp", "cluster04.csv"), ReadITP},
	}
	for _, tr := range traces {
		jobs := loadTrace(b, tr.path, tr.read)
		b.Run(tr.name+"/fifo-events", func(b *testing.B) {
			for b.Loop() {
				cfg := EventConfig{Types: []topology.GPUType{topology.V100, topology.P100, topology.K80}, Capacity: []int{700, 650, 650},
					Throughput: perfmodel.Extrapolated{Table: gavel.Simulation()}, Scheduler: EventFIFO{}}
				if _, err := RunEvents(context.Background(), cfg, jobs); err != nil {
					b.Fatal(err)
				}
			}
		})
		for _, pol := range []struct {
			name string
			make func() allocation.Policy
		}{
			{"fifo", func() allocation.Policy { return &allocation.FIFO{Perf: true} }},
			{"gavel", func() allocation.Policy { return &allocation.MaxMinFairness{} }},
		} {
			b.Run(tr.name+"/"+pol.name, func(b *testing.B) {
				for b.Loop() {
					cfg := Config{Types: []topology.GPUType{topology.V100, topology.P100, topology.K80}, Capacity: []int{700, 650, 650},
						Throughput: perfmodel.Extrapolated{Table: gavel.Simulation()}, Policy: pol.make()}
					res, err := Run(context.Background(), cfg, jobs)
					if err != nil {
						b.Fatal(err)
					}
					b.ReportMetric(float64(len(res.Records)), "jobs")
				}
			})
		}
	}
}

// SJF-BCO on Yu et al.'s section 7 setup: 160 jobs, 20 servers.
func BenchmarkSJFBCOPaper(b *testing.B) {
	setup, err := RingPaperSetup(RingPaperConfig{Seed: 1, Servers: 20})
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, err := (ring.SJFBCO{Model: setup.Model, Horizon: 1200}).Schedule(context.Background(), setup.Cluster, setup.Jobs); err != nil {
			b.Fatal(err)
		}
	}
}

// SJF-BCO at scale: 5,000 jobs of the paper's mix on 1,250 servers x 8.
func BenchmarkSJFBCO5000(b *testing.B) {
	setup, err := RingPaperSetup(RingPaperConfig{Seed: 1, Servers: 1250, GPUsPerServer: 8, Jobs: 5000})
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		r, err := (ring.SJFBCO{Model: setup.Model}).Schedule(context.Background(), setup.Cluster, setup.Jobs)
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(r.Runs), "runs")
		b.ReportMetric(float64(r.Makespan), "makespan")
	}
}

// One execution of the 5,000-job setup with list scheduling.
func BenchmarkRingExecutor5000(b *testing.B) {
	setup, err := RingPaperSetup(RingPaperConfig{Seed: 1, Servers: 1250, GPUsPerServer: 8, Jobs: 5000})
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, err := (&ring.Executor{Model: setup.Model, Placer: &ring.ListScheduling{}}).Run(context.Background(), setup.Cluster, setup.Jobs, nil); err != nil {
			b.Fatal(err)
		}
	}
}
