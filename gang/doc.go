// Package gang holds admission and queue policies: which queued jobs may
// start now, never starting part of a job.
//
// Today it holds the event-driven scheduling seam ([Scheduler], [JobView],
// [Decision]) that the simulator's event engine calls, and [Priority], a
// gang scheduler over an [Order] (a job runs with all its GPUs on one type
// or not at all; preemptive or not; strict order or passing): FIFO
// ([ByArrival]), SJF ([ShortestJob]), SRTF ([ShortestRemaining]) and
// Tiresias's 2D-LAS ([LAS2D], with its starvation guard) and 2D-Gittins
// ([Gittins2D]) (Gu et al., "Tiresias: A GPU Cluster Manager for
// Distributed Deep Learning", NSDI 2019, section 4).
//
// Planned: server-level all-or-nothing admission with rollback,
// reservations with EASY and conservative backfilling (Mu'alem and
// Feitelson, IEEE TPDS 12(6), 2001), timeouts, and a Permit-style API in
// the shape of the Kubernetes scheduler framework's coscheduling plugin.
package gang
