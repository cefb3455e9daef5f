package ring

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gpusched/gpusched/perfmodel"
)

// Jobs, estimates and settings out of range are errors naming the value,
// and a model so slow that no job would finish stops the run at once with
// ErrNoProgress (a bandwidth of 1e-300 used to loop forever, one slot at a
// time; an arrival of MaxInt wrapped around to a makespan of 1).
func TestRingHostile(t *testing.T) {
	c := servers(t, 4, 4)
	ring := perfmodel.RingJob{GradientSize: 0.1, Backward: 0.1}
	job := func(id, gpus, iters, arrival int) Job {
		return Job{ID: id, GPUs: gpus, Iterations: iters, Arrival: arrival, Ring: ring}
	}
	slow := handModel
	slow.InterBandwidth = 1e-300
	for _, tc := range []struct {
		name string
		ex   Executor
		jobs []Job
		est  []float64
		kind error
		msg  string
	}{
		{"arrival MaxInt", Executor{Model: handModel, Placer: &ListScheduling{}}, []Job{job(1, 4, 10, math.MaxInt)}, nil, ErrInvalidJob,
			"job 1 arrives at slot 9223372036854775807, outside [0, 1099511627776]"},
		{"estimate Inf", Executor{Model: handModel, Placer: &ListScheduling{}}, []Job{{ID: 2, GPUs: 1, Iterations: 1, Estimate: math.Inf(1)}}, nil, ErrInvalidJob,
			"job 2 has estimate +Inf slots"},
		{"slow network", Executor{Model: slow, Placer: &ListScheduling{}}, []Job{job(3, 8, 100, 0)}, nil, ErrNoProgress,
			"job 3 needs 1.7500000000000002e+301 slots alone on 2 servers (1.75e+299 slots per iteration), more than MaxSlot (1099511627776)"},
		{"slow network, estimate given", Executor{Model: slow, Placer: &ListScheduling{}}, []Job{job(4, 8, 100, 0)}, []float64{10}, ErrNoProgress,
			"beyond MaxSlot (1099511627776)"},
		{"iterations MaxInt", Executor{Model: handModel, Placer: &ListScheduling{}}, []Job{job(5, 1, math.MaxInt, 0)}, nil, ErrNoProgress,
			"job 5 needs 9.223372036854776e+17 slots alone on 1 servers (0.1 slots per iteration)"},
		{"estimates short", Executor{Model: handModel, Placer: &ListScheduling{}}, []Job{job(6, 1, 1, 0)}, []float64{}, ErrInvalidSetting,
			"0 estimates for 1 jobs"},
		{"estimate NaN", Executor{Model: handModel, Placer: &ListScheduling{}}, []Job{job(7, 1, 1, 0)}, []float64{math.NaN()}, ErrInvalidSetting,
			"estimate NaN slots for job 7"},
		{"horizon", Executor{Model: handModel, Placer: &ListScheduling{}, Horizon: math.MaxInt}, []Job{job(8, 1, 1, 0)}, nil, ErrInvalidSetting,
			"horizon 9223372036854775807 beyond MaxSlot"},
		{"theta NaN", Executor{Model: handModel, Placer: &FAFFP{Theta: math.NaN()}}, []Job{job(9, 1, 1, 0)}, nil, ErrInvalidSetting,
			"FA-FFP with theta NaN and reading 0"},
		{"reading", Executor{Model: handModel, Placer: &FAFFP{Theta: 10, Reading: 7}}, []Job{job(10, 1, 1, 0)}, nil, ErrInvalidSetting,
			"FA-FFP with theta 10 and reading 7"},
		{"lambda", Executor{Model: handModel, Placer: &LBSGF{Theta: 10, Lambda: 0.5}}, []Job{job(11, 1, 1, 0)}, nil, ErrInvalidSetting,
			"LBSGF with theta 10 and lambda 0.5"},
		{"alpha", Executor{Model: perfmodel.RingModel{IntraBandwidth: 1, InterBandwidth: 1, ReduceSpeed: 1, Xi1: 1, Alpha: -5}, Placer: &ListScheduling{}},
			[]Job{job(12, 8, 10, 0)}, nil, perfmodel.ErrInvalidRing, "alpha -5"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			_, err := tc.ex.Run(context.Background(), c, tc.jobs, tc.est)
			require.ErrorIs(t, err, tc.kind)
			assert.ErrorContains(t, err, tc.msg)
			assert.Less(t, time.Since(start), 10*time.Second, "an error, not a long run")
		})
	}
	for _, tc := range []struct {
		b   SJFBCO
		msg string
	}{
		{SJFBCO{Model: handModel, Lambda: math.NaN()}, "lambda NaN, want >= 1 (0 means 1)"},
		{SJFBCO{Model: handModel, Horizon: MaxSlot + 1}, "horizon 1099511627777 beyond MaxSlot"},
		{SJFBCO{Model: handModel, Reading: 3}, "FA-FFP reading 3"},
		{SJFBCO{Model: handModel, Kappas: make([]int, MaxKappas+1)}, "1025 kappas, at most 1024"},
		// Both were taken: a Kappa of -3 in the result, a horizon of 0.
		{SJFBCO{Model: handModel, Kappas: []int{-3, 0}}, "Kappas[0] is -3, want at least 1"},
		{SJFBCO{Model: handModel, Kappas: []int{2, 0}}, "Kappas[1] is 0, want at least 1"},
		{SJFBCO{Model: handModel, Horizon: -1}, "Horizon -1 negative"},
	} {
		_, err := tc.b.Schedule(context.Background(), c, []Job{job(1, 1, 1, 0)})
		require.ErrorIs(t, err, ErrInvalidSetting)
		assert.ErrorContains(t, err, tc.msg)
	}
	// Empty Kappas mean the sweep, as nil do.
	sweep, err := SJFBCO{Model: handModel}.Schedule(context.Background(), c, []Job{job(1, 2, 10, 0), job(2, 4, 10, 0)})
	require.NoError(t, err)
	empty, err := SJFBCO{Model: handModel, Kappas: []int{}}.Schedule(context.Background(), c, []Job{job(1, 2, 10, 0), job(2, 4, 10, 0)})
	require.NoError(t, err)
	assert.Equal(t, sweep, empty)
	// A job that arrives at MaxSlot - 10 runs as it does at 0.
	ex := &Executor{Model: handModel, Placer: &ListScheduling{}}
	early, err := ex.Run(context.Background(), c, []Job{job(1, 4, 40, 0)}, nil)
	require.NoError(t, err)
	late, err := ex.Run(context.Background(), c, []Job{job(1, 4, 40, MaxSlot-10)}, nil)
	require.NoError(t, err)
	assert.Equal(t, MaxSlot-10, late.Jobs[0].Start)
	assert.Equal(t, MaxSlot-10+early.Makespan, late.Makespan)
	assert.Equal(t, 5, early.Makespan) // 40 iterations at 9 per slot
}

// A cancelled context stops the executor and SJF-BCO.
func TestRingCancelled(t *testing.T) {
	c, jobs := randomInstance(t, 1, 6, 60)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := (&Executor{Model: paperModel, Placer: &ListScheduling{}}).Run(ctx, c, jobs, nil)
	require.ErrorIs(t, err, context.Canceled)
	_, err = SJFBCO{Model: paperModel}.Schedule(ctx, c, jobs)
	require.ErrorIs(t, err, context.Canceled)
}
