package elastic

import (
	"cmp"
	"container/heap"
	"fmt"
	"math"
	"slices"
)

// Admission orders the queued jobs that the first phase of a policy admits
// at their base demand. Its values are constants, safe for concurrent use.
type Admission int

const (
	// SJF admits the job with the least time left on its base demand
	// first (Lyra's phase 1, EuroSys 2023, section 5.2).
	SJF Admission = iota
	// ArrivalOrder admits the earliest arrival first.
	ArrivalOrder
)

// admit gives every running job its base demand and then admits queued
// jobs in the given order while their base demand fits; a job that does
// not fit is skipped (it waits) unless strict, where it blocks the queue.
// It returns the workers and the GPUs left.
func admit(jobs []State, gpus int, order Admission, strict bool) ([]int, int, error) {
	if err := validate(jobs, gpus); err != nil {
		return nil, 0, err
	}
	w := make([]int, len(jobs))
	free := gpus
	var queued []int
	for i := range jobs {
		if jobs[i].Workers > 0 {
			w[i] = jobs[i].MinWorkers
			free -= w[i] * jobs[i].GPUsPerWorker
		} else {
			queued = append(queued, i)
		}
	}
	if free < 0 {
		return nil, 0, fmt.Errorf("%w: running jobs' base demands need %d GPUs more than the %d there are", ErrInvalid, -free, gpus)
	}
	key := func(i int) float64 {
		if order == SJF {
			return jobs[i].Time(jobs[i].MinWorkers)
		}
		return jobs[i].Arrival
	}
	slices.SortStableFunc(queued, func(a, b int) int {
		if c := cmp.Compare(key(a), key(b)); c != 0 {
			return c
		}
		return cmp.Compare(jobs[a].ID, jobs[b].ID)
	})
	for _, i := range queued {
		need := jobs[i].MinWorkers * jobs[i].GPUsPerWorker
		if need > free {
			if strict {
				break
			}
			continue
		}
		w[i], free = jobs[i].MinWorkers, free-need
	}
	return w, free, nil
}

// FIFO admits jobs at their base demand in order of arrival and never
// scales them: the production baseline of Lyra's evaluation (section 7).
// Strict stops at the first job that does not fit (head-of-line
// blocking); otherwise later jobs that fit go ahead (backfilling). It holds
// no state and is safe for concurrent use (with curves that are).
type FIFO struct{ Strict bool }

// Allocate implements Policy.
func (f FIFO) Allocate(jobs []State, gpus int) ([]int, error) {
	w, _, err := admit(jobs, gpus, ArrivalOrder, f.Strict)
	return w, err
}

// Lyra is Lyra's two-phase allocation (Li et al., "Lyra: Elastic
// Scheduling for Deep Learning Clusters", EuroSys 2023, section 5.2).
// Phase 1 gives running jobs their base demand and admits queued
// inelastic jobs and elastic jobs' base demands shortest job first
// (Admission, SJF by default), skipping those that do not fit. Phase 2
// shares the GPUs left among the admitted elastic jobs by the
// multiple-choice knapsack of MultipleChoiceKnapsack: job j's item k gives
// k extra workers and is worth T_j(w_min) - T_j(w_min + k), the time it
// saves, with T_j(w) = remaining work / throughput on w workers (Lyra's
// T_min w_max / w under a Linear curve). The knapsack's size is capped
// (MaxKnapsackCells, MaxKnapsackWork; ErrInvalid beyond). It holds no
// state and is safe for concurrent use (with curves that are).
type Lyra struct{ Admission Admission }

// Allocate implements Policy.
func (l Lyra) Allocate(jobs []State, gpus int) ([]int, error) {
	w, free, err := admit(jobs, gpus, l.Admission, false)
	if err != nil {
		return nil, err
	}
	var groups [][]Item
	var owner []int
	for i := range jobs {
		s := &jobs[i]
		if w[i] == 0 || !s.Elastic() {
			continue
		}
		base := s.Time(s.MinWorkers)
		items := make([]Item, 0, s.MaxWorkers-s.MinWorkers)
		for k := 1; k <= s.MaxWorkers-s.MinWorkers; k++ {
			v := base - s.Time(s.MinWorkers+k)
			if math.IsNaN(v) || math.IsInf(v, 0) {
				v = 0 // no throughput there (a curve with a hole): never chosen
			}
			items = append(items, Item{Weight: k * s.GPUsPerWorker, Value: v})
		}
		groups, owner = append(groups, items), append(owner, i)
	}
	if len(groups) == 0 {
		return w, nil
	}
	choice, _, err := MultipleChoiceKnapsack(groups, free)
	if err != nil {
		return nil, err
	}
	for g, c := range choice {
		if c >= 0 {
			w[owner[g]] += c + 1
		}
	}
	return w, nil
}

// AFS is an AFS-style policy (Hwang et al., "Elastic Resource Sharing for
// Distributed Deep Learning", NSDI 2021) as Lyra reimplements it (section
// 7.3): base demands first (phase 1 as in Lyra), then one worker at a time
// to the job whose throughput grows the most, relatively, per GPU:
// (X(w+1) - X(w)) / X(w) / GPUsPerWorker. Ties go to the job with less
// time left (AFS's short-job preference). Under linear scaling the gain is
// 1 / (w x GPUsPerWorker), so spare GPUs go to the smallest jobs first. It
// holds no state and is safe for concurrent use (with curves that are).
type AFS struct{ Admission Admission }

// Allocate implements Policy.
func (a AFS) Allocate(jobs []State, gpus int) ([]int, error) {
	return greedy(jobs, gpus, a.Admission, func(s *State, w int) float64 {
		x := s.Curve.Throughput(w)
		return (s.Curve.Throughput(w+1) - x) / x / float64(s.GPUsPerWorker)
	})
}

// Optimus is an Optimus-style greedy policy (Peng et al., "Optimus: An
// Efficient Dynamic Resource Scheduler for Deep Learning Clusters",
// EuroSys 2018, section 4.1, as the Pollux artifact implements it): after
// the base demands (phase 1 as in Lyra), one worker at a time goes to the
// job with the largest (t(w) - t(w+1)) x remaining work per GPU, that is
// the largest cut in its time to finish, T(w) - T(w+1). It holds no state
// and is safe for concurrent use (with curves that are).
type Optimus struct{ Admission Admission }

// Allocate implements Policy.
func (o Optimus) Allocate(jobs []State, gpus int) ([]int, error) {
	return greedy(jobs, gpus, o.Admission, func(s *State, w int) float64 {
		return (s.Time(w) - s.Time(w+1)) / float64(s.GPUsPerWorker)
	})
}

// greedy admits base demands and then adds one worker at a time to the
// admitted elastic job of the largest positive gain(s, w) that fits.
func greedy(jobs []State, gpus int, order Admission, gain func(s *State, w int) float64) ([]int, error) {
	w, free, err := admit(jobs, gpus, order, false)
	if err != nil {
		return nil, err
	}
	h := &gainHeap{}
	push := func(i int) {
		s := &jobs[i]
		if w[i] == 0 || w[i] >= s.MaxWorkers || s.GPUsPerWorker > free {
			return
		}
		if g := gain(s, w[i]); g > 0 && !math.IsInf(g, 0) {
			heap.Push(h, gainItem{job: i, gain: g, time: s.Time(w[i])})
		}
	}
	for i := range jobs {
		push(i)
	}
	for h.Len() > 0 {
		it := heap.Pop(h).(gainItem)
		s := &jobs[it.job]
		if s.GPUsPerWorker > free {
			continue
		}
		w[it.job]++
		free -= s.GPUsPerWorker
		push(it.job)
	}
	return w, nil
}

type gainItem struct {
	job        int
	gain, time float64
}

type gainHeap struct{ items []gainItem }

func (h *gainHeap) Len() int { return len(h.items) }
func (h *gainHeap) Less(a, b int) bool {
	x, y := h.items[a], h.items[b]
	if x.gain != y.gain {
		return x.gain > y.gain
	}
	if x.time != y.time {
		return x.time < y.time
	}
	return x.job < y.job
}
func (h *gainHeap) Swap(a, b int) { h.items[a], h.items[b] = h.items[b], h.items[a] }
func (h *gainHeap) Push(x any)    { h.items = append(h.items, x.(gainItem)) }
func (h *gainHeap) Pop() any {
	x := h.items[len(h.items)-1]
	h.items = h.items[:len(h.items)-1]
	return x
}
