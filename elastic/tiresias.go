package elastic

import (
	"fmt"
	"math"

	"github.com/gpusched/gpusched/gang"
)

// Tiresias is Tiresias's preemptive, gang-admitting queue (Gu et al.,
// "Tiresias: A GPU Cluster Manager for Distributed Deep Learning", NSDI
// 2019, section 4) as an elastic Policy: at every call it ranks every job,
// running or queued, by Order (gang.LAS2D for 2D-LAS with its thresholds
// and starvation guard, a *gang.Gittins2D for 2D-Gittins, or any other
// gang.Order), and in that order keeps or starts each job on its base
// demand, MinWorkers x GPUsPerWorker GPUs, while they fit; a job that does
// not fit is skipped and later ones may take the GPUs left (gang.Greedy,
// as Tiresias's simulator and the Pollux artifact's Tiresias do), and a
// running job that no longer fits is preempted (its workers set to 0; the
// simulator counts a preemption and charges the restart). Jobs never grow
// beyond their base demand: Tiresias's jobs are rigid.
//
// It is gang.Priority's decision, made on the jobs' attained service
// (State.Attained, GPU-seconds) and waiting time (State.Waiting) on one
// pool of GPUs: the ranking, the thresholds and the Gittins index are
// package gang's. Call it every scheduling interval (the order changes as
// jobs attain service). The Pollux artifact's Tiresias (simulator/
// tiresias.py at adaptdl c793c70) is LAS2D{Thresholds: {57600}} (two
// queues, 16 GPU-hours) without a starvation guard; Tiresias's own
// simulator defaults to gang.DefaultThresholds (3,250, 7,200 and 18,000
// GPU-seconds). Order must be set (ErrInvalid otherwise). It holds no
// state and is safe for concurrent use if its Order is (gang's are).
type Tiresias struct {
	Order gang.Order
}

// Allocate implements Policy.
func (p Tiresias) Allocate(jobs []State, gpus int) ([]int, error) {
	if p.Order == nil {
		return nil, fmt.Errorf("%w: Tiresias has no order", ErrInvalid)
	}
	if err := validate(jobs, gpus); err != nil {
		return nil, err
	}
	w := make([]int, len(jobs))
	if len(jobs) == 0 {
		return w, nil
	}
	// The clock: a job's arrival plus its age (the same for every job).
	now := jobs[0].Arrival + jobs[0].Age
	free := gpus
	var waiting, running []gang.JobView
	index := make(map[int]int, len(jobs))
	for i := range jobs {
		s := &jobs[i]
		index[s.ID] = i
		need := s.MinWorkers * s.GPUsPerWorker
		v := gang.JobView{ID: s.ID, Arrival: s.Arrival, ScaleFactor: need, Weight: 1, Steps: s.Work, Remaining: s.Remaining,
			Throughput: []float64{s.Curve.Throughput(s.MinWorkers)}, Attained: s.Attained, Type: -1, Queued: now - s.Waiting}
		if s.Workers > 0 {
			v.Type, v.Started = 0, now
			free -= s.Workers * s.GPUsPerWorker
			running = append(running, v)
			continue
		}
		waiting = append(waiting, v)
	}
	if free < 0 {
		return nil, fmt.Errorf("%w: running jobs hold %d GPUs more than the %d there are", ErrInvalid, -free, gpus)
	}
	// Running jobs hold their base demand in gang's view: what they hold
	// above it (a policy before this one grew them) is free.
	for _, v := range running {
		free += jobs[index[v.ID]].Workers*jobs[index[v.ID]].GPUsPerWorker - v.ScaleFactor
	}
	d, err := gang.Priority{Order: p.Order, Backfill: gang.Greedy}.Decide(now, []int{free}, waiting, running)
	if err != nil {
		return nil, err
	}
	for _, v := range running {
		w[index[v.ID]] = jobs[index[v.ID]].MinWorkers
	}
	for _, id := range d.Preempt {
		w[index[id]] = 0
	}
	for _, st := range d.Start {
		w[index[st.JobID]] = jobs[index[st.JobID]].MinWorkers
	}
	return w, nil
}

// checkService refuses attained service or waiting times that are
// negative or not finite.
func checkService(s *State) error {
	if !(s.Attained >= 0) || math.IsInf(s.Attained, 0) || !(s.Waiting >= 0) || math.IsInf(s.Waiting, 0) {
		return fmt.Errorf("%w: job %d has attained %v GPU-s and waited %v s", ErrInvalid, s.ID, s.Attained, s.Waiting)
	}
	return nil
}
