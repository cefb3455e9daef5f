package elastic

import (
	"testing"

	"github.com/gpusched/gpusched/topology"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// typedJob has one-GPU workers, rate 1 per worker on pool 0 and 3 on
// pool 1.
func typedJob(id int, lo, hi int) *Job {
	return &Job{ID: id, MinWorkers: lo, MaxWorkers: hi, GPUsPerWorker: 1, Work: 100,
		Curves: []Curve{Linear{PerWorker: 1}, Linear{PerWorker: 3}}}
}

// Unaware by hand: FIFO on pools of 2 (slow) and 4 (fast) GPUs sees one
// cluster of 6. Job 1 runs 2 workers on the slow pool and keeps them
// there; job 2 (3 workers) starts on the pool with the most free GPUs
// (fast: 4); job 3 (1 worker) on the fast pool's last GPU; job 4 (1
// worker) does not fit in FIFO's view (6 GPUs used) and waits.
func TestUnawareByHand(t *testing.T) {
	pools := []Pool{{Type: topology.K80, Nodes: 1, GPUsPerNode: 2}, {Type: topology.V100, Nodes: 1, GPUsPerNode: 4}}
	jobs := []State{
		{Job: typedJob(1, 2, 2), Remaining: 10, Workers: 2, Pool: 0},
		{Job: typedJob(2, 3, 3), Remaining: 10},
		{Job: typedJob(3, 1, 1), Remaining: 10},
		{Job: typedJob(4, 1, 1), Remaining: 10},
	}
	a, err := Unaware{Policy: FIFO{}}.AllocateTyped(jobs, pools)
	require.NoError(t, err)
	assert.Equal(t, []Assignment{{0, 2}, {1, 3}, {1, 1}, {0, 0}}, a)
	// A job that cannot run on the fast pool starts on the slow one, or
	// waits when it is full.
	jobs[2].Job = typedJob(3, 1, 1)
	jobs[2].Curves = []Curve{Linear{PerWorker: 1}, nil}
	a, err = Unaware{Policy: FIFO{}}.AllocateTyped(jobs, pools)
	require.NoError(t, err)
	assert.Equal(t, Assignment{}, a[2], "the slow pool is full")
	// Growth stays on the job's pool, up to its room: AFS grows job 1
	// (elastic to 4 workers), but its pool holds 2.
	jobs = []State{{Job: typedJob(1, 1, 4), Remaining: 10, Workers: 1, Pool: 0}}
	a, err = Unaware{Policy: AFS{}}.AllocateTyped(jobs, pools)
	require.NoError(t, err)
	assert.Equal(t, []Assignment{{0, 2}}, a)
}

func TestUnawareErrors(t *testing.T) {
	pools := []Pool{{Nodes: 1, GPUsPerNode: 2}}
	jobs := []State{{Job: &Job{ID: 1, MinWorkers: 1, MaxWorkers: 1, GPUsPerWorker: 1, Work: 1, Curve: Linear{PerWorker: 1}}, Remaining: 1}}
	for name, c := range map[string]struct {
		u     Unaware
		pools []Pool
		jobs  []State
	}{
		"no policy":      {Unaware{}, pools, jobs},
		"no pools":       {Unaware{Policy: FIFO{}}, nil, jobs},
		"bad pool":       {Unaware{Policy: FIFO{}}, []Pool{{Nodes: -1, GPUsPerNode: 2}}, jobs},
		"bad reference":  {Unaware{Policy: FIFO{}, Reference: 3}, pools, jobs},
		"wrong curves":   {Unaware{Policy: FIFO{}}, pools, []State{{Job: typedJob(1, 1, 1), Remaining: 1}}},
		"wrong pool":     {Unaware{Policy: FIFO{}}, pools, []State{{Job: jobs[0].Job, Remaining: 1, Workers: 1, Pool: 2}}},
		"over the pool":  {Unaware{Policy: FIFO{}}, pools, []State{{Job: &Job{ID: 1, MinWorkers: 3, MaxWorkers: 3, GPUsPerWorker: 1, Work: 1, Curve: Linear{PerWorker: 1}}, Remaining: 1, Workers: 3}}},
		"short answer":   {Unaware{Policy: shortAnswer{}}, pools, jobs},
		"seen too short": {Unaware{Policy: FIFO{}}, pools, []State{{Job: jobs[0].Job, Remaining: 1, Seen: []int{1, 2}}}},
	} {
		_, err := c.u.AllocateTyped(c.jobs, c.pools)
		assert.ErrorIs(t, err, ErrInvalid, name)
	}
}

type shortAnswer struct{}

func (shortAnswer) Allocate([]State, int) ([]int, error) { return nil, nil }
