package elastic

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func linearJob(id, wMin, wMax int, work float64) *Job {
	return &Job{ID: id, MinWorkers: wMin, MaxWorkers: wMax, GPUsPerWorker: 1, Work: work, Curve: Linear{PerWorker: 1}}
}

func states(jobs ...*Job) []State {
	out := make([]State, len(jobs))
	for i, j := range jobs {
		out[i] = State{Job: j, Remaining: j.Work}
	}
	return out
}

// Lyra's worked example inside the policy: the elastic job (w_min 2,
// w_max 6, T_min 20, so 120 units of work at 1 per worker) and an
// inelastic 2-worker job on 8 GPUs. Phase 1 gives 2 + 2; phase 2 puts the
// 4 spare GPUs on the elastic job (saving 40).
func TestLyraWorkedExample(t *testing.T) {
	jobs := states(linearJob(1, 2, 6, 120), linearJob(2, 2, 2, 50))
	w, err := Lyra{}.Allocate(jobs, 8)
	require.NoError(t, err)
	assert.Equal(t, []int{6, 2}, w)
	// 6 GPUs: phase 1 the same, 2 spare -> 2 extra workers.
	w, err = Lyra{}.Allocate(jobs, 6)
	require.NoError(t, err)
	assert.Equal(t, []int{4, 2}, w)
	// 3 GPUs: SJF admits the shorter job (50 / 2 = 25 s < 60 s) first,
	// and the elastic job's base demand no longer fits.
	w, err = Lyra{}.Allocate(jobs, 3)
	require.NoError(t, err)
	assert.Equal(t, []int{0, 2}, w)
}

// Phase 2 against brute force: the extra workers Lyra hands out save as
// much time as the best split of the spare GPUs.
func TestLyraPhase2BruteForce(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for trial := 0; trial < 200; trial++ {
		n := 1 + rng.IntN(4)
		var jobs []*Job
		gpus := 0
		for i := 0; i < n; i++ {
			wMin := 1 + rng.IntN(2)
			j := linearJob(i, wMin, wMin+rng.IntN(4), 10+rng.Float64()*100)
			j.GPUsPerWorker = 1 + rng.IntN(2)
			// A concave measured curve half the time.
			if rng.IntN(2) == 0 {
				tab := make(Table, j.MaxWorkers)
				for w := range tab {
					tab[w] = math.Sqrt(float64(w + 1))
				}
				j.Curve = tab
			}
			gpus += j.MinWorkers * j.GPUsPerWorker
			jobs = append(jobs, j)
		}
		spare := rng.IntN(8)
		st := states(jobs...)
		w, err := Lyra{}.Allocate(st, gpus+spare)
		require.NoError(t, err)
		saved := func(w []int) (float64, bool) {
			s, used := 0.0, 0
			for i := range st {
				if w[i] < st[i].MinWorkers || w[i] > st[i].MaxWorkers {
					return 0, false
				}
				used += w[i] * st[i].GPUsPerWorker
				s += st[i].Time(st[i].MinWorkers) - st[i].Time(w[i])
			}
			return s, used <= gpus+spare
		}
		got, ok := saved(w)
		require.True(t, ok, "trial %d: %v", trial, w)
		best := 0.0
		cur := make([]int, n)
		var rec func(i int)
		rec = func(i int) {
			if i == n {
				if s, ok := saved(cur); ok && s > best {
					best = s
				}
				return
			}
			for k := st[i].MinWorkers; k <= st[i].MaxWorkers; k++ {
				cur[i] = k
				rec(i + 1)
			}
		}
		rec(0)
		assert.InDelta(t, best, got, 1e-9, "trial %d", trial)
	}
}

// Optimus: X (100 units) and Y (10 units), 1 to 4 workers, 4 GPUs. Both
// start on one; the cuts are X 50 then 16.7, Y 5, so X takes both spares.
// AFS: relative gains tie at 1 and go to Y first (less time left), then
// X's gain 1 beats Y's 1/2.
func TestGreedyByHand(t *testing.T) {
	jobs := states(linearJob(1, 1, 4, 100), linearJob(2, 1, 4, 10))
	w, err := Optimus{}.Allocate(jobs, 4)
	require.NoError(t, err)
	assert.Equal(t, []int{3, 1}, w)
	w, err = AFS{}.Allocate(jobs, 4)
	require.NoError(t, err)
	assert.Equal(t, []int{2, 2}, w)
	// FIFO never scales: base demands only.
	w, err = FIFO{}.Allocate(jobs, 4)
	require.NoError(t, err)
	assert.Equal(t, []int{1, 1}, w)
}

// FIFO with and without head-of-line blocking, and running jobs kept.
func TestFIFO(t *testing.T) {
	a, b, c := linearJob(1, 4, 4, 10), linearJob(2, 6, 6, 10), linearJob(3, 2, 2, 10)
	a.Arrival, b.Arrival, c.Arrival = 0, 1, 2
	jobs := states(a, b, c)
	w, err := FIFO{Strict: true}.Allocate(jobs, 8)
	require.NoError(t, err)
	assert.Equal(t, []int{4, 0, 0}, w)
	w, err = FIFO{}.Allocate(jobs, 8)
	require.NoError(t, err)
	assert.Equal(t, []int{4, 0, 2}, w)
	// b already runs: it keeps its GPUs ahead of earlier queued a.
	jobs[1].Workers = 6
	w, err = FIFO{}.Allocate(jobs, 8)
	require.NoError(t, err)
	assert.Equal(t, []int{0, 6, 2}, w)
	// Running base demands beyond the GPUs are an error, not a silent drop.
	_, err = FIFO{}.Allocate(jobs, 5)
	assert.ErrorIs(t, err, ErrInvalid)
}

// Invariants on random instances for every policy: capacity never
// exceeded, bounds respected, running jobs keep at least their base.
func TestPoliciesInvariants(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	policies := map[string]Policy{"fifo": FIFO{}, "lyra": Lyra{}, "afs": AFS{}, "optimus": Optimus{}, "lyra-fifo": Lyra{Admission: ArrivalOrder}}
	for trial := 0; trial < 300; trial++ {
		n := 1 + rng.IntN(12)
		var jobs []*Job
		for i := 0; i < n; i++ {
			wMin := 1 + rng.IntN(4)
			j := linearJob(i, wMin, wMin+rng.IntN(5), 1+rng.Float64()*1000)
			j.GPUsPerWorker = 1 + rng.IntN(3)
			j.Arrival = rng.Float64() * 100
			jobs = append(jobs, j)
		}
		st := states(jobs...)
		gpus := rng.IntN(40)
		used := 0
		for i := range st {
			if g := st[i].MinWorkers * st[i].GPUsPerWorker; rng.IntN(3) == 0 && used+g <= gpus {
				st[i].Workers = st[i].MinWorkers
				used += g
			}
		}
		for name, p := range policies {
			w, err := p.Allocate(st, gpus)
			require.NoError(t, err, name)
			total := 0
			for i, x := range w {
				total += x * st[i].GPUsPerWorker
				if x != 0 {
					assert.True(t, x >= st[i].MinWorkers && x <= st[i].MaxWorkers, "%s: job %d gets %d", name, i, x)
				}
				if st[i].Workers > 0 {
					assert.GreaterOrEqual(t, x, st[i].MinWorkers, "%s: running job %d dropped", name, i)
				}
			}
			assert.LessOrEqual(t, total, gpus, name)
		}
	}
}

func TestJobValidate(t *testing.T) {
	good := linearJob(1, 1, 2, 10)
	require.NoError(t, good.Validate())
	for _, bad := range []Job{
		{ID: 1, MinWorkers: 0, MaxWorkers: 2, GPUsPerWorker: 1, Work: 1, Curve: Linear{1}},
		{ID: 1, MinWorkers: 3, MaxWorkers: 2, GPUsPerWorker: 1, Work: 1, Curve: Linear{1}},
		{ID: 1, MinWorkers: 1, MaxWorkers: 2, GPUsPerWorker: 0, Work: 1, Curve: Linear{1}},
		{ID: 1, MinWorkers: 1, MaxWorkers: 2, GPUsPerWorker: 1, Work: math.Inf(1), Curve: Linear{1}},
		{ID: 1, MinWorkers: 1, MaxWorkers: 2, GPUsPerWorker: 1, Work: 1},
		{ID: 1, MinWorkers: 1, MaxWorkers: 2, GPUsPerWorker: 1, Work: 1, Curve: Linear{0}},
		{ID: 1, MinWorkers: 1, MaxWorkers: 3, GPUsPerWorker: 1, Work: 1, Curve: Table{1, 2}},
	} {
		if bad.MaxWorkers == 3 {
			// A table shorter than the range holds its last value: valid.
			assert.NoError(t, bad.Validate())
			continue
		}
		assert.ErrorIs(t, bad.Validate(), ErrInvalid, "%+v", bad)
	}
	_, err := Lyra{}.Allocate([]State{{Job: good, Remaining: 0}}, 4)
	assert.ErrorIs(t, err, ErrInvalid)
	_, err = Lyra{}.Allocate(nil, -1)
	assert.ErrorIs(t, err, ErrInvalid)
	tab, err := NewTable(3, func(w int) (float64, error) { return float64(w) * 2, nil })
	require.NoError(t, err)
	assert.Equal(t, Table{2, 4, 6}, tab)
	assert.Equal(t, 6.0, tab.Throughput(5))
	assert.Equal(t, 0.0, tab.Throughput(0))
	_, err = NewTable(2, func(w int) (float64, error) { return float64(w - 1), nil })
	assert.ErrorIs(t, err, ErrInvalid)
}

// Under linear scaling the time saved per extra worker falls, so
// Optimus's greedy equals Lyra's knapsack; on a curve with a step (no gain
// from a second worker, a large one from a third) the greedy stops and the
// knapsack does not: Optimus leaves the job at 1 worker, Lyra gives it 3.
func TestLyraBeatsGreedyOnStepCurve(t *testing.T) {
	j := &Job{ID: 1, MinWorkers: 1, MaxWorkers: 3, GPUsPerWorker: 1, Work: 12, Curve: Table{1, 1, 4}}
	jobs := states(j)
	w, err := Optimus{}.Allocate(jobs, 3)
	require.NoError(t, err)
	assert.Equal(t, []int{1}, w)
	w, err = Lyra{}.Allocate(jobs, 3)
	require.NoError(t, err)
	assert.Equal(t, []int{3}, w)
}

// benchJobs: n jobs, half elastic (base 1 to 8, up to 4x), a third
// running, on a cluster with gpus GPUs; concave tabled curves.
func benchJobs(n, gpus int) []State {
	rng := rand.New(rand.NewPCG(21, 22))
	st := make([]State, n)
	used := 0
	for i := range st {
		lo := 1 + rng.IntN(8)
		hi := lo
		if i%2 == 0 {
			hi = lo * 4
		}
		tab := make(Table, hi)
		for k := range tab {
			tab[k] = math.Sqrt(float64(k+1)) * (1 + rng.Float64())
		}
		j := &Job{ID: i, Arrival: float64(i), MinWorkers: lo, MaxWorkers: hi, GPUsPerWorker: 1, Work: 1000 + rng.Float64()*1e5, Curve: tab}
		st[i] = State{Job: j, Remaining: j.Work, Age: 600}
		if i%3 == 0 && used+lo <= gpus/2 {
			st[i].Workers = lo
			used += lo
		}
	}
	return st
}

// Allocation at the scale of a large cluster: 1,000 jobs (4,500 GPUs of
// base demand) on 8,192 GPUs, so that 3,700 GPUs are shared out.
func BenchmarkPolicies1000Jobs8192GPUs(b *testing.B) {
	st := benchJobs(1000, 8192)
	for _, p := range []struct {
		name string
		p    Policy
	}{{"FIFO", FIFO{}}, {"Lyra", Lyra{}}, {"AFS", AFS{}}, {"Optimus", Optimus{}}, {"Pollux", Pollux{}}} {
		b.Run(p.name, func(b *testing.B) {
			for b.Loop() {
				if _, err := p.p.Allocate(st, 8192); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
