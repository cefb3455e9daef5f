package compare_test

import (
	"context"
	"os"

	"github.com/gpusched/gpusched/allocation"
	"github.com/gpusched/gpusched/compare"
	"github.com/gpusched/gpusched/sim"
)

// A policy of one's own beside two baselines: Gavel's max-min fairness
// with rounds twice as long (fewer preemptions, slower reaction), on 100
// jobs of Gavel's generator, its table in Markdown.
func Example() {
	jobs, err := (&sim.GavelWorkload{Rate: 20, Seed: 1}).Generate(100)
	if err != nil {
		panic(err)
	}
	mine := compare.Entrant{
		Name:        "gavel-720s",
		Description: "Gavel's max-min fairness in 720 s rounds",
		Policy:      func(compare.Setup) allocation.Policy { return &allocation.MaxMinFairness{} },
		Mechanism:   allocation.Mechanism{RoundLength: 720},
	}
	entrants := []compare.Entrant{mine}
	for _, name := range []string{"fifo", "gavel"} {
		b, err := compare.Baseline(name)
		if err != nil {
			panic(err)
		}
		entrants = append(entrants, b)
	}
	sc := compare.Scenario{Cluster: "v100:4,p100:4,k80:4", Jobs: jobs, From: 20, To: 80}
	report, err := compare.Run(context.Background(), sc, entrants, compare.Options{})
	if err != nil {
		panic(err)
	}
	cols, err := report.Select("mean_jct_h", "p95_jct_h", "preemptions", "type_moves", "gpu_h_v100")
	if err != nil {
		panic(err)
	}
	if err := report.WriteMarkdown(os.Stdout, cols); err != nil {
		panic(err)
	}
	// Output:
	// | policy | mean JCT (h) | p95 (h) | preemptions/job | type moves/job | v100 (GPU-h) |
	// | --- | --- | --- | --- | --- | --- |
	// | gavel-720s | 36.49 | 140.28 | 28.77 | 26.08 | 494.2 |
	// | fifo | 54.96 | 127.65 | 0.98 | 2.02 | 458.8 |
	// | gavel | 36.24 | 139.77 | 57.90 | 52.45 | 494.1 |
}
