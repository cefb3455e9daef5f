package scheduler

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/gpusched/gpusched/allocation"
	"github.com/gpusched/gpusched/perfmodel"
	"github.com/gpusched/gpusched/perfmodel/gavel"
	"github.com/gpusched/gpusched/topology"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The finding: the first round after Restore handed the GPUs that
// restored jobs still held to other jobs without listing them in
// Preempted (Stats.Preemptions 0), while a scheduler that never stopped
// lists them; an embedder that stops workloads from Preempted then
// double-books GPUs after every restart.
func TestRestoreKeepsPreemptions(t *testing.T) {
	mk := func() *Scheduler {
		return newSched(t, func(c *Config) { c.Cluster, _ = topology.ParseCompact("v100:4:4", 4) })
	}
	a := mk()
	for i := range 4 {
		require.NoError(t, a.Submit(fmt.Sprint("j", i), JobSpec{GPUs: 4, Throughput: rates(1, 0)}, 0))
	}
	r, err := a.Round(ctx, 0)
	require.NoError(t, err)
	require.Len(t, r.Assignments, 1)
	data, err := a.Snapshot()
	require.NoError(t, err)
	b := mk()
	require.NoError(t, b.Restore(data))
	var want, got []string
	for i := 1; len(want) == 0 && i < 10; i++ {
		ra, err := a.Round(ctx, float64(i)*360)
		require.NoError(t, err)
		rb, err := b.Round(ctx, float64(i)*360)
		require.NoError(t, err)
		want, got = ra.Preempted, rb.Preempted
		assert.Equal(t, ra.Stats.Preemptions, rb.Stats.Preemptions, "round %d", i)
	}
	require.NotEmpty(t, want, "the 4 jobs take turns")
	assert.Equal(t, want, got)
}

// lockstep drives two schedulers with the same calls; b is snapshotted and
// restored into a fresh scheduler at every round (before or after its
// report, at random), on the cluster as it is then. Every Round, report
// error, Status and snapshot must be equal.
type lockstep struct {
	t    *testing.T
	mk   func(c *topology.Cluster) *Scheduler
	a, b *Scheduler
	rng  *rand.Rand
	name string
	// What the runs went through, over all of them.
	seen map[string]int
}

// restoreB replaces b by a fresh scheduler on b's cluster, restored from
// b's snapshot.
func (l *lockstep) restoreB() {
	t := l.t
	data, err := l.b.Snapshot()
	require.NoError(t, err, l.name)

	var c topology.Cluster
	l.b.View(func(v *ClusterView) {
		for p := range v.NumServers() {
			c.Servers = append(c.Servers, v.Server(p))
		}
	})
	fresh := l.mk(&c)
	require.NoError(t, fresh.Restore(data), l.name)
	again, err := fresh.Snapshot()
	require.NoError(t, err, l.name)
	sameJSON(t, data, again, l.name+": a restored scheduler snapshots the same")
	l.b = fresh
}

// same checks that a call gave the same outcome on both.
func (l *lockstep) same(what string, ea, eb error) {
	if ea == nil || eb == nil {
		require.Equal(l.t, ea == nil, eb == nil, "%s: %s: %v / %v", l.name, what, ea, eb)
		return
	}
	require.Equal(l.t, ea.Error(), eb.Error(), "%s: %s", l.name, what)
}

// roundsEqual compares two rounds, wall times aside.
func roundsEqual(t *testing.T, want, got *Round, msg string) {
	t.Helper()
	w, g := *want, *got
	w.Stats.Took, g.Stats.Took, w.Stats.SolveTime, g.Stats.SolveTime = 0, 0, 0, 0
	require.Equal(t, w, g, msg)
}

func (l *lockstep) statusEqual() {
	for _, k := range l.a.Jobs() {
		sa, ea := l.a.Status(k)
		sb, eb := l.b.Status(k)
		l.same("status "+k, ea, eb)
		require.Equal(l.t, sa, sb, "%s: status of %s", l.name, k)
	}
	require.Equal(l.t, l.a.Jobs(), l.b.Jobs(), l.name)
}

// TestLockstepRestore runs random runs (failures, servers leaving and
// joining, gangs, priorities, elastic and single-server jobs, reports of
// partial runs and failed starts, work that runs out, updates, removals;
// with space sharing and in Gavel's mode too) on two schedulers, one
// restored from its own snapshot at every round: every Round field,
// report outcome, Status and snapshot agree.
func TestLockstepRestore(t *testing.T) {
	table := gavel.Simulation()
	modes := []struct {
		name string
		cfg  func(c *Config)
	}{
		{"max-min", func(c *Config) {}},
		{"space sharing", func(c *Config) {
			c.Policy = &allocation.MaxMinFairness{SpaceSharing: true}
			c.Throughput, c.Colocation = table, table
		}},
		{"gavel", func(c *Config) { c.Compat, c.ShuffleTypes, c.Seed = allocation.CompatGavel, true, 7 }},
		{"global queue, leave idle", func(c *Config) { c.GlobalQueue, c.LeaveIdle, c.MinResetInterval = true, true, -1 }},
	}
	seeds := uint64(6)
	if testing.Short() {
		seeds = 2
	}
	rounds := 0
	seen := map[string]int{}
	for _, mode := range modes {
		for seed := range seeds {
			l := &lockstep{t: t, rng: rand.New(rand.NewPCG(seed, 2025)), seen: seen}
			l.mk = func(c *topology.Cluster) *Scheduler {
				cfg := Config{Policy: &allocation.MaxMinFairness{}, Cluster: c}
				mode.cfg(&cfg)
				s, err := New(cfg)
				require.NoError(t, err)
				return s
			}
			start, err := topology.ParseCompact("v100:8:4,k80:8:4,a100:4:2", 4)
			require.NoError(t, err)
			l.a, l.b = l.mk(start), l.mk(start)
			rounds += l.run(mode.name, seed, 14)
		}
	}
	t.Logf("%d rounds compared, through %v", rounds, seen)
	for _, what := range []string{"preempted", "finished", "gangs dropped", "refilled", "elastic GPUs", "kept", "pairs", "waiting", "unrunnable"} {
		assert.Positive(t, seen[what], what)
	}
}

func (l *lockstep) run(mode string, seed uint64, n int) int {
	t, rng := l.t, l.rng
	keys := []perfmodel.JobKey{{Model: "ResNet-18", BatchSize: 64}, {Model: "ResNet-50", BatchSize: 32}, {Model: "A3C"}, {Model: "LM", BatchSize: 20}}
	modelled := l.a.cfg.Throughput != nil
	next := 0
	submit := func(now float64) {
		spec := JobSpec{GPUs: []int{1, 1, 2, 4, 8}[rng.IntN(5)], Priority: rng.IntN(3)}
		if modelled {
			spec.GPUs = 1
			k := keys[rng.IntN(len(keys))]
			spec.Model = &k
			spec.Types = []topology.GPUType{topology.V100, topology.K80} // the table has no A100
		} else {
			spec.Throughput = map[topology.GPUType]float64{topology.V100: 1 + rng.Float64(), topology.K80: 0.5 + rng.Float64()/2, topology.A100: 2 + rng.Float64()}
			if rng.IntN(5) == 0 {
				spec.MaxGPUs = spec.GPUs + 1 + rng.IntN(3)
			}
			if rng.IntN(6) == 0 {
				spec.SingleServer = true
			}
		}
		if rng.IntN(4) == 0 {
			spec.Gang = fmt.Sprint("g", rng.IntN(3))
		}
		if rng.IntN(3) == 0 {
			spec.RemainingSteps = float64(100 + rng.IntN(2000))
		}
		key := fmt.Sprint("j", next)
		next++
		ea := l.a.Submit(key, spec, now)
		l.same("submit", ea, l.b.Submit(key, spec, now))
		require.NoError(t, ea, l.name)
	}
	servers := map[string]topology.Server{}
	now := 0.0
	count := 0
	for i := range n {
		l.name = fmt.Sprintf("%s seed %d round %d", mode, seed, i)
		arrivals := rng.IntN(4)
		if modelled {
			arrivals = 2 + rng.IntN(5) // more jobs than GPUs: pairs
		}
		for range arrivals {
			submit(now)
		}
		// b restarts once a round: before it, between it and its
		// report, or after the report.
		at := rng.IntN(3)
		if at == 0 {
			l.restoreB()
			l.seen["restores"]++
		}
		ra, ea := l.a.Round(ctx, now)
		rb, eb := l.b.Round(ctx, now)
		l.same("round", ea, eb)
		require.NoError(t, ea, l.name)
		roundsEqual(t, ra, rb, l.name)
		count++
		l.seen["preempted"] += len(ra.Preempted)
		l.seen["finished"] += len(ra.Finished)
		l.seen["gangs dropped"] += ra.Stats.GangsDropped
		l.seen["refilled"] += ra.Stats.Refilled
		l.seen["elastic GPUs"] += ra.Stats.ElasticGPUs
		l.seen["kept"] += ra.Stats.Kept
		for _, as := range ra.Assignments {
			if len(as.Jobs) == 2 {
				l.seen["pairs"]++
			}
		}
		for _, f := range ra.Waiting {
			l.seen[f.State.String()]++
		}
		l.statusEqual()
		if at == 1 {
			l.restoreB() // between the round and its report
			l.seen["restores"]++
		}
		end := now + ra.Length
		if rng.IntN(4) > 0 {
			rep := RoundReport{Start: ra.Start}
			longest := 0.0
			for _, as := range ra.Assignments {
				for _, k := range as.Jobs {
					switch rng.IntN(8) {
					case 0:
						rep.Failed = append(rep.Failed, k)
					case 1: // not listed: did not run
					default:
						secs := ra.Length
						if rng.IntN(3) == 0 {
							secs = ra.Length * rng.Float64()
						}
						longest = max(longest, secs)
						rep.Ran = append(rep.Ran, Ran{Job: k, Seconds: secs, Steps: float64(rng.IntN(800))})
					}
				}
			}
			l.same("report", l.a.Report(rep), l.b.Report(rep))
			if l.a.cfg.Compat != allocation.CompatGavel {
				end = now + longest
			} else {
				end = now
			}
			if rng.IntN(3) == 0 {
				end = now + ra.Length
			}
		}
		if at == 2 {
			l.restoreB() // after the report
			l.seen["restores"]++
		}
		l.statusEqual()
		// Between rounds: failures, servers, updates, removals.
		switch rng.IntN(7) {
		case 0:
			srv := []string{"v100-0", "k80-1", "a100-0"}[rng.IntN(3)]
			if _, gone := servers[srv]; !gone {
				idx := rng.IntN(2)
				ka, ea := l.a.FailGPUs(srv, idx)
				kb, eb := l.b.FailGPUs(srv, idx)
				l.same("fail", ea, eb)
				require.Equal(t, ka, kb, l.name)
			}
		case 1:
			srv := []string{"v100-0", "k80-1", "a100-0"}[rng.IntN(3)]
			if _, gone := servers[srv]; !gone {
				l.same("recover", l.a.RecoverGPUs(srv), l.b.RecoverGPUs(srv))
			}
		case 2:
			srv := []string{"v100-1", "k80-0", "a100-1"}[rng.IntN(3)]
			if sv, gone := servers[srv]; gone {
				l.same("add", l.a.AddServer(sv), l.b.AddServer(sv))
				delete(servers, srv)
			} else {
				l.a.View(func(v *ClusterView) {
					p, _ := v.ServerIndex(srv)
					servers[srv] = v.Server(p)
				})
				ka, ea := l.a.RemoveServer(srv)
				kb, eb := l.b.RemoveServer(srv)
				l.same("remove server", ea, eb)
				require.Equal(t, ka, kb, l.name)
			}
		case 3:
			if js := l.a.Jobs(); len(js) > 0 {
				k := js[rng.IntN(len(js))]
				st, err := l.a.Status(k)
				require.NoError(t, err)
				spec := st.Spec
				if spec.Throughput != nil {
					spec.Throughput = map[topology.GPUType]float64{topology.V100: 1 + rng.Float64(), topology.K80: 0.5, topology.A100: 2}
					if rng.IntN(2) == 0 {
						spec.GPUs = []int{1, 2, 4}[rng.IntN(3)]
						spec.MaxGPUs = 0
					}
				}
				spec.RemainingSteps = float64(rng.IntN(3) * 500)
				spec.Priority = rng.IntN(3)
				l.same("update", l.a.Update(k, spec), l.b.Update(k, spec))
			}
		case 4:
			if js := l.a.Jobs(); len(js) > 0 {
				k := js[rng.IntN(len(js))]
				l.same("remove", l.a.Remove(k), l.b.Remove(k))
			}
		}
		l.statusEqual()
		da, err := l.a.Snapshot()
		require.NoError(t, err)
		db, err := l.b.Snapshot()
		require.NoError(t, err)
		sameJSON(t, da, db, l.name+": snapshots")
		now = end
	}
	return count
}

// sameJSON compares two JSON documents and, when they differ, shows
// where (not the whole documents).
func sameJSON(t *testing.T, want, got []byte, msg string) {
	t.Helper()
	var a, b any
	require.NoError(t, json.Unmarshal(want, &a))
	require.NoError(t, json.Unmarshal(got, &b))
	if reflect.DeepEqual(a, b) {
		return
	}
	ca, _ := json.Marshal(a)
	cb, _ := json.Marshal(b)
	i := 0
	for i < len(ca) && i < len(cb) && ca[i] == cb[i] {
		i++
	}
	lo := max(0, i-300)
	t.Fatalf("%s: the JSON differs at byte %d:\n  want ...%s\n  got  ...%s", msg, i, ca[lo:min(len(ca), i+200)], cb[lo:min(len(cb), i+200)])
}
