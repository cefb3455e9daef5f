package scheduler

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/gpusched/gpusched/allocation"
	"github.com/gpusched/gpusched/topology"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The cluster: 2 x 8 V100 and 2 x 4 K80, six jobs of 1 to 8 GPUs
// in two gangs over three priorities. Every round used to drop both gangs
// and run nothing (0 of 24 GPUs busy for ten rounds; 17 without gangs):
// the tiers' mechanisms never chose all of a gang's jobs at once. Refill
// now runs a gang whole on what the drop left free: gang B (13 GPUs, a
// job of priority 2) every round; A (20 GPUs, priority 1 at most) does
// not fit beside it.
func TestGangsProgress(t *testing.T) {
	c, err := topology.ParseCompact("v100:16:8,k80:8:4", 8)
	require.NoError(t, err)
	jobs := []struct {
		gpus, prio int
		gang       string
		v, k       float64
	}{{8, 1, "A", 3.5, 1.5}, {1, 2, "B", 1.7, 0.8}, {4, 0, "A", 1.1, 1.1}, {8, 0, "B", 1.2, 0.9}, {8, 1, "A", 1.9, 0.7}, {4, 0, "B", 3.7, 1.0}}
	busy := func(gangs bool) []int {
		s, err := New(Config{Policy: &allocation.MaxMinFairness{}, Cluster: c})
		require.NoError(t, err)
		for i, j := range jobs {
			g := ""
			if gangs {
				g = j.gang
			}
			require.NoError(t, s.Submit(fmt.Sprint("j", i), JobSpec{GPUs: j.gpus, Priority: j.prio, Gang: g, Throughput: rates(j.v, j.k)}, 0))
		}
		var out []int
		for r := range 10 {
			rd, err := s.Round(ctx, float64(r)*360)
			require.NoError(t, err)
			checkRound(t, s, rd)
			gangWhole(t, s, rd)
			out = append(out, rd.Stats.BusyGPUs)
		}
		return out
	}
	without, with := busy(false), busy(true)
	t.Log("busy GPUs without gangs", without, "with gangs", with)
	for r, n := range with {
		assert.Equal(t, 13, n, "round %d: gang B", r)
	}
}

// gangWhole checks that every gang runs whole or not at all.
func gangWhole(t *testing.T, s *Scheduler, r *Round) {
	t.Helper()
	run := byJob(r)
	for g, members := range s.gangs {
		n, active := 0, 0
		for _, m := range members {
			if m.inTier {
				active++
				if _, ok := run[m.key]; ok {
					n++
				}
			}
		}
		require.True(t, n == 0 || n == active, "gang %s: %d of %d jobs run", g, n, active)
	}
}

// The rule of progress, as a property over random clusters, gangs,
// priorities, types, sizes and SingleServer jobs: after every round in
// which a gang was dropped, no job that waits could be placed on the GPUs
// left free (on any type it may run on, on one server when it asks for
// one), and no gang that waits could be placed whole (by refill's own
// greedy order). Gangs always run whole or not at all.
func TestRefillProperty(t *testing.T) {
	types := []topology.GPUType{topology.V100, topology.K80, topology.A100}
	drops := 0
	for seed := range uint64(60) {
		rng := rand.New(rand.NewPCG(seed, 25))
		var spec []string
		for _, typ := range types[:1+rng.IntN(3)] {
			per := []int{2, 4, 8}[rng.IntN(3)]
			spec = append(spec, fmt.Sprintf("%s:%d:%d", typ, per*(1+rng.IntN(3)), per))
		}
		c, err := topology.ParseCompact(joinComma(spec), 8)
		require.NoError(t, err)
		s, err := New(Config{Policy: &allocation.MaxMinFairness{}, Cluster: c, Mechanism: allocation.Mechanism{Seed: seed, LeaveIdle: rng.IntN(4) == 0}})
		require.NoError(t, err)
		for i := range 4 + rng.IntN(10) {
			th := map[topology.GPUType]float64{}
			for _, typ := range types {
				if rng.IntN(4) > 0 {
					th[typ] = 0.5 + 3*rng.Float64()
				}
			}
			spec := JobSpec{GPUs: []int{1, 1, 2, 4, 8}[rng.IntN(5)], Priority: rng.IntN(3), Throughput: th, SingleServer: rng.IntN(4) == 0}
			if rng.IntN(2) == 0 {
				spec.Gang = fmt.Sprint("g", rng.IntN(3))
			}
			require.NoError(t, s.Submit(fmt.Sprint("j", i), spec, float64(i)))
		}
		for r := range 8 {
			rd, err := s.Round(ctx, float64(r)*360)
			require.NoError(t, err)
			checkRound(t, s, rd)
			gangWhole(t, s, rd)
			if rd.Stats.GangsDropped == 0 {
				continue
			}
			drops++
			if s.cfg.LeaveIdle {
				continue // only what the drop freed is given
			}
			nothingFits(t, s, rd, fmt.Sprintf("seed %d round %d", seed, r))
		}
	}
	assert.Positive(t, drops, "the property is checked on rounds that dropped gangs")
}

func joinComma(s []string) string {
	out := ""
	for i, x := range s {
		if i > 0 {
			out += ","
		}
		out += x
	}
	return out
}

// nothingFits checks that no waiting job or gang fits the free GPUs.
func nothingFits(t *testing.T, s *Scheduler, r *Round, where string) {
	t.Helper()
	run := byJob(r)
	gangs := map[string][]*job{}
	for _, j := range s.order {
		if _, ok := run[j.key]; ok || !j.inTier {
			continue
		}
		if j.spec.Gang != "" {
			gangs[j.spec.Gang] = append(gangs[j.spec.Gang], j)
			continue
		}
		for k, typ := range s.types {
			if j.rates[k] <= 0 {
				continue
			}
			p := &s.placer
			if j.spec.SingleServer {
				p = &s.single
			}
			refs, err := p.PlaceOn(s.st, typ, j.spec.GPUs, nil)
			require.NoError(t, err)
			require.Nil(t, refs, "%s: job %s (%d GPUs) waits while %d %s are free", where, j.key, j.spec.GPUs, s.st.Free(typ), typ)
		}
	}
	for g, members := range gangs {
		budget := make([]int, len(s.types))
		for k, typ := range s.types {
			budget[k] = s.st.Free(typ)
		}
		slices.SortFunc(members, func(a, b *job) int { return b.spec.GPUs - a.spec.GPUs })
		var bound []string
		fits := true
		for _, j := range members {
			k, refs := s.refillPlace(j, budget)
			if refs == nil {
				fits = false
				break
			}
			require.NoError(t, s.st.Bind("probe-"+j.key, refs))
			bound = append(bound, "probe-"+j.key)
			budget[k] -= len(refs)
		}
		for _, h := range bound {
			s.st.Release(h)
		}
		require.False(t, fits, "%s: gang %s waits but fits whole", where, g)
	}
	require.NoError(t, s.st.Check())
}
