package lp

import (
	"context"
	"slices"
	"sync"
)

// Consecutive solves of one policy (a scheduler re-solving its allocation
// as jobs come and go) often give standard forms of a pattern seen a few
// solves before: the same rows, columns and nonzeros, with other values.
// The analysis of the normal equations (the pattern of A Theta A', its
// fill-reducing ordering and supernodes) depends on that pattern alone,
// and the iteration vectors on its size, so a solve takes them from a
// recent solve of the same pattern instead of building them again. Reuse
// is exact: the analysis is a function of the pattern, the numeric
// factorisation and the solves overwrite everything they read, and the
// vectors are cleared to the zeros newHSD would allocate. The recent
// workspaces are kept in sets in a sync.Pool, so concurrent solves never
// share one and idle ones go at a garbage collection.

// workspace is the reusable part of one solve of a given pattern.
type workspace struct {
	// The pattern: rows, and A's column pointers and row indices.
	m              int
	colPtr, rowIdx []int
	ne             *normalEq
	// vecs backs the hsd's vectors (hsdVectors(n, m) of them).
	vecs []float64
	// words is about how many 8-byte words the workspace holds.
	words int
}

// size returns about how many 8-byte words w holds: the pattern, the
// vectors, the normal equations and their Cholesky factor (twice its
// nonzeros, for the blocks and their indices).
func (w *workspace) size() int {
	ne := w.ne
	return len(w.colPtr) + len(w.rowIdx) + cap(w.vecs) + len(ne.mvals) + len(ne.diagPos) + len(ne.pairPos) +
		len(ne.work) + len(ne.floor) + len(ne.sqrtTheta) + len(ne.capL) + 2*ne.chol.NonzerosL()
}

// recentWorkspaces is how many patterns a set keeps, the most recently
// used first.
const recentWorkspaces = 8

// keptWords bounds what a set keeps, in 8-byte words (16 MiB): the
// workspaces of the most recent patterns that fit, and spare vectors of at
// most an eighth of it. A larger workspace (an allocation LP of many
// thousands of jobs) is not kept: its analysis costs little beside its
// solve, and a pool in every P holding several would keep gigabytes
// between collections. A variable for tests.
var keptWords = 1 << 21

// workspaceSet is the workspaces of the last patterns solved, and the
// vectors of the last one dropped, for a new pattern's.
type workspaceSet struct {
	ws    []*workspace
	spare []float64
}

var workspaces = sync.Pool{New: func() any { return &workspaceSet{} }}

// matches reports whether sf has the workspace's pattern.
func (w *workspace) matches(sf *stdForm) bool {
	return w.m == sf.m && slices.Equal(w.colPtr, sf.colPtr) && slices.Equal(w.rowIdx, sf.rowIdx)
}

// acquireWorkspace returns a workspace for sf, pointed at sf: a recent one
// of the same pattern, or a new one. Give it back with releaseWorkspace.
func acquireWorkspace(ctx context.Context, sf *stdForm) (*workspace, error) {
	set := workspaces.Get().(*workspaceSet)
	defer workspaces.Put(set)
	for i, w := range set.ws {
		if w != nil && w.matches(sf) {
			set.ws[i] = nil // in use
			w.ne.sf = sf
			clear(w.vecs)
			return w, nil
		}
	}
	ne, err := newNormalEq(ctx, sf)
	if err != nil {
		return nil, err
	}
	w := &workspace{m: sf.m, colPtr: slices.Clone(sf.colPtr), rowIdx: slices.Clone(sf.rowIdx), ne: ne}
	if need := hsdVectors(sf.n, sf.m); cap(set.spare) >= need {
		w.vecs, set.spare = set.spare[:need], nil
		clear(w.vecs)
	} else {
		w.vecs = make([]float64, need)
	}
	w.words = w.size()
	return w, nil
}

// releaseWorkspace keeps w, whose solve is over, as the most recent, and
// drops the oldest beyond recentWorkspaces or keptWords (a workspace
// larger than keptWords is not kept at all).
func releaseWorkspace(w *workspace) {
	w.ne.sf = nil
	if w.words > keptWords {
		return
	}
	set := workspaces.Get().(*workspaceSet)
	set.keep(w)
	workspaces.Put(set)
}

// keep adds w to the set as the most recent.
func (set *workspaceSet) keep(w *workspace) {
	if w.words > keptWords {
		return
	}
	ws := slices.DeleteFunc(set.ws, func(x *workspace) bool { return x == nil })
	ws = slices.Insert(ws, 0, w)
	total := 0
	for i, x := range ws {
		total += x.words
		if i < recentWorkspaces && total <= keptWords {
			continue
		}
		// x and the older ones go; the vectors of x may serve a new pattern.
		if v := x.vecs; cap(v) > cap(set.spare) && cap(v) <= keptWords/8 {
			set.spare = v
		}
		clear(ws[i:])
		ws = ws[:i]
		break
	}
	set.ws = ws
}
