// Command throughputs builds Gavel's simulated cluster (36 V100 + 36 P100 +
// 36 K80) and prints the measured throughput matrix of a few jobs from the
// embedded Gavel table, with each job's best GPU type and a co-location
// example. It is the first thing to run:
//
//	go run ./examples/throughputs
//	go run ./examples/throughputs -cluster v100:32:8,k80:16 -physical
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/gpusched/gpusched/internal/cli"
	"github.com/gpusched/gpusched/perfmodel"
	"github.com/gpusched/gpusched/perfmodel/gavel"
	"github.com/gpusched/gpusched/topology"
)

func main() { os.Exit(command(os.Args[1:], os.Stdout, os.Stderr)) }

// command runs throughputs with args and returns the exit status.
func command(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("throughputs", flag.ContinueOnError)
	spec := fs.String("cluster", "v100:36,p100:36,k80:36", "cluster spec: type:count[:gpus-per-server],... or Gavel's v100:p100:k80 counts")
	perServer := fs.Int("gpus-per-server", 4, "GPUs per server where the spec does not say, 1 to 1024")
	physical := fs.Bool("physical", false, "use Gavel's physical-cluster table instead of its simulation table")
	return cli.Main(fs, args, stderr, func(context.Context) error {
		var c cli.Checks
		c.Int("gpus-per-server", *perServer, 1, 1024)
		if err := c.Err(); err != nil {
			return err
		}
		if _, err := topology.ParseCompact(*spec, *perServer); err != nil {
			return cli.Usage("cluster", *spec, "type:count[:gpus-per-server],... or v100:p100:k80 counts (%v)", err)
		}
		return run(stdout, *spec, *perServer, *physical)
	})
}

// jobs are a few of Gavel's 26 job types, chosen to show its quirks.
var jobs = []perfmodel.JobKey{
	{Model: "ResNet-18", BatchSize: 16, ScaleFactor: 1},
	{Model: "ResNet-50", BatchSize: 64, ScaleFactor: 1},
	{Model: "Transformer", BatchSize: 128, ScaleFactor: 1},
	{Model: "LM", BatchSize: 20, ScaleFactor: 1},
	{Model: "Recommendation", BatchSize: 1024, ScaleFactor: 1},
	{Model: "A3C", ScaleFactor: 1},
	{Model: "CycleGAN", ScaleFactor: 1},
	{Model: "ResNet-18", BatchSize: 16, ScaleFactor: 2},
	{Model: "Transformer", BatchSize: 128, ScaleFactor: 4},
}

// printer writes formatted text and keeps the first error.
type printer struct {
	w   io.Writer
	err error
}

func (p *printer) printf(format string, args ...any) {
	if p.err == nil {
		_, p.err = fmt.Fprintf(p.w, format, args...)
	}
}

func run(out io.Writer, spec string, perServer int, physical bool) error {
	w := &printer{w: out}
	cluster, err := topology.ParseCompact(spec, perServer)
	if err != nil {
		return err
	}
	table, name := gavel.Simulation(), "simulation_throughputs.json"
	if physical {
		table, name = gavel.Physical(), "physical_cluster_throughputs.json"
	}
	types := cluster.GPUTypes()
	capacity := cluster.Capacity()
	w.printf("Cluster %s: %d servers, %d GPUs\n", cluster.Name, len(cluster.Servers), cluster.NumGPUs())
	for _, t := range types {
		w.printf("  %-5s %3d GPUs\n", t, capacity[t])
	}
	w.printf("\nThroughput in steps/s (whole job) from Gavel's %s:\n\n", name)

	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	rows := &printer{w: tw}
	header := []string{"job", "GPUs"}
	for _, t := range types {
		header = append(header, string(t))
	}
	header = append(header, "best", "best/worst")
	rows.printf("%s\t\n", strings.Join(header, "\t"))
	for _, k := range jobs {
		row := []string{k.Name(), fmt.Sprint(k.ScaleFactor)}
		best, worst, bestType := 0.0, 0.0, topology.GPUType("")
		for _, t := range types {
			v, err := table.Throughput(k, t)
			if err != nil {
				return err
			}
			row = append(row, fmt.Sprintf("%.2f", v))
			if v > best {
				best, bestType = v, t
			}
			if v > 0 && (worst == 0 || v < worst) {
				worst = v
			}
		}
		ratio := "-"
		if worst > 0 {
			ratio = fmt.Sprintf("%.1fx", best/worst)
		}
		row = append(row, string(bestType), ratio)
		rows.printf("%s\t\n", strings.Join(row, "\t"))
	}
	if rows.err != nil {
		return rows.err
	}
	if err := tw.Flush(); err != nil {
		return err
	}

	a, b := jobs[0], jobs[2]
	w.printf("\nSpace sharing: %s with %s on one GPU\n(steps/s; then each as a fraction of its rate alone, and their sum: above 1, sharing gains):\n", a.Name(), b.Name())
	for _, t := range types {
		ta, tb, err := table.Colocated(a, b, t)
		if err != nil {
			return err
		}
		ia, _ := table.Throughput(a, t)
		ib, _ := table.Throughput(b, t)
		if ta == 0 && tb == 0 {
			w.printf("  %-5s cannot share\n", t)
			continue
		}
		w.printf("  %-5s %7.2f + %7.2f   (%.2f + %.2f = %.2f)\n", t, ta, tb, ta/ia, tb/ib, ta/ia+tb/ib)
	}
	return w.err
}
