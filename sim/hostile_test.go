package sim

import (
	"context"
	"errors"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gpusched/gpusched/allocation"
	"github.com/gpusched/gpusched/elastic"
	"github.com/gpusched/gpusched/gang"
	"github.com/gpusched/gpusched/perfmodel"
	"github.com/gpusched/gpusched/placement"
	"github.com/gpusched/gpusched/placement/ring"
	"github.com/gpusched/gpusched/topology"
)

// constRate runs every job at the same rate on every type.
type constRate float64

func (c constRate) Throughput(perfmodel.JobKey, topology.GPUType) (float64, error) {
	return float64(c), nil
}

// Every engine stops on input that would never end, with an error that
// names the job and the limit, at once: a job of 1e20 steps (1e20 - 3600
// == 1e20), a rate of 1e-300, rounds, timers and intervals of 1e-9 s used
// to run until memory ran out; 1<<30 inference servers ran out of memory
// at once. Each run gets 20 s, so that a regression fails instead of
// hanging the tests.
func TestHostileEngines(t *testing.T) {
	v100 := []topology.GPUType{topology.V100}
	base := func() Config {
		return Config{Types: v100, Capacity: []int{4}, Throughput: constRate(10), Policy: &allocation.MaxMinFairness{}}
	}
	events := func() EventConfig {
		return EventConfig{Types: v100, Capacity: []int{4}, Throughput: constRate(10), Scheduler: gang.FIFO{}}
	}
	elasticCfg := func() ElasticConfig {
		return ElasticConfig{TrainingServers: 1, GPUsPerServer: 4, Policy: elastic.FIFO{}}
	}
	one := []Job{job(1, 0, 1e6)}
	elJobs := []elastic.Job{elJobOf(1, 0, 1, 1, 1000)}
	tests := []struct {
		name string
		run  func(ctx context.Context) error
		kind error
		msg  string
	}{
		{"Run: 1e20 steps", func(ctx context.Context) error { _, err := Run(ctx, base(), []Job{job(1, 0, 1e20)}); return err }, ErrInvalid,
			"job 1: steps 1e+20, outside (0, 1e+18]"},
		{"Run: 1e17 steps", func(ctx context.Context) error { _, err := Run(ctx, base(), []Job{job(1, 0, 1e17)}); return err }, ErrNoProgress,
			"job 1 needs at least 2.78e+13 rounds of 360 s (1e+17 steps at 10 steps/s), more than MaxRounds (10000000)"},
		{"Run: rate 1e-300", func(ctx context.Context) error {
			c := base()
			c.Throughput = constRate(1e-300)
			_, err := Run(ctx, c, one)
			return err
		}, ErrInvalid, "job 1: throughput 1e-300 on v100, outside [1e-09, 1e+09] steps/s"},
		{"Run: rate 1e-9", func(ctx context.Context) error {
			c := base()
			c.Throughput = constRate(1e-9)
			_, err := Run(ctx, c, one)
			return err
		}, ErrNoProgress, "job 1 needs at least 2.78e+12 rounds"},
		{"Run: round 1e-9 s", func(ctx context.Context) error {
			c := base()
			c.RoundLength = 1e-9
			_, err := Run(ctx, c, one)
			return err
		}, ErrInvalid, "round length 1e-09 s, outside [1, 1e+07] (0 means the default)"},
		{"Run: MaxRounds reached", func(ctx context.Context) error {
			c := base()
			c.Capacity, c.Throughput, c.MaxRounds = []int{1}, constRate(1), 3
			_, err := Run(ctx, c, []Job{job(1, 0, 720), job(2, 0, 720)}) // 2 rounds each, 4 in all
			return err
		}, ErrNoProgress, "3 rounds (to 1080 s) with 1 of 2 jobs left, MaxRounds reached"},
		{"Run: prices", func(ctx context.Context) error {
			c := base()
			c.Prices = []float64{1, 2}
			_, err := Run(ctx, c, one)
			return err
		}, ErrInvalid, "2 prices for 1 GPU types"},
		{"Run: arrival 1e300", func(ctx context.Context) error { _, err := Run(ctx, base(), []Job{job(1, 1e300, 10)}); return err }, ErrInvalid,
			"job 1: arrival 1e+300, outside [-1e+15, 1e+15] s"},
		{"Run: capacity", func(ctx context.Context) error {
			c := base()
			c.Capacity = []int{math.MaxInt}
			_, err := Run(ctx, c, one)
			return err
		}, ErrInvalid, "capacity of v100 is 9223372036854775807, outside [0, 1073741824]"},
		{"RunEvents: timer 1e-9 s", func(ctx context.Context) error {
			c := events()
			c.Timer = 1e-9
			_, err := RunEvents(ctx, c, one)
			return err
		}, ErrInvalid, "timer 1e-09 s, outside [1, 1e+07]"},
		{"RunEvents: too many timer events", func(ctx context.Context) error {
			c := events()
			c.Timer, c.MaxEvents = 1, 1000
			_, err := RunEvents(ctx, c, one)
			return err
		}, ErrNoProgress, "job 1 runs at least 100000 s (1e+06 steps at 10 steps/s): 1e+05 timer events of 1 s, more than MaxEvents (1000)"},
		{"RunEvents: restart NaN", func(ctx context.Context) error {
			c := events()
			c.Restart = math.NaN()
			_, err := RunEvents(ctx, c, one)
			return err
		}, ErrInvalid, "restart time NaN s"},
		{"RunEvents: scheduler error", func(ctx context.Context) error {
			c := events()
			c.Scheduler = gang.Priority{}
			_, err := RunEvents(ctx, c, one)
			return err
		}, gang.ErrInvalid, "sim: scheduler at 0 s: gang: invalid input: Priority has no Order"},
		{"RunElastic: interval 1e-9 s", func(ctx context.Context) error {
			c := elasticCfg()
			c.Interval = 1e-9
			_, err := RunElastic(ctx, c, elJobs)
			return err
		}, elastic.ErrInvalid, "interval 1e-09 s, outside [1, 1e+07]"},
		{"RunElastic: 1<<30 inference servers", func(ctx context.Context) error {
			c := elasticCfg()
			c.InferenceServers, c.Usage = 1<<30, Diurnal{Mean: 0.5}
			_, err := RunElastic(ctx, c, elJobs)
			return err
		}, elastic.ErrInvalid, "1 training and 1073741824 inference servers, more than 1048576 together"},
		{"RunElastic: work 1e20", func(ctx context.Context) error {
			_, err := RunElastic(ctx, elasticCfg(), []elastic.Job{elJobOf(1, 0, 1, 2, 1e20)})
			return err
		}, ErrNoProgress, "job 1 needs at least 8.33e+17 intervals of 60 s (work 1e+20 at 2 per second), more than MaxIntervals (10000000)"},
		{"RunElastic: MaxIntervals reached", func(ctx context.Context) error {
			c := elasticCfg()
			c.GPUsPerServer, c.MaxIntervals = 1, 3
			_, err := RunElastic(ctx, c, []elastic.Job{elJobOf(1, 0, 1, 1, 120), elJobOf(2, 0, 1, 1, 120)})
			return err
		}, ErrNoProgress, "3 intervals (to 180 s) with 1 of 2 jobs left, MaxIntervals reached"},
		{"RunElastic: diurnal mean NaN", func(ctx context.Context) error {
			c := elasticCfg()
			c.InferenceServers, c.Usage = 2, Diurnal{Mean: math.NaN()}
			_, err := RunElastic(ctx, c, elJobs)
			return err
		}, elastic.ErrInvalid, "diurnal usage: mean NaN (want a finite number)"},
		{"RunElastic: diurnal period -1", func(ctx context.Context) error {
			c := elasticCfg()
			c.InferenceServers, c.Usage = 2, &Diurnal{Mean: 0.5, Period: -1}
			_, err := RunElastic(ctx, c, elJobs)
			return err
		}, elastic.ErrInvalid, "diurnal usage: period -1 (want a finite number >= 0)"},
		{"RunElastic: usage NaN", func(ctx context.Context) error {
			c := elasticCfg()
			c.InferenceServers, c.Usage = 2, nanUsage{}
			_, err := RunElastic(ctx, c, elJobs)
			return err
		}, elastic.ErrInvalid, "the usage signal gave NaN at 0 s"},
		{"RingPaperSetup: 1<<20 servers", func(context.Context) error {
			_, err := RingPaperSetup(RingPaperConfig{Servers: 1 << 20})
			return err
		}, topology.ErrInvalidCount, "1048576 servers, want 1 to 4096"},
		{"RingPaperSetup: 1<<40 jobs", func(context.Context) error {
			_, err := RingPaperSetup(RingPaperConfig{Servers: 2, Jobs: 1 << 40})
			return err
		}, ErrInvalid, "1099511627776 jobs (want 0 to 4194304)"},
		{"RingPaperSetup: alpha NaN", func(context.Context) error {
			_, err := RingPaperSetup(RingPaperConfig{Servers: 2, Alpha: math.NaN()})
			return err
		}, ErrInvalid, "alpha NaN (want finite and >= 0)"},
		{"Generate: 2e9 jobs", func(context.Context) error { _, err := (&GavelWorkload{}).Generate(2_000_000_000); return err }, ErrInvalid,
			"Gavel workload: 2000000000 jobs (want 0 to 4194304)"},
		{"ElasticSpec: NaN factor", func(context.Context) error {
			_, err := ElasticSpec{MinFactor: math.NaN()}.Jobs([]Job{{ID: 1, Key: perfmodel.JobKey{ScaleFactor: 1}, Duration: 1}})
			return err
		}, elastic.ErrInvalid, "factors NaN and 0"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			err := tc.run(ctx)
			require.False(t, errors.Is(err, context.DeadlineExceeded), "ran until the deadline: %v", err)
			require.ErrorIs(t, err, tc.kind)
			assert.ErrorContains(t, err, tc.msg)
		})
	}
}

// nanUsage is a usage signal without a Validate method that gives NaN.
type nanUsage struct{}

func (nanUsage) Usage(float64) float64 { return math.NaN() }

// A GoodputCurve takes no placement with a negative count (it used to sum
// it with the others: [5, -3] ran as 2 workers on 2 nodes) and ignores a
// progress that is not a number (it used to move to the first epoch).
func TestGoodputCurveHostile(t *testing.T) {
	apps := loadPollux(t)
	c := &GoodputCurve{App: apps["cifar10"], GPUsPerNode: 4}
	two := c.ThroughputOn([]int{1, 1})
	require.Positive(t, two)
	for _, bad := range [][]int{{5, -3}, {-1}, {math.MaxInt, 1}, {1, math.MaxInt}, {elastic.MaxWorkers + 1}, nil, {0}} {
		assert.Zero(t, c.ThroughputOn(bad), "%v", bad)
	}
	assert.Equal(t, two, c.ThroughputOn([]int{1, 0, 1}), "a server with no workers is not spanned")
	for _, bad := range []int{-3, 0, elastic.MaxWorkers + 1, math.MaxInt} {
		assert.Zero(t, c.Throughput(bad), "%d workers", bad)
	}
	assert.Zero(t, (&GoodputCurve{App: apps["cifar10"], GPUsPerNode: math.MaxInt}).Throughput(2))

	late := &GoodputCurve{App: apps["cifar10"], GPUsPerNode: 4}
	late.SetProgress(0.9 * late.App.MaxProgress())
	want := late.Throughput(8)
	late.SetProgress(math.NaN())
	assert.Equal(t, want, late.Throughput(8), "NaN progress leaves the curve where it was")
	late.SetProgress(math.Inf(1))
	end := late.Throughput(8)
	late.SetProgress(late.App.MaxProgress() * 2)
	assert.Equal(t, end, late.Throughput(8))
}

// Summarise works on any Result, even one built by hand without prices
// (a Prices slice of the wrong length used to panic in Summarise; Run now
// refuses it).
func TestSummariseHandBuilt(t *testing.T) {
	r := &Result{Types: []topology.GPUType{"a", "b"}, Records: []Record{{Job: job(1, 0, 10), Start: 0, Finish: 10, GPUSeconds: []float64{10, 5}}}, End: 10}
	s := r.Summarise(0, 0)
	assert.Equal(t, 1, s.Jobs)
	assert.Equal(t, 10.0, s.MeanJCT)
	assert.Zero(t, s.Cost)
}

// RingResult refuses a schedule from another cluster (it used to index out
// of range).
func TestRingResultMismatch(t *testing.T) {
	setup, err := RingPaperSetup(RingPaperConfig{Servers: 2, GPUsPerServer: 4, Jobs: 4, Seed: 1})
	require.NoError(t, err)
	s := &ring.Schedule{Jobs: make([]ring.Outcome, len(setup.Jobs))}
	s.Jobs[0].GPUs = placement.GPUSet{7: {0}}
	_, err = RingResult(setup.Cluster, setup.Jobs, s)
	require.ErrorIs(t, err, ErrInvalid)
	assert.ErrorContains(t, err, "ran on GPU 0 of server 7, which the cluster does not have")
}

// More jobs than MaxJobs are refused before the engines build anything
// for them (the check the engines call; a slice of MaxJobs + 1 jobs would
// take half a gigabyte to build in a test).
func TestJobCountCap(t *testing.T) {
	require.NoError(t, checkJobCount(MaxJobs))
	err := checkJobCount(MaxJobs + 1)
	require.ErrorIs(t, err, ErrInvalid)
	assert.ErrorContains(t, err, "4194305 jobs, more than MaxJobs (4194304)")
}

// The engines take the jobs in order of arrival, then ID, then position,
// without copying them.
func TestByArrival(t *testing.T) {
	jobs := []Job{{ID: 3, Arrival: 5}, {ID: 1, Arrival: 5}, {ID: 2, Arrival: 1}, {ID: 1, Arrival: 5}, {ID: 0, Arrival: 9}}
	assert.Equal(t, []int32{2, 1, 3, 0, 4}, byArrival(jobs))
}
