package lp

import (
	"context"
	"math"
	"runtime/debug"
	"slices"
	"sync"
	"testing"
)

// maxMinModel is a max-min allocation LP of 40 jobs on 3 types whose
// capacities are scaled by c: the same pattern for every c, other values.
func maxMinModel(c float64) *Model { return maxMinModelN(40, c) }

// maxMinModelN is maxMinModel with the given number of jobs.
func maxMinModelN(jobs int, c float64) *Model {
	const types = 3
	m := NewModel(Maximize)
	x := m.AddVars(jobs*types, 0, 1, 0)
	t := m.AddVar(0, Inf, 1)
	for j := range jobs {
		idx := []int{x + j*types, x + j*types + 1, x + j*types + 2}
		m.AddRow(-Inf, 1, idx, []float64{1, 1, 1})
		rates := []float64{-1, -float64(1+j%4) / 4, -float64(1+j%7) / 9}
		m.AddRow(-Inf, 0, append(idx, t), append(rates, 1))
	}
	for k := range types {
		idx := make([]int, jobs)
		val := make([]float64, jobs)
		for j := range jobs {
			idx[j], val[j] = x+j*types+k, float64(1+j%3)
		}
		m.AddRow(-Inf, c*float64(5+3*k), idx, val)
	}
	return m
}

func sameSolution(t *testing.T, what string, got, want *Solution) {
	t.Helper()
	bits := func(v []float64) []uint64 {
		out := make([]uint64, len(v))
		for i, x := range v {
			out[i] = math.Float64bits(x)
		}
		return out
	}
	if got.Iterations != want.Iterations || math.Float64bits(got.Objective) != math.Float64bits(want.Objective) ||
		!slices.Equal(bits(got.X), bits(want.X)) || !slices.Equal(bits(got.Duals), bits(want.Duals)) {
		t.Errorf("%s: objective %v in %d iterations, want %v in %d, or other values", what, got.Objective, got.Iterations, want.Objective, want.Iterations)
	}
}

// A solve that reuses the workspace of an earlier solve of the same
// pattern gives exactly (bit for bit) what a fresh solve gives. (Under the
// race detector a sync.Pool drops some of what it is given: then the
// solves are tried again until one reuses.)
func TestWorkspaceReuseIsExact(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(-1)) // keep the pool's contents
	ctx := context.Background()
	s := &InteriorPoint{}
	a, b := maxMinModel(1), maxMinModel(1.7)
	workspaces = sync.Pool{New: workspaces.New}
	want, err := s.Solve(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	if math.Float64bits(want.Objective) == math.Float64bits(mustSolve(t, a).Objective) {
		t.Fatal("the two models have the same optimum: the test cannot tell them apart")
	}
	for range 50 {
		workspaces = sync.Pool{New: workspaces.New}
		if _, err := s.Solve(ctx, a); err != nil {
			t.Fatal(err)
		}
		set := workspaces.Get().(*workspaceSet)
		workspaces.Put(set)
		if len(set.ws) != 1 {
			continue
		}
		first := set.ws[0]
		got, err := s.Solve(ctx, b)
		if err != nil {
			t.Fatal(err)
		}
		if len(set.ws) != 1 || set.ws[0] != first {
			continue
		}
		sameSolution(t, "after reuse", got, want)
		return
	}
	t.Fatal("the second solve of the pattern never reused the first one's workspace")
}

func mustSolve(t *testing.T, m *Model) *Solution {
	t.Helper()
	sol, err := (&InteriorPoint{}).Solve(context.Background(), m)
	if err != nil {
		t.Fatal(err)
	}
	return sol
}

// Concurrent solves of one pattern never share a workspace: each gives
// what it gives alone (run with -race).
func TestWorkspaceConcurrent(t *testing.T) {
	const n = 6
	want := make([]*Solution, n)
	models := make([]*Model, n)
	for i := range n {
		models[i] = maxMinModel(1 + float64(i)/4)
		want[i] = mustSolve(t, models[i])
	}
	got := make([]*Solution, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			for range 3 {
				got[i], _ = (&InteriorPoint{}).Solve(context.Background(), models[i])
			}
		})
	}
	wg.Wait()
	for i := range n {
		if got[i] == nil {
			t.Fatalf("solve %d failed", i)
		}
		sameSolution(t, "concurrent", got[i], want[i])
	}
}

// A set keeps at most keptWords: a workspace larger than that is not kept,
// and the oldest go first when the recent ones outgrow it; at most
// recentWorkspaces are kept.
func TestWorkspaceMemoryBounded(t *testing.T) {
	defer func(k int) { keptWords = k }(keptWords)
	ctx := context.Background()
	// Real workspaces: the words of a max-min LP grow with its jobs.
	build := func(jobs int) *workspace {
		sf, err := newStdForm(ctx, maxMinModelN(jobs, 1))
		if err != nil {
			t.Fatal(err)
		}
		ne, err := newNormalEq(ctx, sf)
		if err != nil {
			t.Fatal(err)
		}
		w := &workspace{m: sf.m, colPtr: sf.colPtr, rowIdx: sf.rowIdx, ne: ne, vecs: make([]float64, hsdVectors(sf.n, sf.m))}
		w.words = w.size()
		return w
	}
	small, small2, large := build(40), build(41), build(400)
	if small.words <= 0 || large.words <= 4*small.words {
		t.Fatalf("workspace sizes %d and %d words", small.words, large.words)
	}
	keptWords = small.words + small2.words/2 // room for one small one
	set := &workspaceSet{}
	set.keep(small)
	set.keep(large)
	if len(set.ws) != 1 || set.ws[0] != small {
		t.Fatalf("%d workspaces kept after one larger than keptWords, want the small one", len(set.ws))
	}
	set.keep(small2)
	if len(set.ws) != 1 || set.ws[0] != small2 {
		t.Fatalf("%d workspaces kept, want only the newest", len(set.ws))
	}
	keptWords = 1 << 30
	for range 2 * recentWorkspaces {
		set.keep(build(40))
	}
	if len(set.ws) != recentWorkspaces {
		t.Fatalf("%d workspaces kept, want %d", len(set.ws), recentWorkspaces)
	}
}
