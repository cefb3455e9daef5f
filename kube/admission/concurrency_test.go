package admission

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

// Round, Sweep and Run from several goroutines at once (run with -race):
// the controller's lock serialises them and the invariants hold after.
func TestConcurrentRoundsAndSweeps(t *testing.T) {
	ctx := context.Background()
	cs := fake.NewClientset(gpuNode("v1", "Tesla-V100-SXM2-16GB", 4), gpuNode("k1", "Tesla-K80", 4))
	for _, n := range []string{"a", "b", "c", "d"} {
		_, err := cs.CoreV1().Pods(testNS).Create(ctx, gatedPod(testNS, n, 2, rates("v100=3,k80=1")), metav1.CreateOptions{})
		require.NoError(t, err)
	}
	var mu sync.Mutex
	clk := 0.0
	c := newController(t, cs, &testClock{}, func(cfg *Config) {
		cfg.Clock = func() float64 {
			mu.Lock()
			defer mu.Unlock()
			clk += 360
			return clk
		}
		cfg.Interval = 20 * time.Millisecond
	})
	runCtx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		assert.ErrorIs(t, c.Run(runCtx), context.DeadlineExceeded)
	}()
	for range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 5 {
				if _, err := syncRound(ctx, c); err != nil && !strings.Contains(err.Error(), "before the last one") {
					t.Error(err)
				}
				assert.NoError(t, c.Sweep(ctx))
			}
		}()
	}
	wg.Wait()
	res, err := syncRound(ctx, c)
	require.NoError(t, err)
	checkInvariants(t, cs, res)
	assert.Greater(t, res.Round, 15)
	st := savedState(t, cs)
	assert.Equal(t, res.Round, st.Rounds)
}
