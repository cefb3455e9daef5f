// Package gang holds admission and queue policies: which queued jobs may
// start now, never starting part of a job.
//
// Today it holds the event-driven scheduling seam ([Scheduler], [JobView],
// [Decision]) that the simulator's event engine calls; [Priority], a gang
// scheduler over an [Order] (a job runs with all its GPUs on one type or
// not at all; preemptive or not; strict order, greedy passing, EASY
// backfilling behind a reservation for the first blocked job, or
// conservative backfilling behind a reservation for every waiting job,
// Mu'alem and Feitelson, IEEE TPDS 12(6), 2001): FIFO
// ([ByArrival]), SJF ([ShortestJob]), SRTF ([ShortestRemaining]) and
// Tiresias's 2D-LAS ([LAS2D], with its starvation guard) and 2D-Gittins
// ([Gittins2D]) (Gu et al., "Tiresias: A GPU Cluster Manager for
// Distributed Deep Learning", NSDI 2019, section 4); and [Coscheduler], a
// Permit-style API in the shape of the Kubernetes scheduler framework's
// coscheduling plugin (allow, wait with a timeout, reject; all members
// allowed together; a backoff window after a rejection in which members
// fail at once), safe for concurrent use. [OnServers] adds
// server-level all-or-nothing admission on top of any Scheduler and
// [ServerPlacer] ([Consolidated] by default, optionally strict about
// keeping a job on one server) over the live [cluster.State]: a job the
// placer cannot place whole is rolled back and the jobs behind it are
// asked again. OnServers does not give up on a gang it keeps rolling back;
// it waits until GPUs free up.
package gang
