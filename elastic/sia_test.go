package elastic

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gpusched/gpusched/topology"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestSiaConfigs(t *testing.T) {
	assert.Equal(t, []SiaConfig{{0, 1, 1}, {0, 1, 2}, {0, 1, 4}, {0, 1, 8}, {0, 2, 16}, {0, 3, 24}, {1, 1, 1}, {1, 1, 2}, {1, 1, 4}, {1, 1, 6}, {1, 2, 12}},
		SiaConfigs([]Pool{{Nodes: 3, GPUsPerNode: 8}, {Nodes: 2, GPUsPerNode: 6}, {Nodes: 0, GPUsPerNode: 4}}))
	// Section 3.3's example: one node of 2 GPUs of A, one of 4 of B.
	assert.Equal(t, []SiaConfig{{0, 1, 1}, {0, 1, 2}, {1, 1, 1}, {1, 1, 2}, {1, 1, 4}}, SiaConfigs([]Pool{{Nodes: 1, GPUsPerNode: 2}, {Nodes: 1, GPUsPerNode: 4}}))
}

// Table 1 of the paper through the policy: curves whose goodputs are the
// table's normalised values (each row's smallest is 1), p = 1 (the sum of
// goodputs), the scale-up rule off: J1 gets (1, 4, B), J2 (1, 2, A).
func TestSiaTable1(t *testing.T) {
	pools := []Pool{{Type: "a", Nodes: 1, GPUsPerNode: 2}, {Type: "b", Nodes: 1, GPUsPerNode: 4}}
	job := func(id int, a, b Table) *Job {
		return &Job{ID: id, MinWorkers: 1, MaxWorkers: 4, GPUsPerWorker: 1, Work: 1, Curves: []Curve{a, b}}
	}
	jobs := []State{
		{Job: job(1, Table{1, 1.5}, Table{1.5, 2.5, 2.5, 3.5}), Remaining: 1},
		{Job: job(2, Table{1.2, 2.1}, Table{1, 1.9, 1.9, 3.6}), Remaining: 1},
	}
	a, err := Sia{P: 1, Growth: -1, Gap: 1e-9}.AllocateTyped(jobs, pools)
	require.NoError(t, err)
	assert.Equal(t, []Assignment{{Pool: 1, Workers: 4}, {Pool: 0, Workers: 2}}, a)
	// With Sia's defaults (p = -0.5) the same two jobs: the objective
	// minimises sum G^-0.5, which also takes J1 (1,4,B) 3.5^-0.5 + J2
	// (1,2,A) 2.1^-0.5 = 1.2246 (against 1.2676 the other way round).
	a, err = Sia{Growth: -1, Gap: 1e-9}.AllocateTyped(jobs, pools)
	require.NoError(t, err)
	assert.Equal(t, []Assignment{{Pool: 1, Workers: 4}, {Pool: 0, Workers: 2}}, a)
	// The scale-up rule: jobs that never ran start on their base demand,
	// so each takes one GPU, on the pool where that GPU is worth most.
	a, err = Sia{P: 1}.AllocateTyped(jobs, pools)
	require.NoError(t, err)
	assert.Equal(t, []Assignment{{Pool: 1, Workers: 1}, {Pool: 0, Workers: 1}}, a)
}

// The restart factor: a job running 2 workers on pool 0 (rate 1 each)
// could move to pool 1 (rate 1.3 each): at age 1,000 s with 10 restarts of
// 30 s, r = (1000 - 300) / 1030 = 0.68 makes the move worth 1.3 x 0.68 =
// 0.88 of staying, so it stays; with no restarts r = 0.97 and it moves.
func TestSiaRestartFactor(t *testing.T) {
	pools := []Pool{{Nodes: 1, GPUsPerNode: 2}, {Nodes: 1, GPUsPerNode: 2}}
	j := &Job{ID: 1, MinWorkers: 2, MaxWorkers: 2, GPUsPerWorker: 1, Work: 1, Curves: []Curve{Linear{PerWorker: 1}, Linear{PerWorker: 1.3}}}
	st := State{Job: j, Remaining: 1, Workers: 2, Pool: 0, Age: 1000, Restarts: 10, Seen: []int{2, 0}}
	a, err := Sia{}.AllocateTyped([]State{st}, pools)
	require.NoError(t, err)
	assert.Equal(t, Assignment{Pool: 0, Workers: 2}, a[0])
	st.Restarts = 0
	a, err = Sia{}.AllocateTyped([]State{st}, pools)
	require.NoError(t, err)
	assert.Equal(t, Assignment{Pool: 1, Workers: 2}, a[0])
	// The job's own restart cost is its S: with 2 restarts, S = 30 s gives
	// r = 940 / 1030 = 0.91 and the move is worth 1.19 of staying (it
	// moves); the job's 100 s give r = 800 / 1100 = 0.73, 0.95 (it stays).
	st.Restarts = 2
	a, err = Sia{}.AllocateTyped([]State{st}, pools)
	require.NoError(t, err)
	assert.Equal(t, Assignment{Pool: 1, Workers: 2}, a[0])
	j.RestartCost = 100
	a, err = Sia{}.AllocateTyped([]State{st}, pools)
	require.NoError(t, err)
	assert.Equal(t, Assignment{Pool: 0, Workers: 2}, a[0])
	j.RestartCost = 0
	// Without the factor (negative penalty) it moves in both cases.
	st.Restarts = 10
	a, err = Sia{RestartPenalty: -1}.AllocateTyped([]State{st}, pools)
	require.NoError(t, err)
	assert.Equal(t, Assignment{Pool: 1, Workers: 2}, a[0])
}

// Bootstrapping: a job profiled on one GPU of each pool, true curves
// Linear 1 (pool 0) and a table on pool 1 that scales badly.
func TestSiaBootstrap(t *testing.T) {
	j := &Job{ID: 1, MinWorkers: 1, MaxWorkers: 8, GPUsPerWorker: 1, Work: 1,
		Curves: []Curve{Table{1, 1.5, 1.5, 2, 2, 2, 2, 2.5}, Table{3, 6, 6, 12, 12, 12, 12, 24}}}
	st := State{Job: j, Remaining: 1, Seen: []int{0, 0}}
	s := Sia{}
	// Nothing seen: linear from the profiled single GPU.
	assert.Equal(t, 4.0, s.estimate(&st, 0, 4))
	assert.Equal(t, 12.0, s.estimate(&st, 1, 4))
	// Seen on 4 GPUs of pool 0: pool 0's own model; pool 1 projects pool
	// 0's scaling by the single-GPU ratio, 3 / 1 x 2.
	st.Seen = []int{4, 0}
	assert.Equal(t, 2.0, s.estimate(&st, 0, 4))
	assert.Equal(t, 6.0, s.estimate(&st, 1, 4))
	// Seen on pool 1 too: its own model.
	st.Seen = []int{4, 2}
	assert.Equal(t, 12.0, s.estimate(&st, 1, 4))
	// Oracle, or no Seen: the models.
	st.Seen = []int{0, 0}
	assert.Equal(t, 2.0, Sia{Oracle: true}.estimate(&st, 0, 4))
	st.Seen = nil
	assert.Equal(t, 12.0, s.estimate(&st, 1, 4))
}

// siaObjective is the program's objective for an assignment, from the
// paper's definitions (normalised goodputs, restart factor, power p,
// penalty lambda), computed here independently of the policy's code.
func siaObjective(jobs []State, pools []Pool, a []Assignment, p, lambda, penalty float64) float64 {
	obj := 0.0
	for i, s := range jobs {
		if a[i].Workers == 0 {
			obj -= lambda
			continue
		}
		least := math.Inf(1)
		for _, c := range SiaConfigs(pools) {
			w := c.GPUs / s.GPUsPerWorker
			if c.GPUs%s.GPUsPerWorker == 0 && w >= s.MinWorkers && w <= s.MaxWorkers && s.On(c.Pool) != nil {
				least = math.Min(least, s.On(c.Pool).Throughput(w))
			}
		}
		g := s.On(a[i].Pool).Throughput(a[i].Workers) / least * float64(s.MinWorkers*s.GPUsPerWorker)
		if s.Workers > 0 && s.Age >= penalty && (a[i].Pool != s.Pool || a[i].Workers != s.Workers) {
			g *= math.Max(s.Age-float64(s.Restarts)*penalty, 0) / (s.Age + penalty)
		}
		if p < 0 {
			obj -= math.Pow(g, p)
		} else {
			obj += math.Pow(g, p)
		}
	}
	return obj
}

// On 200 random tiny clusters (2 pools of 1 to 2 nodes of 2 or 4 GPUs)
// with 1 to 3 jobs (some running, with restarts), Sia's choice is worth
// as much as the best of every assignment of configurations enumerated.
func TestSiaMatchesEnumeration(t *testing.T) {
	rng := rand.New(rand.NewPCG(29, 4))
	for trial := range 200 {
		pools := []Pool{{Type: topology.T4, Nodes: 1 + rng.IntN(2), GPUsPerNode: 2 << rng.IntN(2)}, {Type: topology.A100, Nodes: 1 + rng.IntN(2), GPUsPerNode: 2 << rng.IntN(2)}}
		var jobs []State
		used := []int{0, 0}
		for id := range 1 + rng.IntN(3) {
			var curves []Curve
			for range pools {
				t := make(Table, 16)
				x := 0.5 + rng.Float64()
				for w := range t {
					t[w] = x * math.Pow(float64(w+1), 0.4+0.5*rng.Float64())
				}
				curves = append(curves, t)
			}
			j := &Job{ID: id, MinWorkers: 1 + rng.IntN(2), MaxWorkers: 16, GPUsPerWorker: 1, Work: 1, Curves: curves}
			st := State{Job: j, Remaining: 1, Age: 100 + 1000*rng.Float64(), Restarts: rng.IntN(5)}
			k := rng.IntN(2)
			if w := j.MinWorkers; rng.IntN(2) == 0 && used[k]+w <= pools[k].GPUs() {
				st.Workers, st.Pool = w, k
				used[k] += w
			}
			jobs = append(jobs, st)
		}
		pol := Sia{Growth: -1, Gap: 1e-12, Oracle: true}
		a, err := pol.AllocateTyped(jobs, pools)
		require.NoError(t, err, "trial %d", trial)
		got := siaObjective(jobs, pools, a, -0.5, 1.1, 30)
		// Enumerate: each job none or any configuration.
		best := math.Inf(-1)
		cur := make([]Assignment, len(jobs))
		var rec func(i int, used []int)
		rec = func(i int, used []int) {
			if i == len(jobs) {
				best = math.Max(best, siaObjective(jobs, pools, cur, -0.5, 1.1, 30))
				return
			}
			cur[i] = Assignment{}
			rec(i+1, used)
			for _, c := range SiaConfigs(pools) {
				w := c.GPUs
				if w < jobs[i].MinWorkers || used[c.Pool]+c.GPUs > pools[c.Pool].GPUs() {
					continue
				}
				cur[i] = Assignment{Pool: c.Pool, Workers: w}
				used[c.Pool] += c.GPUs
				rec(i+1, used)
				used[c.Pool] -= c.GPUs
			}
			cur[i] = Assignment{}
		}
		rec(0, []int{0, 0})
		require.InDelta(t, best, got, 1e-9, "trial %d", trial)
	}
}

// Lambda against scaling, by hand: eight identical jobs that scale
// linearly, on eight GPUs. All on one GPU costs 8 x 1^-0.5 = 8; four on two
// GPUs and four left without cost 4 x 2^-0.5 + 4 lambda, which is less
// (7.23) with Sia's lambda of 1.1, so half the jobs wait; with lambda 1.5
// (8.83) every job runs on one GPU.
func TestSiaLambda(t *testing.T) {
	pools := []Pool{{Nodes: 1, GPUsPerNode: 4}, {Nodes: 1, GPUsPerNode: 4}}
	var jobs []State
	for i := range 8 {
		j := &Job{ID: i, MinWorkers: 1, MaxWorkers: 8, GPUsPerWorker: 1, Work: 1, Curve: Linear{PerWorker: 1}}
		jobs = append(jobs, State{Job: j, Remaining: 1, Workers: 1, Pool: i % 2, Age: 10, Seen: []int{1, 1}})
	}
	count := func(a []Assignment) (n [3]int) {
		for _, x := range a {
			n[x.Workers]++
		}
		return n
	}
	a, err := Sia{}.AllocateTyped(jobs, pools)
	require.NoError(t, err)
	assert.Equal(t, [3]int{4, 0, 4}, count(a))
	assert.InDelta(t, -(4*math.Sqrt(0.5) + 4*1.1), siaObjective(jobs, pools, a, -0.5, 1.1, 30), 1e-12)
	a, err = Sia{Lambda: 1.5}.AllocateTyped(jobs, pools)
	require.NoError(t, err)
	assert.Equal(t, [3]int{0, 8, 0}, count(a))
}

func TestSiaErrors(t *testing.T) {
	pools := []Pool{{Nodes: 1, GPUsPerNode: 2}}
	jobs := []State{{Job: &Job{ID: 1, MinWorkers: 1, MaxWorkers: 1, GPUsPerWorker: 1, Work: 1, Curve: Linear{PerWorker: 1}}, Remaining: 1}}
	bad := *jobs[0].Job
	bad.RestartCost = -1
	_, err := Sia{}.AllocateTyped([]State{{Job: &bad, Remaining: 1}}, pools)
	assert.ErrorIs(t, err, ErrInvalid, "negative restart cost")
	for _, s := range []Sia{{P: math.NaN()}, {Lambda: -1}, {Gap: math.Inf(1)}, {Growth: 0.5}, {MaxNodes: -1}} {
		_, err := s.AllocateTyped(jobs, pools)
		assert.ErrorIs(t, err, ErrInvalid, "%+v", s)
	}
	_, err = Sia{}.AllocateTyped(jobs, nil)
	assert.ErrorIs(t, err, ErrInvalid)
	// A program too large to build is refused, not built: two jobs of up to
	// a million workers, no scale-up rule, on 700,000 one-GPU nodes.
	huge := []Pool{{Nodes: 700000, GPUsPerNode: 1}}
	var big []State
	for id := range 2 {
		big = append(big, State{Job: &Job{ID: id, MinWorkers: 1, MaxWorkers: MaxWorkers, GPUsPerWorker: 1, Work: 1, Curve: Linear{PerWorker: 1}}, Remaining: 1})
	}
	_, err = Sia{Growth: -1}.AllocateTyped(big, huge)
	assert.ErrorIs(t, err, ErrInvalid)
	a, err := Sia{}.AllocateTyped(nil, pools)
	require.NoError(t, err)
	assert.Empty(t, a)
}
