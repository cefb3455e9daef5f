package sparse

import (
	"context"
	"slices"
)

// minimumDegree is the exact minimum-degree ordering on an explicit
// elimination graph (repeatedly eliminate a node of least degree and join
// its neighbours into a clique), slow but simple: the reference the tests
// compare approximateMinimumDegree's fill with.
// Nodes wait in degree buckets (doubly linked lists), so each degree change
// costs O(1); within a bucket the most recently updated node goes first.
// The order is deterministic.
func minimumDegree(ctx context.Context, n int, colPtr, rowIdx []int) ([]int, error) {
	adj := make([]map[int]struct{}, n)
	for i := range adj {
		adj[i] = map[int]struct{}{}
	}
	for j := range n {
		for p := colPtr[j]; p < colPtr[j+1]; p++ {
			if i := rowIdx[p]; i != j {
				adj[i][j] = struct{}{}
				adj[j][i] = struct{}{}
			}
		}
	}
	b := newBuckets(n)
	for i := n - 1; i >= 0; i-- {
		b.insert(i, len(adj[i]))
	}
	order := make([]int, 0, n)
	var nbrs []int
	for len(order) < n {
		if len(order)&255 == 0 {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
		}
		v := b.popMin()
		order = append(order, v)
		nbrs = nbrs[:0]
		for u := range adj[v] {
			nbrs = append(nbrs, u)
		}
		// Map iteration order is random: sort for a deterministic result.
		slices.Sort(nbrs)
		for _, u := range nbrs {
			delete(adj[u], v)
			for _, w := range nbrs {
				if w != u {
					adj[u][w] = struct{}{}
				}
			}
		}
		for _, u := range nbrs {
			b.remove(u)
			b.insert(u, len(adj[u]))
		}
		adj[v] = nil
	}
	return order, nil
}
