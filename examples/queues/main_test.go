package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpusched/gpusched/sim"
)

func TestDemand(t *testing.T) {
	mk := func(arrival, duration float64, gpus int) sim.Job {
		var j sim.Job
		j.Arrival, j.Duration, j.Key.ScaleFactor = arrival, duration, gpus
		return j
	}
	// [0,10) 2 GPUs, [5,15) 4 GPUs, [10,20) 8 GPUs: the first ends as the
	// third starts, so the peak is 4+8 = 12, not 14; the GPU-time is
	// 20+40+80 = 140 over a span of 20.
	jobs := []sim.Job{mk(0, 10, 2), mk(5, 10, 4), mk(10, 10, 8)}
	peak, mean := demand(jobs)
	if peak != 12 || mean != 7 {
		t.Fatalf("demand = %d, %v; want 12, 7", peak, mean)
	}
}

func TestRunTiresias(t *testing.T) {
	t.Chdir(filepath.Join("..", ".."))
	var out bytes.Buffer
	samples := filepath.Join("sim", "testdata", "tiresias", "yarn-gput1000.csv")
	o := options{trace: "tiresias", format: "itp", load: 0.5, samples: samples}
	if err := run(context.Background(), &out, o); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"fifo+easy", "sjf", "srtf+easy", "2d-las", "2d-gittins+easy"} {
		if !strings.Contains(out.String(), p) {
			t.Errorf("output lacks %s:\n%s", p, out.String())
		}
	}
	if strings.Contains(out.String(), "NaN") || strings.Contains(out.String(), "Inf") {
		t.Errorf("undefined numbers in\n%s", out.String())
	}
	o.trace = "nosuch"
	if err := run(context.Background(), &out, o); err == nil {
		t.Error("unknown trace accepted")
	}
	o.trace, o.load = "tiresias", 0
	if err := run(context.Background(), &out, o); err == nil {
		t.Error("zero load accepted")
	}
}

// The CPU profile is written through a temporary file renamed into place:
// a symbolic link planted at its name is replaced, not followed.
func TestCPUProfileReplacesSymlink(t *testing.T) {
	dir := t.TempDir()
	victim := filepath.Join(dir, "victim")
	if err := os.WriteFile(victim, []byte("keep"), 0o600); err != nil {
		t.Fatal(err)
	}
	prof := filepath.Join(dir, "cpu.prof")
	if err := os.Symlink(victim, prof); err != nil {
		t.Fatal(err)
	}
	t.Chdir(filepath.Join("..", ".."))
	var out, errOut bytes.Buffer
	if code := command([]string{"-trace", "tiresias", "-policies", "fifo", "-cpuprofile", prof}, &out, &errOut); code != 0 {
		t.Fatalf("status %d: %s", code, errOut.String())
	}
	if kept, err := os.ReadFile(victim); err != nil || string(kept) != "keep" {
		t.Errorf("victim %q, %v", kept, err)
	}
	st, err := os.Lstat(prof)
	if err != nil || !st.Mode().IsRegular() || st.Size() == 0 {
		t.Errorf("profile %v, %v", st, err)
	}
}
