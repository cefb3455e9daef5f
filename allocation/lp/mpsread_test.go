package lp

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A fixed-format model using every section and bound type, with names
// holding spaces (only the fixed columns can read those).
const fixedMPS = `NAME          TESTLP
* a comment line
OBJSENSE
    MAX
ROWS
 N  COST
 L  LIM 1
 G  LIM2
 E  MYEQN
 E  NEGRNG
 N  FREEROW
COLUMNS
    X ONE     COST               1.0   LIM 1              1.0
    X ONE     LIM2               1.0
    YTWO      COST               2.0   LIM 1              1.0
    YTWO      MYEQN             -1.0   FREEROW            3.0
    ZTHREE    COST              -1.0   MYEQN              1.0
    ZTHREE    NEGRNG             1.0
    W4        LIM2               1.0
    V5        COST             1.5D0   NEGRNG             1.0
    U6        LIM 1              1.0
    T7        LIM2               2.0
    S8        COST               1.0
RHS
    RHS       COST              -2.5   LIM 1              4.0
    RHS       LIM2               1.0   MYEQN              7.0
    RHS       NEGRNG             3.0   FREEROW           99.0
    OTHER     LIM 1           1000.0
RANGES
    RNG       LIM 1              2.5   LIM2              -3.0
    RNG       MYEQN              4.0   NEGRNG            -2.0
BOUNDS
 UP BND       X ONE              4.0
 MI BND       YTWO
 UP BND       YTWO               1.0
 LO BND       ZTHREE            -1.0
 UP BND       ZTHREE            1e30
 FX BND       W4                 2.0
 FR BND       V5
 UP BND       U6                -3.0
 BV BND       T7
 LI BND       S8                 2.0
 UI BND       S8                 5.0
 PL BND       X ONE
 UP OTHERBND  X ONE              9.0
ENDATA
`

func TestReadMPSFixed(t *testing.T) {
	m, err := (&MPSReader{Format: MPSFixed}).Read(strings.NewReader(fixedMPS))
	require.NoError(t, err)
	auto, err := ReadMPS(strings.NewReader(fixedMPS))
	require.NoError(t, err)
	assertSameModel(t, m, auto, false)

	assert.Equal(t, "TESTLP", m.Name())
	assert.Equal(t, Maximize, m.Sense())
	assert.Equal(t, 2.5, m.ObjectiveConstant(), "minus the RHS of the objective row")
	names := []string{"X ONE", "YTWO", "ZTHREE", "W4", "V5", "U6", "T7", "S8"}
	for j, n := range names {
		assert.Equal(t, n, m.VarName(j))
	}
	assert.Equal(t, []float64{1, 2, -1, 0, 1.5, 0, 0, 1}, m.Objective())
	inf := math.Inf(1)
	lo, up := m.VarBounds()
	assert.Equal(t, []float64{0, -inf, -1, 2, -inf, -inf, 0, 2}, lo, "MI, LO, FX, FR, negative UP, BV, LI")
	assert.Equal(t, []float64{inf, 1, inf, 2, inf, -3, 1, 5}, up, "PL after UP, 1e30 is infinite, UI; the second bound set is ignored")

	rowNames := []string{"LIM 1", "LIM2", "MYEQN", "NEGRNG", "FREEROW"}
	require.Equal(t, len(rowNames), m.NumRows())
	for i, n := range rowNames {
		assert.Equal(t, n, m.RowName(i))
	}
	rlo, rup := m.RowBounds()
	// L: [4 - 2.5, 4]; G with range -3: [1, 1 + 3]; E with +4: [7, 11];
	// E with -2: [1, 3]; N: free, its RHS ignored.
	assert.Equal(t, []float64{1.5, 1, 7, 1, -inf}, rlo)
	assert.Equal(t, []float64{4, 4, 11, 3, inf}, rup)
	idx, val := m.Row(4)
	assert.Equal(t, []int{1}, idx, "a free row keeps its entries")
	assert.Equal(t, []float64{3}, val)
	idx, val = m.Row(0)
	assert.Equal(t, []int{0, 1, 5}, idx)
	assert.Equal(t, []float64{1, 1, 1}, val)

	// The same model in free format (names without spaces) reads alike.
	free := strings.NewReplacer("X ONE", "X_ONE", "LIM 1", "LIM_1").Replace(fixedMPS)
	fm, err := (&MPSReader{Format: MPSFree}).Read(strings.NewReader(free))
	require.NoError(t, err)
	assert.Equal(t, "X_ONE", fm.VarName(0))
	assert.Equal(t, m.Objective(), fm.Objective())
	flo, fup := fm.RowBounds()
	assert.Equal(t, rlo, flo)
	assert.Equal(t, rup, fup)
}

// Free format: optional set names, OBJSENSE on the NAME-like line, negative
// UP with an explicit nonzero lower bound (kept), integrality markers.
func TestReadMPSFree(t *testing.T) {
	const src = `NAME model FREE
OBJSENSE MINIMIZE
ROWS
 G c1
 N obj
COLUMNS
 MARKER 'MARKER' 'INTORG'
 x obj 1 c1 1
 MARKER 'MARKER' 'INTEND'
 y obj 2 c1 1
RHS
 c1 3 obj 1.5
BOUNDS
 LO BND x -5
 UP BND x -1
 UP BND y 1
ENDATA`
	m, err := ReadMPS(strings.NewReader(src))
	require.NoError(t, err)
	assert.Equal(t, "model", m.Name())
	assert.Equal(t, Minimize, m.Sense())
	assert.Equal(t, -1.5, m.ObjectiveConstant())
	lo, up := m.VarBounds()
	assert.Equal(t, []float64{-5, 0}, lo)
	assert.Equal(t, []float64{-1, 1}, up)
	rlo, _ := m.RowBounds()
	assert.Equal(t, []float64{3}, rlo)
}

func TestReadMPSErrors(t *testing.T) {
	head := "NAME t\nROWS\n N obj\n L r\nCOLUMNS\n"
	tests := []struct {
		name, src string
		line      int
		msg       string
	}{
		{"no ENDATA", head + " x obj 1\n", 0, "no ENDATA"},
		{"unknown section", "NAME t\nFOO\nENDATA\n", 2, `unknown section "FOO"`},
		{"bad row type", "NAME t\nROWS\n Q r\nENDATA\n", 3, `row type "Q"`},
		{"duplicate row", "NAME t\nROWS\n L r\n G r\nENDATA\n", 4, `row "r" defined twice`},
		{"unknown row", head + " x s 1\nENDATA\n", 6, `unknown row "s"`},
		{"bad number", head + " x r abc\nENDATA\n", 6, `"abc" is not a number`},
		{"NaN", head + " x r NaN\nENDATA\n", 6, "NaN value"},
		{"infinite coefficient", head + " x r 1e31\nENDATA\n", 6, "infinite coefficient"},
		{"repeated entry", head + " x r 1\n x r 2\nENDATA\n", 7, `row "r" given twice`},
		{"split column", head + " x r 1\n y r 1\n x obj 1\nENDATA\n", 8, `column "x" continues`},
		{"unknown bound column", head + " x r 1\nBOUNDS\n UP b y 1\nENDATA\n", 8, `unknown column "y"`},
		{"bad bound type", head + " x r 1\nBOUNDS\n XX b x 1\nENDATA\n", 8, `bound type "XX"`},
		{"semi-continuous", head + " x r 1\nBOUNDS\n SC b x 1\nENDATA\n", 8, "semi-continuous"},
		{"crossed bounds", head + " x r 1\nBOUNDS\n LO b x 3\n UP b x 2\nENDATA\n", 0, "crossed bounds"},
		{"section order", head + " x r 1\nROWS\nENDATA\n", 7, "section ROWS after COLUMNS"},
		{"data before section", " x r 1\n", 1, "before any section"},
		{"bad sense", "NAME t\nOBJSENSE\n SIDEWAYS\n", 3, `"SIDEWAYS"`},
		{"quadratic", head + " x r 1\nQUADOBJ\nENDATA\n", 7, "not supported"},
		{"RHS of unknown row", head + " x r 1\nRHS\n rhs q 1\nENDATA\n", 8, `unknown row "q"`},
		{"range twice", head + " x r 1\nRANGES\n rng r 1\n rng r 2\nENDATA\n", 9, "given twice"},
		{"field count", head + " x r\nENDATA\n", 6, "3 or 5 fields"},
		{"fixed at infinity", head + " x r 1\nBOUNDS\n FX b x 1e40\nENDATA\n", 8, "infinite value"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ReadMPS(strings.NewReader(tc.src))
			require.Error(t, err)
			assert.ErrorIs(t, err, ErrMPS)
			var me *MPSError
			require.True(t, errors.As(err, &me))
			assert.Equal(t, tc.line, me.Line, "%v", err)
			assert.Contains(t, err.Error(), tc.msg)
		})
	}
}

func TestReadMPSLimits(t *testing.T) {
	src := "NAME t\nROWS\n N obj\n L a\n L b\nCOLUMNS\n x a 1 b 1\n y a 1\nENDATA\n"
	for _, rd := range []MPSReader{{MaxRows: 2}, {MaxCols: 1}, {MaxNonzeros: 2}, {MaxLineBytes: 8}} {
		_, err := rd.Read(strings.NewReader(src))
		assert.ErrorIs(t, err, ErrMPSLimit, "%+v", rd)
		assert.ErrorIs(t, err, ErrMPS, "%+v", rd)
	}
	m, err := (&MPSReader{MaxRows: 3, MaxCols: 2, MaxNonzeros: 3}).Read(strings.NewReader(src))
	require.NoError(t, err)
	assert.Equal(t, 3, m.NumNonzeros())
}

// Every model WriteMPS writes reads back as the same model.
func TestMPSRoundTrip(t *testing.T) {
	models := []*Model{}
	for seed := range uint64(40) {
		models = append(models, randomModel(seed))
	}
	m := NewModel(Maximize)
	m.SetName("named")
	x := m.AddVar(-Inf, 3, 1)
	m.SetVarName(x, "x with space")
	m.AddVar(-Inf, Inf, 0)
	m.AddVar(2, 2, -1)
	m.AddVar(-4, -1, 0.25)
	m.AddRow(-Inf, Inf, []int{0, 1}, []float64{1, 2})
	m.AddRow(1, 5, []int{1, 2}, []float64{1, -1})
	r := m.AddRow(-Inf, 0, []int{3}, []float64{2})
	m.SetRowName(r, "obj")
	m.SetObjectiveConstant(-7.25)
	models = append(models, m)
	for k, m := range models {
		t.Run(fmt.Sprint(k), func(t *testing.T) {
			var buf bytes.Buffer
			require.NoError(t, m.WriteMPS(&buf))
			back, err := ReadMPS(&buf)
			require.NoError(t, err, buf.String())
			assertSameModel(t, m, back, true)
		})
	}
}

// assertSameModel compares two models entry by entry (with written, the
// names of want as WriteMPS writes them).
func assertSameModel(t *testing.T, want, got *Model, written bool) {
	t.Helper()
	name := func(s string) string {
		if written {
			return mpsName(s)
		}
		return s
	}
	require.Equal(t, want.NumVars(), got.NumVars())
	require.Equal(t, want.NumRows(), got.NumRows())
	assert.Equal(t, want.Sense(), got.Sense())
	assert.Equal(t, want.ObjectiveConstant(), got.ObjectiveConstant())
	assert.Equal(t, want.Objective(), got.Objective())
	wl, wu := want.VarBounds()
	gl, gu := got.VarBounds()
	assert.Equal(t, wl, gl)
	assert.Equal(t, wu, gu)
	wl, wu = want.RowBounds()
	gl, gu = got.RowBounds()
	assert.Equal(t, wl, gl)
	assert.Equal(t, wu, gu)
	for j := range want.NumVars() {
		assert.Equal(t, name(want.VarName(j)), got.VarName(j))
	}
	for i := range want.NumRows() {
		assert.Equal(t, name(want.RowName(i)), got.RowName(i))
		type e struct {
			j int
			v float64
		}
		var a, b []e
		idx, val := want.Row(i)
		for k := range idx {
			a = append(a, e{idx[k], val[k]})
		}
		idx, val = got.Row(i)
		for k := range idx {
			b = append(b, e{idx[k], val[k]})
		}
		cmp := func(x, y e) int { return x.j - y.j }
		slices.SortFunc(a, cmp)
		slices.SortFunc(b, cmp)
		assert.Equal(t, a, b, "row %d", i)
	}
}

// randomModel is a small valid model of every bound and row kind.
func randomModel(seed uint64) *Model {
	s := seed*2654435761 + 1
	next := func(n int) int {
		s ^= s << 13
		s ^= s >> 7
		s ^= s << 17
		return int(s % uint64(n))
	}
	vals := []float64{0, 1, -1, 2.5, -3, 1e-7, 123456.789, -0.001}
	bound := func() (float64, float64) {
		a, b := vals[next(len(vals))], vals[next(len(vals))]
		lo, up := min(a, b), max(a, b)
		switch next(5) {
		case 0:
			lo = -Inf
		case 1:
			up = Inf
		case 2:
			lo, up = -Inf, Inf
		}
		return lo, up
	}
	m := NewModel(Minimize)
	if next(2) == 1 {
		m = NewModel(Maximize)
	}
	m.SetObjectiveConstant(vals[next(len(vals))])
	nv := 1 + next(6)
	for range nv {
		lo, up := bound()
		m.AddVar(lo, up, vals[next(len(vals))])
	}
	for range next(6) {
		perm := make([]int, nv)
		for j := range perm {
			perm[j] = j
		}
		k := 1 + next(nv)
		for a := range k {
			b := a + next(nv-a)
			perm[a], perm[b] = perm[b], perm[a]
		}
		row := make([]float64, k)
		for e := range row {
			row[e] = vals[1+next(len(vals)-1)]
		}
		lo, up := bound()
		m.AddRow(lo, up, perm[:k], row)
	}
	return m
}

// An MPSReader may be shared by goroutines (run with -race).
func TestMPSReaderConcurrent(t *testing.T) {
	rd := &MPSReader{Format: MPSFixed}
	done := make(chan *Model, 4)
	for range 4 {
		go func() {
			m, err := rd.Read(strings.NewReader(fixedMPS))
			if err != nil {
				t.Error(err)
			}
			done <- m
		}()
	}
	for range 4 {
		if m := <-done; m != nil && m.NumRows() != 5 {
			t.Errorf("%d rows", m.NumRows())
		}
	}
}
