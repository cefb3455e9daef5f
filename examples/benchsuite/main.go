// Command benchsuite reproduces the simulated results of Gavel (Narayanan
// et al., OSDI 2020, section 7; the numbers printed in the notebooks of
// stanford-futuredata/gavel at c4fa400) and prints ours beside them: mean
// JCT of jobs 4000-5000 of Gavel's continuous traces on 36 V100 + 36 P100 +
// 36 K80 at several arrival rates, and the makespan of static multi-GPU
// traces. It takes minutes; -only selects experiments by name.
//
//	go run ./examples/benchsuite
//	go run ./examples/benchsuite -only single-4.8,makespan-100
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/gpusched/gpusched/allocation"
	"github.com/gpusched/gpusched/internal/cli"
	"github.com/gpusched/gpusched/perfmodel/gavel"
	"github.com/gpusched/gpusched/sim"
	"github.com/gpusched/gpusched/topology"
)

// experiment is one of Gavel's settings with its published numbers (hours;
// 0 where Gavel did not report one, -1 where its run did not finish).
type experiment struct {
	name      string
	rate      float64 // jobs/h; 0 for a static trace
	multiGPU  bool
	jobs      int
	from, to  int
	makespan  bool
	published map[string]float64
}

var experiments = []experiment{
	{name: "single-0.4", rate: 0.4, jobs: 5000, from: 4000, to: 5000, published: map[string]float64{"las": 23.26, "gavel": 17.58, "gavel-ss": 18.42}},
	{name: "single-4.8", rate: 4.8, jobs: 5000, from: 4000, to: 5000, published: map[string]float64{"las": 35.79, "gavel": 18.97, "gavel-ss": 18.67}},
	{name: "single-5.6", rate: 5.6, jobs: 5000, from: 4000, to: 5000, published: map[string]float64{"las": 95.99, "gavel": 28.96, "gavel-ss": 19.64}},
	{name: "multi-2.8", rate: 2.8, multiGPU: true, jobs: 5000, from: 4000, to: 5000, published: map[string]float64{"las": 169.93, "gavel": 55.78, "gavel-ss": 38.25}},
	{name: "makespan-100", multiGPU: true, jobs: 100, to: 100, makespan: true, published: map[string]float64{"fifo": 182.3, "gavel": 161.2, "gavel-ss": 163.6}},
	{name: "makespan-700", multiGPU: true, jobs: 700, to: 700, makespan: true, published: map[string]float64{"fifo": 619.5, "gavel": 244.2, "gavel-ss": 226.2}},
}

func main() { os.Exit(command(os.Args[1:], os.Stdout, os.Stderr)) }

// command runs benchsuite with args and returns the exit status.
func command(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("benchsuite", flag.ContinueOnError)
	only := fs.String("only", "", "comma-separated experiments to run (default: all): "+names())
	seeds := fs.Int("seeds", 1, "seeds per experiment, 1 to 100 (Gavel's JCT notebooks use seed 0; its makespan numbers average seeds 0-2)")
	queues := fs.String("queues", "gavel", "round mechanism queues: gavel (per type, types shuffled for agnostic policies) or global")
	return cli.Main(fs, args, stderr, func(ctx context.Context) error {
		var c cli.Checks
		var all []string
		for _, e := range experiments {
			all = append(all, e.name)
		}
		c.List("only", *only, true, all...)
		c.Int("seeds", *seeds, 1, 100)
		c.OneOf("queues", *queues, "gavel", "global")
		if err := c.Err(); err != nil {
			return err
		}
		return run(ctx, stdout, *only, *seeds, *queues)
	})
}

func names() string {
	var n []string
	for _, e := range experiments {
		n = append(n, e.name)
	}
	return strings.Join(n, ", ")
}

// policy returns the policy a column stands for in an experiment.
func policy(col string, e experiment, seed uint64) (allocation.Policy, bool, bool) {
	switch {
	case col == "fifo":
		// Gavel's FIFO baseline, with the fastest free type (see gavel.md on
		// the quirk of its random-type mode).
		return &allocation.FIFO{Perf: true, Seed: seed}, false, false
	case col == "las":
		return &allocation.MaxMinFairness{Agnostic: true}, false, true
	case e.makespan && col == "gavel":
		return &allocation.MinMakespan{}, false, false
	case e.makespan && col == "gavel-ss":
		return nil, false, false // not built: space sharing for makespan
	case col == "gavel":
		return &allocation.MaxMinFairness{}, false, false
	case col == "gavel-ss":
		return &allocation.MaxMinFairness{SpaceSharing: true}, true, false
	}
	return nil, false, false
}

func run(ctx context.Context, w io.Writer, only string, seeds int, queues string) error {
	selected := map[string]bool{}
	for _, n := range strings.Split(only, ",") {
		if n = strings.TrimSpace(n); n != "" {
			selected[n] = true
		}
	}
	types := []topology.GPUType{topology.V100, topology.P100, topology.K80}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	var werr error
	out := func(cells ...string) {
		if werr == nil {
			_, werr = fmt.Fprintln(tw, strings.Join(cells, "\t")+"\t")
		}
	}
	out("experiment", "policy", "metric", "Gavel (h)", "ours (h)", "ours/Gavel", "run time")
	for _, e := range experiments {
		if len(selected) > 0 && !selected[e.name] {
			continue
		}
		ours := map[string]float64{}
		for _, col := range []string{"fifo", "las", "gavel", "gavel-ss"} {
			pub, ok := e.published[col]
			if !ok {
				continue
			}
			pol, ss, agnostic := policy(col, e, 0)
			metric := "mean JCT"
			if e.makespan {
				metric = "makespan"
			}
			if pol == nil {
				out(e.name, col, metric, fmt.Sprintf("%.2f", pub), "not built", "", "")
				continue
			}
			start := time.Now()
			total := 0.0
			for s := range seeds {
				seed := uint64(s)
				pol, _, _ = policy(col, e, seed)
				jobs, err := (&sim.GavelWorkload{Rate: e.rate, MultiGPU: e.multiGPU, Seed: seed}).Generate(e.jobs)
				if err != nil {
					return err
				}
				cfg := sim.Config{Types: types, Capacity: []int{36, 36, 36}, Policy: pol, Seed: seed, GlobalQueue: queues != "gavel"}
				if queues == "gavel" {
					cfg.ShuffleTypes = agnostic
				}
				if ss {
					cfg.Colocation = gavel.Simulation()
				}
				res, err := sim.Run(ctx, cfg, jobs)
				if err != nil {
					return fmt.Errorf("%s %s: %w", e.name, col, err)
				}
				sum := res.Summarise(e.from, e.to)
				if e.makespan {
					total += sum.Makespan / 3600
				} else {
					total += sum.MeanJCT / 3600
				}
			}
			v := total / float64(seeds)
			ours[col] = v
			out(e.name, col, metric, fmt.Sprintf("%.2f", pub), cli.Fixed(v, 2), cli.Fixed(v/pub, 2), time.Since(start).Round(100*time.Millisecond).String())
		}
		base := "las"
		if e.makespan {
			base = "fifo"
		}
		if ours[base] > 0 && ours["gavel"] > 0 {
			out(e.name, base+"/gavel", "ratio", fmt.Sprintf("%.2f", e.published[base]/e.published["gavel"]), cli.Fixed(ours[base]/ours["gavel"], 2), "", "")
		}
	}
	if werr != nil {
		return werr
	}
	return tw.Flush()
}
