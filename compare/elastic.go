package compare

import (
	"context"
	"fmt"
	"io/fs"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gpusched/gpusched/allocation"
	"github.com/gpusched/gpusched/elastic"
	"github.com/gpusched/gpusched/gang"
	"github.com/gpusched/gpusched/perfmodel"
	"github.com/gpusched/gpusched/perfmodel/gavel"
	"github.com/gpusched/gpusched/perfmodel/hw"
	"github.com/gpusched/gpusched/sim"
	"github.com/gpusched/gpusched/topology"
)

// TypedEntrant is an elastic policy over pools of GPU types
// (elastic.TypedPolicy: Sia, a policy blind to types, Gavel's rounds) as
// a comparison runs it on Pollux's workloads (sim.PolluxHeteroJobs on
// sim.RunHetero, 30 s per restart): Sia's heterogeneous setting (Jayaram
// Subramanya et al., SOSP 2023, section 4.3). A plain value, safe for
// concurrent reads; its Policy builds a new policy for each run.
type TypedEntrant struct {
	// Name and Description as Entrant's.
	Name, Description string
	Policy            func() elastic.TypedPolicy
	// Adaptive lets the policy choose each job's GPUs and batch size
	// (goodput: Sia, Pollux); Fixed keeps the workload's GPUs and batch
	// size (sim.PolluxHeteroJobs).
	Adaptive, Fixed bool
	// Interval is the policy's period in seconds (0 means 60; Gavel's
	// rounds are 360).
	Interval float64
}

// Validate checks the entrant: a name a table can hold, a policy, an
// interval of 0 or sim.MinPeriod to sim.MaxPeriod.
func (e *TypedEntrant) Validate() error {
	if err := checkName(e.Name); err != nil {
		return err
	}
	switch {
	case e.Policy == nil:
		return &EntrantError{Name: e.Name, Reason: "a Policy"}
	case e.Interval != 0 && !(e.Interval >= sim.MinPeriod && e.Interval <= sim.MaxPeriod):
		return &EntrantError{Name: e.Name, Reason: fmt.Sprintf("an Interval of 0 or %g to %g s", sim.MinPeriod, sim.MaxPeriod)}
	}
	return nil
}

// TypedBaselines returns the built-in typed entrants, as Sia's Table 3
// compares them: sia (p = -0.5, lambda = 1.1, models bootstrapped from a
// profile on one type), sia-oracle (every type's model known), pollux
// (Pollux's goodput, blind to types: elastic.Unaware), gavel (maximum
// total throughput in 360 s rounds, the workload's GPUs and batch sizes),
// tiresias (2D-LAS with the Pollux artifact's queues, blind to types) and
// fifo (the workload's GPUs and batch sizes, blind to types). Each call
// returns new values.
func TypedBaselines() []TypedEntrant {
	return []TypedEntrant{
		{Name: "sia", Description: "Sia (p = -0.5, lambda = 1.1, bootstrapped models)", Adaptive: true, Interval: 60,
			Policy: func() elastic.TypedPolicy { return elastic.Sia{} }},
		{Name: "sia-oracle", Description: "Sia, every type's model known", Adaptive: true, Interval: 60,
			Policy: func() elastic.TypedPolicy { return elastic.Sia{Oracle: true} }},
		{Name: "pollux", Description: "Pollux-style, type-blind (T4 models)", Adaptive: true, Interval: 60,
			Policy: func() elastic.TypedPolicy { return elastic.Unaware{Policy: elastic.Pollux{}} }},
		{Name: "gavel", Description: "Gavel max-sum-throughput, workload's GPUs and batch, 360 s rounds", Fixed: true, Interval: 360,
			Policy: func() elastic.TypedPolicy {
				return &sim.GavelRounds{Rounds: &allocation.Rounds{Policy: &allocation.MaxThroughput{}}}
			}},
		{Name: "tiresias", Description: "Tiresias 2D-LAS (artifact's queues), type-blind", Fixed: true, Interval: 60,
			Policy: func() elastic.TypedPolicy {
				return elastic.Unaware{Policy: elastic.Tiresias{Order: gang.LAS2D{Thresholds: []float64{16 * 3600}}}}
			}},
		{Name: "fifo", Description: "FIFO, workload's GPUs and batch, type-blind", Fixed: true, Interval: 60,
			Policy: func() elastic.TypedPolicy { return elastic.Unaware{Policy: elastic.FIFO{}} }},
	}
}

// TypedBaseline returns the built-in typed entrant of that name, or an
// error wrapping ErrUnknown that lists the known names.
func TypedBaseline(name string) (TypedEntrant, error) {
	all := TypedBaselines()
	if i := slices.IndexFunc(all, func(e TypedEntrant) bool { return e.Name == name }); i >= 0 {
		return all[i], nil
	}
	var names []string
	for _, e := range all {
		names = append(names, e.Name)
	}
	return TypedEntrant{}, fmt.Errorf("compare: typed baseline %q: %w (known: %s)", name, ErrUnknown, strings.Join(names, ", "))
}

// PolluxOnPools loads Pollux's application profiles from fsys (the
// Pollux artifact's layout: app-profiles/NAME) and returns, per pool, the
// applications with their compute speedup over the T4 profiles on the
// pool's type, predicted by perfmodel/hw fitted on Gavel's table and
// raised to power (1: as predicted; sim.PolluxSpeedup).
func PolluxOnPools(fsys fs.FS, pools []elastic.Pool, power float64) ([]map[string]*sim.PolluxApp, error) {
	if !(power >= 0.1 && power <= 1) {
		return nil, fmt.Errorf("compare: speedup power %v: want 0.1 to 1", power)
	}
	model, err := hw.Model(perfmodel.Observations(gavel.Simulation(), perfmodel.FP32, "Gavel simulation table"))
	if err != nil {
		return nil, err
	}
	on := make([]map[string]*sim.PolluxApp, len(pools))
	for k := range on {
		on[k] = map[string]*sim.PolluxApp{}
	}
	for _, name := range sim.PolluxApps {
		a, err := sim.LoadPolluxApp(fsys, "app-profiles", name)
		if err != nil {
			return nil, err
		}
		for k, p := range pools {
			s, _, err := sim.PolluxSpeedup(model, name, p.Type)
			if err != nil {
				return nil, err
			}
			if on[k][name], err = a.OnType(p.Type, math.Pow(s, power)); err != nil {
				return nil, err
			}
		}
	}
	return on, nil
}

// ParsePools reads pools written "t4:6x4,v100:3x8" (type:nodes x GPUs
// per node), at most elastic.MaxPools.
func ParsePools(s string) ([]elastic.Pool, error) {
	var pools []elastic.Pool
	for _, part := range strings.Split(s, ",") {
		name, size, ok := strings.Cut(strings.TrimSpace(part), ":")
		nodes, per, ok2 := strings.Cut(size, "x")
		n, err1 := strconv.Atoi(nodes)
		g, err2 := strconv.Atoi(per)
		if !ok || !ok2 || err1 != nil || err2 != nil || name == "" || n < 1 || g < 1 || n > 10000 || g > 64 {
			return nil, fmt.Errorf("compare: pool %q: want type:NODESxGPUS with 1 to 10000 nodes of 1 to 64 GPUs", part)
		}
		pools = append(pools, elastic.Pool{Type: topology.GPUType(strings.ToLower(name)), Nodes: n, GPUsPerNode: g})
	}
	if len(pools) > elastic.MaxPools {
		return nil, fmt.Errorf("compare: %d pools, more than %d", len(pools), elastic.MaxPools)
	}
	return pools, nil
}

// TypedScenario is Pollux's workloads on pools of GPU types. A plain
// value, safe for concurrent reads.
type TypedScenario struct {
	Name  string
	Pools []elastic.Pool
	// Apps are the applications on each pool (PolluxOnPools).
	Apps []map[string]*sim.PolluxApp
	// Workloads are Pollux's workloads (sim.ReadPollux); each runs once
	// per entrant, and a row is the mean over them.
	Workloads [][]sim.Job
	// MaxWorkers bounds a job's GPUs (0 means 64, Sia's).
	MaxWorkers int
}

// RunTyped simulates every entrant on every workload of the scenario and
// returns a row per entrant: each metric the mean over the workloads of
// the workload's (mean, median, p95 and p99 JCT, queueing, makespan,
// utilisation, preemptions and resizes per job as preemptions), Jobs all
// of them, GPU-hours per pool the mean per workload. Entrants run
// Options.Parallel at once; the first failure stops the rest, a
// *RunError. Safe for concurrent use.
func RunTyped(ctx context.Context, sc TypedScenario, entrants []TypedEntrant, opt Options) (*Report, error) {
	if len(sc.Pools) == 0 || len(sc.Apps) != len(sc.Pools) || len(sc.Workloads) == 0 {
		return nil, &ScenarioError{Scenario: sc.Name, Field: "Pools, Apps, Workloads", Reason: fmt.Sprintf("%d pools, applications for %d, %d workloads: want pools, their applications and workloads", len(sc.Pools), len(sc.Apps), len(sc.Workloads))}
	}
	if len(entrants) == 0 {
		return nil, &ScenarioError{Scenario: sc.Name, Field: "entrants", Reason: "none to run"}
	}
	seen := map[string]bool{}
	for i := range entrants {
		if err := entrants[i].Validate(); err != nil {
			return nil, err
		}
		if seen[entrants[i].Name] {
			return nil, &EntrantError{Name: entrants[i].Name, Reason: "a name no other entrant has"}
		}
		seen[entrants[i].Name] = true
	}
	rep := sc.report()
	if opt.Parallel < 0 {
		return nil, fmt.Errorf("compare: Options.Parallel %d: want 0 (2) or more", opt.Parallel)
	}
	rows, err := runParallel(ctx, len(entrants), opt, func(ctx context.Context, i int, progress func(done, total int)) (Row, error) {
		return runTyped(ctx, &sc, &entrants[i], progress)
	})
	if err != nil {
		return nil, err
	}
	rep.Rows = rows
	return rep, nil
}

// report is the scenario's report without rows: its pools as the
// cluster and types, their GPUs, and its jobs (all measured).
func (sc *TypedScenario) report() *Report {
	rep := &Report{Scenario: sc.Name}
	var names []string
	for _, p := range sc.Pools {
		rep.Types = append(rep.Types, p.Type)
		rep.GPUs += p.GPUs()
		names = append(names, fmt.Sprintf("%s:%dx%d", p.Type, p.Nodes, p.GPUsPerNode))
	}
	rep.Cluster = strings.Join(names, ",")
	for _, w := range sc.Workloads {
		rep.To += len(w)
	}
	return rep
}

// runTyped runs one entrant on every workload and averages.
func runTyped(ctx context.Context, sc *TypedScenario, e *TypedEntrant, progress func(done, total int)) (row Row, err error) {
	defer func() {
		if v := recover(); v != nil {
			row, err = Row{}, &RunError{Entrant: e.Name, Err: fmt.Errorf("panic: %v", v)}
		}
	}()
	start := time.Now()
	maxWorkers := sc.MaxWorkers
	if maxWorkers == 0 {
		maxWorkers = 64
	}
	row = Row{Entrant: e.Name, GPUHours: make([]float64, len(sc.Pools))}
	n := float64(len(sc.Workloads))
	for i, trace := range sc.Workloads {
		if err := ctx.Err(); err != nil {
			return Row{}, &RunError{Entrant: e.Name, Err: err}
		}
		jobs, err := sim.PolluxHeteroJobs(trace, sc.Apps, sc.Pools, maxWorkers, e.Adaptive, e.Fixed)
		if err != nil {
			return Row{}, &RunError{Entrant: e.Name, Err: err}
		}
		res, err := sim.RunHetero(ctx, sim.HeteroConfig{Pools: sc.Pools, Policy: e.Policy(), Interval: e.Interval,
			RestartOverhead: 30, ChargeStart: true, EveryInterval: true}, jobs)
		if err != nil {
			return Row{}, &RunError{Entrant: e.Name, Err: fmt.Errorf("workload %d: %w", i+1, err)}
		}
		addTyped(&row, res, sc.Pools, n)
		progress(i+1, len(sc.Workloads))
	}
	row.Took = time.Since(start)
	return row, nil
}

// addTyped adds one workload's result to a row, weighted 1/n.
func addTyped(row *Row, res *sim.ElasticResult, pools []elastic.Pool, n float64) {
	s := &row.Summary
	var jct []float64
	first, last, queue, moves := math.Inf(1), math.Inf(-1), 0.0, 0.0
	for _, r := range res.Records {
		jct = append(jct, r.Finish-r.Arrival)
		first, last = math.Min(first, r.Arrival), math.Max(last, r.Finish)
		queue += r.Start - r.Arrival
		moves += float64(r.Preemptions + r.Resizes)
	}
	s.Jobs += len(jct)
	if len(jct) == 0 {
		return
	}
	slices.Sort(jct)
	k := float64(len(jct))
	mean := 0.0
	for _, v := range jct {
		mean += v / k
	}
	at := func(q float64) float64 { return jct[min(len(jct)-1, int(math.Ceil(q*k))-1)] }
	s.MeanJCT += mean / n
	s.MedianJCT += at(0.5) / n
	s.P95JCT += at(0.95) / n
	s.P99JCT += at(0.99) / n
	s.MeanQueueing += queue / k / n
	s.Makespan += (last - first) / n
	s.Preemptions += moves / k / n
	busy, capacity := 0.0, 0.0
	for p, b := range res.PoolBusy {
		busy += b
		row.GPUHours[p] += b / 3600 / n
		capacity += float64(pools[p].GPUs()) * (last - first)
	}
	if capacity > 0 {
		s.Utilisation += busy / capacity / n
	}
}
