package sparse

import (
	"context"
	"slices"
)

// minimumDegree returns a fill-reducing elimination order of the symmetric
// pattern given by its upper triangle: repeatedly eliminate a node of least
// degree in the elimination graph and join its neighbours into a clique.
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

// buckets holds nodes by degree in doubly linked lists.
type buckets struct {
	head, next, prev, deg []int
	min                   int
}

func newBuckets(n int) *buckets {
	b := &buckets{head: make([]int, n+1), next: make([]int, n), prev: make([]int, n), deg: make([]int, n)}
	for i := range b.head {
		b.head[i] = -1
	}
	return b
}

func (b *buckets) insert(v, d int) {
	b.deg[v] = d
	b.prev[v] = -1
	b.next[v] = b.head[d]
	if b.head[d] >= 0 {
		b.prev[b.head[d]] = v
	}
	b.head[d] = v
	b.min = min(b.min, d)
}

func (b *buckets) remove(v int) {
	d := b.deg[v]
	if b.prev[v] >= 0 {
		b.next[b.prev[v]] = b.next[v]
	} else {
		b.head[d] = b.next[v]
	}
	if b.next[v] >= 0 {
		b.prev[b.next[v]] = b.prev[v]
	}
}

// popMin removes and returns a node of least degree; there must be one.
func (b *buckets) popMin() int {
	for b.head[b.min] < 0 {
		b.min++
	}
	v := b.head[b.min]
	b.remove(v)
	return v
}
