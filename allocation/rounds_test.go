package allocation

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/gpusched/gpusched/topology"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// checkRound: capacity never exceeded, workers distinct and in range, each
// job at most once.
func checkRound(t *testing.T, p *Problem, rd *Round) {
	t.Helper()
	usedJobs := map[int]bool{}
	usedWorkers := map[[2]int]bool{}
	for _, as := range rd.Assignments {
		for _, id := range as.JobIDs {
			require.False(t, usedJobs[id], "job %d twice in a round", id)
			usedJobs[id] = true
		}
		for _, w := range as.Workers {
			require.True(t, w >= 0 && w < p.Capacity[as.TypeIndex], "worker %d of %s", w, as.Type)
			require.False(t, usedWorkers[[2]int{as.TypeIndex, w}], "worker %d of %s twice", w, as.Type)
			usedWorkers[[2]int{as.TypeIndex, w}] = true
		}
	}
}

// Over 100 rounds on a fixed set of single-GPU jobs, each job's share of
// rounds on each type approaches its X: within 0.05 when the cluster is
// oversubscribed, with one global queue or a queue per type. When it is
// not, the mechanism is work-conserving and may give more: with the global
// queue never less than X - 0.05 on any type; with per-type queues a job
// can keep running on the type visited first and miss its share of a later
// one (Gavel's per-type queues do the same), but its total time is never
// less than its total share - 0.05.
func TestRoundsConverge(t *testing.T) {
	for _, global := range []bool{true, false} {
		rng := rand.New(rand.NewPCG(21, 22))
		for trial := range 8 {
			p := &Problem{Types: []topology.GPUType{"a", "b", "c"}, Capacity: []int{2, 3, 4}}
			jobs := 4 + trial*4 // 4 to 32 jobs on 9 GPUs
			for m := range jobs {
				j := Job{ID: m, ScaleFactor: 1}
				for range 3 {
					j.Throughput = append(j.Throughput, 0.5+rng.Float64()*4)
				}
				p.Jobs = append(p.Jobs, j)
			}
			r := &Rounds{Policy: &MaxMinFairness{}, Mechanism: Mechanism{GlobalQueue: global}}
			counts := make([][]float64, len(p.Jobs))
			for m := range counts {
				counts[m] = make([]float64, 3)
			}
			var a *Allocation
			const n = 100
			for i := range n {
				rd, err := r.Next(context.Background(), p, float64(i)*360)
				require.NoError(t, err)
				require.Equal(t, i == 0, rd.Reset, "round %d", i)
				checkRound(t, p, rd)
				a = rd.Allocation
				for _, as := range rd.Assignments {
					counts[as.JobIDs[0]][as.TypeIndex]++
				}
			}
			oversubscribed := jobs > 9
			for m := range counts {
				total, want := 0.0, 0.0
				for k := range counts[m] {
					share, x := counts[m][k]/n, a.X[m][k]
					total, want = total+share, want+x
					switch {
					case oversubscribed:
						assert.InDelta(t, x, share, 0.05, "global %v trial %d job %d type %d", global, trial, m, k)
					case global:
						assert.GreaterOrEqual(t, share, x-0.05, "trial %d job %d type %d", trial, m, k)
					}
				}
				assert.GreaterOrEqual(t, total, want-0.05, "global %v trial %d job %d", global, trial, m)
			}
		}
	}
}

// With mixed scale factors the LP's capacity is aggregate, and some
// allocations cannot be packed into whole rounds (a one-GPU job holding one
// of two GPUs all the time leaves no room for a two-GPU job there). The
// mechanism still never exceeds capacity and shares the shortfall.
func TestRoundsMixedScaleFactors(t *testing.T) {
	rng := rand.New(rand.NewPCG(23, 24))
	p := &Problem{Types: []topology.GPUType{"a", "b"}, Capacity: []int{4, 8}}
	for m := range 20 {
		j := Job{ID: m, ScaleFactor: []int{1, 1, 2, 4}[rng.IntN(4)]}
		for range 2 {
			j.Throughput = append(j.Throughput, 0.5+rng.Float64()*4)
		}
		p.Jobs = append(p.Jobs, j)
	}
	r := &Rounds{Policy: &MaxMinFairness{}, GPUsPerServer: []int{4, 4}}
	got := make([]float64, len(p.Jobs))
	var a *Allocation
	for i := range 100 {
		rd, err := r.Next(context.Background(), p, float64(i)*360)
		require.NoError(t, err)
		checkRound(t, p, rd)
		a = rd.Allocation
		for _, as := range rd.Assignments {
			got[as.JobIDs[0]] += 0.01
		}
	}
	for m := range got {
		want := a.X[m][0] + a.X[m][1]
		assert.GreaterOrEqual(t, got[m], want-0.15, "job %d (sf %d)", m, p.Jobs[m].ScaleFactor)
	}
}

func TestRoundsLeaseAndResets(t *testing.T) {
	p := &Problem{Types: []topology.GPUType{"a"}, Capacity: []int{4}, Jobs: []Job{
		{ID: 1, ScaleFactor: 2, Throughput: []float64{1}},
		{ID: 2, ScaleFactor: 2, Throughput: []float64{1}},
	}}
	r := &Rounds{Policy: &MaxMinFairness{}, GPUsPerServer: []int{2}}
	rd, err := r.Next(context.Background(), p, 0)
	require.NoError(t, err)
	require.Len(t, rd.Assignments, 2)
	for _, as := range rd.Assignments {
		assert.False(t, as.Extended)
		// Each job on one server of two GPUs.
		assert.Equal(t, as.Workers[0]/2, as.Workers[1]/2)
	}
	rd2, err := r.Next(context.Background(), p, 360)
	require.NoError(t, err)
	before := map[int][]int{}
	for _, as := range rd.Assignments {
		before[as.JobIDs[0]] = as.Workers
	}
	for _, as := range rd2.Assignments {
		assert.True(t, as.Extended)
		assert.Equal(t, before[as.JobIDs[0]], as.Workers)
	}
	// A new job: no reset before 1920 s since the last one.
	p.Jobs = append(p.Jobs, Job{ID: 3, ScaleFactor: 1, Throughput: []float64{1}})
	rd3, err := r.Next(context.Background(), p, 720)
	require.NoError(t, err)
	assert.False(t, rd3.Reset)
	for _, as := range rd3.Assignments {
		assert.NotEqual(t, 3, as.JobIDs[0], "job 3 has no allocation yet")
	}
	rd4, err := r.Next(context.Background(), p, 1920)
	require.NoError(t, err)
	assert.True(t, rd4.Reset)
	assert.Len(t, rd4.Allocation.X, 3)
}

func TestRoundsDeterministic(t *testing.T) {
	p, _ := gavelProblem(t, 3, 40)
	run := func() []*Round {
		r := &Rounds{Policy: &MaxMinFairness{SpaceSharing: true}, Mechanism: Mechanism{ShuffleTypes: true, Seed: 9}}
		var out []*Round
		for i := range 20 {
			rd, err := r.Next(context.Background(), p, float64(i)*360)
			require.NoError(t, err)
			checkRound(t, p, rd)
			out = append(out, rd)
		}
		return out
	}
	a, b := run(), run()
	for i := range a {
		assert.Equal(t, a[i].Assignments, b[i].Assignments, "round %d", i)
	}
	// Space sharing shows up as pairs in rounds.
	pairs := 0
	for _, rd := range a {
		for _, as := range rd.Assignments {
			if len(as.JobIDs) == 2 {
				pairs++
			}
		}
	}
	assert.Positive(t, pairs)
}

// Job identity is the submitter's to choose, so many jobs must not be a
// lever: tenant "att" has 64 jobs of 1 GPU sharing 2 GPUs (X = 1/32 each),
// tenants "v1" to "v3" a job of 4 GPUs each with X = 0.5, on 8 GPUs, 16
// rounds of 360 s from a reset. A unit that never ran goes first while
// the GPU-time its tenant's units take by that priority this round stays
// within what the tenant is owed by the end of the round: sum of GPUs *
// (X * (time since the reset to the end of the round) - time received)
// over its units. Round 0: "att" is owed 64 * 1/32 * 360 = 720 GPU-s,
// two small jobs' round: jobs 100 and 101 first; each large job is owed
// 4 * 0.5 * 360 = 720, less than its 1,440, so they go by lag (0.5 * 180
// plus a head start of 0.5 * 360: 270) before the small ones (1/32 * 540
// = 16.9): job 1, then jobs 102 and 103 in the 2 GPUs left. Round 1:
// "att" is owed 2 * 720 - 4 * 360 = 0; jobs 2 and 3 (lag 450) run. Round
// 2: "att" owed 720 again, jobs 104 and 105 first, then job 1 (lag 90,
// tied with 2 and 3, by ID) and two more small ones. So on until round
// 8, where the small jobs that never ran pass the large ones by lag with
// their head start (3420 / 32 = 106.9 > 90) and take the 8 GPUs; then
// jobs 1 and 2 run in odd rounds, job 3 with four small ones in even
// rounds. The large jobs run 8, 8 and 7 of 16 rounds, each within a round
// of its share (8); the small ones 36 GPU-rounds, half a round of the 8
// GPUs above their 32. Running
// units that never ran first without a budget (Gavel's X * 1e9) gave the
// large jobs one round each in the first 10: after rounds 0 and 1 the 60
// small jobs that had not run took every GPU for 7.5 rounds.
func TestRoundsManyFreshJobsNoLever(t *testing.T) {
	p := &Problem{Types: []topology.GPUType{"a"}, Capacity: []int{8}}
	pol := fixedPolicy{}
	for id := 1; id <= 3; id++ {
		p.Jobs = append(p.Jobs, Job{ID: id, ScaleFactor: 4, Throughput: []float64{1}, Entity: fmt.Sprintf("v%d", id)})
		pol[id] = []float64{0.5}
	}
	for id := 100; id < 164; id++ {
		p.Jobs = append(p.Jobs, Job{ID: id, ScaleFactor: 1, Throughput: []float64{1}, Entity: "att"})
		pol[id] = []float64{1.0 / 32}
	}
	r := &Rounds{Policy: pol}
	runs := map[int]int{}
	small := 0
	for i := range 16 {
		rd, err := r.Next(context.Background(), p, float64(i)*360)
		require.NoError(t, err)
		require.Equal(t, i == 0, rd.Reset)
		checkRound(t, p, rd)
		for id := range jobsOf(rd) {
			if id < 100 {
				runs[id]++
			} else {
				small++
			}
		}
	}
	assert.Equal(t, map[int]int{1: 8, 2: 8, 3: 7}, runs, "the large jobs")
	for id, n := range runs {
		assert.GreaterOrEqual(t, n, 16/2-1, "job %d: its share of 8 rounds, less one", id)
	}
	assert.Equal(t, 36, small, "the small jobs' GPU-rounds")
}

// The attack of kube/admission's TestStateBoundedWhateverTenantsWrite on
// the mechanism alone: tenant "att" submits 256 jobs of 1 GPU, tenants
// "v1" to "v3" one job of 4 GPUs each, on 8 V100 under hierarchical
// water-filling with equal tenant weights. Each tenant's share is 2 GPUs:
// each victim's X is 0.5 (10 of 20 rounds), each of the 256 jobs' 1/128
// (40 GPU-rounds in all). Over 20 rounds from the reset each victim runs
// at least 9 rounds (its share less one) and the 256 at most 48 GPU-rounds
// (theirs plus one round of the cluster). Running the units that never ran
// first (Gavel's X * 1e9, this mode before #26) gave each victim 1 round:
// the 256 took every GPU until each had run once.
func TestRoundsManyJobsOneTenantHierarchical(t *testing.T) {
	p := &Problem{Types: []topology.GPUType{topology.V100}, Capacity: []int{8},
		EntityWeights: map[string]float64{"att": 1, "v1": 1, "v2": 1, "v3": 1}}
	for i := range 3 {
		p.Jobs = append(p.Jobs, Job{ID: 1 + i, ScaleFactor: 4, Throughput: []float64{1}, Entity: fmt.Sprintf("v%d", i+1)})
	}
	for id := 100; id < 356; id++ {
		p.Jobs = append(p.Jobs, Job{ID: id, ScaleFactor: 1, Throughput: []float64{1}, Entity: "att"})
	}
	r := &Rounds{Policy: &WaterFilling{Hierarchical: true}}
	const rounds = 20
	victims := map[int]int{}
	attacker := 0
	for i := range rounds {
		rd, err := r.Next(context.Background(), p, float64(i)*360)
		require.NoError(t, err)
		require.Equal(t, i == 0, rd.Reset, "round %d", i)
		checkRound(t, p, rd)
		if i == 0 {
			m := len(p.Jobs) - 1
			require.InDelta(t, 0.5, rd.Allocation.X[0][0], 1e-6, "a victim's share")
			require.InDelta(t, 1.0/128, rd.Allocation.X[m][0], 1e-6, "an attacker's job's share")
		}
		for id := range jobsOf(rd) {
			if id < 100 {
				victims[id]++
			} else {
				attacker++
			}
		}
	}
	t.Logf("victims %v, attacker %d GPU-rounds", victims, attacker)
	for id := 1; id <= 3; id++ {
		assert.GreaterOrEqual(t, victims[id], rounds/2-1, "victim %d: its share of 10 rounds, less one", id)
	}
	assert.LessOrEqual(t, attacker, 2*rounds+8, "the attacker: its 40 GPU-rounds, plus one round of the cluster")
}

// What the head start is for: a new job starts at the first round after
// the reset that gives it a share, ahead of jobs exactly as far behind as
// it. 16 jobs of 1 GPU (IDs 1 to 16) share 8 GPUs under max-min fairness
// (X = 0.5) for 10 rounds: jobs 1 to 8 in even rounds, 9 to 16 in odd ones,
// so at 3600 s each has had its share (1800 s) and no deficit. Job 17
// arrives then; the reset (due: 3600 s since the last) gives all 17 X =
// 8/17. Their lag at the middle of round 10 is 8/17 * 180 = 84.7 s each,
// the new job's 84.7 + 8/17 * 360 = 254.1 s: it runs in round 10. Without
// the head start it ties with the 16 and loses on ID in rounds 10 and 11
// (where the 8 that did not run tie with it again), starting only in
// round 12.
//
// A job of 4 GPUs arriving instead gets X = 2/17 (max-min equalises
// throughput per GPU), a share of one round in 8.5. It never ran, so it
// goes first while its entity ("", all 17 jobs) is owed GPU-time for the
// round: each 1-GPU job 8/17 * 360 = 169.4 s (its share from the reset to
// the end of round 10), job 17 4 * 2/17 * 360 = 169.4 s, 2880 GPU-s in
// all, 8 GPUs for the round; job 17 takes 4 of them: it runs in round 10,
// as with Gavel's rule. By lag alone, its 2/17 * 540 = 63.5 s (head start
// included) would lose to the others' 84.7 s, and it would start only in
// round 12. Other tenants' jobs would not be passed by more than what
// its tenant is owed (TestRoundsManyJobsOneTenantHierarchical).
func TestRoundsNewJobStartsPromptly(t *testing.T) {
	for _, tc := range []struct{ sf, first int }{{1, 10}, {4, 10}} {
		p := &Problem{Types: []topology.GPUType{"a"}, Capacity: []int{8}}
		for id := 1; id <= 16; id++ {
			p.Jobs = append(p.Jobs, Job{ID: id, ScaleFactor: 1, Throughput: []float64{1}})
		}
		r := &Rounds{Policy: &MaxMinFairness{}}
		for i := range 10 {
			rd, err := r.Next(context.Background(), p, float64(i)*360)
			require.NoError(t, err)
			got := jobsOf(rd)
			require.Len(t, got, 8, "round %d", i)
			for id := range got {
				require.Equal(t, i%2 == 0, id <= 8, "round %d: job %d", i, id)
			}
		}
		p.Jobs = append(p.Jobs, Job{ID: 17, ScaleFactor: tc.sf, Throughput: []float64{1}})
		first := -1
		for i := 10; i <= 12 && first < 0; i++ {
			rd, err := r.Next(context.Background(), p, float64(i)*360)
			require.NoError(t, err)
			require.Equal(t, i == 10, rd.Reset)
			checkRound(t, p, rd)
			if _, ok := jobsOf(rd)[17]; ok {
				first = i
			}
		}
		assert.Equal(t, tc.first, first, "scale factor %d: the new job's first round", tc.sf)
	}
}
