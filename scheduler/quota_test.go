package scheduler

import (
	"fmt"
	"testing"

	"github.com/gpusched/gpusched/allocation"
	"github.com/gpusched/gpusched/topology"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Config.TenantQuotas reach the policy. On 8 V100 and 4 K80, tenant A is
// guaranteed half the cluster and is idle at first, so B's 12 jobs take
// all 12 GPUs. A's 6 jobs arrive; from the next round on (the allocation
// is solved again at every change) A gets half the cluster's throughput:
// every job runs 2 steps/s on a V100 and 1 on a K80, so T^prop = 5/3 and a
// V100 is worth 1.2 GPUs of the cluster's mix, a K80 0.6, the cluster 12.
// A's rounds average 6 (it holds mostly V100s, where its jobs reach their
// guarantee on fewer GPUs); plain max-min fairness gives the 18 jobs 2/3
// each, A 4.
func TestTenantQuotas(t *testing.T) {
	run := func(pol allocation.Policy) (first, mean float64) {
		s := newSched(t, func(c *Config) {
			c.Policy = pol
			c.MinResetInterval = -1
			c.TenantQuotas = map[string]allocation.Quota{"A": {GuaranteedShare: 0.5}}
		})
		for i := range 12 {
			require.NoError(t, s.Submit(fmt.Sprint("b", i), JobSpec{GPUs: 1, Throughput: rates(2, 1), Tenant: "B"}, 0))
		}
		// normalised is tenant A's normalised throughput in a round.
		normalised := func(r *Round) float64 {
			v := 0.0
			for _, as := range r.Assignments {
				if as.Jobs[0][0] == 'a' {
					v += map[topology.GPUType]float64{topology.V100: 1.2, topology.K80: 0.6}[as.Type] * float64(len(as.Devices))
				}
			}
			return v
		}
		r, err := s.Round(ctx, 0)
		require.NoError(t, err)
		checkRound(t, s, r)
		used := 0
		for _, as := range r.Assignments {
			used += len(as.Devices)
		}
		assert.Equal(t, 12, used, "A's idle half is lent")
		for i := range 6 {
			require.NoError(t, s.Submit(fmt.Sprint("a", i), JobSpec{GPUs: 1, Throughput: rates(2, 1), Tenant: "A"}, 300))
		}
		const rounds = 48
		for i := 1; i <= rounds; i++ {
			r, err = s.Round(ctx, float64(i)*360)
			require.NoError(t, err)
			checkRound(t, s, r)
			if i == 1 {
				first = normalised(r)
			}
			mean += normalised(r) / rounds
		}
		return first, mean
	}
	first, mean := run(&allocation.QuotaFairness{})
	assert.GreaterOrEqual(t, first, 6.0)
	assert.InDelta(t, 6, mean, 0.1)
	_, mean = run(&allocation.MaxMinFairness{})
	assert.InDelta(t, 4, mean, 0.1)

	_, err := New(Config{Policy: &allocation.QuotaFairness{}, TenantQuotas: map[string]allocation.Quota{"A": {GuaranteedShare: 1.5}}})
	require.ErrorIs(t, err, ErrInvalid)
	assert.ErrorContains(t, err, `Config.TenantQuotas: allocation: invalid problem: entity "A": quota: guaranteed share 1.5, outside [0, 1]`)
}
