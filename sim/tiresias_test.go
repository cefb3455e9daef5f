package sim

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"

	"github.com/gpusched/gpusched/gang"
	"github.com/gpusched/gpusched/perfmodel"
	"github.com/gpusched/gpusched/perfmodel/gavel"
	"github.com/gpusched/gpusched/topology"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Tiresias's 60-job trace on its n32g4 cluster (32 servers of 4 GPUs,
// here V100s), jobs given Gavel models by their durations: the queue
// policies of Tiresias's evaluation.
func TestTiresiasQueues(t *testing.T) {
	data, err := os.ReadFile("testdata/tiresias/60_job.csv")
	require.NoError(t, err)
	jobs, err := ReadTiresias(bytes.NewReader(data), "60_job.csv")
	require.NoError(t, err)
	require.Len(t, jobs, 60)
	require.NoError(t, (&AssignModels{Seed: 1}).Apply(jobs))
	gput, err := os.ReadFile("testdata/tiresias/yarn-gput1000.csv")
	require.NoError(t, err)
	samples, err := ReadSamples(bytes.NewReader(gput), "yarn-gput1000.csv")
	require.NoError(t, err)
	require.Equal(t, 1001, len(samples))
	gittins, err := gang.NewGittins2D(samples, 3250)
	require.NoError(t, err)
	// On n32g4 (128 GPUs) the 60 jobs never wait, so every policy gives the
	// same JCTs; on 16 GPUs they contend and the policies differ.
	for _, gpus := range []int{128, 16} {
		mean := map[string]float64{}
		for _, c := range []struct {
			name string
			s    EventScheduler
		}{
			{"fifo", gang.Priority{Order: gang.ByArrival{}, NoPreemption: true, Backfill: gang.NoBackfill}},
			{"fifo-easy", gang.Priority{Order: gang.ByArrival{}, NoPreemption: true, Backfill: gang.EASY}},
			{"sjf", gang.Priority{Order: gang.ShortestJob{}, NoPreemption: true, Backfill: gang.Greedy}},
			{"srtf", gang.Priority{Order: gang.ShortestRemaining{}, Backfill: gang.Greedy}},
			{"2d-las", gang.Priority{Order: gang.LAS2D{}, Backfill: gang.Greedy}},
			{"2d-gittins", gang.Priority{Order: gittins, Backfill: gang.Greedy}},
		} {
			cfg := EventConfig{Types: []topology.GPUType{topology.V100}, Capacity: []int{gpus}, Throughput: perfmodel.Extrapolated{Table: gavel.Simulation()},
				Scheduler: c.s, Timer: 60}
			res, err := RunEvents(context.Background(), cfg, jobs)
			require.NoError(t, err, c.name)
			require.Len(t, res.Records, 60)
			s := res.Summarise(0, 0)
			mean[c.name] = s.MeanJCT
			t.Logf("%3d GPUs %-10s mean JCT %8.0f s  p95 %8.0f s  queueing %7.0f s  preemptions/job %.2f", gpus, c.name, s.MeanJCT, s.P95JCT, s.MeanQueueing, s.Preemptions)
		}
		if gpus == 128 {
			assert.Equal(t, mean["fifo"], mean["2d-las"])
			continue
		}
		assert.Less(t, mean["2d-las"], mean["fifo"])
		assert.Less(t, mean["srtf"], mean["fifo"])
		assert.Less(t, mean["sjf"], mean["fifo"])
		assert.LessOrEqual(t, mean["fifo-easy"], mean["fifo"])
	}
}

func TestReadSamples(t *testing.T) {
	v, err := ReadSamples(strings.NewReader("duration\n121\n122.5\n"), "s.csv")
	require.NoError(t, err)
	assert.Equal(t, []float64{121, 122.5}, v)
	_, err = ReadSamples(strings.NewReader("duration\n121\n-1\n"), "s.csv")
	assert.ErrorContains(t, err, "s.csv:3")
}
