package sim

import (
	"context"
	"testing"

	"github.com/gpusched/gpusched/allocation"
	"github.com/gpusched/gpusched/perfmodel"
	"github.com/gpusched/gpusched/perfmodel/gavel"
	"github.com/gpusched/gpusched/topology"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// With Compat, per-job JCTs equal those of Gavel's own simulator
// (scheduler.py at c4fa400, run on the same generated trace: seed 0,
// 36 V100 + 36 P100 + 36 K80, 360 s rounds). FIFO is all Gavel's code on
// both sides; for max-min fairness Gavel's simulator was given our LP's
// allocations (its cvxpy/ECOS cannot run here), so what is compared is the
// mechanism and the simulator loop. The max-min references follow the LP:
// they were made again when the interior point became the self-dual method
// of #16, whose point on a tied optimal face differs in the last digits
// (LAS's job 137: 7,601.9 s before, 7,749.2 s now, on both sides).
func TestCompatGavelMatchesGavel(t *testing.T) {
	types := []topology.GPUType{topology.K80, topology.P100, topology.V100}
	for _, tc := range []struct {
		name    string
		policy  allocation.Policy
		shuffle bool
		multi   bool
		rate    float64
		jobs    int
		mean    float64
		jct     map[int]float64
	}{
		{"fifo", &allocation.FIFO{Compat: allocation.CompatGavel}, true, false, 4.8, 300, 56454.35670989224,
			map[int]float64{0: 68347.80137208228, 137: 5284.228377724605, 299: 5890.404357146908}},
		{"fifo-perf", &allocation.FIFO{Compat: allocation.CompatGavel, Perf: true}, false, false, 4.8, 300, 47802.30147460389,
			map[int]float64{0: 68348.00259290374, 137: 6724.4025242047355, 299: 5170.440742111532}},
		{"fifo-perf multi-GPU", &allocation.FIFO{Compat: allocation.CompatGavel, Perf: true}, false, true, 2.8, 400, 50046.903352990885,
			map[int]float64{0: 68344.48898408175, 137: 4028.7371824137226, 299: 52304.62160212407}},
		{"gavel", &allocation.MaxMinFairness{}, false, false, 4.8, 300, 50970.95352814743,
			map[int]float64{0: 68347.80137208228, 137: 5472.3601656898245, 299: 5048.802798124321}},
		{"las", &allocation.MaxMinFairness{Agnostic: true}, true, false, 4.8, 300, 71236.27716087723,
			map[int]float64{0: 89987.04954081113, 137: 7749.163579850996, 299: 7603.146283680049}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if testing.Short() && tc.name == "las" {
				t.Skip("slow")
			}
			jobs, err := (&GavelWorkload{Rate: tc.rate, MultiGPU: tc.multi, Python: true}).Generate(tc.jobs)
			require.NoError(t, err)
			cfg := Config{Types: types, Capacity: []int{36, 36, 36}, Policy: tc.policy, Mechanism: allocation.Mechanism{ShuffleTypes: tc.shuffle, Compat: allocation.CompatGavel}}
			res, err := Run(context.Background(), cfg, jobs)
			require.NoError(t, err)
			require.Len(t, res.Records, tc.jobs)
			sum := 0.0
			for _, r := range res.Records {
				sum += r.JCT()
				if want, ok := tc.jct[r.ID]; ok {
					assert.InDelta(t, want, r.JCT(), 1e-6*want, "job %d", r.ID)
				}
			}
			assert.InDelta(t, tc.mean, sum/float64(len(res.Records)), 1e-6*tc.mean)
		})
	}
}

// By hand, one V100, 1 step/s: A (720 steps) at 10 s, B (360) at 400 s.
// A runs 10-730. At 730 B is present but arrived after the last reset (10
// s), and the next reset is not due before 1930 s. Ours runs B at once
// (work-conserving); Gavel's B holds the GPU idle, and its loop jumps to
// the next arrival (C at 5000 s, then a reset) or, with no arrival left,
// forces a reset.
func TestCompatGavelIdle(t *testing.T) {
	cfg := Config{Types: []topology.GPUType{topology.V100}, Capacity: []int{1}, Throughput: unitRates{}, Policy: &allocation.MaxMinFairness{}}
	abc := []Job{job(0, 10, 720), job(1, 400, 360), job(2, 5000, 360)}
	finish := func(res *Result) map[int]float64 {
		out := map[int]float64{}
		for _, r := range res.Records {
			out[r.ID] = r.Finish
		}
		return out
	}
	res, err := Run(context.Background(), cfg, abc)
	require.NoError(t, err)
	assert.Equal(t, map[int]float64{0: 730, 1: 1090, 2: 5360}, finish(res))

	cfg.Compat = allocation.CompatGavel
	res, err = Run(context.Background(), cfg, abc)
	require.NoError(t, err)
	assert.Equal(t, map[int]float64{0: 730, 1: 5360, 2: 5720}, finish(res))

	res, err = Run(context.Background(), cfg, abc[:2])
	require.NoError(t, err)
	assert.Equal(t, map[int]float64{0: 730, 1: 1090}, finish(res), "forced reset")
}

// Gavel gives each of a job's workers floor(steps / GPUs) steps but the
// last: when fewer steps than GPUs are left the micro-task fails, and after
// 5 failures the job is dropped.
func TestCompatGavelDropsFailingJobs(t *testing.T) {
	cfg := Config{Types: []topology.GPUType{topology.V100}, Capacity: []int{2}, Throughput: unitRates{}, Policy: &allocation.MaxMinFairness{}}
	j := Job{ID: 0, Steps: 361.5, Key: perfmodel.JobKey{Model: "m", ScaleFactor: 2}, Weight: 1}
	res, err := Run(context.Background(), cfg, []Job{j})
	require.NoError(t, err)
	require.Len(t, res.Records, 1)
	assert.InDelta(t, 361.5, res.Records[0].Finish, 1e-9)

	cfg.Compat = allocation.CompatGavel
	res, err = Run(context.Background(), cfg, []Job{j})
	require.NoError(t, err)
	assert.Empty(t, res.Records)
	require.Len(t, res.Dropped, 1)
	assert.Equal(t, 6, res.Rounds, "one good round, five failures")
}

// JobsToComplete ends the run when the listed jobs are done.
func TestJobsToComplete(t *testing.T) {
	jobs, err := (&GavelWorkload{Rate: 20, Seed: 2}).Generate(80)
	require.NoError(t, err)
	cfg := Config{Types: []topology.GPUType{topology.V100, topology.K80}, Capacity: []int{4, 4}, Policy: &allocation.MaxMinFairness{}, JobsToComplete: []int{10, 11, 12}}
	res, err := Run(context.Background(), cfg, jobs)
	require.NoError(t, err)
	got := map[int]bool{}
	last := 0.0
	for _, r := range res.Records {
		got[r.ID] = true
		last = max(last, r.Finish)
	}
	for _, id := range cfg.JobsToComplete {
		assert.True(t, got[id], "job %d", id)
	}
	assert.Less(t, len(res.Records), 80)
	assert.Equal(t, last, res.End)
	cfg.JobsToComplete = []int{99}
	_, err = Run(context.Background(), cfg, jobs)
	assert.ErrorContains(t, err, "job 99")
}

// The solve statistics come from the mechanism's rounds.
func TestSolveStats(t *testing.T) {
	jobs, err := (&GavelWorkload{Rate: 20, Seed: 2}).Generate(30)
	require.NoError(t, err)
	cfg := Config{Types: []topology.GPUType{topology.V100, topology.K80}, Capacity: []int{4, 4}, Policy: &allocation.MaxMinFairness{}}
	res, err := Run(context.Background(), cfg, jobs)
	require.NoError(t, err)
	assert.Positive(t, res.Allocations)
	assert.Positive(t, res.SolveTime)
	assert.GreaterOrEqual(t, res.LPIterations, res.Allocations)
}

// Space sharing in Gavel's mode through a trace that empties the cluster
// between arrivals (the loop's extra step on the empty cluster).
func TestCompatGavelSpaceSharingIdle(t *testing.T) {
	var jobs []Job
	for i := range 4 {
		jobs = append(jobs, Job{ID: i, Arrival: float64(i) * 10000, Steps: 1000, Weight: 1, Key: perfmodel.JobKey{Model: "ResNet-18", BatchSize: 64, ScaleFactor: 1}})
	}
	cfg := Config{Types: []topology.GPUType{topology.V100, topology.K80}, Capacity: []int{2, 2}, Colocation: gavel.Simulation(),
		Policy: &allocation.MaxMinFairness{SpaceSharing: true}, Mechanism: allocation.Mechanism{Compat: allocation.CompatGavel}}
	res, err := Run(context.Background(), cfg, jobs)
	require.NoError(t, err)
	assert.Len(t, res.Records, 4)
}

// The default FIFO is no strawman (#29): on Gavel's generated 300
// single-GPU jobs at 3 jobs/h on 36 V100 + 36 P100 + 36 K80 (CPython's
// draws, seed 0), its makespan and mean JCT are within 1.2x of Gavel's own
// FIFO (compat: 230.9 h, 15.49 h; ours 236.3 h, 14.89 h). The random type
// choice it had before, which fifo.py means but does not do, gave 314.0 h
// and 19.17 h: a third of the GPU time on K80s, where Gavel's code puts
// 87% of it on V100s.
func TestFIFONotAStrawman(t *testing.T) {
	jobs, err := (&GavelWorkload{Rate: 3, Python: true}).Generate(300)
	require.NoError(t, err)
	types := []topology.GPUType{topology.V100, topology.P100, topology.K80}
	run := func(pol allocation.Policy, c allocation.Compat) (Summary, [3]float64) {
		res, err := Run(context.Background(), Config{Types: types, Capacity: []int{36, 36, 36}, Policy: pol, Mechanism: allocation.Mechanism{ShuffleTypes: true, Compat: c}}, jobs)
		require.NoError(t, err)
		var by [3]float64
		for _, r := range res.Records {
			for k := range by {
				by[k] += r.GPUSeconds[k]
			}
		}
		return res.Summarise(0, 0), by
	}
	gavelFIFO, gavelBy := run(&allocation.FIFO{Compat: allocation.CompatGavel}, allocation.CompatGavel)
	ours, _ := run(&allocation.FIFO{}, allocation.CompatNone)
	random, randomBy := run(&allocation.FIFO{Random: true}, allocation.CompatNone)
	t.Logf("makespan Gavel %.1f h, ours %.1f h, random %.1f h; mean JCT %.2f, %.2f, %.2f h",
		gavelFIFO.Makespan/3600, ours.Makespan/3600, random.Makespan/3600, gavelFIFO.MeanJCT/3600, ours.MeanJCT/3600, random.MeanJCT/3600)
	assert.InDelta(t, 230.9, gavelFIFO.Makespan/3600, 0.05)
	assert.LessOrEqual(t, ours.Makespan, 1.2*gavelFIFO.Makespan)
	assert.LessOrEqual(t, ours.MeanJCT, 1.2*gavelFIFO.MeanJCT)
	assert.Greater(t, random.Makespan, 1.2*gavelFIFO.Makespan)
	share := func(by [3]float64, k int) float64 { return by[k] / (by[0] + by[1] + by[2]) }
	assert.Greater(t, share(gavelBy, 0), 0.8, "Gavel's FIFO runs mostly on V100s")
	assert.Greater(t, share(randomBy, 2), 0.25, "a random type puts a quarter or more on K80s")
}
