package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/gpusched/gpusched/topology"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestShowSpec(t *testing.T) {
	spec := []byte(`{"servers": [{"id": "dgx1", "gpu_type": "v100", "gpus": 8, "interconnect": "hybrid-cube-mesh", "nic_gbps": 100}]}`)
	var out bytes.Buffer
	require.NoError(t, run(context.Background(), &out, topology.Static{Spec: spec}, ""))
	s := out.String()
	assert.Contains(t, s, "Server dgx1: 8 GPUs, NIC 100 Gbit/s")
	assert.Regexp(t, `GPU0\s+X\s+NV1\s+NV1\s+NV2\s+NV2\s+SYS\s+SYS\s+SYS\s+0\s+v100\s+16384 MiB`, s)
	assert.ErrorContains(t, run(context.Background(), &out, topology.Static{Spec: spec}, "nope"), `no server "nope"`)
	assert.ErrorIs(t, run(context.Background(), &out, topology.Static{}, ""), topology.ErrMalformedSpec)
}

func TestShowMIG(t *testing.T) {
	spec := []byte(`{"servers": [{"id": "h", "gpu_type": "h100", "gpus": 2,
	  "mig": {"instances": [{"profile": "3g.40gb", "start": 4}, {"profile": "2g.20gb", "start": 0}]}}]}`)
	var out bytes.Buffer
	require.NoError(t, run(context.Background(), &out, topology.Static{Spec: spec}, ""))
	assert.Contains(t, out.String(), "GPU1 MIG h100-80gb: 3g.40gb@4 2g.20gb@0\n")
}

// Without a driver, or built without -tags nvml, discovery fails on one
// line that says what to do.
func TestNoDriver(t *testing.T) {
	var out, errOut bytes.Buffer
	code := command(nil, &out, &errOut)
	if code == 0 {
		t.Skip("this machine has NVML and a GPU")
	}
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut.String(), "no NVIDIA driver found")
	assert.Contains(t, errOut.String(), "or show a cluster spec with -spec")
	assert.Equal(t, 1, strings.Count(errOut.String(), "\n"))
}
