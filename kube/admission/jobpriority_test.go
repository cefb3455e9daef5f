package admission

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
)

// priorityTenancy: att's queue may reach priority 1000 (the admin trusts
// att's PriorityClasses up to there); the victims' queues stay at 0.
const priorityTenancy = `
tenants:
- {name: att, namespaces: [att], queues: [{name: att, maxPriority: 1000}]}
- {name: v1, namespaces: [v1]}
- {name: v2, namespaces: [v2]}
- {name: v3, namespaces: [v3]}
`

// A Job's priority is its template's PriorityClass, looked up (nothing
// resolves a Job template's spec.priority, which the tenant writes): a
// template spec.priority of 1e9 gets the attacker nothing, where before
// it was taken (capped at its queue's 1000) and put the attacker's Job in
// a tier above the victims' for all 20 rounds.
func TestJobTemplatePriorityIgnored(t *testing.T) {
	if raceEnabled {
		t.Skip("single-goroutine test: nothing for -race to find, and slow under it")
	}
	run := func(forged bool) *playground {
		j := apiJob("att", "train", 1, 4)
		if forged {
			j.Spec.Template.Spec.Priority = ptrTo(int32(1e9))
		}
		p := newPlayground(t, DefaultPolicy, priorityTenancy, nil, append(victimPods(), j)...)
		p.run(20, nil)
		return p
	}
	honest, p := run(false), run(true)
	t.Logf("Job template spec.priority 1e9: %v (honest: %v)", p, honest)
	assert.Equal(t, 40, honest.held["att"], "honest: %v", honest)
	assert.Equal(t, honest.held, p.held)
	st, err := p.c.sched.Status("job/att/train")
	require.NoError(t, err)
	assert.Zero(t, st.Spec.Priority)
}

// The template's priorityClassName is looked up among the cluster's
// PriorityClasses; without one, the global default class's value; a
// class that does not exist counts as none.
func TestJobPriorityFromClass(t *testing.T) {
	env := &specEnv{priorities: map[string]int32{"high": 500, "default": 7}, defaultPriority: 7}
	for _, c := range []struct {
		class    string
		priority *int32
		want     int32
	}{
		{"high", nil, 500},
		{"high", ptrTo(int32(1e9)), 500},
		{"", ptrTo(int32(1e9)), 7},
		{"", nil, 7},
		{"nope", nil, 7},
	} {
		j := apiJob("att", "j", 1, 1)
		j.Spec.Template.Spec.PriorityClassName, j.Spec.Template.Spec.Priority = c.class, c.priority
		w := &workload{kind: kindJob, job: j}
		assert.Equal(t, c.want, env.priority(w), "class %q, priority %v", c.class, c.priority)
	}
	// A pod's spec.priority is the API server's (Priority admission).
	p := gatedPod("att", "p", 1, nil)
	p.Spec.PriorityClassName, p.Spec.Priority = "high", ptrTo(int32(500))
	assert.Equal(t, int32(500), env.priority(&workload{kind: kindPod, pods: []*corev1.Pod{p}}))
}
