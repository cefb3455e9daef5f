package main

import (
	"bytes"
	"testing"

	"github.com/gpusched/gpusched/topology"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestRunDefault(t *testing.T) {
	var out bytes.Buffer
	require.NoError(t, run(&out, "v100:36,p100:36,k80:36", 4, false))
	s := out.String()
	assert.Contains(t, s, "27 servers, 108 GPUs")
	// Recommendation (batch size 1024): K80 20.05, P100 30.74, V100 13.28; best on P100.
	assert.Regexp(t, `Recommendation \(batch size 1024\)\s+1\s+20\.05\s+30\.74\s+13\.28\s+p100\s+2\.3x`, s)
	assert.Contains(t, s, "Space sharing")
}

func TestRunBadSpec(t *testing.T) {
	var out bytes.Buffer
	err := run(&out, "v100:-1", 4, false)
	assert.ErrorIs(t, err, topology.ErrInvalidCount)
	err = run(&out, "a100:8", 4, false)
	assert.ErrorContains(t, err, "unknown GPU type")
}
