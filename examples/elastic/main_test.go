package main

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"
)

// Two days of the ITP trace on a small cluster: every configuration runs,
// and loaning plus scaling queues jobs less than the FIFO baseline.
func TestRunShort(t *testing.T) {
	t.Chdir(filepath.Join("..", ".."))
	var out bytes.Buffer
	o := options{trace: filepath.Join("sim", "testdata", "itp", "cluster04.csv"), from: 14, days: 2, servers: 24, inference: 24, gpusPerServer: 8,
		elasticShare: 0.5, minFactor: 0.5, maxFactor: 2, restart: 30, usageMean: 0.7, usageAmp: 0.25, usageNoise: 0.05, seed: 1}
	sums, err := run(context.Background(), &out, o)
	if err != nil {
		t.Fatal(err)
	}
	if base, lyra := sums[0], sums[len(sums)-1]; !(lyra.MeanQueue < base.MeanQueue) || !(lyra.MeanJCT < base.MeanJCT) {
		t.Errorf("Lyra queue %v JCT %v, baseline %v %v", lyra.MeanQueue, lyra.MeanJCT, base.MeanQueue, base.MeanJCT)
	}
	for _, c := range configs {
		if !strings.Contains(out.String(), c.name) {
			t.Errorf("no row %q in\n%s", c.name, out.String())
		}
	}
	o.from = 1000
	if _, err := run(context.Background(), &out, o); err == nil {
		t.Error("an empty window should fail")
	}
}

// Pollux's first workload: the goodput policy beats Tiresias's published
// mean JCT and the fixed-GPU FIFO baseline.
func TestRunPolluxOne(t *testing.T) {
	if testing.Short() {
		t.Skip("fits six step-time models")
	}
	var out bytes.Buffer
	means, err := runPollux(context.Background(), &out, filepath.Join("..", "..", "sim", "testdata", "pollux"), 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(means) != len(polluxPolicies) {
		t.Fatalf("%d rows, want %d", len(means), len(polluxPolicies))
	}
	// fifo, pollux, optimus, afs, tiresias, tiresias-las, tiresias-gittins
	fifo, pollux, tiresias, gittins := means[0], means[1], means[4], means[6]
	if !(pollux < 4038 && pollux < fifo) {
		t.Errorf("Pollux-style %v s, FIFO %v s\n%s", pollux, fifo, out.String())
	}
	// Preempting by attained service helps the short jobs that FIFO makes
	// wait behind long ones (the artifact: Tiresias 2,474 s on workload 1).
	if !(tiresias < fifo && gittins < fifo) {
		t.Errorf("Tiresias 2D-LAS %v s, 2D-Gittins %v s, FIFO %v s\n%s", tiresias, gittins, fifo, out.String())
	}
	if _, err := runPollux(context.Background(), &out, t.TempDir(), 1, nil); err == nil {
		t.Error("a folder without profiles should fail")
	}
}
