package elastic

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/gpusched/gpusched/topology"
)

// Pool is one GPU type of a heterogeneous cluster: Nodes servers of
// GPUsPerNode GPUs of Type. A job runs on one pool at a time (Sia's
// configurations never mix types). It is a plain value, safe for
// concurrent use.
type Pool struct {
	Type               topology.GPUType
	Nodes, GPUsPerNode int
}

// GPUs returns the pool's GPUs.
func (p Pool) GPUs() int { return p.Nodes * p.GPUsPerNode }

// Assignment is a TypedPolicy's answer for one job: Workers workers on
// pool Pool, or Workers 0 (queued; Pool is then ignored). It is a plain
// value, safe for concurrent use.
type Assignment struct {
	Pool, Workers int
}

// TypedPolicy chooses every job's pool and number of workers on a
// heterogeneous cluster: for each job (State.Pool and State.Workers say
// where it runs now) an Assignment whose workers are 0 or within the job's
// bounds, on a pool where the job has a curve (Job.On), using at most each
// pool's GPUs. A running job moved to another pool restarts there. Whether
// an implementation is safe for concurrent use is its own (this package's
// hold no state and are, with curves that are).
type TypedPolicy interface {
	AllocateTyped(jobs []State, pools []Pool) ([]Assignment, error)
}

// checkPools validates a heterogeneous cluster.
func checkPools(pools []Pool) error {
	if len(pools) == 0 || len(pools) > MaxPools {
		return fmt.Errorf("%w: %d pools, want 1 to %d", ErrInvalid, len(pools), MaxPools)
	}
	total := 0
	for k, p := range pools {
		if p.Nodes < 0 || p.GPUsPerNode < 1 || p.GPUsPerNode > MaxGPUsPerServer || p.Nodes > MaxServers {
			return fmt.Errorf("%w: pool %d (%s): %d nodes of %d GPUs", ErrInvalid, k, p.Type, p.Nodes, p.GPUsPerNode)
		}
		total += p.GPUs()
		if total > MaxGPUs {
			return fmt.Errorf("%w: pools of more than %d GPUs", ErrInvalid, MaxGPUs)
		}
	}
	return nil
}

// validateTyped checks the jobs against the pools: each job valid, with a
// curve per pool when it has Curves, running on a pool where it has a
// curve, within what the pools hold.
func validateTyped(jobs []State, pools []Pool) error {
	if err := checkPools(pools); err != nil {
		return err
	}
	total := 0
	for _, p := range pools {
		total += p.GPUs()
	}
	if err := validate(jobs, total); err != nil {
		return err
	}
	used := make([]int, len(pools))
	for i := range jobs {
		s := &jobs[i]
		if s.Curves != nil && len(s.Curves) != len(pools) {
			return fmt.Errorf("%w: job %d has curves on %d pools, the cluster %d", ErrInvalid, s.ID, len(s.Curves), len(pools))
		}
		if s.Seen != nil && len(s.Seen) != len(pools) {
			return fmt.Errorf("%w: job %d has seen %d pools, the cluster has %d", ErrInvalid, s.ID, len(s.Seen), len(pools))
		}
		if s.Workers == 0 {
			continue
		}
		if s.Pool < 0 || s.Pool >= len(pools) || s.On(s.Pool) == nil {
			return fmt.Errorf("%w: job %d runs on pool %d, where it has no curve", ErrInvalid, s.ID, s.Pool)
		}
		used[s.Pool] += s.Workers * s.GPUsPerWorker
		if used[s.Pool] > pools[s.Pool].GPUs() {
			return fmt.Errorf("%w: running jobs hold %d GPUs of pool %d, which has %d", ErrInvalid, used[s.Pool], s.Pool, pools[s.Pool].GPUs())
		}
	}
	return nil
}

// Unaware runs a Policy that knows nothing of GPU types (Pollux, Tiresias,
// FIFO, ...) on a heterogeneous cluster, as Sia's evaluation runs Pollux
// (Jayaram Subramanya et al., SOSP 2023, section 4.3): the policy sees one
// cluster of all the pools' GPUs and every job at its curve on pool
// Reference (the pool it was profiled on: Pollux's models were measured on
// T4s), and its counts are then given pools: running jobs stay on their
// pool (a move would restart them), shrinking as told, growing only into
// the room their pool has (largest growth first); jobs that start go,
// largest first (then by ID), to the pool with the most free GPUs where
// they have a curve (ties to the earlier pool), shrunk to what it holds in
// whole workers, or stay queued if it holds less than their base demand.
// The policy's
// fair shares and packing are thus computed as if the cluster were
// homogeneous: what Sia's paper calls heterogeneity-unaware. It holds no
// state: safe for concurrent use if its Policy is.
type Unaware struct {
	Policy    Policy
	Reference int
}

// AllocateTyped implements TypedPolicy.
func (u Unaware) AllocateTyped(jobs []State, pools []Pool) ([]Assignment, error) {
	if u.Policy == nil {
		return nil, fmt.Errorf("%w: Unaware has no policy", ErrInvalid)
	}
	if err := validateTyped(jobs, pools); err != nil {
		return nil, err
	}
	if u.Reference < 0 || u.Reference >= len(pools) {
		return nil, fmt.Errorf("%w: reference pool %d of %d", ErrInvalid, u.Reference, len(pools))
	}
	total := 0
	for _, p := range pools {
		total += p.GPUs()
	}
	// The policy's view: each job at one curve, on one cluster.
	view := make([]State, len(jobs))
	jobsView := make([]Job, len(jobs))
	for i := range jobs {
		jobsView[i] = *jobs[i].Job
		c := jobs[i].On(u.Reference)
		if c == nil {
			c = jobs[i].On(firstPool(jobs[i].Job, len(pools)))
		}
		jobsView[i].Curve, jobsView[i].Curves = c, nil
		view[i] = jobs[i]
		view[i].Job = &jobsView[i]
	}
	want, err := u.Policy.Allocate(view, total)
	if err != nil {
		return nil, err
	}
	if len(want) != len(jobs) {
		return nil, fmt.Errorf("%w: the policy answered for %d of %d jobs", ErrInvalid, len(want), len(jobs))
	}
	out := make([]Assignment, len(jobs))
	free := make([]int, len(pools))
	for k, p := range pools {
		free[k] = p.GPUs()
	}
	// Running jobs keep their pool: they keep what they hold, or less.
	var grow, start []int
	for i := range jobs {
		s := &jobs[i]
		switch {
		case want[i] <= 0:
		case s.Workers > 0:
			w := min(want[i], s.Workers)
			out[i] = Assignment{Pool: s.Pool, Workers: w}
			free[s.Pool] -= w * s.GPUsPerWorker
			if want[i] > s.Workers {
				grow = append(grow, i)
			}
		default:
			start = append(start, i)
		}
	}
	largest := func(a, b int) int {
		return cmp.Or(cmp.Compare(want[b]*jobs[b].GPUsPerWorker, want[a]*jobs[a].GPUsPerWorker), cmp.Compare(jobs[a].ID, jobs[b].ID))
	}
	// Growth where the job's pool has room (a move would restart it).
	slices.SortStableFunc(grow, largest)
	for _, i := range grow {
		s := &jobs[i]
		extra := min(want[i]-s.Workers, free[s.Pool]/s.GPUsPerWorker)
		out[i].Workers += extra
		free[s.Pool] -= extra * s.GPUsPerWorker
	}
	// Starts on the pool with the most free GPUs.
	slices.SortStableFunc(start, largest)
	for _, i := range start {
		s := &jobs[i]
		best := -1
		for k := range pools {
			if s.On(k) != nil && (best < 0 || free[k] > free[best]) {
				best = k
			}
		}
		if best < 0 {
			continue
		}
		if w := min(want[i], free[best]/s.GPUsPerWorker); w >= s.MinWorkers {
			out[i] = Assignment{Pool: best, Workers: w}
			free[best] -= w * s.GPUsPerWorker
		}
	}
	return out, nil
}

// firstPool is the first pool where the job has a curve.
func firstPool(j *Job, n int) int {
	for k := range n {
		if j.On(k) != nil {
			return k
		}
	}
	return 0
}
