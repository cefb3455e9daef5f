package allocation

import (
	"context"
	"errors"
	"math"
	"testing"

	"github.com/gpusched/gpusched/allocation/lp"
	"github.com/gpusched/gpusched/perfmodel"
	"github.com/gpusched/gpusched/topology"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// allPolicies returns a fresh value of every policy of the package.
func allPolicies() []Policy {
	return []Policy{&MaxMinFairness{}, &MaxMinFairness{Agnostic: true}, &MaxThroughput{}, &MinMakespan{}, &FinishTimeFairness{},
		&WaterFilling{}, Proportional{}, Isolated{}, &FIFO{}, &Gandiva{}, &QuotaFairness{}, &QuotaFairness{WaterFilling: true}}
}

// badClasses is space-sharing data whose classes are out of range.
type badClasses struct{}

func (badClasses) Rates(a, b, k int) (float64, float64)        { return 1, 1 }
func (badClasses) ClassRates(ca, cb, k int) (float64, float64) { return 1, 1 }
func (badClasses) Classes() int                                { return 2 }
func (badClasses) Class(m int) int                             { return 5 }

// hugeClassRates is space-sharing data with one rate out of range: classes
// 0 and 1 (jobs 10 and 11) on type b.
type hugeClassRates struct{}

func (h hugeClassRates) Rates(a, b, k int) (float64, float64) { return h.ClassRates(a, b, k) }
func (hugeClassRates) ClassRates(ca, cb, k int) (float64, float64) {
	if ca == 0 && cb == 1 && k == 1 {
		return 1, 1e300
	}
	return 1, 1
}
func (hugeClassRates) Classes() int    { return 2 }
func (hugeClassRates) Class(m int) int { return m }

// Values that make no physical sense are refused by every policy with an
// error that names the job, the type and the accepted range, before any LP
// sees them (they used to reach it as "iteration limit reached" or
// "auxiliary problem did not converge", or to give X = 2.3e18).
func TestHostileProblems(t *testing.T) {
	tests := []struct {
		name   string
		modify func(p *Problem)
		msg    string
	}{
		{"throughput 1e308", func(p *Problem) { p.Jobs[1].Throughput[0] = 1e308 },
			"job 11: throughput 1e+308 on a, outside [1e-09, 1e+09] steps/s (0 means it cannot run there)"},
		{"throughput 1e-300", func(p *Problem) { p.Jobs[0].Throughput[1] = 1e-300 }, "job 10: throughput 1e-300 on b, outside"},
		{"throughput +Inf", func(p *Problem) { p.Jobs[0].Throughput[1] = math.Inf(1) }, "job 10: throughput +Inf on b"},
		{"remaining 1e308", func(p *Problem) { p.Jobs[1].RemainingSteps = 1e308 }, "job 11: remaining steps 1e+308, outside [0, 1e+18]"},
		{"capacity MaxInt", func(p *Problem) { p.Capacity[0] = math.MaxInt }, "capacity of a is 9223372036854775807, outside [0, 1073741824]"},
		{"scale factor MaxInt", func(p *Problem) { p.Jobs[0].ScaleFactor = math.MaxInt }, "job 10: scale factor 9223372036854775807, outside [1, 1073741824]"},
		{"weight 1e308", func(p *Problem) { p.Jobs[0].Weight = 1e308 }, "job 10: weight 1e+308, outside [1e-09, 1e+09] (0 means 1)"},
		{"weight NaN", func(p *Problem) { p.Jobs[0].Weight = math.NaN() }, "job 10: weight NaN"},
		{"price 1e-300", func(p *Problem) { p.Prices = []float64{1e-300, 1} }, "price of a is 1e-300, outside [1e-09, 1e+09] per GPU-hour"},
		{"now NaN", func(p *Problem) { p.Now = math.NaN() }, "now is NaN, outside"},
		{"arrival 1e300", func(p *Problem) { p.Jobs[1].Arrival = 1e300 }, "job 11: arrival 1e+300, outside [-1e+15, 1e+15] s"},
		{"deadline -Inf", func(p *Problem) { p.Jobs[1].Deadline = math.Inf(-1) }, "job 11: deadline -Inf"},
		{"entity weight Inf", func(p *Problem) { p.EntityWeights = map[string]float64{"x": math.Inf(1)} }, `entity "x": weight +Inf`},
		{"quota share 2", func(p *Problem) { p.EntityQuotas = map[string]Quota{"x": {GuaranteedShare: 2}} }, `entity "x": quota: guaranteed share 2, outside [0, 1]`},
		{"quota max share NaN", func(p *Problem) { p.EntityQuotas = map[string]Quota{"x": {MaxShare: math.NaN()}} }, `entity "x": quota: maximum share NaN`},
		{"quota share above max", func(p *Problem) {
			p.EntityQuotas = map[string]Quota{"x": {GuaranteedShare: 0.5, MaxShare: 0.25}}
		}, `entity "x": quota: guaranteed share 0.5 above its maximum share 0.25`},
		{"quota GPUs negative", func(p *Problem) {
			p.EntityQuotas = map[string]Quota{"x": {GuaranteedGPUs: map[topology.GPUType]float64{"a": -1}}}
		}, `entity "x": quota: guaranteed GPUs of a: -1, outside [0, 1073741824]`},
		{"quota GPUs Inf", func(p *Problem) {
			p.EntityQuotas = map[string]Quota{"x": {MaxGPUs: map[topology.GPUType]float64{"b": math.Inf(1)}}}
		}, `entity "x": quota: maximum GPUs of b: +Inf`},
		{"quota guarantee above limit", func(p *Problem) {
			p.EntityQuotas = map[string]Quota{"y": {}, "x": {GuaranteedGPUs: map[topology.GPUType]float64{"a": 2}, MaxGPUs: map[topology.GPUType]float64{"a": 1}}}
		}, `entity "x": quota: guaranteed GPUs of a: 2, above its maximum 1`},
		{"classes out of range", func(p *Problem) { p.Pairs = badClasses{} }, "space sharing: job 10 is in class 5 of 2"},
		{"nil throughput", func(p *Problem) { p.Jobs[0].Throughput = nil }, "job 10: 0 throughputs for 2 GPU types"},
		// A pair of negative IDs read as one job in Rounds (the second
		// job silently dropped from the round).
		{"negative ID", func(p *Problem) { p.Jobs[1].ID = -3 }, "job ID -3 is negative (IDs are 0 or more)"},
		{"pair rate NaN", func(p *Problem) {
			p.Pairs = rateTable{p, func(a, b int) (float64, float64) { return 0.5, math.NaN() }}
		}, "space sharing: jobs 10 and 11 on a: co-located rates 0.5 and NaN, outside [1e-09, 1e+09] steps/s (0 means they cannot share)"},
		{"pair rate negative", func(p *Problem) {
			p.Pairs = rateTable{p, func(a, b int) (float64, float64) { return -1, 0.5 }}
		}, "space sharing: jobs 10 and 11 on a: co-located rates -1 and 0.5, outside"},
		{"class rate 1e300", func(p *Problem) { p.Pairs = hugeClassRates{} }, "space sharing: job classes 0 and 1 on b: co-located rates 1 and 1e+300, outside"},
		{"pair rates not mirrored", func(p *Problem) {
			p.Pairs = rateTable{p, func(a, b int) (float64, float64) { return 0.5, 0.7 }}
		}, "space sharing: jobs 10 and 11 on a: co-located rates (0.5, 0.7) asked one way but (0.7, 0.5) the other"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for _, pol := range allPolicies() {
				p := twoByTwo()
				tc.modify(p)
				_, err := pol.Allocate(context.Background(), p)
				require.ErrorIs(t, err, ErrInvalidProblem, "%T", pol)
				assert.ErrorContains(t, err, tc.msg, "%T", pol)
			}
		})
	}
}

// At the largest capacity accepted, the baselines that sum capacities give
// shares in [0, 1] (an int overflow once gave X = 2.3e18).
func TestLargestCapacities(t *testing.T) {
	p := &Problem{Types: []topology.GPUType{"a", "b", "c"}, Capacity: []int{MaxCapacity, MaxCapacity, MaxCapacity}, Jobs: []Job{
		{ID: 1, ScaleFactor: MaxCapacity, Throughput: []float64{1, 1, 1}},
		{ID: 2, ScaleFactor: MaxCapacity, Throughput: []float64{1, 1, 1}},
		{ID: 3, ScaleFactor: MaxCapacity, Throughput: []float64{1, 1, 1}},
		{ID: 4, ScaleFactor: 1, Throughput: []float64{1, 1, 1}},
	}}
	p.Pairs = rateTable{p, func(a, b int) (float64, float64) { return 0.9, 0.9 }}
	for _, pol := range []Policy{Proportional{}, Isolated{}, &Gandiva{}} {
		a := allocate(t, pol, p)
		for m := range a.X {
			for k, x := range a.X[m] {
				assert.True(t, x >= 0 && x <= 1, "%T: X[%d][%d] = %v", pol, m, k, x)
			}
		}
	}
	// Proportional: every job gets n_k / sum sf = 2^30 / (3 2^30 + 1) of
	// each type.
	a := allocate(t, Proportional{}, p)
	assert.InDelta(t, 1/(3+1.0/MaxCapacity), a.X[0][0], 1e-12)
}

// answerPolicy answers with a fixed allocation, whatever the problem.
type answerPolicy struct{ a *Allocation }

func (f answerPolicy) Allocate(context.Context, *Problem) (*Allocation, error) { return f.a, nil }

// Rounds checks a policy's answer before acting on it: a policy that
// returns (nil, nil), or an X that is NaN, negative or above 1, is named in
// an error (it used to panic or be scheduled as given).
func TestRoundsRejectsBadAnswers(t *testing.T) {
	good := func() *Allocation {
		return &Allocation{Types: []topology.GPUType{"a", "b"}, JobIDs: []int{10, 11}, X: [][]float64{{0.5, 0.5}, {0.5, 0.5}}}
	}
	tests := []struct {
		name   string
		modify func(a *Allocation) *Allocation
		msg    string
	}{
		{"nil", func(*Allocation) *Allocation { return nil }, "policy allocation.answerPolicy returned no allocation and no error"},
		{"NaN", func(a *Allocation) *Allocation { a.X[1][0] = math.NaN(); return a }, "policy allocation.answerPolicy: job 11 on a: X = NaN outside [0, 1]"},
		{"negative", func(a *Allocation) *Allocation { a.X[0][1] = -1; return a }, "job 10 on b: X = -1 outside [0, 1]"},
		{"above 1", func(a *Allocation) *Allocation { a.X[0][0] = 2; return a }, "job 10 on a: X = 2 outside [0, 1]"},
		{"too much time", func(a *Allocation) *Allocation { a.X[0] = []float64{0.8, 0.8}; return a }, "job 10 gets 1.6 of the time"},
		{"too many GPUs", func(a *Allocation) *Allocation { a.X[1] = []float64{1, 0}; a.X[0] = []float64{1, 0}; return a }, "a: 2 GPUs used of 1"},
		{"rows", func(a *Allocation) *Allocation { a.X = a.X[:1]; return a }, "1 rows for 2 jobs"},
		{"row length", func(a *Allocation) *Allocation { a.X[1] = []float64{1}; return a }, "job 11: 1 entries for 2 GPU types"},
		{"job IDs", func(a *Allocation) *Allocation { a.JobIDs = []int{11, 10}; return a }, "row 0 is for job 11, the problem's job there is 10"},
		{"types", func(a *Allocation) *Allocation { a.Types = []topology.GPUType{"b", "a"}; return a }, "GPU types [b a], the problem's are [a b]"},
		{"pair", func(a *Allocation) *Allocation { a.Pairs = []Pair{{A: 0, B: 7, X: []float64{0, 0}}}; return a }, "pair 0 joins jobs 0 and 7 of 2"},
		{"pair X", func(a *Allocation) *Allocation {
			a.X = [][]float64{{0, 0}, {0, 0}}
			a.Pairs = []Pair{{A: 0, B: 1, X: []float64{math.Inf(1), 0}}}
			return a
		}, "pair (10, 11) on a: X = +Inf outside [0, 1]"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := &Rounds{Policy: answerPolicy{tc.modify(good())}}
			_, err := r.Next(context.Background(), twoByTwo(), 0)
			require.ErrorIs(t, err, ErrInvalidAllocation)
			assert.ErrorContains(t, err, tc.msg)
		})
	}
	// The good answer is accepted; without Types it gets the problem's.
	a := good()
	a.Types = nil
	r := &Rounds{Policy: answerPolicy{a}}
	rd, err := r.Next(context.Background(), twoByTwo(), 0)
	require.NoError(t, err)
	assert.Equal(t, []topology.GPUType{"a", "b"}, rd.Allocation.Types)
}

func TestRoundsConfig(t *testing.T) {
	tests := []struct {
		name string
		r    Rounds
		now  float64
		msg  string
	}{
		{"no policy", Rounds{}, 0, "Rounds has no policy"},
		{"round NaN", Rounds{Policy: Proportional{}, Mechanism: Mechanism{RoundLength: math.NaN()}}, 0, "round length NaN s"},
		{"round negative", Rounds{Policy: Proportional{}, Mechanism: Mechanism{RoundLength: -1}}, 0, "round length -1 s, outside [0, 1e+15] (0 means 360)"},
		{"reset Inf", Rounds{Policy: Proportional{}, Mechanism: Mechanism{MinResetInterval: math.Inf(1)}}, 0, "minimum reset interval +Inf s"},
		{"now", Rounds{Policy: Proportional{}}, math.Inf(1), "round at +Inf s"},
		{"servers", Rounds{Policy: Proportional{}, GPUsPerServer: []int{-4}}, 0, "GPUs per server of type 0: -4"},
		{"type order", Rounds{Policy: Proportional{}, Mechanism: Mechanism{TypeOrder: []topology.GPUType{"a", "a"}}}, 0, "TypeOrder lists a twice"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tc.r.Next(context.Background(), twoByTwo(), tc.now)
			require.ErrorIs(t, err, ErrInvalidProblem)
			assert.ErrorContains(t, err, tc.msg)
		})
	}
	// A change of types re-solves at once, in the new types.
	r := &Rounds{Policy: Proportional{}}
	_, err := r.Next(context.Background(), twoByTwo(), 0)
	require.NoError(t, err)
	p := twoByTwo()
	p.Types = append(p.Types, "c")
	p.Capacity = append(p.Capacity, 1)
	for m := range p.Jobs {
		p.Jobs[m].Throughput = append(p.Jobs[m].Throughput, 1)
	}
	rd, err := r.Next(context.Background(), p, 360)
	require.NoError(t, err)
	assert.True(t, rd.Reset)
	assert.Equal(t, p.Types, rd.Allocation.Types)
}

// failingSolver fails every solve the way a solver does on numbers it
// cannot handle.
type failingSolver struct{}

func (failingSolver) Solve(context.Context, *lp.Model) (*lp.Solution, error) {
	return nil, lp.StatusError(lp.Failed, errors.New("auxiliary problem did not converge"))
}

// A policy that fails inside its LP says which policy, on what size of
// problem, and keeps the LP's error kind.
func TestLPFailuresNamePolicy(t *testing.T) {
	for _, tc := range []struct {
		pol  Policy
		name string
	}{
		{&MaxMinFairness{Solver: failingSolver{}}, "max-min fairness"},
		{&MaxThroughput{Solver: failingSolver{}}, "max throughput"},
		{&MinMakespan{Solver: failingSolver{}}, "min makespan"},
		{&WaterFilling{Solver: failingSolver{}}, "water filling"},
	} {
		_, err := tc.pol.Allocate(context.Background(), twoByTwo())
		require.ErrorIs(t, err, lp.ErrNumerical, tc.name)
		assert.ErrorContains(t, err, "allocation: "+tc.name+" on 2 jobs and 2 GPU types: lp: numerical failure: auxiliary problem did not converge")
	}
}

// Finish-time fairness falls back to the isolated allocation when an LP
// fails, and says why; a cancelled context is an error, not a fallback.
func TestFinishTimeFairnessFallback(t *testing.T) {
	a, err := (&FinishTimeFairness{Solver: failingSolver{}}).Allocate(context.Background(), twoByTwo())
	require.NoError(t, err)
	assert.Contains(t, a.Note, "auxiliary problem did not converge; fell back to the isolated allocation")
	assertX(t, [][]float64{{0.5, 0.5}, {0.5, 0.5}}, a.X)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = (&FinishTimeFairness{}).Allocate(ctx, twoByTwo())
	require.ErrorIs(t, err, context.Canceled)
	assert.ErrorContains(t, err, "allocation: finish-time fairness on 2 jobs and 2 GPU types")
}

// constColocation answers every pair with the same rates.
type constColocation struct{ ta, tb float64 }

func (c constColocation) Colocated(a, b perfmodel.JobKey, t topology.GPUType) (float64, float64, error) {
	return c.ta, c.tb, nil
}

func TestNewTablePairsRejects(t *testing.T) {
	keys := []perfmodel.JobKey{{Model: "x", ScaleFactor: 1}, {Model: "y", ScaleFactor: 1}}
	types := []topology.GPUType{"a"}
	_, err := NewTablePairs(constColocation{math.NaN(), 1}, keys, types)
	require.ErrorIs(t, err, ErrInvalidProblem)
	assert.ErrorContains(t, err, "co-located rates of x x1 and x x1 on a are NaN and 1, outside [1e-09, 1e+09] steps/s")
	_, err = NewTablePairs(constColocation{1, -1}, keys, types)
	require.ErrorIs(t, err, ErrInvalidProblem)
	// 2,049 classes on one type: 4,198,401 pairs, more than MaxPairRates.
	many := make([]perfmodel.JobKey, 2049)
	for i := range many {
		many[i] = perfmodel.JobKey{Model: "m", BatchSize: i + 1, ScaleFactor: 1}
	}
	_, err = NewTablePairs(constColocation{1, 1}, many, types)
	require.ErrorIs(t, err, ErrInvalidProblem)
	assert.ErrorContains(t, err, "co-located rates of 2049 job classes on 1 GPU types: more than 4194304 pairs")
	// Rates that do not mirror: x with x is (0.5, 0.25) both ways.
	_, err = NewTablePairs(constColocation{0.5, 0.25}, keys, types)
	require.ErrorIs(t, err, ErrInvalidProblem)
	assert.ErrorContains(t, err, "co-located rates of x x1 and x x1 on a are (0.5, 0.25), but (0.25, 0.5) asked the other way")
	tp, err := NewTablePairs(constColocation{0.5, 0.5}, keys, types)
	require.NoError(t, err)
	ta, tb := tp.Rates(1, 0, 0)
	assert.Equal(t, [2]float64{0.5, 0.5}, [2]float64{ta, tb})
}

// A custom PairRates is checked on every pair of jobs, so a problem with
// more pairs than MaxPairRates needs a ClassPairRates; zero rates (pairs
// that cannot share) are accepted.
func TestCustomPairRatesChecked(t *testing.T) {
	p := twoByTwo()
	p.Pairs = rateTable{p, func(a, b int) (float64, float64) { return 0, 0 }}
	require.NoError(t, p.Validate())
	n := 2100 // 2100 x 2099 / 2 pairs x 2 types > 4,194,304 (2,048 jobs on one type pass)
	p.Jobs = make([]Job, n)
	for m := range p.Jobs {
		p.Jobs[m] = Job{ID: m, ScaleFactor: 1, Throughput: []float64{1, 1}}
	}
	err := p.Validate()
	require.ErrorIs(t, err, ErrInvalidProblem)
	assert.ErrorContains(t, err, "space sharing: 2100 jobs on 2 GPU types are more than 4194304 co-located rates to check; use a CheckedPairRates such as TablePairs")
}
