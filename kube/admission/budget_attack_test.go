package admission

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gpusched/gpusched/kube/tenancy"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// requestCounter counts a fake clientset's requests other than lists,
// watches and events (the informers' and the event recorder's), by
// namespace of the object; those on requeued pods' copies (ConfigMaps
// *-rq-*) under "copies".
type requestCounter struct {
	mu   sync.Mutex
	byNS map[string]int
}

func countRequests(cs *fake.Clientset) *requestCounter {
	rc := &requestCounter{byNS: map[string]int{}}
	cs.PrependReactor("*", "*", func(a k8stesting.Action) (bool, runtime.Object, error) {
		switch a.GetVerb() {
		case "list", "watch":
			return false, nil, nil
		}
		if a.GetResource().Resource == "events" {
			return false, nil, nil
		}
		key := a.GetNamespace()
		if n, ok := a.(interface{ GetName() string }); ok && a.GetResource().Resource == "configmaps" && strings.Contains(n.GetName(), "-rq-") {
			key = "copies"
		}
		if c, ok := a.(k8stesting.CreateAction); ok && a.GetResource().Resource == "configmaps" {
			if m, err := meta.Accessor(c.GetObject()); err == nil && strings.Contains(m.GetName(), "-rq-") {
				key = "copies"
			}
		}
		rc.mu.Lock()
		rc.byNS[key]++
		rc.mu.Unlock()
		return false, nil, nil
	})
	return rc
}

func (rc *requestCounter) of(keys ...string) int {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	n := 0
	for _, k := range keys {
		n += rc.byNS[k]
	}
	return n
}

// Fifty bare pods of one tenant that cannot be created again (its
// namespace's quota refuses them) after a preemption (here: they ran
// without the gate, and were deleted to be created gated) are retried
// with a capped exponential backoff each, within their tenant's budget
// of requests, so that they do not use up the controller's client (100
// QPS by default); another tenant's requeued pod is created at once; and
// a restarted controller (whose copies are in ConfigMaps) reads each copy
// once, not at every retry. Without backoff and budget each pod cost a
// GET and a POST a second (and a GET of its copy after a restart).
func TestRequeueRetriesWithinBudget(t *testing.T) {
	if raceEnabled {
		t.Skip("single-goroutine test: nothing for -race to find, and slow under it")
	}
	ctx := context.Background()
	cs := fake.NewClientset(gpuNode("n1", "Tesla-V100-SXM2-16GB", 4), gpuNode("n2", "Tesla-V100-SXM2-16GB", 4))
	for i := range 50 {
		p := gatedPod("att", fmt.Sprintf("p%02d", i), 1, rates("v100=1"))
		p.Spec.SchedulingGates = nil
		_, err := cs.CoreV1().Pods("att").Create(ctx, p, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	victim := gatedPod("v1", "job", 1, rates("v100=1"))
	victim.Spec.SchedulingGates = nil
	_, err := cs.CoreV1().Pods("v1").Create(ctx, victim, metav1.CreateOptions{})
	require.NoError(t, err)
	var refuse atomic.Bool
	refuse.Store(true)
	cs.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.GetNamespace() == "att" && refuse.Load() {
			return true, nil, apierrors.NewForbidden(podsGVR.GroupResource(), "p", fmt.Errorf("exceeded quota: pods"))
		}
		return false, nil, nil
	})
	rc := countRequests(cs)
	ten, err := tenancy.Parse([]byte(attackTenancy))
	require.NoError(t, err)
	wall := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	zero := int64(0)
	mod := func(cfg *Config) {
		cfg.Tenancy, cfg.PodDeletionGrace = ten, &zero
		cfg.Now = func() time.Time { return wall }
		cfg.CopyKey = []byte("0123456789abcdef0123456789abcdef")
	}
	c := newController(t, cs, &testClock{}, mod)
	res, err := syncRound(ctx, c)
	require.NoError(t, err)
	require.Len(t, res.Bypassed, 51)
	again := getPod(t, cs, "v1", "job")
	assert.NotEqual(t, victim.UID, again.UID, "the other tenant's pod is created again at once")
	assert.True(t, hasGate(again.Spec.SchedulingGates))
	sweeps := func(c *Controller, seconds int) (perSecond []int) {
		for range seconds {
			wall = wall.Add(time.Second)
			before := rc.of("att", "copies")
			require.NoError(t, c.Sweep(ctx))
			perSecond = append(perSecond, rc.of("att", "copies")-before)
		}
		return perSecond
	}
	report := func(name string, ps []int) (sum, peak int) {
		for _, n := range ps {
			sum += n
			peak = max(peak, n)
		}
		t.Logf("%s: %d requests for the attacker's pods in %d s (peak %d/s)", name, sum, len(ps), peak)
		return sum, peak
	}
	sum, peak := report("running", sweeps(c, 120))
	// The budget: DefaultTenantBudget a sweep (a second).
	assert.LessOrEqual(t, peak, DefaultTenantBudget)
	assert.LessOrEqual(t, sum, DefaultTenantBudget*120)
	// The backoff: 50 pods, each retried after 1, 2, 4, ... s (at most
	// 5 min): about 7 tries each in 120 s.
	assert.LessOrEqual(t, sum, 50*8)
	_, err = cs.CoreV1().Pods("att").Get(ctx, "p00", metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err), "still refused")
	assert.Len(t, c.state.Requeue, 50, "kept to retry")

	// A restarted controller reads each copy from its ConfigMap once.
	d := newController(t, cs, &testClock{}, mod)
	sum, peak = report("restarted", sweeps(d, 120))
	assert.LessOrEqual(t, peak, DefaultTenantBudget)
	assert.LessOrEqual(t, sum, DefaultTenantBudget*120)
	assert.LessOrEqual(t, sum, 50+50*8)
	assert.Len(t, d.state.Requeue, 50)
	// The namespace's quota frees: every pod is back within the backoff's
	// cap.
	refuse.Store(false)
	sweeps(d, 600)
	assert.Empty(t, d.state.Requeue, "all created again")
	pods, err := cs.CoreV1().Pods("att").List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	assert.Len(t, pods.Items, 50)
	for _, p := range pods.Items {
		assert.True(t, hasGate(p.Spec.SchedulingGates), p.Name)
	}
}
