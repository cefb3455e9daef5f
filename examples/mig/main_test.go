package main

import (
	"bytes"
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gpusched/gpusched/topology"
)

func TestRunDefault(t *testing.T) {
	var out bytes.Buffer
	require.NoError(t, run(context.Background(), &out, []byte(defaultSpec)))
	s := out.String()
	assert.Contains(t, s, "Cluster mig-lab: 2 servers, 8 GPUs")
	// The busy 3g.40gb at 4 and 1g.10gb at 0 stay where they are.
	assert.Regexp(t, `a100/0\s+a100-80gb\s+2g\.20gb@0 3g\.40gb@4\*\s+.*3g\.40gb@4\*`, s)
	assert.Regexp(t, `exact\s+placed \[3 2 3\] of \[3 2 3\]; 0 unplaced, 3 GPUs used`, s)
	assert.Contains(t, s, "fragmentation gradient")
	assert.Regexp(t, `ResNet-50 \(batch size 64\) x1\s+[0-9.]+\*`, s)
	assert.Contains(t, s, "h100-80gb-3g.40gb")
	assert.Contains(t, s, "work done, in whole H100s")
}

func TestRunBadSpec(t *testing.T) {
	var out bytes.Buffer
	err := run(context.Background(), &out, []byte(`{"servers": [{"gpu_type": "h100", "gpus": 1, "mig": {"instances": [{"profile": "4g.40gb", "start": 4}]}}]}`))
	assert.ErrorIs(t, err, topology.ErrInvalidPlacement)
}
