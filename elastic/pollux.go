package elastic

import (
	"fmt"
	"math"
)

// Pollux is a Pollux-style goodput policy (Qiao et al., "Pollux:
// Co-adaptive Cluster Scheduling for Goodput-Optimized Deep Learning",
// OSDI 2021, section 4.2): it chooses every job's GPUs to maximise the
// power mean, with exponent P (Pollux: -1), of the jobs' speedups, where
// job j's speedup on w workers is its throughput there over its throughput
// on a fair share of ceil(GPUs / jobs) GPUs (the artifact's
// Problem.__init__), in whole workers (at least one). Give each job a Curve of goodput at the best batch
// size for each allocation (sim.GoodputCurve) for Pollux's co-adaptation.
// A job whose allocation changes has its speedup scaled by Pollux's
// restart factor max(age - restarts x RestartPenalty, 0) / (age +
// RestartPenalty), except at its first start (the factor is 0 at age 0,
// and a first start costs the same whenever it happens). Pollux searches with a genetic algorithm; this policy
// searches locally instead, from the current allocation: it adds workers
// to the job that improves the objective most per GPU while GPUs are
// free, then moves single workers between jobs while a move improves it.
// Running jobs keep at least their base demand (the Policy contract;
// Pollux itself may suspend jobs, which a power mean with p = -1 rarely
// chooses). It holds no state and is safe for concurrent use (with curves
// that are).
type Pollux struct {
	// P is the power-mean exponent, below zero (zero means -1).
	P float64
	// RestartPenalty is in seconds (zero means Pollux's 30; negative
	// turns the penalty off).
	RestartPenalty float64
}

// Allocate implements Policy.
func (p Pollux) Allocate(jobs []State, gpus int) ([]int, error) {
	if err := validate(jobs, gpus); err != nil {
		return nil, err
	}
	exp, pen := p.P, p.RestartPenalty
	if exp == 0 {
		exp = -1
	}
	if !(exp < 0) || math.IsInf(exp, -1) {
		return nil, fmt.Errorf("%w: power-mean exponent %v (want finite and below 0)", ErrInvalid, exp)
	}
	if math.IsNaN(pen) || math.IsInf(pen, 0) {
		return nil, fmt.Errorf("%w: restart penalty %v s", ErrInvalid, pen)
	}
	if pen == 0 {
		pen = 30
	}
	n := len(jobs)
	w := make([]int, n)
	free := gpus
	for i := range jobs {
		w[i] = jobs[i].Workers
		free -= w[i] * jobs[i].GPUsPerWorker
	}
	if free < 0 {
		return nil, fmt.Errorf("%w: running jobs hold %d GPUs more than the %d there are", ErrInvalid, -free, gpus)
	}
	if n == 0 {
		return w, nil
	}
	fair := max(1, (gpus+n-1)/n) // GPUs
	base := make([]float64, n)
	for i := range jobs {
		base[i] = jobs[i].Curve.Throughput(min(max(1, fair/jobs[i].GPUsPerWorker), jobs[i].MaxWorkers))
		if !(base[i] > 0) {
			return nil, fmt.Errorf("%w: job %d has throughput %v on its fair share", ErrInvalid, jobs[i].ID, base[i])
		}
	}
	// f is job i's term of the objective, minimised: (speedup + 1e-3)^P.
	f := func(i, k int) float64 {
		s := 0.0
		if k > 0 {
			s = jobs[i].Curve.Throughput(k) / base[i]
			// A job's first start pays no penalty: it costs the same
			// whenever it happens (Pollux's factor is 0 at age 0).
			if k != jobs[i].Workers && pen > 0 && (jobs[i].Workers > 0 || jobs[i].Restarts > 0) {
				s *= math.Max(jobs[i].Age-float64(jobs[i].Restarts)*pen, 0) / (jobs[i].Age + pen)
			}
		}
		return math.Pow(s+1e-3, exp)
	}
	// up and down give the next allocation above and below w[i].
	up := func(i int) int {
		if w[i] == 0 {
			return jobs[i].MinWorkers
		}
		if w[i] >= jobs[i].MaxWorkers {
			return -1
		}
		return w[i] + 1
	}
	down := func(i int) int {
		switch {
		case w[i] == 0:
			return -1
		case w[i] > jobs[i].MinWorkers:
			return w[i] - 1
		case jobs[i].Workers == 0:
			return 0 // not running yet: it may stay queued
		}
		return -1
	}
	cur := make([]float64, n)
	for i := range jobs {
		cur[i] = f(i, w[i])
	}
	addD := make([]float64, n) // change of the objective for up(i)
	addG := make([]int, n)     // GPUs it takes
	remD := make([]float64, n)
	remG := make([]int, n)
	const tol = 1e-12
	for iter := 0; iter < 8*(gpus+n); iter++ {
		for i := range jobs {
			addD[i], remD[i] = math.Inf(1), math.Inf(1)
			if k := up(i); k > 0 {
				addD[i], addG[i] = f(i, k)-cur[i], (k-w[i])*jobs[i].GPUsPerWorker
			}
			if k := down(i); k >= 0 {
				remD[i], remG[i] = f(i, k)-cur[i], (w[i]-k)*jobs[i].GPUsPerWorker
			}
		}
		// The best addition into free GPUs, per GPU.
		best, bestV := -1, 0.0
		for i := range jobs {
			if addG[i] <= free && addD[i] < 0 {
				if v := addD[i] / float64(addG[i]); v < bestV-tol*math.Abs(cur[i]) {
					best, bestV = i, v
				}
			}
		}
		if best >= 0 {
			k := up(best)
			free -= addG[best]
			w[best], cur[best] = k, f(best, k)
			continue
		}
		// The best single move: take from a, give to b.
		ba, bb, bv := -1, -1, 0.0
		for b := range jobs {
			if math.IsInf(addD[b], 1) || addD[b] >= 0 {
				continue
			}
			for a := range jobs {
				if a == b || math.IsInf(remD[a], 1) || free+remG[a] < addG[b] {
					continue
				}
				if v := addD[b] + remD[a]; v < bv-tol*(math.Abs(cur[a])+math.Abs(cur[b])) {
					ba, bb, bv = a, b, v
				}
			}
		}
		if ba < 0 {
			break
		}
		ka, kb := down(ba), up(bb)
		free += remG[ba] - addG[bb]
		w[ba], cur[ba] = ka, f(ba, ka)
		w[bb], cur[bb] = kb, f(bb, kb)
	}
	return w, nil
}
