package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestRunSmall(t *testing.T) {
	dir := t.TempDir()
	var out, errOut bytes.Buffer
	o := options{cluster: "v100:4,p100:4,k80:4", policies: "fifo,las,gavel,gavel-ss", rate: 20, jobs: 60, window: "10:50", out: dir, quiet: true, parallel: 2}
	require.NoError(t, run(context.Background(), &out, &errOut, o))
	s := out.String()
	for _, p := range []string{"fifo", "las", "gavel", "gavel-ss"} {
		assert.Regexp(t, `\s`+p+`\s+40\s`, s)
	}
	for _, f := range []string{"jct_cdf.svg", "utilisation.svg"} {
		st, err := os.Stat(filepath.Join(dir, f))
		require.NoError(t, err)
		assert.Positive(t, st.Size())
	}
}

func TestRunErrors(t *testing.T) {
	var out bytes.Buffer
	base := options{cluster: "v100:4", policies: "gavel", rate: 20, jobs: 10, window: "0:5", quiet: true}
	o := base
	o.policies = "gavel,nope"
	assert.ErrorContains(t, run(context.Background(), &out, &out, o), `unknown policy "nope"`)
	o = base
	o.window = "5:1"
	assert.ErrorContains(t, run(context.Background(), &out, &out, o), "window")
	o = base
	o.cluster = "v100:-1"
	assert.Error(t, run(context.Background(), &out, &out, o))
	o = base
	o.trace = filepath.Join(t.TempDir(), "missing.trace")
	assert.Error(t, run(context.Background(), &out, &out, o))
	o = base
	o.trace = filepath.Join(t.TempDir(), "bad.trace")
	require.NoError(t, os.WriteFile(o.trace, []byte("x\ty\n"), 0o644))
	assert.ErrorContains(t, run(context.Background(), &out, &out, o), "bad.trace:1")
}
