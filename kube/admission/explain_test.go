package admission

import (
	"context"
	"testing"

	"github.com/gpusched/gpusched/kube/model"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

// On two 8-GPU nodes a bare pod of 16 GPUs never runs (a pod runs on one
// node; the core would spread it over both): it stays out of the rounds,
// reported unrunnable. A pod group of two 8-GPU members, which the core
// places over both nodes, is admitted, steered to its type only (the API
// server takes one node name in a field selector).
func TestUnrunnableAndGroupsOverNodes(t *testing.T) {
	ctx := context.Background()
	cs := fake.NewClientset(gpuNode("v1", "Tesla-V100-SXM2-16GB", 8), gpuNode("v2", "Tesla-V100-SXM2-16GB", 8))
	_, err := cs.CoreV1().Pods(testNS).Create(ctx, gatedPod(testNS, "huge", 16, rates("v100=1")), metav1.CreateOptions{})
	require.NoError(t, err)
	for _, n := range []string{"m0", "m1"} {
		p := gatedPod(testNS, n, 8, map[string]string{model.AnnotationMinMember: "2"})
		p.Labels = map[string]string{model.LabelPodGroup: "g"}
		_, err := cs.CoreV1().Pods(testNS).Create(ctx, p, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	clk := &testClock{}
	c := newController(t, cs, clk, nil)
	res, err := syncRound(ctx, c)
	require.NoError(t, err)
	assert.Equal(t, []string{"pod/" + testNS + "/huge"}, res.Unrunnable)
	assert.NotContains(t, res.Assigned, "pod/"+testNS+"/huge")
	assert.Contains(t, res.Admitted, "group/"+testNS+"/g")
	cond := podCondition(getPod(t, cs, testNS, "huge"))
	require.NotNil(t, cond)
	assert.Equal(t, ReasonUnrunnable, cond.Reason)
	assert.Contains(t, cond.Message, "asks for 16 GPUs; the largest node of the types it may run on (v100) has 8")
	for _, n := range []string{"m0", "m1"} {
		p := getPod(t, cs, testNS, n)
		assert.False(t, hasGate(p.Spec.SchedulingGates), n)
		assert.Equal(t, []string{"Tesla-V100-SXM2-16GB"}, affinityProducts(&p.Spec), n)
		for _, term := range p.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
			assert.Empty(t, term.MatchFields, "%s: pinned to nodes %v", n, term.MatchFields)
		}
	}
	// A node of 16 GPUs joins: the pod is no longer unrunnable.
	_, err = cs.CoreV1().Nodes().Create(ctx, gpuNode("big", "Tesla-V100-SXM2-16GB", 16), metav1.CreateOptions{})
	require.NoError(t, err)
	clk.t = 360 // the next round (the core refuses one before the last one's end)
	res, err = syncRound(ctx, c)
	require.NoError(t, err)
	assert.Empty(t, res.Unrunnable)
	assert.Contains(t, res.Admitted, "pod/"+testNS+"/huge")
}
