package multires

import (
	"errors"
	"math"
	"sync"
	"testing"
)

// TestProfilerCacheModel: measured at 1 to 12 CPUs with the dataset
// cached, and memory's effect from the cache model (dataset 100 GB per
// GPU, 100 MB read per iteration, 250 MB/s of storage per GPU): at the
// proportional share (3 CPUs, 62.5 GB) 37.5% of each iteration's reads
// miss, storage allows 250 / 37.5 = 6.67 iterations/s, the CPUs 3: the
// reference. With 12 CPUs and 25 GB, 75% miss: 3.33/s, 1.11 relative.
func TestProfilerCacheModel(t *testing.T) {
	p := &Profiler{Proportional: Share{3, 62.5}, MemGB: []float64{25, 50, 62.5, 100}, DatasetGB: 100, ReadMB: 100, StorageMBps: 250}
	for _, m := range []struct{ cpus, rate float64 }{{1, 1}, {2, 2}, {3, 2.5}, {3, 3.5}, {6, 5}, {12, 5}} {
		if err := p.Observe(m.cpus, m.rate); err != nil {
			t.Fatal(err)
		}
	}
	// A running job's progress with half the dataset cached says nothing
	// of its CPUs; with all of it, it is a measurement at 12 CPUs.
	if used, err := p.ObserveShare(Share{12, 50}, 1); used || err != nil {
		t.Fatalf("half cached: used %v, %v", used, err)
	}
	if used, err := p.ObserveShare(Share{12, 100}, 5); !used || err != nil {
		t.Fatalf("all cached: used %v, %v", used, err)
	}
	s, err := p.Surface()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		at   Share
		want float64
	}{
		{Share{3, 62.5}, 1}, {Share{6, 100}, 5.0 / 3}, {Share{6, 62.5}, 5.0 / 3},
		{Share{12, 50}, 5.0 / 3}, {Share{12, 25}, (250.0 / 75) / 3}, {Share{1, 100}, 1.0 / 3},
		{Share{4.5, 100}, 4.0 / 3}, // between 3 (3.0/s, the mean) and 6 (5/s)
	} {
		if got := s.At(c.at); math.Abs(got-c.want) > 1e-12 {
			t.Errorf("At(%v) = %g, want %g", c.at, got, c.want)
		}
	}
	pr := &Profile{Name: "job", IterTime: 1.0 / 3, Surface: s, Ideal: s.Knee(0, p.Proportional)}
	if err := pr.Validate(); err != nil || pr.Ideal != (Share{6, 50}) {
		t.Fatalf("knee %v, %v; want 6 CPUs and 50 GB", pr.Ideal, err)
	}
}

func TestProfilerBadInput(t *testing.T) {
	p := &Profiler{Proportional: Share{3, 62.5}, MemGB: []float64{62.5}, DatasetGB: 100, ReadMB: 100, StorageMBps: 250}
	if _, err := p.Surface(); !errors.Is(err, ErrInvalidProfile) {
		t.Errorf("no measurements: %v", err)
	}
	for _, m := range []struct{ cpus, rate float64 }{{0, 1}, {math.NaN(), 1}, {1, -1}, {1, math.Inf(1)}} {
		if err := p.Observe(m.cpus, m.rate); !errors.Is(err, ErrInvalidProfile) {
			t.Errorf("Observe(%g, %g): %v", m.cpus, m.rate, err)
		}
	}
	for i := range MaxObservations {
		if err := p.Observe(float64(i+1), 1); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.Observe(MaxObservations+1, 1); !errors.Is(err, ErrInvalidProfile) {
		t.Errorf("one CPU count too many: %v", err)
	}
	bad := &Profiler{Proportional: Share{3, 62.5}, MemGB: []float64{62.5}, DatasetGB: -1, ReadMB: 100, StorageMBps: 250}
	if err := bad.Observe(1, 1); !errors.Is(err, ErrInvalidProfile) {
		t.Errorf("negative dataset: %v", err)
	}
	zero := &Profiler{Proportional: Share{3, 62.5}, MemGB: []float64{62.5}, DatasetGB: 10, ReadMB: 100, StorageMBps: 250}
	_ = zero.Observe(3, 0)
	if _, err := zero.Surface(); !errors.Is(err, ErrInvalidProfile) {
		t.Errorf("zero rate at the proportional share: %v", err)
	}
}

// TestProfilerConcurrent: observations and surfaces from many goroutines
// (run with -race).
func TestProfilerConcurrent(t *testing.T) {
	p := &Profiler{Proportional: Share{3, 62.5}, MemGB: []float64{62.5, 125}, DatasetGB: 100, ReadMB: 10, StorageMBps: 250}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 50 {
				_ = p.Observe(float64(1+(g+i)%6), float64(1+(g+i)%6))
				if _, err := p.Surface(); err != nil && !errors.Is(err, ErrInvalidProfile) {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
}
