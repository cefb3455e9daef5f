package sim

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/gpusched/gpusched/allocation"
	"github.com/gpusched/gpusched/perfmodel"
	"github.com/gpusched/gpusched/perfmodel/gavel"
	"github.com/gpusched/gpusched/perfmodel/hw"
	"github.com/gpusched/gpusched/scheduler"
	"github.com/gpusched/gpusched/topology"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// hiddenRun runs Gavel's continuous single-GPU experiment in small (its
// generator's jobs at rate jobs/h on 12 V100, 12 P100 and 12 K80, the
// jobs measured from..to) with the truth hidden, the policies seeing
// rates; it returns the measured jobs' mean JCT in hours and the result.
var capacity = []int{12, 12, 12}

func hiddenRun(t testing.TB, h Hidden, n, from, to int, rate float64, seed uint64) (float64, *Result) {
	t.Helper()
	jobs, err := (&GavelWorkload{Rate: rate, Seed: seed}).Generate(n)
	require.NoError(t, err)
	model, err := profileModel()
	require.NoError(t, err)
	ids := make([]int, 0, to-from)
	for _, j := range jobs[from:to] {
		ids = append(ids, j.ID)
	}
	h.Model, h.Seed = model, seed
	cfg := Config{
		Types: []topology.GPUType{topology.V100, topology.P100, topology.K80}, Capacity: capacity,
		Policy: &allocation.MaxMinFairness{}, JobsToComplete: ids,
		Hidden: &h,
	}
	res, err := Run(context.Background(), cfg, jobs)
	require.NoError(t, err, "%s", h.Rates)
	sum, cnt := 0.0, 0
	want := map[int]bool{}
	for _, id := range ids {
		want[id] = true
	}
	for _, r := range res.Records {
		if want[r.ID] {
			sum += r.JCT()
			cnt++
		}
	}
	require.Equal(t, len(ids), cnt)
	return sum / float64(cnt) / 3600, res
}

// profileModel is the spec model (perfmodel/hw) given each of Gavel's
// jobs measured on one V100 (a profile on one type, as Sia takes at
// submission): it predicts the other types from their specifications.
func profileModel() (*perfmodel.SpecModel, error) {
	var obs []perfmodel.Observation
	for _, o := range perfmodel.Observations(gavel.Simulation(), perfmodel.FP32, "Gavel's simulation table, V100 only") {
		if o.Type == topology.V100 {
			obs = append(obs, o)
		}
	}
	return hw.Model(obs)
}

// Gavel's continuous single-GPU experiment in small, the truth (Gavel's
// simulation table) hidden, with noisy progress and a warm-up at every
// start: learning from nothing, the mean JCT of the measured jobs is
// within 5% of the oracle's (every rate known), and nearer it than the
// type-agnostic scheduler's and the spec model's (each job profiled on
// one V100, perfmodel/hw predicting the other types); exploration stays
// within its budget (5% of the cluster's GPU time, and a round).
func TestHiddenLearnedNearOracle(t *testing.T) {
	if testing.Short() {
		t.Skip("four simulations of 400 jobs")
	}
	jct := map[Rates]float64{}
	var learned *Result
	for _, r := range []Rates{RatesOracle, RatesLearned, RatesModel, RatesAgnostic} {
		var res *Result
		jct[r], res = hiddenRun(t, Hidden{Rates: r}, 400, 100, 300, 1.6, 0)
		t.Logf("%-8s mean JCT %.2f h, explored %.1f GPU-h, rounds %d", r, jct[r], res.ExploredGPUSeconds/3600, res.Rounds)
		if r == RatesLearned {
			learned = res
		}
	}
	o := jct[RatesOracle]
	assert.InDelta(t, 1, jct[RatesLearned]/o, 0.05, "learned over oracle")
	for _, r := range []Rates{RatesModel, RatesAgnostic} {
		assert.Less(t, math.Abs(jct[RatesLearned]-o), math.Abs(jct[r]-o), "learned nearer the oracle than %s", r)
	}
	cluster := 36 * 360 * float64(learned.Rounds)
	assert.LessOrEqual(t, learned.ExploredGPUSeconds, 0.05*cluster+36*360)
}

// With Groups (the jobs of one kind are runs of one program) a job
// starts from what the earlier runs of its kind measured: learning is
// then nearer the oracle than from nothing, and explores far less.
func TestHiddenGroupsNearerTheOracle(t *testing.T) {
	if testing.Short() {
		t.Skip("three simulations of 400 jobs")
	}
	o, _ := hiddenRun(t, Hidden{Rates: RatesOracle}, 400, 100, 300, 1.6, 0)
	l, lr := hiddenRun(t, Hidden{Rates: RatesLearned}, 400, 100, 300, 1.6, 0)
	g, gr := hiddenRun(t, Hidden{Rates: RatesLearned, Groups: true}, 400, 100, 300, 1.6, 0)
	t.Logf("oracle %.2f h; learned %.2f h, explored %.1f GPU-h; grouped %.2f h, explored %.1f GPU-h", o, l, lr.ExploredGPUSeconds/3600, g, gr.ExploredGPUSeconds/3600)
	assert.InDelta(t, 1, g/o, 0.02, "grouped over oracle")
	assert.Less(t, gr.ExploredGPUSeconds, lr.ExploredGPUSeconds/4, "grouped explores a quarter of what learning from nothing does, or less")
}

// A Hidden simulation is deterministic for its seed (noise, bias, the
// learner), and the bias makes the truth slower than the model.
func TestHiddenDeterministicAndBiased(t *testing.T) {
	run := func(h Hidden) *Result {
		jobs, err := (&GavelWorkload{Rate: 3, Seed: 1}).Generate(60)
		require.NoError(t, err)
		cfg := Config{Types: []topology.GPUType{topology.V100, topology.K80}, Capacity: []int{4, 4}, Policy: &allocation.MaxMinFairness{}, Hidden: &h}
		res, err := Run(context.Background(), cfg, jobs)
		require.NoError(t, err)
		return res
	}
	a, b := run(Hidden{Seed: 3, Bias: [2]float64{1.2, 1.8}}), run(Hidden{Seed: 3, Bias: [2]float64{1.2, 1.8}})
	require.Equal(t, a.Records, b.Records)
	fast, slow := run(Hidden{Seed: 3, Rates: RatesOracle}), run(Hidden{Seed: 3, Rates: RatesOracle, Bias: [2]float64{1.2, 1.8}})
	mean := func(r *Result) float64 {
		s := 0.0
		for _, rec := range r.Records {
			s += rec.JCT()
		}
		return s / float64(len(r.Records))
	}
	t.Logf("oracle mean JCT %.2f h unbiased, %.2f h with the truth 1.2 to 1.8 times slower", mean(fast)/3600, mean(slow)/3600)
	assert.Greater(t, mean(slow), 1.1*mean(fast))
}

// Hidden's settings are checked, each error naming the field.
func TestHiddenInvalid(t *testing.T) {
	jobs, err := (&GavelWorkload{Rate: 3}).Generate(5)
	require.NoError(t, err)
	base := Config{Types: []topology.GPUType{topology.V100}, Capacity: []int{4}, Policy: &allocation.MaxMinFairness{}}
	for _, c := range []struct {
		h    Hidden
		mod  func(*Config)
		want string
	}{
		{Hidden{Rates: RatesModel}, nil, "Hidden.Model"},
		{Hidden{Rates: 9}, nil, "Hidden.Rates"},
		{Hidden{Window: 400}, nil, "Hidden.Window"},
		{Hidden{Window: 0.1}, nil, "Hidden.Window"},
		{Hidden{Warmup: 360}, nil, "Hidden.Warmup"},
		{Hidden{Noise: math.NaN()}, nil, "Hidden.Noise"},
		{Hidden{Warmup: 1000}, nil, "Hidden.Warmup"},
		{Hidden{Bias: [2]float64{0.5, 2}}, nil, "Hidden.Bias"},
		{Hidden{Bias: [2]float64{2, 1.5}}, nil, "Hidden.Bias"},
		{Hidden{}, func(c *Config) { c.Compat = allocation.CompatGavel }, "Compat"},
		{Hidden{Explore: scheduler.Explore{Budget: 3}}, nil, "Explore.Budget"},
	} {
		cfg := base
		h := c.h
		cfg.Hidden = &h
		if c.mod != nil {
			c.mod(&cfg)
		}
		_, err := Run(context.Background(), cfg, jobs)
		require.ErrorIs(t, err, ErrInvalid, "%+v", c.h)
		assert.Contains(t, err.Error(), c.want)
	}
}

// Tenants that misreport their progress (Hidden.Misreport: every fourth
// job of the trace is the liar's) against learning from honest reports:
// the liar's mean JCT and the others', each lie beside the honest run.
// What a lie moves is the estimator's view of the liar's own jobs, on the
// types they really ran on: inflating or deflating every report scales
// every rate alike (the policies normalise it away); inflating one type,
// or sandbagging one, moves the liar's own jobs between types. The goal
// of issue #41: no lie wins the liar more than a few percent, nor costs
// the others more. The conservation audit (scheduler.Explore.Audit: the
// jobs declare their work) names no honest job, and those of the liar's
// jobs whose lie changes what their reports add up to by more than its
// slack (10%): every one that scales every report, most of those that
// inflate the V100 (where they run much of their work) and most of those
// that sandbag the K80 (their count jumps forward when they leave it).
func TestHiddenMisreport(t *testing.T) {
	if testing.Short() {
		t.Skip("five simulations of 400 jobs")
	}
	lies := []struct {
		name   string
		f      func(t topology.GPUType) float64
		caught float64 // the least fraction of the liar's jobs the audit names
	}{
		{"honest", nil, 0},
		{"inflates x3", func(topology.GPUType) float64 { return 3 }, 1},
		{"deflates x0.3", func(topology.GPUType) float64 { return 0.3 }, 1},
		{"inflates v100 x3", func(t topology.GPUType) float64 { return map[bool]float64{true: 3, false: 1}[t == topology.V100] }, 0.8},
		{"inflates v100 x30", func(t topology.GPUType) float64 { return map[bool]float64{true: 30, false: 1}[t == topology.V100] }, 0.8},
		{"sandbags k80 x0.03", func(t topology.GPUType) float64 { return map[bool]float64{true: 0.03, false: 1}[t == topology.K80] }, 0.6},
		{"sandbags k80 x0.3", func(t topology.GPUType) float64 { return map[bool]float64{true: 0.3, false: 1}[t == topology.K80] }, 0.6},
	}
	var honestLiar, honestOthers float64
	for _, lie := range lies {
		m := misreportRun(t, &allocation.MaxMinFairness{}, scheduler.Explore{}, lie.f)
		ml, mo := m.liarJCT, m.othersJCT
		if lie.f == nil {
			honestLiar, honestOthers = ml, mo
		}
		t.Logf("%-18s liar's mean JCT %.2f h (%+.1f%%), the others' %.2f h (%+.1f%%); audit failed: %d of the liar's %d jobs, %d of the others' %d",
			lie.name, ml, 100*(ml/honestLiar-1), mo, 100*(mo/honestOthers-1), m.liarFailed, m.liarJobs, m.othersFailed, m.othersJobs)
		assert.GreaterOrEqual(t, ml, 0.95*honestLiar, "%s: the liar gains", lie.name)
		assert.LessOrEqual(t, mo, 1.05*honestOthers, "%s: the others lose", lie.name)
		assert.Zero(t, m.othersFailed, "%s: an honest job fails the audit", lie.name)
		if lie.f == nil {
			assert.Zero(t, m.liarFailed, "honest")
		} else {
			assert.GreaterOrEqual(t, float64(m.liarFailed), lie.caught*float64(m.liarJobs), "%s: the audit names too few of the liar's jobs", lie.name)
		}
	}
}

// misreport is what misreportRun measured: the mean JCT in hours of the
// liar's measured jobs and of the others', their counts, and how many of
// each failed the conservation audit.
type misreport struct {
	liarJCT, othersJCT       float64
	liarJobs, othersJobs     int
	liarFailed, othersFailed int
}

// misreportRun runs the trace in small (400 jobs at 1.6 an hour on 12 +
// 12 + 12, jobs 100 to 300 measured) under pol with hidden truth, every
// fourth job the liar's, its reports on a type scaled by lie (nil: the
// truth), and returns what it measured.
func misreportRun(t *testing.T, pol allocation.Policy, explore scheduler.Explore, lie func(topology.GPUType) float64) misreport {
	t.Helper()
	liar := func(id int) bool { return id%4 == 0 }
	jobs, err := (&GavelWorkload{Rate: 1.6}).Generate(400)
	require.NoError(t, err)
	var ids []int
	for _, j := range jobs[100:300] {
		ids = append(ids, j.ID)
	}
	h := &Hidden{Explore: explore}
	if lie != nil {
		h.Misreport = func(id int, t topology.GPUType) float64 {
			if liar(id) {
				return lie(t)
			}
			return 1
		}
	}
	res, err := Run(context.Background(), Config{
		Types: []topology.GPUType{topology.V100, topology.P100, topology.K80}, Capacity: []int{12, 12, 12},
		Policy: pol, JobsToComplete: ids, Hidden: h,
	}, jobs)
	require.NoError(t, err)
	var l, o []float64
	var m misreport
	for _, r := range res.Records {
		if r.ID < jobs[100].ID || r.ID > jobs[299].ID {
			continue
		}
		if liar(r.ID) {
			l = append(l, r.JCT())
		} else {
			o = append(o, r.JCT())
		}
	}
	for _, id := range res.AuditFailed {
		if id < jobs[100].ID || id > jobs[299].ID {
			continue
		}
		if liar(id) {
			m.liarFailed++
		} else {
			m.othersFailed++
		}
	}
	m.liarJCT, m.othersJCT, m.liarJobs, m.othersJobs = meanOf(l)/3600, meanOf(o)/3600, len(l), len(o)
	return m
}

func meanOf(xs []float64) float64 {
	s := 0.0
	for _, x := range xs {
		s += x
	}
	return s / float64(max(len(xs), 1))
}

// Under Gavel's throughput maximisation, which adds rates across jobs, a
// tenant that inflates every report by 3 shortens its jobs' mean JCT by
// about 30% at the others' expense; with Explore.Normalise (each job's
// rates over its fastest), it gains nothing: the policies see the shape
// of its rates, not their scale.
func TestHiddenMisreportMaxThroughput(t *testing.T) {
	if testing.Short() {
		t.Skip("four simulations of 400 jobs")
	}
	run := func(lie float64, normalise bool) (float64, float64) {
		m := misreportRun(t, &allocation.MaxThroughput{}, scheduler.Explore{Normalise: normalise}, func(topology.GPUType) float64 { return lie })
		return m.liarJCT, m.othersJCT
	}
	for _, normalise := range []bool{false, true} {
		hl, ho := run(1, normalise)
		ll, lo := run(3, normalise)
		t.Logf("normalise %v: honest: liar's %.2f h, others' %.2f h; inflating x3: liar's %.2f h (%+.1f%%), others' %.2f h (%+.1f%%)",
			normalise, hl, ho, ll, 100*(ll/hl-1), lo, 100*(lo/ho-1))
		if normalise {
			assert.GreaterOrEqual(t, ll, 0.98*hl, "normalised: the liar gains nothing")
			assert.LessOrEqual(t, lo, 1.02*ho, "normalised: the others lose nothing")
		} else {
			assert.Less(t, ll, 0.9*hl, "raw rates: the lie pays (what Normalise is for)")
		}
	}
}

// Windows that do not divide the round (7.3 s, 47 s) end: a window's end
// is its index times the window, not a float remainder, which rounded to
// no step at all (issue #41's review: Run never returned).
func TestHiddenOddWindows(t *testing.T) {
	for _, w := range []float64{7.3, 47, 1} {
		jobs, err := (&GavelWorkload{Rate: 3, Seed: 2}).Generate(12)
		require.NoError(t, err)
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		res, err := Run(ctx, Config{Types: []topology.GPUType{topology.V100, topology.K80}, Capacity: []int{4, 4}, Policy: &allocation.MaxMinFairness{},
			Hidden: &Hidden{Window: w}}, jobs)
		cancel()
		require.NoError(t, err, "window %v s", w)
		assert.Len(t, res.Records, 12, "window %v s", w)
	}
}
