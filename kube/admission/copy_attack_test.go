package admission

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/gpusched/gpusched/kube/tenancy"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
)

// testCopyKey signs the requeued pods' copies in the tests.
var testCopyKey = []byte("0123456789abcdef0123456789abcdef")

// Without the admission policies, a bare pod larger than a copy may be
// (maxPodCopy) that runs ungated is preempted all the same: deleted
// without a copy, with a Warning event saying it cannot be requeued and
// why. It was never preempted (its copy could not be kept), and ran on
// GPUs no round gave it.
func TestOversizedBypassIsPreempted(t *testing.T) {
	ctx := context.Background()
	huge := gatedPod("att", "huge", 4, rates("v100=1"))
	huge.Spec.SchedulingGates = nil
	huge.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "BLOB", Value: strings.Repeat("x", maxPodCopy)}}
	cs := fake.NewClientset(gpuNode("n1", "Tesla-V100-SXM2-16GB", 4), gpuNode("n2", "Tesla-V100-SXM2-16GB", 4),
		huge, gatedPod("v1", "job", 4, rates("v100=1")))
	ten, err := tenancy.Parse([]byte(attackTenancy))
	require.NoError(t, err)
	zero := int64(0)
	clk := &testClock{}
	c := newController(t, cs, clk, func(cfg *Config) { cfg.Tenancy, cfg.PodDeletionGrace = ten, &zero })
	res, err := syncRound(ctx, c)
	require.NoError(t, err)
	assert.Equal(t, []string{"pod/att/huge"}, res.Bypassed)
	_, err = cs.CoreV1().Pods("att").Get(ctx, "huge", metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err), "the oversized pod is deleted: %v", err)
	assert.Empty(t, c.state.Requeue, "no copy to create again")
	assert.Positive(t, reasons(t, cs, "att")[ReasonNotRequeued], "the tenant is told")
	for r := 1; r < 3; r++ {
		clk.t = float64(r) * 360
		res, err = syncRound(ctx, c)
		require.NoError(t, err)
		assert.Equal(t, map[string]int{"pod/v1/job": 4}, res.GPUs, "round %d", r)
	}
}

// forgeCopy puts in the state of c a requeued pod ns/name whose copy
// (ConfigMap, the pod's JSON) is p, with no signature, as one who can
// write ConfigMaps in the controller's namespace could.
func forgeCopy(t *testing.T, cs *fake.Clientset, c *Controller, p *corev1.Pod) {
	t.Helper()
	b, err := json.Marshal(p)
	require.NoError(t, err)
	name := requeueName(DefaultStateName, p.Namespace, p.Name)
	_, err = cs.CoreV1().ConfigMaps("gpusched").Create(context.Background(), &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "gpusched"}, BinaryData: map[string][]byte{requeueKey: b}}, metav1.CreateOptions{})
	require.NoError(t, err)
	key := "pod/" + p.Namespace + "/" + p.Name
	c.state.Requeue[key] = append(c.state.Requeue[key], requeued{NS: p.Namespace, Name: p.Name, Old: types.UID("forged-" + p.Name), Copy: name})
}

// One who can write ConfigMaps in the controller's namespace (not pods
// elsewhere) writes copies of pods to create: one in kube-system (no
// tenant's), one in a tenant's namespace. The controller creates neither:
// each copy's signature (HMAC with the key of its Secret) does not
// verify, or its namespace is not managed; the copy is dropped with a
// Warning event on the state ConfigMap. A genuine copy, kept across a
// restart, is created again. Before, both forged pods were created.
func TestForgedCopiesAreDropped(t *testing.T) {
	ctx := context.Background()
	cs := fake.NewClientset(gpuNode("n1", "Tesla-V100-SXM2-16GB", 4))
	ten, err := tenancy.Parse([]byte(attackTenancy))
	require.NoError(t, err)
	zero := int64(0)
	mod := func(cfg *Config) {
		cfg.Tenancy, cfg.PodDeletionGrace = ten, &zero
		cfg.CopyKey = testCopyKey
	}
	clk := &testClock{}
	a := newController(t, cs, clk, mod)
	// A genuine copy: a bare pod the controller deleted to requeue; the
	// controller stops before it creates it again.
	real := gatedPod("v1", "real", 4, rates("v100=1"))
	_, err = cs.CoreV1().Pods("v1").Create(ctx, real, metav1.CreateOptions{})
	require.NoError(t, err)
	require.NoError(t, a.deleteAndRequeue(ctx, "pod/v1/real", real))
	evil := gatedPod("kube-system", "evil", 0, nil)
	evil.Spec.SchedulingGates = nil
	evil.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{Privileged: ptrTo(true)}
	forgeCopy(t, cs, a, evil)
	sneaky := gatedPod("v2", "sneaky", 4, nil)
	forgeCopy(t, cs, a, sneaky)
	require.NoError(t, a.save(ctx))
	a.Close()

	b := newController(t, cs, clk, mod)
	require.NoError(t, b.Sweep(ctx))
	_, err = cs.CoreV1().Pods("kube-system").Get(ctx, "evil", metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err), "a pod created in kube-system from a forged copy: %v", err)
	_, err = cs.CoreV1().Pods("v2").Get(ctx, "sneaky", metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err), "a pod created from a forged copy: %v", err)
	got := getPod(t, cs, "v1", "real")
	assert.NotEqual(t, real.UID, got.UID, "the genuine copy is created again")
	assert.True(t, hasGate(got.Spec.SchedulingGates))
	assert.Empty(t, b.state.Requeue, "the forged entries are dropped")
	cms, err := cs.CoreV1().ConfigMaps("gpusched").List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	for _, cm := range cms.Items {
		assert.NotContains(t, cm.Name, "-rq-", "copies are deleted")
	}
	evs, err := cs.CoreV1().Events("gpusched").List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	bad := 0
	for _, e := range evs.Items {
		if e.Reason == ReasonBadCopy && e.Type == corev1.EventTypeWarning && e.InvolvedObject.Name == DefaultStateName {
			bad++
		}
	}
	assert.Equal(t, 2, bad, "a Warning event on the state ConfigMap for each forged copy")
}

// Without a copy key (Config.CopyKey nil: a random key of each process),
// a restarted controller cannot verify the copies the last one kept: it
// drops them with a Warning event rather than create a pod from a copy it
// cannot check.
func TestRandomCopyKeyDropsAfterRestart(t *testing.T) {
	ctx := context.Background()
	p := gatedPod(testNS, "x", 4, rates("v100=1"))
	cs := fake.NewClientset(gpuNode("n1", "Tesla-V100-SXM2-16GB", 4), p)
	zero := int64(0)
	mod := func(cfg *Config) { cfg.PodDeletionGrace = &zero }
	a := newController(t, cs, &testClock{}, mod)
	require.NoError(t, a.deleteAndRequeue(ctx, "pod/"+testNS+"/x", p))
	require.NoError(t, a.save(ctx))
	a.Close()
	b := newController(t, cs, &testClock{}, mod)
	require.NoError(t, b.Sweep(ctx))
	_, err := cs.CoreV1().Pods(testNS).Get(ctx, "x", metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err), "not created from a copy it cannot verify: %v", err)
	assert.Empty(t, b.state.Requeue)
	evs, err := cs.CoreV1().Events("gpusched").List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	require.Len(t, evs.Items, 1)
	assert.Equal(t, ReasonBadCopy, evs.Items[0].Reason)
	assert.Contains(t, evs.Items[0].Message, "signature does not verify")
}
