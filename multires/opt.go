package multires

import (
	"context"
	"fmt"
	"math"
	"slices"

	"github.com/gpusched/gpusched/allocation/lp"
)

// Opt is Synergy-OPT (section 4.4): the best the round's jobs could do
// with the cluster's CPUs and memory, as a linear program, and, with
// Round, an allocation rounded from it.
//
// The jobs that run are those the policy's order admits by GPUs (each
// while as many GPUs are free). For them the program chooses, for each
// job, a mix of configurations (CPUs and memory per GPU, the points of
// its surface's grid that gain over every smaller point, plus the
// proportional share), to
//
//	maximise   sum_j G_j sum_c r_jc y_jc                    (GPU-weighted throughput)
//	subject to sum_c y_jc = 1                               for each job j
//	           sum_c r_jc y_jc >= r_j(proportional)         no job below its proportional rate
//	           sum_jc G_j cpu_c y_jc <= the cluster's CPUs
//	           sum_jc G_j mem_c y_jc <= the cluster's memory
//	           y >= 0, and a job's configurations fit one server
//
// Jobs of the same profile, GPU count and bounds are interchangeable, so the
// program is written over groups of them (y summed over a group's jobs):
// its size is the number of distinct kinds times their configurations,
// not the number of jobs, and an optimum of the grouped program split
// evenly is one of the per-job program.
//
// Without Round, Opt returns that optimum: each job runs at its group's
// average rate, with no server chosen (Placement.Parts nil). This is the
// upper bound the paper compares Tune with: it ignores server boundaries,
// as the paper's OPT and its artifact do. Synergy's artifact solves it with
// integer variables and weights jobs equally whatever their GPUs; the two
// agree for single-GPU jobs.
//
// With Round, each group's counts are rounded to whole jobs (largest
// remainders), the best configurations go to the group's earliest jobs,
// and the jobs are placed in order as Tune places them, with the chosen
// configuration in place of the best case.
//
// Opt is safe for concurrent use if its Solver is.
type Opt struct {
	// Solver solves the program; nil means lp.InteriorPoint with
	// crossover to a vertex (fewest fractional groups).
	Solver lp.Solver
	// Round asks for a placed allocation rather than the bound.
	Round bool
}

type optGroup struct {
	profile *Profile
	gpus    int
	jobs    []int // in order
	configs []Share
	rates   []float64
	first   int // its first variable
}

// Allocate implements Allocator.
func (o Opt) Allocate(ctx context.Context, servers []Server, jobs []Job) (*Plan, error) {
	if err := check(servers, jobs); err != nil {
		return nil, err
	}
	st := newState(servers)
	groups, selected := o.groups(st, jobs)
	x, err := o.solve(ctx, st, groups)
	if err != nil {
		return nil, err
	}
	if !o.Round {
		return bound(jobs, groups, x), nil
	}
	want := make(map[int]Share, len(selected))
	for _, g := range groups {
		for k, c := range roundGroup(g, x[g.first:g.first+len(g.configs)]) {
			want[g.jobs[k]] = c
		}
	}
	return run(ctx, servers, jobs, func(st *state, plan *Plan, i int) ([]Part, bool) {
		c, ok := want[i]
		if !ok {
			return nil, false
		}
		parts, demoted := st.tune(plan, jobs, i, func(int) Share { return c })
		return parts, demoted || jobs[i].Profile.Surface.At(c) < jobs[i].Profile.IdealRate()-eps
	})
}

// groups admits jobs by GPUs in order and groups them by profile and GPU
// count.
func (o Opt) groups(st *state, jobs []Job) ([]*optGroup, []int) {
	free := st.free
	var selected []int
	type groupKey struct {
		p        *Profile
		g        int
		min, max Share
	}
	byKey := make(map[groupKey]*optGroup)
	var groups []*optGroup
	prop := clusterProp(st)
	for i, j := range jobs {
		if j.GPUs > free {
			continue
		}
		free -= j.GPUs
		selected = append(selected, i)
		key := groupKey{j.Profile, j.GPUs, j.Min, j.Max}
		g := byKey[key]
		if g == nil {
			g = &optGroup{profile: j.Profile, gpus: j.GPUs}
			g.configs, g.rates = configs(st, j, prop)
			byKey[key] = g
			groups = append(groups, g)
		}
		g.jobs = append(g.jobs, i)
	}
	return groups, selected
}

// configs lists the grid points of j's surface that gain over every
// smaller point and fit one server for its GPUs, and the proportional
// share; the proportional share first.
func configs(st *state, j Job, prop Share) ([]Share, []float64) {
	s := j.Profile.Surface
	cs, rs := []Share{prop}, []float64{s.At(prop)}
	if j.GPUs > st.maxGPUs {
		return boundConfigs(j, prop, cs)
	}
	n := float64(j.GPUs)
	if ideal, _ := st.ideal(j); ideal(0) != prop {
		// The best case the job can have on one server, which may lie
		// between grid points (capped by a server's CPUs or memory).
		cs, rs = append(cs, ideal(0)), append(rs, s.At(ideal(0)))
	}
	for i, c := range s.CPUs {
		for k, m := range s.MemGB {
			r := s.Rate[i][k]
			if (i > 0 && r <= s.Rate[i-1][k]) || (k > 0 && r <= s.Rate[i][k-1]) {
				continue // a smaller point does as well
			}
			if c*n > st.maxCPUs+eps || m*n > st.maxMem+eps || slices.Contains(cs, Share{c, m}) {
				continue
			}
			cs, rs = append(cs, Share{c, m}), append(rs, r)
		}
	}
	return boundConfigs(j, prop, cs)
}

// boundConfigs holds configurations to the job's Min (up to the
// proportional share) and Max, without repeats, the first kept first.
func boundConfigs(j Job, prop Share, cs []Share) ([]Share, []float64) {
	var out []Share
	var rates []float64
	for _, c := range cs {
		c = j.bound(j.floor(c, prop))
		if !slices.Contains(out, c) {
			out, rates = append(out, c), append(rates, j.Profile.Surface.At(c))
		}
	}
	return out, rates
}

// clusterProp is the cluster's mean proportional share.
func clusterProp(st *state) Share {
	return Share{sumCPUs(st.servers) / float64(st.totalGPU), sumMem(st.servers) / float64(st.totalGPU)}
}

func sumCPUs(ss []Server) (t float64) {
	for _, s := range ss {
		t += s.CPUs
	}
	return t
}

func sumMem(ss []Server) (t float64) {
	for _, s := range ss {
		t += s.MemGB
	}
	return t
}

func (o Opt) solve(ctx context.Context, st *state, groups []*optGroup) ([]float64, error) {
	if len(groups) == 0 {
		return nil, nil
	}
	prop := clusterProp(st)
	m := lp.NewModel(lp.Maximize)
	m.SetName("synergy-opt")
	var cpuIdx, memIdx []int
	var cpuVal, memVal []float64
	for _, g := range groups {
		n := float64(len(g.jobs))
		g.first = m.NumVars()
		idx := make([]int, len(g.configs))
		one := make([]float64, len(g.configs))
		for c, sh := range g.configs {
			// A tiny charge for the resources breaks the program's ties
			// (a language model runs as fast with 1 CPU as with 3) toward
			// the least, which rounding then places more easily.
			cost := 1e-6 * (sh.CPUs/prop.CPUs + sh.MemGB/prop.MemGB)
			v := m.AddVar(0, n, float64(g.gpus)*(g.rates[c]-cost))
			idx[c], one[c] = v, 1
			cpuIdx, cpuVal = append(cpuIdx, v), append(cpuVal, float64(g.gpus)*sh.CPUs)
			memIdx, memVal = append(memIdx, v), append(memVal, float64(g.gpus)*sh.MemGB)
		}
		m.AddRow(n, n, idx, one)
		if slices.Min(g.rates) < g.rates[0] {
			// The floor; implied (and a row parallel to the one above,
			// which an interior-point method cannot tell from it) when no
			// configuration is slower than the proportional share.
			m.AddRow(n*g.rates[0], math.Inf(1), idx, slices.Clone(g.rates))
		}
	}
	m.AddRow(math.Inf(-1), sumCPUs(st.servers), cpuIdx, cpuVal)
	m.AddRow(math.Inf(-1), sumMem(st.servers), memIdx, memVal)
	solver := o.Solver
	if solver == nil {
		solver = &lp.InteriorPoint{Crossover: true}
	}
	sol, err := solver.Solve(ctx, m)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrNoSolution, err)
	}
	if sol.Status != lp.Optimal {
		return nil, fmt.Errorf("%w: solver status %v", ErrNoSolution, sol.Status)
	}
	return sol.X, nil
}

// bound gives each admitted job its group's average rate.
func bound(jobs []Job, groups []*optGroup, x []float64) *Plan {
	plan := &Plan{Placements: make([]Placement, len(jobs))}
	for _, g := range groups {
		n := float64(len(g.jobs))
		r := 0.0
		for c := range g.configs {
			r += g.rates[c] * max(0, x[g.first+c])
		}
		r /= n
		demoted := r < g.profile.IdealRate()-1e-6
		for _, i := range g.jobs {
			plan.Placements[i] = Placement{Placed: true, Rate: r, Demoted: demoted}
			plan.Placed++
			if demoted {
				plan.Demoted++
			}
		}
	}
	return plan
}

// roundGroup rounds a group's counts per configuration to whole jobs by
// largest remainders and returns the configurations for its jobs in
// order, the fastest first.
func roundGroup(g *optGroup, y []float64) []Share {
	n := len(g.jobs)
	counts := make([]int, len(y))
	rem := make([]float64, len(y))
	left := n
	for c, v := range y {
		v = min(max(v, 0), float64(n))
		counts[c] = int(math.Floor(v + 1e-7))
		rem[c] = v - float64(counts[c])
		left -= counts[c]
	}
	order := make([]int, len(y))
	for c := range order {
		order[c] = c
	}
	slices.SortStableFunc(order, func(a, b int) int {
		switch {
		case rem[a] > rem[b]:
			return -1
		case rem[a] < rem[b]:
			return 1
		}
		return 0
	})
	for k := 0; left > 0; k = (k + 1) % len(order) {
		counts[order[k]]++
		left--
	}
	// The floors sum to at most n (each is at most its value plus 1e-7),
	// so left >= 0 here.
	byRate := make([]int, len(y))
	for c := range byRate {
		byRate[c] = c
	}
	slices.SortStableFunc(byRate, func(a, b int) int {
		switch {
		case g.rates[a] > g.rates[b]:
			return -1
		case g.rates[a] < g.rates[b]:
			return 1
		}
		return 0
	})
	out := make([]Share, 0, n)
	for _, c := range byRate {
		for range counts[c] {
			if g.rates[c] < g.rates[0] {
				c = 0 // never below the proportional share's rate
			}
			out = append(out, g.configs[c])
		}
	}
	return out
}
