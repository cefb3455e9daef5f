// Command mig shows GPU partitioning on a small A100/H100 cluster: the
// current MIG layouts, the MIG planner's new layouts for a set of demands
// (exact and heuristic, with their costs and fragmentation), fractional
// requests packed on the whole GPUs, and heterogeneity-aware max-min
// fairness over whole GPUs and over whole GPUs plus MIG slices, side by
// side. Rates come from the spec model fitted on MLPerf Training results
// and Gavel's table; predicted values are marked with '*'.
//
//	go run ./examples/mig
//	go run ./examples/mig -spec cluster.json
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/gpusched/gpusched/allocation"
	"github.com/gpusched/gpusched/internal/cli"
	"github.com/gpusched/gpusched/perfmodel"
	"github.com/gpusched/gpusched/perfmodel/gavel"
	"github.com/gpusched/gpusched/perfmodel/hw"
	"github.com/gpusched/gpusched/placement"
	"github.com/gpusched/gpusched/topology"
)

// defaultSpec: a server of four A100 80 GB, two of them in MIG mode, and a
// server of four H100 80 GB, one in MIG mode.
const defaultSpec = `{"name": "mig-lab", "servers": [
  {"id": "a100", "nic_gbps": 200, "devices": [
    {"type": "a100", "memory_mib": 81920, "mig": {"instances": [{"profile": "3g.40gb", "start": 4}, {"profile": "2g.20gb", "start": 0}]}},
    {"type": "a100", "memory_mib": 81920, "mig": {"instances": [{"profile": "7g.80gb", "start": 0}]}},
    {"type": "a100", "memory_mib": 81920},
    {"type": "a100", "memory_mib": 81920}]},
  {"id": "h100", "nic_gbps": 400, "devices": [
    {"type": "h100", "mig": {"instances": [{"profile": "1g.10gb", "start": 0}, {"profile": "1g.10gb", "start": 1}, {"profile": "3g.40gb", "start": 4}]}},
    {"type": "h100"}, {"type": "h100"}, {"type": "h100"}]}
]}`

// busy marks the instances that run work now: server, GPU, start slice.
var busy = map[[3]int]bool{{0, 0, 4}: true, {1, 0, 0}: true}

// demands for MIG instances.
var demands = []placement.MIGDemand{
	{Profile: "3g.40gb", Count: 3},
	{Profile: "2g.20gb", Count: 2},
	{Profile: "1g.10gb", Count: 3},
}

// fractions asked of the whole GPUs (time-sliced sharing).
var fractions = []placement.FractionRequest{
	{Fraction: 0.5}, {Fraction: 0.25}, {Fraction: 0.25}, {Fraction: 0.5},
	{MemoryMiB: 30000}, {Fraction: 0.75}, {Fraction: 0.125}, {Fraction: 0.5, Type: topology.H100},
}

// jobs share the cluster under max-min fairness (Gavel's job types).
var jobs = []perfmodel.JobKey{
	{Model: "ResNet-50", BatchSize: 64, ScaleFactor: 1},
	{Model: "Transformer", BatchSize: 128, ScaleFactor: 1},
	{Model: "LM", BatchSize: 40, ScaleFactor: 1},
	{Model: "Recommendation", BatchSize: 2048, ScaleFactor: 1},
	{Model: "CycleGAN", ScaleFactor: 1},
	{Model: "A3C", ScaleFactor: 1},
	{Model: "ResNet-18", BatchSize: 64, ScaleFactor: 2},
	{Model: "Transformer", BatchSize: 64, ScaleFactor: 4},
}

func main() { os.Exit(command(os.Args[1:], os.Stdout, os.Stderr)) }

// command runs mig with args and returns the exit status.
func command(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("mig", flag.ContinueOnError)
	spec := fs.String("spec", "", "a JSON cluster spec with MIG layouts (see topology.ClusterSpec), at most 64 MiB; default: a built-in A100/H100 cluster")
	return cli.Main(fs, args, stderr, func(ctx context.Context) error {
		data := []byte(defaultSpec)
		if *spec != "" {
			var c cli.Checks
			if c.InputFile("spec", *spec, topology.MaxSpecBytes); c.Err() != nil {
				return c.Err()
			}
			var err error
			if data, err = cli.ReadFile(*spec, topology.MaxSpecBytes); err != nil {
				return err
			}
		}
		return run(ctx, stdout, data)
	})
}

func run(ctx context.Context, w io.Writer, spec []byte) error {
	c, err := topology.ParseJSON(spec)
	if err != nil {
		return err
	}
	out := &printer{w: w}
	out.printf("Cluster %s: %d servers, %d GPUs\n", c.Name, len(c.Servers), c.NumGPUs())
	gpus, err := placement.MIGGPUs(c, false)
	if err != nil {
		return err
	}
	for i := range gpus {
		for j := range gpus[i].Instances {
			r := gpus[i].Ref
			gpus[i].Instances[j].Busy = busy[[3]int{r.Server, r.GPU, gpus[i].Instances[j].Start}]
		}
	}
	planned, err := planMIG(ctx, out, c, gpus)
	if err != nil {
		return err
	}
	if err := packFractions(out, c); err != nil {
		return err
	}
	if err := fairness(ctx, out, c, planned); err != nil {
		return err
	}
	return out.err
}

// planMIG runs the planner and returns the cluster with the planned
// layouts.
func planMIG(ctx context.Context, out *printer, c *topology.Cluster, gpus []placement.MIGGPU) (*topology.Cluster, error) {
	exact, err := (&placement.MIGPlanner{}).Plan(ctx, gpus, demands)
	if err != nil {
		return nil, err
	}
	heur, err := (&placement.MIGPlanner{Heuristic: true}).Plan(ctx, gpus, demands)
	if err != nil {
		return nil, err
	}
	out.printf("\nMIG planner, demands:")
	for _, d := range demands {
		out.printf(" %d x %s", d.Count, d.Profile)
	}
	out.printf(" (instance@start; * busy, + new, >n serves demand n)\n")
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	cell(tw, "GPU\tproduct\tnow\texact plan\theuristic plan\t\n")
	for i, g := range gpus {
		cell(tw, "%s/%d\t%s\t%s\t%s\t%s\t\n", c.Servers[g.Ref.Server].ID, g.Ref.GPU, g.Product.Name,
			layoutString(g.Instances), layoutString(exact.Layouts[i]), layoutString(heur.Layouts[i]))
	}
	out.flush(tw)
	for _, p := range []struct {
		name string
		plan *placement.MIGPlan
	}{{"exact", exact}, {"heuristic", heur}} {
		cost := p.plan.Cost
		out.printf("%-9s placed %v of %v; %d unplaced, %d GPUs used, %d busy GPUs and %d GPUs reconfigured, %d compute slices stranded\n",
			p.name, p.plan.Placed, counts(), cost.Unplaced, cost.GPUs, cost.BusyReconfigured, cost.Reconfigured, cost.Stranded)
	}
	planned := clone(c)
	for i, g := range gpus {
		layout := &topology.MIGLayout{Product: g.Product.Name}
		for _, s := range exact.Layouts[i] {
			layout.Instances = append(layout.Instances, s.MIGInstance)
		}
		planned.Servers[g.Ref.Server].GPUs[g.Ref.GPU].MIG = layout
	}
	return planned, planned.Validate()
}

func counts() []int {
	out := make([]int, len(demands))
	for i, d := range demands {
		out[i] = d.Count
	}
	return out
}

func layoutString(slots []placement.MIGSlot) string {
	if len(slots) == 0 {
		return "-"
	}
	s := slices.Clone(slots)
	slices.SortFunc(s, func(a, b placement.MIGSlot) int { return a.Start - b.Start })
	var parts []string
	for _, x := range s {
		mark := ""
		switch {
		case x.Busy:
			mark = "*"
		case x.New:
			mark = "+"
		}
		if x.Demand >= 0 {
			mark += fmt.Sprintf(">%d", x.Demand)
		}
		parts = append(parts, fmt.Sprintf("%s@%d%s", x.Profile, x.Start, mark))
	}
	return strings.Join(parts, " ")
}

// packFractions packs the fractional requests on the GPUs not in MIG mode.
func packFractions(out *printer, c *topology.Cluster) error {
	var gpus []placement.FractionGPU
	for si := range c.Servers {
		for gi, g := range c.Servers[si].GPUs {
			if g.MIG == nil {
				gpus = append(gpus, placement.FractionGPU{Ref: placement.GPURef{Server: si, GPU: gi}, Type: g.Type, MemoryMiB: g.MemoryMiB})
			}
		}
	}
	out.printf("\nFractional requests on the %d whole GPUs:", len(gpus))
	for _, r := range fractions {
		if r.MemoryMiB > 0 {
			out.printf(" %dMiB", r.MemoryMiB)
		} else {
			out.printf(" %g", r.Fraction)
		}
		if r.Type != "" {
			out.printf("(%s)", r.Type)
		}
	}
	out.printf("\n")
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	cell(tw, "policy\tGPU of each request\tGPUs shared\tleft out\tfragmentation after\t\n")
	for _, p := range []struct {
		name string
		pol  placement.FractionPolicy
	}{{"best fit decreasing", placement.BestFitDecreasing}, {"fragmentation gradient", placement.FragmentationGradient}} {
		res, err := placement.FractionPlacer{Policy: p.pol}.Place(gpus, fractions)
		if err != nil {
			return err
		}
		var where []string
		for _, g := range res.GPU {
			if g < 0 {
				where = append(where, "-")
				continue
			}
			where = append(where, fmt.Sprintf("%s/%d", c.Servers[gpus[g].Ref.Server].ID, gpus[g].Ref.GPU))
		}
		cell(tw, "%s\t%s\t%d\t%d\t%.3f\t\n", p.name, strings.Join(where, " "), res.Shared, res.Unplaced, res.After)
	}
	out.flush(tw)
	return nil
}

// fairness compares max-min fairness over whole GPUs with max-min over
// whole GPUs and the planned MIG slices.
func fairness(ctx context.Context, out *printer, c, planned *topology.Cluster) error {
	model, err := hw.Model(perfmodel.Observations(gavel.Simulation(), perfmodel.FP32, "Gavel simulation table"))
	if err != nil {
		return err
	}
	el := model.Elasticities()
	out.printf("\nSpec model (MLPerf Training + Gavel): rate ~ compute^%.2f x bandwidth^%.2f; a MIG slice gets 1/(%.2f/c + %.2f/b) of its GPU\n",
		el[0], el[1], model.ComputeShare(), 1-model.ComputeShare())
	whole := clone(c)
	for si := range whole.Servers {
		for gi := range whole.Servers[si].GPUs {
			whole.Servers[si].GPUs[gi].MIG = nil
		}
	}
	js := make([]allocation.Job, len(jobs))
	for i, k := range jobs {
		js[i] = allocation.Job{ID: i, ScaleFactor: k.ScaleFactor}
	}
	var allocs []*allocation.Allocation
	var problems []*allocation.Problem
	for _, cl := range []*topology.Cluster{whole, planned} {
		p, err := allocation.PartitionedProblem(cl, nil, js, jobs, model)
		if err != nil {
			return err
		}
		a, err := (&allocation.MaxMinFairness{}).Allocate(ctx, p)
		if err != nil {
			return err
		}
		problems, allocs = append(problems, p), append(allocs, a)
	}
	out.printf("Rates in steps/s (* predicted; slices and H100s are all predicted for Gavel's jobs):\n")
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	p := problems[1]
	cell(tw, "job\t")
	for _, t := range p.Types {
		cell(tw, "%s\t", t)
	}
	cell(tw, "\n")
	for m, k := range jobs {
		cell(tw, "%s\t", k)
		for _, t := range p.Types {
			e, err := model.Estimate(k, t)
			switch {
			case err != nil:
				cell(tw, "?\t")
			case k.ScaleFactor > 1 && p.Jobs[m].Throughput[slices.Index(p.Types, t)] == 0:
				cell(tw, "-\t")
			case e.Predicted:
				cell(tw, "%.2f*\t", e.Rate)
			default:
				cell(tw, "%.2f\t", e.Rate)
			}
		}
		cell(tw, "\n")
	}
	out.flush(tw)
	out.printf("\nMax-min fairness (Gavel's heterogeneity-aware policy): time shares per type, and the effective rate\n")
	tw = tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	cell(tw, "job\twhole GPUs only\trate\twhole GPUs and MIG slices\trate\t\n")
	for m, k := range jobs {
		cell(tw, "%s\t%s\t%.2f\t%s\t%.2f\t\n", k, shares(problems[0], allocs[0], m), allocs[0].EffectiveThroughput(problems[0], m),
			shares(problems[1], allocs[1], m), allocs[1].EffectiveThroughput(problems[1], m))
	}
	out.flush(tw)
	var work [2]float64
	for i := range work {
		h := slices.Index(problems[i].Types, topology.H100)
		if h < 0 {
			// A cluster of another spec (it used to index -1 and panic).
			out.printf("work done is measured in whole H100s: this cluster has none\n")
			return nil
		}
		for m := range jobs {
			if r := problems[i].Jobs[m].Throughput[h]; r > 0 {
				work[i] += allocs[i].EffectiveThroughput(problems[i], m) / r
			}
		}
	}
	out.printf("work done, in whole H100s (sum over jobs of rate / rate on H100s): %.2f on whole GPUs, %.2f with slices\n", work[0], work[1])
	out.printf("(the 4-GPU job finds no 4 whole GPUs of one type once MIG takes three; MIG instances have no peer-to-peer path)\n")
	return nil
}

// shares lists a job's time shares of at least 1%.
func shares(p *allocation.Problem, a *allocation.Allocation, m int) string {
	var parts []string
	for k, x := range a.X[m] {
		if x >= 0.01 {
			parts = append(parts, fmt.Sprintf("%.2f %s", x, p.Types[k]))
		}
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, ", ")
}

func clone(c *topology.Cluster) *topology.Cluster {
	cp := *c
	cp.Servers = slices.Clone(c.Servers)
	for i := range cp.Servers {
		cp.Servers[i].GPUs = slices.Clone(c.Servers[i].GPUs)
	}
	return &cp
}

// cell writes to a tabwriter, which buffers: its errors come back from
// Flush (see printer.flush).
func cell(tw *tabwriter.Writer, format string, args ...any) {
	_, _ = fmt.Fprintf(tw, format, args...)
}

// printer writes formatted text and keeps the first error.
type printer struct {
	w   io.Writer
	err error
}

func (p *printer) Write(b []byte) (int, error) {
	if p.err != nil {
		return 0, p.err
	}
	n, err := p.w.Write(b)
	p.err = err
	return n, err
}

func (p *printer) printf(format string, args ...any) { _, _ = fmt.Fprintf(p, format, args...) }

func (p *printer) flush(tw *tabwriter.Writer) {
	if err := tw.Flush(); err != nil && p.err == nil {
		p.err = err
	}
}
