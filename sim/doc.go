// Package sim is gpusched's trace-driven simulator: a clock and a trace
// around the scheduling core, over a throughput model, reporting per-job
// records and cluster metrics.
//
// [Run] drives a scheduler.Scheduler, the same core a production scheduler
// embeds: each round the scheduler's policy, round mechanism and placement
// on the simulated cluster's servers decide, the simulator runs the jobs
// at their rates and reports what ran, as Gavel's simulator and its
// physical mode share one scheduler (Narayanan et al., OSDI 2020, section
// 6). The event-driven engines ([RunEvents] with gang's schedulers,
// [RunElastic] with elastic's, [RunHetero] with elastic's typed policies
// on pools of GPU types: Sia, [GavelRounds], type-blind ones) keep their
// own loops, each a type whose named steps the loop calls in turn.
// [PolluxHeteroJobs] puts Pollux's workloads on several GPU types, with
// computation speedups predicted by perfmodel/hw ([PolluxSpeedup]).
//
// The model is Gavel's simulator (Narayanan et al., OSDI 2020, section 7;
// scheduler.py: simulate): 360 s rounds, arrivals admitted at round
// boundaries, each scheduled job running min(floor(T x 360), remaining)
// steps. [GavelWorkload] generates Gavel's synthetic traces with its exact
// distributions (and, with Python, its exact draws); [ReadGavelTrace] reads
// Gavel's .trace files; Config.Compat runs Gavel's mechanism and simulator
// loop, quirks included, so that per-job results match Gavel's. The policy
// packages and the scheduler never import it.
package sim
