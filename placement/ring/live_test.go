package ring

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/gpusched/gpusched/cluster"
	"github.com/gpusched/gpusched/perfmodel"
	"github.com/gpusched/gpusched/placement"
	"github.com/gpusched/gpusched/topology"
	"github.com/stretchr/testify/require"
)

// liveCluster is a 3 x 4 cluster state in which "other" holds server 0's
// GPUs 0 and 1 and server 2's GPU 3 is failed.
func liveCluster(t *testing.T) (*cluster.State, *topology.Cluster) {
	t.Helper()
	c := servers(t, 4, 4, 4)
	live, err := cluster.New(c)
	require.NoError(t, err)
	require.NoError(t, live.Bind("other", []cluster.GPURef{{Server: 0, GPU: 0}, {Server: 0, GPU: 1}}))
	_, err = live.Fail(cluster.GPURef{Server: 2, GPU: 3})
	require.NoError(t, err)
	return live, c
}

// On a shared live state the rings use only the GPUs that are free there
// (9 of 12), bind their holders while they run, and leave the state as
// they found it.
func TestRunOnSharedState(t *testing.T) {
	live, _ := liveCluster(t)
	jobs := []Job{{ID: 1, GPUs: 4, Iterations: 50}, {ID: 2, GPUs: 3, Iterations: 80}, {ID: 3, GPUs: 2, Iterations: 30}, {ID: 4, GPUs: 9, Iterations: 10}}
	seen := false
	probe := placerFunc(func(c *topology.Cluster, st *State, j *Job, est float64) (placement.GPUSet, error) {
		if j.ID == 3 {
			// Jobs 1 and 2 run now, bound in the live state.
			require.Len(t, live.Held(HolderKey(1)), 4)
			require.Len(t, live.Held(HolderKey(2)), 3)
			require.Equal(t, st.TotalFree, live.Free(topology.V100))
			seen = true
		}
		return FirstFit{}.Place(c, st, j, est)
	})
	s, err := (&Executor{Model: paperModel, Placer: probe, Strict: true}).RunOn(context.Background(), live, jobs, nil)
	require.NoError(t, err)
	require.True(t, seen)
	for _, o := range s.Jobs {
		for srv, gpus := range o.GPUs {
			for _, g := range gpus {
				require.False(t, srv == 0 && g < 2, "job %d on other's GPU %d/%d", o.ID, srv, g)
				require.False(t, srv == 2 && g == 3, "job %d on the failed GPU", o.ID)
			}
		}
	}
	// Job 4 needs every free GPU: it starts only once the others are done.
	require.Equal(t, max(s.Jobs[0].Finish, s.Jobs[1].Finish, s.Jobs[2].Finish), s.Jobs[3].Start)
	require.NoError(t, live.Check())
	require.Equal(t, []string{"other"}, live.Holders())
	require.Equal(t, 9, live.Free(topology.V100))
}

type placerFunc func(c *topology.Cluster, st *State, j *Job, est float64) (placement.GPUSet, error)

func (f placerFunc) Place(c *topology.Cluster, st *State, j *Job, est float64) (placement.GPUSet, error) {
	return f(c, st, j, est)
}

// Errors: a job too big for what is left ends with ErrUnplaceable, a
// holder key in use with ErrInvalidSetting, a placer error mid-run leaves
// nothing bound, and a topology that does not validate is refused.
func TestRunOnErrors(t *testing.T) {
	ctx := context.Background()
	live, _ := liveCluster(t)
	_, err := (&Executor{Model: paperModel, Placer: FirstFit{}}).RunOn(ctx, live, []Job{{ID: 1, GPUs: 10, Iterations: 5}}, nil)
	require.ErrorIs(t, err, ErrUnplaceable)

	require.NoError(t, live.Bind(HolderKey(7), []cluster.GPURef{{Server: 1, GPU: 0}}))
	_, err = (&Executor{Model: paperModel, Placer: FirstFit{}}).RunOn(ctx, live, []Job{{ID: 7, GPUs: 1, Iterations: 5}}, nil)
	require.ErrorIs(t, err, ErrInvalidSetting)
	live.Release(HolderKey(7))

	boom := errors.New("boom")
	fail := placerFunc(func(c *topology.Cluster, st *State, j *Job, est float64) (placement.GPUSet, error) {
		if j.ID == 3 {
			return nil, boom
		}
		return FirstFit{}.Place(c, st, j, est)
	})
	jobs := []Job{{ID: 1, GPUs: 2, Iterations: 50}, {ID: 2, GPUs: 2, Iterations: 50}, {ID: 3, GPUs: 1, Iterations: 5, Arrival: 3}}
	_, err = (&Executor{Model: paperModel, Placer: fail}).RunOn(ctx, live, jobs, nil)
	require.ErrorIs(t, err, boom)
	require.NoError(t, live.Check())
	require.Equal(t, []string{"other"}, live.Holders())

	// A placer that names another holder's or a failed GPU is refused,
	// and the state keeps what it had.
	for _, bad := range []placement.GPUSet{{0: {0}}, {2: {3}}} {
		_, err = (&Executor{Model: paperModel, Placer: badPlacer{bad}}).RunOn(ctx, live, []Job{{ID: 9, GPUs: 1, Iterations: 5}}, nil)
		require.ErrorIs(t, err, ErrBadPlacement)
		require.NoError(t, live.Check())
		require.Equal(t, []string{"other"}, live.Holders())
	}

	bad := &topology.Cluster{Servers: []topology.Server{{ID: "x"}}}
	_, err = (&Executor{Model: paperModel, Placer: FirstFit{}}).Run(ctx, bad, nil, nil)
	require.ErrorIs(t, err, ErrInvalidSetting)
	for _, seq := range []bool{true, false} {
		_, err = SJFBCO{Model: paperModel, Sequential: seq, Kappas: []int{1, 2}}.Schedule(ctx, bad, nil)
		require.ErrorIs(t, err, ErrInvalidSetting)
	}
}

// SJF-BCO on a live state: on a fresh one it finds Schedule's schedule; on
// a shared one its rings avoid others' and failed GPUs, and it only reads
// the state (its generation does not move).
func TestSJFBCOScheduleOn(t *testing.T) {
	ctx := context.Background()
	for seed := range seeds(3) {
		c, jobs := randomInstance(t, seed, 6, 40)
		want, err := SJFBCO{Model: paperModel}.Schedule(ctx, c, jobs)
		require.NoError(t, err)
		live, err := cluster.New(c)
		require.NoError(t, err)
		got, err := SJFBCO{Model: paperModel}.ScheduleOn(ctx, live, jobs)
		require.NoError(t, err)
		require.Equal(t, want, got, "seed %d", seed)
	}

	live, c := liveCluster(t)
	gen := live.Generation()
	jobs := []Job{{ID: 1, GPUs: 4, Iterations: 50}, {ID: 2, GPUs: 3, Iterations: 80}, {ID: 3, GPUs: 2, Iterations: 30}, {ID: 4, GPUs: 9, Iterations: 10}}
	for _, seq := range []bool{true, false} {
		r, err := SJFBCO{Model: paperModel, Sequential: seq}.ScheduleOn(ctx, live, jobs)
		require.NoError(t, err)
		checkSchedule(t, "sjf-bco on live", c, paperModel, jobs, r.Schedule)
		for _, o := range r.Jobs {
			for srv, gpus := range o.GPUs {
				for _, g := range gpus {
					require.False(t, srv == 0 && g < 2, "job %d on other's GPU %d/%d", o.ID, srv, g)
					require.False(t, srv == 2 && g == 3, "job %d on the failed GPU", o.ID)
				}
			}
		}
	}
	require.Equal(t, gen, live.Generation())
	require.NoError(t, live.Bind(HolderKey(3), []cluster.GPURef{{Server: 1, GPU: 0}}))
	_, err := SJFBCO{Model: paperModel}.ScheduleOn(ctx, live, jobs)
	require.ErrorIs(t, err, ErrInvalidSetting)
}

// Job IDs are told apart however they spread (a bitset for dense IDs, a
// map otherwise), and every job's holder key is HolderKey of its ID.
func TestJobIDsAndKeys(t *testing.T) {
	for _, ids := range [][]int{{}, {0}, {3, 1, 2}, {-5, 5, 0, -64, 64}, {math.MinInt, 0, math.MaxInt}, {1, 1 << 40}} {
		jobs := make([]Job, len(ids))
		for i, id := range ids {
			jobs[i] = Job{ID: id, GPUs: 1, Iterations: 1}
		}
		require.NoError(t, validateJobs(jobs, 1), ids)
		keys := holderKeys(jobs)
		require.Len(t, keys, len(ids))
		for i, id := range ids {
			require.Equal(t, HolderKey(id), keys[i])
		}
		if len(ids) > 0 {
			dup := append(slices.Clone(jobs), jobs[len(jobs)/2])
			require.ErrorIs(t, validateJobs(dup, 1), ErrInvalidJob, ids)
			require.ErrorContains(t, validateJobs(dup, 1), fmt.Sprintf("job ID %d appears twice", jobs[len(jobs)/2].ID))
		}
	}
}

// The default horizon holds on a shared live state: the estimates behind
// it are the jobs' times on the whole topology, so there it is at least
// the makespan of a run whose cap binds nothing (it was the sum of the
// estimates, 28 slots here, and no cap gave a schedule by then:
// ErrHorizon, while Horizon 1000 gave makespan 34).
// A job larger than the usable GPUs is ErrUnplaceable naming it, as in
// RunOn (it was ErrHorizon).
func TestSJFBCOScheduleOnDefaultHorizon(t *testing.T) {
	ctx := context.Background()
	live, err := cluster.New(servers(t, 4, 4, 4))
	require.NoError(t, err)
	require.NoError(t, live.Bind("other", []cluster.GPURef{{Server: 0, GPU: 0}, {Server: 0, GPU: 1}, {Server: 0, GPU: 2}}))
	_, err = live.Fail(cluster.GPURef{Server: 1, GPU: 0})
	require.NoError(t, err)
	model := perfmodel.RingModel{IntraBandwidth: 100, InterBandwidth: 10, ReduceSpeed: 1000, Xi1: .5, Xi2: .1, Alpha: .1}
	jobs := []Job{{ID: 1, GPUs: 2, Iterations: 100}, {ID: 2, GPUs: 4, Iterations: 100}, {ID: 3, GPUs: 3, Iterations: 50}, {ID: 4, GPUs: 8, Iterations: 10}}
	want, err := SJFBCO{Model: model, Horizon: 1000}.ScheduleOn(ctx, live, jobs)
	require.NoError(t, err)
	require.Equal(t, 34, want.Makespan)
	for _, seq := range []bool{true, false} {
		got, err := SJFBCO{Model: model, Sequential: seq}.ScheduleOn(ctx, live, jobs)
		require.NoError(t, err)
		require.Equal(t, 34, got.Makespan)
		checkSchedule(t, "default horizon on live", live.Topology(), model, jobs, got.Schedule)
	}
}

// A job larger than the GPUs usable in the live state is ErrUnplaceable
// naming it, as in RunOn (it was ErrHorizon, every run being unplaceable).
func TestSJFBCOScheduleOnTooBig(t *testing.T) {
	ctx := context.Background()
	live, err := cluster.New(servers(t, 4, 4, 4))
	require.NoError(t, err)
	require.NoError(t, live.Bind("other", []cluster.GPURef{{Server: 0, GPU: 0}, {Server: 0, GPU: 1}, {Server: 0, GPU: 2}}))
	_, err = live.Fail(cluster.GPURef{Server: 1, GPU: 0})
	require.NoError(t, err)
	model := perfmodel.RingModel{IntraBandwidth: 100, InterBandwidth: 10, ReduceSpeed: 1000, Xi1: .5, Xi2: .1, Alpha: .1}
	// 8 GPUs usable of 12: a 12-GPU job never fits, a 9-GPU one neither.
	big := []Job{{ID: 1, GPUs: 2, Iterations: 100}, {ID: 5, GPUs: 12, Iterations: 10}}
	for _, h := range []int{0, 1000} {
		_, err = SJFBCO{Model: model, Horizon: h}.ScheduleOn(ctx, live, big)
		require.ErrorIs(t, err, ErrUnplaceable, "horizon %d", h)
		require.ErrorContains(t, err, "job 5 needs 12 GPUs, 8 of the cluster state's 12 are usable")
	}
	_, err = SJFBCO{Model: model}.ScheduleOn(ctx, live, []Job{{ID: 3, GPUs: 9, Iterations: 10}})
	require.ErrorIs(t, err, ErrUnplaceable)
	_, err = SJFBCO{Model: model}.ScheduleOn(ctx, live, []Job{{ID: 3, GPUs: 8, Iterations: 10}})
	require.NoError(t, err)
	_, err = (&Executor{Model: model, Placer: FirstFit{}}).RunOn(ctx, live, big, nil)
	require.ErrorIs(t, err, ErrUnplaceable)
}
