package ring

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gpusched/gpusched/perfmodel"
	"github.com/gpusched/gpusched/placement"
	"github.com/gpusched/gpusched/topology"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fixed places each job where the test says, or makes it wait.
type fixed map[int]placement.GPUSet

func (f fixed) Place(_ *topology.Cluster, st *State, j *Job, _ float64) (placement.GPUSet, error) {
	set := f[j.ID]
	for s, gpus := range set {
		for _, g := range gpus {
			if !st.Free[s][g] {
				return nil, nil
			}
		}
	}
	return set, nil
}

func servers(t testing.TB, sizes ...int) *topology.Cluster {
	c := &topology.Cluster{}
	for s, g := range sizes {
		one, err := topology.Homogeneous(1, topology.ServerTemplate{Type: topology.V100, GPUs: g})
		require.NoError(t, err)
		one.Servers[0].ID = fmt.Sprintf("s%d", s)
		c.Servers = append(c.Servers, one.Servers[0])
	}
	require.NoError(t, c.Validate())
	return c
}

// handModel: b_e = 1, no reduction cost, no overhead, f(k) = k (alpha 0),
// xi1 = 1, so a ring of w workers with gradient m across servers with p
// contenders spends 2(w-1)m p / w per iteration communicating.
var handModel = perfmodel.RingModel{IntraBandwidth: 1e9, InterBandwidth: 1, ReduceSpeed: 1e12, Xi1: 1, Xi2: 0}

// Two 4-GPU rings share both servers of a 2 x 4 cluster: p = 2 for both
// (eq. 6). Each iteration takes 0.1 compute + 2*3*0.1*f/4 = 0.1 + 0.15 f
// slots: 0.4 contended (2 per slot), 0.25 alone (4 per slot). B (20
// iterations) ends at slot 10; A (40) has 20 left and ends 5 slots later.
func TestRingExecutorContentionByHand(t *testing.T) {
	c := servers(t, 4, 4)
	ring := perfmodel.RingJob{GradientSize: 0.1, Backward: 0.1}
	jobs := []Job{{ID: 1, GPUs: 4, Iterations: 40, Ring: ring}, {ID: 2, GPUs: 4, Iterations: 20, Ring: ring}}
	ex := Executor{Model: handModel, Strict: true, Placer: fixed{1: {0: {0, 1}, 1: {0, 1}}, 2: {0: {2, 3}, 1: {2, 3}}}}
	s, err := ex.Run(context.Background(), c, jobs, nil)
	require.NoError(t, err)
	assert.Equal(t, 15, s.Jobs[0].Finish)
	assert.Equal(t, 10, s.Jobs[1].Finish)
	assert.Equal(t, 2, s.Jobs[0].MaxContention)
	assert.Equal(t, 2, s.Jobs[0].Servers)
	assert.Equal(t, 15, s.Makespan)
	assert.InDelta(t, 12.5, s.MeanJCT, 1e-12)
	// On one server each, no contention and the intra-server bandwidth:
	// 0.1 + 0.15e-9 per iteration, 9 per slot (floor of 1/tau): 5 and 3
	// slots.
	ex.Placer = fixed{1: {0: {0, 1, 2, 3}}, 2: {1: {0, 1, 2, 3}}}
	s, err = ex.Run(context.Background(), c, jobs, nil)
	require.NoError(t, err)
	assert.Equal(t, []int{5, 3}, []int{s.Jobs[0].Finish, s.Jobs[1].Finish})
	assert.Equal(t, 0, s.Jobs[0].MaxContention)
	// Estimates: contention-free on the fewest servers (one).
	est, err := ex.Estimates(c, jobs)
	require.NoError(t, err)
	assert.Equal(t, []float64{5, 3}, est)
}

// Strict order: a job that cannot be placed blocks those behind it; not
// strict, the one behind passes it.
func TestRingExecutorStrictOrder(t *testing.T) {
	c := servers(t, 4)
	ring := perfmodel.RingJob{Backward: 0.1}
	jobs := []Job{
		{ID: 1, GPUs: 2, Iterations: 100, Ring: ring}, // 10 slots
		{ID: 2, GPUs: 4, Iterations: 10, Ring: ring},  // waits for 1
		{ID: 3, GPUs: 2, Iterations: 10, Ring: ring},
	}
	ex := Executor{Model: handModel, Strict: true, Placer: FirstFit{}}
	s, err := ex.Run(context.Background(), c, jobs, nil)
	require.NoError(t, err)
	assert.Equal(t, []int{0, 10, 11}, []int{s.Jobs[0].Start, s.Jobs[1].Start, s.Jobs[2].Start})
	ex.Strict = false
	s, err = ex.Run(context.Background(), c, jobs, nil)
	require.NoError(t, err)
	assert.Equal(t, []int{0, 10, 0}, []int{s.Jobs[0].Start, s.Jobs[1].Start, s.Jobs[2].Start})
}

func TestRingArrivals(t *testing.T) {
	c := servers(t, 4)
	ring := perfmodel.RingJob{Backward: 0.1}
	jobs := []Job{{ID: 1, GPUs: 4, Iterations: 10, Arrival: 7, Ring: ring}}
	s, err := (&Executor{Model: handModel, Placer: &ListScheduling{}}).Run(context.Background(), c, jobs, nil)
	require.NoError(t, err)
	assert.Equal(t, 7, s.Jobs[0].Start)
	assert.Equal(t, 8, s.Jobs[0].Finish)
	assert.InDelta(t, 1, s.MeanJCT, 0)
}

func TestRingErrors(t *testing.T) {
	c := servers(t, 4, 4)
	ring := perfmodel.RingJob{Backward: 0.1}
	ex := Executor{Model: handModel, Placer: &ListScheduling{}}
	for _, tc := range []struct {
		name string
		jobs []Job
	}{
		{"too many GPUs", []Job{{ID: 1, GPUs: 9, Iterations: 1, Ring: ring}}},
		{"no GPUs", []Job{{ID: 1, GPUs: 0, Iterations: 1, Ring: ring}}},
		{"negative GPUs", []Job{{ID: 1, GPUs: -2, Iterations: 1, Ring: ring}}},
		{"zero iterations", []Job{{ID: 1, GPUs: 1, Iterations: 0, Ring: ring}}},
		{"duplicate ID", []Job{{ID: 1, GPUs: 1, Iterations: 1, Ring: ring}, {ID: 1, GPUs: 1, Iterations: 1, Ring: ring}}},
		{"duplicate sparse ID", []Job{{ID: math.MinInt, GPUs: 1, Iterations: 1, Ring: ring}, {ID: math.MaxInt, GPUs: 1, Iterations: 1, Ring: ring}, {ID: math.MinInt, GPUs: 1, Iterations: 1, Ring: ring}}},
		{"duplicate negative ID", []Job{{ID: -70, GPUs: 1, Iterations: 1, Ring: ring}, {ID: -3, GPUs: 1, Iterations: 1, Ring: ring}, {ID: -70, GPUs: 1, Iterations: 1, Ring: ring}}},
		{"negative arrival", []Job{{ID: 1, GPUs: 1, Iterations: 1, Arrival: -1, Ring: ring}}},
		{"NaN estimate", []Job{{ID: 1, GPUs: 1, Iterations: 1, Estimate: math.NaN(), Ring: ring}}},
	} {
		_, err := ex.Run(context.Background(), c, tc.jobs, nil)
		assert.ErrorIs(t, err, ErrInvalidJob, tc.name)
		_, err = SJFBCO{Model: handModel}.Schedule(context.Background(), c, tc.jobs)
		assert.ErrorIs(t, err, ErrInvalidJob, tc.name)
	}
	// A negative compute time is the model's to refuse.
	_, err := ex.Run(context.Background(), c, []Job{{ID: 1, GPUs: 1, Iterations: 1, Ring: perfmodel.RingJob{Backward: -1}}}, nil)
	assert.ErrorIs(t, err, perfmodel.ErrInvalidRing)
	// A placer handing out a busy GPU, or too few.
	jobs := []Job{{ID: 1, GPUs: 2, Iterations: 10, Ring: ring}, {ID: 2, GPUs: 2, Iterations: 10, Ring: ring}}
	_, err = (&Executor{Model: handModel, Placer: badPlacer{placement.GPUSet{0: {0, 1}}}}).Run(context.Background(), c, jobs, nil)
	assert.ErrorIs(t, err, ErrBadPlacement)
	_, err = (&Executor{Model: handModel, Placer: badPlacer{placement.GPUSet{0: {0}}}}).Run(context.Background(), c, jobs, nil)
	assert.ErrorIs(t, err, ErrBadPlacement)
	_, err = (&Executor{Model: handModel, Placer: badPlacer{placement.GPUSet{5: {0, 1}}}}).Run(context.Background(), c, jobs, nil)
	assert.ErrorIs(t, err, ErrBadPlacement)
	_, err = (&Executor{Model: handModel}).Run(context.Background(), c, jobs, nil)
	assert.ErrorIs(t, err, ErrInvalidSetting)
	// A placer that never places.
	_, err = (&Executor{Model: handModel, Placer: fixed{}}).Run(context.Background(), c, jobs, nil)
	assert.ErrorIs(t, err, ErrUnplaceable)
	// A horizon too short for any schedule.
	jobs[0].Iterations, jobs[1].Iterations = 100, 100 // 10 slots each
	_, err = SJFBCO{Model: handModel, Horizon: 3}.Schedule(context.Background(), c, jobs)
	assert.ErrorIs(t, err, ErrHorizon)
	_, err = SJFBCO{Model: handModel, Lambda: 0.5}.Schedule(context.Background(), c, jobs)
	assert.ErrorIs(t, err, ErrInvalidSetting)
}

type badPlacer struct{ set placement.GPUSet }

func (b badPlacer) Place(*topology.Cluster, *State, *Job, float64) (placement.GPUSet, error) {
	return b.set, nil
}

// randomInstance draws servers of 4 to 16 GPUs and jobs of 1 to 32.
func randomInstance(t testing.TB, seed uint64, ns, nj int) (*topology.Cluster, []Job) {
	rng := rand.New(rand.NewPCG(seed, 7))
	sizes := make([]int, ns)
	total := 0
	for s := range sizes {
		sizes[s] = []int{4, 8, 16}[rng.IntN(3)]
		total += sizes[s]
	}
	jobs := make([]Job, nj)
	for i := range jobs {
		c := 0.01 + 0.04*rng.Float64()
		jobs[i] = Job{ID: i, GPUs: min([]int{1, 1, 2, 4, 8, 16, 32}[rng.IntN(7)], total), Iterations: 100 + rng.IntN(2000), Ring: perfmodel.RingJob{GradientSize: 0.06 * c, Backward: c}}
	}
	return servers(t, sizes...), jobs
}

var paperModel = perfmodel.RingModel{IntraBandwidth: 10, InterBandwidth: 1, ReduceSpeed: 100, Xi1: 1, Xi2: 0.0001, Alpha: 0.75}

// seeds is n, or 1 with -short (CI's race run).
func seeds(n uint64) uint64 {
	if testing.Short() {
		return 1
	}
	return n
}

// checkSchedule asserts the invariants of any executed schedule: every job
// has exactly its GPUs (gang), no GPU runs two jobs at once (capacity),
// no job finishes faster than alone on its servers, and none starts before
// its arrival.
func checkSchedule(t *testing.T, name string, c *topology.Cluster, m perfmodel.RingModel, jobs []Job, s *Schedule) {
	t.Helper()
	type use struct{ job, from, to int }
	busy := map[[2]int][]use{}
	last := 0
	for i, o := range s.Jobs {
		j := jobs[i]
		require.Equal(t, j.ID, o.ID, name)
		require.Equal(t, j.GPUs, o.GPUs.Count(), "%s: job %d gang", name, j.ID)
		require.GreaterOrEqual(t, o.Start, j.Arrival, name)
		r := j.Ring
		r.Workers = j.GPUs
		tau, err := m.IterationTime(r, o.GPUs.Servers(), 0)
		require.NoError(t, err)
		alone := int(math.Ceil(float64(j.Iterations) / speed(tau)))
		require.GreaterOrEqual(t, o.Finish-o.Start, alone, "%s: job %d faster than alone", name, j.ID)
		for srv, gpus := range o.GPUs {
			for _, g := range gpus {
				require.Less(t, g, len(c.Servers[srv].GPUs))
				for _, u := range busy[[2]int{srv, g}] {
					require.True(t, o.Finish <= u.from || u.to <= o.Start, "%s: GPU %d/%d runs jobs %d and %d at once", name, srv, g, u.job, j.ID)
				}
				busy[[2]int{srv, g}] = append(busy[[2]int{srv, g}], use{j.ID, o.Start, o.Finish})
			}
		}
		last = max(last, o.Finish)
	}
	require.Equal(t, last, s.Makespan, name)
}

func TestRingPlacersInvariants(t *testing.T) {
	for seed := range seeds(8) {
		c, jobs := randomInstance(t, seed, 6, 60)
		placers := map[string]Placer{
			"first-fit": FirstFit{}, "first-fit-whole": FirstFit{WholeServer: true}, "list": &ListScheduling{}, "random": NewRandom(seed),
			"fa-ffp": &FAFFP{Theta: math.Inf(1)}, "fa-ffp-packed": &FAFFP{Theta: math.Inf(1), Reading: PackedServers},
			"lbsgf": &LBSGF{Theta: math.Inf(1)}, "lbsgf-2": &LBSGF{Theta: math.Inf(1), Lambda: 2},
		}
		for name, p := range placers {
			for _, strict := range []bool{true, false} {
				ex := Executor{Model: paperModel, Placer: p, Strict: strict}
				s, err := ex.Run(context.Background(), c, jobs, nil)
				require.NoError(t, err, name)
				checkSchedule(t, name, c, paperModel, jobs, s)
			}
		}
		for _, rd := range []FAFFPReading{LeastLoadedGPUs, PackedServers} {
			r, err := SJFBCO{Model: paperModel, Reading: rd}.Schedule(context.Background(), c, jobs)
			require.NoError(t, err)
			checkSchedule(t, "sjf-bco", c, paperModel, jobs, r.Schedule)
		}
	}
}

// Only which jobs have G_j <= kappa matters, so sweeping kappa = 1..32
// finds the schedule the sweep over job sizes finds.
func TestSJFBCOKappaSweep(t *testing.T) {
	for seed := range seeds(4) {
		c, jobs := randomInstance(t, seed, 6, 50)
		all := make([]int, 32)
		for k := range all {
			all[k] = k + 1
		}
		a, err := SJFBCO{Model: paperModel}.Schedule(context.Background(), c, jobs)
		require.NoError(t, err)
		b, err := SJFBCO{Model: paperModel, Kappas: all, Sequential: true}.Schedule(context.Background(), c, jobs)
		require.NoError(t, err)
		assert.Equal(t, a.Makespan, b.Makespan)
		assert.Equal(t, a.Theta, b.Theta)
		assert.Greater(t, b.Runs, a.Runs)
	}
}

// SJF-BCO on a small case worked by hand: one 4-GPU server, jobs of 1, 4
// and 2 GPUs (each 10 slots alone). Smallest first: the 1- and 2-GPU jobs
// run together from slot 0, the 4-GPU job from slot 10: makespan 20,
// JCTs 10, 10 and 20. Given order with First-Fit, strictly: 1 at 0, 4 at
// 10, 2 at 20: makespan 30.
func TestSJFBCOByHand(t *testing.T) {
	c := servers(t, 4)
	ring := perfmodel.RingJob{Backward: 0.1}
	jobs := []Job{{ID: 1, GPUs: 1, Iterations: 100, Ring: ring}, {ID: 2, GPUs: 4, Iterations: 100, Ring: ring}, {ID: 3, GPUs: 2, Iterations: 100, Ring: ring}}
	r, err := SJFBCO{Model: handModel}.Schedule(context.Background(), c, jobs)
	require.NoError(t, err)
	assert.Equal(t, 20, r.Makespan)
	assert.Equal(t, []int{0, 10, 0}, []int{r.Jobs[0].Start, r.Jobs[1].Start, r.Jobs[2].Start})
	assert.InDelta(t, 40.0/3, r.MeanJCT, 1e-12)
	// Caps below 20 cannot admit the 4-GPU job (its GPUs carry 10 already).
	assert.GreaterOrEqual(t, r.Theta, 20)
	s, err := (&Executor{Model: handModel, Placer: FirstFit{}, Strict: true}).Run(context.Background(), c, jobs, nil)
	require.NoError(t, err)
	assert.Equal(t, 30, s.Makespan)
}

// Theta caps every GPU's accumulated estimate: with two 10-slot 1-GPU jobs
// and a cap of 10 on a 2-GPU server, they must go to different GPUs; with
// a cap of 5 neither fits (ErrUnplaceable).
func TestFAFFPCap(t *testing.T) {
	c := servers(t, 2)
	ring := perfmodel.RingJob{Backward: 0.1}
	jobs := []Job{{ID: 1, GPUs: 1, Iterations: 100, Ring: ring}, {ID: 2, GPUs: 1, Iterations: 100, Arrival: 20, Ring: ring}}
	s, err := (&Executor{Model: handModel, Placer: &FAFFP{Theta: 10}}).Run(context.Background(), c, jobs, nil)
	require.NoError(t, err)
	assert.NotEqual(t, s.Jobs[0].GPUs[0], s.Jobs[1].GPUs[0])
	_, err = (&Executor{Model: handModel, Placer: &FAFFP{Theta: 5}}).Run(context.Background(), c, jobs, nil)
	assert.ErrorIs(t, err, ErrUnplaceable)
}

// LBSGF takes the least busy servers' prefix: after a job loads server 0,
// the next 4-GPU job goes to server 1 even though server 0 is idle again;
// with lambda 2 its prefix holds both servers.
func TestLBSGFLeastBusy(t *testing.T) {
	c := servers(t, 4, 4)
	ring := perfmodel.RingJob{Backward: 0.1}
	jobs := []Job{{ID: 1, GPUs: 4, Iterations: 100, Ring: ring}, {ID: 2, GPUs: 4, Iterations: 100, Arrival: 50, Ring: ring}}
	s, err := (&Executor{Model: handModel, Placer: &LBSGF{Theta: math.Inf(1)}}).Run(context.Background(), c, jobs, nil)
	require.NoError(t, err)
	assert.Equal(t, placement.GPUSet{0: {0, 1, 2, 3}}, s.Jobs[0].GPUs)
	assert.Equal(t, placement.GPUSet{1: {0, 1, 2, 3}}, s.Jobs[1].GPUs)
}

func TestRandomPlacerSeeded(t *testing.T) {
	c, jobs := randomInstance(t, 3, 5, 40)
	run := func(seed uint64) *Schedule {
		s, err := (&Executor{Model: paperModel, Placer: NewRandom(seed)}).Run(context.Background(), c, jobs, nil)
		require.NoError(t, err)
		return s
	}
	assert.Equal(t, run(1), run(1))
	assert.NotEqual(t, run(1).Jobs, run(2).Jobs)
}

func TestRingPlacerErrorPropagates(t *testing.T) {
	c := servers(t, 4)
	boom := errors.New("boom")
	_, err := (&Executor{Model: handModel, Placer: errPlacer{boom}}).Run(context.Background(), c, []Job{{ID: 1, GPUs: 1, Iterations: 1, Ring: perfmodel.RingJob{Backward: 0.1}}}, nil)
	assert.ErrorIs(t, err, boom)
}

type errPlacer struct{ err error }

func (e errPlacer) Place(*topology.Cluster, *State, *Job, float64) (placement.GPUSet, error) {
	return nil, e.err
}
