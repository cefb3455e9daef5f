package gpusched

import (
	"testing"
	"time"

	"github.com/gpusched/gpusched/kube/model"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
)

func queued(t *testing.T, p *corev1.Pod) fwk.QueuedEntityInfo {
	t.Helper()
	pi, err := framework.NewPodInfo(p)
	require.NoError(t, err)
	return &framework.QueuedPodInfo{PodInfo: pi}
}

// sorted returns the pods' names in the plugin's queue order.
func sorted(t *testing.T, pl *Plugin, pods ...*corev1.Pod) []string {
	t.Helper()
	qs := make([]fwk.QueuedEntityInfo, len(pods))
	for i, p := range pods {
		qs[i] = queued(t, p)
		pl.groups.onPod(p, model.ResourceGPU)
	}
	// insertion sort through Less, as a heap would compare
	for i := 1; i < len(qs); i++ {
		for j := i; j > 0 && pl.Less(qs[j], qs[j-1]); j-- {
			qs[j], qs[j-1] = qs[j-1], qs[j]
		}
	}
	names := make([]string, len(qs))
	for i, q := range qs {
		names[i] = q.(*framework.QueuedPodInfo).Pod.Name
	}
	return names
}

func plugin(t *testing.T, a Args) *Plugin {
	t.Helper()
	require.NoError(t, a.validate())
	order, err := a.order()
	require.NoError(t, err)
	return &Plugin{args: a, order: order, res: model.ResourceGPU, groups: newGroups(nil)}
}

func TestQueueSortOrders(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	at := func(s int) podOpt { return created(t0.Add(time.Duration(s) * time.Second)) }
	pods := func() []*corev1.Pod {
		return []*corev1.Pod{
			gpuPod("old-long", 1, at(0), ann(model.AnnotationRemaining, "9000"), ann(model.AnnotationAttained, "20000")),
			gpuPod("mid-short", 1, at(10), ann(model.AnnotationRemaining, "60"), ann(model.AnnotationAttained, "4000")),
			gpuPod("new-fresh", 1, at(20), ann(model.AnnotationRemaining, "600")),
			gpuPod("newest-unknown", 1, at(30)),
		}
	}
	for _, tc := range []struct {
		args Args
		want []string
	}{
		{Args{}, []string{"old-long", "mid-short", "new-fresh", "newest-unknown"}},
		{Args{Order: OrderSRTF}, []string{"mid-short", "new-fresh", "old-long", "newest-unknown"}},
		// 2D-LAS: queues by attained GPU-seconds (3250, 7200, 18000), FIFO inside.
		{Args{Order: OrderLAS}, []string{"new-fresh", "newest-unknown", "mid-short", "old-long"}},
		// 2D-Gittins over jobs of 1000 or 5000 GPU-seconds, quantum 1000: a
		// job that attained 4000 will surely finish within the next quantum
		// (index 1/1000), a fresh one only with probability 1/2 (1/3000),
		// one past every sample gets the highest index.
		{Args{Order: OrderGittins, GittinsSamples: []float64{1000, 5000}, GittinsQuantum: 1000},
			[]string{"old-long", "mid-short", "new-fresh", "newest-unknown"}},
	} {
		t.Run(tc.args.Order, func(t *testing.T) {
			assert.Equal(t, tc.want, sorted(t, plugin(t, tc.args), pods()...))
		})
	}
}

func TestQueueSortPriorityAndGroups(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	at := func(s int) podOpt { return created(t0.Add(time.Duration(s) * time.Second)) }
	high := int32(100)
	vip := gpuPod("vip", 1, at(50))
	vip.Spec.Priority = &high
	got := sorted(t, plugin(t, Args{}),
		gpuPod("a", 1, at(5)),
		gpuPod("g-late", 1, at(40), inGroup("g", 3)), // its group arrived at 1
		gpuPod("g-first", 1, at(1), inGroup("g", 3)),
		gpuPod("b", 1, at(1)),
		gpuPod("g-mid", 1, at(20), inGroup("g", 3)),
		vip,
	)
	// Priority first; then the group at its first pod's arrival, its
	// members together (the group's key "ns/g" sorts after "ns/b").
	assert.Equal(t, []string{"vip", "b", "g-first", "g-late", "g-mid", "a"}, got)
}

func TestArgs(t *testing.T) {
	for name, a := range map[string]Args{
		"order":          {Order: "lifo"},
		"gittins":        {Order: OrderGittins},
		"samples":        {Order: OrderGittins, GittinsSamples: []float64{1, -1}},
		"thresholds":     {LASThresholds: []float64{10, 5}},
		"timeout":        {PermitTimeoutSeconds: -1},
		"weights":        {LinkWeight: -1},
		"backoff":        {BackoffSeconds: 1 << 20},
		"quantum is NaN": {GittinsQuantum: nan()},
	} {
		t.Run(name, func(t *testing.T) {
			assert.ErrorIs(t, a.validate(), ErrArgs)
		})
	}
	_, err := decodeArgs(unknown(`{"order":"las","lasThreshold":[1]}`))
	require.ErrorIs(t, err, ErrArgs, "a misspelt field is an error")
	a, err := decodeArgs(unknown(`{"order":"srtf","permitTimeoutSeconds":5,"backoffSeconds":-1}`))
	require.NoError(t, err)
	assert.Equal(t, 5*time.Second, a.permitTimeout())
	assert.Equal(t, time.Duration(-1), a.backoff())
	a, err = decodeArgs(nil)
	require.NoError(t, err)
	assert.Equal(t, 60*time.Second, a.permitTimeout())
	assert.Equal(t, 10*time.Second, a.backoff())
	l, p, g := a.weights()
	assert.Equal(t, [3]float64{2, 1, 2}, [3]float64{l, p, g})
}
