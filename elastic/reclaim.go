package elastic

import (
	"fmt"
	"math/bits"
	"slices"
)

// Worker is a job's presence on a loaned server: how many GPUs its workers
// hold there, and whether they are flexible (workers of an elastic job
// above its base demand, which can be scaled in without preempting it).
type Worker struct {
	Job      int
	GPUs     int
	Flexible bool
}

// ReclaimResult says which servers go back and at what price.
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
// Asking for more servers than there are is an error wrapping ErrInvalid.
func Reclaim(servers [][]Worker, n int) (*ReclaimResult, error) {
	if n < 0 || n > len(servers) {
		return nil, fmt.Errorf("%w: reclaim %d of %d servers", ErrInvalid, n, len(servers))
	}
	span := map[int]int{} // servers where a job has base workers
	gpus := map[int]int{} // GPUs of a job across the loaned servers
	for s, ws := range servers {
		for _, w := range ws {
			if w.GPUs < 0 {
				return nil, fmt.Errorf("%w: job %d has %d GPUs on server %d", ErrInvalid, w.Job, w.GPUs, s)
			}
			gpus[w.Job] += w.GPUs
		}
		seen := map[int]bool{}
		for _, w := range ws {
			if !w.Flexible && !seen[w.Job] {
				seen[w.Job] = true
				span[w.Job]++
			}
		}
	}
	preempted := map[int]bool{}
	free := func(s int) bool {
		for _, w := range servers[s] {
			if !w.Flexible && !preempted[w.Job] {
				return false
			}
		}
		return true
	}
	count := func() int {
		k := 0
		for s := range servers {
			if free(s) {
				k++
			}
		}
		return k
	}
	for count() < n {
		best, bestCost, bestDamage := -1, 0.0, 0
		for s := range servers {
			if free(s) {
				continue
			}
			cost, damage := 0.0, 0
			seen := map[int]bool{}
			for _, w := range servers[s] {
				if w.Flexible || preempted[w.Job] || seen[w.Job] {
					continue
				}
				seen[w.Job] = true
				cost += 1 / float64(span[w.Job])
				for _, w2 := range servers[s] {
					if w2.Job == w.Job {
						damage -= w2.GPUs
					}
				}
				damage += gpus[w.Job]
			}
			if best < 0 || cost < bestCost-1e-12 || cost < bestCost+1e-12 && damage < bestDamage {
				best, bestCost, bestDamage = s, cost, damage
			}
		}
		for _, w := range servers[best] {
			if !w.Flexible {
				preempted[w.Job] = true
			}
		}
	}
	// Return n free servers: those emptied by preemption or holding the
	// fewest flexible GPUs first (so fewer jobs shrink).
	var cands []int
	for s := range servers {
		if free(s) {
			cands = append(cands, s)
		}
	}
	live := func(s int) int {
		g := 0
		for _, w := range servers[s] {
			if !preempted[w.Job] {
				g += w.GPUs
			}
		}
		return g
	}
	slices.SortStableFunc(cands, func(a, b int) int { return live(a) - live(b) })
	out := &ReclaimResult{Servers: cands[:n]}
	slices.Sort(out.Servers)
	for j := range preempted {
		out.Preempted = append(out.Preempted, j)
	}
	slices.Sort(out.Preempted)
	scaled := map[int]bool{}
	for _, s := range out.Servers {
		for _, w := range servers[s] {
			if !preempted[w.Job] && !scaled[w.Job] {
				scaled[w.Job] = true
				out.ScaledIn = append(out.ScaledIn, w.Job)
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
	best := -1
	for mask := uint32(0); mask < 1<<len(servers); mask++ {
		if bits.OnesCount32(mask) != n {
			continue
		}
		jobs := map[int]bool{}
		for s := range servers {
			if mask&(1<<s) == 0 {
				continue
			}
			for _, w := range servers[s] {
				if !w.Flexible {
					jobs[w.Job] = true
				}
			}
		}
		if best < 0 || len(jobs) < best {
			best = len(jobs)
		}
	}
	return max(best, 0), nil
}
