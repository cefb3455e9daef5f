package sim

import (
	"cmp"
	"context"
	"github.com/gpusched/gpusched/gang"
	"math"
	"slices"
	"testing"

	"github.com/gpusched/gpusched/perfmodel/gavel"
	"github.com/gpusched/gpusched/topology"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestEventFIFOByHand(t *testing.T) {
	cfg := EventConfig{Types: []topology.GPUType{"a"}, Capacity: []int{1}, Throughput: unitRates{}, Scheduler: EventFIFO{}}
	res, err := RunEvents(context.Background(), cfg, []Job{job(0, 0, 720), job(1, 0, 360)})
	require.NoError(t, err)
	assert.Equal(t, 720.0, res.Records[0].Finish)
	assert.Equal(t, 1080.0, res.Records[1].Finish)
	assert.Equal(t, 720.0, res.Records[1].Start)
	s := res.Summarise(0, 0)
	assert.InDelta(t, 900, s.MeanJCT, 1e-9)
	assert.InDelta(t, 1, s.Utilisation, 1e-9)

	// Two GPUs: a job arriving at 50 s starts at once, not at a round
	// boundary.
	cfg.Capacity = []int{2}
	res, err = RunEvents(context.Background(), cfg, []Job{job(0, 0, 100), job(1, 50, 100)})
	require.NoError(t, err)
	assert.Equal(t, 150.0, res.Records[1].Finish)
	// Busy: 1 GPU for 50 s, 2 for 50 s, 1 for 50 s, of 2 GPUs.
	assert.InDelta(t, 100.0/150, res.Summarise(0, 0).Utilisation, 1e-9)
}

func TestEventFIFOStrict(t *testing.T) {
	wide := job(1, 1, 100)
	wide.Key.ScaleFactor = 2
	jobs := []Job{job(0, 0, 100), wide, job(2, 2, 100)}
	cfg := EventConfig{Types: []topology.GPUType{"a"}, Capacity: []int{2}, Throughput: unitRates{}, Scheduler: EventFIFO{}}
	res, err := RunEvents(context.Background(), cfg, jobs)
	require.NoError(t, err)
	// Job 2 passes the 2-GPU job, which waits until both GPUs are free.
	assert.Equal(t, 2.0, res.Records[2].Start)
	assert.Equal(t, 102.0, res.Records[1].Start)
	cfg.Scheduler = EventFIFO{Strict: true}
	res, err = RunEvents(context.Background(), cfg, jobs)
	require.NoError(t, err)
	assert.Equal(t, 100.0, res.Records[1].Start)
	assert.Equal(t, 200.0, res.Records[2].Start, "blocked behind the head of the queue")
}

// srtf preempts for the job with the least remaining work, for the test.
type srtf struct{}

func (srtf) Decide(_ float64, free []int, waiting, running []JobView) (Decision, error) {
	all := append(slices.Clone(waiting), running...)
	slices.SortFunc(all, func(a, b JobView) int { return cmp.Or(cmp.Compare(a.Remaining, b.Remaining), cmp.Compare(a.ID, b.ID)) })
	capacity := free[0]
	for _, r := range running {
		capacity += r.ScaleFactor
	}
	keep := map[int]bool{}
	for _, j := range all {
		if j.ScaleFactor <= capacity {
			capacity -= j.ScaleFactor
			keep[j.ID] = true
		}
	}
	var d Decision
	for _, r := range running {
		if !keep[r.ID] {
			d.Preempt = append(d.Preempt, r.ID)
			free[0] += r.ScaleFactor
		}
	}
	for _, w := range waiting {
		if keep[w.ID] {
			d.Start = append(d.Start, Start{JobID: w.ID, Type: 0})
		}
	}
	return d, nil
}

// By hand with preemption and a 10 s restart: job 0 (1000 steps) runs from
// 0; job 1 (100 steps) arrives at 100 and preempts it (finishing at 200);
// job 0 restarts at 200, loses 10 s, and finishes its 900 steps at 1110.
func TestEventPreemption(t *testing.T) {
	cfg := EventConfig{Types: []topology.GPUType{"a"}, Capacity: []int{1}, Throughput: unitRates{}, Scheduler: srtf{}, Restart: 10}
	res, err := RunEvents(context.Background(), cfg, []Job{job(0, 0, 1000), job(1, 100, 100)})
	require.NoError(t, err)
	assert.Equal(t, 200.0, res.Records[1].Finish)
	assert.InDelta(t, 1110, res.Records[0].Finish, 1e-9)
	assert.Equal(t, 1, res.Records[0].Preemptions)
	assert.Equal(t, 2, res.Records[0].Rounds)
	assert.InDelta(t, 1010, res.Records[0].GPUSeconds[0], 1e-9)
}

type badScheduler struct{ d Decision }

func (b badScheduler) Decide(float64, []int, []JobView, []JobView) (Decision, error) { return b.d, nil }

func TestEventErrors(t *testing.T) {
	cfg := EventConfig{Types: []topology.GPUType{"a"}, Capacity: []int{1}, Throughput: unitRates{}}
	jobs := []Job{job(0, 0, 10), job(1, 0, 10)}
	for _, d := range []Decision{
		{Start: []Start{{JobID: 0, Type: 0}, {JobID: 1, Type: 0}}},
		{Start: []Start{{JobID: 7, Type: 0}}},
		{Start: []Start{{JobID: 0, Type: 3}}},
		{Preempt: []int{0}},
	} {
		cfg.Scheduler = badScheduler{d}
		_, err := RunEvents(context.Background(), cfg, jobs)
		assert.ErrorIs(t, err, ErrBadDecision, "%+v", d)
	}
	cfg.Scheduler = badScheduler{}
	_, err := RunEvents(context.Background(), cfg, jobs)
	assert.ErrorIs(t, err, ErrStalled)
}

// waker starts nothing before from, and asks to be woken then (or every
// second when from is infinite); from then on it is FIFO.
type waker struct{ from float64 }

func (w waker) Decide(now float64, free []int, waiting, running []JobView) (Decision, error) {
	if math.IsInf(w.from, 1) {
		return Decision{Wake: now + 1}, nil
	}
	if now < w.from {
		return Decision{Wake: w.from}, nil
	}
	return EventFIFO{}.Decide(now, free, waiting, running)
}

// Decision.Wake: the engine calls the scheduler again at the time it asks
// for, with no arrival or completion then; a scheduler that keeps asking
// and never starts a job ends in ErrNoProgress, not a hang.
func TestEventWake(t *testing.T) {
	cfg := EventConfig{Types: []topology.GPUType{"a"}, Capacity: []int{1}, Throughput: unitRates{}, Scheduler: waker{from: 500}}
	res, err := RunEvents(context.Background(), cfg, []Job{job(0, 0, 100), job(1, 10, 100)})
	require.NoError(t, err)
	assert.Equal(t, 500.0, res.Records[0].Start)
	assert.Equal(t, 600.0, res.Records[0].Finish)
	assert.Equal(t, 700.0, res.Records[1].Finish)
	assert.Equal(t, 5, res.Rounds, "two arrivals, the wake, two completions")

	cfg.Scheduler, cfg.MaxEvents = waker{from: math.Inf(1)}, 1000
	_, err = RunEvents(context.Background(), cfg, []Job{job(0, 0, 100)})
	assert.ErrorIs(t, err, ErrNoProgress)
}

// Every job finishes once, GPU time within capacity, with Gavel's jobs.
func TestEventInvariants(t *testing.T) {
	jobs, err := (&GavelWorkload{Rate: 40, MultiGPU: true, Seed: 2}).Generate(200)
	require.NoError(t, err)
	types := []topology.GPUType{topology.K80, topology.P100, topology.V100}
	cfg := EventConfig{Types: types, Capacity: []int{8, 8, 8}, Scheduler: EventFIFO{}}
	res, err := RunEvents(context.Background(), cfg, jobs)
	require.NoError(t, err)
	require.Len(t, res.Records, len(jobs))
	used := make([]float64, 3)
	tab := gavel.Simulation()
	for _, r := range res.Records {
		require.GreaterOrEqual(t, r.Start, r.Arrival)
		best := 0.0
		for _, gt := range types {
			v, _ := tab.Throughput(r.Key, gt)
			best = math.Max(best, v)
		}
		assert.GreaterOrEqual(t, r.JCT(), r.Steps/best*(1-1e-9))
		for k, g := range r.GPUSeconds {
			used[k] += g
		}
	}
	for k := range types {
		assert.LessOrEqual(t, used[k], 8*res.End*(1+1e-9))
	}
}

// Server-level gang admission under the event engine: with a strict
// consolidated placer every job of up to 8 GPUs runs on one server, all
// jobs finish, and no GPU is ever given twice.
func TestEventGangOnServers(t *testing.T) {
	c, err := topology.ParseCompact("v100:32:8,k80:32:4", 4)
	require.NoError(t, err)
	jobs, err := (&GavelWorkload{Rate: 60, MultiGPU: true, Seed: 4}).Generate(150)
	require.NoError(t, err)
	for i := range jobs {
		jobs[i].Steps = math.Max(1, jobs[i].Steps/10)
	}
	o := &gang.OnServers{Inner: gang.Priority{Order: gang.LAS2D{}, Backfill: gang.EASY}, Cluster: c, Placer: gang.Consolidated{Strict: true}}
	checker := &placementChecker{o: o, t: t}
	cfg := EventConfig{Types: o.Types(), Capacity: o.Capacity(), Scheduler: checker, Timer: 300}
	res, err := RunEvents(context.Background(), cfg, jobs)
	require.NoError(t, err)
	assert.Len(t, res.Records, len(jobs))
	assert.Positive(t, checker.checks)
}

// placementChecker wraps OnServers and checks its placements at every
// event.
type placementChecker struct {
	o      *gang.OnServers
	t      *testing.T
	checks int
}

func (p *placementChecker) Decide(now float64, free []int, waiting, running []JobView) (Decision, error) {
	d, err := p.o.Decide(now, free, waiting, running)
	if err != nil {
		return d, err
	}
	used := map[[2]int]int{}
	ids := []int{}
	for _, j := range running {
		ids = append(ids, j.ID)
	}
	for _, s := range d.Start {
		ids = append(ids, s.JobID)
	}
	preempted := map[int]bool{}
	for _, id := range d.Preempt {
		preempted[id] = true
	}
	for _, id := range ids {
		if preempted[id] {
			continue
		}
		set := p.o.Placement(id)
		require.NotNil(p.t, set, "job %d runs without a placement", id)
		if len(set) > 1 {
			n := 0
			for _, g := range set {
				n += len(g)
			}
			require.Greater(p.t, n, 4, "job %d of %d GPUs split though it fits a server", id, n)
		}
		for srv, gpus := range set {
			for _, g := range gpus {
				key := [2]int{srv, g}
				require.Zero(p.t, used[key], "GPU %v given twice", key)
				used[key] = id + 1
			}
		}
	}
	p.checks++
	return d, nil
}
