package main

import (
	"testing"

	"github.com/gpusched/gpusched/internal/cli/clitest"
)

// TestCommandCorpus runs the command lines of testdata/args.txt
// (clitest.RunExample).
func TestCommandCorpus(t *testing.T) { clitest.RunExample(t, command) }
