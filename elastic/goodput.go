package elastic

import (
	"context"
	"fmt"
	"math"

	"gonum.org/v1/gonum/optimize"
)

// PerfParams is Pollux's model of the time of one training step (Qiao et
// al., "Pollux: Co-adaptive Cluster Scheduling for Goodput-Optimized Deep
// Learning", OSDI 2021, section 3.2, eq. 10 to 12): a micro-batch of m
// samples per GPU computes in AlphaC + BetaC m; gradient synchronisation
// over r replicas takes AlphaN + BetaN max(r - 2, 0) across nodes, or
// AlphaR + BetaR max(r - 2, 0) within one node (none on one replica); the
// last micro-batch's computation and the synchronisation overlap as
// (T_grad^Gamma + T_sync^Gamma)^(1/Gamma), Gamma in [1, 10]. It is a
// plain value, safe for concurrent use.
type PerfParams struct {
	AlphaC, BetaC, AlphaN, BetaN, AlphaR, BetaR, Gamma float64
}

// ComputeTime is the time of one micro-batch of atomic samples per GPU.
func (p PerfParams) ComputeTime(atomic float64) float64 { return p.AlphaC + p.BetaC*atomic }

// SyncTime is the gradient synchronisation time.
func (p PerfParams) SyncTime(nodes, replicas int) float64 {
	x := math.Max(float64(replicas-2), 0)
	switch {
	case nodes > 1:
		return p.AlphaN + p.BetaN*x
	case replicas > 1:
		return p.AlphaR + p.BetaR*x
	}
	return 0
}

// StepTime is the time of one step: accum micro-batches of atomic samples
// that only compute, then one that overlaps with synchronisation.
func (p PerfParams) StepTime(nodes, replicas int, atomic float64, accum int) float64 {
	c, s := p.ComputeTime(atomic), p.SyncTime(nodes, replicas)
	g := p.Gamma
	var last float64
	if s == 0 {
		last = c
	} else {
		last = math.Pow(math.Pow(c, g)+math.Pow(s, g), 1/g)
	}
	return float64(accum)*c + last
}

// PerfSample is a measured step: the placement, the micro-batch, the
// computation time of a micro-batch and the time of the whole step
// (computation plus synchronisation), in seconds. It is a plain value,
// safe for concurrent use.
type PerfSample struct {
	Nodes, Replicas       int
	Atomic                float64
	ComputeTime, StepTime float64
}

// FitPerfParams fits PerfParams to measured steps as Pollux does (OSDI
// 2021, section 3.2; adaptdl's fit_perf_params): it minimises the root
// mean squared log error of the computation time plus that of the step
// time, with penalties 1e-3 (Gamma - 1)^2 and 1e-2 ((BetaN / AlphaN)^2 +
// (BetaR / AlphaR)^2), the parameters kept positive and Gamma in [1, 10]
// (Nelder-Mead from gonum over a log and logistic reparametrisation,
// restarted from its best point). Parameters the samples cannot determine
// are pinned as Pollux pins them: the network terms with no multi-node
// samples, the single-node terms with no single-node multi-replica
// samples, both slopes with no sample above 2 replicas, AlphaC to half the
// mean computation time with a single micro-batch size. The fit runs up to
// 80,000 evaluations of the loss, each linear in the samples (0.2 s for 36
// samples, BenchmarkFitPerfParams); a cancelled ctx stops it with ctx's
// error.
func FitPerfParams(ctx context.Context, samples []PerfSample) (PerfParams, error) {
	if err := ctx.Err(); err != nil {
		return PerfParams{}, err
	}
	if len(samples) == 0 {
		return PerfParams{}, fmt.Errorf("%w: no samples", ErrFitFailed)
	}
	var multiNode, singleMulti, above2, oneBatch = false, false, false, true
	meanC := 0.0
	for i, s := range samples {
		if s.Nodes < 1 || s.Replicas < s.Nodes || !(s.Atomic > 0) || !(s.ComputeTime > 0) || !(s.StepTime > 0) ||
			math.IsInf(s.Atomic+s.ComputeTime+s.StepTime, 0) {
			return PerfParams{}, fmt.Errorf("%w: sample %d: %+v", ErrInvalid, i, s)
		}
		multiNode = multiNode || s.Nodes > 1
		singleMulti = singleMulti || s.Nodes == 1 && s.Replicas > 1
		above2 = above2 || s.Replicas > 2
		oneBatch = oneBatch && s.Atomic == samples[0].Atomic
		meanC += s.ComputeTime
	}
	meanC /= float64(len(samples))
	const tiny = 1e-8
	// x holds log(alpha_c, beta_c, alpha_n, beta_n, alpha_r, beta_r) and
	// the logit of (gamma - 1) / 9.
	decode := func(x []float64) PerfParams {
		p := PerfParams{math.Exp(x[0]), math.Exp(x[1]), math.Exp(x[2]), math.Exp(x[3]), math.Exp(x[4]), math.Exp(x[5]), 1 + 9/(1+math.Exp(-x[6]))}
		if oneBatch {
			p.AlphaC = meanC / 2
		}
		if !multiNode {
			p.AlphaN, p.BetaN = tiny, tiny
		}
		if !singleMulti {
			p.AlphaR, p.BetaR = tiny, tiny
		}
		if !above2 {
			p.BetaN, p.BetaR = tiny, tiny
		}
		return p
	}
	loss := func(x []float64) float64 {
		p := decode(x)
		var ec, es float64
		for _, s := range samples {
			dc := math.Log(p.ComputeTime(s.Atomic)) - math.Log(s.ComputeTime)
			ds := math.Log(p.StepTime(s.Nodes, s.Replicas, s.Atomic, 0)) - math.Log(s.StepTime)
			ec += dc * dc
			es += ds * ds
		}
		n := float64(len(samples))
		l := math.Sqrt(ec/n) + math.Sqrt(es/n) + 1e-3*(p.Gamma-1)*(p.Gamma-1) +
			1e-2*(p.BetaN/p.AlphaN*p.BetaN/p.AlphaN+p.BetaR/p.AlphaR*p.BetaR/p.AlphaR)
		if math.IsNaN(l) {
			return math.Inf(1)
		}
		return l
	}
	x := []float64{math.Log(0.1), math.Log(0.01), math.Log(0.1), math.Log(0.01), math.Log(0.1), math.Log(0.01), math.Log(0.001 / 8.999)}
	best := math.Inf(1)
	for range 4 {
		settings := &optimize.Settings{MajorIterations: 4000, FuncEvaluations: 20000, Recorder: ctxRecorder{ctx}}
		res, err := optimize.Minimize(optimize.Problem{Func: loss}, x, settings, &optimize.NelderMead{})
		if ctx.Err() != nil {
			return PerfParams{}, ctx.Err()
		}
		if res == nil || err != nil && res.F >= best {
			break
		}
		if res.F >= best-1e-9 {
			x = res.X
			break
		}
		best, x = res.F, res.X
	}
	if math.IsInf(best, 0) {
		return PerfParams{}, fmt.Errorf("%w: the step-time loss has no finite value", ErrFitFailed)
	}
	return decode(x), nil
}

// ctxRecorder stops gonum's optimiser when ctx is done.
type ctxRecorder struct{ ctx context.Context }

func (r ctxRecorder) Init() error { return r.ctx.Err() }

func (r ctxRecorder) Record(*optimize.Location, optimize.Operation, *optimize.Stats) error {
	return r.ctx.Err()
}

// GradStats are a job's gradient statistics at a point of its training:
// the squared norm of the true gradient and the variance of a one-sample
// estimate, measured at the initial batch size (Pollux's grad_sqr and
// grad_var). It is a plain value, safe for concurrent use.
type GradStats struct{ Sqr, Var float64 }

// Efficiency is Pollux's statistical efficiency of batch size batch
// relative to the initial batch size init (OSDI 2021, section 3.1, eq. 7,
// with the gradient noise scale phi = Var / Sqr): the progress a step of
// batch makes, in steps of init, divided by batch / init. It is 1 at init
// and falls towards init / batch as the noise becomes negligible.
func (g GradStats) Efficiency(init, batch float64) float64 {
	scale := batch / init
	den := g.Var/scale + g.Sqr
	if !(den > 0) || scale <= 0 {
		return 1
	}
	return (g.Var + g.Sqr) / den / scale
}

// Goodput is one application's goodput model (Pollux, section 3): its
// step-time parameters, its batch-size limits, and its gradient statistics
// now. Goodput is progress, in steps of InitBatch, per second. Its methods
// only read it: it is safe for concurrent use.
type Goodput struct {
	Perf                 PerfParams
	Grad                 GradStats
	InitBatch, MaxBatch  float64
	MinAtomic, MaxAtomic float64
	// Accumulation allows gradient accumulation (more than one micro-batch
	// per step) to reach larger batches on few GPUs.
	Accumulation bool
}

// Config is a batch configuration: the global batch, the micro-batch per
// GPU, and the accumulation steps beyond the first micro-batch. It is a
// plain value, safe for concurrent use.
type Config struct {
	Batch, Atomic float64
	Accum         int
}

// Rate returns the goodput of a configuration on nodes and replicas:
// (batch / step time) x efficiency / InitBatch. It is 0 unless
// 1 <= nodes <= replicas (no placement: a negative count used to get a
// rate).
func (g *Goodput) Rate(nodes, replicas int, c Config) float64 {
	if nodes < 1 || replicas < nodes {
		return 0
	}
	t := g.Perf.StepTime(nodes, replicas, c.Atomic, c.Accum)
	if !(t > 0) {
		return 0
	}
	return c.Batch / t * g.Grad.Efficiency(g.InitBatch, c.Batch) / g.InitBatch
}

// FixedBatch returns the configuration that runs a fixed global batch on
// replicas GPUs, as the Pollux artifact's non-adaptive jobs do: the
// smallest accumulation that keeps the micro-batch within MaxAtomic (at
// least one on a single GPU above the initial batch), the micro-batch
// capped so the batch stays within MaxBatch. It is the zero Config for
// fewer than one replica.
func (g *Goodput) FixedBatch(replicas int, batch float64) Config {
	if replicas < 1 {
		return Config{}
	}
	r := float64(replicas)
	local := math.Ceil(batch/r - 1e-8)
	accum := 0
	if g.Accumulation || replicas == 1 {
		accum = max(0, int(math.Ceil(local/g.MaxAtomic-1e-8))-1)
	}
	if replicas == 1 && batch > g.InitBatch && g.Accumulation {
		accum = max(1, accum)
	}
	atomic := math.Ceil(local/float64(accum+1) - 1e-8)
	atomic = math.Min(atomic, math.Floor(g.MaxBatch/(r*float64(accum+1))))
	atomic = math.Max(atomic, 1)
	return Config{Batch: r * atomic * float64(accum+1), Atomic: atomic, Accum: accum}
}

// Candidates returns the batch configurations adaptdl's optimize
// considers on replicas GPUs: 50 batch sizes spaced geometrically from
// max(InitBatch, MinAtomic x replicas) to MaxBatch (only the first when it
// is not below MaxBatch), each with the least accumulation that keeps the
// micro-batch within MaxAtomic (at least one accumulation step on a single
// GPU above the initial batch), dropping those whose micro-batch falls
// outside [MinAtomic, MaxAtomic]. A configuration's Batch is the batch
// it runs, replicas x Atomic x (Accum + 1). There are none for fewer than
// one replica.
func (g *Goodput) Candidates(replicas int) []Config {
	if replicas < 1 {
		return nil
	}
	r := float64(replicas)
	lo := math.Max(g.InitBatch, g.MinAtomic*r)
	steps := 50
	if lo >= g.MaxBatch {
		steps = 1 // only the smallest batch these replicas can run
	}
	out := make([]Config, 0, steps)
	for i := 0; i < steps; i++ {
		b := lo
		if steps > 1 {
			b = lo * math.Pow(g.MaxBatch/lo, float64(i)/float64(steps-1))
		}
		local := b / r
		accum := 0
		if g.Accumulation {
			accum = int(math.Ceil(local/g.MaxAtomic-1e-8)) - 1
			if replicas == 1 && local > g.InitBatch+1e-8 {
				accum = max(accum, 1)
			}
			accum = max(accum, 0)
		}
		atomic := math.Ceil(local/float64(accum+1) - 1e-8)
		if atomic < g.MinAtomic || atomic > g.MaxAtomic {
			continue
		}
		// The batch the job runs: whole micro-batches on every replica.
		out = append(out, Config{Batch: r * atomic * float64(accum+1), Atomic: atomic, Accum: accum})
	}
	return out
}

// Best returns the candidate configuration (Candidates) of the highest
// goodput on nodes and replicas under the model's gradient statistics;
// the last result is false when no candidate is feasible.
func (g *Goodput) Best(nodes, replicas int) (Config, float64, bool) {
	var best Config
	bestRate, ok := 0.0, false
	for _, c := range g.Candidates(replicas) {
		if rate := g.Rate(nodes, replicas, c); rate > bestRate {
			best, bestRate, ok = c, rate, true
		}
	}
	return best, bestRate, ok
}
