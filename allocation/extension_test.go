package allocation_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/gpusched/gpusched/allocation"
	"github.com/gpusched/gpusched/topology"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// randomProblem has jobs of a few kinds (so that the built-in groups
// them) or all different.
func randomProblem(seed uint64, jobs, kinds int) *allocation.Problem {
	rng := rand.New(rand.NewPCG(seed, 9))
	p := &allocation.Problem{Types: []topology.GPUType{"k80", "p100", "v100"}, Capacity: []int{jobs / 4, jobs / 4, jobs / 4}}
	rates := make([][]float64, kinds)
	for i := range rates {
		rates[i] = []float64{0.5 + rng.Float64(), 1 + 2*rng.Float64(), 2 + 4*rng.Float64()}
	}
	for m := range jobs {
		p.Jobs = append(p.Jobs, allocation.Job{ID: m, ScaleFactor: []int{1, 1, 2}[m%3], Throughput: rates[rng.IntN(kinds)]})
	}
	return p
}

// At its neutral setting a variant is the built-in bit for bit, grouped
// (few kinds of job) or not, LAS and Gavel; at a binding cap no job gets
// more than the cap.
func TestExtensionNeutralIsBuiltIn(t *testing.T) {
	ctx := context.Background()
	for _, kinds := range []int{3, 1000} {
		for _, agnostic := range []bool{false, true} {
			p := randomProblem(uint64(kinds), 120, kinds)
			base, err := (&allocation.MaxMinFairness{Agnostic: agnostic}).Allocate(ctx, p)
			require.NoError(t, err)
			variant, err := (&allocation.MaxMinFairness{Agnostic: agnostic, Extension: allocation.TimeCap{Share: 1}}).Allocate(ctx, p)
			require.NoError(t, err)
			assert.Equal(t, base.X, variant.X, "kinds %d agnostic %v", kinds, agnostic)
			assert.Equal(t, base.Objective, variant.Objective)
			capped, err := (&allocation.MaxMinFairness{Agnostic: agnostic, Extension: allocation.TimeCap{Share: 0.3}}).Allocate(ctx, p)
			require.NoError(t, err)
			most := 0.0
			for _, row := range capped.X {
				s := 0.0
				for _, x := range row {
					s += x
				}
				most = max(most, s)
			}
			assert.InDelta(t, 0.3, most, 1e-6, "kinds %d: the cap binds", kinds)
		}
	}
}

// A hand-solved case: two single-GPU jobs on 4 GPUs of one type would
// each run all the time; capped at a half, each gets a half, and the
// level (the normalised rate, 1 at the proportional share of 1) halves.
func TestExtensionHandSolved(t *testing.T) {
	p := &allocation.Problem{Types: []topology.GPUType{"v100"}, Capacity: []int{4},
		Jobs: []allocation.Job{{ID: 0, ScaleFactor: 1, Throughput: []float64{2}}, {ID: 1, ScaleFactor: 1, Throughput: []float64{2}}}}
	a, err := (&allocation.MaxMinFairness{Extension: allocation.TimeCap{Share: 0.5}}).Allocate(context.Background(), p)
	require.NoError(t, err)
	assert.InDelta(t, 0.5, a.X[0][0], 1e-6)
	assert.InDelta(t, 0.5, a.X[1][0], 1e-6)
	full, err := (&allocation.MaxMinFairness{}).Allocate(context.Background(), p)
	require.NoError(t, err)
	assert.InDelta(t, 1, full.X[0][0], 1e-6)
	assert.InDelta(t, full.Objective/2, a.Objective, 1e-6)
}

// tenantCap caps the jobs of one tenant: its Key keeps that tenant's jobs
// apart from others' with the same data, and it sees the units.
type tenantCap struct {
	tenant string
	cap    float64
	units  *int
}

func (c tenantCap) Key(p *allocation.Problem, m int) string {
	if p.Jobs[m].Entity == c.tenant {
		return c.tenant
	}
	return ""
}

func (c tenantCap) Extend(g *allocation.Program) error {
	*c.units = g.Units()
	for u := range g.Units() {
		if g.Problem().Jobs[g.Jobs(u)[0]].Entity != c.tenant {
			continue
		}
		for k := range g.Problem().Types {
			if v := g.X(u, k); v >= 0 {
				g.Model().SetVarBounds(v, 0, c.cap)
			}
		}
	}
	return nil
}

// Jobs alike but for their tenant share variables only where the key
// says so: the tenant's jobs are capped, the others' are not.
func TestExtensionKeySplitsUnits(t *testing.T) {
	p := &allocation.Problem{Types: []topology.GPUType{"v100"}, Capacity: []int{40}}
	for m := range 20 {
		p.Jobs = append(p.Jobs, allocation.Job{ID: m, ScaleFactor: 1, Throughput: []float64{1}, Entity: []string{"a", "b"}[m%2]})
	}
	units := 0
	a, err := (&allocation.MaxMinFairness{Extension: tenantCap{tenant: "a", cap: 0.25, units: &units}}).Allocate(context.Background(), p)
	require.NoError(t, err)
	assert.Equal(t, 2, units, "two groups: tenant a's jobs and the others")
	// Max-min: the level is a's 0.25; b's jobs are above it, all alike
	// (the centre of the optimal face).
	for m, j := range p.Jobs {
		if j.Entity == "a" {
			assert.InDelta(t, 0.25, a.X[m][0], 1e-6, "job %d of a", m)
			continue
		}
		assert.Greater(t, a.X[m][0], 0.25+1e-3, "job %d of b", m)
		assert.InDelta(t, a.X[1][0], a.X[m][0], 1e-9, "job %d of b", m)
	}
}

// An extension's error stops the allocation, wrapped; space sharing takes
// none.
func TestExtensionErrors(t *testing.T) {
	p := randomProblem(1, 30, 2)
	_, err := (&allocation.MaxMinFairness{Extension: allocation.TimeCap{Share: -1}}).Allocate(context.Background(), p)
	require.Error(t, err)
	assert.ErrorContains(t, err, "extension: ")
	assert.ErrorContains(t, err, "time cap -1: want a share above 0")
	assert.ErrorIs(t, err, allocation.ErrInvalidProblem)
	_, err = (&allocation.MaxMinFairness{SpaceSharing: true, Extension: allocation.TimeCap{Share: 1}}).Allocate(context.Background(), p)
	assert.True(t, errors.Is(err, allocation.ErrInvalidProblem), "%v", err)
}

// A variant keeps the built-in's speed: both side by side at Gavel's
// scale (POP's setup has 26 kinds of job: the built-in groups them).
func BenchmarkExtension(b *testing.B) {
	for _, n := range []int{1024, 4096} {
		p := randomProblem(7, n, 26)
		for _, c := range []struct {
			name string
			pol  *allocation.MaxMinFairness
		}{
			{"built-in", &allocation.MaxMinFairness{}},
			{"capped-neutral", &allocation.MaxMinFairness{Extension: allocation.TimeCap{Share: 1}}},
			{"capped-0.5", &allocation.MaxMinFairness{Extension: allocation.TimeCap{Share: 0.5}}},
		} {
			b.Run(fmt.Sprintf("jobs=%d/%s", n, c.name), func(b *testing.B) {
				for b.Loop() {
					if _, err := c.pol.Allocate(context.Background(), p); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
