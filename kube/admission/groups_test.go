package admission

import (
	"context"
	"testing"

	"github.com/gpusched/gpusched/kube/model"
	"github.com/gpusched/gpusched/topology"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

func member(group, name string, min string, gpus int) *corev1.Pod {
	p := gatedPod(testNS, name, gpus, map[string]string{model.AnnotationMinMember: min, model.AnnotationThroughput: "v100=2,k80=1"})
	p.Labels = map[string]string{model.LabelPodGroup: group}
	return p
}

// A pod group is one job of all its members' GPUs, admitted whole once
// every member exists; a group still missing members waits, unreported.
func TestPodGroupAdmittedWhole(t *testing.T) {
	ctx := context.Background()
	cs := fake.NewClientset(gpuNode("v1", "Tesla-V100-SXM2-16GB", 4), gpuNode("v2", "Tesla-V100-SXM2-16GB", 4))
	for _, p := range []*corev1.Pod{member("g", "g-0", "2", 2), member("g", "g-1", "2", 2), member("h", "h-0", "2", 4)} {
		_, err := cs.CoreV1().Pods(testNS).Create(ctx, p, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	clk := &testClock{}
	c := newController(t, cs, clk, nil)
	res, err := syncRound(ctx, c)
	require.NoError(t, err)
	assert.Equal(t, map[string]topology.GPUType{"group/team-a/g": topology.V100}, res.Admitted)
	assert.Equal(t, 4, res.GPUs["group/team-a/g"])
	assert.Empty(t, res.Skipped)
	for _, n := range []string{"g-0", "g-1"} {
		p := getPod(t, cs, testNS, n)
		assert.False(t, hasGate(p.Spec.SchedulingGates), n)
		assert.Equal(t, "v100", p.Annotations[AnnotationAdmittedType])
	}
	assert.True(t, hasGate(getPod(t, cs, testNS, "h-0").Spec.SchedulingGates))

	// The second member of h arrives: h (8 GPUs over two nodes) and g
	// share the 8 GPUs over the rounds, each admitted whole.
	_, err = cs.CoreV1().Pods(testNS).Create(ctx, member("h", "h-1", "2", 4), metav1.CreateOptions{})
	require.NoError(t, err)
	seen := map[string]bool{}
	for round := 1; round < 10; round++ { // the policy solves again at 1920 s (MinResetInterval)
		clk.t = float64(round) * 360
		res, err := syncRound(ctx, c)
		require.NoError(t, err)
		checkInvariants(t, cs, res)
		for k := range res.Admitted {
			seen[k] = true
		}
	}
	assert.True(t, seen["group/team-a/h"] && seen["group/team-a/g"], "%v", seen)
}

// A node that goes NotReady takes its GPUs out of the capacity; a job on
// it is moved to another node or waits.
func TestNodeNotReady(t *testing.T) {
	ctx := context.Background()
	cs := fake.NewClientset(gpuNode("v1", "Tesla-V100-SXM2-16GB", 4), gpuNode("v2", "Tesla-V100-SXM2-16GB", 4))
	for _, n := range []string{"a", "b"} {
		_, err := cs.CoreV1().Pods(testNS).Create(ctx, gatedPod(testNS, n, 4, rates("v100=1")), metav1.CreateOptions{})
		require.NoError(t, err)
	}
	clk := &testClock{}
	c := newController(t, cs, clk, nil)
	res, err := syncRound(ctx, c)
	require.NoError(t, err)
	require.Len(t, res.Admitted, 2)
	n, err := cs.CoreV1().Nodes().Get(ctx, "v2", metav1.GetOptions{})
	require.NoError(t, err)
	n.Status.Conditions[0].Status = corev1.ConditionFalse
	_, err = cs.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{})
	require.NoError(t, err)
	clk.t = 360
	res, err = syncRound(ctx, c)
	require.NoError(t, err)
	assert.Equal(t, 4, res.Capacity[topology.V100])
	assert.Len(t, res.Admitted, 1)
	checkInvariants(t, cs, res)
}
