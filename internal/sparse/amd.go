package sparse

import (
	"context"
	"math"
)

// approximateMinimumDegree returns a fill-reducing elimination order of the
// symmetric pattern given by its upper triangle (the diagonal may be
// present): the approximate minimum degree method of P. R. Amestoy,
// T. A. Davis and I. S. Duff ("An approximate minimum degree ordering
// algorithm", SIAM J. Matrix Anal. Appl. 17(4), 1996). It works on the
// quotient graph, in which eliminated nodes become elements standing for
// the cliques they form, so memory stays within the input's size; degrees
// are upper bounds computed from the elements' sizes outside the new
// element; indistinguishable variables are merged into supervariables and
// eliminated together, a variable whose every neighbour is in the new
// element is eliminated with it (mass elimination), and an element inside
// the new one is absorbed (aggressive absorption). Nodes of degree above
// max(16, 10 sqrt(n)), such as the capacity rows of an allocation LP's
// normal equations, are set aside and ordered last, as the paper advises.
// The order is deterministic. It checks ctx every 256 pivots.
func approximateMinimumDegree(ctx context.Context, n int, colPtr, rowIdx []int) ([]int, error) {
	if n == 0 {
		return nil, nil
	}
	// Symmetric adjacency without the diagonal, duplicates removed.
	deg := make([]int, n)
	stamp := make([]int, n)
	for i := range stamp {
		stamp[i] = -1
	}
	for j := range n {
		for p := colPtr[j]; p < colPtr[j+1]; p++ {
			if i := rowIdx[p]; i != j {
				deg[i]++
				deg[j]++
			}
		}
	}
	denseLimit := max(16, int(10*math.Sqrt(float64(n))))
	isDense := make([]bool, n)
	nDense := 0
	for i, d := range deg {
		if d > denseLimit && n > 32 {
			isDense[i] = true
			nDense++
		}
	}
	// Lists of the sparse nodes: neighbours that are sparse too.
	pe := make([]int, n)
	ln := make([]int, n)
	total := 0
	for i := range n {
		pe[i] = total
		if !isDense[i] {
			total += deg[i]
		}
	}
	size := total + total/5 + 2*n + 16
	iw := make([]int, size)
	for j := range n {
		for p := colPtr[j]; p < colPtr[j+1]; p++ {
			i := rowIdx[p]
			if i == j || isDense[i] || isDense[j] {
				continue
			}
			iw[pe[i]+ln[i]] = j
			ln[i]++
			iw[pe[j]+ln[j]] = i
			ln[j]++
		}
	}
	// Remove duplicate neighbours.
	for i := range n {
		if isDense[i] {
			continue
		}
		k := pe[i]
		for q := pe[i]; q < pe[i]+ln[i]; q++ {
			if j := iw[q]; stamp[j] != i {
				stamp[j] = i
				iw[k] = j
				k++
			}
		}
		ln[i] = k - pe[i]
	}
	free := total

	const (
		variable = iota
		element
		dead
	)
	kind := make([]int8, n)
	elen := make([]int, n) // elements at the front of a variable's list
	nv := make([]int, n)   // supervariable size; negative while in the pivot element
	degree := make([]int, n)
	parent := make([]int, n)
	isPivot := make([]bool, n)
	w := make([]int, n)
	mark := make([]int, n)
	for i := range n {
		nv[i] = 1
		parent[i] = -1
		degree[i] = ln[i]
		mark[i] = -1
		if isDense[i] {
			kind[i] = dead
		}
	}
	b := newBuckets(n)
	for i := n - 1; i >= 0; i-- {
		if !isDense[i] {
			b.insert(i, degree[i])
		}
	}
	hashHead := make([]int, n)
	hashNext := make([]int, n)
	hash := make([]int, n)
	for i := range hashHead {
		hashHead[i] = -1
	}
	var lp, kept, keptV, order []int
	wflg := 0
	markStamp := 0
	nel := 0
	target := n - nDense

	// compact moves every live list to the front of iw (garbage
	// collection), leaving room at the end.
	compact := func(need int) {
		if free+need <= len(iw) {
			return
		}
		live := 0
		for i := range n {
			if kind[i] != dead {
				live += ln[i]
			}
		}
		newSize := max(len(iw), live+need+live/5+n)
		nw := make([]int, newSize)
		pos := 0
		for i := range n {
			if kind[i] == dead {
				continue
			}
			copy(nw[pos:], iw[pe[i]:pe[i]+ln[i]])
			pe[i] = pos
			pos += ln[i]
		}
		iw, free = nw, pos
	}

	for nel < target {
		if len(order)&255 == 0 {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
		}
		p := b.popMin()
		isPivot[p] = true
		order = append(order, p)
		nvp := nv[p]
		nv[p] = -nvp
		// The new element Lp: the variables of p's elements and p's
		// variable neighbours; p's elements are absorbed.
		lp = lp[:0]
		degme := 0
		for q := pe[p]; q < pe[p]+elen[p]; q++ {
			e := iw[q]
			if kind[e] != element {
				continue
			}
			for r := pe[e]; r < pe[e]+ln[e]; r++ {
				if i := iw[r]; kind[i] == variable && nv[i] > 0 {
					degme += nv[i]
					nv[i] = -nv[i]
					lp = append(lp, i)
				}
			}
			kind[e], parent[e] = dead, p
		}
		for q := pe[p] + elen[p]; q < pe[p]+ln[p]; q++ {
			if i := iw[q]; kind[i] == variable && nv[i] > 0 {
				degme += nv[i]
				nv[i] = -nv[i]
				lp = append(lp, i)
			}
		}
		kind[p] = element
		ln[p], elen[p] = 0, 0
		compact(len(lp))
		pe[p] = free
		copy(iw[free:], lp)
		free += len(lp)
		ln[p] = len(lp)
		for _, i := range lp {
			b.remove(i)
		}
		// w[e] - wflg = |Le \ Lp| for the elements next to Lp.
		wflg += n + 1
		for _, i := range lp {
			for q := pe[i]; q < pe[i]+elen[i]; q++ {
				e := iw[q]
				if kind[e] != element || e == p {
					continue
				}
				if w[e] < wflg {
					w[e] = degree[e] + wflg
				}
				w[e] -= -nv[i]
			}
		}
		// Update the variables of Lp: their element lists (absorbing the
		// elements inside Lp, adding p), their variable lists (dropping
		// Lp), approximate degrees and hashes.
		alive := lp[:0]
		for _, i := range lp {
			nvi := -nv[i]
			kept = kept[:0]
			ext := 0
			h := p
			for q := pe[i]; q < pe[i]+elen[i]; q++ {
				e := iw[q]
				if kind[e] != element || e == p {
					continue
				}
				if we := w[e] - wflg; we > 0 {
					ext += we
					kept = append(kept, e)
					h += e
				} else {
					kind[e], parent[e] = dead, p // aggressive absorption
				}
			}
			keptV = keptV[:0]
			for q := pe[i] + elen[i]; q < pe[i]+ln[i]; q++ {
				if j := iw[q]; kind[j] == variable && nv[j] > 0 {
					ext += nv[j]
					keptV = append(keptV, j)
					h += j
				}
			}
			// The new list is no longer than the old: p entered, but p
			// left the variables or one of p's elements left the elements.
			pos := pe[i]
			iw[pos] = p
			copy(iw[pos+1:], kept)
			copy(iw[pos+1+len(kept):], keptV)
			elen[i], ln[i] = 1+len(kept), 1+len(kept)+len(keptV)
			if ext == 0 {
				// Mass elimination: every neighbour of i is in Lp.
				kind[i], parent[i], nv[i] = dead, p, 0
				nvp += nvi
				degme -= nvi
				continue
			}
			d := min(degree[i]+degme-nvi, ext+degme-nvi)
			degree[i] = d
			hash[i] = h % n
			alive = append(alive, i)
		}
		lp = alive
		// Supervariables: variables of Lp with the same lists.
		for _, i := range lp {
			h := hash[i]
			hashNext[i] = hashHead[h]
			hashHead[h] = i
		}
		for _, i := range lp {
			h := hash[i]
			if hashHead[h] < 0 {
				continue
			}
			for i2 := hashHead[h]; i2 >= 0; i2 = hashNext[i2] {
				if kind[i2] != variable || nv[i2] == 0 {
					continue
				}
				markStamp++
				for q := pe[i2]; q < pe[i2]+ln[i2]; q++ {
					mark[iw[q]] = markStamp
				}
				for j := hashNext[i2]; j >= 0; j = hashNext[j] {
					if kind[j] != variable || nv[j] == 0 || ln[j] != ln[i2] || elen[j] != elen[i2] {
						continue
					}
					same := true
					for q := pe[j]; q < pe[j]+ln[j]; q++ {
						if mark[iw[q]] != markStamp {
							same = false
							break
						}
					}
					if same {
						// j joins i2: both are in Lp (nv negative).
						degree[i2] -= -nv[j]
						nv[i2] += nv[j]
						kind[j], parent[j], nv[j] = dead, i2, 0
					}
				}
			}
			hashHead[h] = -1
		}
		// Finish the step: Lp's variables go back to the buckets.
		nel += nvp
		degme = 0
		keep := pe[p]
		for _, i := range lp {
			if kind[i] != variable || nv[i] == 0 {
				continue
			}
			nv[i] = -nv[i]
			degme += nv[i]
			degree[i] = max(0, min(degree[i], n-nel-nv[i]))
			b.insert(i, degree[i])
			iw[keep] = i
			keep++
		}
		ln[p] = keep - pe[p]
		degree[p] = degme
		nv[p] = nvp
	}
	// The final order: each pivot with the variables eliminated with it,
	// then the dense nodes.
	group := make([][]int, n)
	for j := range n {
		if kind[j] != dead || isPivot[j] || isDense[j] || parent[j] < 0 {
			continue
		}
		r := parent[j]
		for !isPivot[r] {
			r = parent[r]
		}
		group[r] = append(group[r], j)
	}
	out := make([]int, 0, n)
	for _, p := range order {
		out = append(out, p)
		out = append(out, group[p]...)
	}
	for i := range n {
		if isDense[i] {
			out = append(out, i)
		}
	}
	return out, nil
}
