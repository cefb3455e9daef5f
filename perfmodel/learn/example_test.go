package learn_test

import (
	"fmt"

	"github.com/gpusched/gpusched/perfmodel/learn"
	"github.com/gpusched/gpusched/topology"
)

// A job reports its cumulative steps once a minute; the first two
// windows of each segment are warm-up, the rest measure its rate.
func ExampleLearner_Observe() {
	l, err := learn.New(learn.Config{})
	if err != nil {
		panic(err)
	}
	o := learn.Observation{Type: topology.H100, GPUs: 8, Segment: 1}
	for minute := range 8 {
		o.Time = float64(60 * minute)
		o.Steps = float64(600 * minute) // 10 steps/s
		if minute < 2 {
			o.Steps = float64(100 * minute) // compiling, loading data
		}
		if err := l.Observe("llm-finetune", o); err != nil {
			panic(err)
		}
	}
	e := l.Estimate("llm-finetune", topology.H100)
	fmt.Printf("%s on %d %s: %.1f steps/s, sigma %.2f, %d windows\n", e.Source, e.GPUs, e.Type, e.Mean, e.Sigma, e.Windows)
	// Output:
	// measured on 8 h100: 10.0 steps/s, sigma 0.06, 5 windows
}

// What other jobs measured on two types gives a job measured on one of
// them a prior on the other (here every job ran 2.5 times as fast on an
// h100 as on an a100).
func ExampleLearner_Refresh() {
	l, err := learn.New(learn.Config{})
	if err != nil {
		panic(err)
	}
	report := func(job string, seg uint64, t topology.GPUType, rate, start float64) {
		for minute := range 6 {
			o := learn.Observation{Type: t, GPUs: 1, Segment: seg, Time: start + float64(60*minute), Steps: rate * float64(60*minute)}
			if err := l.Observe(job, o); err != nil {
				panic(err)
			}
		}
	}
	for i, rate := range []float64{2, 4, 8, 16} {
		job := fmt.Sprintf("past-%d", i)
		report(job, 1, topology.A100, rate, 0)
		report(job, 2, topology.H100, 2.5*rate, 1000)
		l.Forget(job) // finished: remembered for the population
	}
	st := l.Refresh()
	fmt.Printf("fitted %d jobs on %d types\n", st.Rows, st.Types)
	report("new", 1, topology.A100, 6, 0)
	for _, e := range l.Estimates("new", nil) {
		fmt.Printf("%s: %.1f steps/s (%s, sigma %.2f)\n", e.Type, e.Mean, e.Source, e.Sigma)
	}
	// Output:
	// fitted 4 jobs on 2 types
	// a100: 6.0 steps/s (measured, sigma 0.08)
	// h100: 15.0 steps/s (prior, sigma 0.22)
}
