package kueue_test

import (
	"testing"

	"github.com/gpusched/gpusched/allocation"
	"github.com/gpusched/gpusched/flavor"
	"github.com/gpusched/gpusched/kube/admission"
	"github.com/gpusched/gpusched/kube/kueue"
	"github.com/gpusched/gpusched/topology"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// policy returns a controller tuning for a policy of admission's names.
func policy(t *testing.T, name string) (allocation.Policy, func(*kueue.Config)) {
	t.Helper()
	pol, err := admission.PolicyByName(name)
	require.NoError(t, err)
	return pol, func(cfg *kueue.Config) { cfg.PolicyName = name }
}

// startsBy counts a round's starts by ClusterQueue.
func startsBy(r *kueue.RoundResult) map[string]int {
	n := map[string]int{}
	for _, d := range r.Decisions {
		if d.Why == flavor.Start {
			n[d.ClusterQueue]++
		}
	}
	return n
}

// cohortOf is two ClusterQueues, team-a (LocalQueue q of namespace a) and
// team-b (of b), in cohort co with nominal V100s each and their weights,
// and a third, pool, lending its V100s.
func cohortOf(nominal int, wa, wb string, pool int) []*unstructured.Unstructured {
	out := []*unstructured.Unstructured{flavorObj("v100", v100),
		cqObj("team-a", "co", wa, quota{"v100", nominal, -1, -1}), cqObj("team-b", "co", wb, quota{"v100", nominal, -1, -1}),
		lqObj("a", "q", "team-a"), lqObj("b", "q", "team-b")}
	if pool > 0 {
		out = append(out, cqObj("pool", "co", "", quota{"v100", pool, -1, -1}))
	}
	return out
}

// backlog is team-a's 32 older gated 1-GPU workloads and team-b's 4
// newer ones.
func backlog() []wl {
	var ws []wl
	for i := range 32 {
		ws = append(ws, wl{ns: "a", name: "a" + string(rune('A'+i/26)) + string(rune('a'+i%26)), queue: "q", gpus: 1, gate: kueue.DefaultGate, created: int64(i)})
	}
	for i := range 4 {
		ws = append(ws, wl{ns: "b", name: "b" + string(rune('a'+i)), queue: "q", gpus: 1, gate: kueue.DefaultGate, created: int64(100 + i)})
	}
	return ws
}

// The numbers on the controller, by the policies' names: in a
// cohort of 8 V100s (4 nominal each), team-a has 32 older pending 1-GPU
// workloads and team-b 4 newer ones. gpusched-kueue's default,
// quota-water-filling (water filling by ClusterQueue, nominal quotas as
// guarantees), starts 4 of each; per-job max-min-fairness, the former
// default, starts 7 of team-a's and 1 of team-b's (before per-queue
// starts, 8 and 0: every workload had the same share, and the older came
// first). A fair-sharing weight of 3 for team-a, with the V100s lent by a
// third queue (nominal 0 for both teams: weights share only what lies
// beyond the guarantees), starts 6 and 2 (before: 4 and 4).
func TestPolicyPerClusterQueue(t *testing.T) {
	run := func(name string, objs []*unstructured.Unstructured) map[string]int {
		t.Helper()
		pol, tune := policy(t, name)
		c := newCluster(t, pol, append(objs, objects(backlog()...)...)...)
		c.tune = tune
		c.ctrl = c.controller(pol)
		r := c.round()
		assert.Len(t, r.Released, len(r.Decisions)-grepWhy(r, flavor.NoShare)-grepWhy(r, flavor.Busy), "the starts are released")
		return startsBy(r)
	}
	assert.Equal(t, map[string]int{"team-a": 4, "team-b": 4}, run("quota-water-filling", cohortOf(4, "", "", 0)))
	assert.Equal(t, map[string]int{"team-a": 7, "team-b": 1}, run("max-min-fairness", cohortOf(4, "", "", 0)))
	assert.Equal(t, map[string]int{"team-a": 6, "team-b": 2}, run("quota-water-filling", cohortOf(0, "3", "1", 8)))
	assert.Equal(t, map[string]int{"team-a": 4, "team-b": 4}, run("quota-water-filling", cohortOf(4, "3", "1", 0)), "team-b's nominal 4 is its own")
}

func grepWhy(r *kueue.RoundResult, why flavor.Why) int {
	n := 0
	for _, d := range r.Decisions {
		if d.Why == why {
			n++
		}
	}
	return n
}

// A workload left out of a round says where it waits: in its own queue's
// order, with its queue's places. team-b's one workload has its place
// whatever team-a's backlog.
func TestOutsideSaysItsPlace(t *testing.T) {
	var ws []wl
	for i := range 6 {
		ws = append(ws, wl{ns: "a", name: "a" + string(rune('a'+i)), queue: "q", gpus: 1, gate: kueue.DefaultGate, created: int64(i)})
	}
	ws = append(ws, wl{ns: "b", name: "new", queue: "q", gpus: 1, gate: kueue.DefaultGate, created: 100})
	c := newCluster(t, nil, append(cohortOf(2, "", "", 0), objects(ws...)...)...)
	c.tune = func(cfg *kueue.Config) { cfg.MaxJobs = 4 }
	c.ctrl = c.controller(nil)
	r := c.round()
	assert.Equal(t, flavor.Start, r.Decisions["b/new"].Why)
	assert.Equal(t, flavor.Outside, r.Decisions["a/af"].Why)
	assert.Equal(t, 6, r.Decisions["a/af"].Rank)
	ev := grep(c.events(), "waits outside")
	require.Len(t, ev, 3, "a's 4th to 6th")
	assert.Len(t, grep(ev, "ClusterQueue team-a has 6 pending workloads and 3 of the round's 4 places"), 3, "%q", ev)
	assert.Len(t, grep(ev, "this one is number 6 in its queue's order (priority, then age)"), 1, "%q", ev)
}

// Kueue's preemption kept in gate mode. Reclaim: team-a (reclaimWithin
// Cohort Any) lent its 4 idle nominal V100s to team-b (nominal 0), whose
// four workloads took them; team-a's gated 4-GPU workload fits nowhere,
// but Kueue would reclaim its quota: it is released to Kueue, on the
// V100s, and an event says so (before: it stayed gated, its quota lent
// for as long as team-b's workloads ran). Without team-a's preemption
// policy (Kueue's default, Never) it stays gated.
func TestReleasedForReclaim(t *testing.T) {
	objs := func(p map[string]any) []*unstructured.Unstructured {
		a := cqObj("team-a", "co", "", quota{"v100", 4, -1, -1})
		if p != nil {
			a = withPreemption(a, p)
		}
		out := []*unstructured.Unstructured{flavorObj("v100", v100), a, cqObj("team-b", "co", "", quota{"v100", 0, -1, -1}),
			lqObj("a", "q", "team-a"), lqObj("b", "q", "team-b")}
		for i := range 4 {
			out = append(out, wl{ns: "b", name: "borrower-" + string(rune('0'+i)), queue: "q", gpus: 1, admittedOn: "v100", cq: "team-b", created: int64(i)}.objects()...)
		}
		return append(out, wl{ns: "a", name: "owner", queue: "q", gpus: 4, gate: kueue.DefaultGate, created: 100}.objects()...)
	}
	c := newCluster(t, nil, objs(nil)...)
	r := c.round()
	assert.NotEqual(t, flavor.Preempt, r.Decisions["a/owner"].Why)
	assert.Empty(t, r.Released, "Kueue's default never reclaims")

	c = newCluster(t, nil, objs(map[string]any{"reclaimWithinCohort": "Any"})...)
	r = c.round()
	d := r.Decisions["a/owner"]
	assert.Equal(t, flavor.Preempt, d.Why)
	assert.Equal(t, topology.GPUType("v100"), d.Type)
	assert.Equal(t, []string{"b/borrower-3", "b/borrower-2", "b/borrower-1", "b/borrower-0"}, d.Victims, "the most recent first")
	assert.Equal(t, []string{"a/owner"}, r.Released)
	assert.Equal(t, v100, c.selector("a", "owner"), "on the flavor where Kueue reclaims")
	_, gated := c.get(jobsGVR, "a", "job-owner").GetAnnotations()[kueue.AnnotationAdmissionGatedBy]
	assert.False(t, gated)
	ev := grep(c.events(), kueue.ReasonReleased)
	require.Len(t, ev, 1)
	assert.Contains(t, ev[0], "released for Kueue's preemption: reclaims 4 GPUs of v100 its ClusterQueue lent (on v100, flavor v100 of ClusterQueue team-a; no flavor has room now)")
}

// Priority: team-a (withinClusterQueue LowerPriority) runs four priority-0
// workloads on its 4 V100s; a gated priority-100000 workload is released
// to Kueue, which preempts one of them for it; a priority-0 one stays
// gated. Without the gate (Mode 2) it is steered to the V100s, where
// Kueue preempts.
func TestReleasedForPriority(t *testing.T) {
	objs := func(gate string) []*unstructured.Unstructured {
		out := []*unstructured.Unstructured{flavorObj("v100", v100),
			withPreemption(cqObj("team-a", "", "", quota{"v100", 4, -1, -1}), map[string]any{"withinClusterQueue": "LowerPriority"}),
			lqObj("a", "q", "team-a")}
		for i := range 4 {
			out = append(out, wl{ns: "a", name: "low-" + string(rune('0'+i)), queue: "q", gpus: 1, admittedOn: "v100", cq: "team-a", created: int64(i)}.objects()...)
		}
		out = append(out, wl{ns: "a", name: "urgent", queue: "q", gpus: 1, priority: 100000, gate: gate, created: 100}.objects()...)
		return append(out, wl{ns: "a", name: "plain", queue: "q", gpus: 1, gate: gate, created: 50}.objects()...)
	}
	c := newCluster(t, nil, objs(kueue.DefaultGate)...)
	r := c.round()
	assert.Equal(t, flavor.Preempt, r.Decisions["a/urgent"].Why)
	assert.Equal(t, []string{"a/low-3"}, r.Decisions["a/urgent"].Victims)
	assert.NotEqual(t, flavor.Preempt, r.Decisions["a/plain"].Why)
	assert.Equal(t, []string{"a/urgent"}, r.Released)
	assert.Equal(t, kueue.DefaultGate, c.get(jobsGVR, "a", "job-plain").GetAnnotations()[kueue.AnnotationAdmissionGatedBy])
	ev := grep(c.events(), kueue.ReasonReleased)
	require.Len(t, ev, 1)
	assert.Contains(t, ev[0], "released for Kueue's preemption: preempts 1 GPU of v100 of lower-priority workloads of ClusterQueue team-a")

	c = newCluster(t, nil, objs("")...)
	r = c.round()
	assert.Equal(t, flavor.Preempt, r.Decisions["a/urgent"].Why)
	assert.Contains(t, r.Patched, "a/urgent")
	assert.Equal(t, v100, c.selector("a", "urgent"))
	assert.Len(t, grep(c.events(), "steered to v100 (flavor v100 of ClusterQueue team-a), where Kueue admits it by preemption"), 1)
}

// GPU requests outside the main containers are seen: a sidecar's (an
// init container with restartPolicy Always) adds to the containers'; a
// plain init container's counts by Kubernetes' effective request (the
// larger of it and the containers' and sidecars' sum): 1 in the
// container and 4 in an init container is 4 GPUs, which no flavor of
// 1 GPU can hold.
func TestGPUsInInitContainers(t *testing.T) {
	c := newCluster(t, nil, base(objects(
		wl{ns: "a", name: "sidecar", queue: "q", gpus: 0, sidecarGPUs: 1, gate: kueue.DefaultGate},
		wl{ns: "a", name: "init", queue: "q", gpus: 1, initGPUs: 4, gate: kueue.DefaultGate},
	)...)...)
	r := c.round()
	assert.Equal(t, flavor.Start, r.Decisions["a/sidecar"].Why, "its sidecar's GPU makes it a GPU workload")
	assert.Equal(t, flavor.NoFlavor, r.Decisions["a/init"].Why, "4 GPUs: no flavor has 4")
	assert.Equal(t, []string{"a/sidecar"}, r.Released)
}

// GPU resources: a request for a MIG slice the admin did not list is
// refused clearly (before: not a GPU to the controller, the workload sat
// gated without a word); listed, MIG slices are steered like GPUs, on the
// flavors that hold quota of them.
func TestGPUResources(t *testing.T) {
	const mig = "nvidia.com/mig-1g.5gb"
	c := newCluster(t, nil, base(objects(
		wl{ns: "a", name: "slice", queue: "q", gpus: 2, res: mig, gate: kueue.DefaultGate},
	)...)...)
	r := c.round()
	assert.Equal(t, []string{"a/slice"}, r.Unreadable)
	assert.Empty(t, r.Released)
	ev := grep(c.events(), kueue.ReasonUnreadable)
	require.Len(t, ev, 1)
	assert.Contains(t, ev[0], "spec.podSets[main].template.spec.containers[main].resources: asks for nvidia.com/mig-1g.5gb, a GPU resource gpusched does not steer (gpusched-kueue --gpu-resources lists nvidia.com/gpu)")
	assert.Contains(t, ev[0], "stays gated")

	migCQ := cqObj("team-m", "", "", quota{"a100-1g", 7, -1, -1})
	groups := migCQ.Object["spec"].(map[string]any)["resourceGroups"].([]any)
	groups[0].(map[string]any)["coveredResources"] = []any{mig}
	groups[0].(map[string]any)["flavors"].([]any)[0].(map[string]any)["resources"].([]any)[0].(map[string]any)["name"] = mig
	c = newCluster(t, nil, append(base(objects(
		wl{ns: "m", name: "slice", queue: "q", gpus: 2, res: mig, gate: kueue.DefaultGate},
		wl{ns: "a", name: "whole", queue: "q", gpus: 1, gate: kueue.DefaultGate},
	)...), flavorObj("a100-1g", "NVIDIA-A100-SXM4-40GB-MIG-1g.5gb"), migCQ, lqObj("m", "q", "team-m"))...)
	c.tune = func(cfg *kueue.Config) { cfg.Resources = []corev1.ResourceName{"nvidia.com/gpu", mig} }
	c.ctrl = c.controller(nil)
	r = c.round()
	assert.Equal(t, kueue.Decision{ClusterQueue: "team-m", Type: "a100", Flavor: "a100-1g", Why: flavor.Start, Share: r.Decisions["m/slice"].Share}, r.Decisions["m/slice"])
	assert.Equal(t, flavor.Start, r.Decisions["a/whole"].Why)
	assert.Equal(t, []string{"a/whole", "m/slice"}, r.Released)
	assert.Empty(t, r.Unreadable)
}

// A container and an init container asking for the same GPU resource the
// controller does not steer: the Warning names the container, the same at
// every round, and is said once (review of #40: the fields were read from
// a map, so the field at fault flipped between rounds at random, and each
// flip was a new Warning; before, 20 rounds said it 3 to 10 times, in 8
// runs).
func TestUnsteeredSaidOnce(t *testing.T) {
	const mig = "nvidia.com/mig-1g.5gb"
	c := newCluster(t, nil, base(objects(
		wl{ns: "a", name: "slices", queue: "q", gpus: 1, initGPUs: 1, res: mig, gate: kueue.DefaultGate},
	)...)...)
	var ev []string
	for range 20 {
		r := c.round()
		require.Equal(t, []string{"a/slices"}, r.Unreadable)
		ev = append(ev, grep(c.events(), kueue.ReasonUnreadable)...)
	}
	require.Len(t, ev, 1, "%q", ev)
	assert.Contains(t, ev[0], "spec.podSets[main].template.spec.containers[main].resources: asks for "+mig)
}
