package sim

import (
	"context"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gpusched/gpusched/allocation"
	"github.com/gpusched/gpusched/elastic"
	"github.com/gpusched/gpusched/gang"
	"github.com/gpusched/gpusched/perfmodel/gavel"
	"github.com/gpusched/gpusched/topology"
)

// The engines keep their state per run: 8 goroutines share one Config
// (policy, Gavel's table), one EventConfig (a gang.Priority), one
// ElasticConfig (Lyra) and one job list, and each gets the result a single
// goroutine gets. Run under -race (CI does).
func TestEnginesConcurrent(t *testing.T) {
	jobs, err := (&GavelWorkload{Rate: 30, MultiGPU: true, Seed: 4}).Generate(30)
	require.NoError(t, err)
	for i := range jobs {
		jobs[i].Steps = max(1, jobs[i].Steps/50)
	}
	types := []topology.GPUType{topology.V100, topology.P100, topology.K80}
	cfg := Config{Types: types, Capacity: []int{4, 4, 4}, Throughput: gavel.Simulation(), Policy: &allocation.MaxMinFairness{}}
	ev := EventConfig{Types: types, Capacity: []int{4, 4, 4}, Throughput: gavel.Simulation(), Scheduler: gang.Priority{Order: gang.LAS2D{}, Backfill: gang.EASY}, Timer: 300}
	el := ElasticConfig{TrainingServers: 2, GPUsPerServer: 4, Policy: elastic.Lyra{}, Interval: 30}
	elJobs := []elastic.Job{elJobOf(1, 0, 1, 4, 600), elJobOf(2, 10, 2, 6, 900), elJobOf(3, 20, 1, 1, 300), elJobOf(4, 30, 2, 8, 2000)}
	type answer struct {
		rounds, events *Result
		elastic        *ElasticResult
	}
	run := func() (answer, error) {
		var a answer
		var err error
		if a.rounds, err = Run(context.Background(), cfg, jobs); err != nil {
			return a, err
		}
		if a.events, err = RunEvents(context.Background(), ev, jobs); err != nil {
			return a, err
		}
		a.elastic, err = RunElastic(context.Background(), el, elJobs)
		return a, err
	}
	want, err := run()
	require.NoError(t, err)
	got := make([]answer, 8)
	errs := make([]error, 8)
	var wg sync.WaitGroup
	for i := range got {
		wg.Go(func() { got[i], errs[i] = run() })
	}
	wg.Wait()
	for i := range got {
		require.NoError(t, errs[i])
		assert.Equal(t, want.rounds.Records, got[i].rounds.Records, "goroutine %d", i)
		assert.Equal(t, want.events.Records, got[i].events.Records, "goroutine %d", i)
		assert.Equal(t, want.elastic.Records, got[i].elastic.Records, "goroutine %d", i)
	}
	assert.Len(t, want.rounds.Records, 30-len(want.rounds.Unschedulable))
	assert.Greater(t, len(want.rounds.Records), 20)
}
