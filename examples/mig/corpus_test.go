package main

import (
	"path/filepath"
	"testing"

	"github.com/gpusched/gpusched/internal/cli/clitest"
)

// TestCommandCorpus runs the command lines of testdata/args.txt: every
// bad flag is refused with exit status 2 and one line naming it.
func TestCommandCorpus(t *testing.T) {
	corpus, err := filepath.Abs(filepath.Join("testdata", "args.txt"))
	if err != nil {
		t.Fatal(err)
	}
	t.Chdir(filepath.Join("..", ".."))
	clitest.Run(t, corpus, command)
}
