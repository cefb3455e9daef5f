package main

import (
	"bytes"
	"context"
	"testing"

	"github.com/gpusched/gpusched/internal/cli"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestUsage(t *testing.T) {
	var out bytes.Buffer
	for _, o := range []options{
		{only: "nope", compat: "both", solver: "ipm", queues: "per-type"},
		{policies: "srtf", compat: "both", solver: "ipm", queues: "per-type"},
		{compat: "tiresias", solver: "ipm", queues: "per-type"},
		{compat: "both", solver: "gurobi", queues: "per-type"},
		{compat: "both", solver: "ipm", queues: "random"},
	} {
		var ue *cli.UsageError
		assert.ErrorAs(t, run(context.Background(), &out, &out, o), &ue, "%+v", o)
	}
}

// Gavel's sweep values, computed as numpy does, differ from the decimal
// rates in the last bit; the arrivals follow them.
func TestLinspace(t *testing.T) {
	assert.Equal(t, 0.4, linspace(6, 1))
	assert.Equal(t, 4.800000000000001, linspace(6, 12))
	assert.Equal(t, 5.6000000000000005, linspace(6, 14))
	assert.Equal(t, 2.8000000000000003, linspace(3, 14))
}

// The smallest experiment runs in both modes and prints every column.
func TestMakespan100(t *testing.T) {
	if testing.Short() {
		t.Skip("runs 300 jobs of simulation")
	}
	var out bytes.Buffer
	require.NoError(t, run(context.Background(), &out, &out, options{only: "makespan-100", compat: "both", solver: "ipm", queues: "per-type"}))
	s := out.String()
	assert.Regexp(t, `makespan-100\s+fifo\s+makespan\s+182\.30\s+\d+\.\d\d\s+\d\.\d\d\s+\d+\.\d\d\s+\d\.\d\d`, s)
	assert.Regexp(t, `makespan-100\s+gavel-ss\s+makespan\s+163\.60\s+not built`, s)
}
