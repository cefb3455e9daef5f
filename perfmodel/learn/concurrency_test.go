package learn_test

import (
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gpusched/gpusched/perfmodel/learn"
	"github.com/gpusched/gpusched/topology"
)

// TestLearnerConcurrent: a Learner is safe for concurrent use, as its
// doc says: 4 goroutines report the progress of their own jobs while
// others read estimates, tracks and snapshots and refit the population;
// each job's tracks end as a single goroutine's replay leaves them, and
// the estimates agree: to 1e-9 without a tolerance (every Refresh fits),
// within twice the tolerance with it (a refit waits for Tolerance of the
// rows to change, so the last fits saw the data at different times).
// Run under -race.
func TestLearnerConcurrent(t *testing.T) {
	for _, c := range []struct {
		tol, delta float64
	}{{-1, 1e-9}, {0, 2 * learn.DefaultTolerance}} {
		t.Run(fmt.Sprint("tolerance ", c.tol), func(t *testing.T) { learnerConcurrent(t, learn.Config{Tolerance: c.tol}, c.delta) })
	}
}

func learnerConcurrent(t *testing.T, cfg learn.Config, delta float64) {
	const writers, jobs, segments = 4, 6, 5
	feed := func(l *learn.Learner, w int) {
		for j := range jobs {
			name := fmt.Sprintf("w%d-j%d", w, j)
			r := newRunner(l, name)
			for s := range segments {
				gt := []topology.GPUType{topology.A100, topology.H100, topology.V100}[(j+s)%3]
				r.run(t, gt, 1+s%2, 6, steady(float64(1+w+j*(1+s%3))))
			}
			if j == 0 {
				l.Forget(name)
			}
		}
	}
	l := newLearner(t, cfg)
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for w := range writers {
		wg.Go(func() { feed(l, w) })
	}
	var readers sync.WaitGroup
	for range 2 {
		readers.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				for w := range writers {
					name := fmt.Sprintf("w%d-j%d", w, 3)
					checkEstimates(t, l.Estimates(name, nil))
					_ = l.Tracks(name)
					_ = l.Estimate(name, topology.H100)
				}
				_, err := l.Snapshot()
				assert.NoError(t, err)
			}
		})
	}
	readers.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
				l.Refresh()
			}
		}
	})
	wg.Wait()
	close(stop)
	readers.Wait()

	seq := newLearner(t, cfg)
	for w := range writers {
		feed(seq, w)
	}
	a1, r1 := l.Jobs()
	a2, r2 := seq.Jobs()
	assert.Equal(t, [2]int{a2, r2}, [2]int{a1, r1})
	assert.Equal(t, writers*(jobs-1), a1)
	l.Refresh()
	seq.Refresh()
	for w := range writers {
		for j := 1; j < jobs; j++ {
			name := fmt.Sprintf("w%d-j%d", w, j)
			require.Equal(t, seq.Tracks(name), l.Tracks(name), name)
			got, want := l.Estimates(name, nil), seq.Estimates(name, nil)
			require.Len(t, got, len(want))
			for i := range want {
				assert.Equal(t, want[i].Source, got[i].Source)
				assert.InDelta(t, want[i].LogMean, got[i].LogMean, delta, "%s on %s", name, want[i].Type)
				assert.InDelta(t, want[i].Sigma, got[i].Sigma, delta, "%s on %s", name, want[i].Type)
			}
		}
	}
}

// checkEstimates checks that estimates are in range.
func checkEstimates(t *testing.T, es []learn.Estimate) {
	t.Helper()
	for _, e := range es {
		if e.Source != learn.SourceNone && !(e.Mean > 0 && e.Sigma > 0) {
			t.Errorf("estimate out of range: %+v", e)
		}
	}
}
