package admission

import (
	"context"
	"testing"

	"github.com/gpusched/gpusched/kube/internal/metricstest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/component-base/metrics"
)

// Weighted max-min fairness by water filling, on values worked by hand:
// 10 GPUs, demands 2, 8 and 8. Equal weights: the first gets its 2, the
// others split the 8 left, 4 each. Weights 1, 3, 1: the first gets 2; of
// the 8 left the second is owed 6 and the third 2.
func TestFairShares(t *testing.T) {
	demand := map[string]float64{"a": 2, "b": 8, "c": 8}
	got := fairShares(10, demand, nil)
	assert.InDeltaMapValues(t, map[string]float64{"a": 0.2, "b": 0.4, "c": 0.4}, got, 1e-12)
	got = fairShares(10, demand, map[string]float64{"b": 3})
	assert.InDeltaMapValues(t, map[string]float64{"a": 0.2, "b": 0.6, "c": 0.2}, got, 1e-12)
	// Demand below capacity: everyone gets what it asks.
	got = fairShares(100, demand, nil)
	assert.InDeltaMapValues(t, map[string]float64{"a": 0.02, "b": 0.08, "c": 0.08}, got, 1e-12)
	assert.Equal(t, map[string]float64{"a": 0}, fairShares(0, map[string]float64{"a": 1}, nil))
}

// Rounds of minutes (10,000 workloads on 5,000 nodes took 145 to 230 s)
// read as minutes in the round histogram's quantiles, not as its highest
// bucket.
func TestRoundDurationBuckets(t *testing.T) {
	m := NewMetrics()
	reg := metrics.NewKubeRegistry()
	require.NoError(t, m.Register(reg))
	for range 10 {
		m.roundDuration.Observe(230)
	}
	fams, err := metricstest.Gather(reg)
	require.NoError(t, err)
	p99, ok := fams.Quantile("gpusched_admission_round_duration_seconds", nil, 0.99)
	require.True(t, ok)
	assert.Greater(t, p99, 164.0, "p99 of 230 s rounds")
	assert.LessOrEqual(t, p99, 327.7, "p99 of 230 s rounds")
}

// metricValue reads one sample from a registry: the metric with exactly
// these label values (a histogram's sample count).
func metricValue(t *testing.T, reg metrics.KubeRegistry, name string, labels map[string]string) (float64, bool) {
	t.Helper()
	fams, err := metricstest.Gather(reg)
	require.NoError(t, err)
	return fams.Value(name, labels)
}

// Three 4-GPU jobs of two tenants on one V100 and one K80 node of 4 GPUs:
// the metrics of a round say what the round did, each waiting pod carries
// the condition and the event that say why, and the admitted ones the
// type they run on.
func TestRoundMetricsEventsAndConditions(t *testing.T) {
	ctx := context.Background()
	cs := fake.NewClientset(gpuNode("v1", "Tesla-V100-SXM2-16GB", 4), gpuNode("k1", "Tesla-K80", 4))
	for _, p := range []*corev1.Pod{gatedPod("team-a", "a", 4, rates("v100=4,k80=1")), gatedPod("team-a", "b", 4, rates("v100=4,k80=1")),
		gatedPod("team-b", "c", 4, rates("v100=4,k80=1")), gatedPod("team-b", "huge", 16, rates("v100=1"))} {
		_, err := cs.CoreV1().Pods(p.Namespace).Create(ctx, p, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	m := NewMetrics()
	reg := metrics.NewKubeRegistry()
	require.NoError(t, m.Register(reg))
	clk := &testClock{}
	c := newController(t, cs, clk, func(cfg *Config) { cfg.Metrics = m })
	res, err := syncRound(ctx, c)
	require.NoError(t, err)
	require.Len(t, res.Admitted, 2)

	val := func(name string, labels map[string]string) float64 {
		v, ok := metricValue(t, reg, name, labels)
		require.True(t, ok, "%s%v", name, labels)
		return v
	}
	assert.Equal(t, 1.0, val("gpusched_admission_rounds_total", map[string]string{"result": "ok"}))
	assert.Equal(t, 1.0, val("gpusched_admission_round_duration_seconds", nil))
	assert.Equal(t, 4.0, val("gpusched_admission_gpus", map[string]string{"gpu_type": "v100", "state": "capacity"}))
	assert.Equal(t, 4.0, val("gpusched_admission_gpus", map[string]string{"gpu_type": "v100", "state": "admitted"}))
	assert.Positive(t, val("gpusched_admission_lp_size", map[string]string{"dimension": "columns"}))
	admitted, pending := 0.0, 0.0
	for _, tenant := range []string{"team-a", "team-b"} {
		for _, typ := range []string{"v100", "k80"} {
			v, _ := metricValue(t, reg, "gpusched_admission_workloads", map[string]string{"tenant": tenant, "gpu_type": typ, "state": StateAdmitted})
			admitted += v
		}
		v, _ := metricValue(t, reg, "gpusched_admission_workloads", map[string]string{"tenant": tenant, "gpu_type": "none", "state": StatePending})
		pending += v
	}
	assert.Equal(t, 2.0, admitted, "admitted, not bound: nothing binds pods here")
	assert.Equal(t, 2.0, pending, "one 4-GPU job, and the 16-GPU one")
	assert.Equal(t, 1.0, val("gpusched_admission_waiting_workloads", map[string]string{"tenant": "team-b", "reason": ReasonUnrunnable}))
	// Fair shares of the 8 GPUs: team-a asks 8, team-b 4 (the 16-GPU job,
	// larger than any node, is no demand): b gets its 4, a the 4 left.
	assert.InDelta(t, 0.5, val("gpusched_admission_tenant_fair_share_ratio", map[string]string{"tenant": "team-a"}), 1e-9)
	assert.InDelta(t, 0.5, val("gpusched_admission_tenant_fair_share_ratio", map[string]string{"tenant": "team-b"}), 1e-9)
	shareA := val("gpusched_admission_tenant_share_ratio", map[string]string{"tenant": "team-a"})
	assert.InDelta(t, shareA-0.5, val("gpusched_admission_fairness_gap_ratio", map[string]string{"tenant": "team-a"}), 1e-9)

	// Conditions and events: the huge job cannot run; the other waiting
	// one has no capacity this round; the admitted ones say where.
	huge := getPod(t, cs, "team-b", "huge")
	cond := podCondition(huge)
	require.NotNil(t, cond)
	assert.Equal(t, corev1.ConditionFalse, cond.Status)
	assert.Equal(t, ReasonUnrunnable, cond.Reason)
	assert.Contains(t, cond.Message, "asks for 16 GPUs")
	for _, k := range []string{"a", "b", "c"} {
		ns := "team-a"
		if k == "c" {
			ns = "team-b"
		}
		cond := podCondition(getPod(t, cs, ns, k))
		require.NotNil(t, cond, k)
		if _, ok := res.Admitted["pod/"+ns+"/"+k]; ok {
			assert.Equal(t, corev1.ConditionTrue, cond.Status, k)
			assert.Equal(t, ReasonAdmitted, cond.Reason, k)
			assert.Contains(t, cond.Message, "its normalized rates", k)
		} else {
			assert.Equal(t, corev1.ConditionFalse, cond.Status, k)
			assert.Equal(t, ReasonNoCapacity, cond.Reason, k)
		}
	}
	assert.Equal(t, 1, reasons(t, cs, "team-b")[ReasonUnrunnable])

	// The next rounds rotate the jobs: preemptions are counted by reason,
	// and a waiting job's unchanged reason brings no new event.
	for r := 1; r < 4; r++ {
		clk.t = float64(r) * 360
		_, err := syncRound(ctx, c)
		require.NoError(t, err)
	}
	assert.Positive(t, val("gpusched_admission_preemptions_total", map[string]string{"reason": PreemptLeaseEnded}))
	assert.Equal(t, 1, reasons(t, cs, "team-b")[ReasonUnrunnable])
	assert.Equal(t, 4.0, val("gpusched_admission_rounds_total", map[string]string{"result": "ok"}))
}

func podCondition(p *corev1.Pod) *corev1.PodCondition {
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == ConditionAdmitted {
			return &p.Status.Conditions[i]
		}
	}
	return nil
}

// Watches, not lists: once its caches have synced, a round that changes
// nothing sends one request, the state's save; one that admits a pod adds
// that pod's update (and its event and condition). No round lists or gets
// anything.
func TestRoundReadsCachesOnly(t *testing.T) {
	ctx := context.Background()
	cs := fake.NewClientset(gpuNode("v1", "Tesla-V100-SXM2-16GB", 4))
	c := newController(t, cs, &testClock{}, nil)
	_, err := syncRound(ctx, c) // the first save creates the state (a get, a create)
	require.NoError(t, err)
	count := func(run func()) map[string]int {
		require.NoError(t, c.SyncCaches(ctx))
		cs.ClearActions()
		run()
		out := map[string]int{}
		for _, a := range cs.Actions() {
			key := a.GetVerb() + " " + a.GetResource().Resource
			if s := a.GetSubresource(); s != "" {
				key += "/" + s
			}
			out[key]++
		}
		return out
	}
	got := count(func() {
		_, err := c.Round(ctx)
		require.NoError(t, err)
	})
	assert.Equal(t, map[string]int{"update configmaps": 1}, got, "a round with nothing to do")
	_, err = cs.CoreV1().Pods(testNS).Create(ctx, gatedPod(testNS, "a", 2, rates("v100=1")), metav1.CreateOptions{})
	require.NoError(t, err)
	got = count(func() {
		_, err := c.Round(ctx)
		require.NoError(t, err)
	})
	assert.Equal(t, map[string]int{"update configmaps": 1, "update pods": 1, "patch pods/status": 1, "create events": 1}, got, "a round that admits a pod")
}

// A pod that runs without admission (its gate removed by the tenant) is
// preempted by the next Sweep, which the watch prompts, not at the next
// round: deleted and created again gated, and reported in the next
// round's result.
func TestSweepEnforcesOnWatch(t *testing.T) {
	ctx := context.Background()
	cs := fake.NewClientset(gpuNode("v1", "Tesla-V100-SXM2-16GB", 4))
	zero := int64(0)
	c := newController(t, cs, &testClock{}, func(cfg *Config) { cfg.PodDeletionGrace = &zero })
	_, err := syncRound(ctx, c) // past the clean start's adoption
	require.NoError(t, err)
	p := gatedPod(testNS, "sneaky", 4, rates("v100=1"))
	p.Spec.SchedulingGates = nil
	_, err = cs.CoreV1().Pods(testNS).Create(ctx, p, metav1.CreateOptions{})
	require.NoError(t, err)
	require.NoError(t, c.SyncCaches(ctx))
	require.NoError(t, c.Sweep(ctx))
	got := getPod(t, cs, testNS, "sneaky")
	assert.NotEqual(t, p.UID, got.UID, "deleted and created again")
	assert.True(t, hasGate(got.Spec.SchedulingGates))
	assert.Equal(t, 1, reasons(t, cs, testNS)[ReasonBypass])
	res, err := syncRound(ctx, c)
	require.NoError(t, err)
	assert.Equal(t, []string{"pod/" + testNS + "/sneaky"}, res.Bypassed)
}
