// Package gavel embeds the throughput tables measured by Gavel
// (Narayanan et al., "Heterogeneity-Aware Cluster Scheduling Policies for
// Deep Learning Workloads", OSDI 2020; stanford-futuredata/gavel @ c4fa400,
// MIT licence, beside the files in data/): [Simulation], the table of its
// simulator, and [Physical], the one measured on its physical cluster.
//
// The tables live apart from package perfmodel so that a binary pays their
// 1.24 MB each only when it asks for them: perfmodel holds the Table type
// and the parser for any table in Gavel's format ([perfmodel.ReadGavelJSON]).
package gavel
