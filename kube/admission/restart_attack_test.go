package admission

import (
	"context"
	"testing"
	"time"

	"github.com/gpusched/gpusched/kube/tenancy"
	"github.com/gpusched/gpusched/topology"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

// restartRun is what a run of the restart attack measured, by namespace:
// GPU-rounds held (GPU-seconds on the node / 360) and the time the core
// charged its jobs, in rounds (attained time / 360 s).
type restartRun struct {
	held, charged map[string]float64
}

// runRestartAttack plays an admitted Job whose tenant deletes its pods
// just before each round's end (review of #40): one node of 8 V100s,
// hierarchical fairness between two tenants, att's Job of one 4-GPU pod
// (a day's terminationGracePeriodSeconds) and two 4-GPU Jobs of v1, a and
// b (whose pods exit at once: grace 0), 10 rounds of 360 s. att's share is
// its 4 GPUs: it is admitted every round; v1's Jobs take turns on the
// other 4. With attack, 15 s before each round ends att deletes its pod
// with its own grace: the job controller replaces it at once (it waits:
// the node is full), the controller cuts the old pod's deletion to the
// admin's maximum grace (30 s from its start: 15 s into the next round).
// At the round v1's Jobs swap; the replacement, queued first, takes the
// GPUs of the v1 Job that left, and the v1 Job admitted waits for the old
// pod to go: 15 s a round. The simulation (kubeSim, its job controller)
// steps every 15 s.
func runRestartAttack(t *testing.T, attack bool) restartRun {
	t.Helper()
	ctx := context.Background()
	day, zero := int64(86400), int64(0)
	att := gatedJob("att", "train", 1, 4, rates("v100=1"))
	att.Spec.Template.Spec.TerminationGracePeriodSeconds = &day
	va, vb := gatedJob("v1", "a", 1, 4, rates("v100=1")), gatedJob("v1", "b", 1, 4, rates("v100=1"))
	va.Spec.Template.Spec.TerminationGracePeriodSeconds = &zero
	vb.Spec.Template.Spec.TerminationGracePeriodSeconds = &zero
	cs := fake.NewClientset(gpuNode("n1", "Tesla-V100-SXM2-16GB", 8), att, va, vb)
	wall := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	sim := newKubeSim(t, cs, &wall, map[string]int{"n1": 8})
	ten, err := tenancy.Parse([]byte(attackTenancy))
	require.NoError(t, err)
	clk := &testClock{}
	c := newController(t, cs, clk, func(cfg *Config) {
		cfg.Policy, cfg.Tenancy, cfg.Grace = mustPolicy(t, "hierarchical"), ten, 30*time.Second
		cfg.Now = func() time.Time { return wall }
	})
	const step, steps = 15 * time.Second, 24
	run := restartRun{held: map[string]float64{}, charged: map[string]float64{}}
	for r := range 10 {
		clk.t = float64(r) * 360
		res, err := syncRound(ctx, c)
		require.NoError(t, err)
		require.Contains(t, res.Admitted, "job/att/train", "round %d", r)
		for i := range steps {
			if attack && i == steps-1 {
				deleteLivePods(ctx, t, sim, "att")
			}
			sim.jobController(ctx)
			sim.step()
			for ns, g := range sim.held() {
				run.held[ns] += float64(g) * step.Seconds() / 360
			}
			wall = wall.Add(step)
			syncSweep(ctx, t, c)
		}
	}
	clk.t = 10 * 360 // reports the 10th round
	_, err = syncRound(ctx, c)
	require.NoError(t, err)
	for _, key := range []string{"job/att/train", "job/v1/a", "job/v1/b"} {
		st, err := c.sched.Status(key)
		require.NoError(t, err)
		run.charged[st.Spec.Tenant] += st.Attained[topology.V100] / 360
	}
	return run
}

// deleteLivePods deletes, as their tenant would, the bound pods of a
// namespace that are not going yet (each with its own grace).
func deleteLivePods(ctx context.Context, t *testing.T, sim *kubeSim, ns string) {
	t.Helper()
	for _, p := range sim.pods() {
		if p.Namespace == ns && p.Spec.NodeName != "" && p.DeletionTimestamp == nil && !terminal(p) {
			require.NoError(t, sim.cs.CoreV1().Pods(ns).Delete(ctx, p.Name, metav1.DeleteOptions{}))
		}
	}
}

// An admitted Job's pods that its tenant deletes hold their GPUs until
// gone, beside the replacements its job controller makes at once: the
// GPUs they hold beyond the Job's are charged to it, and the victim that
// waits for them is not charged the wait. Each tenant is charged what its
// pods held (GPU-rounds / 4 GPUs), within 0.05 rounds (the simulation's
// step, 15 s, is 0.04 of a round). Before, the old pod's 15 s a round
// beyond the Job's GPUs were free, and the v1 Job admitted in each round
// was charged its wait: with the attack att held 41.5 GPU-rounds and was
// charged 10.0 rounds (10.38 held), v1 held 38.5 and was charged 10.0
// (9.63 held).
func TestAdmittedJobRestartCharged(t *testing.T) {
	if raceEnabled {
		t.Skip("single-goroutine simulation: nothing for -race to find, and slow under it")
	}
	honest, attack := runRestartAttack(t, false), runRestartAttack(t, true)
	for name, r := range map[string]restartRun{"honest": honest, "attack": attack} {
		t.Logf("%s: GPU-rounds held att %.2f, v1 %.2f; rounds charged att %.3f, v1 %.3f", name, r.held["att"], r.held["v1"], r.charged["att"], r.charged["v1"])
		for _, ns := range []string{"att", "v1"} {
			assert.InDelta(t, r.held[ns]/4, r.charged[ns], 0.05, "%s: %s's charge", name, ns)
		}
	}
	assert.Greater(t, attack.held["att"], honest.held["att"], "the old pods held GPUs beyond the Job's")
}

// The GPUs an admitted Job's terminating pods hold beyond its lease are
// out of the core's plan until they go (review of #40). One node of 8
// V100s; att's Job (one 4-GPU pod, a day's grace) runs alone in round 0;
// its tenant deletes the pod, whose replacement is bound at once on the
// other 4 GPUs, and v1's 4-GPU pod arrives. Round 1 comes 10 s later,
// while the old pod still holds its 4 GPUs: the core plans the 4 GPUs
// left, for one of the two 4-GPU jobs. Before, it planned all 8, for
// both: v1 admitted beside att's two pods, 12 GPUs asked for on a node of
// 8.
func TestRestartedJobPodsHeldInThePlan(t *testing.T) {
	ctx := context.Background()
	day := int64(86400)
	att := gatedJob("att", "train", 1, 4, rates("v100=1"))
	att.Spec.Template.Spec.TerminationGracePeriodSeconds = &day
	cs := fake.NewClientset(gpuNode("n1", "Tesla-V100-SXM2-16GB", 8), att)
	wall := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	sim := newKubeSim(t, cs, &wall, map[string]int{"n1": 8})
	ten, err := tenancy.Parse([]byte(attackTenancy))
	require.NoError(t, err)
	clk := &testClock{}
	c := newController(t, cs, clk, func(cfg *Config) {
		cfg.Tenancy = ten
		cfg.Now = func() time.Time { return wall }
	})
	res, err := syncRound(ctx, c)
	require.NoError(t, err)
	require.Equal(t, []string{"job/att/train"}, res.Started)
	sim.jobController(ctx)
	sim.step()
	deleteLivePods(ctx, t, sim, "att")
	sim.jobController(ctx)
	sim.step()
	require.Equal(t, map[string]int{"att": 8}, sim.held(), "the old pod and its replacement")
	_, err = cs.CoreV1().Pods("v1").Create(ctx, gatedPod("v1", "job", 4, rates("v100=1")), metav1.CreateOptions{})
	require.NoError(t, err)

	wall = wall.Add(10 * time.Second)
	clk.t = 360
	res, err = syncRound(ctx, c)
	require.NoError(t, err)
	assert.Len(t, res.Assigned, 1, "the core plans the 4 GPUs the old pod leaves: %v", res.Assigned)
}
