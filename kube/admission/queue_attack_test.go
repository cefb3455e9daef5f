package admission

import (
	"context"
	"testing"

	"github.com/gpusched/gpusched/kube/tenancy"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

// queueAttackTenancy: tenant att owns namespaces att and att-dev, with a
// batch queue both may use and an urgent queue (job weight 4, priority up
// to 1000) only att may use; vip (weight 3) and v1 are other tenants.
const queueAttackTenancy = `
tenants:
- name: att
  namespaces: [att, att-dev]
  defaultQueue: att-batch
  queues:
  - {name: att-batch}
  - {name: att-urgent, namespaces: [att], jobWeight: 4, maxPriority: 1000}
- {name: vip, weight: 3, namespaces: [vip]}
- {name: v1, namespaces: [v1]}
`

// The queue label's other ways in, as a tenant with pod- and Job-creation
// rights would try them: a Job (not a pod) labelled with another tenant's
// queue, a pod of att-dev labelled with its own tenant's queue that
// att-dev may not use (both refused: Warning event, never admitted, the
// others unaffected), a Job whose pod template (not the Job) names the
// other tenant's queue (the template's labels are not read: it runs in its
// own tenant's default queue, at its weights), and a pod of a
// PriorityClass far above its queue's cap (capped at 0, so the victim's
// equal job still shares the cluster with it).
func TestQueueLabelAttacks(t *testing.T) {
	if raceEnabled {
		t.Skip("single-goroutine test: nothing for -race to find, and slow under it")
	}
	ctx := context.Background()
	stolen := gatedJob("att", "stolen", 1, 4, rates("v100=1"))
	stolen.Labels = map[string]string{tenancy.LabelQueue: "vip"}
	urgent := gatedPod("att-dev", "urgent", 4, rates("v100=1"))
	urgent.Labels = map[string]string{tenancy.LabelQueue: "att-urgent"}
	tmpl := gatedJob("att", "templated", 1, 4, rates("v100=1"))
	tmpl.Spec.Template.Labels = map[string]string{tenancy.LabelQueue: "vip"}
	loud := gatedPod("att-dev", "loud", 4, rates("v100=1"))
	loud.Spec.PriorityClassName = "system-critical-ish"
	cs := fake.NewClientset(gpuNode("n1", "Tesla-V100-SXM2-16GB", 4), gpuNode("n2", "Tesla-V100-SXM2-16GB", 4),
		stolen, urgent, tmpl, loud, gatedPod("v1", "victim", 4, rates("v100=1")),
		&schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "system-critical-ish"}, Value: 1000000000})
	ten, err := tenancy.Parse([]byte(queueAttackTenancy))
	require.NoError(t, err)
	clk := &testClock{}
	zero := int64(0)
	c := newController(t, cs, clk, func(cfg *Config) {
		cfg.Tenancy, cfg.Policy, cfg.PodDeletionGrace = ten, mustPolicy(t, "hierarchical"), &zero
	})
	ran := map[string]int{}
	for r := range 20 {
		clk.t = float64(r) * 360
		res, err := syncRound(ctx, c)
		require.NoError(t, err)
		checkInvariants(t, cs, res)
		assert.Equal(t, []string{"job/att/stolen", "pod/att-dev/urgent"}, res.Skipped, "round %d", r)
		for k := range res.Admitted {
			ran[k]++
		}
	}
	assert.Zero(t, ran["job/att/stolen"]+ran["pod/att-dev/urgent"], "refused workloads ran: %v", ran)
	for _, ns := range []string{"att", "att-dev"} {
		assert.Positive(t, reasons(t, cs, ns)[ReasonMalformed], "%s: the refusal is reported", ns)
	}
	st, err := c.sched.Status("job/att/templated")
	require.NoError(t, err)
	assert.Equal(t, "att", st.Spec.Tenant, "a template's label does not move the Job")
	assert.InDelta(t, 1, st.Spec.Weight, 0, "att-batch's job weight, not vip's tenant weight")
	st, err = c.sched.Status("pod/att-dev/loud")
	require.NoError(t, err)
	assert.Zero(t, st.Spec.Priority, "capped at att-batch's maxPriority")
	// 8 GPUs, three 4-GPU jobs of two tenants of weight 1: the victim's
	// tenant gets half the cluster, every round (att's two share the
	// other half); the priority class bought att nothing.
	assert.Equal(t, 20, ran["pod/v1/victim"], "%v", ran)
	assert.Equal(t, 20, ran["job/att/templated"]+ran["pod/att-dev/loud"], "%v", ran)
	events, err := cs.CoreV1().Events("att").List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	found := false
	for _, e := range events.Items {
		found = found || e.InvolvedObject.Name == "stolen" && e.Type == corev1.EventTypeWarning
	}
	assert.True(t, found, "the Job's refusal is on the Job")
}
