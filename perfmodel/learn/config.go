package learn

import (
	"fmt"
	"math"

	"github.com/gpusched/gpusched/perfmodel"
	"github.com/gpusched/gpusched/topology"
)

// Config tunes a Learner. The zero value of a field means its default;
// New checks the rest and reports a field out of range as an *Error of
// kind ErrInvalidConfig. The defaults and where they come from:
//
//   - Window 60 s and WarmupWindows 2: rate samples over 30 to 60 s, the
//     first two of a segment dropped (the design, section 7.1;
//     Gavel's iterator reports per lease, Pollux's jobs every 30 s).
//   - Quantile 0.8: a job's capability on a type is the 80th percentile
//     of its window rates, so that stalls and brief deliberate slow-downs
//     (up to a fifth of the windows) do not lower it; with lognormal
//     window noise of sigma s it sits 0.84 s above the median.
//   - MaxWindows 32 per segment (the latest kept).
//   - WindowSigma 0.1: a window's log-rate spread before a segment has 8
//     windows to measure it (lognormal sigma 0.05 to 0.1 per window).
//   - NoiseFloor 0.05: no segment's capability is surer than this (the
//     spread between GPUs of one type, PAL: Jain et al., arXiv
//     2408.11919).
//   - Drift 0.05: process noise added at each new segment, so that
//     later segments can move an old estimate.
//   - PhaseSigmas 3 and PhaseWindows 3: a phase change (the job got
//     faster or slower for good) is 3 windows in a row more than 3
//     sigmas away, on the same side; the track then restarts from them
//     (Shockwave, Zheng et al., NSDI 2023, rescales on a 40% miss).
//   - Rank 2, Huber 0.1, Iterations 12, References 256: the
//     population's completion (see the package documentation).
//   - LevelWidth 1 and ShapeWidth 0.2: the match to the reference rows,
//     chosen on the leave-one-job-out test of Gavel's table (see the
//     package documentation).
//   - MinPriorSigma 0.2, ModelSigma 0.5, ClaimSigma 1: the priors' floors
//     (held-out errors of a per-type scalar are 30% median, 100% p90:
//     sigma 0.4 to 0.6), a table's sigma, a claim's.
//   - GroupSigma 0.05: the least spread assumed between two runs of one
//     program on one type (JobInfo.Group): the noise floor's, the
//     spread between GPUs of one type (a new run differs from the last
//     as a new segment does).
//   - ScalingSigma 0.25: the prior of the GPU-count exponent is 1
//     (linear, as Sia and Pollux assume before measuring) with this
//     sigma.
//   - MaxJobs 65,536, MaxTypes 64, MaxTracks 16 per job, MaxHistory
//     10,000 finished jobs.
//   - Tolerance 0.01: what moves a job's Version and a refit (a tenth of
//     the scheduler's Explore.Resolve of 10%: a change below it is not
//     worth a read).
//
// A Config is a plain value, safe for concurrent reads; New copies it.
type Config struct {
	// Window is the length of a rate window, in seconds (1 to 86,400).
	Window float64
	// WarmupWindows are the windows left out at the start of each segment
	// (0 to 1,000; -1 for none, as 0 means the default).
	WarmupWindows int
	// Quantile of the window rates that is the capability (0.5 to 0.99).
	Quantile float64
	// MaxWindows are the windows kept per segment (4 to 1,024).
	MaxWindows int
	// WindowSigma, NoiseFloor, Drift: log-space sigmas (0.001 to 2).
	WindowSigma, NoiseFloor, Drift float64
	// PhaseSigmas (1 to 100) and PhaseWindows (1 to MaxWindows) detect a
	// phase change.
	PhaseSigmas  float64
	PhaseWindows int
	// Rank of the population's factors (0 to 3; -1 for 0, as 0 means the
	// default), Huber (0.001 to 10, log rate) the scale of its robust
	// weights, Iterations (1 to 1,000) its sweeps, References (1 to
	// 4,096) the reference rows kept.
	Rank       int
	Huber      float64
	Iterations int
	References int
	// LevelWidth and ShapeWidth (0.01 to 100, log rate) are the widths of
	// the match to the reference rows.
	LevelWidth, ShapeWidth float64
	// MinPriorSigma, ModelSigma, ClaimSigma, ScalingSigma, GroupSigma
	// (0.001 to 10).
	MinPriorSigma, ModelSigma, ClaimSigma, ScalingSigma, GroupSigma float64
	// Model, if not nil, gives the table prior of a job that declares its
	// kind (JobInfo.Kind): Gavel's table (perfmodel/gavel), the spec
	// model (perfmodel/hw). It must be safe for concurrent use.
	Model perfmodel.ThroughputModel
	// Types, if not empty, are the only GPU types observations may name
	// (at most MaxTypes); otherwise types are learned from observations.
	Types []topology.GPUType
	// MaxJobs (1 to 16,777,216), MaxTypes (1 to 256), MaxTracks (1 to
	// 1,024) and MaxHistory (0 to 16,777,216; -1 for 0) bound the memory:
	// active jobs, GPU types, tracks (type and GPU count) of a job, and
	// finished jobs remembered for the population.
	MaxJobs, MaxTypes, MaxTracks, MaxHistory int
	// Tolerance (0 to 1; negative for none, as 0 means the default) is
	// the least change worth telling readers and worth a refit, so that
	// a job whose reports say what they said before costs its readers
	// nothing:
	//   - a job's Version changes when a type is measured for the first
	//     time, and when, asked for, it finds that what the job measured
	//     moved by more than Tolerance in log rate since it last changed,
	//     or its variance by more than Tolerance x MinPriorSigma^2 (its
	//     estimates then move by about Tolerance x (1 + the distance of
	//     its measurement from its prior, in log rate));
	//   - Refresh fits only when at least Tolerance of the rows (and at
	//     least one) changed since the last fit (a log capability moved by
	//     more than Tolerance, a row that joined or left), and the fit changes every Version only
	//     when it changed the reference rows or moved one of their values
	//     by more than Tolerance/2 (or a variance by more than Tolerance x
	//     MinPriorSigma^2).
	// None: every report changes the job's Version, every Refresh fits
	// and changes every Version.
	Tolerance float64
}

// Defaults of Config.
const (
	DefaultWindow        = 60.0
	DefaultWarmupWindows = 2
	DefaultQuantile      = 0.8
	DefaultMaxWindows    = 32
	DefaultWindowSigma   = 0.1
	DefaultNoiseFloor    = 0.05
	DefaultDrift         = 0.05
	DefaultPhaseSigmas   = 3.0
	DefaultPhaseWindows  = 3
	DefaultRank          = 2
	DefaultHuber         = 0.1
	DefaultIterations    = 12
	DefaultReferences    = 256
	DefaultLevelWidth    = 1.0
	DefaultShapeWidth    = 0.2
	DefaultMinPriorSigma = 0.2
	DefaultModelSigma    = 0.5
	DefaultClaimSigma    = 1.0
	DefaultScalingSigma  = 0.25
	DefaultGroupSigma    = 0.05
	DefaultMaxJobs       = 1 << 16
	DefaultMaxTypes      = 64
	DefaultMaxTracks     = 16
	DefaultMaxHistory    = 10000
	DefaultTolerance     = 0.01
)

// withDefaults returns c with its zero fields set to their defaults.
func (c Config) withDefaults() Config {
	f := func(v *float64, d float64) {
		if *v == 0 {
			*v = d
		}
	}
	i := func(v *int, d int) {
		switch *v {
		case 0:
			*v = d
		case -1:
			*v = 0
		}
	}
	f(&c.Window, DefaultWindow)
	i(&c.WarmupWindows, DefaultWarmupWindows)
	f(&c.Quantile, DefaultQuantile)
	i(&c.MaxWindows, DefaultMaxWindows)
	f(&c.WindowSigma, DefaultWindowSigma)
	f(&c.NoiseFloor, DefaultNoiseFloor)
	f(&c.Drift, DefaultDrift)
	f(&c.PhaseSigmas, DefaultPhaseSigmas)
	i(&c.PhaseWindows, DefaultPhaseWindows)
	i(&c.Rank, DefaultRank)
	f(&c.Huber, DefaultHuber)
	i(&c.Iterations, DefaultIterations)
	i(&c.References, DefaultReferences)
	f(&c.LevelWidth, DefaultLevelWidth)
	f(&c.ShapeWidth, DefaultShapeWidth)
	f(&c.MinPriorSigma, DefaultMinPriorSigma)
	f(&c.ModelSigma, DefaultModelSigma)
	f(&c.ClaimSigma, DefaultClaimSigma)
	f(&c.ScalingSigma, DefaultScalingSigma)
	f(&c.GroupSigma, DefaultGroupSigma)
	i(&c.MaxJobs, DefaultMaxJobs)
	i(&c.MaxTypes, DefaultMaxTypes)
	i(&c.MaxTracks, DefaultMaxTracks)
	i(&c.MaxHistory, DefaultMaxHistory)
	f(&c.Tolerance, DefaultTolerance)
	if c.Tolerance < 0 {
		c.Tolerance = -1
	}
	return c
}

// floatRange is a float field's name, value and bounds.
type floatRange struct {
	name   string
	v      float64
	lo, hi float64
}

// intRange is an int field's name, value and bounds.
type intRange struct {
	name   string
	v      int
	lo, hi int
}

// validate checks c (with its defaults set).
func (c *Config) validate() error {
	for _, r := range []floatRange{
		{"Window", c.Window, 1, 86400}, {"Quantile", c.Quantile, 0.5, 0.99},
		{"WindowSigma", c.WindowSigma, 0.001, 2}, {"NoiseFloor", c.NoiseFloor, 0.001, 2}, {"Drift", c.Drift, 0.001, 2},
		{"PhaseSigmas", c.PhaseSigmas, 1, 100}, {"Huber", c.Huber, 0.001, 10},
		{"LevelWidth", c.LevelWidth, 0.01, 100}, {"ShapeWidth", c.ShapeWidth, 0.01, 100},
		{"MinPriorSigma", c.MinPriorSigma, 0.001, 10}, {"ModelSigma", c.ModelSigma, 0.001, 10},
		{"ClaimSigma", c.ClaimSigma, 0.001, 10}, {"ScalingSigma", c.ScalingSigma, 0.001, 10},
		{"GroupSigma", c.GroupSigma, 0.001, 10},
		{"Tolerance", c.Tolerance, -1, 1},
	} {
		if !(r.v >= r.lo && r.v <= r.hi) {
			return fail("", r.name, ErrInvalidConfig, fmt.Sprintf("%v (want %v to %v)", r.v, r.lo, r.hi))
		}
	}
	for _, r := range []intRange{
		{"WarmupWindows", c.WarmupWindows, 0, 1000}, {"MaxWindows", c.MaxWindows, 4, 1024},
		{"PhaseWindows", c.PhaseWindows, 1, c.MaxWindows}, {"Rank", c.Rank, 0, maxRank},
		{"Iterations", c.Iterations, 1, 1000}, {"References", c.References, 1, 4096},
		{"MaxJobs", c.MaxJobs, 1, 1 << 24}, {"MaxTypes", c.MaxTypes, 1, 256},
		{"MaxTracks", c.MaxTracks, 1, 1024}, {"MaxHistory", c.MaxHistory, 0, 1 << 24},
	} {
		if r.v < r.lo || r.v > r.hi {
			return fail("", r.name, ErrInvalidConfig, fmt.Sprintf("%d (want %d to %d)", r.v, r.lo, r.hi))
		}
	}
	if len(c.Types) > c.MaxTypes {
		return fail("", "Types", ErrInvalidConfig, fmt.Sprintf("%d types, more than MaxTypes %d", len(c.Types), c.MaxTypes))
	}
	seen := map[topology.GPUType]bool{}
	for _, t := range c.Types {
		if err := t.Validate(); err != nil {
			return fail("", "Types", ErrInvalidConfig, err.Error())
		}
		if seen[t] {
			return fail("", "Types", ErrInvalidConfig, fmt.Sprintf("%s twice", t))
		}
		seen[t] = true
	}
	return nil
}

// quantileZ returns z_q, the standard normal quantile of q, and the
// factor q (1-q) / phi(z_q)^2 of the variance of a sample quantile
// (Cramér, "Mathematical Methods of Statistics", 1946, section 28.5).
func quantileZ(q float64) (z, varFactor float64) {
	z = math.Sqrt2 * math.Erfinv(2*q-1)
	phi := math.Exp(-z*z/2) / math.Sqrt(2*math.Pi)
	return z, q * (1 - q) / (phi * phi)
}
