package lp_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/gpusched/gpusched/allocation/lp"
	"github.com/gpusched/gpusched/allocation/lp/lptest"
)

func BenchmarkInteriorPointAllocation(b *testing.B) {
	for _, types := range []int{3, 8} {
		for _, jobs := range []int{100, 1000, 10000} {
			m := lptest.Allocation(1, jobs, types)
			b.Run(fmt.Sprintf("jobs=%d/types=%d", jobs, types), func(b *testing.B) {
				b.ReportAllocs()
				iters := 0
				for b.Loop() {
					sol, err := (&lp.InteriorPoint{}).Solve(context.Background(), m)
					if err != nil {
						b.Fatal(err)
					}
					iters = sol.Iterations
				}
				b.ReportMetric(float64(iters), "iterations")
			})
		}
	}
}

func BenchmarkInteriorPointThroughput(b *testing.B) {
	for _, jobs := range []int{1000, 10000} {
		m := lptest.Throughput(1, jobs, 3)
		b.Run(fmt.Sprintf("jobs=%d/types=3", jobs), func(b *testing.B) {
			iters := 0
			for b.Loop() {
				sol, err := (&lp.InteriorPoint{}).Solve(context.Background(), m)
				if err != nil {
					b.Fatal(err)
				}
				iters = sol.Iterations
			}
			b.ReportMetric(float64(iters), "iterations")
		})
	}
}
