package sparse

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
