package sparse

import (
	"fmt"
	"testing"
)

// blockAngular returns the upper-triangle pattern and values of a matrix
// shaped like the normal equations of an allocation LP: a 2x2 block per job,
// each job row coupled to k capacity rows, the capacity rows dense.
func blockAngular(jobs, k int) (n int, cp, ri []int, vals []float64) {
	n = 2*jobs + k
	cp = []int{0}
	for j := range n {
		switch {
		case j < 2*jobs && j%2 == 0:
			ri, vals = append(ri, j), append(vals, 4)
		case j < 2*jobs:
			ri, vals = append(ri, j-1, j), append(vals, 1, 4)
		default:
			for i := range 2 * jobs {
				ri, vals = append(ri, i), append(vals, 0.01)
			}
			for i := 2 * jobs; i <= j; i++ {
				v := 0.1
				if i == j {
					v = float64(jobs)
				}
				ri, vals = append(ri, i), append(vals, v)
			}
		}
		cp = append(cp, len(ri))
	}
	return n, cp, ri, vals
}

func BenchmarkBlockAngular(b *testing.B) {
	for _, jobs := range []int{1000, 10000} {
		n, cp, ri, vals := blockAngular(jobs, 3)
		b.Run(fmt.Sprintf("analyze/jobs=%d", jobs), func(b *testing.B) {
			for b.Loop() {
				if _, err := Analyze(n, cp, ri); err != nil {
					b.Fatal(err)
				}
			}
		})
		c, err := Analyze(n, cp, ri)
		if err != nil {
			b.Fatal(err)
		}
		rhs := make([]float64, n)
		b.Run(fmt.Sprintf("factor+solve/jobs=%d", jobs), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if err := c.Factor(vals); err != nil {
					b.Fatal(err)
				}
				rhs[0] = 1
				c.Solve(rhs)
			}
		})
	}
}
