package elastic

import (
	"fmt"
	"math/bits"
	"slices"
)

// Worker is a job's presence on a loaned server: how many GPUs its workers
// hold there, and whether they are flexible (workers of an elastic job
// above its base demand, which can be scaled in without preempting it).
// It is a plain value, safe for concurrent use.
type Worker struct {
	Job      int
	GPUs     int
	Flexible bool
}

// ReclaimResult says which servers go back and at what price. It is a
// plain value, safe for concurrent reads.
type ReclaimResult struct {
	// Servers are the indices of the servers returned.
	Servers []int
	// Preempted are the jobs stopped (their workers everywhere), and
	// ScaledIn the jobs that only lose flexible workers on returned servers.
	Preempted, ScaledIn []int
}

// Reclaim chooses n of the loaned servers (servers[s] lists the workers on
// server s) to hand back to inference with few preemptions, by Lyra's
// heuristic (Li et al., "Lyra: Elastic Scheduling for Deep Learning
// Clusters", EuroSys 2023, section 4): servers holding only flexible
// workers (or none) go first, as emptying them preempts nothing; then,
// repeatedly, the server of least cost, the sum over the jobs with base
// workers on it of 1 / (servers the job spans), is emptied by preempting
// those jobs on all their servers, and the costs are recomputed, until n
// servers are free. Ties go to the server whose preemptions vacate fewer
// GPUs elsewhere (Lyra's collateral damage), then to the lower index.
// Asking for more servers than there are is an error wrapping ErrInvalid,
// as is a worker of more than MaxGPUsPerServer GPUs. Reclaim is a function
// of its arguments, safe for concurrent use.
func Reclaim(servers [][]Worker, n int) (*ReclaimResult, error) {
	if n < 0 || n > len(servers) {
		return nil, fmt.Errorf("%w: reclaim %d of %d servers", ErrInvalid, n, len(servers))
	}
	// Jobs by index; per server, each job once with its GPUs there and
	// whether it has base workers there.
	type entry struct {
		job, gpus int
		base      bool
	}
	index := map[int]int{}
	var ids []int
	var span, gpus []int // servers where a job has base workers; its GPUs on all
	on := make([][]entry, len(servers))
	for s, ws := range servers {
		for _, w := range ws {
			if w.GPUs < 0 || w.GPUs > MaxGPUsPerServer {
				return nil, fmt.Errorf("%w: job %d has %d GPUs on server %d, want 0 to %d", ErrInvalid, w.Job, w.GPUs, s, MaxGPUsPerServer)
			}
			j, ok := index[w.Job]
			if !ok {
				j = len(ids)
				index[w.Job] = j
				ids, span, gpus = append(ids, w.Job), append(span, 0), append(gpus, 0)
			}
			gpus[j] += w.GPUs
			k := slices.IndexFunc(on[s], func(e entry) bool { return e.job == j })
			if k < 0 {
				on[s] = append(on[s], entry{job: j})
				k = len(on[s]) - 1
			}
			on[s][k].gpus += w.GPUs
			if !w.Flexible && !on[s][k].base {
				on[s][k].base = true
				span[j]++
			}
		}
	}
	baseOn := make([][]int, len(ids)) // servers where a job has base workers
	blockers := make([]int, len(servers))
	nFree := 0
	for s := range on {
		for _, e := range on[s] {
			if e.base {
				baseOn[e.job] = append(baseOn[e.job], s)
				blockers[s]++
			}
		}
		if blockers[s] == 0 {
			nFree++
		}
	}
	preempted := make([]bool, len(ids))
	for nFree < n {
		best, bestCost, bestDamage := -1, 0.0, 0
		for s := range servers {
			if blockers[s] == 0 {
				continue
			}
			cost, damage := 0.0, 0
			for _, e := range on[s] {
				if e.base && !preempted[e.job] {
					cost += 1 / float64(span[e.job])
					damage += gpus[e.job] - e.gpus
				}
			}
			if best < 0 || cost < bestCost-1e-12 || cost < bestCost+1e-12 && damage < bestDamage {
				best, bestCost, bestDamage = s, cost, damage
			}
		}
		for _, e := range on[best] {
			if e.base && !preempted[e.job] {
				preempted[e.job] = true
				for _, s := range baseOn[e.job] {
					if blockers[s]--; blockers[s] == 0 {
						nFree++
					}
				}
			}
		}
	}
	// Return n free servers: those emptied by preemption or holding the
	// fewest flexible GPUs first (so fewer jobs shrink).
	var cands []int
	for s := range servers {
		if blockers[s] == 0 {
			cands = append(cands, s)
		}
	}
	live := func(s int) int {
		g := 0
		for _, e := range on[s] {
			if !preempted[e.job] {
				g += e.gpus
			}
		}
		return g
	}
	slices.SortStableFunc(cands, func(a, b int) int { return live(a) - live(b) })
	out := &ReclaimResult{Servers: cands[:n]}
	slices.Sort(out.Servers)
	for j, p := range preempted {
		if p {
			out.Preempted = append(out.Preempted, ids[j])
		}
	}
	slices.Sort(out.Preempted)
	scaled := make([]bool, len(ids))
	for _, s := range out.Servers {
		for _, e := range on[s] {
			if !preempted[e.job] && !scaled[e.job] {
				scaled[e.job] = true
				out.ScaledIn = append(out.ScaledIn, ids[e.job])
			}
		}
	}
	slices.Sort(out.ScaledIn)
	return out, nil
}

// ReclaimOracle finds by exhaustive search the fewest preemptions that
// free n servers: returning a set of servers preempts every job with base
// workers on any of them. It tries all subsets, so it is for small
// instances (at most 24 servers), as a check on Reclaim.
func ReclaimOracle(servers [][]Worker, n int) (int, error) {
	if n < 0 || n > len(servers) || len(servers) > 24 {
		return 0, fmt.Errorf("%w: oracle for %d of %d servers (at most 24)", ErrInvalid, n, len(servers))
	}
	// Per server, the set of jobs with base workers there, as bits.
	index := map[int]int{}
	for _, ws := range servers {
		for _, w := range ws {
			if _, ok := index[w.Job]; !ok && !w.Flexible {
				index[w.Job] = len(index)
			}
		}
	}
	words := (len(index) + 63) / 64
	sets := make([][]uint64, len(servers))
	for s, ws := range servers {
		sets[s] = make([]uint64, words)
		for _, w := range ws {
			if !w.Flexible {
				j := index[w.Job]
				sets[s][j/64] |= 1 << (j % 64)
			}
		}
	}
	union := make([]uint64, words)
	best := -1
	for mask := uint32(0); mask < 1<<len(servers); mask++ {
		if bits.OnesCount32(mask) != n {
			continue
		}
		clear(union)
		for s := range servers {
			if mask&(1<<s) != 0 {
				for k, x := range sets[s] {
					union[k] |= x
				}
			}
		}
		c := 0
		for _, x := range union {
			c += bits.OnesCount64(x)
		}
		if best < 0 || c < best {
			best = c
		}
	}
	return max(best, 0), nil
}
