package allocation

import (
	"context"
	"fmt"
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
