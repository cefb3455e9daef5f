package sim

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/gpusched/gpusched/elastic"
	"github.com/gpusched/gpusched/perfmodel"
	"github.com/gpusched/gpusched/topology"
)

// PolluxProxies are the jobs of Gavel's table (measured on K80, P100 and
// V100) that stand for Pollux's applications when predicting how much
// faster another GPU type computes them: the same model where Gavel has it
// (cifar10 is ResNet-18 on CIFAR-10, imagenet ResNet-50 on ImageNet), else
// the nearest kind of network (ncf: Gavel's Recommendation; bert: its
// Transformer; deepspeech2, a recurrent network: its LSTM language model;
// yolov3, a convolutional detector: ResNet-50), at the batch size nearest
// the application's initial one.
var PolluxProxies = map[string]perfmodel.JobKey{
	"cifar10":     {Model: "ResNet-18", BatchSize: 128, ScaleFactor: 1},
	"imagenet":    {Model: "ResNet-50", BatchSize: 128, ScaleFactor: 1},
	"ncf":         {Model: "Recommendation", BatchSize: 512, ScaleFactor: 1},
	"bert":        {Model: "Transformer", BatchSize: 16, ScaleFactor: 1},
	"deepspeech2": {Model: "LM", BatchSize: 20, ScaleFactor: 1},
	"yolov3":      {Model: "ResNet-50", BatchSize: 16, ScaleFactor: 1},
}

// PolluxSpeedup is how much faster a GPU type computes an application's
// steps than the T4s Pollux profiled it on: the ratio of model's rates
// for the application's proxy (PolluxProxies) on the type and on T4 (a
// spec model fitted to measured rates, perfmodel/hw's Model with Gavel's
// table), 1 on T4 itself. Basis says where each rate comes from (measured
// for the proxy's Gavel types, predicted for the others).
func PolluxSpeedup(m perfmodel.ThroughputModel, app string, t topology.GPUType) (speedup float64, basis string, err error) {
	if t == topology.T4 {
		return 1, "measured (Pollux's T4 profiles)", nil
	}
	k, ok := PolluxProxies[app]
	if !ok {
		return 0, "", fmt.Errorf("%w: no proxy for %q", ErrUnknownApp, app)
	}
	rate := func(t topology.GPUType) (float64, string, error) {
		if sm, ok := m.(*perfmodel.SpecModel); ok {
			e, err := sm.Estimate(k, t)
			return e.Rate, e.Basis, err
		}
		r, err := m.Throughput(k, t)
		return r, "", err
	}
	on, basis, err := rate(t)
	if err != nil {
		return 0, "", fmt.Errorf("sim: %s (as %s) on %s: %w", app, k, t, err)
	}
	base, _, err := rate(topology.T4)
	if err != nil {
		return 0, "", fmt.Errorf("sim: %s (as %s) on t4: %w", app, k, err)
	}
	if !(on > 0) || !(base > 0) {
		return 0, "", fmt.Errorf("%w: %s (as %s): rates %v on %s and %v on t4", elastic.ErrInvalid, app, k, on, t, base)
	}
	return on / base, fmt.Sprintf("%s on %s (%s) over t4 (predicted)", k.Model, t, basis), nil
}

// PolluxOnPools returns Pollux's applications on each pool's GPU type
// (PolluxApp.OnType with PolluxSpeedup), the profiles themselves on T4.
func PolluxOnPools(apps map[string]*PolluxApp, pools []elastic.Pool, m perfmodel.ThroughputModel) ([]map[string]*PolluxApp, error) {
	out := make([]map[string]*PolluxApp, len(pools))
	names := make([]string, 0, len(apps))
	for n := range apps {
		names = append(names, n)
	}
	slices.SortFunc(names, cmp.Compare)
	for k, p := range pools {
		out[k] = map[string]*PolluxApp{}
		for _, n := range names {
			a := apps[n]
			s, _, err := PolluxSpeedup(m, n, p.Type)
			if err != nil {
				return nil, err
			}
			if out[k][n], err = a.OnType(p.Type, s); err != nil {
				return nil, err
			}
		}
	}
	return out, nil
}

// PolluxHeteroJobs turns a Pollux workload into jobs for RunHetero: as
// PolluxJobs, with a goodput curve on each pool (apps[k], the applications
// on pool k's GPU type, PolluxOnPools) for its nodes' size. A job never
// spans pools, so with fixed a job that asks for more GPUs than the
// largest pool has (a few of the workloads' 32- and 48-GPU jobs on Sia's
// 64-GPU cluster) runs on the largest pool's GPUs, at its batch size.
func PolluxHeteroJobs(trace []Job, apps []map[string]*PolluxApp, pools []elastic.Pool, maxWorkers int, adaptive, fixed bool) ([]elastic.Job, error) {
	if len(apps) != len(pools) || len(pools) == 0 || maxWorkers < 1 {
		return nil, fmt.Errorf("%w: applications for %d pools, %d pools, at most %d workers", elastic.ErrInvalid, len(apps), len(pools), maxWorkers)
	}
	largest := 0
	for _, p := range pools {
		largest = max(largest, p.GPUs())
	}
	out := make([]elastic.Job, len(trace))
	for i, j := range trace {
		if fixed && j.Key.ScaleFactor > largest {
			j.Key.ScaleFactor = largest
		}
		curves := make([]elastic.Curve, len(pools))
		var lo, hi int
		var work float64
		for k, p := range pools {
			a := apps[k][j.Name]
			if a == nil {
				return nil, fmt.Errorf("%w: job %d runs %q", ErrUnknownApp, j.ID, j.Name)
			}
			l, h, batch, err := polluxBounds(j, a, maxWorkers, adaptive, fixed)
			if err != nil {
				return nil, err
			}
			lo, hi, work = l, h, a.MaxProgress()
			curves[k] = &GoodputCurve{App: a, GPUsPerNode: p.GPUsPerNode, Batch: batch}
		}
		out[i] = elastic.Job{ID: j.ID, Arrival: j.Arrival, MinWorkers: lo, MaxWorkers: hi, GPUsPerWorker: 1, Work: work, Curves: curves}
	}
	return out, nil
}
