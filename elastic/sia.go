package elastic

import (
	"cmp"
	"context"
	"fmt"
	"math"
)

// Sia is Sia's scheduling policy (Jayaram Subramanya, Arfeen, Lin, Qiao,
// Jia and Ganger, "Sia: Heterogeneity-aware, goodput-optimized ML-cluster
// scheduling", SOSP 2023, section 3) for elastic jobs on a heterogeneous
// cluster. Every round:
//
//   - Configurations (section 3.2): on a pool of N nodes of R GPUs, the
//     single-node counts 1, 2, 4, ... up to R (R itself when it is not a
//     power of two) and the multi-node counts 2R, 3R, ..., NR (whole
//     nodes); a job may take those whose GPUs are whole workers within its
//     bounds, and, with the scale-up rule (section 3.1: start on the
//     fewest GPUs, grow at most 2x a round), at most Growth times the most
//     workers it has held on any pool (State.Seen; its base demand until
//     it has run).
//   - Goodput estimates per configuration (section 3.1, "Bootstrapping of
//     throughput models"): a job's curve on each pool (Job.On) is its
//     goodput model there. Sia profiles each job on its smallest
//     configuration of every type, so that value is known at once; for a
//     larger configuration on pool A it uses A's model once the job has
//     run on several GPUs of A (Seen[A] > 1), else, if it has on another
//     pool B, goodput(n, A) = goodput(min, A) / goodput(min, B) x
//     goodput(n, B) (the scaling of B projected onto A), else linear
//     scaling from the smallest configuration ("assumes throughput will
//     double"). Oracle uses every pool's model from the start (as our
//     Pollux-style policy does); so does a State without Seen.
//   - The normalised goodput matrix G (section 3.3, Table 1): each job's
//     row divided by its smallest entry and multiplied by its base demand
//     in GPUs, so that its least useful configuration is worth its minimum
//     number of GPUs.
//   - The restart factor (eq. 2): for a running job, every configuration
//     other than its current one is scaled by r = max(T - N S, 0) / (T +
//     S), T its age, N its restarts, S the job's RestartCost or else
//     RestartPenalty; r = 1 while T < S (the artifact's rule: no penalty
//     before a job could have paid one).
//   - The integer program (eq. 1, with G^p for fairness): at most one
//     configuration per job, each pool's GPUs respected, maximising the
//     sum over the jobs of sign(p) G_ij^p for a configuration chosen and
//     -Lambda for a job left without one (Lambda > 1 makes every job worth
//     allocating when p < 0, as G^p <= 1 there). It is solved exactly by
//     SolveChoice (branch and bound on the LP relaxation, to a relative gap
//     of Gap: Sia's artifact stops CBC at 1e-4).
//
// Sia's defaults are P = -0.5 and Lambda = 1.1 (section 4.3; the
// artifact's simulator_config.py), restart penalties of 25 to 250 s per
// model (we take one, RestartPenalty, default 30 s) and the 2x scale-up
// rule. The artifact rounds G^p to two decimals and clips it at 3,000; we
// do not. Placement is the simulator's (packed on whole nodes first,
// which satisfies Sia's placement rules for these configurations).
//
// It holds no state and is safe for concurrent use (with curves that
// are).
type Sia struct {
	// P is the fairness power, not 0 (0 means -0.5).
	P float64
	// Lambda is the penalty for a job left without GPUs (0 means 1.1).
	Lambda float64
	// RestartPenalty is S of eq. 2 in seconds for jobs without a
	// RestartCost (0 means 30; negative turns the restart factor off).
	RestartPenalty float64
	// Growth bounds a job's workers at Growth times the most it has held
	// (0 means 2; negative turns the rule off).
	Growth float64
	// Oracle estimates with every pool's model from the start (no
	// bootstrapping).
	Oracle bool
	// Gap is the integer program's relative optimality gap (0 means 1e-4,
	// the artifact's CBC setting), MaxNodes its node limit (0 means
	// DefaultChoiceNodes; the best answer found is used beyond it).
	Gap      float64
	MaxNodes int
}

// siaSettings are a Sia's settings with the defaults in.
type siaSettings struct {
	p, lambda, penalty, growth, gap float64
}

func (s Sia) settings() (siaSettings, error) {
	// A zero setting takes its default (cmp.Or: the first non-zero).
	c := siaSettings{p: cmp.Or(s.P, -0.5), lambda: cmp.Or(s.Lambda, 1.1), penalty: cmp.Or(s.RestartPenalty, 30),
		growth: cmp.Or(s.Growth, 2), gap: cmp.Or(s.Gap, 1e-4)}
	for _, v := range []float64{c.p, c.lambda, c.penalty, c.growth, c.gap} {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return c, fmt.Errorf("%w: Sia settings %+v", ErrInvalid, s)
		}
	}
	if c.lambda < 0 || c.gap < 0 || c.growth > 0 && c.growth < 1 || s.MaxNodes < 0 {
		return c, fmt.Errorf("%w: Sia settings %+v (want Lambda >= 0, Gap >= 0, Growth >= 1 or negative, MaxNodes >= 0)", ErrInvalid, s)
	}
	return c, nil
}

// SiaConfig is one of Sia's configurations (section 3.2): GPUs GPUs of
// pool Pool on Nodes nodes. It is a plain value, safe for concurrent use.
type SiaConfig struct {
	Pool, Nodes, GPUs int
}

// SiaConfigs returns Sia's configuration set of a cluster (section 3.2):
// per pool of N nodes of R GPUs, (1, 1), (1, 2), (1, 4), ... up to (1, R),
// then (2, 2R), ..., (N, NR).
func SiaConfigs(pools []Pool) []SiaConfig {
	var out []SiaConfig
	for k, p := range pools {
		if p.Nodes < 1 {
			continue
		}
		for g := 1; g < p.GPUsPerNode; g *= 2 {
			out = append(out, SiaConfig{k, 1, g})
		}
		out = append(out, SiaConfig{k, 1, p.GPUsPerNode})
		for n := 2; n <= p.Nodes; n++ {
			out = append(out, SiaConfig{k, n, n * p.GPUsPerNode})
		}
	}
	return out
}

// AllocateTyped implements TypedPolicy.
func (s Sia) AllocateTyped(jobs []State, pools []Pool) ([]Assignment, error) {
	return s.allocate(context.Background(), jobs, pools)
}

func (s Sia) allocate(ctx context.Context, jobs []State, pools []Pool) ([]Assignment, error) {
	prob, owner, err := s.Program(jobs, pools)
	if err != nil {
		return nil, err
	}
	c, _ := s.settings()
	choice, _, err := SolveChoice(ctx, prob, s.MaxNodes, c.gap)
	if err != nil {
		return nil, err
	}
	out := make([]Assignment, len(jobs))
	for i, o := range choice {
		if o >= 0 {
			cf := owner[i][o]
			out[i] = Assignment{Pool: cf.Pool, Workers: cf.GPUs / jobs[i].GPUsPerWorker}
		}
	}
	return out, nil
}

// Program returns the integer program Sia solves for these jobs on these
// pools (for inspection, or for another solver): one group per job, its
// options' values sign(p) G^p + Lambda, and the configuration of each
// option.
func (s Sia) Program(jobs []State, pools []Pool) (*ChoiceProblem, [][]SiaConfig, error) {
	c, err := s.settings()
	if err != nil {
		return nil, nil, err
	}
	if err := validateTyped(jobs, pools); err != nil {
		return nil, nil, err
	}
	configs := SiaConfigs(pools)
	prob := &ChoiceProblem{Capacity: make([]int, len(pools)), Groups: make([][]Option, len(jobs))}
	for k, p := range pools {
		prob.Capacity[k] = p.GPUs()
	}
	owner := make([][]SiaConfig, len(jobs)) // the configuration of each option
	total := 0
	for i := range jobs {
		prob.Groups[i], owner[i] = s.options(&jobs[i], configs, c)
		if total += len(owner[i]); total > MaxChoiceOptions {
			return nil, nil, fmt.Errorf("%w: Sia's program would have more than %d options (%d jobs so far); bound the jobs' workers", ErrInvalid, MaxChoiceOptions, i+1)
		}
	}
	return prob, owner, nil
}

// options are job s's configurations with their values, sign(p) G^p +
// Lambda (the objective's gain over leaving the job without GPUs).
func (s Sia) options(st *State, configs []SiaConfig, c siaSettings) ([]Option, []SiaConfig) {
	limit := st.MaxWorkers
	if c.growth > 0 {
		held := st.Workers
		for _, n := range st.Seen {
			held = max(held, n)
		}
		if held == 0 {
			limit = st.MinWorkers
		} else {
			limit = min(limit, max(st.MinWorkers, int(math.Floor(c.growth*float64(held)+1e-9))))
		}
	}
	var cfgs []SiaConfig
	var raw []float64
	for i := 0; i < len(configs); i++ {
		cf := configs[i]
		w := cf.GPUs / st.GPUsPerWorker
		if st.On(cf.Pool) == nil || w > limit {
			// The pool's other configurations are no use either (larger,
			// or on a pool the job cannot run on): skip to the next pool.
			for i+1 < len(configs) && configs[i+1].Pool == cf.Pool {
				i++
			}
			continue
		}
		if cf.GPUs%st.GPUsPerWorker != 0 || w < st.MinWorkers {
			continue
		}
		g := s.estimate(st, cf.Pool, w)
		if !(g > 0) || math.IsInf(g, 0) {
			continue // no goodput there: never chosen
		}
		cfgs, raw = append(cfgs, cf), append(raw, g)
	}
	if len(raw) == 0 {
		return nil, nil
	}
	least := math.Inf(1)
	for _, g := range raw {
		least = math.Min(least, g)
	}
	scale := float64(st.MinWorkers*st.GPUsPerWorker) / least
	r, penalty := 1.0, c.penalty
	if st.RestartCost > 0 && penalty > 0 {
		penalty = st.RestartCost // the job's own S_i
	}
	if st.Workers > 0 && penalty > 0 && st.Age >= penalty {
		r = math.Max(st.Age-float64(st.Restarts)*penalty, 0) / (st.Age + penalty)
	}
	opts := make([]Option, len(cfgs))
	for j, cf := range cfgs {
		g := raw[j] * scale
		if st.Workers > 0 && (cf.Pool != st.Pool || cf.GPUs != st.Workers*st.GPUsPerWorker) {
			g *= r
		}
		v := c.lambda
		switch {
		case g <= 0:
			v = math.Inf(-1) // a factor of 0: the job cannot afford the restart
		case c.p < 0:
			v -= math.Pow(g, c.p)
		default:
			v += math.Pow(g, c.p)
		}
		if math.IsInf(v, -1) {
			v = -1 // never chosen
		}
		opts[j] = Option{Pool: cf.Pool, GPUs: cf.GPUs, Value: v}
	}
	return opts, cfgs
}

// estimate is Sia's goodput estimate of the job on w workers of pool k
// (see Sia's bootstrapping).
func (s Sia) estimate(st *State, k, w int) float64 {
	curve := st.On(k)
	if s.Oracle || st.Seen == nil || w <= st.MinWorkers || st.Seen[k] > 1 {
		return curve.Throughput(w)
	}
	// The pool where the job has run on the most workers, if several.
	b := -1
	for p, n := range st.Seen {
		if p != k && n > 1 && st.On(p) != nil && (b < 0 || n > st.Seen[b]) {
			b = p
		}
	}
	least := curve.Throughput(st.MinWorkers)
	if b < 0 {
		return least * float64(w) / float64(st.MinWorkers)
	}
	other := st.On(b)
	return least / other.Throughput(st.MinWorkers) * other.Throughput(w)
}
