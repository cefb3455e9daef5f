package learn

import (
	"math"

	"github.com/gpusched/gpusched/perfmodel"
	"github.com/gpusched/gpusched/topology"
)

// Estimator is the seam between progress and scheduling: it takes what
// jobs report (steps done over wall time on a GPU type and count) and
// gives, for each job and type, an estimate of the rate with its
// uncertainty and where it comes from. [*Learner] implements it; a
// simulator's oracle (every rate known) is another implementation.
// Implementations must be safe for concurrent use.
type Estimator interface {
	// Register declares a job, or updates what was declared: its
	// reference GPU count, its kind (for a table or spec prior) and the
	// rates its tenant claims. A job first seen by Observe is registered
	// with its first observation's GPU count and nothing else.
	Register(job string, info JobInfo) error
	// Observe takes one progress report of a job.
	Observe(job string, o Observation) error
	// Forget drops a finished job; what it measured stays in the
	// population that gives other jobs their priors.
	Forget(job string)
	// Estimate returns the job's estimate on type t at its reference GPU
	// count; an unknown job or type gives Source SourceNone.
	Estimate(job string, t topology.GPUType) Estimate
	// Estimates appends to dst the job's estimate on every type the
	// estimator knows, sorted by type, and returns the extended slice.
	Estimates(job string, dst []Estimate) []Estimate
	// Refresh refits the population prior from what every job measured
	// (once a round is enough), and says what it fitted.
	Refresh() FitStats
}

// Observation is one progress report of a job: at wall time Time the job,
// running on GPUs GPUs of type Type in segment Segment, had done Steps
// steps. A segment is one uninterrupted run on one type and GPU count
// (from a start or restart to a preemption or the end); a report with a
// higher Segment starts a new one. Within a segment Steps and Time never
// decrease; Steps may restart lower in a new segment (a restore from a
// checkpoint); Time never decreases for a job.
//
// Rates are Steps deltas over windows of Config.Window seconds; the first
// Config.WarmupWindows windows of each segment are left out (start-up,
// checkpoint restore, compilation).
//
// An Observation is a plain value, safe for concurrent reads.
type Observation struct {
	// Type is the GPU type the job runs on; GPUs how many of them.
	Type topology.GPUType
	GPUs int
	// Segment numbers the job's segments, in increasing order (a restart
	// count, or the segment's start time in whole seconds).
	Segment uint64
	// Steps is the job's cumulative step count (0 to MaxSteps).
	Steps float64
	// Time is the wall time of the report in seconds (0 to MaxTime), on
	// one clock for the job (the scheduler's or the API server's).
	Time float64
}

// Limits of what an Observation may hold.
const (
	// MaxSteps bounds a cumulative step count.
	MaxSteps = 1e15
	// MaxTime bounds a report's time, in seconds (about 31,700 years from
	// the clock's origin: Unix seconds fit).
	MaxTime = 1e12
	// MaxKeyLen bounds a job's name, in bytes (as the scheduling core's
	// keys).
	MaxKeyLen = 512
)

// JobInfo is what is declared about a job rather than measured.
// It is a plain value, safe for concurrent reads; Register copies it.
type JobInfo struct {
	// GPUs is the reference GPU count of the job's estimates; 0 means the
	// GPU count of its first observation.
	GPUs int
	// Kind, if not nil, names the job in Config.Model (Gavel's table, the
	// spec model) for the table prior; its ScaleFactor is replaced by the
	// reference GPU count.
	Kind *perfmodel.JobKey
	// Claims are the rates (steps per second at the reference GPU count)
	// the job's tenant claims, per type: weak evidence, a pseudo-
	// observation with sigma Config.ClaimSigma on its own type only
	// (never the job's level for the priors of other types), ignored on
	// any type the job has been measured on. At most MaxClaims, each 0
	// (cannot run there: ignored) or in [perfmodel.MinRate,
	// perfmodel.MaxRate].
	Claims map[topology.GPUType]float64
	// Private keeps the job's measurements out of the population and its
	// group (they still set its own estimates): for a job whose reports
	// are not trusted to speak for others.
	Private bool
	// Group, if not empty (at most MaxGroupLen bytes), names the program
	// the job runs: the jobs of one group and reference GPU count are runs
	// of one program (a controller computes it from what it sees, such as
	// the namespace, image, command and GPU count; never a string a
	// tenant writes, which could name another tenant's group). On a type
	// the job has not measured, what the other runs of its group
	// measured there (at the latest Refresh) is its evidence, ahead of a
	// claim (Source SourceGroup), and its level for the priors of the
	// types nobody in the group measured.
	Group string
}

// MaxClaims bounds the claims of one job.
const MaxClaims = 64

// Source says what an estimate rests on, from the strongest: measured on
// the type, measured by the other runs of its group, a claim for it, a
// prior (the population or the table), or nothing. Its values are constants, safe for concurrent use.
type Source uint8

// Sources of an estimate.
const (
	// SourceNone: nothing is known; Mean and Sigma are 0.
	SourceNone Source = iota
	// SourcePrior: a prior, from the population of jobs (conditioned on
	// the job's measurements on other types) and the table by kind.
	SourcePrior
	// SourceClaim: the tenant's claim for the type, weighed with the prior.
	SourceClaim
	// SourceMeasured: the job's own windows on the type, weighed with the
	// prior.
	SourceMeasured
	// SourceGroup: what the other runs of the job's group (JobInfo.Group)
	// measured on the type, weighed with the prior; stronger than a claim,
	// weaker than the job's own measurement.
	SourceGroup
)

// String returns "none", "prior", "claim", "measured" or "group".
func (s Source) String() string {
	switch s {
	case SourceGroup:
		return "group"
	case SourcePrior:
		return "prior"
	case SourceClaim:
		return "claim"
	case SourceMeasured:
		return "measured"
	}
	return "none"
}

// Estimate is a job's rate on one GPU type: a Gaussian on the log rate at
// the job's reference GPU count (Rate scales it to another count).
// It is a plain value, safe for concurrent reads.
type Estimate struct {
	// Type is the GPU type; GPUs the reference GPU count.
	Type topology.GPUType
	GPUs int
	// Mean is exp(LogMean), in steps per second: the posterior's median
	// rate (the geometric mean; the arithmetic mean is Mean *
	// exp(Sigma^2/2)). 0 with SourceNone.
	Mean    float64
	LogMean float64
	// Sigma is the posterior standard deviation of the log rate: 0.1 is
	// about 10%. 0 with SourceNone.
	Sigma float64
	// Source is what the estimate rests on.
	Source Source
	// PriorMean and PriorSigma are the prior (before the job's own
	// evidence on this type: the population and the table, in log
	// space), 0 when there is none.
	PriorMean, PriorSigma float64
	// Windows and Segments count the measured windows (after warm-up) and
	// segments of the job on this type, at any GPU count.
	Windows, Segments int
	// Scaling is the job's exponent of GPU count (1 is linear), fitted
	// when it was measured at two counts of a type.
	Scaling float64
}

// Rate returns the estimated rate on gpus GPUs: Mean * (gpus/GPUs)^
// Scaling; 0 with SourceNone or a count below 1.
func (e Estimate) Rate(gpus int) float64 {
	if e.Source == SourceNone || gpus < 1 || e.GPUs < 1 {
		return 0
	}
	return e.Mean * math.Pow(float64(gpus)/float64(e.GPUs), e.Scaling)
}

// FitStats says what a refresh of the population fitted.
// It is a plain value, safe for concurrent reads.
type FitStats struct {
	// Rows are the jobs fitted (active and remembered), Types the types
	// with at least one measured row, Entries the measured entries.
	Rows, Types, Entries int
	// Rank is the rank used; References the reference rows kept.
	Rank, References int
	// ResidualSigma is the residual standard deviation of the measured
	// log rates around the low-rank model (at least 0.01).
	ResidualSigma float64
	// Sweeps are the alternating sweeps the fit took (at most
	// Config.Iterations; fewer once a sweep changes the weighted squared
	// residuals by less than 1e-3 of them, as a refit started from the
	// previous fit soon does).
	Sweeps int
}

// Track is what the learner holds of a job on one GPU type and count:
// its measurement so far and its latest segment, for diagnostics (events
// such as "learned: 3.1x faster on h100 than a100, 2 segments").
// It is a plain value, safe for concurrent reads.
type Track struct {
	Type topology.GPUType
	GPUs int
	// Rate and Sigma are the measured capability (the Config.Quantile of
	// the window rates, segments combined by a Kalman filter) in steps
	// per second and its log-space sigma; 0 before the first window.
	Rate, Sigma float64
	// Median is the median window rate of the latest segment on the
	// track (diagnostics: below Rate by the spread of the windows, and
	// by more if the job slowed down on purpose).
	Median float64
	// Windows and Segments count the measured windows and segments;
	// Resets the phase changes detected (each drops what came before).
	Windows, Segments, Resets int
	// Running is true if the job's current segment is on this track.
	Running bool
}
