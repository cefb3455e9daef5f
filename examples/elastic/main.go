// Command elastic reproduces the shape of Lyra's headline result (Li et
// al., "Lyra: Elastic Scheduling for Deep Learning Clusters", EuroSys 2023,
// section 7, Table 5) on a public trace: a Microsoft ITP cluster's jobs
// (sim/testdata/itp) on a training cluster next to an inference cluster
// whose usage follows a seeded daily pattern, under four configurations:
// FIFO without loaning or scaling (the baseline), loaning only, scaling
// only, and both (Lyra). It prints mean, median and p95 queuing and JCT,
// usage and the preemption ratio beside Lyra's published ratios.
//
// With -pollux it runs Pollux's eight workloads (Qiao et al., OSDI 2021,
// section 5.2; sim/testdata/pollux) at 1.0x load on 16 nodes x 4 GPUs
// with 60 s scheduling intervals and 30 s restarts, under the Pollux-style
// goodput policy (adaptive batch sizes), the Optimus-style and AFS-style
// policies (the workload's batch sizes, elastic GPUs), and FIFO at the
// workload's fixed GPUs and batch sizes, beside Pollux's published mean
// JCTs, Tiresias (2D-LAS with the artifact's two queues and with
// Tiresias's own thresholds, and 2D-Gittins) at the workload's GPUs beside
// the artifact's stored results, and Sia on the one GPU type.
//
// With -sia it runs the same workloads on Sia's heterogeneous cluster
// (Jayaram Subramanya et al., SOSP 2023, section 4.3: 6 nodes of 4 T4s, 3
// of 8 RTX 2080 Ti, here V100s, and 2 of 8 A100s) under Sia, the
// Pollux-style policy blind to types, Gavel (max-sum-throughput rounds at
// the workloads' GPUs), Tiresias and FIFO, beside Sia's Table 3. -policies
// picks the rows of either table.
//
//	go run ./examples/elastic
//	go run ./examples/elastic -days 30 -servers 72 -usage 0.8
//	go run ./examples/elastic -pollux
//	go run ./examples/elastic -pollux -policies pollux,tiresias,sia
//	go run ./examples/elastic -sia -policies sia,pollux,gavel,tiresias
package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/gpusched/gpusched/elastic"
	"github.com/gpusched/gpusched/internal/cli"
	"github.com/gpusched/gpusched/sim"
)

// options are the experiment's knobs.
type options struct {
	trace                string
	from, days           float64
	servers, inference   int
	gpusPerServer        int
	elasticShare         float64
	minFactor, maxFactor float64
	restart              float64
	usageMean, usageAmp  float64
	usageNoise           float64
	seed                 uint64
	policies             string
	power                float64
	rows                 []string // the rows -policies may name (none: Lyra's table)
	names                []string // parsed from policies
}

func main() { os.Exit(command(os.Args[1:], os.Stdout, os.Stderr)) }

// command runs elastic with args and returns the exit status.
func command(args []string, stdout, stderr io.Writer) int {
	var o options
	fs := flag.NewFlagSet("elastic", flag.ContinueOnError)
	fs.StringVar(&o.trace, "trace", filepath.Join("sim", "testdata", "itp", "cluster04.csv"), "ITP trace (ElasticFlow's format), at most 512 MiB")
	fs.Float64Var(&o.from, "from", 14, "first day of the trace to replay, 0 to 3650")
	fs.Float64Var(&o.days, "days", 15, "days of arrivals to replay, above 0 and at most 3650 (Lyra's trace: 15)")
	fs.IntVar(&o.servers, "servers", 64, fmt.Sprintf("training servers, 1 to %d", maxServers))
	fs.IntVar(&o.inference, "inference", 64, fmt.Sprintf("inference servers, 0 to %d", maxServers))
	fs.IntVar(&o.gpusPerServer, "gpus", 8, "GPUs per server, 1 to 64")
	fs.Float64Var(&o.elasticShare, "elastic", 0.5, "share of jobs that are elastic, 0 to 1")
	fs.Float64Var(&o.minFactor, "min", 0.5, "elastic jobs' base demand as a share of their requested GPUs, 0.01 to 1")
	fs.Float64Var(&o.maxFactor, "max", 2, "elastic jobs' maximum as a multiple of their requested GPUs, 1 to 64")
	fs.Float64Var(&o.restart, "restart", 30, "seconds lost per resize or restart, 0 to 86400")
	fs.Float64Var(&o.usageMean, "usage", 0.7, "inference usage: daily mean, 0 to 1")
	fs.Float64Var(&o.usageAmp, "amplitude", 0.25, "inference usage: daily amplitude, 0 to 1")
	fs.Float64Var(&o.usageNoise, "noise", 0.05, "inference usage: noise every 5 minutes, 0 to 1")
	fs.Uint64Var(&o.seed, "seed", 1, "seed of the elastic jobs and the usage noise")
	pollux := fs.Bool("pollux", false, "run Pollux's eight workloads instead")
	fs.Float64Var(&o.power, "speedup-power", 1, "with -sia: raise the predicted speedups of the types other than T4 to this power, 0.1 to 1 (0.5 brings them near those Sia measured)")
	sia := fs.Bool("sia", false, "run Pollux's eight workloads on Sia's heterogeneous cluster (6 x 4 T4, 3 x 8 V100, 2 x 8 A100) instead")
	fs.StringVar(&o.policies, "policies", "", "with -pollux or -sia: the rows to run, comma-separated (default all): -pollux "+
		strings.Join(polluxNames(), ", ")+"; -sia "+strings.Join(siaNames(), ", "))
	return cli.Main(fs, args, stderr, func(ctx context.Context) error {
		switch {
		case *pollux && *sia:
			return cli.Usage("sia", "true", "-pollux or -sia, not both")
		case *pollux:
			o.rows = polluxNames()
		case *sia:
			o.rows = siaNames()
		}
		if err := o.check(); err != nil {
			return err
		}
		var err error
		dir := filepath.Join("sim", "testdata", "pollux")
		switch {
		case *pollux:
			_, err = runPollux(ctx, stdout, dir, 8, o.names)
		case *sia:
			_, err = runSia(ctx, stdout, dir, 8, o.names, o.power)
		default:
			_, err = run(ctx, stdout, o)
		}
		return err
	})
}

// maxServers bounds each cluster (32,768 GPUs of 8 per server; the
// simulator keeps state per server).
const maxServers = 4096

// check validates every flag before any work starts.
func (o *options) check() error {
	var c cli.Checks
	c.InputFile("trace", o.trace, sim.MaxTraceBytes)
	c.Float("from", o.from, 0, 3650)
	c.Positive("days", o.days, 3650)
	c.Int("servers", o.servers, 1, maxServers)
	c.Int("inference", o.inference, 0, maxServers)
	c.Int("gpus", o.gpusPerServer, 1, 64)
	c.Float("elastic", o.elasticShare, 0, 1)
	c.Float("min", o.minFactor, 0.01, 1)
	c.Float("max", o.maxFactor, 1, 64)
	c.Float("restart", o.restart, 0, 86400)
	c.Float("usage", o.usageMean, 0, 1)
	c.Float("amplitude", o.usageAmp, 0, 1)
	c.Float("noise", o.usageNoise, 0, 1)
	c.Float("speedup-power", o.power, 0.1, 1)
	if o.rows == nil && o.policies != "" {
		c.Fail("policies", o.policies, "no -policies without -pollux or -sia")
	} else {
		o.names = c.List("policies", o.policies, true, o.rows...)
	}
	return c.Err()
}

// config is one row of the comparison.
type config struct {
	name             string
	policy           elastic.Policy
	loaning, scaling bool
}

var configs = []config{
	{"baseline: FIFO, no loaning, no scaling", elastic.FIFO{}, false, false},
	{"Lyra's SJF, no loaning, no scaling", elastic.Lyra{}, false, false},
	{"loaning only (Lyra, inelastic)", elastic.Lyra{}, true, false},
	{"scaling only: Lyra", elastic.Lyra{}, false, true},
	{"scaling only: AFS-style", elastic.AFS{}, false, true},
	{"scaling only: Optimus-style", elastic.Optimus{}, false, true},
	{"Lyra: loaning and scaling", elastic.Lyra{}, true, true},
}

func load(o options) ([]sim.Job, error) {
	all, err := cli.Read(o.trace, sim.MaxTraceBytes, func(r io.Reader, path string) ([]sim.Job, error) {
		return sim.ReadITP(r, filepath.Base(path))
	})
	if err != nil {
		return nil, err
	}
	var jobs []sim.Job
	lo, hi := o.from*86400, (o.from+o.days)*86400
	for _, j := range all {
		if j.Arrival >= lo && j.Arrival < hi {
			j.Arrival -= lo
			j.ID = len(jobs)
			jobs = append(jobs, j)
		}
	}
	if len(jobs) == 0 {
		return nil, fmt.Errorf("no jobs arrive between day %v and day %v", o.from, o.from+o.days)
	}
	return jobs, nil
}

// run prints the comparison and returns each configuration's summary.
func run(ctx context.Context, out io.Writer, o options) ([]sim.ElasticSummary, error) {
	w := &bytes.Buffer{}
	defer func() { _, _ = out.Write(w.Bytes()) }()
	trace, err := load(o)
	if err != nil {
		return nil, err
	}
	maxWorkers := o.servers * o.gpusPerServer
	elasticJobs, err := sim.ElasticSpec{Fraction: o.elasticShare, MinFactor: o.minFactor, MaxFactor: o.maxFactor, MaxWorkers: maxWorkers, Seed: o.seed}.Jobs(trace)
	if err != nil {
		return nil, err
	}
	rigidJobs, err := sim.ElasticSpec{}.Jobs(trace)
	if err != nil {
		return nil, err
	}
	nElastic := 0
	for _, j := range elasticJobs {
		if j.Elastic() {
			nElastic++
		}
	}
	fmt.Fprintf(w, "%s, days %g to %g: %d jobs (%d elastic: base %g x, max %g x requested), %d training + %d inference servers of %d GPUs\n",
		filepath.Base(o.trace), o.from, o.from+o.days, len(trace), nElastic, o.minFactor, o.maxFactor, o.servers, o.inference, o.gpusPerServer)
	fmt.Fprintf(w, "inference usage %.2f +- %.2f daily, noise %.2f; 2%% headroom; orchestrator every 300 s, scheduler every 60 s, %g s per resize or restart\n\n",
		o.usageMean, o.usageAmp, o.usageNoise, o.restart)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	_, _ = fmt.Fprintln(tw, "configuration\tqueue mean (s)\tmedian\tp95\tJCT mean (s)\tmedian\tp95\tusage train/all\tpreempted\tresizes/job\tvs baseline queue/JCT\ttime\t")
	var base sim.ElasticSummary
	var sums []sim.ElasticSummary
	for i, c := range configs {
		cfg := sim.ElasticConfig{TrainingServers: o.servers, GPUsPerServer: o.gpusPerServer, Policy: c.policy, RestartOverhead: o.restart, Headroom: 0.02}
		if c.loaning {
			cfg.InferenceServers = o.inference
			cfg.Usage = sim.Diurnal{Mean: o.usageMean, Amplitude: o.usageAmp, Noise: o.usageNoise, Peak: 14 * 3600, Seed: o.seed}
		}
		jobs := rigidJobs
		if c.scaling {
			jobs = elasticJobs
		}
		start := time.Now()
		res, err := sim.RunElastic(ctx, cfg, jobs)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", c.name, err)
		}
		s := res.Summarise()
		sums = append(sums, s)
		if i == 0 {
			base = s
		}
		f0 := func(v float64) string { return cli.Fixed(v, 0) }
		_, _ = fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s / %s\t%s%%\t%s\t%s / %s\t%.1fs\t\n", c.name,
			f0(s.MeanQueue), f0(s.MedianQueue), f0(s.P95Queue), f0(s.MeanJCT), f0(s.MedianJCT), f0(s.P95JCT),
			cli.Fixed(s.TrainingUsage, 2), cli.Fixed(s.OverallUsage, 2), cli.Fixed(100*s.PreemptionRatio, 1), cli.Fixed(s.ResizesPerJob, 2),
			cli.Ratio(base.MeanQueue, s.MeanQueue, 2), cli.Ratio(base.MeanJCT, s.MeanJCT, 2), time.Since(start).Seconds())
	}
	if err := tw.Flush(); err != nil {
		return nil, err
	}
	fmt.Fprintln(w, "\nLyra (15-day private trace, 3,544 training V100s, ~4,000 inference T4s): 1.53x lower mean queuing and 1.48x lower mean JCT than the")
	fmt.Fprintln(w, "FIFO baseline (queue 3072 -> 2010 s, JCT 16610 -> 11236 s), preemption ratio 12.24%; loaning only JCT 12947 s, scaling only 12048 s.")
	return sums, nil
}
