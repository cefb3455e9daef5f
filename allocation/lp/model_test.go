package lp

import (
	"bytes"
	"context"
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestValidate(t *testing.T) {
	tests := []struct {
		name  string
		build func(m *Model)
		msg   string
	}{
		{"NaN objective", func(m *Model) { m.AddVar(0, 1, math.NaN()) }, "objective coefficient of x0 is NaN"},
		{"Inf objective", func(m *Model) { m.AddVar(0, 1, Inf) }, "objective coefficient of x0 is +Inf"},
		{"crossed bounds", func(m *Model) { m.AddVar(3, 1, 0) }, "variable x0: crossed bounds: lower 3 > upper 1"},
		{"NaN bound", func(m *Model) { m.AddVar(math.NaN(), 1, 0) }, "contain NaN"},
		{"+Inf lower", func(m *Model) { m.AddVar(Inf, Inf, 0) }, "lower bound is +Inf"},
		{"-Inf upper", func(m *Model) { m.AddVar(-Inf, -Inf, 0) }, "upper bound is -Inf"},
		{"crossed row", func(m *Model) { m.AddVar(0, 1, 0); m.AddRow(2, 1, []int{0}, []float64{1}) }, "row r0: crossed bounds"},
		{"index out of range", func(m *Model) { m.AddVar(0, 1, 0); m.AddRow(0, 1, []int{1}, []float64{1}) }, "variable index 1 out of range [0, 1)"},
		{"negative index", func(m *Model) { m.AddVar(0, 1, 0); m.AddRow(0, 1, []int{-1}, []float64{1}) }, "variable index -1"},
		{"repeated variable", func(m *Model) {
			m.AddVar(0, 1, 0)
			i := m.AddRow(0, 1, []int{0, 0}, []float64{1, 2})
			m.SetRowName(i, "cap")
		}, "row cap: variable x0 appears twice"},
		{"NaN coefficient", func(m *Model) {
			j := m.AddVar(0, 1, 0)
			m.SetVarName(j, "y")
			m.AddRow(0, 1, []int{0}, []float64{math.NaN()})
		}, "coefficient of y is NaN"},
		{"length mismatch", func(m *Model) { m.AddVar(0, 1, 0); m.AddRow(0, 1, []int{0}, nil) }, "AddRow got 1 indices and 0 values"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := NewModel(Minimize)
			tc.build(m)
			err := m.Validate()
			require.Error(t, err)
			assert.ErrorIs(t, err, ErrInvalidModel)
			assert.Contains(t, err.Error(), tc.msg)
		})
	}
	assert.ErrorIs(t, (&Model{start: []int{0}}).Validate(), ErrInvalidModel, "zero sense")
	m := NewModel(Maximize)
	m.AddVar(-Inf, Inf, 1)
	m.AddRow(-Inf, Inf, []int{0}, []float64{1})
	assert.NoError(t, m.Validate())
}

func TestBuilder(t *testing.T) {
	m := NewModel(Maximize)
	first := m.AddVars(3, 0, 1, 2)
	assert.Equal(t, 0, first)
	assert.Equal(t, 3, m.NumVars())
	m.AddRow(-Inf, 1, []int{2, 0}, []float64{5, 6})
	m.AddRow(0, 0, []int{1}, []float64{7})
	assert.Equal(t, 2, m.NumRows())
	assert.Equal(t, 3, m.NumNonzeros())
	start, rows, vals := m.Columns()
	assert.Equal(t, []int{0, 1, 2, 3}, start)
	assert.Equal(t, []int{0, 1, 0}, rows)
	assert.Equal(t, []float64{6, 7, 5}, vals)
	m.SetObjective(1, -1)
	m.SetVarBounds(1, -2, 2)
	m.SetRowBounds(0, -3, 3)
	lo, up := m.VarBounds()
	assert.Equal(t, -2.0, lo[1])
	assert.Equal(t, 2.0, up[1])
	rlo, rup := m.RowBounds()
	assert.Equal(t, []float64{-3, 0}, rlo)
	assert.Equal(t, []float64{3, 0}, rup)
	assert.Equal(t, "x1", m.VarName(1))
	assert.Equal(t, 11.0, m.ObjectiveValue([]float64{1, 1, 5}))
	assert.Equal(t, 0.0, CheckFeasible(m, []float64{0, 0, 0}))
	assert.Equal(t, 7.0, CheckFeasible(m, []float64{0, 1, 0}), "row 1 = 7 > 0 and x1 within bounds")
	assert.Equal(t, "maximize", m.Sense().String())
}

func TestStatusError(t *testing.T) {
	assert.NoError(t, StatusError(Optimal, nil))
	assert.ErrorIs(t, StatusError(Infeasible, nil), ErrInfeasible)
	err := StatusError(Cancelled, context.Canceled)
	assert.ErrorIs(t, err, ErrCancelled)
	assert.ErrorIs(t, err, context.Canceled)
	assert.ErrorIs(t, StatusError(Failed, errors.New("x")), ErrNumerical)
	assert.Equal(t, "time limit", TimeLimit.String())
	assert.Equal(t, "Status(42)", Status(42).String())
}

func TestWriteMPS(t *testing.T) {
	m := NewModel(Maximize)
	m.SetName("tiny model")
	x := m.AddVar(0, Inf, 1)
	y := m.AddVar(-Inf, 3, 2)
	z := m.AddVar(-Inf, Inf, 0)
	w := m.AddVar(2, 2, 0)
	v := m.AddVar(-1, 4, 0)
	m.SetVarName(x, "x job")
	m.AddRow(-Inf, 4, []int{x, y}, []float64{1, 2})
	m.AddRow(1, 1, []int{z, w}, []float64{1, 1})
	m.AddRow(1, 5, []int{v, x}, []float64{1, 1})
	m.AddRow(-2, Inf, []int{y}, []float64{1})
	m.AddRow(-Inf, Inf, []int{z}, []float64{3})
	var b bytes.Buffer
	require.NoError(t, m.WriteMPS(&b))
	want := `NAME tiny_model FREE
OBJSENSE
    MAX
ROWS
    N  obj
    L  r0
    E  r1
    G  r2
    G  r3
    N  r4
COLUMNS
    x_job  obj  1
    x_job  r0  1
    x_job  r2  1
    x1  obj  2
    x1  r0  2
    x1  r3  1
    x2  r1  1
    x2  r4  3
    x3  r1  1
    x4  r2  1
RHS
    RHS  r0  4
    RHS  r1  1
    RHS  r2  1
    RHS  r3  -2
RANGES
    RNG  r2  4
BOUNDS
    MI  BND  x1
    UP  BND  x1  3
    FR  BND  x2
    FX  BND  x3  2
    LO  BND  x4  -1
    UP  BND  x4  4
ENDATA
`
	assert.Equal(t, want, b.String())
	bad := NewModel(Minimize)
	bad.AddVar(1, 0, 0)
	assert.ErrorIs(t, bad.WriteMPS(&b), ErrInvalidModel)
	assert.True(t, strings.HasPrefix(want, "NAME"))
}

// TestGrow: Grow leaves the model as it was, and a model built after it is
// the one built without it (same MPS text), with room for what was asked.
func TestGrow(t *testing.T) {
	build := func(grow bool) *Model {
		m := NewModel(Maximize)
		m.AddVar(0, 1, 3)
		if grow {
			m.Grow(4, 3, 8)
			assert.Equal(t, 1, m.NumVars())
			assert.Equal(t, 0, m.NumRows())
			assert.GreaterOrEqual(t, cap(m.obj)-len(m.obj), 4)
			assert.GreaterOrEqual(t, cap(m.idx)-len(m.idx), 8)
			m.Grow(-1, -1, -1) // nothing
		}
		m.AddVars(3, -Inf, 2, 1)
		m.AddRow(-Inf, 1, []int{0, 2}, []float64{1, 4})
		m.AddRow(0, 0, []int{1, 3}, []float64{-1, 2})
		return m
	}
	var a, b bytes.Buffer
	require.NoError(t, build(false).WriteMPS(&a))
	require.NoError(t, build(true).WriteMPS(&b))
	assert.Equal(t, a.String(), b.String())
	assert.Contains(t, a.String(), "ROWS")
}

// A wrong hint cannot exhaust memory or panic: Grow caps each argument at
// MaxGrow (math.MaxInt nonzeros panicked in growslice, 1<<40 variables
// ran out of memory).
func TestGrowHugeHints(t *testing.T) {
	m := NewModel(Minimize)
	m.Grow(1<<40, math.MaxInt, math.MaxInt)
	assert.LessOrEqual(t, cap(m.obj), 2*MaxGrow)
	assert.LessOrEqual(t, cap(m.idx), 2*MaxGrow)
	assert.GreaterOrEqual(t, cap(m.idx), MaxGrow)
	assert.Equal(t, 0, m.NumVars())
}
