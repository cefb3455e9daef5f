package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/gpusched/gpusched/internal/cli"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestRunSmall(t *testing.T) {
	dir := t.TempDir()
	// A symbolic link planted at a plot's name is replaced, not followed.
	victim := filepath.Join(t.TempDir(), "victim")
	require.NoError(t, os.WriteFile(victim, []byte("keep"), 0o600))
	require.NoError(t, os.Symlink(victim, filepath.Join(dir, "jct_cdf.svg")))
	var out, errOut bytes.Buffer
	o := options{cluster: "v100:4,p100:4,k80:4", policies: "fifo,fifo-events,las,gavel,gavel-ss", rate: 20, jobs: 60, window: "10:50", out: dir, quiet: true, parallel: 2}
	require.NoError(t, run(context.Background(), &out, &errOut, o))
	s := out.String()
	for _, p := range []string{"fifo", "fifo-events", "las", "gavel", "gavel-ss"} {
		assert.Regexp(t, `\s`+p+`\s+40\s`, s)
	}
	// The event-driven engine computes no isolated times: its rho columns
	// say so rather than 0.
	assert.Regexp(t, `fifo-events(\s+\S+){8}\s+-\s+-\s`, s)
	assert.Regexp(t, `\sgavel(\s+\S+){8}\s+\d+\.\d\d\s+\d+%\s`, s)
	assert.NotContains(t, s, "NaN")
	for _, f := range []string{"jct_cdf.svg", "utilisation.svg"} {
		st, err := os.Lstat(filepath.Join(dir, f))
		require.NoError(t, err)
		assert.True(t, st.Mode().IsRegular(), f)
		assert.Positive(t, st.Size())
	}
	kept, err := os.ReadFile(victim)
	require.NoError(t, err)
	assert.Equal(t, "keep", string(kept))
}

// -vertex reaches the policies: LAS's max-min LP ties on a small busy
// cluster, and a vertex of its optimal face schedules otherwise than the
// centre (the LAS line changes; a bug once built a second policy without
// the option).
func TestRunVertex(t *testing.T) {
	las := func(vertex bool) string {
		var out, errOut bytes.Buffer
		o := options{cluster: "v100:4,p100:4,k80:4", policies: "las", rate: 0, jobs: 60, window: "0:60", quiet: true, parallel: 1, vertex: vertex}
		require.NoError(t, run(context.Background(), &out, &errOut, o))
		line := regexp.MustCompile(`\slas\s.*`).FindString(out.String())
		require.NotEmpty(t, line, out.String())
		// The run time, last on the line, differs anyway.
		return strings.Join(strings.Fields(line)[:12], " ")
	}
	assert.NotEqual(t, las(false), las(true))
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
	o.window, o.windowSet = "0:11", true
	err := run(context.Background(), &out, &out, o)
	var ue *cli.UsageError
	require.ErrorAs(t, err, &ue)
	assert.Equal(t, "window", ue.Flag)
	assert.ErrorContains(t, err, "a window within the trace's 10 jobs")
	o = base
	o.compat = "tiresias"
	require.ErrorAs(t, run(context.Background(), &out, &out, o), &ue)
	assert.Equal(t, "compat", ue.Flag)
	o = base
	o.cluster = "v100:-1"
	assert.Error(t, run(context.Background(), &out, &out, o))
	o = base
	o.trace = filepath.Join(t.TempDir(), "missing.trace")
	assert.Error(t, run(context.Background(), &out, &out, o))
	o = base
	o.trace, o.format = filepath.Join(t.TempDir(), "x.csv"), "yaml"
	require.NoError(t, os.WriteFile(o.trace, []byte("a"), 0o644))
	assert.ErrorContains(t, run(context.Background(), &out, &out, o), `-format yaml: want one of`)
	o = base
	o.trace, o.format = filepath.Join(t.TempDir(), "bad.trace"), "gavel"
	require.NoError(t, os.WriteFile(o.trace, []byte("x\ty\n"), 0o644))
	assert.ErrorContains(t, run(context.Background(), &out, &out, o), "bad.trace:1")
}

// A trace without models (Tiresias's) runs once AssignModels gives them.
func TestRunTiresiasTrace(t *testing.T) {
	dir := t.TempDir()
	trace := filepath.Join(dir, "jobs.csv")
	require.NoError(t, os.WriteFile(trace, []byte("job_id,num_gpu,submit_time,iterations,model_name,duration,interval\n0,1,0,606,vgg19,164,30\n1,8,30,133,vgg11,147,23\n2,2,40,100,resnet50,600,1\n"), 0o644))
	var out bytes.Buffer
	o := options{trace: trace, format: "tiresias", cluster: "v100:8,p100:8,k80:8", policies: "fifo,gavel", window: "0:3", quiet: true}
	require.NoError(t, run(context.Background(), &out, &out, o))
	assert.Regexp(t, `\sgavel\s+3\s`, out.String())
}

// A trace shorter than the default window is measured whole, with a note;
// never a row of 0 jobs.
func TestRunAdaptsWindow(t *testing.T) {
	var out, errOut bytes.Buffer
	o := options{cluster: "v100:4,p100:4,k80:4", policies: "fifo,gavel", rate: 20, jobs: 30, window: defaultWindow, quiet: true}
	require.NoError(t, run(context.Background(), &out, &errOut, o))
	assert.Contains(t, errOut.String(), "fewer than the default window 1000:2000")
	assert.Contains(t, out.String(), "measuring jobs 0 to 30")
	assert.Regexp(t, `\sgavel\s+30\s`, out.String())
}

// -compat gavel runs Gavel's mechanism on the jobs Gavel's generator draws.
func TestRunCompatGavel(t *testing.T) {
	var out bytes.Buffer
	o := options{cluster: "v100:4,p100:4,k80:4", policies: "fifo,fifo-perf,las,gavel", rate: 20, jobs: 40, window: "0:40", windowSet: true, quiet: true, compat: "gavel"}
	require.NoError(t, run(context.Background(), &out, &out, o))
	assert.Contains(t, out.String(), "mechanism: Gavel's code")
	assert.Contains(t, out.String(), "CPython's draws")
	for _, p := range []string{"fifo", "fifo-perf", "las", "gavel"} {
		assert.Regexp(t, `\s`+p+`\s+40\s`, out.String())
	}
}

// The Kueue policies: Kueue's walk over the flavors in the order -cluster
// names the types, and Kueue steered by gpusched.
func TestRunKueue(t *testing.T) {
	var out, errOut bytes.Buffer
	o := options{cluster: "v100:4,p100:4,k80:4", policies: "kueue,kueue-gpusched,kueue-gpusched-nowait", rate: 20, jobs: 60, window: "10:50", quiet: true, parallel: 2}
	require.NoError(t, run(context.Background(), &out, &errOut, o))
	for _, p := range []string{"kueue", "kueue-gpusched", "kueue-gpusched-nowait"} {
		assert.Regexp(t, `\s`+p+`\s+40\s`, out.String())
	}
}

// A trace of more than bigTrace jobs is simulated one policy at a time
// unless -parallel says otherwise: two runs of 2 million jobs arriving
// together (6.2 GB each) ran a 24 GB machine out of memory.
func TestParallelForBigTraces(t *testing.T) {
	o := options{parallel: 2}
	if got := o.parallelFor(bigTrace); got != 2 {
		t.Errorf("%d jobs: %d at once, want 2", bigTrace, got)
	}
	if got := o.parallelFor(2_000_000); got != 1 {
		t.Errorf("2,000,000 jobs: %d at once, want 1", got)
	}
	o.parallelSet = true
	if got := o.parallelFor(2_000_000); got != 2 {
		t.Errorf("-parallel 2 given: %d at once", got)
	}
}

// -table csv writes the table alone, every reproducible metric in full
// precision; the plots still go to -out.
func TestRunTableCSV(t *testing.T) {
	var out, errOut bytes.Buffer
	dir := t.TempDir()
	o := options{cluster: "v100:4,p100:4,k80:4", policies: "fifo,gavel", rate: 20, jobs: 40, window: "0:40", out: dir, quiet: true, table: "csv"}
	require.NoError(t, run(context.Background(), &out, &errOut, o))
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	require.Len(t, lines, 3, out.String())
	assert.True(t, strings.HasPrefix(lines[0], "entrant,jobs,mean_jct_h,"), lines[0])
	assert.Contains(t, lines[0], "gpu_h_v100")
	assert.NotContains(t, lines[0], "run_time")
	assert.True(t, strings.HasPrefix(lines[2], "gavel,40,"), lines[2])
	_, err := os.Stat(filepath.Join(dir, "gpu_hours.svg"))
	assert.NoError(t, err)
}
