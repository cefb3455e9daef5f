package compare

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/gpusched/gpusched/allocation"
	"github.com/gpusched/gpusched/perfmodel"
	"github.com/gpusched/gpusched/perfmodel/gavel"
	"github.com/gpusched/gpusched/sim"
	"github.com/gpusched/gpusched/topology"
)

// Scenario is the workload a comparison runs: a cluster, jobs, the
// measured window and a seed. A plain value, safe for concurrent reads;
// Run never changes it.
type Scenario struct {
	// Name names the scenario in reports (optional).
	Name string
	// Cluster is the cluster in topology.ParseCompact's form, one GPU per
	// server as in Gavel's simulations: "v100:36,p100:36,k80:36". The
	// order in which it names the types is Kueue's flavor order; the round
	// engine sees them sorted by name.
	Cluster string
	// Jobs is the trace (sim.GavelWorkload, a loader of package sim).
	Jobs []sim.Job
	// From and To select the measured jobs by position in order of
	// arrival, [From, To); To 0 means every job from From on (Gavel
	// measures 4000 to 5000 of its continuous traces).
	From, To int
	// Seed seeds the policies and the mechanism (and the noise of hidden
	// rates).
	Seed uint64
	// Compat runs Gavel's mechanism, FIFO and simulator loop
	// (allocation.CompatGavel) instead of ours.
	Compat allocation.Compat
	// Vertex asks the LP policies for a vertex of the optimal face.
	Vertex bool
	// UntilMeasured ends each run when the measured jobs have finished, as
	// Gavel's continuous experiments do (jobs keep arriving while they
	// run; sim.Config.JobsToComplete): the trace should be long enough
	// that arrivals outlast them. Round engine only.
	UntilMeasured bool
	// Throughput gives the jobs' rates; nil means Gavel's simulation
	// table, extrapolated beyond 8 GPUs (perfmodel.Extrapolated), as
	// examples/simulate runs traces.
	Throughput perfmodel.ThroughputModel
	// Colocation gives co-located rates to space-sharing entrants; nil
	// means Gavel's measured pairs, a job it never measured sharing no
	// GPU.
	Colocation perfmodel.ColocationModel
}

// Options tune how Run runs; the zero value runs two entrants at once,
// silently. A plain value, safe for concurrent reads (Progress must be
// safe for concurrent use).
type Options struct {
	// Parallel is the number of entrants simulated at once (0 means 2).
	// It changes no result.
	Parallel int
	// Progress, if set, is called from the runs' goroutines with an
	// entrant's index and its jobs finished and total (NewProgress
	// draws it); it must be safe for concurrent use.
	Progress func(entrant, done, total int)
}

// Row is one entrant's outcome. A plain value, safe for concurrent reads.
type Row struct {
	// Entrant is the entrant's name.
	Entrant string
	// Summary holds the metrics over the measured window.
	Summary sim.Summary
	// GPUHours is the GPU time the measured jobs used on each type
	// (Report.Types' order), in hours.
	GPUHours []float64
	// HasRho says the engine computes isolated times (the round engine's);
	// without them rho is not shown.
	HasRho bool
	// Allocations counts the policy's calls (sim.Result.Allocations);
	// ExploredGPUHours is the GPU time spent exploring types under hidden
	// rates; AuditFailed counts the jobs whose progress reports failed
	// the audit.
	Allocations      int
	ExploredGPUHours float64
	AuditFailed      int
	// Result is the whole simulation's outcome (nil in a row a suite
	// resumed from its results folder: Resumed).
	Result  *sim.Result
	Resumed bool
	// Took is the run's wall time: the one thing that differs between
	// runs.
	Took time.Duration
}

// Report is a comparison's outcome: one row per entrant, in the order
// given. A plain value, safe for concurrent reads.
type Report struct {
	// Scenario is the scenario's name; Cluster its cluster; Types its
	// types, sorted; GPUs their total.
	Scenario, Cluster string
	Types             []topology.GPUType
	GPUs              int
	// From and To are the measured window (To the trace's length where
	// the scenario says 0).
	From, To int
	Rows     []Row
}

// ScenarioError says what is wrong with a scenario. Safe for concurrent
// reads.
type ScenarioError struct {
	Scenario, Field, Reason string
}

func (e *ScenarioError) Error() string {
	return fmt.Sprintf("compare: scenario %q: %s: %s", e.Scenario, e.Field, e.Reason)
}

// setup checks the scenario and returns its setup.
func (sc *Scenario) setup() (Setup, error) {
	bad := func(field, format string, args ...any) (Setup, error) {
		return Setup{}, &ScenarioError{Scenario: sc.Name, Field: field, Reason: fmt.Sprintf(format, args...)}
	}
	cluster, err := sc.setupCluster()
	if err != nil {
		return bad("Cluster", "%q: %v", sc.Cluster, err)
	}
	if len(sc.Jobs) == 0 {
		return bad("Jobs", "no jobs")
	}
	if sc.From < 0 || sc.To < 0 || (sc.To > 0 && sc.To <= sc.From) || sc.From >= len(sc.Jobs) || sc.To > len(sc.Jobs) {
		return bad("From, To", "[%d, %d) is not a window of the %d jobs (0 <= From < To, To 0 for all)", sc.From, sc.To, len(sc.Jobs))
	}
	if _, err := allocation.ParseCompat(sc.Compat.String()); err != nil {
		return bad("Compat", "%v", err)
	}
	s := Setup{Types: cluster.GPUTypes(), Seed: sc.Seed, Compat: sc.Compat, Vertex: sc.Vertex}
	if sc.Throughput == nil {
		// Gavel's table, the default, knows a few types: a cluster of
		// another fails at once, not at the first job's rate.
		known := gavel.Simulation().GPUTypes()
		for _, t := range s.Types {
			if !slices.Contains(known, t) {
				return bad("Cluster", "%q: GPU type %s has no rates in Gavel's table, the default Throughput (it has %v); give a Throughput that knows it", sc.Cluster, t, known)
			}
		}
	}
	for _, t := range s.Types {
		s.Capacity = append(s.Capacity, cluster.Capacity()[t])
	}
	s.Order = typeOrder(sc.Cluster, s.Types)
	return s, nil
}

// setupCluster parses the scenario's cluster.
func (sc *Scenario) setupCluster() (*topology.Cluster, error) {
	return topology.ParseCompact(sc.Cluster, 1)
}

// typeOrder lists the types (indices into the sorted types) in the order
// a cluster spec names them ("v100:4,p100:4"; Gavel's "36:36:36" means
// V100, P100, K80); types it does not name come last.
func typeOrder(spec string, types []topology.GPUType) []int {
	var names []string
	for _, part := range strings.Split(spec, ",") {
		name, _, _ := strings.Cut(strings.TrimSpace(part), ":")
		names = append(names, strings.ToLower(name))
	}
	if len(names) == 1 && strings.Count(spec, ":") == 2 {
		names = []string{"v100", "p100", "k80"} // Gavel's form
	}
	var order []int
	for _, n := range names {
		for k, t := range types {
			if string(t) == n && !slices.Contains(order, k) {
				order = append(order, k)
			}
		}
	}
	for k := range types {
		if !slices.Contains(order, k) {
			order = append(order, k)
		}
	}
	return order
}

// Run simulates every entrant on the scenario and returns their rows in
// the order given. It checks the scenario and every entrant (names
// unique) before it runs any; the first run that fails cancels the
// others and its error, a *RunError naming the entrant, is returned (a
// panic in an entrant's code is recovered into one). It is safe for
// concurrent use (the entrants' functions build each run's own policy).
func Run(ctx context.Context, sc Scenario, entrants []Entrant, opt Options) (*Report, error) {
	setup, err := sc.setup()
	if err != nil {
		return nil, err
	}
	if err := checkEntrants(&sc, entrants, opt); err != nil {
		return nil, err
	}
	r := &runner{sc: &sc, setup: setup, opt: opt, throughput: sc.Throughput, colocation: sc.Colocation}
	if r.throughput == nil {
		r.throughput = perfmodel.Extrapolated{Table: gavel.Simulation()}
	}
	if r.colocation == nil {
		r.colocation = measuredPairs{gavel.Simulation()}
	}
	if sc.UntilMeasured {
		for _, j := range sim.Window(jobRecords(sc.Jobs), sc.From, sc.To) {
			r.measured = append(r.measured, j.ID)
		}
	}
	rows, err := r.runAll(ctx, entrants)
	if err != nil {
		return nil, err
	}
	rep := &Report{Scenario: sc.Name, Cluster: sc.Cluster, Types: setup.Types, From: sc.From, To: sc.To, Rows: rows}
	for _, c := range setup.Capacity {
		rep.GPUs += c
	}
	if rep.To == 0 {
		rep.To = len(sc.Jobs)
	}
	return rep, nil
}

// checkEntrants checks the entrants for a scenario (each valid, names
// unique, each fit for the scenario's engine and mode) and the options.
func checkEntrants(sc *Scenario, entrants []Entrant, opt Options) error {
	if len(entrants) == 0 {
		return &ScenarioError{Scenario: sc.Name, Field: "entrants", Reason: "none to run"}
	}
	seen := map[string]bool{}
	for i := range entrants {
		e := &entrants[i]
		if err := e.Validate(); err != nil {
			return err
		}
		switch {
		case seen[e.Name]:
			return &EntrantError{Name: e.Name, Reason: "a name no other entrant has"}
		case sc.UntilMeasured && e.Events != nil:
			return &EntrantError{Name: e.Name, Reason: "a round-engine policy for a scenario that runs until the measured jobs finish"}
		case sc.Compat == allocation.CompatGavel && e.Hidden != nil:
			return &EntrantError{Name: e.Name, Reason: "no hidden rates with allocation.CompatGavel (Gavel's loop runs on the rates the policies see)"}
		}
		seen[e.Name] = true
	}
	if opt.Parallel < 0 {
		return fmt.Errorf("compare: Options.Parallel %d: want 0 (2) or more", opt.Parallel)
	}
	return nil
}

// RunError is a run that failed: the entrant's name and what went wrong
// (the engine's error, the policy's, or a panic in the entrant's code,
// recovered). Safe for concurrent reads.
type RunError struct {
	Entrant string
	Err     error
}

func (e *RunError) Error() string { return e.Entrant + ": " + e.Err.Error() }

func (e *RunError) Unwrap() error { return e.Err }

// runner runs a scenario's entrants.
type runner struct {
	sc         *Scenario
	setup      Setup
	opt        Options
	measured   []int // the measured jobs' IDs, for UntilMeasured
	throughput perfmodel.ThroughputModel
	colocation perfmodel.ColocationModel
}

// runAll runs the entrants, Options.Parallel at once; the first failure
// cancels the others.
func (r *runner) runAll(ctx context.Context, entrants []Entrant) ([]Row, error) {
	return runParallel(ctx, len(entrants), r.opt, func(ctx context.Context, i int, progress func(done, total int)) (Row, error) {
		return r.runOne(ctx, &entrants[i], progress)
	})
}

// runParallel runs n runs, Options.Parallel at once (0 means 2), each
// with its progress callback; the first failure cancels the others and is
// returned (firstFailure).
func runParallel(ctx context.Context, n int, opt Options, run func(ctx context.Context, i int, progress func(done, total int)) (Row, error)) ([]Row, error) {
	parallel := opt.Parallel
	if parallel == 0 {
		parallel = 2
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	rows := make([]Row, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	sem := make(chan struct{}, parallel)
	for i := range n {
		wg.Go(func() {
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				errs[i] = context.Cause(ctx)
				return
			}
			defer func() { <-sem }()
			progress := func(done, total int) {
				if opt.Progress != nil {
					opt.Progress(i, done, total)
				}
			}
			if rows[i], errs[i] = run(ctx, i, progress); errs[i] != nil {
				cancel(errs[i])
			}
		})
	}
	wg.Wait()
	return rows, firstFailure(errs)
}

// firstFailure returns the first error in the entrants' order that is not
// a cancellation another's failure caused.
func firstFailure(errs []error) error {
	var first error
	for _, err := range errs {
		if err != nil && (first == nil || errors.Is(first, context.Canceled)) {
			first = err
		}
	}
	return first
}

// runOne simulates one entrant.
func (r *runner) runOne(ctx context.Context, e *Entrant, progress func(done, total int)) (row Row, err error) {
	defer func() {
		// A panic in the entrant's own code (its policy, its
		// constructors) is its run's failure, not the caller's process's.
		if v := recover(); v != nil {
			row, err = Row{}, &RunError{Entrant: e.Name, Err: fmt.Errorf("panic: %v", v)}
		}
	}()
	start := time.Now()
	res, err := r.simulate(ctx, e, progress)
	if err != nil {
		return Row{}, &RunError{Entrant: e.Name, Err: err}
	}
	row = Row{Entrant: e.Name, Result: res, Took: time.Since(start), GPUHours: make([]float64, len(r.setup.Types)),
		Allocations: res.Allocations, ExploredGPUHours: res.ExploredGPUSeconds / 3600, AuditFailed: len(res.AuditFailed)}
	recs := r.measuredRecords(res)
	if r.measured == nil {
		row.Summary = res.Summarise(r.sc.From, r.sc.To)
	} else {
		sub := *res
		sub.Records = recs
		row.Summary = sub.Summarise(0, 0)
		row.Summary.Makespan = res.Summarise(0, 0).Makespan // the whole run's
	}
	for _, rec := range recs {
		row.HasRho = row.HasRho || rec.Isolated > 0
		for k, g := range rec.GPUSeconds {
			if k < len(row.GPUHours) {
				row.GPUHours[k] += g / 3600
			}
		}
	}
	return row, nil
}

// simulate runs one entrant on its engine.
func (r *runner) simulate(ctx context.Context, e *Entrant, progress func(done, total int)) (*sim.Result, error) {
	sc, setup := r.sc, r.setup
	if e.Events != nil {
		return sim.RunEvents(ctx, sim.EventConfig{Types: setup.Types, Capacity: setup.Capacity,
			Scheduler: e.Events(setup), Throughput: r.throughput, Progress: progress}, sc.Jobs)
	}
	cfg := sim.Config{Types: setup.Types, Capacity: setup.Capacity, Policy: e.Policy(setup), Throughput: r.throughput,
		Mechanism: e.Mechanism, Progress: progress, JobsToComplete: r.measured}
	cfg.Seed, cfg.Compat = sc.Seed, sc.Compat
	if sc.Compat == allocation.CompatGavel {
		cfg.ShuffleTypes = e.CompatShuffle
	}
	if e.SpaceSharing {
		cfg.Colocation = r.colocation
	}
	if e.Hidden != nil {
		var err error
		if cfg.Hidden, err = e.Hidden(setup); err != nil {
			return nil, err
		}
	}
	return sim.Run(ctx, cfg, sc.Jobs)
}

// measuredRecords returns the records of the measured jobs: the window by
// position in order of arrival, or, when the run stopped as the measured
// jobs finished (jobs still running then are not recorded), the measured
// jobs by ID.
func (r *runner) measuredRecords(res *sim.Result) []sim.Record {
	if r.measured == nil {
		return sim.Window(res.Records, r.sc.From, r.sc.To)
	}
	ids := make(map[int]bool, len(r.measured))
	for _, id := range r.measured {
		ids[id] = true
	}
	var recs []sim.Record
	for _, rec := range res.Records {
		if ids[rec.ID] {
			recs = append(recs, rec)
		}
	}
	return recs
}

// jobRecords wraps jobs in records, to select a window of them.
func jobRecords(jobs []sim.Job) []sim.Record {
	recs := make([]sim.Record, len(jobs))
	for i, j := range jobs {
		recs[i].Job = j
	}
	return recs
}

// measuredPairs answers co-located rates from Gavel's table; jobs it never
// measured (16 GPUs and more) do not share a GPU.
type measuredPairs struct{ t *perfmodel.Table }

var _ perfmodel.ColocationModel = measuredPairs{}

func (m measuredPairs) Colocated(a, b perfmodel.JobKey, t topology.GPUType) (float64, float64, error) {
	ta, tb, err := m.t.Colocated(a, b, t)
	if errors.Is(err, perfmodel.ErrUnknownJob) {
		return 0, 0, nil
	}
	return ta, tb, err
}
