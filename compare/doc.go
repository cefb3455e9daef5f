// Package compare runs scheduling policies side by side on one workload
// and reports the metrics the papers report: the comparison a researcher
// makes between a new policy and Gavel, Tiresias, Pollux or Kueue.
//
// An [Entrant] is one column of a comparison: a name and everything its
// runs depend on (the policy, the engine, the round mechanism's settings,
// space sharing, the rates the policy sees). [Baselines] defines the
// built-in ones once; examples/simulate, the docs' tables and a user's
// program all run these same definitions, so a table in the docs can be
// rebuilt from Go to the digit. A user's policy is an Entrant of its own
// beside them. A [Scenario] is the workload: a cluster, a trace, the
// measured window and a seed. [Run] simulates every entrant on the
// scenario (in parallel, each on its own copy of every stateful part) and
// returns a [Report], which writes its table as text, Markdown, CSV or
// JSON and its plots (JCT CDF, utilisation over time, GPU-hours per type)
// as SVG.
//
// The round engine (sim.Run) is Gavel's round-based mechanism (Narayanan
// et al., OSDI 2020, section 4); the event engine (sim.RunEvents) runs
// queue orders and Kueue's flavor walk, jobs running to their end once
// started. The metrics are sim.Summary's: JCT mean, median, p95, p99,
// queueing, makespan, utilisation, finish-time fairness rho (Themis,
// Mahajan et al., NSDI 2020; as Gavel section 7 computes it),
// preemptions, moves between GPU types, and GPU-hours per type.
//
// Reproducibility: a run depends only on the scenario and the entrant,
// never on the order of entrants, on Options.Parallel or on the order in
// which the scenario names its types (the round engine sees them sorted;
// only the Kueue entrants read the named order, as their flavor order).
package compare
