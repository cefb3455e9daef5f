package learn_test

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/gpusched/gpusched/perfmodel/learn"
	"github.com/gpusched/gpusched/topology"
)

// groupPopulation is a learner with eight unrelated jobs measured on
// K80, P100 and V100 (the population gives priors on all three) and a
// finished run of the program "team-a/train.py" measured at 9 steps/s
// on V100 and 1.5 on K80, its P100 never measured: a shape none of the
// others has (they run 2x to 4x faster on V100 than K80, at 1 to 4
// steps/s on K80).
// It returns too run-1's estimates before it finished.
func groupPopulation(t *testing.T, private bool) (*learn.Learner, map[topology.GPUType]learn.Estimate) {
	t.Helper()
	l, err := learn.New(learn.Config{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 8 {
		name := "other-" + string(rune('a'+i))
		k80 := 1 + float64(i%4)
		r := newRunner(l, name)
		r.run(t, topology.K80, 1, 8, steady(k80))
		r.run(t, topology.P100, 1, 8, steady(k80*(1.5+0.1*float64(i))))
		r.run(t, topology.V100, 1, 8, steady(k80*(2+0.25*float64(i))))
	}
	if err := l.Register("run-1", learn.JobInfo{GPUs: 1, Group: "team-a/train.py", Private: private}); err != nil {
		t.Fatal(err)
	}
	r := newRunner(l, "run-1")
	r.run(t, topology.V100, 1, 8, steady(9))
	r.run(t, topology.K80, 1, 8, steady(1.5))
	l.Refresh()
	last := map[topology.GPUType]learn.Estimate{}
	for _, typ := range []topology.GPUType{topology.K80, topology.P100, topology.V100} {
		last[typ] = l.Estimate("run-1", typ)
	}
	l.Forget("run-1")
	l.Refresh()
	return l, last
}

// A new run of a program starts where its earlier run ended (the issue:
// "repeated runs of one training script share what was learned"): on
// the types that run measured, its estimates are that run's last ones
// within 2% (Source group; the population's prior weighs on both alike,
// so neither is the raw 9 and 1.5); a job of no group, or of another GPU
// count, or a run whose reports were private, gets the population's
// priors only.
func TestGroupRunsShareWhatTheyMeasured(t *testing.T) {
	l, last := groupPopulation(t, false)
	reg := func(name string, info learn.JobInfo) {
		t.Helper()
		if err := l.Register(name, info); err != nil {
			t.Fatal(err)
		}
	}
	reg("run-2", learn.JobInfo{GPUs: 1, Group: "team-a/train.py"})
	reg("stranger", learn.JobInfo{GPUs: 1})
	reg("run-2x4", learn.JobInfo{GPUs: 4, Group: "team-a/train.py"})
	for _, typ := range []topology.GPUType{topology.V100, topology.K80} {
		e, want := l.Estimate("run-2", typ), last[typ]
		if e.Source != learn.SourceGroup || math.Abs(e.Mean/want.Mean-1) > 0.02 {
			t.Errorf("run-2 on %s: %.3f (%s), want run-1's last %.3f (group)", typ, e.Mean, e.Source, want.Mean)
		}
		if e.Sigma > 0.1 {
			t.Errorf("run-2 on %s: sigma %.3f, want at most 0.1 (GroupSigma 0.05, one run)", typ, e.Sigma)
		}
		for _, other := range []string{"stranger", "run-2x4"} {
			if o := l.Estimate(other, typ); o.Source != learn.SourcePrior {
				t.Errorf("%s on %s: source %s, want prior (not the group's)", other, typ, o.Source)
			}
		}
	}
	// The ratio the group measured (6x, shrunk to 5.7 by the prior) is
	// the new run's; the stranger's is the population's (2x to 4x).
	ratio := func(job string) float64 {
		return l.Estimate(job, topology.V100).Mean / l.Estimate(job, topology.K80).Mean
	}
	if r, want := ratio("run-2"), last[topology.V100].Mean/last[topology.K80].Mean; math.Abs(r/want-1) > 0.04 || want < 5 {
		t.Errorf("run-2: V100/K80 %.2f, want run-1's %.2f (over 5)", r, want)
	}
	if r := ratio("stranger"); r > 4.5 {
		t.Errorf("stranger: V100/K80 %.2f, want the population's (2 to 4)", r)
	}
	// P100, which the group never measured, is a prior at the group's
	// level: between its K80 and V100 rates.
	if e := l.Estimate("run-2", topology.P100); e.Source != learn.SourcePrior || !(e.Mean > 1.5 && e.Mean < 9) {
		t.Errorf("run-2 on P100: %.3f (%s), want a prior between 1.5 and 9", e.Mean, e.Source)
	}
	// Its own measurement outweighs the group's.
	r := newRunner(l, "run-2")
	r.run(t, topology.V100, 1, 12, steady(12))
	if e := l.Estimate("run-2", topology.V100); e.Source != learn.SourceMeasured || math.Abs(e.Mean/12-1) > 0.05 {
		t.Errorf("run-2 on V100 after its own run at 12: %.3f (%s), want about 12 (measured)", e.Mean, e.Source)
	}
	// A claim counts only where the group measured nothing.
	reg("run-3", learn.JobInfo{GPUs: 1, Group: "team-a/train.py", Claims: map[topology.GPUType]float64{topology.V100: 100}})
	if e, want := l.Estimate("run-3", topology.V100), last[topology.V100].Mean; e.Source != learn.SourceGroup || math.Abs(e.Mean/want-1) > 0.02 {
		t.Errorf("run-3 claiming 100 on V100: %.3f (%s), want the group's %.3f", e.Mean, e.Source, want)
	}
}

// A private run's reports speak for no other job: not its group either.
func TestGroupLeavesOutPrivateRuns(t *testing.T) {
	l, _ := groupPopulation(t, true)
	if err := l.Register("run-2", learn.JobInfo{GPUs: 1, Group: "team-a/train.py"}); err != nil {
		t.Fatal(err)
	}
	if e := l.Estimate("run-2", topology.V100); e.Source != learn.SourcePrior {
		t.Errorf("run-2 on V100: source %s, want prior (run-1 was private)", e.Source)
	}
}

// The groups survive a snapshot: the restored learner gives a new run
// the same estimates; a group name too long is refused, in Register and
// in Restore.
func TestGroupSnapshotAndBounds(t *testing.T) {
	l, _ := groupPopulation(t, false)
	snap, err := l.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	r, _ := learn.New(learn.Config{})
	if err := r.Restore(snap); err != nil {
		t.Fatal(err)
	}
	r.Refresh()
	for _, x := range []*learn.Learner{l, r} {
		if err := x.Register("run-2", learn.JobInfo{GPUs: 1, Group: "team-a/train.py"}); err != nil {
			t.Fatal(err)
		}
	}
	a, b := l.Estimate("run-2", topology.V100), r.Estimate("run-2", topology.V100)
	if b.Source != learn.SourceGroup || math.Abs(a.LogMean-b.LogMean) > 1e-9 {
		t.Errorf("restored: %v (%s), want %v (group)", b.Mean, b.Source, a.Mean)
	}
	long := strings.Repeat("g", learn.MaxGroupLen+1)
	err = l.Register("run-x", learn.JobInfo{Group: long})
	if e, ok := errors.AsType[*learn.Error](err); !ok || !errors.Is(err, learn.ErrInvalidJob) || e.Field != "Group" {
		t.Errorf("a group of %d bytes: %v, want ErrInvalidJob naming Group", len(long), err)
	}
	bad := strings.Replace(string(snap), `"group":"team-a/train.py"`, `"group":"`+long+`"`, 1)
	if err := r.Restore([]byte(bad)); !errors.Is(err, learn.ErrMalformedSnapshot) || !strings.Contains(err.Error(), "group") {
		t.Errorf("a snapshot with a group of %d bytes: %v, want ErrMalformedSnapshot naming the group", len(long), err)
	}
}
