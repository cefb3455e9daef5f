package admission

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/gpusched/gpusched/perfmodel/learn"
	"github.com/gpusched/gpusched/topology"
	"github.com/stretchr/testify/require"
)

// learnerFilled is a learner of the default Config holding active jobs,
// each measured on 8 types (one track each, windows of noisy rates) with
// a running segment of MaxWindows windows, and remembered finished jobs
// (MaxHistory at most), each measured on the 8 types.
func learnerFilled(t testing.TB, active, remembered int) *learn.Learner {
	l, err := learn.New(learn.Config{})
	require.NoError(t, err)
	types := []topology.GPUType{topology.K80, topology.P100, topology.V100, topology.T4, topology.A100, topology.L4, topology.H100, "a10g"}
	rng := rand.New(rand.NewPCG(1, 2))
	fill := func(name string, open bool) {
		require.NoError(t, l.Register(name, learn.JobInfo{GPUs: 4, Claims: map[topology.GPUType]float64{topology.V100: 2}}))
		steps, at := 0.0, 0.0
		for i, typ := range types {
			windows := 6
			if open && i == len(types)-1 {
				windows = learn.DefaultMaxWindows + learn.DefaultWarmupWindows + 2
			}
			for w := 0; w <= windows; w++ {
				require.NoError(t, l.Observe(name, learn.Observation{Type: typ, GPUs: 4, Segment: uint64(i + 1), Steps: steps, Time: at}))
				steps += 60 * float64(i+1) * (1 + 0.1*rng.NormFloat64())
				at += 60
			}
		}
	}
	for i := range remembered {
		name := fmt.Sprintf("job/tenant-namespace-%03d/finished-job-%06d", i%100, i)
		fill(name, false)
		l.Forget(name)
	}
	for i := range active {
		fill(fmt.Sprintf("job/tenant-namespace-%03d/a-training-job-%06d", i%100, i), true)
	}
	return l
}

// How large the estimator's snapshot gets in the saved state: its bytes,
// and the state's compressed bytes with it, by active and remembered
// jobs (go test -run TestLearnerStateSize -v ./admission/ prints them;
// kube/docs and docs/learning.md quote them). The default learner at
// 10,000 active jobs and MaxHistory's 10,000 remembered must fit the
// state's caps.
func TestLearnerStateSize(t *testing.T) {
	for _, n := range [][2]int{{100, 0}, {1000, 1000}, {10000, 10000}} {
		if testing.Short() && n[0] > 1000 {
			continue
		}
		l := learnerFilled(t, n[0], n[1])
		start := time.Now()
		snap, err := l.Snapshot()
		require.NoError(t, err)
		gz, err := encodeState(stateDoc{Controller: newCtrlState(), Scheduler: []byte("{}"), Learner: snap})
		require.NoError(t, err, "fits the state's caps")
		took := time.Since(start)
		t.Logf("%6d active, %6d remembered jobs: snapshot %6.2f MiB, %5.0f bytes a job; compressed state %5.2f MiB (%d of %d chunks); snapshot and compression %v",
			n[0], n[1], float64(len(snap))/(1<<20), float64(len(snap))/float64(n[0]+n[1]), float64(len(gz))/(1<<20), (len(gz)+chunkMax-1)/chunkMax, maxChunks, took.Round(time.Millisecond))
	}
}
