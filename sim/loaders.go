package sim

import (
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/gpusched/gpusched/perfmodel"
	"github.com/gpusched/gpusched/perfmodel/gavel"
	"github.com/gpusched/gpusched/topology"
)

// shiftArrivals makes the earliest arrival 0 and numbers jobs in file order.
func shiftArrivals(jobs []Job) {
	if len(jobs) == 0 {
		return
	}
	first := jobs[0].Arrival
	for _, j := range jobs {
		first = math.Min(first, j.Arrival)
	}
	for i := range jobs {
		jobs[i].Arrival -= first
	}
	numberJobs(jobs)
}

// numberJobs numbers jobs in file order.
func numberJobs(jobs []Job) {
	for i := range jobs {
		jobs[i].ID = i
	}
}

// ReadPhilly reads the Microsoft Philly job trace as the Pollux artifact
// ships it (petuum/adaptdl, simulator/traces/philly.csv): columns
// timestamp ("2006-01-02 15:04:05"), duration (s), num_gpus, gpu_time,
// cluster. Arrivals are seconds after the earliest job. Jobs have no model:
// give them one with AssignModels.
//
// Like every loader of this package it skips a byte order mark, reads
// through the limits (MaxTraceBytes, MaxTraceRows, lines of 1 MiB and
// fields of 4 KiB), checks the range of every number it reads (times from
// 0 to MaxSeconds, GPUs from 1 to 1,048,576) and reports the line of the
// first problem in a *ParseError.
func ReadPhilly(r io.Reader, name string) ([]Job, error) {
	var jobs []Job
	err := csvRows(r, name, []string{"timestamp", "duration", "num_gpus"}, func(r *row) {
		ts, err := time.Parse(time.DateTime, r.get("timestamp"))
		if err != nil || ts.Year() < 1970 || ts.Unix() > MaxSeconds {
			r.fail("timestamp %q (want 2006-01-02 15:04:05, from 1970 on)", r.get("timestamp"))
		}
		d, g := r.seconds("duration"), r.integer("num_gpus", 1, maxGPUs, "a number of GPUs")
		if r.err == nil {
			jobs = append(jobs, Job{Arrival: float64(ts.Unix()), Duration: d, Key: perfmodel.JobKey{ScaleFactor: g}, Weight: 1})
		}
	})
	if err != nil {
		return nil, err
	}
	shiftArrivals(jobs)
	return jobs, nil
}

// ReadITP reads a Microsoft ITP cluster trace as ElasticFlow ships it
// (microsoft/elasticflow-traces, cluster01.csv to cluster10.csv): columns
// job_id, submission_time (s), duration (s), num_gpu. Arrivals are seconds
// after the earliest job; Name keeps job_id. Give models with AssignModels.
func ReadITP(r io.Reader, name string) ([]Job, error) {
	var jobs []Job
	err := csvRows(r, name, []string{"job_id", "submission_time", "duration", "num_gpu"}, func(r *row) {
		at, d, g := r.seconds("submission_time"), r.seconds("duration"), r.integer("num_gpu", 1, maxGPUs, "a number of GPUs")
		if r.err == nil {
			jobs = append(jobs, Job{Name: strings.Clone(r.get("job_id")), Arrival: at, Duration: d, Key: perfmodel.JobKey{ScaleFactor: g}, Weight: 1})
		}
	})
	if err != nil {
		return nil, err
	}
	shiftArrivals(jobs)
	return jobs, nil
}

// ReadTiresias reads a Tiresias simulator trace (SymbioticLab/Tiresias,
// simulator/*_job.csv): columns job_id, num_gpu, submit_time (s),
// iterations, model_name, duration (s). Name keeps model_name (Tiresias's
// models, such as vgg19, are not in Gavel's table; give Gavel models with
// AssignModels, which keeps the durations).
func ReadTiresias(r io.Reader, name string) ([]Job, error) {
	var jobs []Job
	err := csvRows(r, name, []string{"job_id", "num_gpu", "submit_time", "model_name", "duration"}, func(r *row) {
		at, d, g, model := r.seconds("submit_time"), r.seconds("duration"), r.integer("num_gpu", 1, maxGPUs, "a number of GPUs"), r.text("model_name")
		if r.err == nil {
			jobs = append(jobs, Job{Name: strings.Clone(model), Arrival: at, Duration: d, Key: perfmodel.JobKey{ScaleFactor: g}, Weight: 1})
		}
	})
	if err != nil {
		return nil, err
	}
	numberJobs(jobs)
	return jobs, nil
}

// ReadPollux reads a Pollux workload (petuum/adaptdl, simulator/workloads/
// workload-N.csv): columns name, time (s), application, num_replicas,
// batch_size. Name keeps the application (cifar10, bert, ...), the scale
// factor is num_replicas and BatchSize the batch size. The workload gives
// no amount of work: Pollux derives it from its application profiles, which
// elastic policies use; Duration is 0 here.
func ReadPollux(r io.Reader, name string) ([]Job, error) {
	var jobs []Job
	err := csvRows(r, name, []string{"name", "time", "application", "num_replicas", "batch_size"}, func(r *row) {
		at, g := r.seconds("time"), r.integer("num_replicas", 1, maxGPUs, "a number of replicas")
		bs, app := r.integer("batch_size", 1, maxBatch, "a batch size"), r.text("application")
		if r.err == nil {
			jobs = append(jobs, Job{Name: strings.Clone(app), Arrival: at, Key: perfmodel.JobKey{BatchSize: bs, ScaleFactor: g}, Weight: 1})
		}
	})
	if err != nil {
		return nil, err
	}
	numberJobs(jobs)
	return jobs, nil
}

// ReadAlibabaPods reads the pod list of Alibaba's GPU-sharing trace
// (alibaba/clusterdata, cluster-trace-gpu-v2023, openb_pod_list_*.csv):
// columns name, num_gpu, gpu_milli (thousandths of each GPU, 1 to 1000
// for a pod with GPUs), gpu_spec, creation_time, deletion_time,
// scheduled_time (s). Pods without GPUs are skipped; a pod's scale factor
// is num_gpu (a fraction of one GPU counts as one), its duration deletion
// minus scheduled time (creation when never scheduled), and Name keeps its
// name.
func ReadAlibabaPods(r io.Reader, name string) ([]Job, error) {
	var jobs []Job
	err := csvRows(r, name, []string{"name", "num_gpu", "gpu_milli", "creation_time", "deletion_time", "scheduled_time"}, func(r *row) {
		g := r.integer("num_gpu", 0, maxGPUs, "a number of GPUs")
		milli := r.integer("gpu_milli", 0, 1000, "thousandths of a GPU")
		if r.err != nil || g == 0 {
			return
		}
		if milli == 0 {
			r.fail("gpu_milli 0 for a pod of %d GPUs (want 1 to 1000)", g)
			return
		}
		created, deleted, sched := r.seconds("creation_time"), r.seconds("deletion_time"), r.seconds("scheduled_time")
		if r.err != nil {
			return
		}
		start := math.Max(sched, created)
		if deleted < start {
			r.fail("deletion_time %v before the pod started at %v", deleted, start)
			return
		}
		jobs = append(jobs, Job{Name: strings.Clone(r.get("name")), Arrival: created, Duration: deleted - start, Key: perfmodel.JobKey{ScaleFactor: g}, Weight: 1})
	})
	if err != nil {
		return nil, err
	}
	shiftArrivals(jobs)
	return jobs, nil
}

// AssignModels gives every job without a model one of Gavel's job types,
// the same way Gavel's generator does: uniformly among the templates of the
// throughput table, and, for a job of more than one GPU, among those Gavel
// runs on several GPUs; each job's draw comes from Seed and the job's ID,
// so it does not depend on the other jobs. Steps become the job's Duration
// times its rate on Reference (V100 by default) at its scale factor, from
// Model (default: Extrapolated over Gavel's table, so that jobs of 16 to
// 128 GPUs run too). Jobs with a model keep it; a job without a model or
// without a positive duration is an error.
//
// Apply only reads the AssignModels: it is safe for concurrent use (on
// distinct job slices).
type AssignModels struct {
	Seed      uint64
	Table     *perfmodel.Table
	Model     perfmodel.ThroughputModel
	Reference topology.GPUType
}

// Apply assigns models and steps in place.
func (a *AssignModels) Apply(jobs []Job) error {
	tab := a.Table
	if tab == nil {
		tab = gavel.Simulation()
	}
	model := a.Model
	if model == nil {
		model = perfmodel.Extrapolated{Table: tab}
	}
	ref := a.Reference
	if ref == "" {
		ref = topology.V100
	}
	var single, multi []perfmodel.JobKey
	for _, k := range tab.Jobs() {
		if k.ScaleFactor == 1 {
			single = append(single, k)
			if slices.Contains(tab.ScaleFactors(k), 2) {
				multi = append(multi, k)
			}
		}
	}
	if len(single) == 0 || len(multi) == 0 {
		return errors.New("sim: assign models: the table has no templates")
	}
	for i := range jobs {
		j := &jobs[i]
		if j.Key.Model != "" {
			continue
		}
		if !(j.Duration > 0) {
			return fmt.Errorf("sim: assign models: job %d has no model and duration %v", j.ID, j.Duration)
		}
		rng := rand.New(rand.NewPCG(a.Seed, uint64(j.ID)))
		from := single
		if j.Key.ScaleFactor > 1 {
			from = multi
		}
		k := from[rng.IntN(len(from))]
		k.ScaleFactor = j.Key.ScaleFactor
		rate, err := model.Throughput(k, ref)
		if err != nil {
			return fmt.Errorf("sim: assign models: job %d: %w", j.ID, err)
		}
		if !(rate > 0) || math.IsInf(rate, 0) {
			return fmt.Errorf("sim: assign models: job %d: %s does not run on %s (rate %v)", j.ID, k, ref, rate)
		}
		steps := math.Max(1, math.Round(j.Duration*rate))
		if !(steps <= maxJobSteps) {
			return fmt.Errorf("sim: assign models: job %d: %v s at %v steps/s is %v steps, more than %g", j.ID, j.Duration, rate, steps, float64(maxJobSteps))
		}
		j.Key, j.Steps = k, steps
	}
	return nil
}

// ReadSamples reads a one-column CSV of positive numbers with a header,
// such as Tiresias's GPU-time distributions (yarn-gput*.csv); values are
// from 1e-9 to 1e15, through the limits of ReadPhilly.
func ReadSamples(r io.Reader, name string) ([]float64, error) {
	var out []float64
	first := true
	err := lines(r, name, func(n int, line string) error {
		field, _, _ := strings.Cut(line, ",")
		if first {
			first = false
			if _, err := number(field); err != nil {
				return nil // a header
			}
		}
		v, err := number(field)
		if err != nil || !(v >= 1e-9 && v <= maxJobSteps) {
			return &ParseError{File: name, Line: n, Msg: fmt.Sprintf("%q (want a number from 1e-09 to %g)", field, float64(maxJobSteps))}
		}
		out = append(out, v)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}
