package sim

import (
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gpusched/gpusched/perfmodel"
	"github.com/gpusched/gpusched/perfmodel/gavel"
	"github.com/gpusched/gpusched/topology"
)

// row is one row of a CSV file being read. Its accessors parse a named
// column and keep the first problem found, so that a loader reads all its
// fields and then checks err once.
type row struct {
	file  string
	line  int
	rec   []string
	index map[string]int
	err   error
}

// get returns a column, trimmed.
func (r *row) get(c string) string { return strings.TrimSpace(r.rec[r.index[c]]) }

// fail records a problem with the row unless one is recorded already.
func (r *row) fail(format string, args ...any) {
	if r.err == nil {
		r.err = &ParseError{File: r.file, Line: r.line, Msg: fmt.Sprintf(format, args...)}
	}
}

// seconds parses a finite number of seconds >= 0.
func (r *row) seconds(c string) float64 {
	v, ok := nonNegative(r.get(c))
	if !ok {
		r.fail("%s %q (want seconds >= 0)", c, r.get(c))
	}
	return v
}

// count parses an integer >= 1.
func (r *row) count(c string) int {
	v, ok := positive(r.get(c))
	if !ok {
		r.fail("%s %q (want an integer >= 1)", c, r.get(c))
	}
	return v
}

// text returns a column that must not be empty.
func (r *row) text(c string) string {
	v := r.get(c)
	if v == "" {
		r.fail("empty %s", c)
	}
	return v
}

// csvRows reads a CSV file with a header and calls f for each row; the
// named columns must all be present. It stops at the first row f leaves
// with an error.
func csvRows(r io.Reader, name string, columns []string, f func(*row)) error {
	cr := csv.NewReader(r)
	cr.ReuseRecord = true
	cr.FieldsPerRecord = -1
	header, err := cr.Read()
	if err != nil {
		if errors.Is(err, io.EOF) {
			return &ParseError{File: name, Line: 1, Msg: "empty file (want a header: " + strings.Join(columns, ",") + ")"}
		}
		return &ParseError{File: name, Line: 1, Msg: err.Error()}
	}
	index := map[string]int{}
	for i, h := range header {
		index[strings.TrimSpace(strings.TrimPrefix(h, "\ufeff"))] = i
	}
	for _, c := range columns {
		if _, ok := index[c]; !ok {
			return &ParseError{File: name, Line: 1, Msg: fmt.Sprintf("no column %q in the header (want %s)", c, strings.Join(columns, ","))}
		}
	}
	for {
		rec, err := cr.Read()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			var pe *csv.ParseError
			if errors.As(err, &pe) {
				return &ParseError{File: name, Line: pe.Line, Msg: pe.Err.Error()}
			}
			return fmt.Errorf("sim: reading %s: %w", name, err)
		}
		line, _ := cr.FieldPos(0)
		if len(rec) != len(header) {
			return &ParseError{File: name, Line: line, Msg: fmt.Sprintf("%d fields, the header has %d", len(rec), len(header))}
		}
		rw := row{file: name, line: line, rec: rec, index: index}
		if f(&rw); rw.err != nil {
			return rw.err
		}
	}
}

// positive parses an integer >= 1.
func positive(s string) (int, bool) {
	v, err := strconv.Atoi(s)
	return v, err == nil && v >= 1
}

// nonNegative parses a finite number >= 0.
func nonNegative(s string) (float64, bool) {
	v, err := number(s)
	return v, err == nil && v >= 0
}

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
func ReadPhilly(r io.Reader, name string) ([]Job, error) {
	var jobs []Job
	err := csvRows(r, name, []string{"timestamp", "duration", "num_gpus"}, func(r *row) {
		ts, err := time.Parse(time.DateTime, r.get("timestamp"))
		if err != nil {
			r.fail("timestamp %q (want 2006-01-02 15:04:05)", r.get("timestamp"))
		}
		d, g := r.seconds("duration"), r.count("num_gpus")
		if r.err == nil {
			jobs = append(jobs, Job{Arrival: float64(ts.Unix()), Duration: d, Key: perfmodel.JobKey{ScaleFactor: g}, Weight: 1})
		}
	})
	shiftArrivals(jobs)
	return jobs, err
}

// ReadITP reads a Microsoft ITP cluster trace as ElasticFlow ships it
// (microsoft/elasticflow-traces, cluster01.csv to cluster10.csv): columns
// job_id, submission_time (s), duration (s), num_gpu. Arrivals are seconds
// after the earliest job; Name keeps job_id. Give models with AssignModels.
func ReadITP(r io.Reader, name string) ([]Job, error) {
	var jobs []Job
	err := csvRows(r, name, []string{"job_id", "submission_time", "duration", "num_gpu"}, func(r *row) {
		at, d, g := r.seconds("submission_time"), r.seconds("duration"), r.count("num_gpu")
		if r.err == nil {
			jobs = append(jobs, Job{Name: r.get("job_id"), Arrival: at, Duration: d, Key: perfmodel.JobKey{ScaleFactor: g}, Weight: 1})
		}
	})
	shiftArrivals(jobs)
	return jobs, err
}

// ReadTiresias reads a Tiresias simulator trace (SymbioticLab/Tiresias,
// simulator/*_job.csv): columns job_id, num_gpu, submit_time (s),
// iterations, model_name, duration (s). Name keeps model_name (Tiresias's
// models, such as vgg19, are not in Gavel's table; give Gavel models with
// AssignModels, which keeps the durations).
func ReadTiresias(r io.Reader, name string) ([]Job, error) {
	var jobs []Job
	err := csvRows(r, name, []string{"job_id", "num_gpu", "submit_time", "model_name", "duration"}, func(r *row) {
		at, d, g, model := r.seconds("submit_time"), r.seconds("duration"), r.count("num_gpu"), r.text("model_name")
		if r.err == nil {
			jobs = append(jobs, Job{Name: model, Arrival: at, Duration: d, Key: perfmodel.JobKey{ScaleFactor: g}, Weight: 1})
		}
	})
	numberJobs(jobs)
	return jobs, err
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
		at, g, bs, app := r.seconds("time"), r.count("num_replicas"), r.count("batch_size"), r.text("application")
		if r.err == nil {
			jobs = append(jobs, Job{Name: app, Arrival: at, Key: perfmodel.JobKey{BatchSize: bs, ScaleFactor: g}, Weight: 1})
		}
	})
	numberJobs(jobs)
	return jobs, err
}

// ReadAlibabaPods reads the pod list of Alibaba's GPU-sharing trace
// (alibaba/clusterdata, cluster-trace-gpu-v2023, openb_pod_list_*.csv):
// columns name, num_gpu, gpu_milli, gpu_spec, creation_time,
// deletion_time, scheduled_time (s). Pods without GPUs are skipped; a pod's
// scale factor is num_gpu (a fraction of one GPU counts as one), its
// duration deletion minus scheduled time (creation when never scheduled),
// and Name keeps its name.
func ReadAlibabaPods(r io.Reader, name string) ([]Job, error) {
	var jobs []Job
	err := csvRows(r, name, []string{"name", "num_gpu", "gpu_milli", "creation_time", "deletion_time", "scheduled_time"}, func(r *row) {
		g, err := strconv.Atoi(r.get("num_gpu"))
		if err != nil || g < 0 {
			r.fail("num_gpu %q (want an integer >= 0)", r.get("num_gpu"))
		}
		if r.err != nil || g == 0 {
			return
		}
		created, ok1 := nonNegative(r.get("creation_time"))
		deleted, ok2 := nonNegative(r.get("deletion_time"))
		sched, ok3 := nonNegative(r.get("scheduled_time"))
		if !ok1 || !ok2 || !ok3 {
			r.fail("times %q, %q, %q (want seconds >= 0)", r.get("creation_time"), r.get("deletion_time"), r.get("scheduled_time"))
			return
		}
		start := math.Max(sched, created)
		if deleted < start {
			r.fail("deletion_time %v before the pod started at %v", deleted, start)
			return
		}
		jobs = append(jobs, Job{Name: r.get("name"), Arrival: created, Duration: deleted - start, Key: perfmodel.JobKey{ScaleFactor: g}, Weight: 1})
	})
	shiftArrivals(jobs)
	return jobs, err
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
		if rate <= 0 {
			return fmt.Errorf("sim: assign models: job %d: %s does not run on %s", j.ID, k, ref)
		}
		j.Key = k
		j.Steps = math.Max(1, math.Round(j.Duration*rate))
	}
	return nil
}

// ReadSamples reads a one-column CSV of positive numbers with a header,
// such as Tiresias's GPU-time distributions (yarn-gput*.csv).
func ReadSamples(r io.Reader, name string) ([]float64, error) {
	var out []float64
	first := true
	err := lines(r, func(n int, line string) error {
		if first {
			first = false
			if _, err := number(line); err != nil {
				return nil // a header
			}
		}
		v, err := number(strings.TrimSpace(strings.Split(line, ",")[0]))
		if err != nil || v <= 0 {
			return &ParseError{File: name, Line: n, Msg: fmt.Sprintf("%q is not a positive number", line)}
		}
		out = append(out, v)
		return nil
	})
	return out, err
}
