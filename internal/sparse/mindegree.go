package sparse

import "container/heap"

// minimumDegree returns a fill-reducing elimination order of the symmetric
// pattern given by its upper triangle: repeatedly eliminate a node of least
// degree in the elimination graph and join its neighbours into a clique.
// Ties go to the lower index, so the order is deterministic.
func minimumDegree(n int, colPtr, rowIdx []int) []int {
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
	h := &degreeHeap{}
	for i := range n {
		heap.Push(h, node{deg: len(adj[i]), id: i})
	}
	done := make([]bool, n)
	order := make([]int, 0, n)
	nbrs := []int{}
	for h.Len() > 0 {
		v := heap.Pop(h).(node)
		if done[v.id] || v.deg != len(adj[v.id]) {
			continue // stale entry
		}
		done[v.id] = true
		order = append(order, v.id)
		nbrs = nbrs[:0]
		for u := range adj[v.id] {
			nbrs = append(nbrs, u)
		}
		for _, u := range nbrs {
			delete(adj[u], v.id)
			for _, w := range nbrs {
				if w != u {
					adj[u][w] = struct{}{}
				}
			}
		}
		for _, u := range nbrs {
			heap.Push(h, node{deg: len(adj[u]), id: u})
		}
		adj[v.id] = nil
	}
	return order
}

type node struct{ deg, id int }

type degreeHeap []node

func (h degreeHeap) Len() int { return len(h) }
func (h degreeHeap) Less(i, j int) bool {
	if h[i].deg != h[j].deg {
		return h[i].deg < h[j].deg
	}
	return h[i].id < h[j].id
}
func (h degreeHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *degreeHeap) Push(x any)   { *h = append(*h, x.(node)) }
func (h *degreeHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}
