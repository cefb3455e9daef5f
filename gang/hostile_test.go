package gang

import (
	"fmt"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gpusched/gpusched/topology"
)

// decided fails the test on a scheduler's error and returns its decision.
func decided(t testing.TB) func(Decision, error) Decision {
	return func(d Decision, err error) Decision {
		t.Helper()
		require.NoError(t, err)
		return d
	}
}

// Inconsistent input is an error from every scheduler, never a panic or a
// decision that overcommits (duplicate IDs used to start one job twice on
// 8 GPUs of 4 free; a nil Throughput, a negative scale factor or a running
// job's type out of range panicked).
func TestHostileViews(t *testing.T) {
	c := twoServers(t)
	schedulers := func() []Scheduler {
		var out []Scheduler
		for _, b := range []Backfilling{NoBackfill, Greedy, EASY, Conservative} {
			out = append(out, Priority{Order: ByArrival{}, Backfill: b}, Priority{Order: LAS2D{}, NoPreemption: true, Backfill: b})
		}
		return append(out, FIFO{}, FIFO{Strict: true}, &OnServers{Inner: Priority{Order: ByArrival{}}, Cluster: c})
	}
	run := func(id, sf, k int) JobView {
		return JobView{ID: id, ScaleFactor: sf, Type: k, Throughput: []float64{1}, Remaining: 10}
	}
	tests := []struct {
		name             string
		now              float64
		free             []int
		waiting, running []JobView
		msg              string
	}{
		{"duplicate waiting", 0, []int{4}, []JobView{waitingJob(1, 4), waitingJob(1, 4)}, nil, "job 1 appears twice among the waiting and running jobs"},
		{"waiting and running", 0, []int{4}, []JobView{waitingJob(1, 2)}, []JobView{run(1, 2, 0)}, "job 1 appears twice"},
		{"sparse duplicate", 0, []int{4}, []JobView{waitingJob(math.MaxInt, 1), waitingJob(math.MinInt, 1), waitingJob(math.MaxInt, 1)}, nil,
			"job 9223372036854775807 appears twice"},
		{"negative scale factor", 0, []int{4}, []JobView{waitingJob(1, -1)}, nil, "job 1: scale factor -1, want >= 1"},
		{"nil throughput", 0, []int{4}, []JobView{{ID: 2, ScaleFactor: 1, Type: -1}}, nil, "job 2: 0 rates for 1 GPU types"},
		{"running type", 0, []int{4}, nil, []JobView{run(3, 1, 5)}, "job 3: runs on type 5 of 1"},
		{"running type -1", 0, []int{4}, nil, []JobView{run(3, 1, -1)}, "job 3: runs on type -1 of 1"},
		{"waiting type", 0, []int{4}, []JobView{{ID: 4, ScaleFactor: 1, Type: 0, Throughput: []float64{1}}}, nil, "job 4: waits with type 0 (want -1)"},
		{"NaN rate", 0, []int{4}, []JobView{{ID: 5, ScaleFactor: 1, Type: -1, Throughput: []float64{math.NaN()}}}, nil, "job 5: rate NaN on type 0"},
		{"negative rate", 0, []int{4}, []JobView{{ID: 5, ScaleFactor: 1, Type: -1, Throughput: []float64{-1}}}, nil, "job 5: rate -1 on type 0"},
		{"remaining Inf", 0, []int{4}, []JobView{{ID: 6, ScaleFactor: 1, Type: -1, Throughput: []float64{1}, Remaining: math.Inf(1)}}, nil,
			"job 6: remaining steps +Inf, want finite and >= 0"},
		{"arrival NaN", 0, []int{4}, []JobView{{ID: 7, ScaleFactor: 1, Type: -1, Throughput: []float64{1}, Arrival: math.NaN()}}, nil, "job 7: arrival NaN"},
		{"negative free", 0, []int{-4}, []JobView{waitingJob(1, 1)}, nil, "-4 GPUs free of type 0"},
		{"now", math.NaN(), []int{4}, nil, nil, "decision at NaN s"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for _, s := range schedulers() {
				d, err := s.Decide(tc.now, tc.free, tc.waiting, tc.running)
				require.ErrorIs(t, err, ErrInvalid, "%T %+v", s, s)
				assert.ErrorContains(t, err, tc.msg, "%T", s)
				assert.Empty(t, d.Start)
			}
		})
	}
}

func TestHostileSettings(t *testing.T) {
	for _, tc := range []struct {
		s   Scheduler
		msg string
	}{
		{Priority{}, "Priority has no Order"},
		{Priority{Order: ByArrival{}, Backfill: 9}, "backfilling 9"},
		{Priority{Order: ByArrival{}, Depth: -1}, "depth -1, want >= 0"},
		{Priority{Order: LAS2D{Thresholds: []float64{100, 50}}}, "2D-LAS thresholds [100 50], want finite, positive and increasing"},
		{Priority{Order: LAS2D{Thresholds: []float64{math.NaN()}}}, "2D-LAS thresholds [NaN]"},
		{Priority{Order: LAS2D{Starvation: math.Inf(1)}}, "2D-LAS starvation factor +Inf"},
		{Priority{Order: &Gittins2D{}}, "2D-Gittins quantum 0 GPU-s (build it with NewGittins2D)"},
		{&OnServers{Inner: FIFO{}}, "OnServers needs Inner, and Cluster or State"},
		{&OnServers{Cluster: twoServers(t)}, "OnServers needs Inner, and Cluster or State"},
		{&OnServers{Inner: FIFO{}, Cluster: twoServers(t)}, "free GPUs of 2 types, the cluster has 1 ([v100])"},
	} {
		free := []int{4}
		if _, ok := tc.s.(*OnServers); ok {
			free = []int{4, 4}
		}
		_, err := tc.s.Decide(0, free, []JobView{waitingJob(1, 1)}, nil)
		require.ErrorIs(t, err, ErrInvalid, "%+v", tc.s)
		assert.ErrorContains(t, err, tc.msg)
	}
	for _, tc := range []struct {
		samples []float64
		quantum float64
		msg     string
	}{
		{[]float64{1, math.NaN()}, 0, "2D-Gittins sample 1 is NaN GPU-s, want finite and positive"},
		{[]float64{-5}, 0, "2D-Gittins sample 0 is -5 GPU-s"},
		{[]float64{1}, math.Inf(1), "2D-Gittins quantum +Inf GPU-s, want finite and positive"},
		{[]float64{1}, -1, "2D-Gittins quantum -1 GPU-s"},
	} {
		_, err := NewGittins2D(tc.samples, tc.quantum)
		require.ErrorIs(t, err, ErrInvalid)
		assert.ErrorContains(t, err, tc.msg)
	}
	g, err := NewGittins2D(nil, 0)
	require.NoError(t, err)
	assert.Equal(t, 3250.0, g.Quantum)
}

// failingPlacer finds every request bad.
type failingPlacer struct{}

func (failingPlacer) Place(*topology.Cluster, [][]bool, topology.GPUType, int) (GPUSet, error) {
	return nil, fmt.Errorf("%w: test", ErrInvalid)
}

// An error of the placer or of the inner scheduler stops the decision.
func TestOnServersPassesErrors(t *testing.T) {
	o := &OnServers{Inner: FIFO{}, Cluster: twoServers(t), Placer: failingPlacer{}}
	_, err := o.Decide(0, []int{8}, []JobView{waitingJob(1, 2)}, nil)
	require.ErrorIs(t, err, ErrInvalid)
	assert.ErrorContains(t, err, "gang: placing job 1: gang: invalid input: test")
	o = &OnServers{Inner: Priority{}, Cluster: twoServers(t)}
	_, err = o.Decide(0, []int{8}, []JobView{waitingJob(1, 2)}, nil)
	assert.ErrorContains(t, err, "Priority has no Order")
}
