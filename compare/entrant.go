package compare

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/gpusched/gpusched/allocation"
	"github.com/gpusched/gpusched/flavor"
	"github.com/gpusched/gpusched/gang"
	"github.com/gpusched/gpusched/perfmodel"
	"github.com/gpusched/gpusched/perfmodel/gavel"
	"github.com/gpusched/gpusched/perfmodel/hw"
	"github.com/gpusched/gpusched/sim"
	"github.com/gpusched/gpusched/topology"
)

// Setup is what an entrant's policy is built for: the scenario's cluster
// and settings. A plain value, safe for concurrent reads; Run gives each
// run its own.
type Setup struct {
	// Types are the cluster's GPU types, sorted by name; Capacity their
	// GPUs.
	Types    []topology.GPUType
	Capacity []int
	// Order lists the types (indices into Types) in the order the
	// scenario's cluster names them: Kueue's flavor order.
	Order []int
	// Seed is the scenario's seed.
	Seed uint64
	// Compat is the scenario's compatibility mode (allocation.CompatGavel:
	// Gavel's mechanism, FIFO and simulator loop).
	Compat allocation.Compat
	// Vertex asks the LP policies for a vertex of the optimal face
	// (crossover) instead of its centre.
	Vertex bool
}

// Entrant is one policy as a comparison runs it, with every setting its
// runs depend on. Exactly one of Policy (the round engine, sim.Run) and
// Events (the event engine, sim.RunEvents) is set. A plain value, safe for
// concurrent reads; Run calls its functions once per run, from the run's
// goroutine, and never shares what they return between runs.
type Entrant struct {
	// Name names the entrant in tables and plots: non-empty, at most 64
	// bytes, no tab, comma, newline or '|'.
	Name string
	// Description says in one line what the entrant is.
	Description string
	// Policy builds the round engine's policy for a setup.
	Policy func(Setup) allocation.Policy
	// Events builds the event engine's scheduler for a setup.
	Events func(Setup) sim.EventScheduler
	// Mechanism holds the round mechanism's settings (round length, reset
	// interval, global queue, type order, shuffling, idling); the
	// scenario sets its Seed and Compat. The heterogeneity-agnostic
	// baselines shuffle the types each round (ShuffleTypes), as Gavel's
	// simulator does for them: without it they would favour the first
	// type in every round.
	Mechanism allocation.Mechanism
	// CompatShuffle replaces Mechanism.ShuffleTypes under
	// allocation.CompatGavel: Gavel's code shuffles the types for its
	// policies whose names have neither "Perf" nor "Packing" (FIFO and
	// LAS).
	CompatShuffle bool
	// SpaceSharing lets the policy place two jobs on one GPU, at the
	// rates of the scenario's Colocation model.
	SpaceSharing bool
	// Hidden, if set, hides the truth from the policy (sim.Config.Hidden:
	// learned, probed, modelled rates; see WithRates). It is called once
	// per run: return a new value each time when its Estimator keeps
	// state.
	Hidden func(Setup) (*sim.Hidden, error)
}

// maxNameLen bounds an entrant's name.
const maxNameLen = 64

// Validate checks the entrant: a name a table can hold and exactly one
// engine.
func (e *Entrant) Validate() error {
	if err := checkName(e.Name); err != nil {
		return err
	}
	switch {
	case (e.Policy == nil) == (e.Events == nil):
		return &EntrantError{Name: e.Name, Reason: "exactly one of Policy (round engine) and Events (event engine)"}
	case e.Events != nil && (e.SpaceSharing || e.Hidden != nil):
		return &EntrantError{Name: e.Name, Reason: "no SpaceSharing or Hidden on the event engine"}
	case e.SpaceSharing && e.Hidden != nil:
		return &EntrantError{Name: e.Name, Reason: "Hidden rates without SpaceSharing (sim.Config.Hidden)"}
	}
	return nil
}

// checkName checks an entrant's name: one a table can hold.
func checkName(name string) error {
	switch {
	case name == "" || len(name) > maxNameLen:
		return &EntrantError{Name: name, Reason: fmt.Sprintf("a name of 1 to %d bytes", maxNameLen)}
	case strings.ContainsAny(name, "\t\n\r,|"):
		return &EntrantError{Name: name, Reason: "a name without tab, newline, comma or '|'"}
	}
	return nil
}

// EntrantError says what is wrong with an entrant. Safe for concurrent
// reads.
type EntrantError struct {
	Name   string
	Reason string
}

func (e *EntrantError) Error() string {
	return fmt.Sprintf("compare: entrant %q: want %s", e.Name, e.Reason)
}

// ErrUnknown is wrapped by the errors of lookups of a name nobody
// defined: a baseline, a rate setting, a scenario.
var ErrUnknown = errors.New("unknown name")

// lpPolicy builds an LP policy with the setup's vertex choice.
func lpPolicy(make func(vertex bool) allocation.Policy) func(Setup) allocation.Policy {
	return func(s Setup) allocation.Policy { return make(s.Vertex) }
}

// kueueQueue is one ClusterQueue over the whole cluster, its flavors in
// the setup's order, each nominal its type's GPUs.
func kueueQueue(s Setup) flavor.Queue {
	q := flavor.Queue{Name: "cluster"}
	for _, k := range s.Order {
		q.Flavors = append(q.Flavors, flavor.Flavor{Name: string(s.Types[k]), Type: k, Nominal: s.Capacity[k],
			BorrowingLimit: flavor.NoLimit, LendingLimit: flavor.NoLimit})
	}
	return q
}

// Baselines returns the built-in entrants, in the order of
// docs/simulator.md's policy table; each call returns new values the
// caller may change.
//
// fifo (each job on the fastest type with room, moved to a faster one as
// one frees up), fifo-perf (Gavel's fifo_perf), fifo-random (a random type
// with room: fifo.py's intent) run on the round engine (Gavel's
// mechanism); fifo-events (the fastest type with room, gang.FIFO), kueue
// (Kueue's flavor walk over the types in the scenario's order, package
// flavor), kueue-gpusched (Kueue steered by gpusched's controller,
// kube/kueue, with its default wait rule for slow types, Patience 1) and
// kueue-gpusched-nowait (without the rule) on the event engine (jobs run
// to their end once started); las (max-min fairness blind to types: Gavel's max_min_fairness, types
// shuffled), gavel (heterogeneity-aware max-min fairness,
// max_min_fairness_perf), gavel-ss (with space sharing,
// max_min_fairness_packed), gandiva (Gandiva's packing, types shuffled),
// ftf (finish-time fairness, Themis in Gavel's form), makespan (minimum
// makespan), throughput (maximum total throughput) on the round engine.
func Baselines() []Entrant {
	shuffled := allocation.Mechanism{ShuffleTypes: true}
	return []Entrant{
		{Name: "fifo", Description: "FIFO, each job on the fastest type with room (moved as a faster one frees up)",
			Policy:    func(s Setup) allocation.Policy { return &allocation.FIFO{Seed: s.Seed, Compat: s.Compat} },
			Mechanism: shuffled, CompatShuffle: true},
		{Name: "fifo-perf", Description: "FIFO on the type of the highest throughput (Gavel's fifo_perf)",
			Policy: func(s Setup) allocation.Policy { return &allocation.FIFO{Perf: true, Compat: s.Compat} }},
		{Name: "fifo-random", Description: "FIFO on a random type with room (fifo.py's intent)",
			Policy:    func(s Setup) allocation.Policy { return &allocation.FIFO{Seed: s.Seed, Random: true, Compat: s.Compat} },
			Mechanism: shuffled, CompatShuffle: true},
		{Name: "fifo-events", Description: "FIFO on the fastest type with room, jobs run to their end (gang.FIFO)",
			Events: func(Setup) sim.EventScheduler { return sim.EventFIFO{} }},
		{Name: "kueue", Description: "Kueue's flavor walk over the types in the cluster's order (package flavor)",
			Events: func(s Setup) sim.EventScheduler { return &flavor.Kueue{Queues: []flavor.Queue{kueueQueue(s)}} }},
		{Name: "kueue-gpusched", Description: "Kueue steered by gpusched's controller, with its wait rule for slow types",
			Events: func(s Setup) sim.EventScheduler {
				return &flavor.Steered{Queues: []flavor.Queue{kueueQueue(s)}, Types: s.Types, Patience: 1}
			}},
		{Name: "kueue-gpusched-nowait", Description: "Kueue steered by gpusched's controller, without the wait rule",
			Events: func(s Setup) sim.EventScheduler {
				return &flavor.Steered{Queues: []flavor.Queue{kueueQueue(s)}, Types: s.Types}
			}},
		{Name: "las", Description: "max-min fairness blind to GPU types (LAS; Gavel's max_min_fairness)",
			Policy: lpPolicy(func(v bool) allocation.Policy {
				return &allocation.MaxMinFairness{Agnostic: true, Vertex: v}
			}),
			Mechanism: shuffled, CompatShuffle: true},
		{Name: "gavel", Description: "heterogeneity-aware max-min fairness (Gavel; max_min_fairness_perf)",
			Policy: lpPolicy(func(v bool) allocation.Policy { return &allocation.MaxMinFairness{Vertex: v} })},
		{Name: "gavel-ss", Description: "Gavel with space sharing (max_min_fairness_packed)",
			Policy: lpPolicy(func(v bool) allocation.Policy {
				return &allocation.MaxMinFairness{SpaceSharing: true, Vertex: v}
			}),
			SpaceSharing: true},
		{Name: "gandiva", Description: "Gandiva's packing, types shuffled",
			Policy:    func(s Setup) allocation.Policy { return &allocation.Gandiva{Seed: s.Seed} },
			Mechanism: shuffled, SpaceSharing: true},
		{Name: "ftf", Description: "finish-time fairness (Themis, in Gavel's form)",
			Policy: lpPolicy(func(v bool) allocation.Policy { return &allocation.FinishTimeFairness{Vertex: v} })},
		{Name: "makespan", Description: "minimum makespan",
			Policy: lpPolicy(func(v bool) allocation.Policy { return &allocation.MinMakespan{Vertex: v} })},
		{Name: "throughput", Description: "maximum total throughput",
			Policy: lpPolicy(func(v bool) allocation.Policy { return &allocation.MaxThroughput{Vertex: v} })},
	}
}

// BaselineNames returns the names of Baselines, in its order.
func BaselineNames() []string {
	var names []string
	for _, e := range Baselines() {
		names = append(names, e.Name)
	}
	return names
}

// Baseline returns the built-in entrant of that name, or an error
// wrapping ErrUnknown that lists the known names.
func Baseline(name string) (Entrant, error) {
	all := Baselines()
	if i := slices.IndexFunc(all, func(e Entrant) bool { return e.Name == name }); i >= 0 {
		return all[i], nil
	}
	return Entrant{}, fmt.Errorf("compare: baseline %q: %w (known: %s)", name, ErrUnknown, strings.Join(BaselineNames(), ", "))
}

// RateSettings are the names WithRates accepts: learned (from nothing),
// probed (each job tries every type once, scheduler.Explore.Probe),
// grouped (a job starts from what the earlier runs of its kind
// measured), oracle (the truth), model (perfmodel/hw's spec model fitted
// to Gavel's V100 rates: each job profiled on one V100) and agnostic (one
// rate on every type).
var RateSettings = []string{"learned", "probed", "grouped", "oracle", "model", "agnostic"}

// WithRates returns a copy of a round-engine entrant whose policy sees
// the rates of a setting of RateSettings instead of the truth (issue #41's
// experiments; sim.Hidden, seeded with the scenario's seed: every setting
// runs the same truth and noise), named "name/setting".
func WithRates(e Entrant, setting string) (Entrant, error) {
	if e.Policy == nil || e.SpaceSharing {
		return Entrant{}, &EntrantError{Name: e.Name, Reason: "a round-engine policy without space sharing for hidden rates"}
	}
	if _, err := hiddenFor(setting, 0); err != nil {
		return Entrant{}, err
	}
	e.Name += "/" + setting
	e.Hidden = func(s Setup) (*sim.Hidden, error) { return hiddenFor(setting, s.Seed) }
	return e, nil
}

// hiddenFor returns a new sim.Hidden for a rate setting.
func hiddenFor(name string, seed uint64) (*sim.Hidden, error) {
	h := &sim.Hidden{Seed: seed}
	switch name {
	case "learned":
		h.Rates = sim.RatesLearned
	case "probed":
		h.Rates, h.Explore.Probe = sim.RatesLearned, true
	case "grouped":
		h.Rates, h.Groups = sim.RatesLearned, true
	case "oracle":
		h.Rates = sim.RatesOracle
	case "agnostic":
		h.Rates = sim.RatesAgnostic
	case "model":
		h.Rates = sim.RatesModel
		var obs []perfmodel.Observation
		for _, o := range perfmodel.Observations(gavel.Simulation(), perfmodel.FP32, "Gavel's simulation table, V100 only") {
			if o.Type == topology.V100 {
				obs = append(obs, o)
			}
		}
		m, err := hw.Model(obs)
		if err != nil {
			return nil, fmt.Errorf("compare: rates model: %w", err)
		}
		h.Model = m
	default:
		return nil, fmt.Errorf("compare: rate setting %q: %w (known: %s)", name, ErrUnknown, strings.Join(RateSettings, ", "))
	}
	return h, nil
}

// QueueOrder returns a round-engine entrant for a queue order of the event
// engine (gang.Order): Gavel's FIFO on each job's fastest type with room
// (allocation.FIFO{Perf: true}), taking the jobs in the order's Key instead
// of arrival; like Gavel's FIFO it is preemptive (each reset ranks the
// jobs again) and lets later jobs pass one that does not fit, so it is
// the round engine's gang.Priority{Order: o} (TestQueueOrderEngines). The
// order sees a job's ID, arrival, scale factor, weight, rates and
// remaining steps (its Steps too: an allocation problem has no total);
// attained service, queue times and durations are not in an allocation
// problem and read 0, so orders of arrival and remaining work
// (gang.ByArrival, ShortestRemaining, ShortestJob) rank as on the event
// engine, and Tiresias's (LAS2D, Gittins2D) need the event engine: they
// are refused with an *EntrantError rather than ranked on zeros.
func QueueOrder(name string, o gang.Order) (Entrant, error) {
	switch o.(type) {
	case nil:
		return Entrant{}, &EntrantError{Name: name, Reason: "a queue order"}
	case gang.LAS2D, *gang.LAS2D, *gang.Gittins2D:
		return Entrant{}, &EntrantError{Name: name, Reason: fmt.Sprintf("an order without attained service (%T ranks by it, which an allocation problem does not hold: run it on the event engine)", o)}
	}
	key := func(p *allocation.Problem, m int) float64 {
		j := &p.Jobs[m]
		view := gang.JobView{ID: j.ID, Arrival: j.Arrival, ScaleFactor: j.ScaleFactor, Weight: j.Weight,
			Steps: j.RemainingSteps, Remaining: j.RemainingSteps, Throughput: j.Throughput, Type: -1}
		return o.Key(view, p.Now)
	}
	e := Entrant{Name: name, Description: fmt.Sprintf("queue order %T on the round engine (preemptive, later jobs pass)", o),
		Policy: func(Setup) allocation.Policy { return &allocation.FIFO{Perf: true, Key: key} }}
	return e, e.Validate()
}
