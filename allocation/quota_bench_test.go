package allocation

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/gpusched/gpusched/topology"
)

// quotaBenchProblem is n jobs of tenants t0..t(e-1) on k types of n/(2k)
// GPUs each (two jobs per GPU), jobs of scale factor 1, 2 or 4 with random
// rates, most of them in the first tenants; t0 is guaranteed a quarter of
// the cluster, t1 20 GPUs of the first type, the others 1.2/e each (the
// guarantees over-commit the cluster), t(e-1) capped at a tenth of it.
func quotaBenchProblem(n, e, k int) *Problem {
	rng := rand.New(rand.NewPCG(26, uint64(n)))
	p := &Problem{EntityQuotas: map[string]Quota{}}
	for i := range k {
		p.Types = append(p.Types, topology.GPUType(fmt.Sprintf("t%d", i)))
		p.Capacity = append(p.Capacity, max(4, n/(2*k)))
	}
	for i := range e {
		q := Quota{GuaranteedShare: 1.2 / float64(e)}
		switch i {
		case 0:
			q.GuaranteedShare = 0.25
		case 1:
			q = Quota{GuaranteedGPUs: map[topology.GPUType]float64{p.Types[0]: 20}}
		case e - 1:
			q.MaxShare = 0.1
			q.GuaranteedShare = min(q.GuaranteedShare, 0.1)
		}
		p.EntityQuotas[fmt.Sprintf("tenant%d", i)] = q
	}
	for m := range n {
		j := Job{ID: m, ScaleFactor: []int{1, 1, 1, 1, 2, 4}[rng.IntN(6)], Entity: fmt.Sprintf("tenant%d", min(rng.IntN(e), rng.IntN(e)))}
		for range k {
			j.Throughput = append(j.Throughput, 0.5+rng.Float64()*9.5)
		}
		p.Jobs = append(p.Jobs, j)
	}
	return p
}

// QuotaFairness at a realistic size next to plain max-min fairness on the
// same jobs (which ignores the quotas).
func BenchmarkQuotaFairness(b *testing.B) {
	for _, size := range []struct{ jobs, tenants, types int }{{1000, 10, 3}, {200, 10, 3}} {
		p := quotaBenchProblem(size.jobs, size.tenants, size.types)
		for _, pol := range []struct {
			name string
			pol  Policy
		}{{"maxmin", &MaxMinFairness{}}, {"quota", &QuotaFairness{}}, {"quota-waterfill", &QuotaFairness{WaterFilling: true}}, {"waterfill", &WaterFilling{}}} {
			b.Run(fmt.Sprintf("jobs=%d/tenants=%d/types=%d/%s", size.jobs, size.tenants, size.types, pol.name), func(b *testing.B) {
				b.ReportAllocs()
				var a *Allocation
				for b.Loop() {
					var err error
					if a, err = pol.pol.Allocate(context.Background(), p); err != nil {
						b.Fatal(err)
					}
				}
				if a.LP != nil {
					b.ReportMetric(float64(a.LP.Solves), "LPs")
					b.ReportMetric(float64(a.LP.Iterations), "iterations")
				}
			})
		}
	}
}

// The per-tenant policies the Kubernetes controllers default to
// (WaterFilling.PerEntity, under QuotaFairness or alone) at the sizes of a
// large cluster's admission round, beside plain max-min fairness (per job)
// and Gavel's job water filling at the size it can still do.
func BenchmarkTenantFairness(b *testing.B) {
	for _, size := range []struct{ jobs, tenants int }{{1000, 8}, {10000, 8}, {10000, 32}} {
		p := randomEntities(1, size.jobs, size.tenants, 26)
		pols := []struct {
			name string
			pol  Policy
		}{
			{"maxmin", &MaxMinFairness{}},
			{"per-entity", &WaterFilling{Hierarchical: true, PerEntity: true}},
			{"quota-per-entity", &QuotaFairness{WaterFilling: true, Hierarchical: true, PerEntity: true}},
		}
		if size.jobs <= 1000 {
			pols = append(pols, struct {
				name string
				pol  Policy
			}{"per-job", &WaterFilling{Hierarchical: true}})
		}
		for _, pol := range pols {
			b.Run(fmt.Sprintf("jobs=%d/tenants=%d/%s", size.jobs, size.tenants, pol.name), func(b *testing.B) {
				var a *Allocation
				for b.Loop() {
					var err error
					if a, err = pol.pol.Allocate(context.Background(), p); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(a.LP.Solves), "LPs")
			})
		}
	}
}
