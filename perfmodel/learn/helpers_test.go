package learn_test

import (
	"encoding/json"
	"testing"

	"github.com/gpusched/gpusched/perfmodel/learn"
	"github.com/gpusched/gpusched/topology"
)

// runner reports a job's progress at a steady rate, one report per
// window, as a job's progress channel would.
type runner struct {
	l       *learn.Learner
	job     string
	steps   float64
	time    float64
	segment uint64
	window  float64
}

func newRunner(l *learn.Learner, job string) *runner {
	return &runner{l: l, job: job, window: l.Config().Window}
}

// run starts a new segment on gpus GPUs of type t and reports n windows
// at the rates given by rate(i) (window i from 0), then returns.
func (r *runner) run(tb testing.TB, t topology.GPUType, gpus, n int, rate func(i int) float64) {
	tb.Helper()
	r.segment++
	r.time += 10 // a gap between segments
	o := learn.Observation{Type: t, GPUs: gpus, Segment: r.segment, Steps: r.steps, Time: r.time}
	if err := r.l.Observe(r.job, o); err != nil {
		tb.Error(err) // not Fatal: run may be called from other goroutines
		return
	}
	for i := range n {
		r.steps += rate(i) * r.window
		r.time += r.window
		o.Steps, o.Time = r.steps, r.time
		if err := r.l.Observe(r.job, o); err != nil {
			tb.Error(err)
			return
		}
	}
}

func steady(v float64) func(int) float64 { return func(int) float64 { return v } }

// jobNames returns the names of the jobs of a snapshot.
func jobNames(snap []byte) []string {
	var s struct {
		Jobs []struct {
			Name string `json:"name"`
		} `json:"jobs"`
	}
	if err := json.Unmarshal(snap, &s); err != nil {
		panic(err)
	}
	var out []string
	for _, j := range s.Jobs {
		out = append(out, j.Name)
	}
	return out
}
