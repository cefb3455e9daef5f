package ring

import (
	"context"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// One SJFBCO, and one Executor with the stateless FirstFit, are safe for
// concurrent use, as their docs say: 8 goroutines share them on one
// cluster and job list, and each gets the schedule a single goroutine
// gets. Run under -race (CI does). Placers with scratch space
// (ListScheduling, Random, FAFFP, LBSGF) are not safe and not shared.
func TestSchedulersConcurrent(t *testing.T) {
	c, jobs := randomInstance(t, 3, 4, 24)
	b := SJFBCO{Model: paperModel}
	ex := &Executor{Model: paperModel, Placer: FirstFit{}}
	run := func() (*SJFBCOResult, *Schedule, error) {
		r, err := b.Schedule(context.Background(), c, jobs)
		if err != nil {
			return nil, nil, err
		}
		s, err := ex.Run(context.Background(), c, jobs, nil)
		return r, s, err
	}
	wantR, wantS, err := run()
	require.NoError(t, err)
	gotR := make([]*SJFBCOResult, 8)
	gotS := make([]*Schedule, 8)
	errs := make([]error, 8)
	var wg sync.WaitGroup
	for i := range gotR {
		wg.Go(func() { gotR[i], gotS[i], errs[i] = run() })
	}
	wg.Wait()
	for i := range gotR {
		require.NoError(t, errs[i])
		assert.Equal(t, wantR, gotR[i], "goroutine %d", i)
		assert.Equal(t, wantS, gotS[i], "goroutine %d", i)
	}
}

// ScheduleOn only reads the live state, so several may plan on one state
// at once (cluster.State allows concurrent reads): 6 goroutines get the
// plan one gets, and the state does not change. Run under -race.
func TestScheduleOnConcurrentReads(t *testing.T) {
	live, _ := liveCluster(t)
	jobs := []Job{{ID: 1, GPUs: 4, Iterations: 50}, {ID: 2, GPUs: 3, Iterations: 80}, {ID: 3, GPUs: 2, Iterations: 30}, {ID: 4, GPUs: 9, Iterations: 10}}
	b := SJFBCO{Model: paperModel}
	gen := live.Generation()
	want, err := b.ScheduleOn(context.Background(), live, jobs)
	require.NoError(t, err)
	got := make([]*SJFBCOResult, 6)
	errs := make([]error, 6)
	var wg sync.WaitGroup
	for i := range got {
		wg.Go(func() { got[i], errs[i] = b.ScheduleOn(context.Background(), live, jobs) })
	}
	wg.Wait()
	for i := range got {
		require.NoError(t, errs[i])
		assert.Equal(t, want, got[i], "goroutine %d", i)
	}
	assert.Equal(t, gen, live.Generation())
}
