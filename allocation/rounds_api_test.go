package allocation

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/gpusched/gpusched/perfmodel/gavel"
	"github.com/gpusched/gpusched/topology"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fixedPolicy gives each job (by ID) fixed shares; others get nothing.
type fixedPolicy map[int][]float64

func (f fixedPolicy) Allocate(_ context.Context, p *Problem) (*Allocation, error) {
	a := newAllocation(p)
	for m := range p.Jobs {
		if x, ok := f[p.Jobs[m].ID]; ok {
			copy(a.X[m], x)
		}
	}
	return a, nil
}

func jobsOf(rd *Round) map[int]topology.GPUType {
	out := map[int]topology.GPUType{}
	for _, as := range rd.Assignments {
		for _, id := range as.JobIDs {
			out[id] = as.Type
		}
	}
	return out
}

// gavelJobs returns n single-GPU jobs of Gavel's table on types in the
// given order, rates looked up in Gavel's simulation table.
func gavelJobs(t *testing.T, types []topology.GPUType, n int) []Job {
	t.Helper()
	tab := gavel.Simulation()
	var keys []Job
	m := 0
	for _, k := range tab.Jobs() {
		if k.ScaleFactor != 1 || m == n {
			continue
		}
		j := Job{ID: m, ScaleFactor: 1, Throughput: make([]float64, len(types)), RemainingSteps: 1e5}
		for i, gt := range types {
			v, err := tab.Throughput(k, gt)
			require.NoError(t, err)
			j.Throughput[i] = v
		}
		keys = append(keys, j)
		m++
	}
	return keys
}

// Types are visited fastest first whatever their order in the problem: on
// Gavel's table V100, P100, K80; TypeOrder overrides.
func TestRoundsTypeOrder(t *testing.T) {
	types := []topology.GPUType{topology.K80, topology.P100, topology.V100}
	p := &Problem{Types: types, Capacity: []int{4, 4, 4}, Jobs: gavelJobs(t, types, 26)}
	r := &Rounds{}
	assert.Equal(t, []int{2, 1, 0}, r.baseOrder(p))
	r.TypeOrder = []topology.GPUType{topology.P100}
	assert.Equal(t, []int{1, 2, 0}, r.baseOrder(p))
	r.TypeOrder = []topology.GPUType{topology.K80, "a100", topology.V100}
	assert.Equal(t, []int{0, 2, 1}, r.baseOrder(p), "unknown types are ignored")
	r = &Rounds{Policy: &MaxMinFairness{}, Mechanism: Mechanism{TypeOrder: []topology.GPUType{topology.K80, topology.K80}}}
	_, err := r.Next(context.Background(), p, 0)
	assert.ErrorIs(t, err, ErrInvalidProblem)
	// Gavel's compatible mode: v100, p100, k80 whatever the rates.
	assert.Equal(t, []int{2, 1, 0}, (&Rounds{Mechanism: Mechanism{Compat: CompatGavel}}).baseOrder(&Problem{Types: types, Capacity: []int{1, 1, 1}}))
}

// Issue #17's case: demand below capacity on K80 + P100 + V100 (types
// sorted by name). The fastest type fills first, and the mechanism is
// work-conserving: no job waits while a type has room for it.
func TestRoundsFastestFirstAndWorkConserving(t *testing.T) {
	types := []topology.GPUType{topology.K80, topology.P100, topology.V100}
	p := &Problem{Types: types, Capacity: []int{12, 12, 12}, Jobs: gavelJobs(t, types, 26)}
	r := &Rounds{Policy: &MaxMinFairness{}}
	for i := range 10 {
		rd, err := r.Next(context.Background(), p, float64(i)*360)
		require.NoError(t, err)
		checkRound(t, p, rd)
		ran := jobsOf(rd)
		free := []int{12, 12, 12}
		for _, as := range rd.Assignments {
			free[as.TypeIndex] -= len(as.Workers)
		}
		assert.Zero(t, free[2], "round %d: every V100 busy", i)
		for m := range p.Jobs {
			if _, ok := ran[p.Jobs[m].ID]; ok {
				continue
			}
			for k := range types {
				assert.False(t, free[k] > 0 && p.Jobs[m].Throughput[k] > 0, "round %d: job %d waits while %s has room", i, p.Jobs[m].ID, types[k])
			}
		}
	}
}

// Jobs without a share take GPUs the priority pass left, unless LeaveIdle.
func TestRoundsLeaveIdle(t *testing.T) {
	p := &Problem{Types: []topology.GPUType{"a"}, Capacity: []int{3}, Jobs: []Job{
		{ID: 1, ScaleFactor: 1, Throughput: []float64{1}},
		{ID: 2, ScaleFactor: 1, Throughput: []float64{1}},
		{ID: 3, ScaleFactor: 2, Throughput: []float64{1}},
		{ID: 4, ScaleFactor: 1, Throughput: []float64{0}},
	}}
	pol := fixedPolicy{1: {1}}
	rd, err := (&Rounds{Policy: pol}).Next(context.Background(), p, 0)
	require.NoError(t, err)
	assert.Equal(t, map[int]topology.GPUType{1: "a", 2: "a"}, jobsOf(rd), "job 3 does not fit, job 4 has no rate")
	rd, err = (&Rounds{Policy: pol, Mechanism: Mechanism{LeaveIdle: true}}).Next(context.Background(), p, 0)
	require.NoError(t, err)
	assert.Equal(t, map[int]topology.GPUType{1: "a"}, jobsOf(rd))
}

func TestRoundsReport(t *testing.T) {
	p := &Problem{Types: []topology.GPUType{"a", "b"}, Capacity: []int{1, 1}, Jobs: []Job{
		{ID: 1, ScaleFactor: 1, Throughput: []float64{1, 1}},
		{ID: 2, ScaleFactor: 1, Throughput: []float64{1, 1}},
	}}
	r := &Rounds{Policy: fixedPolicy{1: {0.5, 0.5}, 2: {0.5, 0.5}}}
	ctx := context.Background()
	assert.ErrorIs(t, r.Report(RoundReport{}), ErrInvalidReport, "no round yet")
	rd, err := r.Next(ctx, p, 0)
	require.NoError(t, err)
	require.Len(t, rd.Assignments, 2)
	st1, st2 := r.st.units[unit{1, -1}], r.st.units[unit{2, -1}]
	assert.Equal(t, []float64{0, 0}, st1.received, "nothing received yet")

	bad := []RoundReport{
		{Start: 1},
		{Start: 0, Ran: []UnitRun{{JobIDs: []int{9}, Type: "a", Seconds: 1}}},
		{Start: 0, Ran: []UnitRun{{JobIDs: []int{1}, Type: "c", Seconds: 1}}},
		{Start: 0, Ran: []UnitRun{{JobIDs: []int{1}, Type: "a", Seconds: -1}}},
		{Start: 0, Ran: []UnitRun{{JobIDs: []int{1, 1}, Type: "a", Seconds: 1}}},
		{Start: 0, Ran: []UnitRun{{JobIDs: nil, Type: "a", Seconds: 1}}},
	}
	for i, rep := range bad {
		assert.ErrorIs(t, r.Report(rep), ErrInvalidReport, "report %d", i)
	}
	assert.Equal(t, []float64{0, 0}, st1.received, "a bad report credits nothing")
	// Job 1 ran 100 s; job 2 failed to start.
	require.NoError(t, r.Report(RoundReport{Start: 0, Ran: []UnitRun{{JobIDs: []int{1}, Type: jobsOf(rd)[1], Seconds: 100}}}))
	assert.ErrorIs(t, r.Report(RoundReport{Start: 0}), ErrInvalidReport, "twice")
	k1 := 0
	if jobsOf(rd)[1] == "b" {
		k1 = 1
	}
	assert.InDelta(t, 100, st1.received[k1], 1e-9)
	assert.Equal(t, []float64{0, 0}, st2.received)
	// Not reported: credited in full at the next call (up to a round).
	rd, err = r.Next(ctx, p, 360)
	require.NoError(t, err)
	_, err = r.Next(ctx, p, 1000)
	require.NoError(t, err)
	for id, typ := range jobsOf(rd) {
		k := 0
		if typ == "b" {
			k = 1
		}
		st := r.st.units[unit{id, -1}]
		want := 360.0
		if id == 1 && k == k1 {
			want += 100
		}
		assert.InDelta(t, want, st.received[k], 1e-9, "job %d on %s", id, typ)
	}
}

// A change of capacity re-solves at once, whatever MinResetInterval says.
func TestRoundsCapacityChange(t *testing.T) {
	p := &Problem{Types: []topology.GPUType{"a"}, Capacity: []int{2}, Jobs: []Job{
		{ID: 1, ScaleFactor: 1, Throughput: []float64{1}},
		{ID: 2, ScaleFactor: 1, Throughput: []float64{2}},
	}}
	r := &Rounds{Policy: &MaxMinFairness{}}
	ctx := context.Background()
	rd, err := r.Next(ctx, p, 0)
	require.NoError(t, err)
	assert.True(t, rd.Reset)
	assert.Positive(t, rd.Stats.SolveTime)
	require.NotNil(t, rd.Stats.LP)
	assert.Equal(t, 1, rd.Stats.LP.Solves)
	rd, err = r.Next(ctx, p, 360)
	require.NoError(t, err)
	assert.False(t, rd.Reset)
	assert.Zero(t, rd.Stats.SolveTime)
	p.Capacity = []int{1}
	rd, err = r.Next(ctx, p, 720)
	require.NoError(t, err)
	assert.True(t, rd.Reset, "capacity changed")
	assert.Len(t, rd.Assignments, 1)
	p.Types = []topology.GPUType{"b"}
	rd, err = r.Next(ctx, p, 1080)
	require.NoError(t, err)
	assert.True(t, rd.Reset, "types changed")
	r.ForceReset()
	rd, err = r.Next(ctx, p, 1440)
	require.NoError(t, err)
	assert.True(t, rd.Reset, "forced")
}

// A policy that returns an allocation of the wrong shape is an error, not a
// panic.
func TestRoundsBadPolicy(t *testing.T) {
	p := &Problem{Types: []topology.GPUType{"a"}, Capacity: []int{2}, Jobs: []Job{{ID: 1, ScaleFactor: 1, Throughput: []float64{1}}}}
	for _, pol := range []Policy{shapePolicy(func(a *Allocation) *Allocation { return nil }),
		shapePolicy(func(a *Allocation) *Allocation { a.X = nil; return a }),
		shapePolicy(func(a *Allocation) *Allocation { a.X[0] = nil; return a }),
		shapePolicy(func(a *Allocation) *Allocation { a.Pairs = []Pair{{A: 0, B: 3, X: []float64{1}}}; return a }),
	} {
		_, err := (&Rounds{Policy: pol}).Next(context.Background(), p, 0)
		assert.ErrorIs(t, err, ErrInvalidAllocation)
	}
}

type shapePolicy func(*Allocation) *Allocation

func (f shapePolicy) Allocate(_ context.Context, p *Problem) (*Allocation, error) {
	return f(newAllocation(p)), nil
}

// changing returns the problem of round i: job m is present from round
// m/3 to round m/3 + 12.
func changing(base *Problem, i int) *Problem {
	p := *base
	p.Jobs = nil
	for m, j := range base.Jobs {
		if m/3 <= i && i < m/3+12 {
			p.Jobs = append(p.Jobs, j)
		}
	}
	return &p
}

// A Rounds restored from a snapshot taken after round k gives the same
// rounds k+1..N as one never stopped, in both modes, with reports, resets,
// shuffles and space sharing.
func TestRoundsSnapshotRestore(t *testing.T) {
	base, _ := gavelProblem(t, 4, 48)
	for _, tc := range []struct {
		name string
		make func() *Rounds
	}{
		{"native", func() *Rounds {
			return &Rounds{Policy: &MaxMinFairness{SpaceSharing: true}, Mechanism: Mechanism{ShuffleTypes: true, Seed: 3, MinResetInterval: 700}}
		}},
		{"global", func() *Rounds {
			return &Rounds{Policy: &MaxMinFairness{}, Mechanism: Mechanism{GlobalQueue: true, Seed: 3}}
		}},
		{"gavel", func() *Rounds {
			return &Rounds{Policy: &MaxMinFairness{SpaceSharing: true}, Mechanism: Mechanism{ShuffleTypes: true, Seed: 3, Compat: CompatGavel, MinResetInterval: 700}}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const n, k = 30, 13
			ctx := context.Background()
			step := func(r *Rounds, i int) *Round {
				rd, err := r.Next(ctx, changing(base, i), float64(i)*360+50)
				require.NoError(t, err)
				if i%3 == 0 { // report every third round: the first unit ran half
					rep := RoundReport{Start: rd.Start}
					for j, as := range rd.Assignments {
						s := rd.Length
						if j == 0 {
							s /= 2
						}
						rep.Ran = append(rep.Ran, UnitRun{JobIDs: as.JobIDs, Type: as.Type, Seconds: s})
					}
					require.NoError(t, r.Report(rep))
				}
				rd.Stats.SolveTime = 0
				return rd
			}
			ref := tc.make()
			var want []*Round
			for i := range n {
				want = append(want, step(ref, i))
			}
			r := tc.make()
			for i := range k {
				step(r, i)
			}
			data, err := r.Snapshot()
			require.NoError(t, err)
			require.True(t, json.Valid(data))
			restored := tc.make()
			require.NoError(t, restored.Restore(data))
			again, err := restored.Snapshot()
			require.NoError(t, err)
			assert.JSONEq(t, string(data), string(again))
			resets := 0
			for i := k; i < n; i++ {
				got := step(restored, i)
				require.Equal(t, want[i], got, "round %d", i)
				if got.Reset {
					resets++
				}
			}
			assert.Positive(t, resets, "the comparison covers resets")
		})
	}
}

func TestRoundsRestoreErrors(t *testing.T) {
	r := &Rounds{Policy: &MaxMinFairness{}}
	p := &Problem{Types: []topology.GPUType{"a", "b"}, Capacity: []int{1, 1}, Jobs: []Job{{ID: 1, ScaleFactor: 1, Throughput: []float64{1, 2}}}}
	_, err := r.Next(context.Background(), p, 0)
	require.NoError(t, err)
	good, err := r.Snapshot()
	require.NoError(t, err)
	mutate := func(f func(m map[string]any)) []byte {
		var m map[string]any
		require.NoError(t, json.Unmarshal(good, &m))
		f(m)
		b, err := json.Marshal(m)
		require.NoError(t, err)
		return b
	}
	for name, data := range map[string][]byte{
		"not json":   []byte("{"),
		"version":    mutate(func(m map[string]any) { m["version"] = 2 }),
		"compat":     mutate(func(m map[string]any) { m["compat"] = "gavel" }),
		"capacity":   mutate(func(m map[string]any) { m["capacity"] = []int{1} }),
		"order":      mutate(func(m map[string]any) { m["order"] = []int{5} }),
		"unit":       mutate(func(m map[string]any) { m["units"] = []any{map[string]any{"job_ids": []int{1}, "x": []float64{1}}} }),
		"unit jobs":  mutate(func(m map[string]any) { m["units"] = []any{map[string]any{"job_ids": []int{}}} }),
		"allocation": mutate(func(m map[string]any) { m["allocation"].(map[string]any)["X"] = []any{[]float64{1}} }),
		"rng":        mutate(func(m map[string]any) { m["pcg"] = "AAAA" }),
		"python rng": mutate(func(m map[string]any) { m["python_rng"] = map[string]any{"mt": []int{1}} }),
		"last round": mutate(func(m map[string]any) {
			m["last_round"].(map[string]any)["Assignments"] = []any{map[string]any{"JobIDs": []int{1}, "TypeIndex": 7}}
		}),
	} {
		fresh := &Rounds{Policy: &MaxMinFairness{}}
		assert.ErrorIs(t, fresh.Restore(data), ErrInvalidSnapshot, name)
		assert.False(t, fresh.st.started, "%s: state unchanged", name)
	}
	require.NoError(t, (&Rounds{}).Restore(good))
}

// Right after a reset priorities follow X: a tiny share does not win a
// full round at every reset (as it would if the counters were seeded with
// X times half a round, which ties every share).
func TestRoundsTinyShareAfterReset(t *testing.T) {
	p := &Problem{Types: []topology.GPUType{"a"}, Capacity: []int{1}, Jobs: []Job{
		{ID: 1, ScaleFactor: 1, Throughput: []float64{1}},
		{ID: 2, ScaleFactor: 1, Throughput: []float64{1}},
	}}
	r := &Rounds{Policy: fixedPolicy{1: {0.99}, 2: {0.01}}}
	runs := 0
	for i := range 200 {
		if i%5 == 0 {
			r.ForceReset()
		}
		rd, err := r.Next(context.Background(), p, float64(i)*360)
		require.NoError(t, err)
		if _, ok := jobsOf(rd)[2]; ok {
			runs++
		}
	}
	assert.LessOrEqual(t, runs, 6, "1%% of 200 rounds, give or take the first")
	assert.Positive(t, runs)
}

// A job of 8 GPUs among 1-GPU jobs gets its share of rounds (under max-min
// fairness its share of time is an eighth of theirs). Gavel's priorities,
// seeded with half a round at every reset, keep it waiting while resets
// come every few rounds; our lags do not.
func TestRoundsWideJobNotStarved(t *testing.T) {
	p := &Problem{Types: []topology.GPUType{"a"}, Capacity: []int{8}}
	for m := range 24 {
		p.Jobs = append(p.Jobs, Job{ID: m, ScaleFactor: 1, Throughput: []float64{1}})
	}
	p.Jobs = append(p.Jobs, Job{ID: 100, ScaleFactor: 8, Throughput: []float64{8}})
	for _, tc := range []struct {
		compat   Compat
		min, max float64
	}{{CompatNone, 0.8, 1.2}, {CompatGavel, 0, 0.5}} {
		r := &Rounds{Policy: &MaxMinFairness{}, Mechanism: Mechanism{Compat: tc.compat}}
		const n = 400
		runs := 0.0
		var x float64
		for i := range n {
			if i%5 == 0 {
				r.ForceReset() // arrivals and departures elsewhere
			}
			rd, err := r.Next(context.Background(), p, 100+float64(i)*360)
			require.NoError(t, err)
			x = rd.Allocation.X[len(p.Jobs)-1][0]
			if _, ok := jobsOf(rd)[100]; ok {
				runs++
			}
		}
		require.Positive(t, x)
		got := runs / (x * n)
		t.Logf("compat %v: ran %.0f rounds for a share of %.1f", tc.compat, runs, x*n)
		assert.True(t, got >= tc.min && got <= tc.max, "compat %v: ran %.0f rounds for a share of %.1f (%.2f of it)", tc.compat, runs, x*n, got)
	}
}

// Gavel's fifo.py may put more jobs on a type than it has GPUs (its
// type-assignment quirk). Our mechanism refuses such an answer; Gavel's
// runs what fits, as Gavel's scheduler does.
func TestRoundsOverCapacity(t *testing.T) {
	p := twoByTwo() // one GPU of each type, two jobs
	both := shapePolicy(func(a *Allocation) *Allocation {
		a.X[0][0], a.X[1][0] = 1, 1 // 2 GPUs of type a, which has 1
		return a
	})
	_, err := (&Rounds{Policy: both}).Next(context.Background(), p, 0)
	require.ErrorIs(t, err, ErrInvalidAllocation)
	assert.ErrorContains(t, err, "a: 2 GPUs used of 1")
	rd, err := (&Rounds{Policy: both, Mechanism: Mechanism{Compat: CompatGavel}}).Next(context.Background(), p, 0)
	require.NoError(t, err)
	used := 0
	for _, as := range rd.Assignments {
		if as.Type == "a" {
			used += len(as.Workers)
		}
	}
	assert.Equal(t, 1, used, "%+v", rd.Assignments)
}

// With ReuseRounds the mechanism makes the same rounds as without, each
// in the memory of the round before last.
func TestRoundsReuseRounds(t *testing.T) {
	types := []topology.GPUType{topology.V100, topology.P100, topology.K80}
	all := gavelJobs(t, types, 12)
	ctx := context.Background()
	plain := &Rounds{Policy: &MaxMinFairness{}, Mechanism: Mechanism{MinResetInterval: -1}}
	reuse := &Rounds{Policy: &MaxMinFairness{}, Mechanism: Mechanism{MinResetInterval: -1}, ReuseRounds: true}
	clone := func(rd *Round) []Assignment {
		out := make([]Assignment, len(rd.Assignments))
		for i, as := range rd.Assignments {
			as.JobIDs = append([]int(nil), as.JobIDs...)
			as.Workers = append([]int(nil), as.Workers...)
			out[i] = as
		}
		return out
	}
	var prev [2][]int // the JobIDs blocks of the last two rounds
	for i := range 10 {
		p := &Problem{Types: types, Capacity: []int{2, 2, 2}, Jobs: all[i/2 : i/2+6]}
		now := float64(i) * 360
		want, err := plain.Next(ctx, p, now)
		require.NoError(t, err)
		got, err := reuse.Next(ctx, p, now)
		require.NoError(t, err)
		require.NotEmpty(t, got.Assignments)
		assert.Equal(t, clone(want), clone(got), "round %d", i)
		if i >= 2 {
			assert.Same(t, &prev[i%2][0], &got.Assignments[0].JobIDs[0], "round %d: not in the memory of round %d", i, i-2)
		}
		prev[i%2] = got.Assignments[0].JobIDs
	}
}

// Reportable says what Report takes: jobs of the last round's problem,
// assigned or not (job 1 has no share and does not run), on its types;
// not a job absent from it, another type, or anything before a round.
func TestReportable(t *testing.T) {
	types := []topology.GPUType{topology.V100, topology.K80}
	r := &Rounds{Policy: fixedPolicy{0: {1, 0}}, Mechanism: Mechanism{LeaveIdle: true}}
	assert.False(t, r.Reportable(0, topology.V100), "no round yet")
	p := &Problem{Types: types, Capacity: []int{1, 1}, Jobs: []Job{
		{ID: 0, ScaleFactor: 1, Throughput: []float64{1, 1}}, {ID: 1, ScaleFactor: 1, Throughput: []float64{1, 1}}}}
	rd, err := r.Next(context.Background(), p, 0)
	require.NoError(t, err)
	require.Equal(t, map[int]topology.GPUType{0: topology.V100}, jobsOf(rd))
	assert.True(t, r.Reportable(0, topology.V100))
	assert.True(t, r.Reportable(1, topology.K80), "in the problem, not assigned")
	assert.False(t, r.Reportable(2, topology.V100), "not in the problem")
	assert.False(t, r.Reportable(0, topology.A100), "not a type of the problem")
	for _, run := range []UnitRun{{JobIDs: []int{2}, Type: topology.V100, Seconds: 35}, {JobIDs: []int{1}, Type: topology.K80, Seconds: 35}} {
		err := r.Report(RoundReport{Start: 0, Ran: []UnitRun{run}})
		assert.Equal(t, r.Reportable(run.JobIDs[0], run.Type), err == nil, "%+v: %v", run, err)
	}
}
