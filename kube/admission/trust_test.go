package admission

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/gpusched/gpusched/kube/model"
	"github.com/gpusched/gpusched/kube/tenancy"
	"github.com/gpusched/gpusched/topology"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

func tenancyCM(doc string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "gpusched", Name: tenancy.DefaultConfigMap}, Data: map[string]string{tenancy.ConfigKey: doc}}
}

func reasons(t *testing.T, cs *fake.Clientset, ns string) map[string]int {
	t.Helper()
	evs, err := cs.CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{})
	require.NoError(t, err)
	out := map[string]int{}
	for _, e := range evs.Items {
		out[e.Reason]++
	}
	return out
}

// The tenancy ConfigMap is read every round: a bad edit gets a Warning
// event and the last good tenancy stays; a change of weights rebuilds the
// core, keeping its jobs; until a tenancy loads, no round runs.
func TestTenancyReloaded(t *testing.T) {
	ctx := context.Background()
	cs := fake.NewClientset(gpuNode("n1", "Tesla-V100-SXM2-16GB", 4), gatedPod(testNS, "a", 4, rates("v100=1")))
	clk := &testClock{}
	c := newController(t, cs, clk, func(cfg *Config) { cfg.TenancyConfigMap = tenancy.DefaultConfigMap })
	_, err := syncRound(ctx, c)
	require.ErrorContains(t, err, "no tenancy")
	_, err = cs.CoreV1().ConfigMaps("gpusched").Create(ctx, tenancyCM("tenants: [{name: a, namespaces: ["+testNS+"]}]"), metav1.CreateOptions{})
	require.NoError(t, err)
	res, err := syncRound(ctx, c)
	require.NoError(t, err)
	assert.Len(t, res.Admitted, 1)
	// A bad edit: Warning, the tenancy stays.
	_, err = cs.CoreV1().ConfigMaps("gpusched").Update(ctx, tenancyCM("tenants: [{name: A}]"), metav1.UpdateOptions{})
	require.NoError(t, err)
	clk.t = 360
	res, err = syncRound(ctx, c)
	require.NoError(t, err)
	assert.Len(t, res.Admitted, 1)
	assert.Equal(t, 1, reasons(t, cs, "gpusched")[ReasonBadTenancy])
	// New weights: the core is rebuilt with its jobs.
	_, err = cs.CoreV1().ConfigMaps("gpusched").Update(ctx, tenancyCM("tenants: [{name: a, weight: 3, namespaces: ["+testNS+"]}]"), metav1.UpdateOptions{})
	require.NoError(t, err)
	clk.t = 720
	res, err = syncRound(ctx, c)
	require.NoError(t, err)
	assert.Len(t, res.Admitted, 1)
	assert.Empty(t, res.Started, "the job kept running through the rebuild")
	assert.InDelta(t, 3, c.Tenancy().Weights()["a"], 0)
	st, err := c.sched.Status("pod/" + testNS + "/a")
	require.NoError(t, err)
	assert.Equal(t, "a", st.Spec.Tenant)
}

// A Job a tenant resumes without admission is suspended again (Warning
// event); a pod's PriorityClass gives its tier, capped by its queue.
func TestJobBypassAndPriority(t *testing.T) {
	ctx := context.Background()
	j := gatedJob(testNS, "sneaky", 1, 4, rates("v100=1"))
	j.Spec.Suspend = ptrTo(false)
	j.Spec.Template.Spec.SchedulingGates = nil
	hi := gatedPod(testNS, "hi", 4, rates("v100=1"))
	hi.Spec.PriorityClassName = "urgent"
	cs := fake.NewClientset(gpuNode("n1", "Tesla-V100-SXM2-16GB", 4), j, hi, gatedPod(testNS, "lo", 4, rates("v100=1")),
		&schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "urgent"}, Value: 1000000})
	ten, err := tenancy.Parse([]byte("tenants: [{name: a, namespaces: [" + testNS + "], queues: [{name: q, maxPriority: 10}]}]"))
	require.NoError(t, err)
	clk := &testClock{}
	c := newController(t, cs, clk, func(cfg *Config) { cfg.Tenancy = ten })
	c.adopt = false // not a clean start: nothing to adopt
	for r := range 3 {
		clk.t = float64(r) * 360
		res, err := syncRound(ctx, c)
		require.NoError(t, err)
		if r == 0 {
			assert.Equal(t, []string{"job/" + testNS + "/sneaky"}, res.Bypassed)
		}
		assert.Equal(t, map[string]topology.GPUType{"pod/" + testNS + "/hi": topology.V100}, res.Admitted, "round %d: the higher tier runs", r)
	}
	got, err := cs.BatchV1().Jobs(testNS).Get(ctx, "sneaky", metav1.GetOptions{})
	require.NoError(t, err)
	assert.True(t, *got.Spec.Suspend)
	assert.Equal(t, 1, reasons(t, cs, testNS)[ReasonBypass])
	st, err := c.sched.Status("pod/" + testNS + "/hi")
	require.NoError(t, err)
	assert.Equal(t, 10, st.Spec.Priority, "capped at the queue's maxPriority")
}

// Annotations a tenant forges on its admitted pod (preempted, a deletion
// deadline in the past, another type) change nothing: the controller's
// records say what it admitted and when a grace ends.
func TestForgedDecisionAnnotationsIgnored(t *testing.T) {
	ctx := context.Background()
	cs := fake.NewClientset(gpuNode("n1", "Tesla-V100-SXM2-16GB", 4), gpuNode("k1", "Tesla-K80", 4), gatedPod(testNS, "a", 4, rates("v100=1")))
	clk := &testClock{}
	c := newController(t, cs, clk, func(cfg *Config) { cfg.Grace = time.Hour })
	res, err := syncRound(ctx, c)
	require.NoError(t, err)
	require.Equal(t, map[string]topology.GPUType{"pod/" + testNS + "/a": topology.V100}, res.Admitted)
	p := getPod(t, cs, testNS, "a")
	p.Annotations[AnnotationPreempted] = "forged"
	p.Annotations[AnnotationDeleteAfter] = "2000-01-01T00:00:00Z"
	p.Annotations[AnnotationAdmittedType] = "k80"
	_, err = cs.CoreV1().Pods(testNS).Update(ctx, p, metav1.UpdateOptions{})
	require.NoError(t, err)
	require.NoError(t, c.Sweep(ctx))
	clk.t = 360
	res, err = syncRound(ctx, c)
	require.NoError(t, err)
	assert.Equal(t, map[string]topology.GPUType{"pod/" + testNS + "/a": topology.V100}, res.Admitted)
	assert.Equal(t, p.UID, getPod(t, cs, testNS, "a").UID, "not deleted")
	assert.Empty(t, res.Bypassed)
}

// At a clean start the controller adopts the GPU pods bound to its nodes
// (their type is their node's) and preempts the ungated ones that are not
// bound (whatever their annotations say).
func TestCleanStartAdoptsBoundPods(t *testing.T) {
	ctx := context.Background()
	bound := gatedPod(testNS, "bound", 4, rates("v100=1,k80=1"))
	bound.Spec.SchedulingGates, bound.Spec.NodeName = nil, "k1"
	bound.Annotations[AnnotationAdmittedType] = "v100" // the node says k80
	loose := gatedPod(testNS, "loose", 4, map[string]string{AnnotationAdmittedType: "v100", model.AnnotationThroughput: "v100=1,k80=1"})
	loose.Spec.SchedulingGates = nil
	cs := fake.NewClientset(gpuNode("n1", "Tesla-V100-SXM2-16GB", 4), gpuNode("k1", "Tesla-K80", 4), bound, loose)
	clk := &testClock{}
	c := newController(t, cs, clk, nil)
	res, err := syncRound(ctx, c)
	require.NoError(t, err)
	assert.Equal(t, []string{"pod/" + testNS + "/bound"}, res.Adopted)
	assert.Equal(t, []string{"pod/" + testNS + "/loose"}, res.Bypassed)
	assert.Equal(t, bound.UID, getPod(t, cs, testNS, "bound").UID, "the adopted pod was not taken for a bypass")
	assert.NotEqual(t, loose.UID, getPod(t, cs, testNS, "loose").UID, "the loose pod was deleted and created again, gated")
	st := savedState(t, cs)
	assert.Equal(t, topology.K80, st.Admitted["pod/"+testNS+"/bound"].Type, "adopted on its node's type, not the annotation's")
	assert.True(t, st.Admitted["pod/"+testNS+"/bound"].Adopted)
}

// A pod too large to keep a copy of (it could not be created again after
// a preemption) is not admitted: a Warning event says why.
func TestPodTooLargeToPreempt(t *testing.T) {
	ctx := context.Background()
	big := gatedPod(testNS, "big", 1, map[string]string{"notes": strings.Repeat("x", maxPodCopy)})
	cs := fake.NewClientset(gpuNode("n1", "Tesla-V100-SXM2-16GB", 4), big, gatedPod(testNS, "small", 1, nil))
	c := newController(t, cs, &testClock{}, nil)
	res, err := syncRound(ctx, c)
	require.NoError(t, err)
	assert.Equal(t, []string{"pod/" + testNS + "/big"}, res.Skipped)
	assert.Contains(t, res.Admitted, "pod/"+testNS+"/small")
	assert.Equal(t, 1, reasons(t, cs, testNS)[ReasonMalformed])
}
