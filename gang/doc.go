// Package gang will provide all-or-nothing admission for multi-worker jobs,
// reservations and backfilling, and queue policies.
//
// Its one job: decide which queued jobs may start now, never starting part of
// a job. Planned: gang admission with rollback, a reservation for the head of
// the queue, EASY and conservative backfilling (Mu'alem and Feitelson, IEEE
// TPDS 12(6), 2001), a Permit-style API in the shape of the Kubernetes
// scheduler framework's coscheduling plugin, and the queue policies FIFO, SJF,
// SRTF and Tiresias's 2D-LAS and 2D-Gittins (Gu et al., NSDI 2019, section 4).
//
// Status: the package is laid out but holds no policy yet; see the README's
// feature table.
package gang
