// Package sim will hold gpusched's trace-driven discrete-event simulator and
// its trace loaders.
//
// Its one job: drive an allocation policy or a placer over a job trace with a
// throughput model and report per-job records and cluster metrics. It follows
// the simulator of Gavel (Narayanan et al., OSDI 2020, section 7: 360 s
// rounds, arrivals admitted at round boundaries) and also runs event-driven
// schedulers. It is the only policy-composing package: allocation,
// placement, gang and elastic never import it.
//
// Status: the package is laid out but holds no simulator yet; see the
// README's feature table.
package sim
