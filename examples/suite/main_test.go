package main

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// A module of one's own (examples/ownpolicy: its own go.mod, gpusched
// replaced by this clone) registers a policy and runs the suite: its row
// stands beside the baselines', ranked.
func TestOutsideModule(t *testing.T) {
	if testing.Short() {
		t.Skip("builds another module")
	}
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command on PATH to build the other module")
	}
	cmd := exec.Command(goTool, "run", ".", "-suite", filepath.Join("..", "..", "compare", "testdata", "tiny.json"),
		"-only", "small-gavel", "-results", "", "-quiet")
	cmd.Dir = filepath.Join("..", "ownpolicy")
	cmd.Env = append(cmd.Environ(), "GOFLAGS=-mod=readonly", "GOWORK=off")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go run in examples/ownpolicy: %v\n%s", err, out)
	}
	for _, want := range []string{"| bestfit | 1 |", "| gavel | 1 |", "## small-gavel", "| policy | mean JCT (h) | rank | paper | ours/paper |"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}
