package scheduler

import (
	"fmt"
	"math"
	"strings"
	"unicode/utf8"

	"github.com/gpusched/gpusched/allocation"
	"github.com/gpusched/gpusched/perfmodel"
	"github.com/gpusched/gpusched/perfmodel/learn"
	"github.com/gpusched/gpusched/topology"
)

// Limits on what a job spec may say.
const (
	// MaxKeyLen bounds a job key, a tenant and a gang name, in bytes.
	// Each is valid UTF-8 without a NUL byte (see JobSpec.Tenant).
	MaxKeyLen = 512
	// MaxJobGPUs bounds the GPUs of one job.
	MaxJobGPUs = 1 << 16
)

// maxAttained bounds a job's attained time on a type, in seconds: a
// thousand times allocation.MaxTime, which no run of rounds within MaxTime
// reaches; reports saturate at it, so that no report can make it infinite.
const maxAttained = 1e3 * allocation.MaxTime

// JobSpec describes a job to the scheduler. Every job is a gang: it runs
// with all its GPUs at once, of one type, or not at all. A JobSpec is a
// plain value, safe for concurrent reads; Submit and Update copy it.
type JobSpec struct {
	// GPUs is the number of GPUs the job runs on (its scale factor); for an
	// elastic job, the fewest it runs on.
	GPUs int `json:"gpus"`
	// MaxGPUs, when above GPUs, makes the job elastic: GPUs of its type
	// left over after a round are shared among the running elastic jobs by
	// Lyra's knapsack (linear scaling), up to MaxGPUs each. 0 means GPUs.
	MaxGPUs int `json:"max_gpus,omitempty"`
	// Types lists the GPU types the job may run on; empty means every type
	// it has a rate for.
	Types []topology.GPUType `json:"types,omitempty"`
	// Throughput gives the job's rate in steps per second on GPUs GPUs of
	// each type, 0 or in [allocation.MinRate, allocation.MaxRate]; a type
	// it lacks (or a rate of 0) cannot run it. A model's rates must be in
	// the same range.
	Throughput map[topology.GPUType]float64 `json:"throughput,omitempty"`
	// Model, instead of Throughput, looks the rates up in the scheduler's
	// Config.Throughput (its ScaleFactor is taken from GPUs when 0); with a
	// Config.Colocation it also gives the job's rates when sharing GPUs.
	Model *perfmodel.JobKey `json:"model,omitempty"`
	// Weight is the job's weight for weighted policies: 0 (meaning 1) or in
	// [allocation.MinWeight, allocation.MaxWeight].
	Weight float64 `json:"weight,omitempty"`
	// Tenant names the job's owner for hierarchical policies (weighted by
	// Config.TenantWeights). A tenant, a gang and a job key are at most
	// MaxKeyLen bytes of valid UTF-8 without a NUL byte: a snapshot is JSON,
	// which keeps no other bytes as they are, and a NUL byte joins the keys
	// of two jobs sharing GPUs.
	Tenant string `json:"tenant,omitempty"`
	// Priority ranks jobs in tiers: the jobs of the highest priority are
	// allocated the whole cluster; each lower tier shares what the tiers
	// above leave (their allocated GPUs subtracted, rounded up per type).
	Priority int `json:"priority,omitempty"`
	// Gang names a group of jobs that run in the same rounds or not at all
	// (each job of the group placed whole, or none of them runs).
	Gang string `json:"gang,omitempty"`
	// SingleServer keeps the job on one server: it waits rather than
	// spread, and does not run on a type no server of which has GPUs
	// enough for it (it is unrunnable when no type it may run on has).
	SingleServer bool `json:"single_server,omitempty"`
	// RemainingSteps is the work left, in steps, in [0,
	// allocation.MaxSteps] (policies such as makespan and finish-time
	// fairness use it); 0 means unknown: the job runs until it is removed
	// (JobStatus.RemainingKnown says which). Reports of steps run count
	// known work down; when it reaches 0 the job has finished: it leaves
	// the rounds (JobState Finished).
	RemainingSteps float64 `json:"remaining_steps,omitempty"`
	// Deadline is the time by which the job should finish (same clock as
	// the rounds), in [0, allocation.MaxTime] seconds; 0 means none.
	Deadline float64 `json:"deadline,omitempty"`
	// Learn makes the job's rates the scheduler's Config.Estimator's, fed
	// by the job's progress (Scheduler.Progress): Throughput, if set, is
	// then its tenant's claim (weak evidence, learn.JobInfo.Claims) and
	// Model its kind (the table prior, learn.JobInfo.Kind), neither its
	// rates. With neither, it starts type-agnostic (the same rate on
	// every type) until the estimator knows better. See Explore.
	Learn bool `json:"learn,omitempty"`
	// Group, with Learn, names the program the job runs
	// (learn.JobInfo.Group; at most learn.MaxGroupLen bytes): on a type
	// it has not run on, a learned job starts from what the other runs of
	// its group at its GPU count measured there. The embedder computes it
	// from what it sees of the job (its tenant, image, command and GPU
	// count), never from a string the tenant writes: a group names whose
	// measurements a job takes. Ignored without Learn.
	Group string `json:"group,omitempty"`
	// TotalSteps, with Learn, is the job's whole work in the steps its
	// progress reports count (its own units, learn.MaxSteps at most; 0:
	// not audited), for the conservation audit (Explore.Audit): what its
	// reports add up to may not pass it by more than the audit's slack,
	// and must reach it, less the slack, when its known work
	// (RemainingSteps) is done. A job that fails keeps running, its
	// measurements out of the population and its group (Private). Ignored
	// without Learn.
	TotalSteps float64 `json:"total_steps,omitempty"`
}

func (j *JobSpec) maxGPUs() int {
	if j.MaxGPUs > j.GPUs {
		return j.MaxGPUs
	}
	return j.GPUs
}

// validate checks a spec against the ranges of its fields (those of
// package allocation, so that an accepted job cannot make a round fail);
// hasModel says whether the scheduler has a throughput model. Its errors
// name the field; callers prefix the job's key.
func (j *JobSpec) validate(hasModel, hasEstimator bool) error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrInvalid, fmt.Sprintf(format, args...))
	}
	switch {
	case j.GPUs < 1 || j.GPUs > MaxJobGPUs:
		return bad("%d GPUs (want 1 to %d)", j.GPUs, MaxJobGPUs)
	case j.MaxGPUs != 0 && (j.MaxGPUs < j.GPUs || j.MaxGPUs > MaxJobGPUs):
		return bad("at most %d GPUs with at least %d (want 0, or %d to %d)", j.MaxGPUs, j.GPUs, j.GPUs, MaxJobGPUs)
	case j.Weight != 0 && !(j.Weight >= allocation.MinWeight && j.Weight <= allocation.MaxWeight):
		return bad("Weight %v (want 0, meaning 1, or %g to %g)", j.Weight, allocation.MinWeight, allocation.MaxWeight)
	case !(j.RemainingSteps >= 0 && j.RemainingSteps <= allocation.MaxSteps):
		return bad("RemainingSteps %v (want 0 to %g)", j.RemainingSteps, allocation.MaxSteps)
	case j.TotalSteps != 0 && !(j.TotalSteps > 0 && j.TotalSteps <= learn.MaxSteps):
		return bad("TotalSteps %v (want 0, or above 0 up to %g)", j.TotalSteps, float64(learn.MaxSteps))
	case !validTime(j.Deadline):
		return bad("Deadline %v (want 0 to %g s)", j.Deadline, allocation.MaxTime)
	case j.Learn && !hasEstimator:
		return bad("the job learns its rates (Learn) but the scheduler has no Config.Estimator")
	case j.Throughput != nil && j.Model != nil:
		return bad("both Throughput and Model are set (give one)")
	case j.Throughput == nil && j.Model == nil && !j.Learn:
		return bad("neither Throughput nor Model is set, nor Learn: the job's rates are unknown")
	case j.Model != nil && !hasModel && !j.Learn:
		return bad("the job names a model (%s) but the scheduler has no Config.Throughput", j.Model.Name())
	case j.Model != nil && j.Model.ScaleFactor != 0 && j.Model.ScaleFactor != j.GPUs:
		return bad("model scale factor %d for a job of %d GPUs", j.Model.ScaleFactor, j.GPUs)
	case len(j.Group) > learn.MaxGroupLen:
		return bad("Group of %d bytes (at most %d)", len(j.Group), learn.MaxGroupLen)
	case len(j.Types) > 1024 || len(j.Throughput) > 1024:
		return bad("%d types and %d rates (at most 1024)", len(j.Types), len(j.Throughput))
	}
	if j.Tenant != "" {
		if err := checkName("tenant", j.Tenant); err != nil {
			return err
		}
	}
	if j.Gang != "" {
		if err := checkName("gang", j.Gang); err != nil {
			return err
		}
	}
	for _, t := range j.Types {
		if err := t.Validate(); err != nil {
			return fmt.Errorf("%w: allowed types: %w", ErrInvalid, err)
		}
	}
	for t, v := range j.Throughput {
		if err := t.Validate(); err != nil {
			return fmt.Errorf("%w: throughput: %w", ErrInvalid, err)
		}
		if !allocation.ValidRate(v) {
			return bad("Throughput %v on %s (want 0, or %g to %g steps/s)", v, t, allocation.MinRate, allocation.MaxRate)
		}
	}
	return nil
}

func finiteNonNeg(v float64) bool { return v >= 0 && !math.IsInf(v, 0) }

// validTime tells whether v is a time in [0, allocation.MaxTime] seconds.
func validTime(v float64) bool { return v >= 0 && v <= allocation.MaxTime }

// checkKey validates a job key.
func checkKey(key string) error {
	if key == "" {
		return fmt.Errorf("%w: empty job key", ErrInvalid)
	}
	return checkName("job key", key)
}

// checkName validates a job key, a tenant or a gang name (what says which
// in the error): at most MaxKeyLen bytes of valid UTF-8 without a NUL
// byte. Snapshot writes JSON, which would change other bytes (an invalid
// byte becomes U+FFFD, so that two keys became one), and a NUL byte joins
// the keys of a pair (pairHolder).
func checkName(what, name string) error {
	switch {
	case len(name) > MaxKeyLen:
		return fmt.Errorf("%w: %s of %d bytes (at most %d)", ErrInvalid, what, len(name), MaxKeyLen)
	case !utf8.ValidString(name):
		return fmt.Errorf("%w: %s %q is not valid UTF-8", ErrInvalid, what, name)
	case strings.IndexByte(name, 0) >= 0:
		return fmt.Errorf("%w: %s %q holds a NUL byte", ErrInvalid, what, name)
	}
	return nil
}

// job is the scheduler's record of a submitted job.
type job struct {
	key     string
	id      int // the int ID the index-based packages see; submission order
	spec    JobSpec
	arrival float64
	tier    *tier
	pidx    int       // position in the tier's problem; -1 when stale
	raw     []float64 // per scheduler type, with spec.GPUs GPUs
	rates   []float64 // raw, 0 where it cannot fit one server when it must
	class   int       // co-location class, -1 for none
	learn   learnState

	// Accounting from reports.
	attained []float64 // seconds run per scheduler type
	rounds   int
	// unit is the unit the job ran in during the last round, nil if none;
	// lease is the lease that holds its GPUs now, nil if none.
	unit   *unit
	lease  *lease
	mark   uint64  // Report's mark
	ranFor float64 // seconds reported with the mark

	// Fate. own is the job's own unrunnability (NoReason when it can run
	// on the cluster), unrun the same with its gang's (see refreshGang);
	// finished is set when a report counts known remaining steps down to
	// 0, announced once a Round has listed it; inTier tells whether it is
	// in its tier's list (it takes part in the rounds); wait is why it
	// waited in the last round (ReasonNew before its first).
	own, unrun Reason
	finished   bool
	announced  bool
	inTier     bool
	wait       Reason
	waitRound  uint64 // the epoch of the round wait is for
}

// ratesFor fills the job's rates over the scheduler's types. A type the
// model cannot rate, or rates out of range, gets a rate of 0 (the job does
// not run there) and the first such error is returned. The rates the
// rounds see (rates) are 0 as well on a type no server of which holds a
// SingleServer job (maskRates).
func (s *Scheduler) ratesFor(j *job) error {
	var first error
	j.raw = resize(j.raw, len(s.types))
	for k, t := range s.types {
		j.raw[k] = 0
		if !j.allows(t) {
			continue
		}
		if j.spec.Learn {
			if k < len(j.learn.rates) {
				j.raw[k] = j.learn.rates[k]
			}
			continue
		}
		if j.spec.Model == nil {
			j.raw[k] = j.spec.Throughput[t]
			continue
		}
		key := *j.spec.Model
		if key.ScaleFactor == 0 {
			key.ScaleFactor = j.spec.GPUs
		}
		v, err := s.cfg.Throughput.Throughput(key, t)
		switch {
		case err != nil:
			err = fmt.Errorf("%w: job %q: %w", ErrInvalid, j.key, err)
		case !allocation.ValidRate(v):
			err = fmt.Errorf("%w: job %q: the model gives a rate of %v on %s (want 0, or %g to %g steps/s)",
				ErrInvalid, j.key, v, t, allocation.MinRate, allocation.MaxRate)
		}
		if err != nil {
			if first == nil {
				first = err
			}
			continue
		}
		j.raw[k] = v
	}
	j.rates = resize(j.rates, len(s.types))
	s.maskRates(j)
	return first
}

// maskRates sets the rates the rounds see from the job's own: 0 on a type
// where a SingleServer job is larger than every server (it would have to
// spread). It reports whether they changed. O(types).
func (s *Scheduler) maskRates(j *job) bool {
	changed := false
	for k, t := range s.types {
		v := j.raw[k]
		if j.spec.SingleServer && j.spec.GPUs > s.st.LargestServer(t) {
			v = 0
		}
		if j.rates[k] != v {
			j.rates[k], changed = v, true
		}
	}
	return changed
}

func resize[T any](s []T, n int) []T {
	if cap(s) >= n {
		return s[:n]
	}
	return make([]T, n)
}
