package sim

import (
	"context"
	"strings"
	"testing"

	"github.com/gpusched/gpusched/allocation"
	"github.com/gpusched/gpusched/elastic"
	"github.com/gpusched/gpusched/perfmodel"
	"github.com/gpusched/gpusched/perfmodel/gavel"
	"github.com/gpusched/gpusched/perfmodel/hw"
	"github.com/gpusched/gpusched/topology"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// An application on a type that computes 4x as fast: its measured steps
// keep their synchronisation and compute a quarter of the time, and so do
// the fitted model's computation terms; the network terms stay.
func TestPolluxOnType(t *testing.T) {
	apps := loadPollux(t)
	a := apps["cifar10"]
	b, err := a.OnType(topology.A100, 4)
	require.NoError(t, err)
	assert.Equal(t, topology.T4, a.GPU)
	assert.Equal(t, topology.A100, b.GPU)
	for _, perNode := range [][]int{{1}, {4}, {2, 2}} {
		step, sync, ok := a.Measured(perNode, 128)
		require.True(t, ok)
		step4, sync4, ok := b.Measured(perNode, 128)
		require.True(t, ok)
		assert.Equal(t, sync, sync4)
		assert.InDelta(t, sync+(step-sync)/4, step4, 1e-12, "%v", perNode)
	}
	assert.InDelta(t, a.Perf.AlphaC/4, b.Perf.AlphaC, 1e-15)
	assert.InDelta(t, a.Perf.BetaC/4, b.Perf.BetaC, 1e-15)
	assert.Equal(t, a.Perf.AlphaN, b.Perf.AlphaN)
	c, err := b.OnType(topology.H100, 2)
	require.NoError(t, err)
	assert.Equal(t, 8.0, c.Speedup)
	_, err = a.OnType(topology.A100, 0)
	assert.ErrorIs(t, err, elastic.ErrInvalid)
	// A faster type makes a single GPU faster by the speedup when the
	// model's computation dominates, less once synchronisation counts.
	one := (&GoodputCurve{App: a, GPUsPerNode: 4}).Throughput(1)
	fast := (&GoodputCurve{App: b, GPUsPerNode: 4}).Throughput(1)
	assert.Greater(t, fast, 2*one)
}

// The speedups come from the spec model over each application's proxy:
// T4 is Pollux's own, V100 is measured in Gavel's table for the proxy (and
// T4 predicted), so the ratio is the model's; each differs by application.
func TestPolluxSpeedup(t *testing.T) {
	m, err := hw.Model(perfmodel.Observations(gavel.Simulation(), perfmodel.FP32, "Gavel simulation table"))
	require.NoError(t, err)
	s, basis, err := PolluxSpeedup(m, "cifar10", topology.T4)
	require.NoError(t, err)
	assert.Equal(t, 1.0, s)
	assert.Contains(t, basis, "measured")
	v100 := map[string]float64{}
	for _, app := range PolluxApps {
		s, basis, err := PolluxSpeedup(m, app, topology.V100)
		require.NoError(t, err, app)
		assert.True(t, strings.Contains(basis, "predicted"), basis)
		v100[app] = s
		a100, _, err := PolluxSpeedup(m, app, topology.A100)
		require.NoError(t, err)
		assert.Greater(t, a100, s, "%s: A100 beats V100", app)
	}
	// Gavel measured Recommendation slower on V100 than on P100; the model
	// keeps ncf below the convolutional networks.
	assert.Less(t, v100["ncf"], v100["cifar10"])
	_, _, err = PolluxSpeedup(m, "gpt", topology.V100)
	assert.ErrorIs(t, err, ErrUnknownApp)
}

// Gavel on a heterogeneous cluster by hand: one fast GPU (3 units/s) and
// one slow (1 unit/s), three rigid one-GPU jobs. Max-sum-throughput puts
// the fastest on the fast GPU; the rounds share both GPUs over time, and
// a job runs on one type a round at its base demand.
func TestGavelRoundsByHand(t *testing.T) {
	pools := []elastic.Pool{{Type: topology.K80, Nodes: 1, GPUsPerNode: 1}, {Type: topology.V100, Nodes: 1, GPUsPerNode: 1}}
	job := func(id int, slow, fast float64) *elastic.Job {
		return &elastic.Job{ID: id, MinWorkers: 1, MaxWorkers: 1, GPUsPerWorker: 1, Work: 1e6, Curves: []elastic.Curve{elastic.Linear{PerWorker: slow}, elastic.Linear{PerWorker: fast}}}
	}
	jobs := []elastic.State{
		{Job: job(1, 1, 3), Remaining: 1e6},
		{Job: job(2, 1, 1.5), Remaining: 1e6},
		{Job: job(3, 1, 1.1), Remaining: 1e6},
	}
	g := &GavelRounds{Rounds: &allocation.Rounds{Policy: &allocation.MaxThroughput{}}}
	ran := map[[2]int]int{}
	for round := range 12 {
		for i := range jobs {
			jobs[i].Age = 360 * float64(round)
		}
		a, err := g.AllocateTyped(jobs, pools)
		require.NoError(t, err)
		used := []int{0, 0}
		for i, x := range a {
			if x.Workers > 0 {
				assert.Equal(t, 1, x.Workers)
				used[x.Pool]++
				ran[[2]int{jobs[i].ID, x.Pool}]++
			}
		}
		assert.LessOrEqual(t, used[0], 1)
		assert.LessOrEqual(t, used[1], 1)
	}
	assert.Equal(t, 12, ran[[2]int{1, 1}], "the job that gains most from the fast GPU holds it: %v", ran)
	assert.Zero(t, ran[[2]int{2, 1}]+ran[[2]int{3, 1}], "%v", ran)
	_, err := (&GavelRounds{}).AllocateTyped(jobs, pools)
	assert.ErrorIs(t, err, elastic.ErrInvalid)
}

// The four policies of the Sia comparison run Pollux's first workload on
// Sia's cluster (6 x 4 T4, 3 x 8 V100, 2 x 8 A100) and finish every job;
// Sia's mean JCT is the lowest, and below Pollux's, as in Sia's Table 3.
func TestSiaComparisonWorkload1(t *testing.T) {
	if testing.Short() {
		t.Skip("fits six models and runs four schedules")
	}
	apps := loadPollux(t)
	m, err := hw.Model(perfmodel.Observations(gavel.Simulation(), perfmodel.FP32, "Gavel simulation table"))
	require.NoError(t, err)
	pools := siaPools(1)
	on, err := PolluxOnPools(apps, pools, m)
	require.NoError(t, err)
	mean := map[string]float64{}
	for _, c := range []struct {
		name            string
		policy          elastic.TypedPolicy
		adaptive, fixed bool
		interval        float64
	}{
		{"sia", elastic.Sia{}, true, false, 60},
		{"pollux", elastic.Unaware{Policy: elastic.Pollux{}}, true, false, 60},
		{"gavel", &GavelRounds{Rounds: &allocation.Rounds{Policy: &allocation.MaxThroughput{}}}, false, true, 360},
		{"fifo", elastic.Unaware{Policy: elastic.FIFO{}}, false, true, 60},
	} {
		jobs, err := PolluxHeteroJobs(readWorkload(t, 1), on, pools, 64, c.adaptive, c.fixed)
		require.NoError(t, err)
		res, err := RunHetero(context.Background(), HeteroConfig{Pools: pools, Policy: c.policy, Interval: c.interval, RestartOverhead: 30, ChargeStart: true, EveryInterval: true}, jobs)
		require.NoError(t, err, c.name)
		for _, r := range res.Records {
			require.False(t, r.Finish != r.Finish, "%s: job %d unfinished", c.name, r.ID)
		}
		mean[c.name] = res.Summarise().MeanJCT
	}
	t.Logf("mean JCT: %v", mean)
	assert.Less(t, mean["sia"], mean["pollux"])
	assert.Less(t, mean["pollux"], mean["gavel"])
	assert.Less(t, mean["sia"], mean["fifo"])
}
