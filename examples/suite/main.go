// Command suite runs gpusched's benchmark suite: the standard scenarios
// (Gavel's single- and multi-GPU continuous experiments and its static
// multi-GPU trace, Kueue's flavor walk, the ITP, Philly and Tiresias
// traces; compare/suite.json) under their baselines, and writes one report
// with each scenario's table, the entrants' ranks and the papers' figures
// beside ours. Rows are kept in -results as they finish, so a suite
// stopped half-way resumes where it stopped. A policy of one's own runs
// beside the baselines from a module of its own: examples/ownpolicy, and
// docs/compare.md.
//
//	go run ./examples/suite -list
//	go run ./examples/suite -only kueue-flavor-walk,tiresias
//	go run ./examples/suite -suite my-scenarios.json -traces ~/traces
package main

import (
	"os"

	"github.com/gpusched/gpusched/compare"
)

func main() { os.Exit(compare.Main(os.Args[1:], os.Stdout, os.Stderr)) }
