package lp

import (
	"context"
	"slices"
	"sync"
)

// Consecutive solves of one policy (a scheduler re-solving its allocation
// as jobs come and go) usually give standard forms of the same pattern:
// the same rows, columns and nonzeros, with other values. The analysis of
// the normal equations (the pattern of A Theta A', its fill-reducing
// ordering and supernodes) depends on that pattern alone, and the
// iteration vectors on its size, so a solve takes them from the last solve
// of the same pattern instead of building them again. Reuse is exact: the
// analysis is a function of the pattern, the numeric factorisation and
// the solves overwrite everything they read, and the vectors are cleared
// to the zeros newHSD would allocate. Workspaces live in a sync.Pool, so
// concurrent solves never share one and an idle one goes at a garbage
// collection.

// workspace is the reusable part of one solve of a given pattern.
type workspace struct {
	// The pattern: rows, and A's column pointers and row indices.
	m              int
	colPtr, rowIdx []int
	ne             *normalEq
	// vecs backs the hsd's vectors (hsdVectors(n, m) of them).
	vecs []float64
}

var workspaces sync.Pool // of *workspace

// matches reports whether sf has the workspace's pattern.
func (w *workspace) matches(sf *stdForm) bool {
	return w.m == sf.m && slices.Equal(w.colPtr, sf.colPtr) && slices.Equal(w.rowIdx, sf.rowIdx)
}

// acquireWorkspace returns a workspace for sf: a pooled one of the same
// pattern, pointed at sf, or a new one. Give it back with release.
func acquireWorkspace(ctx context.Context, sf *stdForm) (*workspace, error) {
	if w, ok := workspaces.Get().(*workspace); ok && w.matches(sf) {
		w.ne.sf = sf
		clear(w.vecs)
		return w, nil
	}
	ne, err := newNormalEq(ctx, sf)
	if err != nil {
		return nil, err
	}
	return &workspace{
		m: sf.m, colPtr: slices.Clone(sf.colPtr), rowIdx: slices.Clone(sf.rowIdx),
		ne: ne, vecs: make([]float64, hsdVectors(sf.n, sf.m)),
	}, nil
}

// release returns w to the pool; its solve must be over.
func (w *workspace) release() {
	w.ne.sf = nil
	workspaces.Put(w)
}
