package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const dir = "../../allocation/lp/testdata/netlib"

func TestRunSubset(t *testing.T) {
	var out bytes.Buffer
	require.NoError(t, run(&out, options{dir: dir, pattern: "^(afiro|galenet|sc50a)$", repeat: 1}))
	s := out.String()
	assert.Contains(t, s, "InteriorPoint: 3 of 3 right")
	assert.Regexp(t, `afiro\s+27\s+32\s+83\s+optimal\s+-4\.647531428\de\+02`, s)
	assert.Regexp(t, `galenet\s+8\s+8\s+16\s+infeasible`, s)
	out.Reset()
	require.NoError(t, run(&out, options{dir: dir, pattern: "^afiro$", repeat: 2, crossover: true}))
	assert.Contains(t, out.String(), "crossover: a vertex for 1 of the optimal problems")
}

func TestRunErrors(t *testing.T) {
	var out bytes.Buffer
	assert.Error(t, run(&out, options{dir: dir, pattern: "(", repeat: 1}))
	assert.Error(t, run(&out, options{dir: t.TempDir(), repeat: 1}))
	if !haveCLP {
		assert.ErrorContains(t, run(&out, options{dir: dir, clp: true, clpAlgorithm: "dual", repeat: 1}), "-tags clp")
	}
}

// A bad command line exits with status 2 and one line naming the flag,
// before any problem is read.
func TestBadCommandLine(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-repeat", "-1"}, "-repeat -1: want an integer from 1 to 100"},
		{[]string{"-repeat", "1000000000"}, "-repeat 1000000000: want an integer from 1 to 100"},
		{[]string{"-run", "("}, "-run (: want a regular expression"},
		{[]string{"-clp-algorithm", "simplex"}, `-clp-algorithm "simplex": want one of dual, primal, auto, barrier`},
		{[]string{"-cpuprofile", "/nonexistent/p.prof"}, "-cpuprofile /nonexistent/p.prof: want a file in an existing folder"},
		{[]string{"stray"}, `unexpected argument "stray"`},
	} {
		var out, errOut bytes.Buffer
		assert.Equal(t, 2, realMain(append([]string{"-dir", dir}, tc.args...), &out, &errOut), tc.args)
		assert.Contains(t, errOut.String(), tc.want, tc.args)
		assert.Equal(t, 1, strings.Count(errOut.String(), "\n"), tc.args)
		assert.Empty(t, out.String(), tc.args)
	}
}
