package kueue_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/gpusched/gpusched/flavor"
	"github.com/gpusched/gpusched/kube/kueue"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// labelNamespace sets a label on a namespace of the fake API (the
// admin's act).
func (c *cluster) labelNamespace(name, key, value string) {
	c.t.Helper()
	n, err := c.cs.CoreV1().Namespaces().Get(context.Background(), name, metav1.GetOptions{})
	require.NoError(c.t, err)
	n.Labels[key] = value
	_, err = c.cs.CoreV1().Namespaces().Update(context.Background(), n, metav1.UpdateOptions{})
	require.NoError(c.t, err)
}

// A tenant cannot stall another tenant's ClusterQueue through a LocalQueue
// of its own (review of #40, HIGH). ClusterQueue team-b (4 nominal V100s)
// takes the namespaces labelled team=b. Tenant a makes, in its own
// namespace, LocalQueue steal for team-b and submits 4 gated 1-GPU
// workloads there, older than b's 4 (and one ungated). Kueue admits none
// of a's there (namespace mismatch), so counting them would give them
// team-b's quota at every round: before the fix the round counted 9
// pending workloads in team-b and released a's 4 (the older), b's 0, and
// the same at every round after. Now a's are no demand of team-b: they
// stay gated with a Warning, the ungated one is not counted, and b's 4
// start. Until the admin labels b, b's wait gated too (the selector takes
// no namespace yet); a ClusterQueue without a namespaceSelector takes no
// namespace at all, as in Kueue.
func TestNamespaceSelectorKeepsOtherTenantsOut(t *testing.T) {
	objs := []*unstructured.Unstructured{flavorObj("v100", v100),
		withNamespaceSelector(cqObj("team-b", "", "", quota{"v100", 4, -1, -1}), map[string]any{"matchLabels": map[string]any{"team": "b"}}),
		withNamespaceSelector(cqObj("no-selector", "", "", quota{"v100", 4, -1, -1}), nil),
		lqObj("b", "q", "team-b"), lqObj("a", "steal", "team-b"), lqObj("c", "q", "no-selector")}
	for i := range 4 {
		objs = append(objs, wl{ns: "a", name: fmt.Sprintf("steal-%d", i), queue: "steal", gpus: 1, gate: kueue.DefaultGate, created: int64(i)}.objects()...)
		objs = append(objs, wl{ns: "b", name: fmt.Sprintf("own-%d", i), queue: "q", gpus: 1, gate: kueue.DefaultGate, created: int64(10 + i)}.objects()...)
	}
	objs = append(objs, wl{ns: "a", name: "steal-open", queue: "steal", gpus: 1, created: 5}.objects()...)
	objs = append(objs, wl{ns: "c", name: "nowhere", queue: "q", gpus: 1, gate: kueue.DefaultGate}.objects()...)
	c := newCluster(t, nil, objs...)

	// No namespace labelled team=b yet: nothing of team-b's is demand.
	r := c.round()
	assert.Zero(t, r.Pending)
	assert.Empty(t, r.Decisions)
	assert.Empty(t, r.Released)
	ev := c.events()
	assert.Len(t, grep(ev, "does not take workloads of namespace a (its namespaceSelector)"), 4, "%q", ev)
	assert.Len(t, grep(ev, "does not take workloads of namespace b (its namespaceSelector)"), 4, "%q", ev)
	nowhere := grep(ev, "waits gated: ClusterQueue no-selector (of its LocalQueue \"q\") does not take workloads of namespace c")
	require.Len(t, nowhere, 1, "a ClusterQueue without namespaceSelector takes no namespace: %q", ev)
	assert.Contains(t, nowhere[0], "Warning")
	assert.Empty(t, grep(ev, "steal-open"), "an ungated workload outside the selector: nothing to say")

	// The admin labels b: b's 4 start; a's stay gated, and are not counted.
	c.labelNamespace("b", "team", "b")
	require.Eventually(t, func() bool {
		var err error
		r, err = c.ctrl.Round(context.Background())
		return err == nil && r.Pending > 0
	}, 5*time.Second, 10*time.Millisecond, "the namespace informer sees the label")
	assert.Equal(t, 4, r.Pending)
	assert.Equal(t, map[string]int{"team-b": 4}, startsBy(r))
	assert.Equal(t, []string{"b/own-0", "b/own-1", "b/own-2", "b/own-3"}, r.Released)
	for i := range 4 {
		assert.Equal(t, flavor.Start, r.Decisions[fmt.Sprintf("b/own-%d", i)].Why)
		_, counted := r.Decisions[fmt.Sprintf("a/steal-%d", i)]
		assert.False(t, counted, "a/steal-%d counted in team-b", i)
		assert.Equal(t, kueue.DefaultGate, c.get(jobsGVR, "a", fmt.Sprintf("job-steal-%d", i)).GetAnnotations()[kueue.AnnotationAdmissionGatedBy])
	}
	assert.NotContains(t, r.Decisions, "a/steal-open")
	assert.Empty(t, grep(c.patches("workloads"), "steal-"), "no selector written on a's workloads")
	assert.Empty(t, grep(c.events(), "namespace a"), "said once")
}
