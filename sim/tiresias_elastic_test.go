package sim

import (
	"context"
	"math/rand/v2"
	"testing"

	"github.com/gpusched/gpusched/elastic"
	"github.com/gpusched/gpusched/gang"
	"github.com/gpusched/gpusched/perfmodel"
	"github.com/gpusched/gpusched/topology"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Tiresias on the elastic engine is gang.Priority's decision on the event
// engine, job for job: 60 rigid jobs of 1, 2 or 4 GPUs at 1 unit of work
// per second, whose arrivals and durations are whole minutes, on one
// server of 8 GPUs, decided every 60 s by both engines (the elastic one's
// interval, the event one's timer), with thresholds that are multiples of
// a minute on every job size: every start, preemption and finish time is
// the same, under 2D-LAS with and without the starvation guard and under
// 2D-Gittins.
func TestTiresiasElasticMatchesEvents(t *testing.T) {
	rng := rand.New(rand.NewPCG(29, 3))
	var evJobs []Job
	var elJobs []elastic.Job
	at := 0.0
	for i := range 60 {
		at += 60 * float64(rng.IntN(6))
		g := []int{1, 2, 4}[rng.IntN(3)]
		dur := 60 * float64(1+rng.IntN(40))
		evJobs = append(evJobs, Job{ID: i, Arrival: at, Steps: dur, Key: perfmodel.JobKey{Model: "m", ScaleFactor: g}, Weight: 1})
		flat := make(elastic.Table, g)
		for k := range flat {
			flat[k] = 1
		}
		elJobs = append(elJobs, elastic.Job{ID: i, Arrival: at, MinWorkers: g, MaxWorkers: g, GPUsPerWorker: 1, Work: dur, Curve: flat})
	}
	gittins, err := gang.NewGittins2D([]float64{240, 600, 1200, 2400, 4800, 9600}, 240)
	require.NoError(t, err)
	for _, c := range []struct {
		name  string
		order gang.Order
	}{
		{"2d-las", gang.LAS2D{Thresholds: []float64{240, 960, 4800}}},
		{"2d-las-starvation", gang.LAS2D{Thresholds: []float64{240, 960, 4800}, Starvation: 2}},
		{"2d-gittins", gittins},
	} {
		ev, err := RunEvents(context.Background(), EventConfig{Types: []topology.GPUType{topology.V100}, Capacity: []int{8}, Throughput: unitRates{},
			Scheduler: gang.Priority{Order: c.order, Backfill: gang.Greedy}, Timer: 60}, evJobs)
		require.NoError(t, err, c.name)
		el, err := RunElastic(context.Background(), ElasticConfig{TrainingServers: 1, GPUsPerServer: 8, Policy: elastic.Tiresias{Order: c.order},
			Interval: 60, EveryInterval: true}, elJobs)
		require.NoError(t, err, c.name)
		preempted := 0
		for i, r := range el.Records {
			e := ev.Records[i]
			require.Equal(t, e.ID, r.ID)
			assert.Equal(t, e.Start, r.Start, "%s: job %d start", c.name, r.ID)
			assert.Equal(t, e.Finish, r.Finish, "%s: job %d finish", c.name, r.ID)
			assert.Equal(t, e.Preemptions, r.Preemptions, "%s: job %d preemptions", c.name, r.ID)
			preempted += r.Preemptions
		}
		assert.Positive(t, preempted, "%s: the trace should exercise preemption", c.name)
		t.Logf("%s: %d preemptions, mean JCT %.0f s", c.name, preempted, el.Summarise().MeanJCT)
	}
}
