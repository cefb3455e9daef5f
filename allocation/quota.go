package allocation

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/gpusched/gpusched/allocation/lp"
	"github.com/gpusched/gpusched/topology"
)

// Quota is an entity's (a tenant's: Job.Entity) guaranteed share of the
// cluster and its limits, heterogeneity-aware: stated per GPU type, in
// GPUs, or as a fraction of every type, and measured in normalised
// throughput. [QuotaFairness] enforces it; the other policies ignore it
// (Problem.Validate checks it for all).
//
// The guarantee is a slice of the cluster, in GPUs of each type k:
//
//	slice_k = max(GuaranteedGPUs[k], GuaranteedShare x Capacity[k]),
//
// at most MaxGPUs[k] where set. An entity with jobs is guaranteed what
// its jobs would get with that slice to themselves (DRF's "sharing
// incentive", Ghodsi et al., NSDI 2011, section 3): each of its jobs at
// least the max-min level of the entity's jobs on the slice alone, and the
// entity in total at least the largest normalised throughput they reach on
// the slice while keeping that level. An entity with no jobs holds nothing:
// its slice is lent to the others, and given back at the next solve in
// which its jobs are present. Guarantees that over-commit a type (the
// slices of the entities with jobs sum to more than its capacity) are
// scaled down in proportion on that type, and the Allocation's Note says
// so; a round never fails for it.
//
// Normalised throughput is Gavel's (Narayanan et al., OSDI 2020, section
// 4.1; max_min_fairness.py): job m's is sf_m x rate_m / T^prop_m, where
// rate_m = sum_k T_mk X_mk and T^prop_m = sum_k T_mk n_k / N is its rate
// with an equal share of every type (the proportional allocation
// X_mk = n_k / N, N = sum_k n_k). Its unit is GPUs of the cluster's
// mix: a job on g GPUs that spends its time across the types in
// proportion to their counts scores g, whatever its rates, so the
// cluster's total under any type-neutral allocation is N, and
// GuaranteedShare 0.25 ("a quarter of the cluster's throughput") is
// worth N/4 to an entity whose jobs fill the slice with the cluster's
// mix (more when its jobs gain from some types, as Gavel's policies make
// them).
//
// A Quota is a plain value: safe for concurrent reads, not for writes
// while others read it.
type Quota struct {
	// GuaranteedGPUs is the entity's reserved GPUs of each type: GPUs,
	// averaged over a round (2.5 is two GPUs and half of a third's
	// time), each in [0, MaxCapacity]. Types not in the problem are
	// ignored (none are there to reserve).
	GuaranteedGPUs map[topology.GPUType]float64
	// GuaranteedShare is the entity's reserved fraction of every type, in
	// [0, 1]: a slice of GuaranteedShare x Capacity[k] GPUs of each type
	// k. With GuaranteedGPUs too, the larger of the two counts per type.
	GuaranteedShare float64
	// MaxGPUs caps the entity's GPUs of each type it names: the GPU-time
	// of its jobs on type k, sum over them of sf_m X_mk (pairs counted
	// once, at their scale factor), at most MaxGPUs[k] GPUs, in [0,
	// MaxCapacity]; at least GuaranteedGPUs[k]. A type it does not name
	// is not capped; 0 keeps the entity off that type.
	MaxGPUs map[topology.GPUType]float64
	// MaxShare caps the entity's normalised throughput at MaxShare x N
	// (N the cluster's GPUs), in [0, 1] and at least GuaranteedShare;
	// 0 means no cap.
	MaxShare float64
}

// Bounds on quotas.
const (
	// MaxEntityQuotas bounds the entities of Problem.EntityQuotas.
	MaxEntityQuotas = 1 << 16
	// MaxQuotaTypes bounds the GPU types a Quota's maps name.
	MaxQuotaTypes = 1 << 10
)

// validateQuotas checks Problem.EntityQuotas: at most MaxEntityQuotas
// entities, and each Quota in range (see Quota), its guarantees within its
// limits. The entities are checked in name order, so that the error names
// the same one every time.
func (p *Problem) validateQuotas() error {
	if len(p.EntityQuotas) == 0 {
		return nil
	}
	if n := len(p.EntityQuotas); n > MaxEntityQuotas {
		return invalid("%d entity quotas, more than %d", n, MaxEntityQuotas)
	}
	names := make([]string, 0, len(p.EntityQuotas))
	for e := range p.EntityQuotas {
		names = append(names, e)
	}
	slices.Sort(names)
	for _, e := range names {
		q := p.EntityQuotas[e]
		if err := q.validate(); err != nil {
			return invalid("entity %q: quota: %s", e, err)
		}
	}
	return nil
}

// validate checks q's ranges and that its guarantees lie within its
// limits.
func (q *Quota) validate() error {
	if !inRange(q.GuaranteedShare, 0, 1) {
		return fmt.Errorf("guaranteed share %v, outside [0, 1]", q.GuaranteedShare)
	}
	if !inRange(q.MaxShare, 0, 1) {
		return fmt.Errorf("maximum share %v, outside [0, 1] (0 means no cap)", q.MaxShare)
	}
	if q.MaxShare > 0 && q.GuaranteedShare > q.MaxShare {
		return fmt.Errorf("guaranteed share %v above its maximum share %v", q.GuaranteedShare, q.MaxShare)
	}
	for _, m := range []struct {
		name string
		gpus map[topology.GPUType]float64
	}{{"guaranteed", q.GuaranteedGPUs}, {"maximum", q.MaxGPUs}} {
		if len(m.gpus) > MaxQuotaTypes {
			return fmt.Errorf("%s GPUs name %d types, more than %d", m.name, len(m.gpus), MaxQuotaTypes)
		}
		for _, t := range sortedTypes(m.gpus) {
			if v := m.gpus[t]; !inRange(v, 0, MaxCapacity) {
				return fmt.Errorf("%s GPUs of %s: %v, outside [0, %d]", m.name, t, v, MaxCapacity)
			}
		}
	}
	for _, t := range sortedTypes(q.GuaranteedGPUs) {
		if hi, ok := q.MaxGPUs[t]; ok && q.GuaranteedGPUs[t] > hi {
			return fmt.Errorf("guaranteed GPUs of %s: %v, above its maximum %v", t, q.GuaranteedGPUs[t], hi)
		}
	}
	return nil
}

// sortedTypes returns the keys of m in order.
func sortedTypes(m map[topology.GPUType]float64) []topology.GPUType {
	out := make([]topology.GPUType, 0, len(m))
	for t := range m {
		out = append(out, t)
	}
	slices.SortFunc(out, func(a, b topology.GPUType) int { return cmp.Compare(a, b) })
	return out
}

// QuotaFairness is heterogeneity-aware max-min fairness subject to the
// entities' quotas (Problem.EntityQuotas; see Quota for what a guarantee
// and a limit mean, and the unit of normalised throughput).
//
// Every solve has two steps.
//
//  1. The guarantee of each entity with jobs and a slice s_e (GPUs of
//     each type, over-commitment scaled down): the entity's jobs alone on
//     the slice, under Gavel's max-min program (Narayanan et al., OSDI
//     2020, section 4.1, equation 1 with scale factors;
//     max_min_fairness.py) with capacities s_e and the entity's limits,
//     give its level L_e = max min_{m in e} r_m / w_m, where
//     r_m = sf_m sum_k T_mk X_mk / T^prop_m is the job's normalised rate;
//     a second program keeps that level and maximises the entity's total
//     normalised throughput, R_e = max sum_{m in e} r_m (the second stage
//     the grouped space-sharing program also uses).
//
//  2. The allocation: over all jobs, Gavel's base constraints (policy.py:
//     get_base_constraints) and, per entity e,
//
//     r_m >= L_e w_m           for every job m of e the slice can run,
//     sum_{m in e} r_m >= R_e  (its guarantee),
//     sum_{m in e} sf_m X_mk <= MaxGPUs_e[k]   (its limit per type),
//     sum_{m in e} r_m <= MaxShare_e N         (its normalised limit),
//
//     maximise the max-min level t <= r_m / w'_m over all jobs (w' the
//     job's weight, or with Hierarchical its share of its entity's weight,
//     as WaterFilling), then, keeping t, the total normalised throughput,
//     so that no GPU a job could use is left idle: a guaranteed slice an
//     entity does not need is lent. With WaterFilling the second part is
//     Gavel's water filling instead (max_min_fairness_water_filling.py;
//     section 4.1, "hierarchical policies"; Radunovic and Le Boudec,
//     "A unified framework for max-min and min-max fairness", IEEE/ACM
//     ToN 15(5), 2007): every job ends at the largest level it can have
//     given those below it, subject to the same rows; a last program
//     keeps every job's rate and maximises the total, which fills GPUs
//     that a stage the solver could not finish left idle.
//
// The rows of step 2 always have a solution, since the slices of the
// entities with jobs fit in the cluster and each slice's own solution
// meets its entity's rows (they are relaxed by a relative 1e-6 for the
// solver's tolerance): guarantees are met whenever the entity has jobs
// that can run on its slice, and idle capacity of an entity without jobs
// goes to the others, to be given back at the next solve that sees its
// jobs (at the next round when Rounds.MinResetInterval is negative or at
// most a round). Should the solver still fail, each entity gets its
// slice's own allocation, the others nothing, and the Note says so; so do
// over-committed guarantees, scaled down. Limits hold exactly (the answer
// is scaled back onto them after the solver's residues).
//
// Inputs it trusts: throughputs only through their ratios (T_mk /
// T^prop_m), job and entity weights, the quotas; it reads no remaining
// work, deadline or attained service. Space sharing is not supported
// (Problem.Pairs is ignored).
//
// It holds no state: one value is safe for concurrent use by several
// goroutines (with a Solver set, as safe as the Solver; lp.InteriorPoint
// is). The Allocation's Objective is the (first) max-min level.
type QuotaFairness struct {
	// WaterFilling iterates max-min to the end (see WaterFilling) instead
	// of one level and a total.
	WaterFilling bool
	// Hierarchical weights a job by its share of its entity's weight
	// (Problem.EntityWeights, 1 if absent), shared by Within[entity]
	// (EntityFairness by default), as WaterFilling does; without it, by
	// Job.Weight. Guarantees always share the slice by Job.Weight.
	Hierarchical bool
	Within       map[string]Reweighting
	// PerEntity, with WaterFilling and Hierarchical, water-fills the
	// entities' levels rather than the jobs' (WaterFilling.PerEntity).
	PerEntity bool
	// BottleneckTolerance is WaterFilling's (0 means 1e-6).
	BottleneckTolerance float64
	// Solver solves the LPs; nil means lp.InteriorPoint. With
	// WaterFilling it must give the centre of each optimal face, as
	// WaterFilling's bottlenecks need (lp.InteriorPoint does; a vertex,
	// such as CLP's, freezes jobs too early).
	Solver lp.Solver
}

// quotaSlack is the relative slack of the guarantee rows: the slices' own
// solutions meet them although the solver leaves residues of its
// tolerance.
const quotaSlack = 1e-6

// Allocate implements Policy.
func (pol *QuotaFairness) Allocate(ctx context.Context, p *Problem) (a *Allocation, err error) {
	ctx, lps := trackLP(ctx)
	defer func() {
		lps.attach(a)
		err = policyError("quota fairness", p, err)
	}()
	if err := p.Validate(); err != nil {
		return nil, err
	}
	if r := reduceFor(p, pol.Within); r != nil {
		a, err := pol.allocate(ctx, r.p)
		if err != nil {
			return nil, err
		}
		return r.expand(p, a), nil
	}
	return pol.allocate(ctx, p)
}

// allocate solves a valid problem (reduced or not).
func (pol *QuotaFairness) allocate(ctx context.Context, p *Problem) (a *Allocation, err error) {
	pl := newQuotaPlan(p)
	s := lpSolver(pol.Solver, false)
	if err := pl.guarantee(ctx, s); err != nil {
		return nil, err
	}
	if pol.WaterFilling {
		wf := &WaterFilling{Hierarchical: pol.Hierarchical, Within: pol.Within, PerEntity: pol.PerEntity, BottleneckTolerance: pol.BottleneckTolerance, Solver: s}
		if a, err = wf.fill(ctx, p, pl.addRows); err == nil {
			a, err = pl.fillIdle(ctx, s, a)
		}
	} else {
		a, err = pol.maxMin(ctx, pl, s)
	}
	if err != nil {
		if ctx.Err() != nil {
			return nil, err
		}
		a = pl.fallback()
		pl.notes = append(pl.notes, fmt.Sprintf("the quota program failed (%v): each entity got its guaranteed slice's own allocation", err))
	}
	pl.enforceLimits(a)
	a.Note = strings.Join(pl.notes, "; ")
	return a, nil
}

// maxMin is step 2 without water filling: the max-min level, then the
// largest total normalised throughput that keeps it.
func (pol *QuotaFairness) maxMin(ctx context.Context, pl *quotaPlan, s lp.Solver) (*Allocation, error) {
	p := pl.p
	w := make([]float64, len(p.Jobs))
	if pol.Hierarchical {
		w = (&WaterFilling{Hierarchical: true, Within: pol.Within}).shares(p, make([]bool, len(p.Jobs)))
	} else {
		for m := range p.Jobs {
			w[m] = p.Jobs[m].weight()
		}
	}
	g := newProgram(p, lp.Maximize, pl.tput)
	pl.addRows(g)
	t := -1
	for m := range p.Jobs {
		if !g.runs(m) || pl.norm[m] == 0 || w[m] == 0 {
			continue
		}
		if t < 0 {
			t = g.m.AddVar(0, lp.Inf, 1)
		}
		// t - r_m / w'_m <= 0.
		g.idx, g.val = append(g.idx[:0], t), append(g.val[:0], 1)
		g.rate(m, pl.tput[m], -pl.norm[m]/w[m])
		g.m.AddRow(-lp.Inf, 0, g.idx, g.val)
	}
	if t < 0 {
		return newAllocation(p), nil
	}
	a, sol, err := g.solve(ctx, s)
	if err != nil {
		return nil, solveError(err)
	}
	level := sol.X[t]
	g.m.SetVarBounds(t, level*(1-1e-9), lp.Inf)
	g.m.SetObjective(t, 0)
	pl.totalObjective(g)
	if b, _, err := g.solve(ctx, s); err == nil {
		a = b
	} else if ctx.Err() != nil {
		return nil, err
	}
	a.Objective = level
	return a, nil
}

// fillIdle is water filling's last step here: every job keeps its rate
// (less a relative 1e-7) and the total normalised throughput is maximised,
// so that GPUs a later stage left idle (one the solver could not finish,
// which WaterFilling then drops) go to the jobs that can use them.
func (pl *quotaPlan) fillIdle(ctx context.Context, s lp.Solver, a *Allocation) (*Allocation, error) {
	p := pl.p
	g := newProgram(p, lp.Maximize, pl.tput)
	pl.addRows(g)
	r := rates(a, pl.tput)
	for m := range p.Jobs {
		if f := pl.norm[m] * r[m] * (1 - 1e-7); f > 0 {
			g.idx, g.val = g.idx[:0], g.val[:0]
			g.rate(m, pl.tput[m], pl.norm[m])
			g.m.AddRow(f, lp.Inf, g.idx, g.val)
		}
	}
	pl.totalObjective(g)
	b, _, err := g.solve(ctx, s)
	if err != nil {
		if ctx.Err() != nil {
			return nil, err
		}
		return a, nil
	}
	b.Objective = a.Objective
	return b, nil
}

// quotaPlan is what a solve knows of the quotas: the entities with jobs and
// a quota, their slices and limits, and the guarantees their slices give.
type quotaPlan struct {
	p     *Problem
	tput  [][]float64
	norm  []float64 // sf_m / T^prop_m, 0 where the job cannot run
	ents  []*quotaEntity
	notes []string
}

// quotaEntity is one entity of a quotaPlan.
type quotaEntity struct {
	name string
	// jobs are the entity's jobs that can run somewhere.
	jobs []int
	// slice is its guaranteed GPUs of each type (nil if none), maxGPUs
	// its cap per type (+Inf where none; nil if none), maxNorm its cap
	// on normalised throughput (+Inf if none).
	slice, maxGPUs []float64
	maxNorm        float64
	// floor are the jobs with a variable on the slice; level and total
	// are L_e and R_e; x is the slice's own allocation (per job of floor).
	floor        []int
	level, total float64
	x            [][]float64
}

func newQuotaPlan(p *Problem) *quotaPlan {
	pl := &quotaPlan{p: p, tput: p.matrix()}
	pl.norm = normalisers(p, pl.tput)
	for m := range pl.norm {
		pl.norm[m] *= p.Jobs[m].weight()
	}
	if len(p.EntityQuotas) == 0 {
		return pl
	}
	total := 0
	for _, n := range p.Capacity {
		total += n
	}
	byName := map[string]*quotaEntity{}
	for m := range p.Jobs {
		e := p.Jobs[m].Entity
		if _, ok := p.EntityQuotas[e]; !ok {
			continue
		}
		qe := byName[e]
		if qe == nil {
			qe = &quotaEntity{name: e}
			byName[e] = qe
			pl.ents = append(pl.ents, qe)
		}
		for k := range p.Types {
			if p.runnable(m, k, pl.tput[m]) {
				qe.jobs = append(qe.jobs, m)
				break
			}
		}
	}
	slices.SortFunc(pl.ents, func(a, b *quotaEntity) int { return cmp.Compare(a.name, b.name) })
	nk := len(p.Types)
	for _, qe := range pl.ents {
		q := p.EntityQuotas[qe.name]
		qe.maxNorm = math.Inf(1)
		if q.MaxShare > 0 {
			qe.maxNorm = q.MaxShare * float64(total)
		}
		if len(q.MaxGPUs) > 0 {
			qe.maxGPUs = make([]float64, nk)
			for k, t := range p.Types {
				qe.maxGPUs[k] = math.Inf(1)
				if v, ok := q.MaxGPUs[t]; ok {
					qe.maxGPUs[k] = v
				}
			}
		}
		if q.GuaranteedShare == 0 && len(q.GuaranteedGPUs) == 0 || len(qe.jobs) == 0 {
			continue
		}
		// The slice, at most the cap, the type's GPUs and what the
		// entity's jobs can use there.
		slice := make([]float64, nk)
		some := false
		for k, t := range p.Types {
			demand := 0.0
			for _, m := range qe.jobs {
				if p.runnable(m, k, pl.tput[m]) {
					demand += float64(p.Jobs[m].ScaleFactor) * p.Jobs[m].count()
				}
			}
			v := max(q.GuaranteedGPUs[t], q.GuaranteedShare*float64(p.Capacity[k]))
			v = min(v, float64(p.Capacity[k]), demand)
			if qe.maxGPUs != nil {
				v = min(v, qe.maxGPUs[k])
			}
			slice[k] = v
			some = some || v > 0
		}
		if some {
			qe.slice = slice
		}
	}
	// Over-commitment: the slices of a type scaled to its capacity.
	for k, t := range p.Types {
		sum := 0.0
		for _, qe := range pl.ents {
			if qe.slice != nil {
				sum += qe.slice[k]
			}
		}
		if c := float64(p.Capacity[k]); sum > c {
			f := c / sum
			for _, qe := range pl.ents {
				if qe.slice != nil {
					qe.slice[k] *= f
				}
			}
			pl.notes = append(pl.notes, fmt.Sprintf("guarantees over-commit %s (%.6g of %d GPUs for the entities with jobs): scaled by %.6g", t, sum, p.Capacity[k], f))
		}
	}
	return pl
}

// guarantee solves step 1 for every entity with a slice. Only a cancelled
// context is an error: an entity whose slice the solver cannot solve gets
// no guarantee this time, and a note.
func (pl *quotaPlan) guarantee(ctx context.Context, s lp.Solver) error {
	for _, qe := range pl.ents {
		if qe.slice == nil {
			continue
		}
		if err := pl.solveSlice(ctx, s, qe); err != nil {
			if ctx.Err() != nil {
				return err
			}
			qe.floor, qe.level, qe.total, qe.x = nil, 0, 0, nil
			pl.notes = append(pl.notes, fmt.Sprintf("entity %q: its guarantee could not be computed (%v): not enforced this time", qe.name, err))
		}
	}
	return nil
}

// solveSlice computes L_e and R_e: max-min fairness of the entity's jobs
// alone on its slice, then their largest total at that level.
func (pl *quotaPlan) solveSlice(ctx context.Context, s lp.Solver, qe *quotaEntity) error {
	p := pl.p
	g := newProgramOn(p, lp.Maximize, pl.tput, qe.jobs, qe.slice)
	qe.floor = qe.floor[:0]
	for _, m := range qe.jobs {
		if g.runs(m) {
			qe.floor = append(qe.floor, m)
		}
	}
	if len(qe.floor) == 0 {
		return nil
	}
	t := g.m.AddVar(0, lp.Inf, 1)
	for _, m := range qe.floor {
		g.idx, g.val = append(g.idx[:0], t), append(g.val[:0], 1)
		g.rate(m, pl.tput[m], -pl.norm[m]/p.Jobs[m].weight())
		g.m.AddRow(-lp.Inf, 0, g.idx, g.val)
	}
	if !math.IsInf(qe.maxNorm, 1) {
		pl.normRow(g, qe.floor, -lp.Inf, qe.maxNorm)
	}
	sol, err := solveLP(ctx, s, g.m)
	if err != nil {
		return solveError(err)
	}
	qe.level = sol.X[t]
	g.m.SetVarBounds(t, qe.level*(1-1e-9), lp.Inf)
	g.m.SetObjective(t, 0)
	pl.totalObjective(g)
	if sol2, err := solveLP(ctx, s, g.m); err == nil {
		sol = sol2
	} else if ctx.Err() != nil {
		return err
	}
	qe.x = make([][]float64, len(qe.floor))
	qe.total = 0
	for i, m := range qe.floor {
		qe.x[i] = make([]float64, len(p.Types))
		for k, v := range g.x[m] {
			if v >= 0 {
				qe.x[i][k] = clip(sol.X[v])
				qe.total += pl.norm[m] * p.Jobs[m].count() * pl.tput[m][k] * qe.x[i][k]
			}
		}
	}
	return nil
}

// totalObjective sets g's objective to the total normalised throughput of
// the jobs it has variables for.
func (pl *quotaPlan) totalObjective(g *program) {
	for m, row := range g.x {
		for k, v := range row {
			if v >= 0 {
				g.m.SetObjective(v, pl.norm[m]*pl.p.Jobs[m].count()*pl.tput[m][k])
			}
		}
	}
}

// normRow adds lo <= sum over jobs of r_m <= up to g.
func (pl *quotaPlan) normRow(g *program, jobs []int, lo, up float64) {
	g.idx, g.val = g.idx[:0], g.val[:0]
	for _, m := range jobs {
		g.rate(m, pl.tput[m], pl.norm[m]*pl.p.Jobs[m].count())
	}
	if len(g.idx) > 0 {
		g.m.AddRow(lo, up, g.idx, g.val)
	}
}

// addRows adds every entity's guarantee and limit rows to g (step 2).
func (pl *quotaPlan) addRows(g *program) {
	p := pl.p
	for _, qe := range pl.ents {
		if qe.level > 0 {
			for _, m := range qe.floor {
				g.idx, g.val = g.idx[:0], g.val[:0]
				g.rate(m, pl.tput[m], pl.norm[m])
				if len(g.idx) > 0 {
					g.m.AddRow(qe.level*p.Jobs[m].weight()*(1-quotaSlack), lp.Inf, g.idx, g.val)
				}
			}
		}
		if qe.total > 0 {
			pl.normRow(g, qe.floor, qe.total*(1-quotaSlack), lp.Inf)
		}
		for k, c := range qe.maxGPUs {
			if math.IsInf(c, 1) {
				continue
			}
			g.idx, g.val = g.idx[:0], g.val[:0]
			for _, m := range qe.jobs {
				if v := g.x[m][k]; v >= 0 {
					g.idx = append(g.idx, v)
					g.val = append(g.val, float64(p.Jobs[m].ScaleFactor)*p.Jobs[m].count())
				}
			}
			if len(g.idx) > 0 {
				g.m.AddRow(-lp.Inf, c, g.idx, g.val)
			}
		}
		if !math.IsInf(qe.maxNorm, 1) {
			pl.normRow(g, qe.jobs, -lp.Inf, qe.maxNorm)
		}
	}
}

// fallback is every entity's slice allocation, the other jobs idle.
func (pl *quotaPlan) fallback() *Allocation {
	a := newAllocation(pl.p)
	for _, qe := range pl.ents {
		for i, m := range qe.floor {
			if qe.x != nil {
				copy(a.X[m], qe.x[i])
			}
		}
	}
	return a.fit(pl.p)
}

// enforceLimits scales an entity's shares back onto its limits where the
// solver's residues leave them over: its time on a type over MaxGPUs, then
// all its time over MaxShare.
func (pl *quotaPlan) enforceLimits(a *Allocation) {
	p := pl.p
	for _, qe := range pl.ents {
		for k, c := range qe.maxGPUs {
			used := 0.0
			for _, m := range qe.jobs {
				used += float64(p.Jobs[m].ScaleFactor) * p.Jobs[m].count() * a.X[m][k]
			}
			if used > c {
				// A hair under c/used, so that rounding cannot leave the
				// sum above c.
				f := c / used * (1 - 1e-12)
				for _, m := range qe.jobs {
					a.X[m][k] *= f
				}
			}
		}
		if math.IsInf(qe.maxNorm, 1) {
			continue
		}
		r := 0.0
		for _, m := range qe.jobs {
			for k, x := range a.X[m] {
				r += pl.norm[m] * p.Jobs[m].count() * pl.tput[m][k] * x
			}
		}
		if r > qe.maxNorm {
			f := qe.maxNorm / r * (1 - 1e-12)
			for _, m := range qe.jobs {
				for k := range a.X[m] {
					a.X[m][k] *= f
				}
			}
		}
	}
}

// EntityUsage is what an allocation gives one entity ([Allocation.Usage]),
// in the units of a Quota.
// It is a plain value, safe for concurrent reads.
type EntityUsage struct {
	// GPUs is the entity's GPUs of each type of Problem.Types, averaged
	// over time: the sum over its jobs of sf_m X_mk (a pair's GPUs count
	// half for each of its two jobs).
	GPUs []float64
	// Normalised is its normalised throughput (see Quota), in GPUs of the
	// cluster's mix: the sum over its jobs of sf_m rate_m / T^prop_m.
	Normalised float64
}

// Usage returns the usage of every entity of p's jobs under a (the jobs
// without an entity under ""). p must be valid and a fit it
// (Allocation.Check).
func (a *Allocation) Usage(p *Problem) map[string]EntityUsage {
	prop := proportionalRates(p, p.matrix())
	out := map[string]EntityUsage{}
	add := func(m, k int, gpus float64) {
		u, ok := out[p.Jobs[m].Entity]
		if !ok {
			u.GPUs = make([]float64, len(p.Types))
		}
		u.GPUs[k] += gpus
		out[p.Jobs[m].Entity] = u
	}
	for m, row := range a.X {
		sf := float64(p.Jobs[m].ScaleFactor)
		for k, x := range row {
			add(m, k, sf*x)
		}
		if prop[m] > 0 {
			u := out[p.Jobs[m].Entity]
			u.Normalised += sf * a.EffectiveThroughput(p, m) / prop[m]
			out[p.Jobs[m].Entity] = u
		}
	}
	for _, pr := range a.Pairs {
		for k, x := range pr.X {
			g := float64(p.Jobs[pr.A].ScaleFactor) * x / 2
			add(pr.A, k, g)
			add(pr.B, k, g)
		}
	}
	return out
}
