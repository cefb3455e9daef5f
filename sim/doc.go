// Package sim is gpusched's trace-driven simulator: it composes an
// allocation policy with the round mechanism over a job trace and a
// throughput model, and reports per-job records and cluster metrics.
//
// The model is Gavel's simulator (Narayanan et al., OSDI 2020, section 7;
// scheduler.py: simulate): 360 s rounds, arrivals admitted at round
// boundaries, each scheduled job running min(floor(T x 360), remaining)
// steps. [GavelWorkload] generates Gavel's synthetic traces with its exact
// distributions (and, with Python, its exact draws); [ReadGavelTrace] reads
// Gavel's .trace files; Config.Compat runs Gavel's mechanism and simulator
// loop, quirks included, so that per-job results match Gavel's. It is the only
// package that composes the policy packages: allocation, placement, gang
// and elastic never import it.
package sim
