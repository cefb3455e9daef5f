// Package learn estimates each job's throughput on each GPU type from what
// the jobs report (steps done over wall time), not from a table: the seam
// between progress and the heterogeneity-aware policies (issue #41).
// [Estimator] is the interface the scheduling core and the controllers
// consume; [*Learner] implements it.
//
// # Signal
//
// A job reports [Observation]s: its cumulative steps at a wall time, on a
// GPU type and count, in a segment (one uninterrupted run; a restart or a
// preemption starts the next). Rates are the steps over windows of
// Config.Window (60 s); the first Config.WarmupWindows (2) of each
// segment are left out (start-up, checkpoint restore, compilation). A
// stalled window counts at perfmodel.MinRate. Reports that go back in
// steps or time, that are not numbers or are out of range, are errors
// naming the field, and change nothing.
//
// # Per type and GPU count: a track
//
// A job's capability on a type and count is the Config.Quantile (0.8) of
// its segment's window rates (the latest Config.MaxWindows), not their
// mean: stalls and slow-downs in up to a fifth of the windows do not lower
// it, so that slowing down on purpose now and then buys nothing; the
// median is kept for diagnostics ([Track]). Its variance is that of a
// sample quantile, q(1-q)/phi(z_q)^2 * s^2/n for n windows of log-rate
// spread s (the interquartile range / 1.349 from 8 windows on,
// Config.WindowSigma before), at least Config.NoiseFloor^2. Segments are
// combined by a scalar Kalman filter in log space with process noise
// Config.Drift^2 at each new segment. A phase change (the job got faster
// or slower for good: a new stage of training, another data set) is
// Config.PhaseWindows windows in a row more than Config.PhaseSigmas
// sigmas from the track's estimate on the same side; the track then drops
// what came before (Shockwave, Zheng et al., NSDI 2023, rescales its
// estimate on a 40% miss). A slow-down must last PhaseWindows windows (3
// minutes by default), and costs the job its progress meanwhile, to lower
// its estimate.
//
// # Per type: an estimate
//
// An [Estimate] is a Gaussian on the log rate at the job's reference GPU
// count (JobInfo.GPUs, or its first report's). Tracks at other counts are
// projected by the job's exponent b (rate ~ GPUs^b): its prior is 1
// (linear, as Sia and Pollux assume before they measure) with sigma
// Config.ScalingSigma, refined by the weighted least-squares slope of the
// job's tracks of one type at two counts or more, clamped to [0, 1]
// (Estimate.Rate scales to any count; Sia projects larger configurations
// the same way from one measured type).
//
// The job's own evidence on the type (its tracks, else its tenant's claim
// as a pseudo-observation of sigma Config.ClaimSigma: measured beats
// claimed) is weighed, by precision, with a prior that combines, again by
// precision:
//
//  1. The population: what the other jobs measured. Refresh fits a
//     low-rank model of the jobs-by-types matrix of log rates (Gavel's
//     matrix completion, Narayanan et al., OSDI 2020, section 6, applied
//     to isolated rates): y_jt = m_t + a_j + u_j.v_t + e, of rank
//     Config.Rank (at most the types less 2), fitted by alternating least
//     squares as the maximum a posteriori of probabilistic matrix
//     factorisation (Salakhutdinov and Mnih, NIPS 2007; the ridges follow
//     the residual and factor variances, re-estimated at each sweep), with
//     Huber weights on the residuals (Huber, 1964), from a spectral start.
//     It completes Config.References reference rows (the jobs with the
//     most measured types). A job is matched to them as Gavel matches a
//     new job to its nearest reference job, made soft: each row is moved
//     to the job's level and weighed by its nearness in level
//     (Config.LevelWidth) and in shape on the job's measured types
//     (Config.ShapeWidth); the prior is the weighted median of the rows'
//     rates on the type, its sigma their weighted median absolute
//     deviation, at least Config.MinPriorSigma, grown by the effective
//     number of rows and the completed entries' variance. The job's own
//     evidence on the type is left out of its prior.
//  2. The table by kind: Config.Model's rate for JobInfo.Kind (Gavel's
//     table, perfmodel/gavel; the spec model, perfmodel/hw), moved to the
//     job's level on its measured types, with sigma Config.ModelSigma.
//
// A job's group (JobInfo.Group: the runs of one program, which a
// controller names from the job's namespace, image, command and GPU
// count) comes before the priors: on a type the job has not measured,
// what the group's other runs measured there (their mean, with variance
// the larger of their spread and Config.GroupSigma^2, by 1 + 1/runs) is
// its evidence, and its level for the priors of the other types, so that
// a new run of a training script starts where the last one ended (Source
// group; TestGroupRunsShareWhatTheyMeasured). The groups are taken at
// each Refresh, from the active and remembered rows that are not Private.
//
// Source says what an estimate rests on: measured, group, claim, prior
// or none.
// A job's evidence moves its own estimates and, once it is measured and
// not Private, its row of the population (other jobs' priors); claims
// never enter the population, nor set the job's level for its priors on
// other types.
//
// # Evidence
//
// Leave-one-job-out over Gavel's two tables and MLPerf Training's results
// (docs/learning.md): with one measured type the median error of the
// other types' rates is 26% on Gavel's simulation table against the
// one-multiplier baseline's 31%, with two 15% against 25%; the figures
// are pinned by TestLeaveOneJobOut.
//
// # Costs and bounds
//
//   - Observe: O(1) map lookups, O(MaxWindows) moves when a window closes,
//     no allocation once the job and its track exist (BenchmarkObserve).
//   - Estimates: O(tracks^2 + References * (measured types + 1) *
//     evidence + types * References), about 0.1 ms of CPU for 8 types and
//     256 references (BenchmarkEstimates); for a job measured on one type
//     at most, O(tracks^2 + types) from a grid of the fit's priors, about
//     2 us (BenchmarkEstimatesOneType). The grid (64 reference rows or
//     more) tabulates the prior of one measured type's level at points
//     LevelWidth/32 apart, filled when first asked for, and interpolates
//     between them only where the prior moves by less than 0.005 (log
//     rate, and relative sigma) between two points: within 0.006 of the
//     exact prior (TestPriorGridError).
//   - Refresh: O(sweeps * (entries * (k+1)^2 + (rows + types) * (k+1)^3) +
//     rows log rows + rows * types for the groups), under 100 ms of CPU at 10,000 jobs by 8 types
//     (BenchmarkRefresh, BenchmarkRefreshCold; docs/benchmarks.md); O(1)
//     when fewer than Config.Tolerance of the rows changed since the last
//     fit (BenchmarkRefreshUnchanged).
//   - Version: O(1); Changed: O(jobs whose Version changed). A job's
//     Version follows Config.Tolerance: a reader that keeps estimates
//     reads them again only where they may have moved beyond it.
//   - Memory: per job, its tracks (at most MaxTracks) and one segment's
//     windows (2 MaxWindows floats); per remembered job a row of types;
//     the fit, O(rows (k+1) + References types). Config.MaxJobs,
//     MaxTypes, MaxTracks are errors of kind ErrLimit when reached;
//     MaxHistory evicts the oldest remembered job; MaxWindows the oldest
//     window of a segment.
//   - Snapshot and Restore: a versioned JSON encoding of the state, every
//     value checked, at most MaxSnapshotBytes (fuzzed: FuzzRestore).
//
// A Learner is safe for concurrent use; see its documentation.
package learn
