// Command netlib solves the netlib LP test set (allocation/lp/testdata/netlib,
// 96 problems with their expected status and optimum) with gpusched's
// pure-Go interior-point solver and prints, per problem, the status, the
// relative error of the objective, the iterations and the time; built with
// -tags clp it solves each problem with COIN-OR CLP's dual simplex too, in
// the same run, and compares the times:
//
//	go run ./examples/netlib
//	go run -tags clp ./examples/netlib -run 'pilot|greenbea'
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"regexp"
	"runtime/pprof"
	"text/tabwriter"
	"time"

	"github.com/gpusched/gpusched/allocation/lp"
	"github.com/gpusched/gpusched/allocation/lp/lptest"
	"github.com/gpusched/gpusched/internal/cli"
)

// maxRepeat caps -repeat: each repeat solves every chosen problem again.
const maxRepeat = 100

func main() { os.Exit(realMain(os.Args[1:], os.Stdout, os.Stderr)) }

// realMain runs the command on args and returns its exit status: 2 for a
// bad command line (one line naming the flag), 1 for a failed run.
func realMain(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("netlib", flag.ContinueOnError)
	dir := fs.String("dir", "allocation/lp/testdata/netlib", "directory of the netlib problems and optima.csv")
	pattern := fs.String("run", "", "solve only the problems whose names match this regular expression")
	useCLP := fs.Bool("clp", haveCLP, "also solve with CLP (needs -tags clp)")
	clpAlg := fs.String("clp-algorithm", "dual", "CLP's method: dual, primal, auto (with CLP's presolve) or barrier")
	repeat := fs.Int("repeat", 1, fmt.Sprintf("solve each problem this many times (1 to %d) and report the fastest", maxRepeat))
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the run to this file")
	crossover := fs.Bool("crossover", false, "ask InteriorPoint for a vertex (crossover) and count the vertices")
	return cli.Main(fs, args, stderr, func(context.Context) error {
		var c cli.Checks
		c.Int("repeat", *repeat, 1, maxRepeat)
		c.OneOf("clp-algorithm", *clpAlg, "dual", "primal", "auto", "barrier")
		if _, err := regexp.Compile(*pattern); err != nil {
			c.Fail("run", *pattern, "a regular expression (%v)", err)
		}
		if *cpuProfile != "" {
			c.OutputFile("cpuprofile", *cpuProfile)
		}
		if err := c.Err(); err != nil {
			return err
		}
		o := options{dir: *dir, pattern: *pattern, clp: *useCLP, clpAlgorithm: *clpAlg, repeat: *repeat, crossover: *crossover}
		if *cpuProfile == "" {
			return run(stdout, o)
		}
		f, err := cli.Create(*cpuProfile)
		if err != nil {
			return err
		}
		defer func() { _ = f.Close() }()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		err = run(stdout, o)
		pprof.StopCPUProfile()
		if err != nil {
			return err
		}
		return f.Commit()
	})
}

type options struct {
	dir, pattern, clpAlgorithm string
	clp, crossover             bool
	repeat                     int
}

// tolerance is the relative error on the objective that counts as right.
const tolerance = 1e-6

// outcome is one solver's result on one problem.
type outcome struct {
	status  lp.Status
	obj     float64
	iters   int
	seconds float64
	err     error
	vertex  bool
}

func solve(s lp.Solver, m *lp.Model, repeat int) outcome {
	var best outcome
	for k := range repeat {
		t0 := time.Now()
		sol, err := s.Solve(context.Background(), m)
		o := outcome{seconds: time.Since(t0).Seconds(), err: err, status: lp.Failed}
		if sol != nil {
			o.status, o.obj, o.iters, o.vertex = sol.Status, sol.Objective, sol.Iterations, sol.Vertex
		}
		if k == 0 || o.seconds < best.seconds {
			best = o
		}
	}
	return best
}

// right reports whether o is the expected answer of p.
func right(p lptest.NetlibProblem, o outcome) bool {
	if o.status != p.Status {
		return false
	}
	return p.Status != lp.Optimal || relErr(o.obj, p.Objective) <= tolerance
}

func relErr(got, want float64) float64 {
	return math.Abs(got-want) / math.Max(1, math.Abs(want))
}

func run(out io.Writer, o options) error {
	problems, err := lptest.Netlib(o.dir)
	if err != nil {
		return err
	}
	re, err := regexp.Compile(o.pattern)
	if err != nil {
		return err
	}
	var clpSolver lp.Solver
	if o.clp {
		if clpSolver, err = newCLP(o.clpAlgorithm); err != nil {
			return err
		}
	}
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	// printf writes to tw, or to out after tw is flushed, and keeps the
	// first error.
	var werr error
	printf := func(w io.Writer, format string, args ...any) {
		if werr == nil {
			_, werr = fmt.Fprintf(w, format, args...)
		}
	}
	head := "problem\trows\tcols\tnonzeros\tstatus\tobjective\trel. error\titerations\ttime (s)\t"
	if o.clp {
		head += "CLP status\tCLP rel. error\tCLP time (s)\ttime / CLP\t"
	}
	printf(tw, "%s\n", head)
	var n, good, clpGood, vertices int
	var total, clpTotal float64
	for _, p := range problems {
		if !re.MatchString(p.Name) {
			continue
		}
		m, err := p.Load()
		if err != nil {
			return err
		}
		n++
		ipm := solve(&lp.InteriorPoint{Crossover: o.crossover}, m, o.repeat)
		total += ipm.seconds
		if ipm.vertex {
			vertices++
		}
		mark := ""
		if right(p, ipm) {
			good++
		} else {
			mark = " !"
		}
		printf(tw, "%s\t%d\t%d\t%d\t%s%s\t%s\t%s\t%d\t%.3f\t", p.Name, m.NumRows(), m.NumVars(), m.NumNonzeros(),
			ipm.status, mark, objText(ipm), errText(p, ipm), ipm.iters, ipm.seconds)
		if o.clp {
			c := solve(clpSolver, m, o.repeat)
			clpTotal += c.seconds
			if right(p, c) {
				clpGood++
			}
			printf(tw, "%s\t%s\t%.3f\t%.2f\t", c.status, errText(p, c), c.seconds, ipm.seconds/math.Max(c.seconds, 1e-6))
		}
		printf(tw, "\n")
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	printf(out, "\nInteriorPoint: %d of %d right (status, objective to %g relative), %.2f s in all\n", good, n, tolerance, total)
	if o.crossover {
		printf(out, "crossover: a vertex for %d of the optimal problems\n", vertices)
	}
	if o.clp {
		printf(out, "CLP (%s): %d of %d right, %.2f s in all; InteriorPoint / CLP = %.2f\n", o.clpAlgorithm, clpGood, n, clpTotal, total/math.Max(clpTotal, 1e-9))
	}
	return werr
}

func objText(o outcome) string {
	if o.status != lp.Optimal && o.err != nil && o.obj == 0 {
		return "-"
	}
	return fmt.Sprintf("%.10e", o.obj)
}

func errText(p lptest.NetlibProblem, o outcome) string {
	if p.Status != lp.Optimal || o.status != lp.Optimal {
		return "-"
	}
	return fmt.Sprintf("%.1e", relErr(o.obj, p.Objective))
}
