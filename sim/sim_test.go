package sim

import (
	"bytes"
	"context"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpusched/gpusched/allocation"
	"github.com/gpusched/gpusched/perfmodel"
	"github.com/gpusched/gpusched/perfmodel/gavel"
	"github.com/gpusched/gpusched/topology"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// unitRates runs every job at 1 step/s on every type.
type unitRates struct{}

func (unitRates) Throughput(perfmodel.JobKey, topology.GPUType) (float64, error) { return 1, nil }

func job(id int, arrival, steps float64) Job {
	return Job{ID: id, Arrival: arrival, Steps: steps, Key: perfmodel.JobKey{Model: "m", ScaleFactor: 1}, Weight: 1}
}

// By hand, one GPU, rounds of 360 s, jobs A (720 steps) and B (360 steps)
// at 1 step/s arriving together. Max-min gives each half: A runs first (tie
// on priority, lower ID), then B (never ran), then A again: B ends at 720 s,
// A at 1080 s.
func TestSimByHand(t *testing.T) {
	cfg := Config{Types: []topology.GPUType{"a"}, Capacity: []int{1}, Throughput: unitRates{}, Policy: &allocation.MaxMinFairness{}}
	res, err := Run(context.Background(), cfg, []Job{job(0, 0, 720), job(1, 0, 360)})
	require.NoError(t, err)
	require.Len(t, res.Records, 2)
	assert.InDelta(t, 1080, res.Records[0].Finish, 1e-6)
	assert.InDelta(t, 720, res.Records[1].Finish, 1e-6)
	assert.Equal(t, 1, res.Records[0].Preemptions)
	assert.Equal(t, 3, res.Rounds)
	s := res.Summarise(0, 0)
	assert.InDelta(t, 900, s.MeanJCT, 1e-6)
	assert.InDelta(t, 1080, s.Makespan, 1e-6)
	assert.InDelta(t, 1, s.Utilisation, 1e-9)
	assert.InDelta(t, 180, s.MeanQueueing, 1e-6)
	// Job 1 always shared the GPU with one other job: N = 2, an isolated
	// half GPU takes 720 s for its 360 steps, rho = 1. Job 0 had company for
	// 720 of its 1080 s: N = 1800/1080 = 5/3, isolated time 720 * 5/3 s,
	// rho = 0.9.
	assert.InDelta(t, 720, res.Records[1].Isolated, 1e-6)
	assert.InDelta(t, 1, res.Records[1].Rho(), 1e-9)
	assert.InDelta(t, 720*5.0/3, res.Records[0].Isolated, 1e-6)
	assert.InDelta(t, 1080/(720*5.0/3), res.Records[0].Rho(), 1e-9)
	assert.InDelta(t, 1.0, s.MaxRho, 1e-9)
	assert.InDelta(t, 0, s.RhoAbove1, 1e-9)

	// FIFO recomputing at every change: A then B.
	cfg.Policy, cfg.MinResetInterval = &allocation.FIFO{Perf: true}, -1
	res, err = Run(context.Background(), cfg, []Job{job(0, 0, 720), job(1, 0, 360)})
	require.NoError(t, err)
	assert.InDelta(t, 720, res.Records[0].Finish, 1e-6)
	assert.InDelta(t, 1080, res.Records[1].Finish, 1e-6)

	// A job that arrives later waits for the round boundary.
	res, err = Run(context.Background(), cfg, []Job{job(0, 0, 100), job(1, 50, 100)})
	require.NoError(t, err)
	assert.InDelta(t, 100, res.Records[0].Finish, 1e-6)
	assert.InDelta(t, 200, res.Records[1].Finish, 1e-6, "job 1 starts when the round of job 0 ends")
}

// Every job finishes exactly once, after it could have at best, and no
// type is used beyond its capacity over the run.
func TestSimInvariants(t *testing.T) {
	w := &GavelWorkload{Rate: 30, MultiGPU: true, Seed: 1}
	jobs, err := w.Generate(80)
	require.NoError(t, err)
	for i := range jobs {
		jobs[i].Steps = math.Max(1, jobs[i].Steps/20) // keep the test short
	}
	types := []topology.GPUType{topology.K80, topology.P100, topology.V100}
	tab := gavel.Simulation()
	for _, c := range []struct {
		name string
		pol  allocation.Policy
		ss   bool
	}{
		{"las", &allocation.MaxMinFairness{Agnostic: true}, false},
		{"gavel", &allocation.MaxMinFairness{}, false},
		{"gavel-ss", &allocation.MaxMinFairness{SpaceSharing: true}, true},
		{"fifo", &allocation.FIFO{Perf: true}, false},
		{"ftf", &allocation.FinishTimeFairness{}, false},
		{"gandiva", &allocation.Gandiva{}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := Config{Types: types, Capacity: []int{8, 8, 8}, Policy: c.pol}
			if c.ss {
				cfg.Colocation = tab
			}
			res, err := Run(context.Background(), cfg, jobs)
			require.NoError(t, err)
			require.Len(t, res.Records, len(jobs)-len(res.Unschedulable))
			seen := map[int]bool{}
			used := make([]float64, len(types))
			for _, r := range res.Records {
				require.False(t, seen[r.ID], "job %d twice", r.ID)
				seen[r.ID] = true
				require.GreaterOrEqual(t, r.Start, r.Arrival)
				best := 0.0
				for _, gt := range types {
					v, err := tab.Throughput(r.Key, gt)
					require.NoError(t, err)
					best = math.Max(best, v)
				}
				assert.GreaterOrEqual(t, r.JCT(), r.Steps/best*(1-1e-9)-1e-6, "job %d", r.ID)
				for k, g := range r.GPUSeconds {
					used[k] += g
				}
			}
			for k := range types {
				assert.LessOrEqual(t, used[k], float64(cfg.Capacity[k])*res.End*(1+1e-9)+1e-6, "%s", types[k])
			}
			s := res.Summarise(10, 70)
			assert.Equal(t, 60, s.Jobs)
			assert.Positive(t, s.MeanJCT)
			assert.LessOrEqual(t, s.Utilisation, 1+1e-9)
		})
	}
}

func TestSimErrors(t *testing.T) {
	cfg := Config{Types: []topology.GPUType{"a"}, Capacity: []int{1}, Throughput: unitRates{}, Policy: &allocation.MaxMinFairness{}}
	_, err := Run(context.Background(), cfg, []Job{job(0, 0, 10), job(0, 0, 10)})
	assert.ErrorContains(t, err, "job ID 0 appears twice")
	_, err = Run(context.Background(), cfg, []Job{job(0, 0, 0)})
	assert.ErrorContains(t, err, "steps 0")
	_, err = Run(context.Background(), Config{Types: []topology.GPUType{"a"}}, nil)
	assert.ErrorContains(t, err, "1 GPU types and 0 capacities")
	// A job too wide for the cluster is reported, not simulated.
	wide := job(1, 0, 10)
	wide.Key.ScaleFactor = 4
	res, err := Run(context.Background(), cfg, []Job{job(0, 0, 10), wide})
	require.NoError(t, err)
	assert.Len(t, res.Records, 1)
	assert.Len(t, res.Unschedulable, 1)
	// Unknown job types in the throughput model.
	cfg.Throughput = gavel.Simulation()
	_, err = Run(context.Background(), cfg, []Job{job(0, 0, 10)})
	assert.ErrorIs(t, err, perfmodel.ErrUnknownGPUType)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	cfg.Throughput = unitRates{}
	_, err = Run(ctx, cfg, []Job{job(0, 0, 10)})
	assert.ErrorIs(t, err, context.Canceled)
}

func TestGavelWorkload(t *testing.T) {
	w := &GavelWorkload{Rate: 6, MultiGPU: true, Seed: 0}
	jobs, err := w.Generate(20000)
	require.NoError(t, err)
	sf := map[int]float64{}
	long := 0.0
	for i, j := range jobs {
		sf[j.Key.ScaleFactor]++
		assert.GreaterOrEqual(t, j.Duration, 60*math.Pow(10, 1.5)*(1-1e-12))
		assert.LessOrEqual(t, j.Duration, 60*1e4)
		if j.Duration > 60*1000 {
			long++
		}
		if i > 0 {
			assert.GreaterOrEqual(t, j.Arrival, jobs[i-1].Arrival)
		}
		if j.Key.ScaleFactor > 1 {
			assert.Contains(t, []string{"ResNet-18", "ResNet-50", "Transformer", "LM"}, j.Key.Model)
		}
	}
	n := float64(len(jobs))
	assert.InDelta(t, 0.70, sf[1]/n, 0.015)
	assert.InDelta(t, 0.10, sf[2]/n, 0.01)
	assert.InDelta(t, 0.15, sf[4]/n, 0.01)
	assert.InDelta(t, 0.05, sf[8]/n, 0.01)
	assert.InDelta(t, 0.2, long/n, 0.015, "long jobs")
	meanGap := jobs[len(jobs)-1].Arrival / (n - 1)
	assert.InDelta(t, 600, meanGap, 20, "6 jobs/h")
	// Steps are the duration at the V100 rate.
	v, err := gavel.Simulation().Throughput(jobs[5].Key, topology.V100)
	require.NoError(t, err)
	assert.InDelta(t, jobs[5].Duration*v, jobs[5].Steps, 1)
	again, err := w.Generate(100)
	require.NoError(t, err)
	assert.Equal(t, jobs[:100], again)
	// Static: all at time 0.
	static, err := (&GavelWorkload{}).Generate(10)
	require.NoError(t, err)
	for _, j := range static {
		assert.Zero(t, j.Arrival)
		assert.Equal(t, 1, j.Key.ScaleFactor)
	}
	_, err = (&GavelWorkload{Rate: -1}).Generate(10)
	assert.Error(t, err)
}

const gavelTrace = "ResNet-18 (batch size 128)\tpython3 main.py --batch_size 128\timage_classification/cifar10\t--num_steps\t1\t925982\t4\t1\t-1.000000\t0\n" +
	"A3C\tpython3 main.py\trl\t--max-steps\t0\t5000\t1\t5\t7200\t30.5\n"

func TestReadGavelTrace(t *testing.T) {
	jobs, err := ReadGavelTrace(strings.NewReader(gavelTrace), "t.trace")
	require.NoError(t, err)
	require.Len(t, jobs, 2)
	assert.Equal(t, Job{ID: 0, Arrival: 0, Key: perfmodel.JobKey{Model: "ResNet-18", BatchSize: 128, ScaleFactor: 4}, Steps: 925982, Weight: 1}, jobs[0])
	assert.Equal(t, Job{ID: 1, Arrival: 30.5, Key: perfmodel.JobKey{Model: "A3C", ScaleFactor: 1}, Steps: 5000, Weight: 5, SLO: 7200}, jobs[1])

	bad := []struct{ row, msg string }{
		{"a\tb\tc", "3 tab-separated columns"},
		{"ResNet-18 (batch size 128)\tc\td\te\t1\tx\t4\t1\t-1\t0", "total_steps"},
		{"ResNet-18 (batch size 128)\tc\td\te\t1\t10\t0\t1\t-1\t0", "scale_factor"},
		{"ResNet-18 (batch size x)\tc\td\te\t1\t10\t1\t1\t-1\t0", "job_type"},
		{"ResNet-18 (batch size 128)\tc\td\te\t1\t10\t1\t0\t-1\t0", "priority_weight"},
		{"ResNet-18 (batch size 128)\tc\td\te\t1\t10\t1\t1\t-5\t0", "SLO"},
		{"ResNet-18 (batch size 128)\tc\td\te\t1\t10\t1\t1\t-1\tNaN", "arrival_time"},
	}
	for _, b := range bad {
		_, err := ReadGavelTrace(strings.NewReader(gavelTrace+"\n"+b.row+"\n"), "t.trace")
		assert.ErrorIs(t, err, ErrMalformedTrace)
		assert.ErrorContains(t, err, "t.trace:4: ")
		assert.ErrorContains(t, err, b.msg)
	}
}

func FuzzReadGavelTrace(f *testing.F) {
	f.Add(gavelTrace)
	f.Add("a\tb")
	f.Fuzz(func(t *testing.T, s string) {
		jobs, err := ReadGavelTrace(strings.NewReader(s), "fuzz")
		if err != nil {
			if !strings.HasPrefix(err.Error(), "sim: ") {
				t.Fatalf("error without prefix: %v", err)
			}
			return
		}
		for _, j := range jobs {
			if !(j.Steps > 0) || j.Arrival < 0 || j.Key.ScaleFactor < 1 || math.IsNaN(j.Arrival) {
				t.Fatalf("bad job accepted: %+v", j)
			}
		}
	})
}

// Gavel's own traces load, and every job runs on Gavel's throughput table.
func TestGavelPhysicalTraces(t *testing.T) {
	want := map[string]int{"max_min_fairness.trace": 96, "minimize_makespan.trace": 100, "artifact_evaluation.trace": 15}
	for name, n := range want {
		data, err := os.ReadFile(filepath.Join("testdata", "gavel", name))
		require.NoError(t, err)
		jobs, err := ReadGavelTrace(bytes.NewReader(data), name)
		require.NoError(t, err)
		require.Len(t, jobs, n, name)
		cfg := Config{Types: []topology.GPUType{topology.K80, topology.P100, topology.V100}, Capacity: []int{16, 16, 16}, Policy: &allocation.MaxMinFairness{}}
		for i := range jobs {
			jobs[i].Steps = math.Max(1, jobs[i].Steps/100) // keep the test short
		}
		res, err := Run(context.Background(), cfg, jobs)
		require.NoError(t, err)
		assert.Len(t, res.Records, n, name)
	}
}
