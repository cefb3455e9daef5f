// Package learn estimates each job's throughput on each GPU type from
// what the jobs do, not from a table: the seam between progress reports
// and the heterogeneity-aware policies (issue #41).
//
// See the Learner type for the model; docs/learning.md for the evidence.
package learn
