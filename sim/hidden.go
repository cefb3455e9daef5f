package sim

import (
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/gpusched/gpusched/allocation"
	"github.com/gpusched/gpusched/perfmodel"
	"github.com/gpusched/gpusched/perfmodel/learn"
	"github.com/gpusched/gpusched/scheduler"
	"github.com/gpusched/gpusched/topology"
)

// Hidden runs a simulation with the truth hidden from the policies
// (issue #41): the simulator's model (Config.Throughput) drives the jobs'
// progress, made noisy per window, with a warm-up after every start or
// restart and, optionally, a bias between the model (what a profile says)
// and the truth (what the jobs really do); the policies see only what
// Rates says. The four settings of Rates on one trace, truth and seed
// compare learning with the oracle, a model and no knowledge, side by
// side: every one runs the same truth. A plain value, safe for
// concurrent reads.
type Hidden struct {
	// Rates is what the policies see (RatesLearned by default).
	Rates Rates
	// Model gives the rates of RatesModel (a spec model, perfmodel/hw, or
	// a profile), and with KindPrior the learner's table prior.
	Model perfmodel.ThroughputModel
	// KindPrior tells the estimator each job's kind (its model key), so
	// that its prior on a type it has not run on is the Model's rate moved
	// to the job's level (learn.JobInfo.Kind); otherwise it starts from
	// nothing but what other jobs measured.
	KindPrior bool
	// Groups makes the jobs of one kind (Gavel's model and batch size) and
	// GPU count runs of one program (scheduler.JobSpec.Group, a name the
	// simulator makes from the kind, as a controller would from an image
	// and command): a job starts from what the earlier runs of its kind
	// measured, not from its table rate (which only KindPrior gives).
	Groups bool
	// Estimator learns the rates of RatesLearned; nil means a new
	// learn.Learner with the defaults (and Model as its table).
	Estimator learn.Estimator
	// Explore bounds the scheduler's exploration (scheduler.Explore).
	Explore scheduler.Explore
	// Window is the period of a job's progress reports, in seconds (0
	// means learn.DefaultWindow, 60 s; else 1 s to the round).
	Window float64
	// Noise is the standard deviation of a window's log rate around the
	// truth (0 means 0.05; negative: none), mean-preserving; a function of
	// Seed, the job and the window's time, the same in every setting.
	Noise float64
	// Warmup is the time a job makes no progress after each start or
	// restart (a checkpoint restored, a compilation): 0 means 30 s;
	// negative: none; less than the round.
	Warmup float64
	// Bias, when its bounds are above 1, makes the truth slower than the
	// model by a factor drawn per job and type uniformly in [Bias[0],
	// Bias[1]] (Sia's profiles were 1.2 to 1.8 times too optimistic);
	// RatesOracle sees the truth, RatesModel the model.
	Bias [2]float64
	// Seed seeds the noise and the bias.
	Seed uint64
	// Misreport, if set, gives the factor by which a job (by ID) scales
	// the steps it reports on a type (1: the truth): a tenant that
	// inflates, deflates or sandbags a type. It moves only what the
	// estimator sees, never the job's real progress. Factors must be
	// above 0.
	Misreport func(job int, t topology.GPUType) float64
}

// Rates says what the policies of a Hidden simulation see. Its values are
// constants, safe for concurrent use.
type Rates uint8

const (
	// RatesLearned: each job's rates are learned from its progress
	// (scheduler.JobSpec.Learn).
	RatesLearned Rates = iota
	// RatesOracle: the truth (every rate known).
	RatesOracle
	// RatesModel: Hidden.Model's rates (a spec model, a profile).
	RatesModel
	// RatesAgnostic: the same rate on every type the job can run on.
	RatesAgnostic
)

var ratesNames = [...]string{"learned", "oracle", "model", "agnostic"}

// String names the setting.
func (r Rates) String() string {
	if int(r) < len(ratesNames) {
		return ratesNames[r]
	}
	return fmt.Sprintf("Rates(%d)", uint8(r))
}

// hiddenState is the engine's part of a Hidden simulation.
type hiddenState struct {
	cfg    Hidden
	rng    *rand.Rand
	window float64
	noise  float64
	warmup float64
	// steps are each job's cumulative steps (its global step, as a
	// training loop counts them), by key.
	steps map[string]float64
	// noiseRand draws from noisePCG, seeded again for each window.
	noisePCG  rand.PCG
	noiseRand *rand.Rand
}

func (h *Hidden) check(types []topology.GPUType, length float64) error {
	switch {
	case h.Rates > RatesAgnostic:
		return invalid("Hidden.Rates %d", h.Rates)
	case h.Rates == RatesModel && h.Model == nil:
		return invalid("Hidden.Rates is model but Hidden.Model is nil")
	case h.KindPrior && h.Model == nil && h.Estimator == nil:
		return invalid("Hidden.KindPrior without a Hidden.Model for the estimator's table")
	case !(h.Window == 0 || h.Window >= 1 && h.Window <= length):
		return invalid("Hidden.Window %v s (want 0 for the default, or 1 s to the round, %v s)", h.Window, length)
	case math.IsNaN(h.Noise) || h.Noise > 2:
		return invalid("Hidden.Noise %v (want at most 2)", h.Noise)
	case math.IsNaN(h.Warmup) || h.Warmup >= length:
		return invalid("Hidden.Warmup %v s (want less than the round, %v s: a warm-up that takes whole rounds stalls every job)", h.Warmup, length)
	case h.Bias != [2]float64{} && !(h.Bias[0] >= 1 && h.Bias[1] >= h.Bias[0] && h.Bias[1] <= 100):
		return invalid("Hidden.Bias %v (want 1 <= low <= high <= 100)", h.Bias)
	}
	return nil
}

// newHidden prepares a Hidden simulation: its defaults, its random
// source and its estimator.
func newHidden(h Hidden, types []topology.GPUType, length float64) (*hiddenState, error) {
	if err := h.check(types, length); err != nil {
		return nil, err
	}
	hs := &hiddenState{cfg: h, rng: rand.New(rand.NewPCG(h.Seed, 0x6869646465)), steps: map[string]float64{}}
	hs.noiseRand = rand.New(&hs.noisePCG)
	hs.window = h.Window
	if hs.window == 0 {
		hs.window = min(learn.DefaultWindow, length)
	}
	hs.noise = h.Noise
	switch {
	case hs.noise == 0:
		hs.noise = 0.05
	case hs.noise < 0:
		hs.noise = 0
	}
	hs.warmup = h.Warmup
	switch {
	case hs.warmup == 0:
		hs.warmup = 30
	case hs.warmup < 0:
		hs.warmup = 0
	}
	if h.Rates == RatesLearned && hs.cfg.Estimator == nil {
		l, err := learn.New(learn.Config{Types: types, Model: h.Model})
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
		}
		hs.cfg.Estimator = l
	}
	return hs, nil
}

// noiseAt is the noise factor of a job's window that starts at time at:
// lognormal of mean 1 and log sigma Noise, drawn from a PCG seeded by the
// seed, the job and the window's index on the clock alone, so that every
// setting of Rates on one seed runs the same noise for a job wherever it
// runs then.
func (hs *hiddenState) noiseAt(job int, at float64) float64 {
	if hs.noise == 0 {
		return 1
	}
	hs.noisePCG.Seed(hs.cfg.Seed^uint64(int64(job)), uint64(int64(math.Floor(at/hs.window))))
	z := hs.noiseRand.NormFloat64()
	return math.Exp(hs.noise*z - hs.noise*hs.noise/2)
}

// truth biases a job's model rates into its true ones (Hidden.Bias),
// in place.
func (hs *hiddenState) truth(tput []float64) {
	lo, hi := hs.cfg.Bias[0], hs.cfg.Bias[1]
	if lo == 0 {
		return
	}
	for k, v := range tput {
		if v > 0 {
			tput[k] = max(v/(lo+(hi-lo)*hs.rng.Float64()), allocation.MinRate)
		}
	}
}

// spec is what the scheduler is told of a job: its true rates are
// r.tput, on the engine's types.
func (hs *hiddenState) spec(e *roundEngine, r *running, spec scheduler.JobSpec) (scheduler.JobSpec, error) {
	spec.Model = nil
	switch hs.cfg.Rates {
	case RatesOracle:
		spec.Throughput = e.ratesMap(r.tput, func(_ int, v float64) float64 { return v })
	case RatesAgnostic:
		spec.Throughput = e.ratesMap(r.tput, func(int, float64) float64 { return 1 })
	case RatesModel:
		var err error
		spec.Throughput = e.ratesMap(r.tput, func(k int, _ float64) float64 {
			v, merr := hs.cfg.Model.Throughput(r.rec.Key, e.cfg.Types[k])
			switch {
			case merr != nil && err == nil:
				err = fmt.Errorf("sim: job %d: Hidden.Model: %w", r.rec.ID, merr)
			case merr == nil && allocation.ValidRate(v) && v > 0:
				return v
			}
			return 1 // the model cannot rate it: type-agnostic there
		})
		if err != nil {
			return spec, err
		}
	default:
		spec.Learn = true
		// The tenant declares the job's work, in its steps, for the
		// conservation audit (its reports, Misreport's too, must add up).
		spec.TotalSteps = min(r.remaining, learn.MaxSteps)
		for k, v := range r.tput {
			if v > 0 {
				spec.Types = append(spec.Types, e.cfg.Types[k])
			}
		}
		if hs.cfg.KindPrior {
			key := r.rec.Key
			spec.Model = &key
		}
		if hs.cfg.Groups {
			spec.Group = r.rec.Key.WithScaleFactor(spec.GPUs).Name()
		}
	}
	return spec, nil
}

// ratesMap maps the job's true rates, where above 0, through f.
func (e *roundEngine) ratesMap(tput []float64, f func(k int, v float64) float64) map[topology.GPUType]float64 {
	m := make(map[topology.GPUType]float64, len(tput))
	for k, v := range tput {
		if v > 0 {
			m[e.cfg.Types[k]] = f(k, v)
		}
	}
	return m
}

// run runs a job alone on type typ (true rate rate) for at most the
// round, from start: no progress during the warm-up of a new run (kept
// false), then window after window at the rate times a lognormal noise of
// mean 1, reporting its cumulative steps to the scheduler at the run's
// start and at the end of every window when it learns. It returns the
// steps made and the time they took (the round, or less if the job
// finished).
func (hs *hiddenState) run(e *roundEngine, rj *running, rate float64, typ topology.GPUType, kept bool, start float64) (steps, d float64, err error) {
	learned := hs.cfg.Rates == RatesLearned
	total := hs.steps[rj.key]
	lie := 1.0
	if hs.cfg.Misreport != nil {
		if lie = hs.cfg.Misreport(rj.rec.ID, typ); !(lie > 0 && lie < math.Inf(1)) {
			return 0, 0, invalid("Hidden.Misreport: job %d: factor %v (want above 0)", rj.rec.ID, lie)
		}
	}
	report := func(at float64) error {
		if !learned {
			return nil
		}
		if err := e.sched.Progress(rj.key, min(total*lie, learn.MaxSteps), at); err != nil {
			return fmt.Errorf("sim: job %d: progress: %w", rj.rec.ID, err)
		}
		return nil
	}
	if err := report(start); err != nil {
		return 0, 0, err
	}
	t := 0.0
	if !kept {
		t = min(hs.warmup, e.length)
	}
	// Windows end at whole multiples of the window from the round's
	// start (by index: a remainder of floats could round to no step).
	for k := math.Floor(t / hs.window); t < e.length && steps < rj.remaining; k++ {
		end := min((k+1)*hs.window, e.length)
		if end <= t {
			continue
		}
		w := end - t
		r := rate * hs.noiseAt(rj.rec.ID, start+t)
		n := r * w
		if steps+n >= rj.remaining {
			w = (rj.remaining - steps) / r
			n = rj.remaining - steps
		}
		steps += n
		total += n
		t += w
		if err := report(start + t); err != nil {
			return 0, 0, err
		}
	}
	hs.steps[rj.key] = total
	return steps, t, nil
}
