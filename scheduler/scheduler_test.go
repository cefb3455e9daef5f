package scheduler

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"testing"

	"github.com/gpusched/gpusched/allocation"
	"github.com/gpusched/gpusched/cluster"
	"github.com/gpusched/gpusched/perfmodel"
	"github.com/gpusched/gpusched/perfmodel/gavel"
	"github.com/gpusched/gpusched/placement"
	"github.com/gpusched/gpusched/topology"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var ctx = context.Background()

func rates(v100, k80 float64) map[topology.GPUType]float64 {
	return map[topology.GPUType]float64{topology.V100: v100, topology.K80: k80}
}

// newSched: 2 servers of 4 V100 and 1 of 4 K80, max-min fairness.
func newSched(t *testing.T, mod func(*Config)) *Scheduler {
	t.Helper()
	c, err := topology.ParseCompact("v100:8:4,k80:4:4", 4)
	require.NoError(t, err)
	cfg := Config{Policy: &allocation.MaxMinFairness{}, Cluster: c}
	if mod != nil {
		mod(&cfg)
	}
	s, err := New(cfg)
	require.NoError(t, err)
	return s
}

// checkRound: every device of the round exists, is of the assignment's
// type, healthy, and used once; every job runs once with its GPUs; the
// live state agrees and passes its invariants.
func checkRound(t *testing.T, s *Scheduler, r *Round) {
	t.Helper()
	seen := map[Device]bool{}
	jobs := map[string]bool{}
	s.View(func(st *ClusterView) {
		require.NoError(t, st.Check())
		for _, as := range r.Assignments {
			require.NotEmpty(t, as.Jobs)
			for _, k := range as.Jobs {
				require.False(t, jobs[k], "job %s twice", k)
				jobs[k] = true
				j := s.jobs[k]
				require.NotNil(t, j)
				require.Equal(t, j.spec.GPUs+as.Extra, len(as.Devices), "job %s", k)
				if j.spec.SingleServer {
					require.Equal(t, 1, servers(refsOf(as.Devices)), "job %s spread", k)
				}
			}
			for _, d := range as.Devices {
				d.Ref = cluster.GPURef{}
				require.False(t, seen[d], "device %v twice", d)
				seen[d] = true
				ref, err := st.Lookup(d.Server, d.Index)
				require.NoError(t, err)
				require.Equal(t, as.Type, st.Server(ref.Server).GPUs[ref.GPU].Type)
				require.False(t, st.Failed(ref))
			}
		}
	})
}

func refsOf(devs []Device) []cluster.GPURef {
	out := make([]cluster.GPURef, len(devs))
	for i, d := range devs {
		out[i] = d.Ref
	}
	return out
}

func byJob(r *Round) map[string]Assignment {
	out := map[string]Assignment{}
	for _, as := range r.Assignments {
		for _, k := range as.Jobs {
			out[k] = as
		}
	}
	return out
}

func TestRoundPlacesAndKeeps(t *testing.T) {
	s := newSched(t, nil)
	for i := range 6 {
		require.NoError(t, s.Submit(fmt.Sprint("j", i), JobSpec{GPUs: 1 + i%3, Throughput: rates(3, 1)}, 0))
	}
	var prev *Round
	for i := range 30 {
		r, err := s.Round(ctx, float64(i)*360)
		require.NoError(t, err)
		checkRound(t, s, r)
		assert.Equal(t, i == 0, r.Reset, "round %d", i)
		if prev != nil {
			// Sticky: a job that runs again on the type it ran on keeps its
			// GPUs (nothing here forces a move, and moves do not pay).
			last := byJob(prev)
			for _, as := range r.Assignments {
				if old, ok := last[as.Jobs[0]]; ok && old.Type == as.Type {
					assert.True(t, as.Kept, "round %d job %s", i, as.Jobs[0])
					assert.Equal(t, devNames(old.Devices), devNames(as.Devices))
				}
			}
		}
		prev = r
	}
}

func devNames(devs []Device) []string {
	out := make([]string, len(devs))
	for i, d := range devs {
		out[i] = fmt.Sprintf("%s/%d", d.Server, d.Index)
	}
	slices.Sort(out)
	return out
}

// Only what is reported is credited: a job reported as not run gets no
// attained time and comes first at the next round; steps count the
// remaining work down; a failed job loses its GPUs.
func TestReport(t *testing.T) {
	s := newSched(t, func(c *Config) { c.Cluster, _ = topology.ParseCompact("v100:2:2", 2) })
	for i := range 4 {
		require.NoError(t, s.Submit(fmt.Sprint("j", i), JobSpec{GPUs: 1, Throughput: rates(1, 0), RemainingSteps: 1000}, 0))
	}
	r, err := s.Round(ctx, 0)
	require.NoError(t, err)
	require.Len(t, r.Assignments, 2)
	a, b := r.Assignments[0].Jobs[0], r.Assignments[1].Jobs[0]
	require.NoError(t, s.Report(RoundReport{Start: 0, Ran: []Ran{{Job: a, Seconds: 360, Steps: 300}}, Failed: []string{b}}))
	assert.ErrorIs(t, s.Report(RoundReport{Start: 0}), ErrStaleReport, "twice")
	st, err := s.Status(a)
	require.NoError(t, err)
	assert.InDelta(t, 360, st.Attained[topology.V100], 1e-9)
	assert.InDelta(t, 700, st.Spec.RemainingSteps, 1e-9)
	assert.Len(t, st.Devices, 1)
	st, err = s.Status(b)
	require.NoError(t, err)
	assert.Empty(t, st.Attained)
	assert.Empty(t, st.Devices, "a failed job's GPUs are released")

	r, err = s.Round(ctx, 360)
	require.NoError(t, err)
	checkRound(t, s, r)
	ran := byJob(r)
	_, again := ran[a]
	assert.False(t, again, "the job credited with a round waits for the others")
	// Unreported rounds are credited in full at the next round.
	_, err = s.Round(ctx, 720)
	require.NoError(t, err)
	for k := range ran {
		st, err := s.Status(k)
		require.NoError(t, err)
		assert.Positive(t, st.Attained[topology.V100], k)
	}

	for _, bad := range []RoundReport{
		{Start: 1},
		{Start: 720, Ran: []Ran{{Job: "nope", Seconds: 1}}},
		{Start: 720, Ran: []Ran{{Job: r.Assignments[0].Jobs[0], Seconds: -1}}},
		{Start: 720, Ran: []Ran{{Job: r.Assignments[0].Jobs[0], Seconds: 1e9}}},
		{Start: 720, Ran: []Ran{{Job: r.Assignments[0].Jobs[0], Seconds: 1, Steps: -2}}},
		{Start: 720, Failed: []string{"nope"}},
	} {
		assert.Error(t, s.Report(bad), "%+v", bad)
	}
}

// A failed GPU evicts its job, which is placed elsewhere at the next round;
// the GPU is not used until it recovers. A removed server evicts its jobs;
// a new server of a new type is used.
func TestCapacityChanges(t *testing.T) {
	s := newSched(t, nil)
	require.NoError(t, s.Submit("big", JobSpec{GPUs: 4, Throughput: rates(2, 1)}, 0))
	require.NoError(t, s.Submit("small", JobSpec{GPUs: 1, Throughput: rates(2, 1)}, 0))
	r, err := s.Round(ctx, 0)
	require.NoError(t, err)
	big := byJob(r)["big"]
	require.Equal(t, topology.V100, big.Type)
	server := big.Devices[0].Server
	evicted, err := s.FailGPUs(server, big.Devices[1].Index)
	require.NoError(t, err)
	assert.Equal(t, []string{"big"}, evicted)
	st, _ := s.Status("big")
	assert.Empty(t, st.Devices)

	r, err = s.Round(ctx, 360)
	require.NoError(t, err)
	checkRound(t, s, r) // the failed GPU is not used
	require.Len(t, byJob(r)["big"].Devices, 4)
	require.NoError(t, s.RecoverGPUs(server))

	// The server that holds "big" leaves; an A100 server joins.
	evicted, err = s.RemoveServer(byJob(r)["big"].Devices[0].Server)
	require.NoError(t, err)
	assert.Contains(t, evicted, "big")
	a100, err := topology.Homogeneous(1, topology.ServerTemplate{Type: topology.A100, GPUs: 8, Interconnect: topology.NVSwitch})
	require.NoError(t, err)
	require.NoError(t, s.AddServer(a100.Servers[0]))
	require.NoError(t, s.Update("big", JobSpec{GPUs: 4, Throughput: map[topology.GPUType]float64{topology.A100: 10}}))
	r, err = s.Round(ctx, 720)
	require.NoError(t, err)
	checkRound(t, s, r)
	assert.Equal(t, topology.A100, byJob(r)["big"].Type)

	_, err = s.FailGPUs("nope")
	assert.ErrorIs(t, err, cluster.ErrUnknownServer)
	_, err = s.FailGPUs(a100.Servers[0].ID, 42)
	assert.ErrorIs(t, err, cluster.ErrInvalid)
	_, err = s.RemoveServer("nope")
	assert.ErrorIs(t, err, cluster.ErrUnknownServer)
	assert.Error(t, s.AddServer(a100.Servers[0]), "duplicate")
}

// A round's time is credited to the type its jobs ran on when the types
// change before it is reported (the scheduler's types are k80 then v100,
// by index): Report, or the next Round crediting it in full, indexed the
// new types with the old index. A job that ran on the K80s that left was
// credited on V100, one whose V100s left panicked (index out of range),
// and an A100 server joining credited a K80 job on A100.
func TestCreditAfterTypesChange(t *testing.T) {
	a100, err := topology.Homogeneous(1, topology.ServerTemplate{Type: topology.A100, GPUs: 8, Interconnect: topology.NVSwitch})
	require.NoError(t, err)
	for _, tc := range []struct {
		name      string
		v100, k80 float64
		remove    []string
		add       bool
		ran       topology.GPUType
	}{
		{"ran k80, k80 leaves", 0, 1, []string{"k80-0"}, false, topology.K80},
		{"ran v100, v100 leaves", 1, 0, []string{"v100-0", "v100-1"}, false, topology.V100},
		{"ran v100, k80 leaves", 1, 0, []string{"k80-0"}, false, topology.V100},
		{"ran k80, a100 joins", 0, 1, nil, true, topology.K80},
	} {
		for _, report := range []bool{true, false} {
			t.Run(fmt.Sprint(tc.name, ", report ", report), func(t *testing.T) {
				s := newSched(t, nil)
				require.NoError(t, s.Submit("a", JobSpec{GPUs: 1, Throughput: rates(tc.v100, tc.k80)}, 0))
				r, err := s.Round(ctx, 0)
				require.NoError(t, err)
				require.Equal(t, tc.ran, r.Assignments[0].Type)
				for _, id := range tc.remove {
					_, err = s.RemoveServer(id)
					require.NoError(t, err)
				}
				if tc.add {
					require.NoError(t, s.AddServer(a100.Servers[0]))
				}
				require.NotPanics(t, func() {
					if report {
						err = s.Report(RoundReport{Start: 0, Ran: []Ran{{Job: "a", Seconds: 100}}})
					} else {
						_, err = s.Round(ctx, 360) // credited in full
					}
				})
				require.NoError(t, err)
				st, err := s.Status("a")
				require.NoError(t, err)
				want := map[topology.GPUType]float64{}
				if len(tc.remove) == 0 || tc.ran != topology.K80 && tc.remove[0] == "k80-0" {
					want[tc.ran] = 100 // its type is still there
					if !report {
						want[tc.ran] = 360
					}
				}
				assert.Equal(t, want, st.Attained)
				assert.Equal(t, 1, st.Rounds)
			})
		}
	}
}

// A single-server job waits rather than spread; a job that may spread
// runs; a gang runs whole or not at all.
func TestGangsAndSingleServer(t *testing.T) {
	s := newSched(t, func(c *Config) { c.Cluster, _ = topology.ParseCompact("v100:8:4", 4) })
	_, err := s.FailGPUs("v100-0", 3)
	require.NoError(t, err)
	_, err = s.FailGPUs("v100-1", 3)
	require.NoError(t, err)
	require.NoError(t, s.Submit("pinned", JobSpec{GPUs: 4, Throughput: rates(1, 0), SingleServer: true}, 0))
	r, err := s.Round(ctx, 0)
	require.NoError(t, err)
	assert.Empty(t, r.Assignments, "3 + 3 healthy GPUs: no server holds 4")
	assert.Equal(t, 1, r.Stats.Unplaced)
	require.NoError(t, s.Update("pinned", JobSpec{GPUs: 4, Throughput: rates(1, 0)}))
	r, err = s.Round(ctx, 360)
	require.NoError(t, err)
	checkRound(t, s, r)
	require.Len(t, r.Assignments, 1)
	assert.Equal(t, 2, servers(refsOf(r.Assignments[0].Devices)), "spread over both servers")
	require.NoError(t, s.Remove("pinned"))

	// g1 can never be placed (one server, four GPUs), so g2 never runs.
	require.NoError(t, s.Submit("g1", JobSpec{GPUs: 4, Throughput: rates(1, 0), SingleServer: true, Gang: "g"}, 0))
	require.NoError(t, s.Submit("g2", JobSpec{GPUs: 1, Throughput: rates(1, 0), Gang: "g"}, 0))
	require.NoError(t, s.Submit("solo", JobSpec{GPUs: 1, Throughput: rates(1, 0)}, 0))
	dropped := 0
	for i := 2; i < 8; i++ {
		r, err = s.Round(ctx, float64(i)*360)
		require.NoError(t, err)
		checkRound(t, s, r)
		run := byJob(r)
		assert.NotContains(t, run, "g1")
		assert.NotContains(t, run, "g2", "round %d: a gang runs whole", i)
		dropped += r.Stats.GangsDropped
	}
	assert.Positive(t, dropped)
	st, _ := s.Status("g2")
	assert.Zero(t, st.Rounds)
	st, _ = s.Status("solo")
	assert.Positive(t, st.Rounds)
	// Recovered GPUs let g1 run on one server, and the gang runs whole.
	require.NoError(t, s.RecoverGPUs("v100-0"))
	r, err = s.Round(ctx, 8*360)
	require.NoError(t, err)
	checkRound(t, s, r)
	run := byJob(r)
	_, a := run["g1"]
	_, b := run["g2"]
	assert.Equal(t, a, b)
}

// GPUs left over go to elastic jobs, up to their maximum.
func TestElastic(t *testing.T) {
	s := newSched(t, func(c *Config) { c.Cluster, _ = topology.ParseCompact("v100:8:8", 8) })
	require.NoError(t, s.Submit("e", JobSpec{GPUs: 2, MaxGPUs: 5, Throughput: rates(1, 0), RemainingSteps: 1000}, 0))
	require.NoError(t, s.Submit("f", JobSpec{GPUs: 1, MaxGPUs: 8, Throughput: rates(1, 0), RemainingSteps: 10}, 0))
	r, err := s.Round(ctx, 0)
	require.NoError(t, err)
	checkRound(t, s, r)
	e, f := byJob(r)["e"], byJob(r)["f"]
	assert.Equal(t, 8, len(e.Devices)+len(f.Devices), "every GPU used")
	assert.Equal(t, 3, e.Extra, "the long job gains most from GPUs")
	assert.Equal(t, 5, r.Stats.ElasticGPUs, "e grows by 3 to its maximum, f by the 2 left")
	// Extras are decided again each round; the base GPUs stay.
	r2, err := s.Round(ctx, 360)
	require.NoError(t, err)
	checkRound(t, s, r2)
	assert.True(t, byJob(r2)["e"].Kept)
	assert.Equal(t, devNames(e.Devices[:2]), devNames(byJob(r2)["e"].Devices[:2]))
}

// The highest tier is served first; a lower tier gets what is left.
func TestPriorityTiers(t *testing.T) {
	s := newSched(t, func(c *Config) {
		c.Cluster, _ = topology.ParseCompact("v100:4:4", 4)
		c.MinResetInterval = -1
	})
	require.NoError(t, s.Submit("low", JobSpec{GPUs: 2, Throughput: rates(1, 0)}, 0))
	require.NoError(t, s.Submit("high1", JobSpec{GPUs: 2, Throughput: rates(1, 0), Priority: 10}, 0))
	require.NoError(t, s.Submit("high2", JobSpec{GPUs: 2, Throughput: rates(1, 0), Priority: 10}, 0))
	for i := range 5 {
		r, err := s.Round(ctx, float64(i)*360)
		require.NoError(t, err)
		checkRound(t, s, r)
		run := byJob(r)
		assert.Contains(t, run, "high1")
		assert.Contains(t, run, "high2")
		assert.NotContains(t, run, "low", "round %d", i)
		assert.Equal(t, 2, r.Stats.Tiers)
	}
	require.NoError(t, s.Remove("high2"))
	require.NoError(t, s.Submit("low2", JobSpec{GPUs: 1, Throughput: rates(1, 0)}, 0))
	r, err := s.Round(ctx, 5*360)
	require.NoError(t, err)
	run := byJob(r)
	assert.Contains(t, run, "high1")
	_, low := run["low"]
	_, low2 := run["low2"]
	assert.True(t, low || low2, "the low tier shares the two GPUs high1 leaves")
	assert.ErrorIs(t, s.Remove("high2"), ErrUnknownJob)
}

// A snapshot restores jobs, attained time and leases: the restarted
// scheduler keeps jobs on their GPUs.
func TestSnapshotRestore(t *testing.T) {
	s := newSched(t, nil)
	for i := range 5 {
		require.NoError(t, s.Submit(fmt.Sprint("j", i), JobSpec{GPUs: 1 + i%2, Throughput: rates(3, 1), Tenant: "t", RemainingSteps: 500}, float64(i)))
	}
	r, err := s.Round(ctx, 10)
	require.NoError(t, err)
	var ran []Ran
	for _, as := range r.Assignments {
		ran = append(ran, Ran{Job: as.Jobs[0], Seconds: 100, Steps: 7})
	}
	require.NoError(t, s.Report(RoundReport{Start: 10, Ran: ran}))
	_, err = s.FailGPUs("k80-0", 3)
	require.NoError(t, err)
	data, err := s.Snapshot()
	require.NoError(t, err)

	s2 := newSched(t, nil)
	require.NoError(t, s2.Restore(data))
	assert.Equal(t, s.Jobs(), s2.Jobs())
	for _, k := range s.Jobs() {
		a, _ := s.Status(k)
		b, _ := s2.Status(k)
		assert.Equal(t, a.Attained, b.Attained, k)
		assert.Equal(t, a.Spec, b.Spec, k)
		assert.Equal(t, a.Arrival, b.Arrival, k)
		assert.Equal(t, devNames(a.Devices), devNames(b.Devices), k)
	}
	s2.View(func(st *ClusterView) {
		r, _ := st.Lookup("k80-0", 3)
		assert.True(t, st.Failed(r))
	})
	data2, err := s2.Snapshot()
	require.NoError(t, err)
	assert.JSONEq(t, string(data), string(data2), "a restored scheduler snapshots the same")
	r2, err := s2.Round(ctx, 370)
	require.NoError(t, err)
	checkRound(t, s2, r2)
	last := byJob(r)
	for _, as := range r2.Assignments {
		if old, ok := last[as.Jobs[0]]; ok && old.Type == as.Type {
			assert.True(t, as.Kept, "job %s keeps its GPUs across the restart", as.Jobs[0])
		}
	}
	require.NoError(t, s2.Submit("new", JobSpec{GPUs: 1, Throughput: rates(1, 1)}, 400))

	assert.ErrorIs(t, s2.Restore(data), ErrInvalid, "restore into a scheduler with jobs")
	for _, bad := range []string{`{`, `{"version":2}`, `{"version":1,"next_id":1,"jobs":[{"key":"","id":0,"spec":{"gpus":1,"throughput":{"v100":1}}}]}`,
		`{"version":1,"next_id":1,"jobs":[{"key":"a","id":5,"spec":{"gpus":1,"throughput":{"v100":1}}}]}`,
		`{"version":1,"next_id":1,"jobs":[{"key":"a","id":0,"spec":{"gpus":0,"throughput":{"v100":1}}}]}`} {
		assert.ErrorIs(t, newSched(t, nil).Restore([]byte(bad)), ErrInvalid, bad)
	}
}

// Bind rebuilds a lease from the outside world's record (pod
// annotations); the next round keeps it.
func TestBindExisting(t *testing.T) {
	s := newSched(t, nil)
	require.NoError(t, s.Submit("a", JobSpec{GPUs: 2, Throughput: rates(1, 0)}, 0))
	require.NoError(t, s.Bind("a", []Device{{Server: "v100-1", Index: 2}, {Server: "v100-1", Index: 3}}))
	r, err := s.Round(ctx, 0)
	require.NoError(t, err)
	as := byJob(r)["a"]
	assert.True(t, as.Kept)
	assert.Equal(t, []string{"v100-1/2", "v100-1/3"}, devNames(as.Devices))
	require.NoError(t, s.Submit("b", JobSpec{GPUs: 1, Throughput: rates(1, 0)}, 0))
	assert.ErrorIs(t, s.Bind("b", []Device{{Server: "v100-1", Index: 2}}), cluster.ErrBusy)
	assert.ErrorIs(t, s.Bind("b", []Device{{Server: "v100-0", Index: 0}, {Server: "k80-0", Index: 0}}), ErrInvalid)
	assert.ErrorIs(t, s.Bind("nope", []Device{{Server: "v100-0", Index: 0}}), ErrUnknownJob)
	assert.ErrorIs(t, s.Bind("b", nil), ErrInvalid)
	assert.ErrorIs(t, s.Bind("a", []Device{{Server: "v100-0", Index: 0}}), ErrInvalid, "a job binds once")
}

// A kept job spread over two servers moves to one when that pays.
func TestConsolidationMove(t *testing.T) {
	for _, tc := range []struct {
		cost  float64
		moves bool
	}{{1, true}, {1000, false}, {-1, false}} {
		s := newSched(t, func(c *Config) {
			c.Cluster, _ = topology.ParseCompact("v100:8:4", 4)
			c.MigrationCost = tc.cost
		})
		require.NoError(t, s.Submit("a", JobSpec{GPUs: 4, Throughput: rates(1, 0)}, 0))
		require.NoError(t, s.Bind("a", []Device{{Server: "v100-0", Index: 0}, {Server: "v100-0", Index: 1}, {Server: "v100-1", Index: 0}, {Server: "v100-1", Index: 1}}))
		r, err := s.Round(ctx, 0)
		require.NoError(t, err)
		as := byJob(r)["a"]
		assert.Equal(t, !tc.moves, as.Kept, "cost %v", tc.cost)
		want := 2
		if tc.moves {
			want = 1
			assert.Equal(t, 1, r.Stats.Moves)
		}
		assert.Equal(t, want, servers(refsOf(as.Devices)), "cost %v", tc.cost)
	}
}

// Space sharing with Gavel's measured pairs: pairs share their GPUs.
func TestSpaceSharing(t *testing.T) {
	table := gavel.Simulation()
	s := newSched(t, func(c *Config) {
		c.Cluster, _ = topology.ParseCompact("v100:2:2", 2)
		c.Policy = &allocation.MaxMinFairness{SpaceSharing: true}
		c.Throughput = table
		c.Colocation = table
	})
	for i, m := range []string{"ResNet-18", "ResNet-50", "Transformer", "LM", "ResNet-18", "A3C"} {
		key := perfmodel.JobKey{Model: m, BatchSize: 64}
		if m == "A3C" {
			key.BatchSize = 0
		}
		if m == "Transformer" {
			key.BatchSize = 128
		}
		if m == "LM" {
			key.BatchSize = 20
		}
		if m == "ResNet-50" {
			key.BatchSize = 32
		}
		require.NoError(t, s.Submit(fmt.Sprint("j", i), JobSpec{GPUs: 1, Model: &key}, 0), m)
	}
	pairs := 0
	for i := range 10 {
		r, err := s.Round(ctx, float64(i)*360)
		require.NoError(t, err)
		checkRound(t, s, r)
		for _, as := range r.Assignments {
			if len(as.Jobs) == 2 {
				pairs++
				assert.Len(t, as.Devices, 1)
			}
		}
	}
	assert.Positive(t, pairs, "space sharing pairs jobs")
}

func TestSubmitErrors(t *testing.T) {
	s := newSched(t, nil)
	k := perfmodel.JobKey{Model: "ResNet-18", BatchSize: 64}
	for _, tc := range []struct {
		key  string
		spec JobSpec
	}{
		{"", JobSpec{GPUs: 1, Throughput: rates(1, 1)}},
		{"a\x00b", JobSpec{GPUs: 1, Throughput: rates(1, 1)}},
		{string(make([]byte, MaxKeyLen+1)), JobSpec{GPUs: 1, Throughput: rates(1, 1)}},
		{"x", JobSpec{GPUs: 0, Throughput: rates(1, 1)}},
		{"x", JobSpec{GPUs: MaxJobGPUs + 1, Throughput: rates(1, 1)}},
		{"x", JobSpec{GPUs: 2, MaxGPUs: 1, Throughput: rates(1, 1)}},
		{"x", JobSpec{GPUs: 1}},
		{"x", JobSpec{GPUs: 1, Throughput: rates(1, 1), Model: &k}},
		{"x", JobSpec{GPUs: 1, Model: &k}},
		{"x", JobSpec{GPUs: 1, Throughput: rates(-1, 1)}},
		{"x", JobSpec{GPUs: 1, Throughput: map[topology.GPUType]float64{"V 100": 1}}},
		{"x", JobSpec{GPUs: 1, Throughput: rates(1, 1), Weight: -1}},
		{"x", JobSpec{GPUs: 1, Throughput: rates(1, 1), RemainingSteps: -1}},
		{"x", JobSpec{GPUs: 1, Throughput: rates(1, 1), Types: []topology.GPUType{""}}},
	} {
		assert.ErrorIs(t, s.Submit(tc.key, tc.spec, 0), ErrInvalid, "%q %+v", tc.key, tc.spec)
	}
	require.NoError(t, s.Submit("x", JobSpec{GPUs: 1, Throughput: rates(1, 1)}, 0))
	assert.ErrorIs(t, s.Submit("x", JobSpec{GPUs: 1, Throughput: rates(1, 1)}, 0), ErrDuplicateJob)
	assert.ErrorIs(t, s.Update("nope", JobSpec{GPUs: 1, Throughput: rates(1, 1)}), ErrUnknownJob)
	_, err := s.Status("nope")
	assert.ErrorIs(t, err, ErrUnknownJob)
	_, err = s.Round(ctx, -1)
	assert.ErrorIs(t, err, ErrInvalid)
	_, err = New(Config{})
	assert.ErrorIs(t, err, ErrInvalid)
	_, err = New(Config{Policy: &allocation.MaxMinFairness{}, TenantWeights: map[string]float64{"a": 0}})
	assert.ErrorIs(t, err, ErrInvalid)
	_, err = New(Config{Policy: &allocation.MaxMinFairness{}, Placer: &placement.Consolidated{Chooser: &placement.GPUChooser{ExactLimit: placement.MaxExactLimit + 1}}})
	assert.ErrorIs(t, err, ErrInvalid)
}

// The allowed types are respected: a job limited to K80 never runs on V100.
func TestAllowedTypes(t *testing.T) {
	s := newSched(t, nil)
	require.NoError(t, s.Submit("k", JobSpec{GPUs: 1, Throughput: rates(5, 1), Types: []topology.GPUType{topology.K80}}, 0))
	for i := range 5 {
		r, err := s.Round(ctx, float64(i)*360)
		require.NoError(t, err)
		require.Len(t, r.Assignments, 1)
		assert.Equal(t, topology.K80, r.Assignments[0].Type)
	}
}

func TestObserver(t *testing.T) {
	var buf bytes.Buffer
	var stats []RoundStats
	s := newSched(t, func(c *Config) {
		c.Logger = slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
		c.OnRound = func(st RoundStats) { stats = append(stats, st) }
	})
	require.NoError(t, s.Submit("a", JobSpec{GPUs: 1, Throughput: rates(2, 1)}, 0))
	_, err := s.Round(ctx, 0)
	require.NoError(t, err)
	_, err = s.Round(ctx, 360)
	require.NoError(t, err)
	require.Len(t, stats, 2)
	assert.True(t, stats[0].Reset)
	assert.Equal(t, 1, stats[0].Solves)
	assert.Positive(t, stats[0].SolveTime)
	assert.False(t, stats[1].Reset)
	assert.Equal(t, 1, stats[1].Kept)
	assert.Equal(t, 12, stats[1].HealthyGPUs)
	assert.Equal(t, 1, stats[1].BusyGPUs)
	assert.Contains(t, buf.String(), "msg=round")
}

// Concurrent submissions, rounds, reports, failures and reads (run with
// -race): the state stays consistent.
func TestConcurrentUse(t *testing.T) {
	s := newSched(t, nil)
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 25 {
				_ = s.Submit(fmt.Sprint("g", g, "-", i), JobSpec{GPUs: 1 + i%2, Throughput: rates(2, 1)}, float64(i))
				if i%7 == 0 {
					_ = s.Remove(fmt.Sprint("g", g, "-", i-3))
				}
			}
		})
	}
	wg.Go(func() {
		for i := range 20 {
			r, err := s.Round(ctx, float64(i)*360)
			if err != nil {
				t.Error(err)
				return
			}
			var ran []Ran
			for _, as := range r.Assignments {
				ran = append(ran, Ran{Job: as.Jobs[0], Seconds: 360})
			}
			_ = s.Report(RoundReport{Start: r.Start, Ran: ran})
		}
	})
	wg.Go(func() {
		rng := rand.New(rand.NewPCG(1, 1))
		for range 20 {
			_, _ = s.FailGPUs("v100-0", rng.IntN(4))
			_ = s.RecoverGPUs("v100-0")
			data, _ := s.Snapshot()
			_, _ = s.Adopt(data) // refused: the scheduler has jobs
			_ = s.Restore(data)
			if st, err := s.Status("g0-1"); err == nil {
				st.Spec.RemainingSteps = 100
				_ = s.Update("g0-1", st.Spec)
			}
			s.View(func(v *ClusterView) { _ = v.Holders() })
		}
	})
	wg.Wait()
	s.View(func(st *ClusterView) { require.NoError(t, st.Check()) })
}

// Space sharing (the class table, its view in every problem) and servers
// leaving and joining (the types re-indexed between a round and its
// report) under concurrent calls: run under -race (CI does).
func TestConcurrentSpaceSharingAndServers(t *testing.T) {
	table := gavel.Simulation()
	s := newSched(t, func(c *Config) {
		c.Policy = &allocation.MaxMinFairness{SpaceSharing: true}
		c.Throughput, c.Colocation = table, table
	})
	keys := []perfmodel.JobKey{{Model: "ResNet-18", BatchSize: 64}, {Model: "ResNet-50", BatchSize: 32},
		{Model: "Transformer", BatchSize: 128}, {Model: "LM", BatchSize: 20}, {Model: "A3C"}}
	var k80 topology.Server
	s.View(func(st *ClusterView) {
		p, _ := st.ServerIndex("k80-0")
		k80 = st.Server(p)
	})
	var wg sync.WaitGroup
	done := make(chan struct{})
	for g := range 3 {
		wg.Go(func() {
			for i := range 20 {
				k := keys[(g+i)%len(keys)]
				_ = s.Submit(fmt.Sprint("g", g, "-", i), JobSpec{GPUs: 1, Model: &k}, float64(i))
				if i%5 == 4 {
					_ = s.Remove(fmt.Sprint("g", g, "-", i-2))
				}
				_, _ = s.Status(fmt.Sprint("g", g, "-", i))
			}
		})
	}
	wg.Go(func() {
		defer close(done)
		for i := range 40 {
			r, err := s.Round(ctx, float64(i)*360)
			if err != nil {
				t.Error(err)
				return
			}
			var ran []Ran
			for _, as := range r.Assignments {
				for _, k := range as.Jobs {
					ran = append(ran, Ran{Job: k, Seconds: 360, Steps: 1})
				}
			}
			_ = s.Report(RoundReport{Start: r.Start, Ran: ran})
		}
	})
	wg.Go(func() {
		for {
			select {
			case <-done:
				return
			default:
			}
			_, _ = s.RemoveServer("k80-0")
			runtime.Gosched()
			_ = s.AddServer(k80)
			runtime.Gosched()
		}
	})
	wg.Wait()
	s.View(func(st *ClusterView) { require.NoError(t, st.Check()) })
}

// With ReuseRounds, concurrent Rounds return the same memory, which each
// overwrites; OnRound must still get each round's own statistics, read
// under the lock (run with -race: Round read them after unlocking, while
// the other goroutine's round wrote them).
func TestConcurrentRoundsReuseOnRound(t *testing.T) {
	var mu sync.Mutex
	var seen, want []float64
	s := newSched(t, func(c *Config) {
		c.ReuseRounds = true
		c.OnRound = func(st RoundStats) {
			mu.Lock()
			seen = append(seen, st.Start)
			mu.Unlock()
		}
	})
	for i := range 6 {
		require.NoError(t, s.Submit(fmt.Sprint("j", i), JobSpec{GPUs: 1 + i%3, Throughput: rates(2+float64(i%4), 1)}, 0))
	}
	var wg sync.WaitGroup
	for g := range 2 {
		wg.Go(func() {
			for i := range 100 {
				// Rounds of both goroutines interleave; one before the
				// other's last is refused.
				now := float64(2*i + g)
				if _, err := s.Round(ctx, now); err == nil {
					mu.Lock()
					want = append(want, now)
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	require.NotEmpty(t, want)
	assert.ElementsMatch(t, want, seen, "OnRound gets each round's own start")
}

func TestErrorsAreTyped(t *testing.T) {
	s := newSched(t, nil)
	err := s.Submit("x", JobSpec{}, 0)
	assert.True(t, errors.Is(err, ErrInvalid))
	assert.Contains(t, err.Error(), `job "x"`)
}

// A restart changes nothing: a scheduler restored from a snapshot mid-run
// makes the same rounds (jobs, types, devices) as one that kept running.
func TestRestartChangesNothing(t *testing.T) {
	mk := func() *Scheduler {
		return newSched(t, func(c *Config) { c.Policy = &allocation.MaxMinFairness{} })
	}
	a := mk()
	rng := rand.New(rand.NewPCG(9, 9))
	for i := range 14 {
		spec := JobSpec{GPUs: 1 + rng.IntN(3), Throughput: rates(1+3*rng.Float64(), 0.5+rng.Float64()), RemainingSteps: 1e5}
		require.NoError(t, a.Submit(fmt.Sprint("j", i), spec, 0))
	}
	step := func(s *Scheduler, i int) *Round {
		r, err := s.Round(ctx, float64(i)*360)
		require.NoError(t, err)
		var ran []Ran
		for _, as := range r.Assignments {
			for _, k := range as.Jobs {
				ran = append(ran, Ran{Job: k, Seconds: 300 + float64(len(k)), Steps: 10})
			}
		}
		require.NoError(t, s.Report(RoundReport{Start: r.Start, Ran: ran}))
		return r
	}
	for i := range 5 {
		step(a, i)
	}
	data, err := a.Snapshot()
	require.NoError(t, err)
	b := mk()
	require.NoError(t, b.Restore(data))
	for i := 5; i < 20; i++ {
		ra, rb := step(a, i), step(b, i)
		require.Equal(t, ra.Reset, rb.Reset, "round %d", i)
		require.Equal(t, len(ra.Assignments), len(rb.Assignments), "round %d", i)
		ma, mb := byJob(ra), byJob(rb)
		for k, as := range ma {
			require.Contains(t, mb, k, "round %d", i)
			assert.Equal(t, as.Type, mb[k].Type, "round %d job %s", i, k)
			assert.Equal(t, devNames(as.Devices), devNames(mb[k].Devices), "round %d job %s", i, k)
		}
	}
}

// With ReuseRounds a scheduler makes the same rounds as without, in the
// memory of the last one (the round before is overwritten).
func TestReuseRounds(t *testing.T) {
	plain := newSched(t, nil)
	reuse := newSched(t, func(c *Config) { c.ReuseRounds = true })
	clone := func(r *Round) Round {
		out := *r
		out.Assignments = make([]Assignment, len(r.Assignments))
		for i, as := range r.Assignments {
			as.Jobs, as.Devices = slices.Clone(as.Jobs), slices.Clone(as.Devices)
			out.Assignments[i] = as
		}
		out.Preempted = slices.Clone(r.Preempted)
		out.Stats = RoundStats{}
		return out
	}
	var last *Round
	reused := 0
	for i := range 12 {
		now := float64(i) * 360
		for _, s := range []*Scheduler{plain, reuse} {
			require.NoError(t, s.Submit(fmt.Sprint("j", i), JobSpec{GPUs: 1 + i%3, Throughput: rates(2+float64(i%4), 1)}, now))
			if i >= 4 {
				require.NoError(t, s.Remove(fmt.Sprint("j", i-4)))
			}
		}
		want, err := plain.Round(ctx, now)
		require.NoError(t, err)
		got, err := reuse.Round(ctx, now)
		require.NoError(t, err)
		checkRound(t, reuse, got)
		require.Equal(t, clone(want), clone(got), "round %d", i)
		if got == last {
			reused++
		}
		last = got
		for _, s := range []*Scheduler{plain, reuse} {
			r := want
			if s == reuse {
				r = got
			}
			var ran []Ran
			for _, as := range r.Assignments {
				for _, k := range as.Jobs {
					ran = append(ran, Ran{Job: k, Seconds: 300})
				}
			}
			require.NoError(t, s.Report(RoundReport{Start: r.Start, Ran: ran}))
		}
	}
	assert.Equal(t, 11, reused, "rounds returned in the last one's memory")
}
