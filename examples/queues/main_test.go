package main

import (
	"bytes"
	"context"
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
	if err := run(context.Background(), &out, "tiresias", 0.5, samples, ""); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"fifo+easy", "sjf", "srtf+easy", "2d-las", "2d-gittins+easy"} {
		if !strings.Contains(out.String(), p) {
			t.Errorf("output lacks %s:\n%s", p, out.String())
		}
	}
	if err := run(context.Background(), &out, "nosuch", 0.5, samples, ""); err == nil {
		t.Error("unknown trace accepted")
	}
	if err := run(context.Background(), &out, "tiresias", 0, samples, ""); err == nil {
		t.Error("zero load accepted")
	}
}
