// Command discover prints the local server's GPUs and their topology as a
// matrix like nvidia-smi topo -m, found through NVML, or says clearly that
// there is no driver. With -spec it shows a server of a JSON cluster spec
// instead (see topology.ClusterSpec). NVML needs cgo and the build tag
// nvml; without it the command still shows specs.
//
//	go run -tags nvml ./examples/discover
//	go run ./examples/discover -spec cluster.json -server dgx1-0
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/gpusched/gpusched/internal/cli"
	"github.com/gpusched/gpusched/topology"
	"github.com/gpusched/gpusched/topology/nvml"
)

func main() { os.Exit(command(os.Args[1:], os.Stdout, os.Stderr)) }

// command runs discover with args and returns the exit status.
func command(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("discover", flag.ContinueOnError)
	spec := fs.String("spec", "", "a JSON cluster spec (a file of at most 64 MiB) to show instead of the local server")
	name := fs.String("server", "", "with -spec, the server to show (default: the first)")
	return cli.Main(fs, args, stderr, func(ctx context.Context) error {
		var c cli.Checks
		if *spec != "" {
			c.InputFile("spec", *spec, topology.MaxSpecBytes)
		} else if *name != "" {
			c.Fail("server", *name, "-spec too (a server of a cluster spec)")
		}
		if err := c.Err(); err != nil {
			return err
		}
		var d topology.Discoverer = &nvml.Discoverer{}
		if *spec != "" {
			d = topology.Static{Path: *spec}
		}
		err := run(ctx, stdout, d, *name)
		if errors.Is(err, topology.ErrNoDriver) {
			return fmt.Errorf("%w; or show a cluster spec with -spec", err)
		}
		return err
	})
}

func run(ctx context.Context, w io.Writer, d topology.Discoverer, name string) error {
	c, err := d.Discover(ctx)
	if err != nil {
		return err
	}
	s := &c.Servers[0]
	if name != "" {
		s = nil
		for i := range c.Servers {
			if c.Servers[i].ID == name {
				s = &c.Servers[i]
			}
		}
		if s == nil {
			return fmt.Errorf("no server %q in the spec", name)
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Server %s: %d GPUs", s.ID, len(s.GPUs))
	if s.NICGbps > 0 {
		fmt.Fprintf(&b, ", NIC %.0f Gbit/s", s.NICGbps)
	}
	b.WriteString("\n\n")
	fmt.Fprintf(&b, "%-6s", "")
	for i := range s.GPUs {
		fmt.Fprintf(&b, "%-7s", fmt.Sprintf("GPU%d", i))
	}
	fmt.Fprintf(&b, "%-6s %-8s %-10s %s\n", "NUMA", "type", "memory", "bus id")
	for i, g := range s.GPUs {
		fmt.Fprintf(&b, "%-6s", fmt.Sprintf("GPU%d", i))
		for j := range s.GPUs {
			fmt.Fprintf(&b, "%-7s", s.Link(i, j).String())
		}
		numa := "?"
		if g.NUMANode >= 0 {
			numa = fmt.Sprint(g.NUMANode)
		}
		fmt.Fprintf(&b, "%-6s %-8s %-10s %s\n", numa, g.Type, fmt.Sprintf("%d MiB", g.MemoryMiB), g.PCIBusID)
	}
	writeMIG(&b, s)
	b.WriteString("\nLegend: X self, SYS cross socket, NODE same NUMA node, PHB host bridge, PXB several PCIe switches,\n" +
		"PIX one PCIe switch, SB same board, NV# NVLinks, NVS# NVSwitch domain (links per GPU), ? unknown\n")
	_, err = io.WriteString(w, b.String())
	return err
}

// writeMIG lists the MIG layouts of the GPUs in MIG mode, if any: each
// instance as profile@start (the first memory slice it occupies).
func writeMIG(b *strings.Builder, s *topology.Server) {
	shown := false
	for i, g := range s.GPUs {
		if g.MIG == nil {
			continue
		}
		shown = true
		product := g.MIG.Product
		if p, err := g.MIGProduct(); err == nil {
			product = p.Name
		}
		fmt.Fprintf(b, "\nGPU%d MIG %s:", i, product)
		if len(g.MIG.Instances) == 0 {
			b.WriteString(" no instances")
		}
		for _, in := range g.MIG.Instances {
			fmt.Fprintf(b, " %s@%d", in.Profile, in.Start)
		}
	}
	if shown {
		b.WriteString("\n")
	}
}
