package learn_test

import (
	"errors"
	"fmt"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gpusched/gpusched/perfmodel"
	"github.com/gpusched/gpusched/perfmodel/gavel"
	"github.com/gpusched/gpusched/perfmodel/learn"
	"github.com/gpusched/gpusched/topology"
)

// qVar08 is the variance factor of a sample 0.8-quantile, 0.8 * 0.2 /
// phi(z_0.8)^2 with z_0.8 = 0.841621 and phi(z_0.8) = 0.279962.
const qVar08 = 2.041371535885629

func newLearner(t testing.TB, cfg learn.Config) *learn.Learner {
	t.Helper()
	l, err := learn.New(cfg)
	require.NoError(t, err)
	return l
}

func observe(t testing.TB, l *learn.Learner, job string, o learn.Observation) {
	t.Helper()
	require.NoError(t, l.Observe(job, o))
}

// TestWindowsAndWarmup: rates are steps deltas over whole windows; the
// first two windows of a segment are warm-up. Reports every 30 s close a
// 60 s window every second report.
func TestWindowsAndWarmup(t *testing.T) {
	l := newLearner(t, learn.Config{})
	o := learn.Observation{Type: topology.V100, GPUs: 1, Segment: 1}
	// Warm-up at 1 step/s for 120 s, then 3 steps/s.
	for _, p := range [][2]float64{{0, 0}, {30, 30}, {60, 60}, {90, 90}, {120, 120}, {150, 210}, {180, 300}, {210, 390}, {240, 480}} {
		o.Time, o.Steps = p[0], p[1]
		observe(t, l, "a", o)
	}
	tr := l.Tracks("a")
	require.Len(t, tr, 1)
	assert.Equal(t, 2, tr[0].Windows, "windows 180 and 240; 60 and 120 are warm-up")
	assert.InDelta(t, 3, tr[0].Rate, 1e-12)
	assert.InDelta(t, 3, tr[0].Median, 1e-12)
	// Two windows, no spread measured yet: WindowSigma 0.1, so the
	// variance of the 0.8-quantile is qVar08 * 0.1^2 / 2.
	assert.InDelta(t, math.Sqrt(qVar08*0.01/2), tr[0].Sigma, 1e-12)
	assert.True(t, tr[0].Running)
	e := l.Estimate("a", topology.V100)
	assert.Equal(t, learn.SourceMeasured, e.Source)
	assert.Equal(t, 2, e.Windows)
	assert.Equal(t, 1, e.Segments)
	assert.InDelta(t, 3, e.Mean, 1e-12, "no prior: the measurement alone")
}

// TestKalmanTwoSegments: a second segment's capability is folded into
// the first's by a scalar Kalman update after the process noise (a
// change of 10%, within three sigmas: not a phase change).
func TestKalmanTwoSegments(t *testing.T) {
	l := newLearner(t, learn.Config{})
	r := newRunner(l, "a")
	r.run(t, topology.V100, 1, 6, steady(2)) // 2 warm-up + 4 windows at 2 steps/s
	r.run(t, topology.V100, 1, 6, steady(2.2))
	tr := l.Tracks("a")
	require.Len(t, tr, 1)
	// Each segment: z = log rate, R = qVar08 * 0.1^2 / 4 = 0.0051034.
	// Fold: P = R + 0.05^2 = 0.0076034; K = P / (P + R) = 0.598372;
	// mean = log 2 + K (log 2.2 - log 2) = 0.750178 (2.117377 steps/s);
	// P' = (1 - K) P = 0.0030537 (sigma 0.0552607).
	assert.InDelta(t, 2.1173771534112564, tr[0].Rate, 1e-9)
	assert.InDelta(t, 0.055260739425410356, tr[0].Sigma, 1e-9)
	assert.Equal(t, 8, tr[0].Windows)
	assert.Equal(t, 2, tr[0].Segments)
	assert.InDelta(t, 2.2, tr[0].Median, 1e-12, "the median of the latest segment")
	assert.Equal(t, 0, tr[0].Resets)
}

// TestCapabilityIgnoresSlowWindows: a job that stalls or slows down on
// purpose in a fifth of its windows keeps its capability (the
// 0.8-quantile), while the median drops with them.
func TestCapabilityIgnoresSlowWindows(t *testing.T) {
	l := newLearner(t, learn.Config{})
	r := newRunner(l, "a")
	// 2 warm-up windows, then 10 windows, two of them (windows 5 and 9,
	// not in a row) at a tenth of the rate.
	slow := map[int]float64{5: 0.1, 9: 0.1}
	r.run(t, topology.A100, 1, 12, func(i int) float64 {
		if f, ok := slow[i]; ok {
			return 8 * f
		}
		return 8
	})
	tr := l.Tracks("a")
	assert.InDelta(t, 8, tr[0].Rate, 1e-9, "the 0.8-quantile of 8 windows at 8 and 2 at 0.8")
	assert.Equal(t, 0, tr[0].Resets)
	// A mean would have paid the slow-down: 6.56 steps/s (arithmetic, as
	// Gavel's moving average), 5.05 (geometric); the median stays at 8.
	assert.InDelta(t, 6.56, (8*8+2*0.8)/10.0, 1e-9)
	assert.InDelta(t, 5.05, math.Exp((8*math.Log(8)+2*math.Log(0.8))/10), 0.005)
	assert.InDelta(t, 8, tr[0].Median, 1e-9)
	// A fifth of the windows slow, in a row for fewer than PhaseWindows.
	l2 := newLearner(t, learn.Config{})
	r2 := newRunner(l2, "b")
	r2.run(t, topology.A100, 1, 22, func(i int) float64 {
		if i%5 == 0 && i > 2 {
			return 1
		}
		return 8
	})
	tr2 := l2.Tracks("b")
	assert.InDelta(t, 8, tr2[0].Rate, 1e-9)
	assert.InDelta(t, 8, tr2[0].Median, 1e-9)
}

// TestPhaseChange: three windows in a row beyond three sigmas on the same
// side are a phase change: the track drops what came before and restarts
// from those windows; two are not.
func TestPhaseChange(t *testing.T) {
	l := newLearner(t, learn.Config{})
	r := newRunner(l, "a")
	r.run(t, topology.H100, 1, 12, steady(10))
	r.run(t, topology.H100, 1, 2+12, func(i int) float64 {
		if i >= 2 && i < 4 {
			return 5 // two slow windows: not a phase
		}
		return 10
	})
	tr := l.Tracks("a")
	assert.Equal(t, 0, tr[0].Resets)
	assert.InDelta(t, 10, tr[0].Rate, 1e-9)
	// Now it halves for good.
	r.run(t, topology.H100, 1, 2+3, func(i int) float64 {
		if i >= 2 {
			return 5
		}
		return 10
	})
	tr = l.Tracks("a")
	assert.Equal(t, 1, tr[0].Resets)
	assert.InDelta(t, 5, tr[0].Rate, 1e-9, "only the 3 windows of the new phase remain")
	assert.Equal(t, 3, tr[0].Segments, "two closed segments and the running one")
	// And comes back: a phase change upwards too.
	r.run(t, topology.H100, 1, 2+3, func(i int) float64 { return 10 })
	assert.InDelta(t, 10, l.Tracks("a")[0].Rate, 1e-9)
	assert.Equal(t, 2, l.Tracks("a")[0].Resets)
}

// TestScaling: measured at 1 and 4 GPUs of one type, the job's exponent
// is fitted; a type measured at 4 GPUs only is projected to the
// reference count by it.
func TestScaling(t *testing.T) {
	l := newLearner(t, learn.Config{})
	require.NoError(t, l.Register("a", learn.JobInfo{GPUs: 1}))
	r := newRunner(l, "a")
	r.run(t, topology.V100, 1, 6, steady(10))
	r.run(t, topology.V100, 4, 6, steady(30))
	r.run(t, topology.K80, 4, 6, steady(6))
	e := l.Estimate("a", topology.V100)
	// The slope from v100: log(3)/log(4) = 0.7925 with precision
	// (log 4)^2 / (2 R) = 188.3 (R = 0.0051034 per track, the weighted
	// least squares over two points); the prior 1 with precision 16.
	// b = (16 + 0.7925 * 188.3) / (16 + 188.3) = 0.8088.
	R := qVar08 * 0.01 / 4
	prec := math.Log(4) * math.Log(4) / (2 * R)
	b := (16 + math.Log(3)/math.Log(4)*prec) / (16 + prec)
	assert.InDelta(t, b, e.Scaling, 1e-9)
	assert.Equal(t, 1, e.GPUs)
	k := l.Estimate("a", topology.K80)
	assert.Equal(t, learn.SourceMeasured, k.Source)
	assert.InDelta(t, math.Log(6)-b*math.Log(4), k.LogMean, 1e-9, "6 steps/s on 4 k80s is 6 / 4^b on one")
	assert.InDelta(t, math.Sqrt(R+math.Log(4)*math.Log(4)/(16+prec)), k.Sigma, 1e-9)
	assert.InDelta(t, math.Exp(k.LogMean+b*math.Log(8)), k.Rate(8), 1e-9, "Rate scales by GPUs^Scaling")
	assert.Equal(t, 0.0, learn.Estimate{}.Rate(4))
	// Register a new reference count: the same data, projected to 4.
	require.NoError(t, l.Register("a", learn.JobInfo{GPUs: 4}))
	assert.InDelta(t, math.Log(6), l.Estimate("a", topology.K80).LogMean, 1e-9)
}

// TestClaims: a claim is weak evidence; measured beats claimed.
func TestClaims(t *testing.T) {
	l := newLearner(t, learn.Config{})
	require.NoError(t, l.Register("a", learn.JobInfo{GPUs: 1, Claims: map[topology.GPUType]float64{topology.H100: 50, topology.A100: 20}}))
	r := newRunner(l, "a")
	r.run(t, topology.A100, 1, 6, steady(10))
	a := l.Estimate("a", topology.A100)
	assert.Equal(t, learn.SourceMeasured, a.Source)
	assert.InDelta(t, 10, a.Mean, 1e-9, "the claim of 20 on a100 is ignored: measured")
	h := l.Estimate("a", topology.H100)
	assert.Equal(t, learn.SourceNone, h.Source, "h100 is not a type the learner knows yet")
	r.run(t, topology.H100, 1, 1, steady(40)) // one warm-up window: h100 now known, not measured
	h = l.Estimate("a", topology.H100)
	assert.Equal(t, learn.SourceClaim, h.Source)
	assert.InDelta(t, 50, h.Mean, 1e-9)
	assert.InDelta(t, 1, h.Sigma, 1e-12, "ClaimSigma, no prior")
}

// TestModelPrior: a job that names its kind gets the table's shape at its
// own level.
func TestModelPrior(t *testing.T) {
	tab := gavel.Simulation()
	l := newLearner(t, learn.Config{Model: tab})
	kind := perfmodel.JobKey{Model: "ResNet-50", BatchSize: 64, ScaleFactor: 1}
	require.NoError(t, l.Register("a", learn.JobInfo{GPUs: 1, Kind: &kind}))
	v100, _ := tab.Throughput(kind, topology.V100)
	k80, _ := tab.Throughput(kind, topology.K80)
	r := newRunner(l, "a")
	r.run(t, topology.K80, 1, 1, steady(1)) // makes k80 known, no window measured
	e := l.Estimate("a", topology.K80)
	assert.Equal(t, learn.SourcePrior, e.Source)
	assert.InDelta(t, k80, e.Mean, 1e-9, "no evidence: the table's rate")
	assert.InDelta(t, 0.5, e.Sigma, 1e-12)
	r.run(t, topology.V100, 1, 6, steady(2*v100))
	e = l.Estimate("a", topology.K80)
	// Level: log 2 from v100 with variance R + 0.5^2; the prior on k80:
	// log(2 k80), variance 0.25 + R + 0.25.
	R := qVar08 * 0.01 / 4
	assert.InDelta(t, math.Log(2*k80), e.LogMean, 1e-9)
	assert.InDelta(t, math.Sqrt(0.5+R), e.Sigma, 1e-9)
}

// TestPopulationPrior: jobs that all run twice as fast on h100 as on a100
// give a new job measured on a100 the prior of twice its rate on h100.
func TestPopulationPrior(t *testing.T) {
	l := newLearner(t, learn.Config{})
	const n = 9
	for i := range n {
		r := newRunner(l, string(rune('a'+i)))
		r.run(t, topology.A100, 1, 6, steady(5))
		r.run(t, topology.H100, 1, 6, steady(10))
	}
	st := l.Refresh()
	assert.Equal(t, learn.FitStats{Rows: n, Types: 2, Entries: 2 * n, Rank: 0, References: n, ResidualSigma: 0.01}, learn.FitStats{
		Rows: st.Rows, Types: st.Types, Entries: st.Entries, Rank: st.Rank, References: st.References, ResidualSigma: st.ResidualSigma},
		"rank 0 with 2 types; no residual but the floor")
	r := newRunner(l, "new")
	r.run(t, topology.A100, 1, 6, steady(3))
	e := l.Estimate("new", topology.H100)
	assert.Equal(t, learn.SourcePrior, e.Source)
	assert.InDelta(t, 6, e.Mean, 1e-9)
	// Identical rows weigh alike: n_eff = 9; no spread: MinPriorSigma.
	assert.InDelta(t, 0.2*math.Sqrt(1+1.0/n), e.Sigma, 1e-9)
}

// TestObservationErrors: each bad report is an error of its kind naming
// its field, and leaves the state as it was.
func TestObservationErrors(t *testing.T) {
	l := newLearner(t, learn.Config{})
	good := learn.Observation{Type: topology.V100, GPUs: 2, Segment: 5, Steps: 100, Time: 1000}
	observe(t, l, "a", good)
	before, err := l.Snapshot()
	require.NoError(t, err)
	cases := []struct {
		name  string
		job   string
		o     learn.Observation
		kind  error
		field string
	}{
		{"NaN steps", "a", learn.Observation{Type: "v100", GPUs: 2, Segment: 5, Steps: math.NaN(), Time: 1100}, learn.ErrInvalidObservation, "Steps"},
		{"infinite time", "a", learn.Observation{Type: "v100", GPUs: 2, Segment: 5, Steps: 200, Time: math.Inf(1)}, learn.ErrInvalidObservation, "Time"},
		{"negative steps", "a", learn.Observation{Type: "v100", GPUs: 2, Segment: 5, Steps: -1, Time: 1100}, learn.ErrInvalidObservation, "Steps"},
		{"absurd steps", "a", learn.Observation{Type: "v100", GPUs: 2, Segment: 5, Steps: 1e300, Time: 1100}, learn.ErrInvalidObservation, "Steps"},
		{"no GPUs", "a", learn.Observation{Type: "v100", GPUs: 0, Segment: 5, Steps: 200, Time: 1100}, learn.ErrInvalidObservation, "GPUs"},
		{"absurd GPUs", "a", learn.Observation{Type: "v100", GPUs: 1 << 30, Segment: 5, Steps: 200, Time: 1100}, learn.ErrInvalidObservation, "GPUs"},
		{"steps back", "a", learn.Observation{Type: "v100", GPUs: 2, Segment: 5, Steps: 99, Time: 1100}, learn.ErrOutOfOrder, "Steps"},
		{"time back", "a", learn.Observation{Type: "v100", GPUs: 2, Segment: 5, Steps: 200, Time: 999}, learn.ErrOutOfOrder, "Time"},
		{"time back in a new segment", "a", learn.Observation{Type: "v100", GPUs: 2, Segment: 6, Steps: 0, Time: 999}, learn.ErrOutOfOrder, "Time"},
		{"segment back", "a", learn.Observation{Type: "v100", GPUs: 2, Segment: 4, Steps: 200, Time: 1100}, learn.ErrOutOfOrder, "Segment"},
		{"type changes in a segment", "a", learn.Observation{Type: "k80", GPUs: 2, Segment: 5, Steps: 200, Time: 1100}, learn.ErrInvalidObservation, "Type"},
		{"GPUs change in a segment", "a", learn.Observation{Type: "v100", GPUs: 4, Segment: 5, Steps: 200, Time: 1100}, learn.ErrInvalidObservation, "GPUs"},
		{"a rate past MaxRate", "a", learn.Observation{Type: "v100", GPUs: 2, Segment: 5, Steps: 1e14, Time: 1100}, learn.ErrInvalidObservation, "Steps"},
		{"bad type", "a", learn.Observation{Type: "V100 GPU", GPUs: 2, Segment: 6, Steps: 200, Time: 1100}, learn.ErrInvalidObservation, "Type"},
		{"no name", "", good, learn.ErrInvalidJob, ""},
		{"a NUL in the name", "a\x00b", good, learn.ErrInvalidJob, ""},
		{"a long name", string(make([]byte, learn.MaxKeyLen+1)), good, learn.ErrInvalidJob, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := l.Observe(c.job, c.o)
			require.ErrorIs(t, err, c.kind)
			var le *learn.Error
			require.True(t, errors.As(err, &le))
			assert.Equal(t, c.field, le.Field)
			after, err := l.Snapshot()
			require.NoError(t, err)
			assert.Equal(t, string(before), string(after), "the state changed")
		})
	}
	assert.EqualError(t, l.Observe("a", learn.Observation{Type: "v100", GPUs: 2, Segment: 5, Steps: 99, Time: 1100}),
		`learn: job "a": Steps: out of order: 99 after 100 in segment 5`)
}

// TestLimits: the bounds of Config are errors of kind ErrLimit (or
// ErrUnknownType outside Config.Types), and the history evicts its
// oldest row.
func TestLimits(t *testing.T) {
	l := newLearner(t, learn.Config{MaxJobs: 2, MaxTypes: 2, MaxTracks: 2, MaxHistory: 1})
	observe(t, l, "a", learn.Observation{Type: "v100", GPUs: 1})
	observe(t, l, "b", learn.Observation{Type: "k80", GPUs: 1})
	assert.ErrorIs(t, l.Observe("c", learn.Observation{Type: "v100", GPUs: 1}), learn.ErrLimit)
	assert.ErrorIs(t, l.Register("c", learn.JobInfo{}), learn.ErrLimit)
	assert.ErrorIs(t, l.Observe("a", learn.Observation{Type: "p100", GPUs: 1, Segment: 1}), learn.ErrLimit)
	observe(t, l, "a", learn.Observation{Type: "v100", GPUs: 2, Segment: 1})
	err := l.Observe("a", learn.Observation{Type: "k80", GPUs: 1, Segment: 2})
	assert.ErrorIs(t, err, learn.ErrLimit)
	assert.EqualError(t, err, `learn: job "a": GPUs: limit reached: k80 x1 would be the job's track 3; MaxTracks is 2`)
	observe(t, l, "a", learn.Observation{Type: "v100", GPUs: 1, Segment: 2}) // an existing track
	fixed := newLearner(t, learn.Config{Types: []topology.GPUType{"v100"}})
	assert.ErrorIs(t, fixed.Observe("a", learn.Observation{Type: "k80", GPUs: 1}), learn.ErrUnknownType)

	h := newLearner(t, learn.Config{MaxHistory: 2})
	for _, name := range []string{"x", "y", "z"} {
		newRunner(h, name).run(t, topology.V100, 1, 4, steady(1))
		h.Forget(name)
	}
	active, remembered := h.Jobs()
	assert.Equal(t, 0, active)
	assert.Equal(t, 2, remembered, "x evicted")
	assert.Equal(t, 2, h.Refresh().Rows)
}

func TestConfigErrors(t *testing.T) {
	for _, c := range []struct {
		cfg   learn.Config
		field string
	}{
		{learn.Config{Window: -1}, "Window"},
		{learn.Config{Quantile: 1}, "Quantile"},
		{learn.Config{Rank: 4}, "Rank"},
		{learn.Config{MaxWindows: 2}, "MaxWindows"},
		{learn.Config{PhaseWindows: 40}, "PhaseWindows"},
		{learn.Config{Drift: math.NaN()}, "Drift"},
		{learn.Config{Types: []topology.GPUType{"v100", "v100"}}, "Types"},
		{learn.Config{Types: []topology.GPUType{"V100"}}, "Types"},
		{learn.Config{MaxTypes: 1, Types: []topology.GPUType{"v100", "k80"}}, "Types"},
	} {
		_, err := learn.New(c.cfg)
		require.ErrorIs(t, err, learn.ErrInvalidConfig, c.field)
		var le *learn.Error
		require.True(t, errors.As(err, &le))
		assert.Equal(t, c.field, le.Field)
	}
	l := newLearner(t, learn.Config{WarmupWindows: -1, Rank: -1, MaxHistory: -1})
	assert.Equal(t, 0, l.Config().WarmupWindows)
	assert.Equal(t, 0, l.Config().Rank)
	assert.Equal(t, 60.0, l.Config().Window)
}

func TestRegisterErrors(t *testing.T) {
	l := newLearner(t, learn.Config{})
	for _, c := range []struct {
		info  learn.JobInfo
		field string
	}{
		{learn.JobInfo{GPUs: -1}, "GPUs"},
		{learn.JobInfo{Kind: &perfmodel.JobKey{}}, "Kind"},
		{learn.JobInfo{Claims: map[topology.GPUType]float64{"v100": math.Inf(1)}}, "Claims"},
		{learn.JobInfo{Claims: map[topology.GPUType]float64{"v100": 1e-300}}, "Claims"},
		{learn.JobInfo{Claims: map[topology.GPUType]float64{"": 1}}, "Claims"},
	} {
		err := l.Register("a", c.info)
		require.ErrorIs(t, err, learn.ErrInvalidJob)
		var le *learn.Error
		require.True(t, errors.As(err, &le))
		assert.Equal(t, c.field, le.Field)
	}
	active, _ := l.Jobs()
	assert.Equal(t, 0, active)
}

// TestObserveAllocates: a report of a known job on a known track
// allocates nothing, whether or not it closes a window; nor does one
// that starts a new segment on a known track.
func TestObserveAllocates(t *testing.T) {
	l := newLearner(t, learn.Config{})
	r := newRunner(l, "a")
	r.run(t, topology.V100, 4, 40, steady(5))
	r.run(t, topology.K80, 4, 4, steady(1))
	o := learn.Observation{Type: topology.V100, GPUs: 4, Segment: 100, Steps: r.steps, Time: r.time}
	require.NoError(t, l.Observe("a", o))
	allocs := testing.AllocsPerRun(1000, func() {
		o.Time += 30
		o.Steps += 150
		if err := l.Observe("a", o); err != nil {
			t.Fatal(err)
		}
	})
	assert.Zero(t, allocs)
	allocs = testing.AllocsPerRun(100, func() {
		o.Segment++
		o.Time += 30
		if err := l.Observe("a", o); err != nil {
			t.Fatal(err)
		}
	})
	assert.Zero(t, allocs)
}

// TestVersionTolerance: a job's Version changes when it is first
// measured on a type and when what it measured moves beyond
// Config.Tolerance, not at every report of a steady rate (the open
// segment's variance aside); without a tolerance, at every report.
func TestVersionTolerance(t *testing.T) {
	l := newLearner(t, learn.Config{})
	r := newRunner(l, "a")
	r.run(t, topology.V100, 1, 2, steady(10)) // warm-up only
	v0 := l.Version("a")
	r.run(t, topology.V100, 1, 3, steady(10)) // measured from its 3rd window
	v1 := l.Version("a")
	assert.NotEqual(t, v0, v1, "first measured")
	r.run(t, topology.V100, 1, 8, steady(10)) // the same rate, a new segment
	assert.Equal(t, v1, l.Version("a"), "a steady rate moves nothing")
	r.run(t, topology.V100, 1, 8, steady(13)) // 30% faster
	assert.NotEqual(t, v1, l.Version("a"), "a rate 30% faster")

	none := newLearner(t, learn.Config{Tolerance: -1})
	assert.Equal(t, -1.0, none.Config().Tolerance)
	r = newRunner(none, "a")
	r.run(t, topology.V100, 1, 6, steady(10))
	v := none.Version("a")
	r.run(t, topology.V100, 1, 1, steady(10))
	assert.NotEqual(t, v, none.Version("a"), "every report")

	_, err := learn.New(learn.Config{Tolerance: 2})
	require.ErrorIs(t, err, learn.ErrInvalidConfig)
}

// TestChanged: Changed lists the jobs whose Version changed after a
// clock, the latest last; all after a refit that moved the population
// or from clock 0. Once its variance has settled (a few segments), a job
// that reports its steady rate changes no Version, and a Refresh with
// nothing changed beyond the tolerance does not fit.
func TestChanged(t *testing.T) {
	types := []topology.GPUType{topology.A100, topology.K80, topology.V100}
	l := newLearner(t, learn.Config{Types: types})
	runners := map[string]*runner{}
	names := []string{"a", "b", "c"}
	cycle := func(name string, i int) {
		runners[name].run(t, topology.V100, 1, 6, steady(float64(10+i)))
		runners[name].run(t, topology.K80, 1, 6, steady(float64(3+i)))
	}
	for i, name := range names {
		runners[name] = newRunner(l, name)
		for range 5 {
			cycle(name, i)
		}
	}
	_, clock, all := l.Changed(0, nil)
	assert.True(t, all, "from 0")
	st := l.Refresh()
	assert.Equal(t, 3, st.Rows)
	changed, clock, all := l.Changed(clock, nil)
	assert.True(t, all, "the first fit")
	assert.Empty(t, changed)
	runners["b"].run(t, topology.A100, 1, 6, steady(30))
	runners["a"].run(t, topology.A100, 1, 6, steady(25))
	changed, clock, all = l.Changed(clock, nil)
	assert.False(t, all)
	assert.Equal(t, []string{"b", "a"}, changed, "in order of their changes")
	changed, _, all = l.Changed(clock, changed[:0])
	assert.False(t, all)
	assert.Empty(t, changed)

	// Steady reports: no Version moves, and Refresh does not fit again.
	for i, name := range names {
		cycle(name, i)
	}
	st = l.Refresh()
	_, clock, _ = l.Changed(clock, nil)
	for i, name := range names {
		cycle(name, i)
	}
	assert.Equal(t, st, l.Refresh(), "nothing changed: the last fit's stats")
	changed, _, all = l.Changed(clock, nil)
	assert.False(t, all)
	assert.Empty(t, changed, fmt.Sprint("steady rates changed versions: ", changed))
}
