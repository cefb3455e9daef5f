package sim

import (
	"fmt"
	"math"

	"github.com/gpusched/gpusched/internal/pyrand"
	"github.com/gpusched/gpusched/perfmodel"
	"github.com/gpusched/gpusched/topology"
)

// gavelJobTable is Gavel's job table in its order (scheduler/job_table.py:
// JobTable), which its generator draws from with rng.choice.
var gavelJobTable = func() []perfmodel.JobKey {
	var t []perfmodel.JobKey
	add := func(model string, sizes ...int) {
		for _, b := range sizes {
			t = append(t, perfmodel.JobKey{Model: model, BatchSize: b, ScaleFactor: 1})
		}
	}
	add("ResNet-18", 16, 32, 64, 128, 256)
	add("ResNet-50", 16, 32, 64, 128)
	add("Transformer", 16, 32, 64, 128, 256)
	add("LM", 5, 10, 20, 40, 80)
	add("Recommendation", 512, 1024, 2048, 4096, 8192)
	add("A3C", 0)
	add("CycleGAN", 0)
	return t
}()

// generatePython follows Gavel's generator draw for draw (scheduler/utils.py:
// generate_job with always_generate_scale_factor, _generate_scale_factor,
// _generate_duration; scheduler.py: _sample_arrival_time_delta). For each
// job, from random.Random(seed+2): the scale factor's uniform (drawn even
// without multi-GPU jobs), the duration's random() and uniform, the
// template's choice (redrawn while the scale factor is above 1 and the
// template is not distributed), then, with multiple priorities, the
// priority's uniform. Steps are duration x the reference rate, not
// rounded. Arrivals: the first at 0, then gaps -log(1 - random()) x
// 3600/Rate from random.Random(seed+3).
func (w *GavelWorkload) generatePython(n int, tab *perfmodel.Table, ref topology.GPUType, distributed func(perfmodel.JobKey) bool) ([]Job, error) {
	jobRNG := pyrand.New(w.Seed + 2)
	arrRNG := pyrand.New(w.Seed + 3)
	jobs := make([]Job, n)
	t := 0.0
	for i := range jobs {
		sf := 1
		switch r := jobRNG.Uniform(0, 1); {
		case 0.7 <= r && r <= 0.8:
			sf = 2
		case 0.8 <= r && r <= 0.95:
			sf = 4
		case 0.95 <= r:
			sf = 8
		}
		var dur float64
		if jobRNG.Float64() >= 0.8 {
			dur = 60 * math.Pow(10, jobRNG.Uniform(3, 4))
		} else {
			dur = 60 * math.Pow(10, jobRNG.Uniform(1.5, 3))
		}
		if !w.MultiGPU {
			sf = 1
		}
		var k perfmodel.JobKey
		for {
			k = gavelJobTable[jobRNG.IntN(len(gavelJobTable))]
			if sf == 1 || distributed(k) {
				break
			}
		}
		k.ScaleFactor = sf
		rate, err := tab.Throughput(k, ref)
		if err != nil {
			return nil, fmt.Errorf("sim: Gavel workload: %w", err)
		}
		weight := 1.0
		if w.MultiPriority {
			if r := jobRNG.Uniform(0, 1); r <= 0.2 {
				weight = 5
			}
		}
		if i > 0 && w.Rate > 0 {
			lambda := 1 / (3600 / w.Rate) // Gavel passes 1/lam, lam = 3600/rate
			t += -math.Log(1-arrRNG.Float64()) / lambda
		}
		jobs[i] = Job{ID: i, Arrival: t, Key: k, Steps: dur * rate, Weight: weight, Duration: dur}
	}
	return jobs, nil
}
