package admission

import (
	"context"
	"testing"
	"time"

	"github.com/gpusched/gpusched/kube/tenancy"
	"github.com/gpusched/gpusched/topology"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes/fake"
)

// runningJobPod is a pod the job controller runs for a running Job, bound
// to a node.
func runningJobPod(j *batchv1.Job, name, node string, gpus int) *corev1.Pod {
	p := forgedJobPod(j, name, gpus)
	p.Spec.NodeName = node
	return p
}

// A pod of another namespace that names a victim's Job UID as its
// controller is none of that Job's: the victim, preempted and followed
// while its pods still hold GPUs, is charged what its own pod holds (4
// GPUs for a minute: 240 GPU-seconds), not the attacker's pod too. Before
// the fix the pod index was keyed by the Job's UID alone, and the
// attacker's 4 GPUs in namespace att were charged to v1 as well: 480
// GPU-seconds, every minute its own pods held any (and, with the
// victim's pods gone, for as long as the attacker's ran); and an
// unbound such pod made the victim's Job count as not all bound
// (allBound: its run was charged as if it waited for GPUs).
func TestJobPodIndexByNamespace(t *testing.T) {
	ctx := context.Background()
	victim := apiJob("v1", "train", 1, 4)
	victim.Spec.Suspend = ptrTo(false)
	victim.Spec.Template.Spec.SchedulingGates = nil
	own := runningJobPod(victim, "train-0", "n1", 4)
	forged := runningJobPod(victim, "forged", "n2", 4)
	forged.Namespace = "att"
	pending := runningJobPod(victim, "pending", "", 4)
	pending.Namespace = "att"
	cs := fake.NewClientset(victim, own, forged, pending,
		gpuNode("n1", "Tesla-V100-SXM2-16GB", 4), gpuNode("n2", "Tesla-V100-SXM2-16GB", 4))
	ten, err := tenancy.Parse([]byte(attackTenancy))
	require.NoError(t, err)
	wall := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	c := newController(t, cs, &testClock{}, func(cfg *Config) {
		cfg.Tenancy = ten
		cfg.Now = func() time.Time { return wall }
	})
	require.NoError(t, c.SyncCaches(ctx))
	require.NoError(t, c.syncNodes())
	w := &workload{key: "job/v1/train", kind: kindJob, ns: "v1", name: "train", job: victim}
	assert.Equal(t, map[topology.GPUType]int{topology.V100: 4}, c.podsHold(w.podIndex()), "its own pod's GPUs")
	assert.True(t, c.allBound(w.podIndex()), "its own pod is bound")
	c.reportLast(wall)
	c.follow(w.key, w.podIndex())
	wall = wall.Add(time.Minute)
	c.countAfterLease(wall)
	held := c.afterLease[w.key].held[topology.V100]
	t.Logf("victim charged %v GPU-seconds for a minute of its 4-GPU pod", held)
	assert.InDelta(t, 240, held, 1e-9)
}
