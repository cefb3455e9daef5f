package scheduler

import (
	"errors"
	"fmt"
	"math"
	"testing"

	"github.com/gpusched/gpusched/perfmodel"
	"github.com/gpusched/gpusched/topology"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// colocFunc is a ColocationModel from a function.
type colocFunc func(a, b perfmodel.JobKey, t topology.GPUType) (float64, float64, error)

func (f colocFunc) Colocated(a, b perfmodel.JobKey, t topology.GPUType) (float64, float64, error) {
	return f(a, b, t)
}

// A type the model cannot rate for one key (an H100 added to a cluster
// rated by a table that stops at V100) leaves that key's pairs unable to
// share on it, and every key keeps its class: the jobs remember theirs.
// Before, the failing key was dropped and every later key moved down one
// class, so jobs read another class's rates.
func TestClassTableKeepsClassesOnNewType(t *testing.T) {
	a, b, c := perfmodel.JobKey{Model: "A"}, perfmodel.JobKey{Model: "B"}, perfmodel.JobKey{Model: "C"}
	rate := map[string]float64{"A": 1, "B": 2, "C": 3}
	model := colocFunc(func(x, y perfmodel.JobKey, typ topology.GPUType) (float64, float64, error) {
		if typ == "h100" && (x.Model == "A" || y.Model == "A") {
			return 0, 0, errors.New("no H100 rates for A")
		}
		return rate[x.Model], rate[y.Model], nil
	})
	ct := newClassTable(model)
	ct.setTypes([]topology.GPUType{"v100"})
	for i, k := range []perfmodel.JobKey{a, b, c} {
		cls, err := ct.classOf(k)
		require.NoError(t, err)
		require.Equal(t, i, cls)
	}
	ct.setTypes([]topology.GPUType{"v100", "h100"})
	for i, k := range []perfmodel.JobKey{a, b, c} {
		cls, err := ct.classOf(k)
		require.NoError(t, err)
		assert.Equal(t, i, cls, "%v keeps its class", k)
	}
	assert.Equal(t, [2]float64{2, 3}, ct.rates[1][2][0], "B with C on v100")
	assert.Equal(t, [2]float64{2, 3}, ct.rates[1][2][1], "B with C on h100")
	assert.Equal(t, [2]float64{3, 1}, ct.rates[2][0][0], "C with A on v100")
	assert.Equal(t, [2]float64{0, 0}, ct.rates[2][0][1], "C with A cannot share an h100")
	assert.Equal(t, [2]float64{0, 0}, ct.rates[0][0][1], "A with A cannot share an h100")
	// A key added after the change is accepted alike: its pairs with A
	// cannot share an h100 (before, the model's error refused it).
	rate["D"] = 4
	cls, err := ct.classOf(perfmodel.JobKey{Model: "D"})
	require.NoError(t, err)
	assert.Equal(t, 3, cls)
	assert.Equal(t, [2]float64{4, 1}, ct.rates[3][0][0], "D with A on v100")
	assert.Equal(t, [2]float64{0, 0}, ct.rates[3][0][1], "D with A cannot share an h100")
	assert.Equal(t, [2]float64{4, 2}, ct.rates[3][1][1], "D with B on h100")
}

// Rates out of range from a custom model refuse the new key with an error
// naming the pair, the type and the range.
func TestClassTableRatesChecked(t *testing.T) {
	for _, bad := range []float64{math.NaN(), -1, 1e300, math.Inf(1)} {
		model := colocFunc(func(x, y perfmodel.JobKey, typ topology.GPUType) (float64, float64, error) {
			return 1, bad, nil
		})
		ct := newClassTable(model)
		ct.setTypes([]topology.GPUType{"v100"})
		_, err := ct.classOf(perfmodel.JobKey{Model: "A", BatchSize: 8, ScaleFactor: 1})
		require.Error(t, err, "%v", bad)
		assert.ErrorContains(t, err, "co-located rates of A (batch size 8) x1 and A (batch size 8) x1 on v100 are 1 and")
		assert.ErrorContains(t, err, "outside [1e-09, 1e+09] steps/s (0 means they cannot share)")
		assert.Empty(t, ct.keys, "the key is not added")
	}
}

// tputFunc is a ThroughputModel from a function.
type tputFunc func(perfmodel.JobKey, topology.GPUType) (float64, error)

func (f tputFunc) Throughput(k perfmodel.JobKey, t topology.GPUType) (float64, error) { return f(k, t) }

// Many model keys (each a class of the class table) do not make rounds
// fail: the class table checked its rates when it added each class, so
// allocation.Problem.Validate does not check classes squared times types
// rates again every round (1,500 classes on 2 types were refused as more
// than MaxPairRates to check, after every Submit had been accepted).
func TestManyClassesRound(t *testing.T) {
	model := colocFunc(func(x, y perfmodel.JobKey, typ topology.GPUType) (float64, float64, error) {
		return 1, 1, nil
	})
	s := newSched(t, func(c *Config) {
		c.Colocation = model
		c.Throughput = tputFunc(func(perfmodel.JobKey, topology.GPUType) (float64, error) { return 1, nil })
	})
	for i := range 1500 {
		k := perfmodel.JobKey{Model: "M", BatchSize: i + 1, ScaleFactor: 1}
		require.NoError(t, s.Submit(fmt.Sprint("j", i), JobSpec{GPUs: 1, Model: &k}, 0))
	}
	r, err := s.Round(ctx, 0)
	require.NoError(t, err)
	assert.NotEmpty(t, r.Assignments)
}

// A co-location model's error for a pair on one type means that pair
// cannot share GPUs of that type, at Submit as after a change of types:
// before, it refused every model-keyed Submit (and, once a server of a
// type the model lacks joined, every later Submit failed while the jobs
// submitted earlier ran on). Rates out of range are still refused, with a
// message that says they are co-located rates.
func TestColocationModelErrorPerType(t *testing.T) {
	model := colocFunc(func(x, y perfmodel.JobKey, typ topology.GPUType) (float64, float64, error) {
		switch {
		case typ == topology.K80 || typ == topology.A100:
			return 0, 0, errors.New("no rates on this type")
		case x.Model == "Bad" || y.Model == "Bad":
			return 1, 1e300, nil
		case x == y:
			return 0.6, 0.6, nil
		}
		return 0.6, 0.7, nil
	})
	s := newSched(t, func(c *Config) {
		c.Colocation = model
		c.Throughput = tputFunc(func(perfmodel.JobKey, topology.GPUType) (float64, error) { return 1, nil })
	})
	a := perfmodel.JobKey{Model: "A", BatchSize: 1}
	b := perfmodel.JobKey{Model: "B", BatchSize: 1}
	require.NoError(t, s.Submit("a", JobSpec{GPUs: 1, Model: &a}, 0))
	require.NoError(t, s.Submit("b", JobSpec{GPUs: 1, Model: &b}, 0))
	k80, v100 := s.typeIdx[topology.K80], s.typeIdx[topology.V100]
	ca, cb := s.jobs["a"].class, s.jobs["b"].class
	assert.Equal(t, [2]float64{0.6, 0.7}, s.classes.rates[cb][ca][v100], "b with a on v100")
	assert.Equal(t, [2]float64{0, 0}, s.classes.rates[ca][cb][k80], "a and b cannot share a K80")

	bad := perfmodel.JobKey{Model: "Bad", BatchSize: 1}
	err := s.Submit("bad", JobSpec{GPUs: 1, Model: &bad}, 0)
	require.ErrorIs(t, err, ErrInvalid)
	assert.ErrorContains(t, err, `job "bad": co-located rates of Bad`)
	assert.ErrorContains(t, err, "outside [1e-09, 1e+09] steps/s")

	// A server of a type the model lacks joins: later jobs are accepted.
	addA100(t, s)
	c := perfmodel.JobKey{Model: "C", BatchSize: 1}
	require.NoError(t, s.Submit("c", JobSpec{GPUs: 1, Model: &c}, 0))
	a100 := s.typeIdx[topology.A100]
	cc := s.jobs["c"].class
	assert.Equal(t, [2]float64{0, 0}, s.classes.rates[cc][ca][a100])
	assert.Equal(t, [2]float64{0.6, 0.7}, s.classes.rates[cc][ca][s.typeIdx[topology.V100]])
	r, err := s.Round(ctx, 0)
	require.NoError(t, err)
	checkRound(t, s, r)
}

// Two jobs of one key get the same rate: a model that says otherwise
// would not mirror (allocation.CheckedPairRates promises it does).
func TestClassTableSelfPairMirrors(t *testing.T) {
	model := colocFunc(func(x, y perfmodel.JobKey, typ topology.GPUType) (float64, float64, error) {
		return 1, 2, nil
	})
	ct := newClassTable(model)
	ct.setTypes([]topology.GPUType{"v100"})
	_, err := ct.classOf(perfmodel.JobKey{Model: "A", ScaleFactor: 1})
	assert.ErrorContains(t, err, "co-located rates of A x1 with itself on v100 are 1 and 2: two jobs of one key must get the same rate")
}
