package progress_test

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/gpusched/gpusched/kube/progress"
	"k8s.io/apimachinery/pkg/types"
)

// TestConcurrent proves the Server's claim of safety under -race: pods
// report at once, many goroutines each, with steps out of order, the
// clock moving, the caches small enough to evict and Stats read
// meanwhile. The sink is never called twice at once for one workload
// (one pod each here), and what it took of each pod is monotone.
func TestConcurrent(t *testing.T) {
	t.Run("kept", func(t *testing.T) { concurrent(t, 64) })
	// With pods forgotten, a pod's steps may go back after it was
	// forgotten; its calls still never overlap.
	t.Run("forgotten", func(t *testing.T) { concurrent(t, 6) })
}

func concurrent(t *testing.T, maxPods int) {
	e := newEnv(t, progress.Config{Burst: 5, Interval: time.Millisecond, MaxPods: maxPods, MaxReviews: 4, ReviewQPS: 1e6, ReviewBurst: 1e5})
	const pods, workers, reports = 8, 4, 60
	toks := make([]string, pods)
	for i := range pods {
		uid := types.UID(fmt.Sprint("cu", i))
		e.res.add("a", fmt.Sprint("cp", i), uid, fmt.Sprint("job/a/c", i))
		toks[i] = e.api.podToken(progress.DefaultAudience, "a", fmt.Sprint("cp", i), uid)
	}
	var wg sync.WaitGroup
	for i := range pods {
		for w := range workers {
			wg.Go(func() {
				r := rand.New(rand.NewPCG(uint64(i), uint64(w)))
				for k := range reports {
					a := e.post(toks[i], steps(float64(k*workers+r.IntN(8))))
					switch a.status {
					case http.StatusNoContent, http.StatusConflict, http.StatusTooManyRequests:
					default:
						t.Errorf("pod %d: %d %q", i, a.status, a.msg)
						return
					}
					e.clock.Add(time.Millisecond)
				}
			})
		}
	}
	wg.Go(func() {
		for range 200 {
			_ = e.srv.Stats()
		}
	})
	wg.Wait()
	if n := e.sink.bad.Load(); n != 0 {
		t.Errorf("the sink was called %d times for a workload already in it", n)
	}
	last := map[string]float64{}
	for _, g := range e.sink.all() {
		if g.steps < last[g.key] && maxPods >= pods {
			t.Errorf("%s: %v after %v", g.key, g.steps, last[g.key])
		}
		last[g.key] = g.steps
	}
	s := e.srv.Stats()
	if s["accepted"] == 0 || s["pods"] > uint64(maxPods) || s["reviews_cached"] > 4 || maxPods < pods && s["pods_evicted"] == 0 {
		t.Errorf("stats %v", s)
	}
	t.Logf("stats %v", s)
}
