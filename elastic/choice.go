package elastic

import (
	"cmp"
	"container/heap"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/gpusched/gpusched/allocation/lp"
)

// Option is one configuration a group (a job) may choose in a
// ChoiceProblem: it takes GPUs GPUs of pool Pool and is worth Value. It is
// a plain value, safe for concurrent use.
type Option struct {
	Pool, GPUs int
	Value      float64
}

// ChoiceProblem is the integer program of Sia's policy (Jayaram Subramanya
// et al., SOSP 2023, section 3.3, eq. 1, with its two constraints):
// choose at most one option per group, using at most Capacity[k] GPUs of
// each pool k, to maximise the sum of the chosen options' values (a group
// that chooses none adds 0). It is a plain value, safe for concurrent
// reads.
type ChoiceProblem struct {
	Groups   [][]Option
	Capacity []int
}

// ChoiceStats describes a solve: the branch-and-bound nodes (LPs solved),
// the LP relaxation's value at the root (an upper bound), and whether the
// answer is proven optimal (false when MaxNodes stopped the search: the
// answer is then the best found). It is a plain value, safe for
// concurrent use.
type ChoiceStats struct {
	Nodes   int
	Bound   float64
	Optimal bool
}

// Choice solver limits.
const (
	// MaxChoiceOptions bounds the options of a ChoiceProblem (after
	// dominated ones are dropped).
	MaxChoiceOptions = 1 << 20
	// DefaultChoiceNodes is the default node limit of SolveChoice.
	DefaultChoiceNodes = 10000
)

// SolveChoice solves a ChoiceProblem exactly by branch and bound on its LP
// relaxation, solved by the pure-Go interior point (allocation/lp) with
// crossover to a vertex. Groups with the same options (jobs of one
// application in one state: a scheduler sees many) are merged into one
// class whose variables count how many of its groups take each option, so
// that the search does not explore their permutations. The search is
// best-first on the bound, branches on the most fractional count (below
// its floor, or above its ceiling), fixes counts by reduced costs at every
// node, and takes its incumbents from the LP point rounded down and
// completed greedily, and from the classes it splits tried in every
// combination of one more option each. Options with a value of 0 or less, or more
// GPUs than their pool, are never chosen; an option of a group that takes
// as many GPUs of its pool as another and is worth less is dropped
// (dominance), so the LPs are small. The search takes at most maxNodes
// LPs (0: DefaultChoiceNodes) and stops at a relative gap of gap (0:
// 1e-9) between the best answer and the bound; it returns each group's
// option index, or -1 for none. Bad input (a negative capacity, a pool out
// of range, a value that is not finite, more than MaxChoiceOptions
// options) is an error wrapping ErrInvalid; a solver failure an error
// wrapping the lp package's.
func SolveChoice(ctx context.Context, p *ChoiceProblem, maxNodes int, gap float64) ([]int, ChoiceStats, error) {
	if err := p.validate(); err != nil {
		return nil, ChoiceStats{}, err
	}
	if maxNodes <= 0 {
		maxNodes = DefaultChoiceNodes
	}
	if !(gap >= 0) || math.IsInf(gap, 0) {
		return nil, ChoiceStats{}, fmt.Errorf("%w: gap %v", ErrInvalid, gap)
	}
	if gap == 0 {
		gap = 1e-9
	}
	s := newChoiceSearch(p)
	if len(s.vars) == 0 {
		choice := make([]int, len(p.Groups))
		for i := range choice {
			choice[i] = -1
		}
		return choice, ChoiceStats{Optimal: true}, nil
	}
	if err := s.search(ctx, maxNodes, gap); err != nil {
		return nil, s.stats, err
	}
	return s.answer(), s.stats, nil
}

func (p *ChoiceProblem) validate() error {
	n := 0
	for k, c := range p.Capacity {
		if c < 0 || c > MaxGPUs {
			return fmt.Errorf("%w: capacity %d of pool %d", ErrInvalid, c, k)
		}
	}
	for g, opts := range p.Groups {
		for o, x := range opts {
			if x.Pool < 0 || x.Pool >= len(p.Capacity) || x.GPUs < 0 || math.IsNaN(x.Value) || math.IsInf(x.Value, 0) {
				return fmt.Errorf("%w: group %d option %d: pool %d, %d GPUs, value %v", ErrInvalid, g, o, x.Pool, x.GPUs, x.Value)
			}
		}
		n += len(opts)
		if n > MaxChoiceOptions {
			return fmt.Errorf("%w: more than %d options", ErrInvalid, MaxChoiceOptions)
		}
	}
	return nil
}

// choiceVar is an option of a class kept for the LP: y of the class's
// groups take it.
type choiceVar struct {
	class, option int // option: the index in the class's first group
	pool, gpus    int
	value         float64
}

// choiceClass is a set of groups with the same kept options.
type choiceClass struct {
	groups []int
	vars   []int
}

type choiceSearch struct {
	p       *ChoiceProblem
	vars    []choiceVar
	classes []choiceClass
	model   *lp.Model
	solver  lp.InteriorPoint
	stats   ChoiceStats
	// best is the incumbent: a count per variable.
	best      []int
	bestValue float64
	byValue   []int // the variables by value, largest first (fill)
}

func newChoiceSearch(p *ChoiceProblem) *choiceSearch {
	s := &choiceSearch{p: p, solver: lp.InteriorPoint{Crossover: true}}
	index := map[string]int{}
	var key []byte
	for g, opts := range p.Groups {
		// Keep the options worth more than every option of the same pool
		// with as few GPUs or fewer (the others are dominated).
		idx := make([]int, 0, len(opts))
		for o, x := range opts {
			if x.Value > 0 && x.GPUs <= p.Capacity[x.Pool] {
				idx = append(idx, o)
			}
		}
		slices.SortStableFunc(idx, func(a, b int) int {
			return cmp.Or(cmp.Compare(opts[a].Pool, opts[b].Pool), cmp.Compare(opts[a].GPUs, opts[b].GPUs), cmp.Compare(opts[b].Value, opts[a].Value))
		})
		kept := idx[:0]
		bestPool, bestValue := -1, 0.0
		for _, o := range idx {
			x := opts[o]
			if x.Pool != bestPool {
				bestPool, bestValue = x.Pool, 0
			}
			if x.Value > bestValue {
				kept = append(kept, o)
				bestValue = x.Value
			}
		}
		if len(kept) == 0 {
			continue
		}
		key = key[:0]
		for _, o := range kept {
			key = fmt.Appendf(key, "%d,%d,%x;", opts[o].Pool, opts[o].GPUs, math.Float64bits(opts[o].Value))
		}
		c, ok := index[string(key)]
		if !ok {
			c = len(s.classes)
			index[string(key)] = c
			cl := choiceClass{}
			for _, o := range kept {
				cl.vars = append(cl.vars, len(s.vars))
				s.vars = append(s.vars, choiceVar{c, o, opts[o].Pool, opts[o].GPUs, opts[o].Value})
			}
			s.classes = append(s.classes, cl)
		}
		s.classes[c].groups = append(s.classes[c].groups, g)
	}
	s.best = make([]int, len(s.vars))
	return s
}

// build makes the LP: a count in [0, n] per kept option of a class of n
// groups, one row per class (at most n options in all) and one per pool
// (capacity).
func (s *choiceSearch) build() {
	m := lp.NewModel(lp.Maximize)
	byPool := make([][]int, len(s.p.Capacity))
	for v, x := range s.vars {
		m.AddVar(0, float64(len(s.classes[x.class].groups)), x.value)
		byPool[x.pool] = append(byPool[x.pool], v)
	}
	for _, c := range s.classes {
		if len(c.vars) > 1 {
			ones := make([]float64, len(c.vars))
			for i := range ones {
				ones[i] = 1
			}
			m.AddRow(-lp.Inf, float64(len(c.groups)), c.vars, ones)
		}
	}
	for k, vs := range byPool {
		if len(vs) == 0 {
			continue
		}
		w := make([]float64, len(vs))
		total := 0
		for i, v := range vs {
			x := s.vars[v]
			w[i] = float64(x.gpus)
			total += x.gpus * len(s.classes[x.class].groups)
		}
		if total > s.p.Capacity[k] {
			m.AddRow(-lp.Inf, float64(s.p.Capacity[k]), vs, w)
		}
	}
	s.model = m
}

// limits are a node's bounds on the counts.
type limits struct{ lo, up []int }

func (s *choiceSearch) rootLimits() limits {
	l := limits{lo: make([]int, len(s.vars)), up: make([]int, len(s.vars))}
	for v, x := range s.vars {
		l.up[v] = len(s.classes[x.class].groups)
	}
	return l
}

func (l limits) clone() limits { return limits{slices.Clone(l.lo), slices.Clone(l.up)} }

// search is best-first branch and bound: the open node of the highest
// parent bound is solved next.
func (s *choiceSearch) search(ctx context.Context, maxNodes int, gap float64) error {
	s.build()
	if s.model.NumRows() == 0 {
		// Nothing binds: every group takes its one option.
		y := make([]float64, len(s.vars))
		for v, x := range s.vars {
			y[v] = float64(len(s.classes[x.class].groups))
		}
		s.round(y)
		s.stats = ChoiceStats{Bound: s.bestValue, Optimal: true}
		return nil
	}
	target := func() float64 { return s.bestValue + gap*math.Max(1, math.Abs(s.bestValue)) }
	open := &nodeHeap{{bound: math.Inf(1), limits: s.rootLimits()}}
	for open.Len() > 0 {
		if err := ctx.Err(); err != nil {
			return err
		}
		n := heap.Pop(open).(choiceNode)
		if n.bound <= target() {
			continue
		}
		if s.stats.Nodes >= maxNodes {
			return nil // the best found; stats.Optimal stays false
		}
		y, reduced, bound, ok, err := s.relax(ctx, n.limits)
		if err != nil {
			return err
		}
		s.stats.Nodes++
		if s.stats.Nodes == 1 {
			s.stats.Bound = bound
		}
		if !ok || bound <= target() {
			continue
		}
		s.round(y)
		s.complete(y, n.limits)
		v := s.branchVar(y)
		if v < 0 {
			continue // integral: round took it
		}
		l := n.limits.clone()
		s.fixByReducedCost(l, y, reduced, bound, target(), 1e-7*math.Max(1, math.Abs(bound)))
		down, up := l.clone(), l
		down.up[v] = int(math.Floor(y[v]))
		up.lo[v] = int(math.Floor(y[v])) + 1
		heap.Push(open, choiceNode{bound: bound, limits: down})
		heap.Push(open, choiceNode{bound: bound, limits: up})
	}
	s.stats.Optimal = true
	return nil
}

// choiceNode is an open node: its bounds and its parent's bound.
type choiceNode struct {
	bound  float64
	limits limits
}

// nodeHeap pops the node of the highest bound (the later pushed on ties).
type nodeHeap []choiceNode

func (h nodeHeap) Len() int           { return len(h) }
func (h nodeHeap) Less(a, b int) bool { return h[a].bound > h[b].bound }
func (h nodeHeap) Swap(a, b int)      { h[a], h[b] = h[b], h[a] }
func (h *nodeHeap) Push(x any)        { *h = append(*h, x.(choiceNode)) }
func (h *nodeHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// relax solves the LP within the node's bounds; ok is false when they are
// infeasible.
func (s *choiceSearch) relax(ctx context.Context, l limits) (y, reduced []float64, bound float64, ok bool, err error) {
	used := make([]int, len(s.p.Capacity))
	for c := range s.classes {
		n := 0
		for _, v := range s.classes[c].vars {
			n += l.lo[v]
			used[s.vars[v].pool] += l.lo[v] * s.vars[v].gpus
		}
		if n > len(s.classes[c].groups) {
			return nil, nil, 0, false, nil
		}
	}
	for k, u := range used {
		if u > s.p.Capacity[k] {
			return nil, nil, 0, false, nil
		}
	}
	for v := range s.vars {
		if l.lo[v] > l.up[v] {
			return nil, nil, 0, false, nil
		}
		s.model.SetVarBounds(v, float64(l.lo[v]), float64(l.up[v]))
	}
	sol, err := s.solver.Solve(ctx, s.model)
	if errors.Is(err, lp.ErrInfeasible) {
		return nil, nil, 0, false, nil
	}
	if err != nil {
		return nil, nil, 0, false, fmt.Errorf("elastic: Sia's LP relaxation: %w", err)
	}
	return sol.X, sol.ReducedCosts, sol.Objective, true, nil
}

// fixByReducedCost tightens the node's bounds on the counts that no
// answer better than target can move from where the LP put them: with
// dual-feasible prices, an answer is worth at most bound + d_v per unit
// it raises a count of reduced cost d_v < 0 above its lower bound, and
// at most bound - d_v per unit it lowers one of d_v > 0 below its upper
// bound (reduced-cost fixing; Nemhauser and Wolsey, "Integer and
// Combinatorial Optimization", 1988, section II.5.1), a margin of tol kept
// for the LP's accuracy.
func (s *choiceSearch) fixByReducedCost(l limits, y, reduced []float64, bound, target, tol float64) {
	for v, d := range reduced {
		switch {
		case d < 0 && y[v] < float64(l.lo[v])+1e-6:
			// Raising it by k costs k|d|: at most floor((bound - target) / |d|) units.
			if room := (bound - target + tol) / -d; room < float64(l.up[v]-l.lo[v]) {
				l.up[v] = l.lo[v] + int(math.Floor(room))
			}
		case d > 0 && y[v] > float64(l.up[v])-1e-6:
			if room := (bound - target + tol) / d; room < float64(l.up[v]-l.lo[v]) {
				l.lo[v] = l.up[v] - int(math.Floor(room))
			}
		}
	}
}

// round turns an LP point into an answer (every count rounded down, then
// completed greedily) and keeps it if it beats the incumbent.
func (s *choiceSearch) round(y []float64) {
	count := make([]int, len(s.vars))
	for v := range y {
		count[v] = int(math.Floor(y[v] + 1e-6))
	}
	s.fill(count)
}

// complete is a second heuristic: every count rounded down, then each
// class the LP splits (at most as many as pools at a vertex) tries one more
// group on each of its split options, or none, in every combination (up
// to 4,096), each completed greedily.
func (s *choiceSearch) complete(y []float64, l limits) {
	const eps, maxCombos = 1e-6, 4096
	count := make([]int, len(s.vars))
	split := map[int]bool{}
	for v := range y {
		count[v] = int(math.Floor(y[v] + eps))
		if y[v]-float64(count[v]) > eps {
			split[s.vars[v].class] = true
		}
	}
	var classes []int
	for c := range split {
		classes = append(classes, c)
	}
	slices.Sort(classes)
	opts := make([][]int, len(classes))
	combos := 1
	for i, c := range classes {
		opts[i] = []int{-1}
		for _, v := range s.classes[c].vars {
			if y[v]-float64(count[v]) > eps && count[v] < l.up[v] {
				opts[i] = append(opts[i], v)
			}
		}
		if combos *= len(opts[i]); combos > maxCombos {
			return
		}
	}
	var rec func(i int)
	rec = func(i int) {
		if i == len(classes) {
			s.fill(count)
			return
		}
		for _, v := range opts[i] {
			if v >= 0 {
				count[v]++
			}
			rec(i + 1)
			if v >= 0 {
				count[v]--
			}
		}
	}
	rec(0)
}

// fill completes counts greedily (the most valuable options that fit, for
// the groups of each class without one) and keeps the answer if it is
// feasible and beats the incumbent; count is left as it was.
func (s *choiceSearch) fill(count []int) {
	count = slices.Clone(count)
	free := slices.Clone(s.p.Capacity)
	left := make([]int, len(s.classes))
	value := 0.0
	for c, cl := range s.classes {
		left[c] = len(cl.groups)
	}
	for v, n := range count {
		x := s.vars[v]
		free[x.pool] -= n * x.gpus
		left[x.class] -= n
		value += float64(n) * x.value
	}
	for k := range free {
		if free[k] < 0 {
			return
		}
	}
	for c := range left {
		if left[c] < 0 {
			return
		}
	}
	if s.byValue == nil {
		s.byValue = make([]int, len(s.vars))
		for v := range s.byValue {
			s.byValue[v] = v
		}
		slices.SortStableFunc(s.byValue, func(a, b int) int { return cmp.Compare(s.vars[b].value, s.vars[a].value) })
	}
	for _, v := range s.byValue {
		x := s.vars[v]
		if n := min(left[x.class], free[x.pool]/max(x.gpus, 1)); n > 0 {
			if x.gpus == 0 {
				n = left[x.class]
			}
			count[v] += n
			left[x.class] -= n
			free[x.pool] -= n * x.gpus
			value += float64(n) * x.value
		}
	}
	if value > s.bestValue {
		s.best, s.bestValue = count, value
	}
}

// branchVar is the count farthest from a whole number, or -1 when y is
// integral.
func (s *choiceSearch) branchVar(y []float64) int {
	best, dist := -1, 1e-6
	for v := range s.vars {
		f := y[v] - math.Floor(y[v])
		if d := math.Min(f, 1-f); d > dist {
			best, dist = v, d
		}
	}
	return best
}

// answer hands each class's counts to its groups in order: option indices
// per group.
func (s *choiceSearch) answer() []int {
	out := make([]int, len(s.p.Groups))
	for g := range out {
		out[g] = -1
	}
	for _, cl := range s.classes {
		next := 0
		for _, v := range cl.vars {
			x := s.vars[v]
			for range s.best[v] {
				g := cl.groups[next]
				next++
				// The option of the same pool and GPUs in this group (the
				// groups of a class have the same kept options, maybe at
				// other indices).
				out[g] = s.optionOf(g, x)
			}
		}
	}
	return out
}

// optionOf is the index in group g of the kept option x stands for.
func (s *choiceSearch) optionOf(g int, x choiceVar) int {
	for o, opt := range s.p.Groups[g] {
		if opt.Pool == x.pool && opt.GPUs == x.gpus && opt.Value == x.value {
			return o
		}
	}
	return -1 // not reached: the class was built from this group's options
}
