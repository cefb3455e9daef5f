package sim

import (
	"context"
	"testing"

	"github.com/gpusched/gpusched/elastic"
	"github.com/gpusched/gpusched/topology"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// scripted answers with the assignments of its script at each call, then
// keeps the last.
type scripted struct {
	calls  int
	script [][]elastic.Assignment
}

func (s *scripted) AllocateTyped(jobs []elastic.State, _ []elastic.Pool) ([]elastic.Assignment, error) {
	a := s.script[min(s.calls, len(s.script)-1)]
	s.calls++
	return a[:len(jobs)], nil
}

// By hand: a slow pool (2 GPUs, 1 unit/s per worker) and a fast one (2
// GPUs, 3 units/s per worker), 60 s intervals, 10 s per restart. The job
// (600 units) starts on 2 slow workers at 0 s (120 units by 60 s), moves
// to 1 fast worker at 60 s (a restart: 10 s lost, 150 units by 120 s),
// then grows to 2 fast workers (10 s lost again): 330 units left at 6
// units/s after 130 s end it at 185 s. Its GPU time: 120 slow, 60 + 130
// fast.
func TestRunHeteroByHand(t *testing.T) {
	pools := []elastic.Pool{{Type: topology.K80, Nodes: 1, GPUsPerNode: 2}, {Type: topology.V100, Nodes: 1, GPUsPerNode: 2}}
	job := elastic.Job{ID: 7, MinWorkers: 1, MaxWorkers: 2, GPUsPerWorker: 1, Work: 600,
		Curves: []elastic.Curve{elastic.Linear{PerWorker: 1}, elastic.Linear{PerWorker: 3}}}
	pol := &scripted{script: [][]elastic.Assignment{{{Pool: 0, Workers: 2}}, {{Pool: 1, Workers: 1}}, {{Pool: 1, Workers: 2}}}}
	res, err := RunHetero(context.Background(), HeteroConfig{Pools: pools, Policy: pol, RestartOverhead: 10, EveryInterval: true}, []elastic.Job{job})
	require.NoError(t, err)
	r := res.Records[0]
	assert.Equal(t, 0.0, r.Start)
	assert.InDelta(t, 185, r.Finish, 1e-9)
	assert.Equal(t, 2, r.Resizes)
	assert.InDelta(t, 120, res.PoolBusy[0], 1e-9)
	assert.InDelta(t, 60+2*65, res.PoolBusy[1], 1e-9)
	assert.InDelta(t, r.GPUSeconds, res.PoolBusy[0]+res.PoolBusy[1], 1e-9)

	// The job's own restart cost (20 s) replaces the run's 10 s: 120 units
	// by 60 s, 120 more by 120 s (40 s at 3), 240 by 180 s (40 s at 6), the
	// last 120 at 6 units/s: 200 s.
	job.RestartCost = 20
	pol.calls = 0
	res, err = RunHetero(context.Background(), HeteroConfig{Pools: pools, Policy: pol, RestartOverhead: 10, EveryInterval: true}, []elastic.Job{job})
	require.NoError(t, err)
	assert.InDelta(t, 200, res.Records[0].Finish, 1e-9)
	job.RestartCost = 0

	// Errors: a pool where the job has no curve, a bad pool, no policy.
	job.Curves = []elastic.Curve{nil, elastic.Linear{PerWorker: 3}}
	_, err = RunHetero(context.Background(), HeteroConfig{Pools: pools, Policy: &scripted{script: [][]elastic.Assignment{{{Pool: 0, Workers: 1}}}}}, []elastic.Job{job})
	assert.ErrorIs(t, err, elastic.ErrInvalid)
	_, err = RunHetero(context.Background(), HeteroConfig{Pools: []elastic.Pool{{Nodes: 1, GPUsPerNode: 0}}, Policy: pol}, []elastic.Job{job})
	assert.Error(t, err)
	_, err = RunHetero(context.Background(), HeteroConfig{Pools: pools}, []elastic.Job{job})
	assert.ErrorIs(t, err, elastic.ErrInvalid)
	job.Curves = []elastic.Curve{elastic.Linear{PerWorker: 3}}
	_, err = RunHetero(context.Background(), HeteroConfig{Pools: pools, Policy: pol}, []elastic.Job{job})
	assert.ErrorIs(t, err, elastic.ErrInvalid, "one curve for two pools")
	big := elastic.Job{ID: 1, MinWorkers: 3, MaxWorkers: 3, GPUsPerWorker: 1, Work: 5, Curve: elastic.Linear{PerWorker: 1}}
	_, err = RunHetero(context.Background(), HeteroConfig{Pools: pools, Policy: pol}, []elastic.Job{big})
	assert.ErrorIs(t, err, elastic.ErrInvalid, "3 workers fit on no pool of 2 GPUs")
}
