package sim

import (
	"context"
	"testing"

	"github.com/gpusched/gpusched/allocation"
	"github.com/gpusched/gpusched/perfmodel"
	"github.com/gpusched/gpusched/topology"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// twoRates runs every job at 2 steps/s on a V100 and 1 on a K80.
type twoRates struct{}

func (twoRates) Throughput(_ perfmodel.JobKey, t topology.GPUType) (float64, error) {
	if t == topology.V100 {
		return 2, nil
	}
	return 1, nil
}

// A lending and reclaim scenario of the quota policy, simulated: 8 V100s
// and 4 K80s, every job on one GPU at 2 steps/s on a V100 and 1 on a K80,
// so T^prop = (8 x 2 + 4 x 1) / 12 = 5/3 steps/s and the cluster is worth
// 12 GPUs of its mix (20 steps/s). Tenant A is guaranteed half of it and
// is idle at first: tenant B's 12 jobs (30,000 steps each) arrive at 0 and
// take all 12 GPUs (A's half is lent). A's 6 jobs of 6,000 steps arrive at
// 3,600 s; from that round on A gets its guaranteed 6 GPU-equivalents (10
// steps/s), 5/3 steps/s a job, so each finishes 6,000 / (5/3) = 3,600 s
// after it arrives. Plain max-min fairness gives the 18 jobs 20/18 steps/s
// each: A's jobs take 5,400 s.
func TestQuotaLentAndReclaimedSimulated(t *testing.T) {
	var jobs []Job
	tenants := map[int]string{}
	for i := range 18 {
		j := Job{ID: i, Key: perfmodel.JobKey{Model: "any", ScaleFactor: 1}, Steps: 30000}
		tenants[i] = "B"
		if i >= 12 {
			j.Arrival, j.Steps, tenants[i] = 3600, 6000, "A"
		}
		jobs = append(jobs, j)
	}
	run := func(pol allocation.Policy) (*Result, float64) {
		res, err := Run(context.Background(), Config{
			Types: []topology.GPUType{topology.V100, topology.K80}, Capacity: []int{8, 4}, Throughput: twoRates{},
			Policy: pol, Tenants: tenants, TenantQuotas: map[string]allocation.Quota{"A": {GuaranteedShare: 0.5}},
		}, jobs)
		require.NoError(t, err)
		require.Len(t, res.Records, 18)
		jct := 0.0
		for _, r := range res.Records {
			if tenants[r.ID] == "A" {
				jct += r.JCT() / 6
			}
		}
		return res, jct
	}
	res, quotaJCT := run(&allocation.QuotaFairness{})
	lent := 0
	for _, s := range res.Utilisation {
		if s.Time < 3600 {
			assert.InDelta(t, 1, s.Value, 1e-9, "at %v s: A's idle half is lent to B", s.Time)
			lent++
		}
	}
	assert.Positive(t, lent)
	for _, r := range res.Records {
		if tenants[r.ID] == "A" {
			assert.InDelta(t, 3600, r.Start, 0, "job %d: A's guarantee reclaimed in the round its jobs arrive", r.ID)
		}
	}
	_, maxMinJCT := run(&allocation.MaxMinFairness{})
	t.Logf("A's mean JCT: %.0f s with its quota, %.0f s under max-min fairness", quotaJCT, maxMinJCT)
	assert.InDelta(t, 3600, quotaJCT, 120, "its guarantee, within a third of a round")
	assert.InDelta(t, 5400, maxMinJCT, 120)

	_, err := Run(context.Background(), Config{Types: []topology.GPUType{topology.V100}, Capacity: []int{1}, Throughput: twoRates{},
		Policy: &allocation.QuotaFairness{}, Tenants: map[int]string{99: "A"}}, jobs)
	assert.ErrorIs(t, err, ErrInvalid)
	_, err = Run(context.Background(), Config{Types: []topology.GPUType{topology.V100}, Capacity: []int{1}, Throughput: twoRates{},
		Policy: &allocation.QuotaFairness{}, TenantQuotas: map[string]allocation.Quota{"A": {GuaranteedShare: 2}}}, jobs)
	assert.ErrorIs(t, err, ErrInvalid)
}
