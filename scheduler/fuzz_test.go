package scheduler

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpusched/gpusched/allocation"
	"github.com/gpusched/gpusched/topology"
)

// fuzzScheduler is the scheduler FuzzRestore restores into: newSched's
// cluster (2 x 4 V100, 1 x 4 K80), max-min fairness.
func fuzzScheduler(t testing.TB) *Scheduler {
	c, err := topology.ParseCompact("v100:8:4,k80:4:4", 4)
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(Config{Policy: &allocation.MaxMinFairness{}, Cluster: c})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// richSnapshot is a snapshot of a run with priorities, a gang, elastic,
// single-server and finished jobs, preemptions, a failure and a server
// that left and came back.
func richSnapshot(t testing.TB) []byte {
	s := fuzzScheduler(t)
	specs := []JobSpec{
		{GPUs: 2, Throughput: rates(3, 1), RemainingSteps: 15},
		{GPUs: 1, MaxGPUs: 3, Throughput: rates(1, 1), Priority: 1},
		{GPUs: 4, Throughput: rates(2, 1), Gang: "g"},
		{GPUs: 1, Throughput: rates(2, 0), Gang: "g", Priority: 2},
		{GPUs: 4, Throughput: rates(1, 1), SingleServer: true},
		{GPUs: 8, Throughput: rates(1, 0)},
		{GPUs: 100, Throughput: rates(1, 1)},
	}
	for i, spec := range specs {
		if err := s.Submit(string(rune('a'+i)), spec, 0); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 4 {
		r, err := s.Round(ctx, float64(i)*360)
		if err != nil {
			t.Fatal(err)
		}
		rep := RoundReport{Start: r.Start}
		for _, as := range r.Assignments {
			rep.Ran = append(rep.Ran, Ran{Job: as.Jobs[0], Seconds: 300, Steps: 10})
		}
		if err := s.Report(rep); err != nil {
			t.Fatal(err)
		}
		if i == 1 {
			if _, err := s.FailGPUs("v100-1", 1); err != nil {
				t.Fatal(err)
			}
		}
	}
	if _, err := s.Round(ctx, 4*360); err != nil {
		t.Fatal(err)
	}
	data, err := s.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// FuzzRestore restores arbitrary bytes (with Restore, or Adopt), and then
// runs rounds, reports, statuses and snapshots: nothing panics or hangs,
// what is accepted keeps the cluster state consistent, and its snapshot
// restores into a fresh scheduler. Seeded with real snapshots and the
// hostile corpus.
func FuzzRestore(f *testing.F) {
	f.Add(richSnapshot(f), false)
	_, base := hostileBase(f)
	f.Add(base, false)
	for _, dir := range []string{"testdata", filepath.Join("testdata", "hostile")} {
		entries, err := os.ReadDir(dir)
		if err != nil {
			f.Fatal(err)
		}
		for _, e := range entries {
			if strings.HasSuffix(e.Name(), ".json") {
				data, err := os.ReadFile(filepath.Join(dir, e.Name()))
				if err != nil {
					f.Fatal(err)
				}
				f.Add(data, true)
			}
		}
	}
	f.Fuzz(func(t *testing.T, data []byte, adopt bool) {
		s := fuzzScheduler(t)
		var err error
		if adopt {
			_, err = s.Adopt(data)
		} else {
			err = s.Restore(data)
		}
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("an error that is not ErrInvalid: %v", err)
			}
			if len(s.Jobs()) > 0 {
				t.Fatal("a refused snapshot left jobs")
			}
			return
		}
		now := s.lastEnd
		for range 3 {
			r, err := s.Round(ctx, now)
			if err != nil {
				if !errors.Is(err, ErrInvalid) {
					t.Fatalf("a restored scheduler fails its round: %v", err)
				}
				return // a time beyond MaxTime
			}
			rep := RoundReport{Start: r.Start}
			for i, as := range r.Assignments {
				for _, k := range as.Jobs {
					if i%4 == 3 {
						rep.Failed = append(rep.Failed, k)
					} else {
						rep.Ran = append(rep.Ran, Ran{Job: k, Seconds: r.Length / 2, Steps: float64(len(k))})
					}
				}
			}
			if err := s.Report(rep); err != nil {
				t.Fatalf("a report of the round fails: %v", err)
			}
			for _, k := range s.Jobs() {
				if _, err := s.Status(k); err != nil {
					t.Fatal(err)
				}
			}
			now = r.Start + r.Length/2
		}
		snap, err := s.Snapshot()
		if err != nil {
			t.Fatal(err)
		}
		s.View(func(v *ClusterView) {
			if err := v.Check(); err != nil {
				t.Fatal(err)
			}
		})
		fresh := fuzzScheduler(t)
		if adopt {
			_, err = fresh.Adopt(snap)
		} else {
			err = fresh.Restore(snap)
		}
		if err != nil {
			t.Fatalf("its own snapshot does not restore: %v", err)
		}
	})
}
