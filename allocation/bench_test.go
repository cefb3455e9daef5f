package allocation

import (
	"math/rand/v2"

	"context"
	"fmt"
	"github.com/gpusched/gpusched/topology"
	"testing"
)

// POP's setup (Gavel's policy-runtime figure): n single-GPU jobs of Gavel's
// job types on n/4 GPUs of each of three types.
func BenchmarkMaxMinGavel(b *testing.B) {
	for _, packed := range []bool{false, true} {
		for _, n := range []int{256, 512, 1024, 2048} {
			p, _ := gavelProblem(b, 1, n)
			name := fmt.Sprintf("packed=%v/jobs=%d", packed, n)
			b.Run(name, func(b *testing.B) {
				var a *Allocation
				for b.Loop() {
					var err error
					if a, err = (&MaxMinFairness{SpaceSharing: packed}).Allocate(context.Background(), p); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(len(a.Pairs)), "pairs")
			})
		}
	}
}

// The column generation used when co-located rates do not come by class.
func BenchmarkMaxMinPackedColumnGeneration(b *testing.B) {
	for _, n := range []int{64, 128, 256} {
		p, _ := gavelProblem(b, 1, n)
		p.Pairs = hidden{p.Pairs}
		b.Run(fmt.Sprintf("jobs=%d", n), func(b *testing.B) {
			for b.Loop() {
				if _, err := (&MaxMinFairness{SpaceSharing: true}).Allocate(context.Background(), p); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// Non-packed max-min at scale: n jobs of scale factor 1, 2, 4 or 8 on k
// types with random rates.
func BenchmarkMaxMinRandom(b *testing.B) {
	for _, size := range []struct{ jobs, types int }{{1000, 8}, {10000, 3}, {10000, 8}} {
		rng := rand.New(rand.NewPCG(5, 6))
		p := &Problem{}
		for k := range size.types {
			p.Types = append(p.Types, topology.GPUType(fmt.Sprintf("t%d", k)))
			p.Capacity = append(p.Capacity, size.jobs/size.types)
		}
		for m := range size.jobs {
			j := Job{ID: m, ScaleFactor: []int{1, 1, 1, 1, 1, 1, 1, 2, 4, 8}[rng.IntN(10)]}
			for range size.types {
				j.Throughput = append(j.Throughput, 0.5+rng.Float64()*9.5)
			}
			p.Jobs = append(p.Jobs, j)
		}
		b.Run(fmt.Sprintf("jobs=%d/types=%d", size.jobs, size.types), func(b *testing.B) {
			for b.Loop() {
				if _, err := (&MaxMinFairness{}).Allocate(context.Background(), p); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// The other policies on POP's setup at 1,024 jobs.
func BenchmarkPolicies(b *testing.B) {
	p, _ := gavelProblem(b, 1, 1024)
	for m := range p.Jobs {
		p.Jobs[m].RemainingSteps = float64(1000 + m)
		p.Jobs[m].Arrival = float64(m)
	}
	p.Now = 2048
	for _, c := range []struct {
		name string
		pol  func() Policy
	}{
		{"water-filling", func() Policy { return &WaterFilling{} }},
		{"finish-time-fairness", func() Policy { return &FinishTimeFairness{} }},
		{"min-makespan", func() Policy { return &MinMakespan{} }},
		{"max-throughput", func() Policy { return &MaxThroughput{} }},
		{"gandiva", func() Policy { return &Gandiva{} }},
	} {
		b.Run(c.name+"/jobs=1024", func(b *testing.B) {
			for b.Loop() {
				if _, err := c.pol().Allocate(context.Background(), p); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// One round of the mechanism over 2,048 jobs with space sharing.
func BenchmarkRounds(b *testing.B) {
	p, _ := gavelProblem(b, 1, 2048)
	r := &Rounds{Policy: &MaxMinFairness{SpaceSharing: true}}
	if _, err := r.Next(context.Background(), p, 0); err != nil {
		b.Fatal(err)
	}
	now := 0.0
	for b.Loop() {
		now += 360
		if _, err := r.Next(context.Background(), p, now); err != nil {
			b.Fatal(err)
		}
	}
}

// One steady round (no re-solve) of the mechanism over 10,000 single- and
// multi-GPU jobs of Gavel's table on 1,024 GPUs of three types, in our mode
// and Gavel's.
func BenchmarkRoundsSteady(b *testing.B) {
	for _, c := range []Compat{CompatNone, CompatGavel} {
		b.Run(c.String(), func(b *testing.B) {
			p, _ := gavelProblem(b, 2, 10000)
			p.Pairs = nil
			p.Capacity = []int{340, 342, 342}
			for m := range p.Jobs {
				p.Jobs[m].ScaleFactor = []int{1, 1, 1, 1, 2, 4, 8}[m%7]
			}
			r := &Rounds{Policy: &MaxMinFairness{}, Mechanism: Mechanism{Compat: c}}
			if _, err := r.Next(context.Background(), p, 0); err != nil {
				b.Fatal(err)
			}
			now := 0.0
			for b.Loop() {
				now += 360
				if _, err := r.Next(context.Background(), p, now); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkMaxMinGavel with space sharing, the LP solved for a vertex of
// its optimal face instead of its centre: fewer pairs in the answer (#16).
func BenchmarkMaxMinGavelVertex(b *testing.B) {
	for _, n := range []int{256, 512, 1024, 2048} {
		p, _ := gavelProblem(b, 1, n)
		b.Run(fmt.Sprintf("jobs=%d", n), func(b *testing.B) {
			var a *Allocation
			for b.Loop() {
				var err error
				if a, err = (&MaxMinFairness{SpaceSharing: true, Vertex: true}).Allocate(context.Background(), p); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(len(a.Pairs)), "pairs")
		})
	}
}
