package main

import (
	"bytes"
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
