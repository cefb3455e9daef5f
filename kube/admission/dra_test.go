package admission

import (
	"context"
	"fmt"
	"testing"

	"github.com/gpusched/gpusched/kube/internal/dratest"
	"github.com/gpusched/gpusched/kube/model"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
)

// A node whose GPUs NVIDIA's DRA driver publishes counts beside a
// device-plugin node, for workloads that ask for nvidia.com/gpu, where a
// DeviceClass maps the resource (else the driver would not serve them):
// its GPUs come from its slices, a NoExecute taint fails a GPU (its jobs
// are evicted), a NoSchedule taint holds it out of the capacity without
// failing it (the scheduler plugin keeps new pods off it). Config.NoDRA
// leaves the node out.
func TestDRANodes(t *testing.T) {
	for _, tc := range []struct {
		name          string
		noDRA, mapped bool
		want          int
	}{{"dra", false, true, 4 + 2}, {"no-dra", true, true, 4}, {"no mapping", false, false, 4}} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			gpus := dratest.Node(4, "NVIDIA A100-PCIE-40GB", 40, false)
			gpus[2].Taints = []resourcev1.DeviceTaint{{Key: "gpu.nvidia.com/xid", Value: "79", Effect: resourcev1.DeviceTaintEffectNoSchedule}}
			gpus[3].Taints = []resourcev1.DeviceTaint{{Key: "example.com/drain", Effect: resourcev1.DeviceTaintEffectNoExecute}}
			dn := dratest.ReadyNode("dra-0", map[string]string{model.LabelProduct: "NVIDIA-A100-PCIE-40GB", "pool": "test"})
			objs := []runtime.Object{gpuNode("dp-0", "NVIDIA-A100-PCIE-40GB", 4), dn}
			if tc.mapped {
				objs = append(objs, dratest.DeviceClass())
			}
			for _, s := range dratest.Slices("dra-0", gpus) {
				objs = append(objs, s)
			}
			cs := fake.NewClientset(objs...)
			for i := range 9 {
				_, err := cs.CoreV1().Pods(testNS).Create(ctx, gatedPod(testNS, fmt.Sprint("p", i), 1, nil), metav1.CreateOptions{})
				require.NoError(t, err)
			}
			c := newController(t, cs, &testClock{}, func(cfg *Config) { cfg.NoDRA = tc.noDRA })
			res, err := syncRound(ctx, c)
			require.NoError(t, err)
			assert.Len(t, res.Admitted, tc.want)
			assert.Equal(t, tc.want, c.capacity["a100"], "4 + 4 less the tainted ones: NoExecute failed, NoSchedule held")
		})
	}
}

// Members of an upstream PodGroup (spec.schedulingGroup) are admitted as
// pods of their own, as before gpusched read PodGroups, even when they
// are also labelled into a gpusched group: not refused as a group of one
// with three members.
func TestUpstreamPodGroupMembersAdmitted(t *testing.T) {
	ctx := context.Background()
	cs := fake.NewClientset(gpuNode("n0", "NVIDIA-A100-PCIE-40GB", 8))
	for i := range 3 {
		p := gatedPod(testNS, fmt.Sprint("m", i), 1, map[string]string{model.AnnotationMinMember: "3"})
		p.Labels = map[string]string{model.LabelPodGroup: "trio"}
		p.Spec.SchedulingGroup = &corev1.PodSchedulingGroup{PodGroupName: ptrTo("trio")}
		_, err := cs.CoreV1().Pods(testNS).Create(ctx, p, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	c := newController(t, cs, &testClock{}, nil)
	res, err := syncRound(ctx, c)
	require.NoError(t, err)
	assert.Len(t, res.Admitted, 3)
}

// Where the API server serves PodGroups, the members of a gang (minCount
// 3) are admitted whole: two wait, the third brings the three in; a
// fourth, beyond minCount, joins them. Without the API, they are pods of
// their own (TestUpstreamPodGroupMembersAdmitted).
func TestUpstreamPodGroupAdmittedWhole(t *testing.T) {
	ctx := context.Background()
	cs := fake.NewClientset(gpuNode("n0", "NVIDIA-A100-PCIE-40GB", 8), &schedulingv1beta1.PodGroup{
		ObjectMeta: metav1.ObjectMeta{Namespace: testNS, Name: "trio"},
		Spec: schedulingv1beta1.PodGroupSpec{SchedulingPolicy: schedulingv1beta1.PodGroupSchedulingPolicy{
			Gang: &schedulingv1beta1.GangSchedulingPolicy{MinCount: 3}}},
	})
	cs.Resources = []*metav1.APIResourceList{{GroupVersion: "scheduling.k8s.io/v1beta1",
		APIResources: []metav1.APIResource{{Name: "podgroups", Namespaced: true, Kind: "PodGroup"}}}}
	member := func(i int) {
		p := gatedPod(testNS, fmt.Sprint("m", i), 1, nil)
		p.Spec.SchedulingGroup = &corev1.PodSchedulingGroup{PodGroupName: ptrTo("trio")}
		_, err := cs.CoreV1().Pods(testNS).Create(ctx, p, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	member(0)
	member(1)
	c := newController(t, cs, &testClock{}, nil)
	res, err := syncRound(ctx, c)
	require.NoError(t, err)
	assert.Empty(t, res.Admitted, "two of the three members: the gang waits")
	member(2)
	member(3)
	res, err = syncRound(ctx, c)
	require.NoError(t, err)
	assert.Len(t, res.Admitted, 1, "one workload, the group")
	for i := range 4 {
		p := getPod(t, cs, testNS, fmt.Sprint("m", i))
		assert.False(t, hasGate(p.Spec.SchedulingGates), "member %d admitted with the group", i)
	}
}
