package scheduler

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/gpusched/gpusched/allocation"
	"github.com/gpusched/gpusched/perfmodel/learn"
	"github.com/gpusched/gpusched/topology"
)

// benchScheduler: 10,000 jobs on 1,024 GPUs (128 servers of 8: 43 of V100,
// 43 of A100, 42 of K80), Gavel's mix of scale factors (70% 1 GPU, 10% 2,
// 15% 4, 5% 8), rates drawn so that A100 > V100 > K80 for most jobs,
// heterogeneity-aware max-min fairness.
func benchScheduler(b *testing.B, resetInterval float64) (*Scheduler, *rand.Rand) {
	return benchSchedulerLearning(b, resetInterval, nil, nil)
}

// benchSchedulerLearning is benchScheduler with est as Config.Estimator
// (nil: none) and every job learning its rates, its benchSpec rates its
// tenant's claims, when there is one; before, if set, sees each job's key
// and spec before its Submit, and may change the spec.
func benchSchedulerLearning(b *testing.B, resetInterval float64, est learn.Estimator, before func(key string, spec *JobSpec)) (*Scheduler, *rand.Rand) {
	c, err := topology.ParseCompact("v100:344:8,a100:344:8,k80:336:8", 8)
	if err != nil {
		b.Fatal(err)
	}
	s, err := New(Config{Policy: &allocation.MaxMinFairness{}, Cluster: c, Mechanism: allocation.Mechanism{MinResetInterval: resetInterval}, Estimator: est})
	if err != nil {
		b.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(17, 17))
	for i := range 10000 {
		spec := benchSpec(rng)
		spec.Learn = est != nil
		if before != nil {
			before(fmt.Sprint("job-", i), &spec)
		}
		if err := s.Submit(fmt.Sprint("job-", i), spec, 0); err != nil {
			b.Fatal(err)
		}
	}
	return s, rng
}

func benchSpec(rng *rand.Rand) JobSpec {
	gpus := 1
	switch u := rng.Float64(); {
	case u > 0.95:
		gpus = 8
	case u > 0.8:
		gpus = 4
	case u > 0.7:
		gpus = 2
	}
	k80 := 0.5 + rng.Float64()
	return JobSpec{GPUs: gpus, RemainingSteps: 1e6, Throughput: map[topology.GPUType]float64{
		topology.K80: k80, topology.V100: k80 * (2 + 2*rng.Float64()), topology.A100: k80 * (3 + 4*rng.Float64()),
	}}
}

// benchRoundsFrom runs a round at time start, warm more (untimed), then
// one more, reported, per iteration of b, and returns the last; with
// steady, a round that solves again fails b. between, if not nil, is
// called after each round (before its report), outside the timed part
// from the first timed round on, its time reported as between-ns/op. It
// reports the mean time of the rounds that did not solve again
// (steady-ns/op) and the share of those that did (solves/op).
func benchRoundsFrom(b *testing.B, s *Scheduler, steady bool, start float64, warm int, between func(*Round)) *Round {
	now := start
	r, err := s.Round(context.Background(), now)
	if err != nil {
		b.Fatal(err)
	}
	next := func() {
		if between != nil {
			between(r)
		}
		report(b, s, r)
		now += 360
		if r, err = s.Round(context.Background(), now); err != nil {
			b.Fatal(err)
		}
	}
	for range warm {
		next()
	}
	var outside, kept time.Duration
	solves := 0
	for b.Loop() {
		if between != nil {
			b.StopTimer()
			t0 := time.Now()
			between(r)
			outside += time.Since(t0)
			b.StartTimer()
		}
		report(b, s, r)
		now += 360
		t0 := time.Now()
		if r, err = s.Round(context.Background(), now); err != nil {
			b.Fatal(err)
		}
		if r.Reset {
			solves++
		} else {
			kept += time.Since(t0)
		}
		if steady && r.Reset {
			b.Fatal("a steady round re-solved")
		}
	}
	if between != nil {
		b.ReportMetric(float64(outside.Nanoseconds())/float64(b.N), "between-ns/op")
	}
	b.ReportMetric(float64(kept.Nanoseconds())/float64(max(b.N-solves, 1)), "steady-ns/op")
	b.ReportMetric(float64(solves)/float64(b.N), "solves/op")
	return r
}

var benchTypes = []topology.GPUType{topology.K80, topology.V100, topology.A100}

// benchLearned: every job learns its rates, measured on one of the three
// types before (a population of 10,000 rows), its rates its claims, and,
// with pin, allowed on that type only. After warm rounds (untimed: with
// pin, 60, in which each job runs about three times and its measurement
// settles), between rounds and outside the timed part (between-ns/op),
// every job that ran reports its progress every 60 s of the round at its
// claimed rate on the type it ran on: a round pays the refits and the
// reads that fall due (a job's new windows, a refit that moved its
// prior), and the policy's solves when learned rates moved (solves/op;
// steady-ns/op is the mean of the rounds that did not solve).
func benchLearned(b *testing.B, pin bool, warm int) {
	l, err := learn.New(learn.Config{})
	if err != nil {
		b.Fatal(err)
	}
	n := 0
	steps := map[string]float64{}
	s, _ := benchSchedulerLearning(b, 0, l, func(key string, spec *JobSpec) {
		t := benchTypes[n%3]
		n++
		if pin {
			spec.Types = []topology.GPUType{t}
		}
		for w := range 5 {
			steps[key] = spec.Throughput[t] * 60 * float64(w)
			o := learn.Observation{Type: t, GPUs: spec.GPUs, Segment: 0, Steps: steps[key], Time: 60 * float64(w)}
			if err := l.Observe(key, o); err != nil {
				b.Fatal(err)
			}
		}
	})
	benchRoundsFrom(b, s, false, 3600, warm, func(r *Round) { progress(b, s, r, steps) })
}

// progress reports every 60 s of round r, for each learned job it runs,
// the steps done at its rate on its type (its claim there, scaled to its
// GPUs linearly: the hidden truth of the benchmark) to s.Progress; steps
// holds each job's cumulative steps.
func progress(b *testing.B, s *Scheduler, r *Round, steps map[string]float64) {
	for _, as := range r.Assignments {
		for _, k := range as.Jobs {
			spec := s.jobs[k].spec
			rate := spec.Throughput[as.Type] * float64(len(as.Devices)-as.Extra) / float64(spec.GPUs)
			for w := 1; w*60 <= int(r.Length); w++ {
				steps[k] += rate * 60
				if err := s.Progress(k, steps[k], r.Start+float64(w*60)); err != nil {
					b.Fatal(err)
				}
			}
		}
	}
}

// report credits every job of the round with the whole round.
func report(b *testing.B, s *Scheduler, r *Round) {
	ran := make([]Ran, 0, len(r.Assignments))
	for _, as := range r.Assignments {
		for _, k := range as.Jobs {
			ran = append(ran, Ran{Job: k, Seconds: r.Length, Steps: 100})
		}
	}
	if err := s.Report(RoundReport{Start: r.Start, Ran: ran}); err != nil {
		b.Fatal(err)
	}
}

// One round of the composed scheduler, 10,000 jobs on 1,024 GPUs: steady
// (the allocation stands, as in most rounds) and with a re-solve (a job
// left and one arrived, and the policy solves again).
func BenchmarkSchedulerRound(b *testing.B) {
	b.Run("steady", func(b *testing.B) {
		// After 10 rounds, as steady-learned.
		s, _ := benchScheduler(b, 0)
		r := benchRoundsFrom(b, s, true, 0, 10, nil)
		b.ReportMetric(float64(r.Stats.Kept)/float64(max(r.Stats.Placed, 1)), "kept/placed")
	})
	b.Run("steady-learned", func(b *testing.B) { benchLearned(b, false, 10) })
	b.Run("settled", func(b *testing.B) {
		// As steady, after 300 rounds, as settled-learned.
		s, _ := benchScheduler(b, 0)
		benchRoundsFrom(b, s, true, 0, 300, nil)
	})
	// After 300 rounds, in which every job ran about 30 times and was
	// measured on every type it runs on: the learning has settled.
	b.Run("settled-learned", func(b *testing.B) { benchLearned(b, false, 300) })
	b.Run("steady-one-type", func(b *testing.B) {
		// As steady, each job allowed on one of the three types only (as
		// under Kueue: one flavor), after 60 rounds, as
		// steady-one-type-learned.
		n := 0
		s, _ := benchSchedulerLearning(b, 0, nil, func(_ string, spec *JobSpec) {
			spec.Types = []topology.GPUType{benchTypes[n%3]}
			n++
		})
		benchRoundsFrom(b, s, true, 0, 60, nil)
	})
	b.Run("steady-one-type-learned", func(b *testing.B) { benchLearned(b, true, 60) })
	b.Run("resolve", func(b *testing.B) {
		s, rng := benchScheduler(b, -1)
		now := 0.0
		r, err := s.Round(context.Background(), now)
		if err != nil {
			b.Fatal(err)
		}
		next := 10000
		for b.Loop() {
			report(b, s, r)
			if err := s.Remove(fmt.Sprint("job-", next-10000)); err != nil {
				b.Fatal(err)
			}
			if err := s.Submit(fmt.Sprint("job-", next), benchSpec(rng), now); err != nil {
				b.Fatal(err)
			}
			next++
			now += 360
			if r, err = s.Round(context.Background(), now); err != nil {
				b.Fatal(err)
			}
			if !r.Reset {
				b.Fatal("no re-solve")
			}
		}
	})
}
