// Command synergy runs Synergy's simulations (Mohan et al., OSDI 2022,
// section 6; its artifact's simulator/runner.py): the Philly-derived
// workload on its cluster of 16 servers of 8 GPUs, 24 CPUs and 500 GB,
// under each queue policy (FIFO, SRTF, LAS, FTF) with each allocator of
// CPUs and memory (GPU-proportional, Synergy-GREEDY, Synergy-TUNE, and
// Synergy-OPT's bound and its rounding), at each load, and prints the
// mean and 99th-percentile JCT of jobs 4,000 to 5,000 in hours, and how
// much better than GPU-proportional each allocator does.
//
//	go run ./examples/synergy                          # FIFO, all allocators, 9 jobs/h: the artifact's check
//	go run ./examples/synergy -orders fifo,srtf,las,ftf -loads 2,4,6,8,9
//	go run ./examples/synergy -multigpu -loads 3,4,5
//	go run ./examples/synergy -cpus 32                 # 4 CPUs per GPU
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"

	"github.com/gpusched/gpusched/internal/cli"
	"github.com/gpusched/gpusched/multires"
	"github.com/gpusched/gpusched/sim"
)

// allocators are the allocators by name, in the order of the table.
var allocators = []struct {
	name string
	a    multires.Allocator
}{
	{"proportional", multires.Proportional{}},
	{"greedy", multires.Greedy{}},
	{"tune", multires.Tune{}},
	{"opt", multires.Opt{}},
	{"opt-round", multires.Opt{Round: true}},
}

var orders = map[string]sim.SynergyOrder{"fifo": sim.SynergyFIFO, "srtf": sim.SynergySRTF, "las": sim.SynergyLAS, "ftf": sim.SynergyFTF}

var orderNames = []string{"fifo", "srtf", "las", "ftf"}

func allocatorNames() []string {
	var n []string
	for _, a := range allocators {
		n = append(n, a.name)
	}
	return n
}

// options are the command's settings.
type options struct {
	orders, allocators, loads, split, profiles string
	servers, gpus                              int
	cpus, mem                                  float64
	multiGPU                                   bool
	seed                                       uint64
	from, to                                   int
}

func main() { os.Exit(command(os.Args[1:], os.Stdout, os.Stderr)) }

// command runs synergy with args and returns the exit status.
func command(args []string, stdout, stderr io.Writer) int {
	var o options
	fs := flag.NewFlagSet("synergy", flag.ContinueOnError)
	fs.StringVar(&o.orders, "orders", "fifo", "comma-separated queue policies: "+strings.Join(orderNames, ", "))
	fs.StringVar(&o.allocators, "allocators", strings.Join(allocatorNames(), ","), "comma-separated allocators: "+strings.Join(allocatorNames(), ", "))
	fs.StringVar(&o.loads, "loads", "9", "comma-separated arrival rates in jobs per hour, each from 0.01 to 40 (beyond, the queue grows without end: 128 GPUs finish about 8 jobs an hour at the proportional share; arrivals go on while the measured jobs run)")
	fs.StringVar(&o.split, "split", "20,70,10", "percentages of image, language and speech jobs, adding up to 100")
	fs.StringVar(&o.profiles, "profiles", "", "a profile file in multires.ReadProfiles' layout (default Synergy's zoo)")
	fs.IntVar(&o.servers, "servers", 16, "servers, 1 to 4096")
	fs.IntVar(&o.gpus, "gpus", 8, "GPUs per server, 1 to 64")
	fs.Float64Var(&o.cpus, "cpus", 24, "CPUs per server, 1 to 4096")
	fs.Float64Var(&o.mem, "mem", 500, "memory per server in GB, 1 to 65536")
	fs.BoolVar(&o.multiGPU, "multigpu", false, "draw multi-GPU jobs (1, 2, 4, 8 GPUs)")
	fs.Uint64Var(&o.seed, "seed", 42, "the seed of both draws (the artifact's is 42)")
	fs.IntVar(&o.from, "from", 4000, "the first measured job, in order of arrival")
	fs.IntVar(&o.to, "to", 5000, "the end of the measured jobs (exclusive)")
	return cli.Main(fs, args, stderr, func(ctx context.Context) error {
		p, err := o.plan()
		if err != nil {
			return err
		}
		return run(ctx, stdout, p)
	})
}

// plan is what to run, checked.
type plan struct {
	orders     []string
	allocators []string
	loads      []float64
	split      [3]int
	profiles   *multires.Profiles
	servers    []multires.Server
	o          options
}

func (o options) plan() (*plan, error) {
	var c cli.Checks
	p := &plan{o: o, profiles: multires.Zoo()}
	p.orders = c.List("orders", o.orders, false, orderNames...)
	p.allocators = c.List("allocators", o.allocators, false, allocatorNames()...)
	c.Int("servers", o.servers, 1, 4096)
	c.Int("gpus", o.gpus, 1, 64)
	c.Float("cpus", o.cpus, 1, 4096)
	c.Float("mem", o.mem, 1, 65536)
	c.Int("from", o.from, 0, 1_000_000)
	c.Int("to", o.to, o.from+1, 1_000_000)
	for s := range strings.SplitSeq(o.loads, ",") {
		v, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
		if err != nil || !(v >= 0.01 && v <= 40) {
			c.Fail("loads", strconv.Quote(o.loads), "comma-separated jobs per hour, each from 0.01 to 40")
			break
		}
		p.loads = append(p.loads, v)
	}
	parts := strings.Split(o.split, ",")
	sum := 0
	for i := 0; i < 3 && len(parts) == 3; i++ {
		v, err := strconv.Atoi(strings.TrimSpace(parts[i]))
		if err != nil || v < 0 {
			sum = -1
			break
		}
		p.split[i] = v
		sum += v
	}
	if sum != 100 {
		c.Fail("split", strconv.Quote(o.split), "three percentages adding up to 100")
	}
	if o.profiles != "" {
		c.InputFile("profiles", o.profiles, multires.MaxProfilesBytes)
	}
	if err := c.Err(); err != nil {
		return nil, err
	}
	if o.profiles != "" {
		ps, err := cli.Read(o.profiles, multires.MaxProfilesBytes, func(r io.Reader, _ string) (*multires.Profiles, error) { return multires.ReadProfiles(r) })
		if err != nil {
			return nil, err
		}
		p.profiles = ps
	}
	p.servers = multires.Homogeneous(o.servers, multires.Server{GPUs: o.gpus, CPUs: o.cpus, MemGB: o.mem})
	return p, nil
}

type cell struct {
	order, alloc string
	load         float64
	s            sim.Summary
	demotions    int
	err          error
}

func run(ctx context.Context, w io.Writer, p *plan) error {
	var cells []*cell
	for _, o := range p.orders {
		for _, l := range p.loads {
			for _, a := range p.allocators {
				cells = append(cells, &cell{order: o, alloc: a, load: l})
			}
		}
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	work := make(chan *cell)
	for range runtime.GOMAXPROCS(0) {
		wg.Go(func() {
			for c := range work {
				if c.err = p.simulate(ctx, c); c.err != nil {
					cancel()
				}
			}
		})
	}
	for _, c := range cells {
		work <- c
	}
	close(work)
	wg.Wait()
	for _, c := range cells {
		if c.err != nil {
			return fmt.Errorf("%s with %s at %g jobs/h: %w", c.order, c.alloc, c.load, c.err)
		}
	}
	return p.write(w, cells)
}

func (p *plan) simulate(ctx context.Context, c *cell) error {
	w := sim.SynergyWorkload{Rate: c.load, Split: p.split, Seed: p.o.seed, MultiGPU: p.o.multiGPU, Profiles: p.profiles}
	jobs, err := w.Jobs()
	if err != nil {
		return err
	}
	i := slices.IndexFunc(allocators, func(a struct {
		name string
		a    multires.Allocator
	}) bool {
		return a.name == c.alloc
	})
	res, err := sim.RunSynergy(ctx, sim.SynergyConfig{Servers: p.servers, Allocator: allocators[i].a, Order: orders[c.order], From: p.o.from, To: p.o.to}, jobs)
	if err != nil {
		return err
	}
	c.s, c.demotions = res.Summarise(p.o.from, p.o.to), res.Demotions
	return nil
}

func (p *plan) write(w io.Writer, cells []*cell) error {
	kind := "single-GPU"
	if p.o.multiGPU {
		kind = "multi-GPU"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Synergy's %s workload (split %v, seed %d) on %d servers of %d GPUs, %g CPUs, %g GB; jobs %d to %d\n",
		kind, p.split, p.o.seed, p.o.servers, p.o.gpus, p.o.cpus, p.o.mem, p.o.from, p.o.to)
	b.WriteString("mean JCT (p99) in hours; xN: GPU-proportional's mean over this one's\n")
	var t strings.Builder // the table, cells separated by tabs
	t.WriteString("order\tjobs/h")
	for _, a := range p.allocators {
		t.WriteString("\t" + a)
	}
	t.WriteString("\n")
	for k := 0; k < len(cells); k += len(p.allocators) {
		row := cells[k : k+len(p.allocators)]
		var prop float64
		for _, c := range row {
			if c.alloc == "proportional" {
				prop = c.s.MeanJCT
			}
		}
		fmt.Fprintf(&t, "%s\t%g", row[0].order, row[0].load)
		for _, c := range row {
			fmt.Fprintf(&t, "\t%.2f (%.1f)", c.s.MeanJCT/3600, c.s.P99JCT/3600)
			if prop > 0 && c.alloc != "proportional" {
				fmt.Fprintf(&t, " x%.2f", prop/c.s.MeanJCT)
			}
		}
		t.WriteString("\n")
	}
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	if _, err := io.WriteString(tw, t.String()); err != nil {
		return err
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := io.WriteString(w, b.String())
	return err
}
