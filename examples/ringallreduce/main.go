// Command ringallreduce reproduces section 7 of Yu, Ji, Rajan and Liu, "On
// Scheduling Ring-All-Reduce Learning Jobs in Multi-Tenant GPU Clusters
// with Communication Contention" (ACM MobiHoc 2022): SJF-BCO against
// List-Scheduling, First-Fit and Random on 160 jobs over seeded clusters
// (sim.RingPaperSetup), printing means and standard deviations over the
// seeds beside the values read off the paper's figures 4 to 7.
//
// The baselines, as we read them: List-Scheduling is Graham's (whenever
// GPUs are idle, the first job in the list that fits starts, on the least
// loaded GPUs); First-Fit takes jobs in order, strictly, each on the first
// idle GPUs in server order; Random starts any job that fits on idle GPUs
// drawn at random. Jobs come in a random order (the paper's jobs are all
// present at slot 0).
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"time"

	"github.com/gpusched/gpusched/internal/cli"
	"github.com/gpusched/gpusched/placement/ring"
	"github.com/gpusched/gpusched/sim"
)

type stat struct{ xs []float64 }

func (s *stat) add(x float64) { s.xs = append(s.xs, x) }
func (s *stat) mean() float64 {
	m := 0.0
	for _, x := range s.xs {
		m += x
	}
	return m / float64(max(len(s.xs), 1))
}
func (s *stat) sd() float64 {
	if len(s.xs) < 2 {
		return 0
	}
	m, v := s.mean(), 0.0
	for _, x := range s.xs {
		v += (x - m) * (x - m)
	}
	return math.Sqrt(v / float64(len(s.xs)-1))
}
func (s *stat) String() string {
	return fmt.Sprintf("%5s ± %3s", cli.Fixed(s.mean(), 0), cli.Fixed(s.sd(), 0))
}

var names = []string{"SJF-BCO", "LS", "FF", "RAND"}

type config struct {
	seeds   int
	cfg     sim.RingPaperConfig
	reading ring.FAFFPReading
}

// compare runs the four schedulers on every seed; kappas and lambda are
// SJF-BCO's (nil and 0: the sweep and 1).
func (c config) compare(servers, horizon int, kappas []int, lambda float64, baselines bool) (mk, jct map[string]*stat, wins int, err error) {
	mk, jct = map[string]*stat{}, map[string]*stat{}
	for _, n := range names {
		mk[n], jct[n] = &stat{}, &stat{}
	}
	for seed := 1; seed <= c.seeds; seed++ {
		cfg := c.cfg
		cfg.Seed, cfg.Servers = uint64(seed), servers
		setup, err := sim.RingPaperSetup(cfg)
		if err != nil {
			return nil, nil, 0, err
		}
		b := ring.SJFBCO{Model: setup.Model, Horizon: horizon, Reading: c.reading, Kappas: kappas, Lambda: lambda}
		r, err := b.Schedule(context.Background(), setup.Cluster, setup.Jobs)
		if err != nil {
			return nil, nil, 0, fmt.Errorf("seed %d: %w", seed, err)
		}
		mk["SJF-BCO"].add(float64(r.Makespan))
		jct["SJF-BCO"].add(r.MeanJCT)
		if !baselines {
			continue
		}
		var got []int
		for _, base := range []struct {
			name   string
			p      ring.Placer
			strict bool
		}{{"LS", &ring.ListScheduling{}, false}, {"FF", ring.FirstFit{}, true}, {"RAND", ring.NewRandom(uint64(seed)), false}} {
			ex := ring.Executor{Model: setup.Model, Placer: base.p, Strict: base.strict}
			s, err := ex.Run(context.Background(), setup.Cluster, setup.Jobs, nil)
			if err != nil {
				return nil, nil, 0, fmt.Errorf("seed %d, %s: %w", seed, base.name, err)
			}
			mk[base.name].add(float64(s.Makespan))
			jct[base.name].add(s.MeanJCT)
			got = append(got, s.Makespan)
		}
		if r.Makespan < got[0] && got[0] < got[1] && got[1] < got[2] {
			wins++
		}
	}
	return mk, jct, wins, nil
}

func main() { os.Exit(command(os.Args[1:], os.Stdout, os.Stderr)) }

// figNames are the figures the command reproduces.
var figNames = []string{"4", "5", "6", "7"}

// command runs ringallreduce with args and returns the exit status.
func command(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("ringallreduce", flag.ContinueOnError)
	seeds := fs.Int("seeds", 20, "number of seeded instances, 1 to 1000")
	reading := fs.String("faffp", "least-loaded", "FA-FFP reading: least-loaded (pseudo-code) or packed (prose)")
	comm := fs.Float64("comm", 0, "gradient size over computation time per iteration: 0 (default 0.06) or 0.001 to 10")
	xi1 := fs.Float64("xi1", 0, "xi1 of eq. 7: 0 (default 1) or 0.001 to 1 (the model's (0, 1])")
	alpha := fs.Float64("alpha", 0, "alpha of f(alpha, k): 0 (default 0.75) or 0.01 to 10")
	xi2 := fs.Float64("xi2", 0, "overhead per server, slots per iteration: 0 (default 0.0001) or 1e-9 to 1 (the model's [0, 1])")
	figs := fs.String("figs", "4,5,6,7", "figures to reproduce, comma-separated: 4, 5, 6, 7")
	return cli.Main(fs, args, stderr, func(ctx context.Context) error {
		var c cli.Checks
		c.Int("seeds", *seeds, 1, 1000)
		c.OneOf("faffp", *reading, "least-loaded", "packed")
		c.ZeroOr("comm", *comm, 0.001, 10, "the default, 0.06")
		// The ranges lie within perfmodel.RingModel's: xi1 in (0, 1],
		// xi2 in [0, 1], alpha >= 0 and finite; comm > 0 and finite.
		c.ZeroOr("xi1", *xi1, 0.001, 1, "the default, 1")
		c.ZeroOr("alpha", *alpha, 0.01, 10, "the default, 0.75")
		c.ZeroOr("xi2", *xi2, 1e-9, 1, "the default, 0.0001")
		want := c.List("figs", *figs, false, figNames...)
		if err := c.Err(); err != nil {
			return err
		}
		cfg := config{seeds: *seeds, cfg: sim.RingPaperConfig{CommShare: *comm, Xi1: *xi1, Alpha: *alpha, Xi2: *xi2}}
		if *reading == "packed" {
			cfg.reading = ring.PackedServers
		}
		start := time.Now()
		if err := cfg.run(ctx, stdout, want); err != nil {
			return err
		}
		_, err := fmt.Fprintf(stderr, "\n%.1f s\n", time.Since(start).Seconds())
		return err
	})
}

// run prints the figures in want.
func (c config) run(ctx context.Context, out io.Writer, want []string) error {
	w := &printer{w: out}
	w.printf("Yu et al., MobiHoc 2022, section 7: 160 jobs, %d seeds (mean ± sd over seeds, slots)\n", c.seeds)
	table := func(title string, servers, horizon int, paperMk, paperJCT []float64) error {
		mk, jct, wins, err := c.compare(servers, horizon, nil, 0, true)
		if err != nil {
			return err
		}
		w.printf("\n%s: %d servers, T = %d\n", title, servers, horizon)
		w.printf("%-8s %13s %9s %13s %9s\n", "", "makespan", "paper", "mean JCT", "paper")
		for i, n := range names {
			pj := "-"
			if paperJCT != nil {
				pj = fmt.Sprintf("%.0f", paperJCT[i])
			}
			w.printf("%-8s %13s %9.0f %13s %9s\n", n, mk[n], paperMk[i], jct[n], pj)
		}
		w.printf("SJF-BCO's makespan reduction: ")
		for i, n := range names[1:] {
			w.printf("vs %s %s%% (paper %.0f%%)  ", n, cli.Fixed(100*(1-mk["SJF-BCO"].mean()/mk[n].mean()), 0), 100*(1-paperMk[0]/paperMk[i+1]))
		}
		w.printf("\nseeds with SJF-BCO < LS < FF < RAND: %d of %d\n", wins, c.seeds)
		return nil
	}
	for _, fig := range want {
		if err := ctx.Err(); err != nil {
			return err
		}
		switch fig {
		case "4":
			if err := table("Fig. 4", 20, 1200, []float64{535, 595, 720, 1125}, []float64{175, 185, 450, 260}); err != nil {
				return err
			}
		case "5":
			w.printf("\nFig. 5: SJF-BCO makespan vs kappa, 20 servers\n%-6s %13s %7s\n", "kappa", "ours", "paper")
			paper := map[int]string{1: "625", 8: "535", 10: "700", 16: "750"}
			for _, k := range []int{1, 2, 4, 8, 10, 16, 32} {
				mk, _, _, err := c.compare(20, 1200, []int{k}, 0, false)
				if err != nil {
					return err
				}
				p := paper[k]
				if p == "" {
					p = "-"
				}
				w.printf("%-6d %13s %7s\n", k, mk["SJF-BCO"], p)
			}
		case "6":
			if err := table("Fig. 6", 10, 1500, []float64{940, 1160, 1410, 1490}, nil); err != nil {
				return err
			}
		case "7":
			w.printf("\nFig. 7: SJF-BCO makespan vs lambda (kappa = 1), 20 servers\n%-6s %13s %7s\n", "lambda", "ours", "paper")
			for i, l := range []float64{1, 2, 4, 8} {
				mk, _, _, err := c.compare(20, 1200, []int{1}, l, false)
				if err != nil {
					return err
				}
				w.printf("%-6.0f %13s %7.0f\n", l, mk["SJF-BCO"], []float64{1045, 885, 730, 538}[i])
			}
		}
	}
	return w.err
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
