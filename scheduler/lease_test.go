package scheduler

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/gpusched/gpusched/allocation"
	"github.com/gpusched/gpusched/perfmodel"
	"github.com/gpusched/gpusched/perfmodel/gavel"
	"github.com/gpusched/gpusched/topology"
	"github.com/stretchr/testify/require"
)

// leaseInvariant: a job's lease is the live lease of its holder, and every
// job of a live lease points at it: plan finds a unit's lease through its
// first job and reads the lease map only when that lease has another
// holder, which is exact only while this holds.
func leaseInvariant(t *testing.T, s *Scheduler, step string) {
	t.Helper()
	for key, j := range s.jobs {
		if l := j.lease; l != nil {
			require.Same(t, l, s.leases[l.holder], "%s: job %s's lease %q is not live", step, key, l.holder)
			require.True(t, l.jobs[0] == j || l.jobs[1] == j, "%s: job %s not in its lease", step, key)
		}
	}
	require.Len(t, s.leaseList, len(s.leases), step)
	for i, l := range s.leaseList {
		require.Equal(t, i, l.pos, step)
		require.Same(t, l, s.leases[l.holder], step)
		for _, j := range l.jobs {
			if j != nil {
				require.Same(t, l, j.lease, "%s: job %s of live lease %q points elsewhere", step, j.key, l.holder)
				require.Same(t, j, s.jobs[j.key], "%s: lease %q holds removed job %s", step, l.holder, j.key)
			}
		}
	}
}

// TestLeaseInvariant: random Submit, Remove, Round, Report (some jobs
// failed), FailGPUs, RecoverGPUs, RemoveServer, AddServer, Bind and a
// restart through Snapshot and Restore, with space sharing, elastic jobs,
// gangs and consolidation, keep the lease invariant after every call.
func TestLeaseInvariant(t *testing.T) {
	table := gavel.Simulation()
	keys := []perfmodel.JobKey{{Model: "ResNet-18", BatchSize: 64}, {Model: "ResNet-50", BatchSize: 32}, {Model: "Transformer", BatchSize: 128},
		{Model: "LM", BatchSize: 20}, {Model: "A3C"}}
	var kept, keptPairs, grown, restoredLeases int
	for seed := range uint64(12) {
		rng := rand.New(rand.NewPCG(seed, 7))
		mk := func() *Scheduler {
			return newSched(t, func(c *Config) {
				c.Policy = &allocation.MaxMinFairness{SpaceSharing: seed%2 == 0}
				c.Throughput = table
				if seed%2 == 0 {
					c.Colocation = table
				}
				c.MigrationCost = float64(seed % 3)
			})
		}
		s := mk()
		removed := map[string]topology.Server{}
		now, next := 0.0, 0
		var last *Round
		for step := range 300 {
			op := rng.IntN(12)
			name := fmt.Sprintf("seed %d step %d op %d", seed, step, op)
			switch op {
			case 0, 1:
				k := keys[rng.IntN(len(keys))]
				spec := JobSpec{GPUs: 1 + rng.IntN(2)*rng.IntN(3), Model: &k, RemainingSteps: float64(1 + rng.IntN(5000))}
				if rng.IntN(4) == 0 {
					spec.MaxGPUs = spec.GPUs + rng.IntN(3)
				}
				if rng.IntN(5) == 0 {
					spec.Gang = fmt.Sprint("g", rng.IntN(3))
				}
				spec.SingleServer = rng.IntN(4) == 0
				spec.Priority = rng.IntN(2)
				_ = s.Submit(fmt.Sprint("j", next), spec, now)
				next++
			case 2:
				if js := s.Jobs(); len(js) > 0 {
					require.NoError(t, s.Remove(js[rng.IntN(len(js))]))
				}
			case 3, 4, 5:
				now += 360
				r, err := s.Round(ctx, now)
				require.NoError(t, err, name)
				last = r
				for _, as := range r.Assignments {
					if as.Kept {
						kept++
						if len(as.Jobs) == 2 {
							keptPairs++
						}
					}
					if as.Extra > 0 {
						grown++
					}
				}
			case 6:
				if last != nil && rng.IntN(2) == 0 {
					var rep RoundReport
					rep.Start = last.Start
					for _, as := range last.Assignments {
						for _, k := range as.Jobs {
							if rng.IntN(4) == 0 {
								rep.Failed = append(rep.Failed, k)
							} else {
								rep.Ran = append(rep.Ran, Ran{Job: k, Seconds: 100, Steps: 50})
							}
						}
					}
					_ = s.Report(rep)
				}
			case 7:
				srv := []string{"v100-0", "v100-1", "k80-0"}[rng.IntN(3)]
				if _, gone := removed[srv]; !gone {
					_, _ = s.FailGPUs(srv, rng.IntN(4))
				}
			case 8:
				srv := []string{"v100-0", "v100-1", "k80-0"}[rng.IntN(3)]
				if _, gone := removed[srv]; !gone {
					_ = s.RecoverGPUs(srv)
				}
			case 9:
				srv := []string{"v100-1", "k80-0"}[rng.IntN(2)]
				if sv, gone := removed[srv]; gone {
					require.NoError(t, s.AddServer(sv), name)
					delete(removed, srv)
				} else {
					var sv topology.Server
					s.View(func(st *ClusterView) {
						p, _ := st.ServerIndex(srv)
						sv = st.Server(p)
						sv.GPUs = slices.Clone(sv.GPUs)
					})
					_, err := s.RemoveServer(srv)
					require.NoError(t, err, name)
					removed[srv] = sv
				}
			case 10:
				if js := s.Jobs(); len(js) > 0 {
					k := js[rng.IntN(len(js))]
					_ = s.Bind(k, []Device{{Server: "v100-0", Index: rng.IntN(4)}})
				}
			case 11:
				if len(removed) > 0 {
					continue // a fresh scheduler has every server
				}
				data, err := s.Snapshot()
				require.NoError(t, err, name)
				s2 := mk()
				// The servers removed and added again are in another
				// order: Adopt, which releases nothing on the same
				// servers.
				ad, err := s2.Adopt(data)
				require.NoError(t, err, name)
				require.Empty(t, ad.Released, name)
				restoredLeases += len(s2.leases)
				s, last = s2, nil
			}
			leaseInvariant(t, s, name)
		}
	}
	// The paths that matter ran: kept pairs, elastic growth, restored leases.
	t.Logf("kept %d (pairs %d), grown %d, leases restored %d", kept, keptPairs, grown, restoredLeases)
	require.Positive(t, keptPairs)
	require.Positive(t, grown)
	require.Positive(t, restoredLeases)
}
