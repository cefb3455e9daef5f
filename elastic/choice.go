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
// crossover to a vertex (at a vertex at most as many groups as pools are
// fractional, so the tree stays small). Options with a value of 0 or less, or more
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

// choiceVar is an option kept for the LP.
type choiceVar struct {
	group, option int
	pool, gpus    int
	value         float64
}

type choiceSearch struct {
	p      *ChoiceProblem
	vars   []choiceVar
	model  *lp.Model
	solver lp.InteriorPoint
	stats  ChoiceStats
	// best is the incumbent: a variable index per group (-1 none).
	best      []int
	bestValue float64
}

func newChoiceSearch(p *ChoiceProblem) *choiceSearch {
	s := &choiceSearch{p: p, solver: lp.InteriorPoint{Crossover: true}}
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
		bestPool, bestValue := -1, 0.0
		for _, o := range idx {
			x := opts[o]
			if x.Pool != bestPool {
				bestPool, bestValue = x.Pool, 0
			}
			if x.Value > bestValue {
				s.vars = append(s.vars, choiceVar{g, o, x.Pool, x.GPUs, x.Value})
				bestValue = x.Value
			}
		}
	}
	s.best = make([]int, len(p.Groups))
	for i := range s.best {
		s.best[i] = -1
	}
	return s
}

// build makes the LP: x in [0, 1] per kept option, one row per group (at
// most one option) and one per pool (capacity).
func (s *choiceSearch) build() {
	m := lp.NewModel(lp.Maximize)
	byGroup := make([][]int, len(s.p.Groups))
	byPool := make([][]int, len(s.p.Capacity))
	for v, x := range s.vars {
		m.AddVar(0, 1, x.value)
		byGroup[x.group] = append(byGroup[x.group], v)
		byPool[x.pool] = append(byPool[x.pool], v)
	}
	for _, vs := range byGroup {
		if len(vs) > 1 {
			ones := make([]float64, len(vs))
			for i := range ones {
				ones[i] = 1
			}
			m.AddRow(-lp.Inf, 1, vs, ones)
		}
	}
	for k, vs := range byPool {
		if len(vs) == 0 {
			continue
		}
		w := make([]float64, len(vs))
		total := 0
		for i, v := range vs {
			w[i] = float64(s.vars[v].gpus)
			total += s.vars[v].gpus
		}
		if total > s.p.Capacity[k] {
			m.AddRow(-lp.Inf, float64(s.p.Capacity[k]), vs, w)
		}
	}
	s.model = m
}

// fix is a branching decision: variable v set to 0 or 1.
type fix struct {
	v   int
	one bool
}

// search is best-first branch and bound: the open node of the highest
// parent bound is solved next; a node branches on its most fractional
// variable (set to 1, and to 0).
func (s *choiceSearch) search(ctx context.Context, maxNodes int, gap float64) error {
	s.build()
	if s.model.NumRows() == 0 {
		// Nothing binds: every group takes its one option.
		x := make([]float64, len(s.vars))
		for v := range x {
			x[v] = 1
		}
		s.round(x)
		s.stats = ChoiceStats{Bound: s.bestValue, Optimal: true}
		return nil
	}
	open := &nodeHeap{{bound: math.Inf(1)}}
	for open.Len() > 0 {
		if err := ctx.Err(); err != nil {
			return err
		}
		n := heap.Pop(open).(choiceNode)
		if n.bound <= s.bestValue+gap*math.Max(1, math.Abs(s.bestValue)) {
			continue
		}
		if s.stats.Nodes >= maxNodes {
			return nil // the best found; stats.Optimal stays false
		}
		x, bound, ok, err := s.relax(ctx, n.fixes)
		if err != nil {
			return err
		}
		s.stats.Nodes++
		if s.stats.Nodes == 1 {
			s.stats.Bound = bound
		}
		if !ok || bound <= s.bestValue+gap*math.Max(1, math.Abs(s.bestValue)) {
			continue
		}
		s.round(x)
		v := s.branchVar(x)
		if v < 0 {
			continue // integral: round took it
		}
		heap.Push(open, choiceNode{bound: bound, fixes: append(slices.Clone(n.fixes), fix{v, true})})
		heap.Push(open, choiceNode{bound: bound, fixes: append(slices.Clone(n.fixes), fix{v, false})})
	}
	s.stats.Optimal = true
	return nil
}

// choiceNode is an open node: its fixes and its parent's bound.
type choiceNode struct {
	bound float64
	fixes []fix
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

// relax solves the LP with the fixes; ok is false when they are
// infeasible.
func (s *choiceSearch) relax(ctx context.Context, fixes []fix) (x []float64, bound float64, ok bool, err error) {
	m := s.model
	for v := range s.vars {
		m.SetVarBounds(v, 0, 1)
	}
	used := make([]int, len(s.p.Capacity))
	taken := map[int]bool{}
	for _, f := range fixes {
		if f.one {
			m.SetVarBounds(f.v, 1, 1)
			x := s.vars[f.v]
			used[x.pool] += x.gpus
			if taken[x.group] || used[x.pool] > s.p.Capacity[x.pool] {
				return nil, 0, false, nil
			}
			taken[x.group] = true
		} else {
			m.SetVarBounds(f.v, 0, 0)
		}
	}
	sol, err := s.solver.Solve(ctx, m)
	if errors.Is(err, lp.ErrInfeasible) {
		return nil, 0, false, nil
	}
	if err != nil {
		return nil, 0, false, fmt.Errorf("elastic: Sia's LP relaxation: %w", err)
	}
	return sol.X, sol.Objective, true, nil
}

// round turns an LP point into an answer (each group its largest option,
// largest first, while it fits; then the groups left, each its most
// valuable option that fits) and keeps it if it beats the incumbent.
func (s *choiceSearch) round(x []float64) {
	const eps = 1e-6
	free := slices.Clone(s.p.Capacity)
	choice := make([]int, len(s.p.Groups))
	for i := range choice {
		choice[i] = -1
	}
	order := make([]int, 0, len(s.vars))
	for v := range s.vars {
		if x[v] > eps {
			order = append(order, v)
		}
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(x[b], x[a]) })
	value := 0.0
	take := func(v int) bool {
		c := s.vars[v]
		if choice[c.group] >= 0 || free[c.pool] < c.gpus {
			return false
		}
		choice[c.group], free[c.pool] = v, free[c.pool]-c.gpus
		value += c.value
		return true
	}
	for _, v := range order {
		take(v)
	}
	byValue := make([]int, len(s.vars))
	for v := range byValue {
		byValue[v] = v
	}
	slices.SortStableFunc(byValue, func(a, b int) int { return cmp.Compare(s.vars[b].value, s.vars[a].value) })
	for _, v := range byValue {
		take(v)
	}
	if value > s.bestValue {
		s.best, s.bestValue = choice, value
	}
}

// branchVar is the variable farthest from 0 and 1, or -1 when x is
// integral.
func (s *choiceSearch) branchVar(x []float64) int {
	best, dist := -1, 1e-6
	for v := range s.vars {
		if d := math.Min(x[v], 1-x[v]); d > dist {
			best, dist = v, d
		}
	}
	return best
}

// answer maps the incumbent to option indices per group.
func (s *choiceSearch) answer() []int {
	out := make([]int, len(s.p.Groups))
	for g, v := range s.best {
		out[g] = -1
		if v >= 0 {
			out[g] = s.vars[v].option
		}
	}
	return out
}
