package placement

import (
	"cmp"
	"errors"
	"fmt"
	"math/bits"
	"slices"

	"github.com/gpusched/gpusched/topology"
)

// Buddy is a HiveD-style buddy-cell allocator for cluster-level placement
// (Zhao et al., "HiveD: Sharing a GPU Cluster for Deep Learning with
// Guarantees", OSDI 2020, section 4): the cluster's GPUs form a binary
// hierarchy of cells, the cells of level k holding 2^k GPUs, built so that
// the closer two GPUs are (NVLink, PCIe switch, socket, server, rack), the
// lower their common cell. A job of 2^k GPUs gets a free cell of level k;
// when none is free, the smallest free cell above is split in halves down
// to level k (buddies); a released cell merges with its buddy when both are
// free. Jobs of other sizes take the cell of the next power of two, as in
// HiveD, and leave the rest of it idle.
//
// Inside a server, GPUs are paired, then pairs of pairs, and so on, by
// greatest LinkScore; servers of one GPU type are paired within a rack
// (Server.Rack) and domain before across; cells never mix GPU types. A server whose GPU count is not a power of two
// yields several top cells. Buddy is not safe for concurrent use.
type Buddy struct {
	cells []cell
	// free[k] lists the free cells of level k (cell indices), kept sorted
	// so that choices are deterministic.
	free [][]int
	// jobs maps a job to its cell.
	jobs map[int]int
}

type cell struct {
	level    int
	parent   int    // -1 at the top
	children [2]int // -1 at level 0
	gpus     []GPURef
	state    cellState
}

type cellState uint8

const (
	cellFree cellState = iota
	cellSplit
	cellUsed
)

// GPURef names one GPU of a cluster: server and GPU positions.
// A GPURef is a plain value, safe for concurrent use.
type GPURef struct {
	Server, GPU int
}

// Errors of the buddy allocator.
var (
	ErrNoCell     = errors.New("placement: no free cell large enough")
	ErrUnknownJob = errors.New("placement: unknown job")
)

// NewBuddy builds the cell hierarchy of a valid cluster.
func NewBuddy(c *topology.Cluster) (*Buddy, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	b := &Buddy{jobs: map[int]int{}}
	// Server-level cells: the tops of each server's hierarchies.
	type top struct {
		cell   int
		server int
	}
	var tops []top
	for si := range c.Servers {
		for _, t := range b.serverCells(c, si) {
			tops = append(tops, top{t, si})
		}
	}
	// Above servers: pair cells of the same size and GPU type (HiveD keeps
	// one hierarchy per GPU type), closest first (same domain and rack),
	// until no two cells of a level remain.
	byType := map[topology.GPUType][]top{}
	var types []topology.GPUType
	for _, t := range tops {
		gt := c.Servers[t.server].GPUs[0].Type
		if _, ok := byType[gt]; !ok {
			types = append(types, gt)
		}
		byType[gt] = append(byType[gt], t)
	}
	for _, gt := range types {
		byLevel := map[int][]top{}
		maxLevel := 0
		for _, t := range byType[gt] {
			l := b.cells[t.cell].level
			byLevel[l] = append(byLevel[l], t)
			maxLevel = max(maxLevel, l)
		}
		for l := 0; l <= maxLevel || len(byLevel[l]) > 1; l++ {
			group := byLevel[l]
			slices.SortStableFunc(group, func(x, y top) int {
				sx, sy := &c.Servers[x.server], &c.Servers[y.server]
				return cmp.Or(cmp.Compare(sx.Domain, sy.Domain), cmp.Compare(sx.Rack, sy.Rack), cmp.Compare(x.server, y.server))
			})
			for i := 0; i+1 < len(group); i += 2 {
				p := b.join(group[i].cell, group[i+1].cell)
				byLevel[l+1] = append(byLevel[l+1], top{p, group[i].server})
			}
		}
	}
	maxLevel := 0
	for _, ce := range b.cells {
		maxLevel = max(maxLevel, ce.level)
	}
	b.free = make([][]int, maxLevel+1)
	for i, ce := range b.cells {
		if ce.parent < 0 {
			b.free[ce.level] = append(b.free[ce.level], i)
		}
	}
	return b, nil
}

// serverCells builds one server's cells and returns its top cells.
func (b *Buddy) serverCells(c *topology.Cluster, si int) []int {
	s := &c.Servers[si]
	n := len(s.GPUs)
	level := make([]int, n)
	for i := range n {
		level[i] = b.newCell(0, [2]int{-1, -1}, []GPURef{{si, i}})
	}
	// score between two cells: mean pair score of their GPUs.
	score := func(x, y int) float64 {
		total := 0
		gx, gy := b.cells[x].gpus, b.cells[y].gpus
		for _, a := range gx {
			for _, c := range gy {
				total += LinkScore(s.Link(a.GPU, c.GPU), s.GPUs[a.GPU].Type)
			}
		}
		return float64(total) / float64(len(gx)*len(gy))
	}
	var tops []int
	for len(level) > 1 {
		// Greedy matching of the best-connected cells.
		used := make([]bool, len(level))
		var next []int
		type pair struct {
			a, b int
			s    float64
		}
		var pairs []pair
		for i := range level {
			for j := i + 1; j < len(level); j++ {
				pairs = append(pairs, pair{i, j, score(level[i], level[j])})
			}
		}
		slices.SortStableFunc(pairs, func(x, y pair) int { return cmp.Compare(y.s, x.s) })
		for _, p := range pairs {
			if used[p.a] || used[p.b] {
				continue
			}
			used[p.a], used[p.b] = true, true
			next = append(next, b.join(level[p.a], level[p.b]))
		}
		for i, u := range used {
			if !u {
				tops = append(tops, level[i]) // odd one out: a top cell
			}
		}
		level = next
	}
	return append(tops, level...)
}

func (b *Buddy) newCell(level int, children [2]int, gpus []GPURef) int {
	b.cells = append(b.cells, cell{level: level, parent: -1, children: children, gpus: gpus})
	return len(b.cells) - 1
}

func (b *Buddy) join(x, y int) int {
	gpus := append(slices.Clone(b.cells[x].gpus), b.cells[y].gpus...)
	p := b.newCell(b.cells[x].level+1, [2]int{x, y}, gpus)
	b.cells[x].parent, b.cells[y].parent = p, p
	return p
}

// Allocate gives job the GPUs of a free cell of 2^ceil(log2(n)) GPUs.
func (b *Buddy) Allocate(job, n int) ([]GPURef, error) {
	if n <= 0 {
		return nil, fmt.Errorf("%w: %d GPUs asked for", ErrBadRequest, n)
	}
	if _, ok := b.jobs[job]; ok {
		return nil, fmt.Errorf("%w: job %d already holds a cell", ErrBadRequest, job)
	}
	k := bits.Len(uint(n - 1))
	l := k
	for l < len(b.free) && len(b.free[l]) == 0 {
		l++
	}
	if l >= len(b.free) {
		return nil, fmt.Errorf("%w: %d GPUs (a cell of %d)", ErrNoCell, n, 1<<k)
	}
	ci := b.take(l)
	for b.cells[ci].level > k {
		b.cells[ci].state = cellSplit
		left, right := b.cells[ci].children[0], b.cells[ci].children[1]
		b.put(right)
		ci = left
	}
	b.cells[ci].state = cellUsed
	b.jobs[job] = ci
	return slices.Clone(b.cells[ci].gpus), nil
}

// Release frees the job's cell and merges free buddies.
func (b *Buddy) Release(job int) error {
	ci, ok := b.jobs[job]
	if !ok {
		return fmt.Errorf("%w: %d", ErrUnknownJob, job)
	}
	delete(b.jobs, job)
	b.cells[ci].state = cellFree
	for p := b.cells[ci].parent; p >= 0; p = b.cells[ci].parent {
		sib := b.cells[p].children[0]
		if sib == ci {
			sib = b.cells[p].children[1]
		}
		if b.cells[sib].state != cellFree {
			break
		}
		b.remove(sib)
		b.cells[p].state = cellFree
		ci = p
	}
	b.put(ci)
	return nil
}

// FreeGPUs returns the number of GPUs in free cells.
func (b *Buddy) FreeGPUs() int {
	n := 0
	for l, list := range b.free {
		n += len(list) << l
	}
	return n
}

// Largest returns the size of the largest free cell (0 if none).
func (b *Buddy) Largest() int {
	for l := len(b.free) - 1; l >= 0; l-- {
		if len(b.free[l]) > 0 {
			return 1 << l
		}
	}
	return 0
}

func (b *Buddy) take(l int) int {
	ci := b.free[l][0]
	b.free[l] = b.free[l][1:]
	return ci
}

func (b *Buddy) put(ci int) {
	l := b.cells[ci].level
	b.cells[ci].state = cellFree
	i, _ := slices.BinarySearch(b.free[l], ci)
	b.free[l] = slices.Insert(b.free[l], i, ci)
}

func (b *Buddy) remove(ci int) {
	l := b.cells[ci].level
	if i, ok := slices.BinarySearch(b.free[l], ci); ok {
		b.free[l] = slices.Delete(b.free[l], i, i+1)
	}
}
