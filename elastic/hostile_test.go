package elastic

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Sizes taken from input are capped with an error that names the cap
// (Loan(1<<40), NewTable(1<<40, ...) and ScalingItems(1, 1<<30, ...) used
// to run out of memory), and values out of range are errors.
func TestHostileSizes(t *testing.T) {
	c, err := NewCluster(2, 8)
	require.NoError(t, err)
	calls := 0
	count := func(w int) (float64, error) { calls++; return float64(w), nil }
	huge := &Job{ID: 9, MinWorkers: 1, MaxWorkers: 1 << 30, GPUsPerWorker: 1, Work: 1, Curve: Linear{1}}
	for _, tc := range []struct {
		name string
		call func() error
		msg  string
	}{
		{"loan 1<<40", func() error { _, err := c.Loan(1 << 40); return err }, "loan 1099511627776 servers to a cluster of 2 (at most 1048576 at once)"},
		{"loan past the cap", func() error { _, err := c.Loan(MaxServers - 1); return err }, "loan 1048575 servers to a cluster of 2"},
		{"cluster 1<<40", func() error { _, err := NewCluster(1<<40, 8); return err }, "1099511627776 servers of 8 GPUs, want at most 1048576 servers of 1 to 1024 GPUs"},
		{"server 1<<20 GPUs", func() error { _, err := NewCluster(1, 1<<20); return err }, "1 servers of 1048576 GPUs"},
		{"cluster state past 1<<20 GPUs", func() error { _, err := NewCluster(MaxServers, 2); return err }, "1048576 servers of 2 GPUs, more than 1048576 GPUs in one cluster state"},
		{"loan past the state's GPUs", func() error {
			big, err := NewCluster(1, MaxGPUsPerServer)
			if err != nil {
				return err
			}
			_, err = big.Loan(MaxLiveGPUs / MaxGPUsPerServer)
			return err
		}, "loan 1024 servers of 1024 GPUs to a cluster state of 1024 GPUs (at most 1048576)"},
		{"table 1<<40", func() error { _, err := NewTable(1<<40, count); return err }, "a table of 1099511627776 workers, want 1 to 1048576"},
		{"items 1<<30", func() error { _, err := ScalingItems(1, 1<<30, 1, 1); return err }, "workers 1 to 1073741824 (at most 1048576)"},
		{"items GPUs", func() error { _, err := ScalingItems(1, 2, 1<<20, 1); return err }, "1048576 GPUs each (at most 1024)"},
		{"knapsack cells", func() error {
			groups := make([][]Item, 10)
			for g := range groups {
				groups[g] = []Item{{Weight: 1 << 24, Value: 1}}
			}
			_, _, err := MultipleChoiceKnapsack(groups, 1<<30)
			return err
		}, "knapsack of 10 groups, 10 items and 167772160 GPUs: more than 67108864 cells or 1073741824 steps"},
		{"knapsack work", func() error {
			items := make([]Item, 1<<12)
			for i := range items {
				items[i] = Item{Weight: i + 1, Value: float64(i)}
			}
			_, _, err := MultipleChoiceKnapsack([][]Item{items, {{Weight: 1 << 20, Value: 1}}}, 1<<30)
			return err
		}, "knapsack of 2 groups, 4097 items and 1052672 GPUs"},
		{"knapsack weight", func() error {
			_, _, err := MultipleChoiceKnapsack([][]Item{{{Weight: math.MaxInt, Value: 1}}}, 1)
			return err
		},
			"group 0 item 0 has weight 9223372036854775807 (want 0 to 1073741824)"},
		{"job workers", func() error { return huge.Validate() }, "job 9 has workers 1 to 1073741824 (want 1 <= min <= max <= 1048576)"},
		{"job GPUs per worker", func() error {
			j := *huge
			j.MaxWorkers, j.GPUsPerWorker = 1, 4096
			return j.Validate()
		}, "job 9 has 4096 GPUs per worker, want 1 to 1024"},
		{"job arrival", func() error {
			j := *huge
			j.MaxWorkers, j.Arrival = 1, 1e300
			return j.Validate()
		}, "job 9 arrives at 1e+300 s, outside [-1e+15, 1e+15]"},
		{"reclaim worker", func() error { _, err := Reclaim([][]Worker{{{Job: 1, GPUs: 1 << 40}}}, 1); return err },
			"job 1 has 1099511627776 GPUs on server 0, want 0 to 1024"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.call()
			require.ErrorIs(t, err, ErrInvalid)
			assert.ErrorContains(t, err, tc.msg)
		})
	}
	assert.Zero(t, calls, "NewTable asked f before checking the size")
	total, _ := c.GPUs()
	assert.Equal(t, 16, total, "a refused loan changes nothing")
}

func TestHostilePolicies(t *testing.T) {
	jobs := states(linearJob(1, 1, 4, 100), linearJob(2, 2, 2, 50))
	for _, p := range []Policy{FIFO{}, Lyra{}, AFS{}, Optimus{}, Pollux{}} {
		_, err := p.Allocate(jobs, math.MaxInt)
		require.ErrorIs(t, err, ErrInvalid, "%T", p)
		assert.ErrorContains(t, err, "9223372036854775807 GPUs, want 0 to 1073741824")
	}
	for _, tc := range []struct {
		p   Pollux
		msg string
	}{
		{Pollux{P: math.Inf(-1)}, "power-mean exponent -Inf (want finite and below 0)"},
		{Pollux{P: 2}, "power-mean exponent 2"},
		{Pollux{RestartPenalty: math.NaN()}, "restart penalty NaN s"},
	} {
		_, err := tc.p.Allocate(jobs, 8)
		require.ErrorIs(t, err, ErrInvalid)
		assert.ErrorContains(t, err, tc.msg)
	}
}

// Resize refuses a job whose GPUs per worker differ from those it was
// placed with (its accounting would go wrong).
func TestResizeMismatch(t *testing.T) {
	c, err := NewCluster(2, 8)
	require.NoError(t, err)
	j := linearJob(1, 1, 4, 100)
	_, err = c.Place(j, 2)
	require.NoError(t, err)
	other := *j
	other.GPUsPerWorker = 2
	_, err = c.Resize(&other, 3)
	require.ErrorIs(t, err, ErrInvalid)
	assert.ErrorContains(t, err, "job 1 was placed with 1 GPUs per worker, not 2")
	require.NoError(t, c.Check())
	assert.Equal(t, 2, c.Workers(1))
}

// FitPerfParams stops when its context ends.
func TestFitPerfParamsCancelled(t *testing.T) {
	samples := []PerfSample{{Nodes: 1, Replicas: 1, Atomic: 16, ComputeTime: 0.1, StepTime: 0.1}, {Nodes: 2, Replicas: 4, Atomic: 32, ComputeTime: 0.2, StepTime: 0.5}}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := FitPerfParams(ctx, samples)
	require.ErrorIs(t, err, context.Canceled)
	// A deadline mid-fit: a million samples would take minutes.
	many := make([]PerfSample, 1<<20)
	for i := range many {
		many[i] = samples[i%2]
	}
	ctx, cancel = context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err = FitPerfParams(ctx, many)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Less(t, time.Since(start), 5*time.Second)
}
