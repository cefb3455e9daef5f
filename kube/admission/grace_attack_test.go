package admission

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/gpusched/gpusched/kube/tenancy"
	"github.com/gpusched/gpusched/topology"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

// graceRun is what a run of the grace attack measured: GPU-rounds held
// (GPU-seconds on the nodes / 360), by namespace; the rounds that ended
// over capacity (the pods let run that were still there at the round's
// end, terminating or not, bound or waiting, asked for more GPUs than the
// cluster has: kubeSim.committed); and the time the core charged each
// namespace's job, in rounds (its attained time / 360 s: the rounds it
// ran, and the GPU time its pods held after its lease ended).
type graceRun struct {
	held     map[string]float64
	over     int
	credited map[string]float64
	assigned map[string]int // rounds the core gave each namespace's job
}

// runGraceAttack plays the scenario: 8 V100s in two nodes of 4,
// four tenants with one 4-GPU bare pod each, 20 rounds of 360 s under
// max-min fairness, preempted pods annotated for 30 s (--grace) then
// deleted. The attacker's pod has terminationGracePeriodSeconds ownGrace
// (0: the default 30 s); stuck makes its node's kubelet never confirm
// its deletion, and finalizer gives it a finalizer (so that not even a
// forced deletion removes it). The kubelet and the kube-scheduler are
// simulated every 15 s (kubeSim).
func runGraceAttack(t *testing.T, ownGrace int64, stuck, finalizer bool) graceRun {
	t.Helper()
	ctx := context.Background()
	cs := fake.NewClientset(gpuNode("n1", "Tesla-V100-SXM2-16GB", 4), gpuNode("n2", "Tesla-V100-SXM2-16GB", 4))
	wall := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	sim := newKubeSim(t, cs, &wall, map[string]int{"n1": 4, "n2": 4})
	tenants := []string{"att", "v1", "v2", "v3"}
	for _, ns := range tenants {
		p := gatedPod(ns, "job", 4, rates("v100=1"))
		if ns == "att" && ownGrace > 0 {
			p.Spec.TerminationGracePeriodSeconds = &ownGrace
		}
		if ns == "att" && finalizer {
			p.Finalizers = []string{"example.com/hold"}
		}
		_, err := cs.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	if stuck {
		sim.stuck["att/job"] = true
	}
	ten, err := tenancy.Parse([]byte(attackTenancy))
	require.NoError(t, err)
	clk := &testClock{}
	c := newController(t, cs, clk, func(cfg *Config) {
		cfg.Tenancy, cfg.Grace = ten, 30*time.Second
		cfg.Now = func() time.Time { return wall }
	})
	const step, steps = 15 * time.Second, 24 // a round of 360 s
	run := graceRun{held: map[string]float64{}, credited: map[string]float64{}, assigned: map[string]int{}}
	for r := range 20 {
		clk.t = float64(r) * 360
		res, err := syncRound(ctx, c)
		require.NoError(t, err)
		for k := range res.Assigned {
			run.assigned[strings.Split(k, "/")[1]]++
		}
		sim.step()
		for range steps {
			for ns, g := range sim.held() {
				run.held[ns] += float64(g) * step.Seconds() / 360
			}
			wall = wall.Add(step)
			sim.step()
			syncSweep(ctx, t, c)
		}
		if sim.committed() > 8 {
			run.over++
		}
	}
	// A round is reported when it is over, at the next one's start.
	clk.t = 20 * 360
	_, err = syncRound(ctx, c)
	require.NoError(t, err)
	for _, ns := range tenants {
		st, err := c.sched.Status("pod/" + ns + "/job")
		if err == nil {
			run.credited[ns] = st.Attained[topology.V100] / 360
		}
	}
	return run
}

// A preempted pod with a huge terminationGracePeriodSeconds frees its
// GPUs within the admin's maximum grace (its deletion's grace is
// min(its own, --max-deletion-grace)), and one whose kubelet never
// confirms is force-deleted past it; a terminating pod holds its GPUs in
// the core's plan until gone, so that no round's admissions and
// terminating pods take more GPUs than exist. The honest run is the same
// pod with the default 30 s.
//
// Each job is charged what its pods held (GPU-rounds held / 4 GPUs, to
// 0.02 rounds): a preempted job the time its pods held their GPUs after
// its lease ended (scheduler.RoundReport.Held), a job admitted on GPUs
// they still held its round less the time it waited for them. Before,
// the core credited the rounds given: the attacker held 40.7 GPU-rounds
// (14,640 GPU-seconds) with the huge grace and 42.3 (15,240) with the
// stuck kubelet, and was charged 40 (14,400) in both, its pods' minute
// after each preemption free and paid by the victim admitted in its
// place. Now it holds 40.0 and 38.2 (13,740 GPU-seconds) and is charged
// exactly that; so is every job of the honest and huge-grace runs (40.0
// each). In the stuck-kubelet run a job admitted in place of a
// force-deleted pod is charged up to 15 s a round it did not hold: the
// simulated kube-scheduler binds it at its next step, 15 s after the
// controller's sweep found the GPUs free.
func TestGraceAttackFreesGPUs(t *testing.T) {
	if raceEnabled {
		t.Skip("single-goroutine simulation: nothing for -race to find, and slow under it")
	}
	honest := runGraceAttack(t, 0, false, false)
	attack := runGraceAttack(t, 1e7, false, false)
	stuck := runGraceAttack(t, 30, true, false)
	for name, r := range map[string]graceRun{"honest": honest, "huge grace": attack, "stuck kubelet": stuck} {
		t.Logf("%s: GPU-rounds held %s; rounds over capacity %d; rounds charged %s", name, fmtShares(r.held), r.over, fmtShares(r.credited))
		assert.Zero(t, r.over, "%s: a round over capacity", name)
		// Its honest share is 40 GPU-rounds; one round more is 4.
		assert.LessOrEqual(t, r.held["att"], honest.held["att"]+4, "%s: the attacker gained", name)
		assert.LessOrEqual(t, r.held["att"], 44.0, "%s: the attacker gained", name)
		for _, v := range []string{"v1", "v2", "v3"} {
			assert.GreaterOrEqual(t, r.held[v], honest.held[v]-4, "%s: victim %s lost", name, v)
		}
		// The core charges what was held.
		assert.InDelta(t, r.held["att"]/4, r.credited["att"], 0.02, "%s: the attacker's charge", name)
		slack := 0.02
		if name == "stuck kubelet" {
			slack = 0.5 // the simulation's binding 15 s late, a few times
		}
		for _, v := range []string{"v1", "v2", "v3"} {
			assert.InDelta(t, r.held[v]/4, r.credited[v], slack, "%s: victim %s's charge", name, v)
		}
	}
}

// A preempted pod that nothing removes (a finalizer, and a kubelet that
// never ends it: a broken node, not an attack) holds its GPUs for good:
// each round after the one that preempted it plans without them (that
// one admitted others when the pod was still due to go within its
// grace: it ends over capacity, as before), and its job is charged every
// round for what the pod holds (scheduler.RoundReport.Held): 80
// GPU-rounds held, 20 rounds charged, so that the mechanism, which owes
// it half the rounds, never gives it another turn. Before, only the
// rounds given were charged (6 of 20: each a round of 4 idle GPUs, the
// job held back while its pod held 4 others), and the victims, who share
// the 4 GPUs left, held 63.3 GPU-rounds in all (27.3, 16.0, 20.0); now
// 72.7 (28.7, 19.3, 24.7).
func TestStuckPodHeldInThePlan(t *testing.T) {
	if raceEnabled {
		t.Skip("single-goroutine simulation: nothing for -race to find, and slow under it")
	}
	r := runGraceAttack(t, 30, true, true)
	t.Logf("GPU-rounds held %s; rounds over capacity %d; rounds charged %s; rounds given %v", fmtShares(r.held), r.over, fmtShares(r.credited), r.assigned)
	assert.LessOrEqual(t, r.over, 1, "rounds over capacity")
	assert.InDelta(t, 80, r.held["att"], 1e-6, "nothing frees a stuck pod's GPUs")
	assert.InDelta(t, 20, r.credited["att"], 1e-6, "every round held is charged")
	assert.Equal(t, 1, r.assigned["att"], "no turn after its preemption: it holds more than its share")
	// The victims run on the 4 GPUs left: 20 rounds of 4 GPUs, less what
	// the round over capacity lost.
	victims := 0.0
	for _, v := range []string{"v1", "v2", "v3"} {
		assert.GreaterOrEqual(t, r.held[v], 16.0, v)
		victims += r.held[v]
	}
	assert.GreaterOrEqual(t, victims, 70.0, "the victims' GPU-rounds")
}

func fmtShares(m map[string]float64) string {
	return fmt.Sprintf("att %.1f, v1 %.1f, v2 %.1f, v3 %.1f", m["att"], m["v1"], m["v2"], m["v3"])
}

// jobRun is what a run of the Job grace test measured: GPU-rounds held,
// by namespace, and the rounds over capacity (as in graceRun).
type jobRun struct {
	held map[string]float64
	over int
	// charged is the time the core charged each namespace's job, in
	// rounds (as graceRun's).
	charged map[string]float64
}

// runJobGrace plays a preempted Job whose pods have a day's grace: one
// node of 4 V100s, the attacker's Job of one 4-GPU pod and a victim's
// 4-GPU bare pod, 10 rounds of 360 s (5 each is the honest share); the
// job controller (kubeSim.jobController) deletes a suspended Job's pods
// with their own grace; stuck makes the attacker's kubelet never confirm
// a deletion.
func runJobGrace(t *testing.T, stuck bool) jobRun {
	t.Helper()
	ctx := context.Background()
	job := gatedJob("att", "train", 1, 4, rates("v100=1"))
	day := int64(86400)
	job.Spec.Template.Spec.TerminationGracePeriodSeconds = &day
	cs := fake.NewClientset(gpuNode("n1", "Tesla-V100-SXM2-16GB", 4), job, gatedPod("v1", "job", 4, rates("v100=1")))
	wall := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	sim := newKubeSim(t, cs, &wall, map[string]int{"n1": 4})
	sim.stuck["att/*"] = stuck
	ten, err := tenancy.Parse([]byte(attackTenancy))
	require.NoError(t, err)
	clk := &testClock{}
	c := newController(t, cs, clk, func(cfg *Config) {
		cfg.Tenancy, cfg.Grace = ten, 30*time.Second
		cfg.Now = func() time.Time { return wall }
	})
	const step, steps = 15 * time.Second, 24
	run := jobRun{held: map[string]float64{}}
	for r := range 10 {
		clk.t = float64(r) * 360
		res, err := syncRound(ctx, c)
		require.NoError(t, err)
		require.NotEmpty(t, res.Assigned)
		require.Empty(t, res.Bypassed, "round %d", r)
		for range steps {
			sim.jobController(ctx)
			sim.step()
			for ns, g := range sim.held() {
				run.held[ns] += float64(g) * step.Seconds() / 360
			}
			wall = wall.Add(step)
			syncSweep(ctx, t, c)
		}
		if sim.committed() > 4 {
			run.over++
		}
	}
	clk.t = 10 * 360 // reports the 10th round
	_, err = syncRound(ctx, c)
	require.NoError(t, err)
	run.charged = map[string]float64{}
	for ns, key := range map[string]string{"att": "job/att/train", "v1": "pod/v1/job"} {
		st, err := c.sched.Status(key)
		require.NoError(t, err)
		run.charged[ns] = st.Attained[topology.V100] / 360
	}
	return run
}

// The pods of a preempted (suspended) Job go within the admin's maximum
// grace whatever their terminationGracePeriodSeconds: the job controller
// deletes them with their own grace (a day), the controller cuts that
// deletion to what is left of the bound (30 s), and force-deletes a pod
// whose kubelet does not confirm; until gone they hold their GPUs in the
// core's plan, and the Job is charged for them.
func TestSuspendedJobPodsGoWithinMaxGrace(t *testing.T) {
	if raceEnabled {
		t.Skip("single-goroutine simulation: nothing for -race to find, and slow under it")
	}
	for _, stuck := range []bool{false, true} {
		r := runJobGrace(t, stuck)
		t.Logf("stuck kubelet %v: GPU-rounds held att %.1f, v1 %.1f; rounds over capacity %d; rounds charged att %.2f, v1 %.2f",
			stuck, r.held["att"], r.held["v1"], r.over, r.charged["att"], r.charged["v1"])
		assert.Zero(t, r.over, "stuck %v: a round over capacity", stuck)
		// 20 GPU-rounds each is the honest share; a round is 4.
		assert.LessOrEqual(t, r.held["att"], 24.0, "stuck %v: the attacker gained", stuck)
		assert.GreaterOrEqual(t, r.held["v1"], 16.0, "stuck %v: the victim lost", stuck)
		for _, ns := range []string{"att", "v1"} {
			// Within a step of the simulation (15 s) a preemption.
			assert.InDelta(t, r.held[ns]/4, r.charged[ns], 0.1, "stuck %v: %s's charge", stuck, ns)
		}
	}
}

// A preempted pod's deletion takes min(Config.PodDeletionGrace or its
// own terminationGracePeriodSeconds (30 s if none), MaxDeletionGrace).
func TestDeletionGrace(t *testing.T) {
	own := func(s int64) *corev1.Pod {
		p := gatedPod(testNS, "x", 1, nil)
		p.Spec.TerminationGracePeriodSeconds = &s
		return p
	}
	ten, sixty := int64(10), int64(60)
	for _, c := range []struct {
		cfg  Config
		pod  *corev1.Pod
		want int64
	}{
		{Config{}, gatedPod(testNS, "x", 1, nil), 30},
		{Config{}, own(1e9), 30},
		{Config{}, own(5), 5},
		{Config{MaxDeletionGrace: time.Minute}, own(1e9), 60},
		{Config{MaxDeletionGrace: 10 * time.Second}, gatedPod(testNS, "x", 1, nil), 10},
		{Config{PodDeletionGrace: &ten}, own(1e9), 10},
		{Config{PodDeletionGrace: &sixty}, own(1), 30},
		{Config{}, own(-4), 0},
	} {
		c2 := &Controller{cfg: c.cfg}
		assert.Equal(t, c.want, c2.deletionGrace(c.pod), "%+v", c.cfg)
	}
}

// Only the GPU pods of the namespaces the tenancy manages have their
// deletions cut short and forced: a tenant's own deletion of its GPU pod
// with a day's grace is cut to the bound, then forced when its kubelet
// does not confirm; a GPU pod of kube-system and a tenant's pod without
// GPUs keep the grace they were given. Meanwhile the terminating GPU pods
// hold their nodes' GPUs in the core's plan.
func TestExpediteOnlyManagedGPUPods(t *testing.T) {
	ctx := context.Background()
	day := int64(86400)
	mk := func(ns, name string, gpus int) *corev1.Pod {
		p := gatedPod(ns, name, gpus, rates("v100=1"))
		p.Spec.SchedulingGates, p.Spec.NodeName, p.Spec.TerminationGracePeriodSeconds = nil, "n1", &day
		return p
	}
	gpu, sys, cpu := mk("att", "gpu", 2), mk("kube-system", "sys", 1), mk("att", "cpu", 0)
	sys.Spec.NodeName = "n2"
	cs := fake.NewClientset(gpuNode("n1", "Tesla-V100-SXM2-16GB", 4), gpuNode("n2", "Tesla-V100-SXM2-16GB", 4),
		gpu, sys, cpu, gatedPod("v1", "job", 4, rates("v100=1")))
	wall := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	sim := newKubeSim(t, cs, &wall, map[string]int{"n1": 4, "n2": 4})
	sim.stuck["att/*"], sim.stuck["kube-system/*"] = true, true
	ten, err := tenancy.Parse([]byte(attackTenancy))
	require.NoError(t, err)
	clk := &testClock{}
	c := newController(t, cs, clk, func(cfg *Config) {
		cfg.Tenancy = ten
		cfg.Now = func() time.Time { return wall }
	})
	for _, p := range []*corev1.Pod{gpu, sys, cpu} {
		require.NoError(t, cs.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{}))
	}
	res, err := syncRound(ctx, c)
	require.NoError(t, err)
	assert.NotContains(t, res.Assigned, "pod/v1/job", "no node has 4 free GPUs: terminating pods hold 2 of n1's, 1 of n2's")
	assert.Equal(t, []string{"pod/att/gpu"}, res.Held, "a workload whose pod is going is not admitted")
	syncSweep(ctx, t, c)
	until := func(ns, name string) time.Duration {
		return getPod(t, cs, ns, name).DeletionTimestamp.Sub(wall)
	}
	assert.Equal(t, 30*time.Second, until("att", "gpu"), "cut to the bound")
	assert.Equal(t, 24*time.Hour, until("kube-system", "sys"), "not a tenant's")
	assert.Equal(t, 24*time.Hour, until("att", "cpu"), "no GPUs")
	wall = wall.Add(34 * time.Second)
	syncSweep(ctx, t, c)
	getPod(t, cs, "att", "gpu") // its kubelet gets 5 s past the end
	wall = wall.Add(time.Second)
	syncSweep(ctx, t, c)
	_, err = cs.CoreV1().Pods("att").Get(ctx, "gpu", metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err), "force-deleted: %v", err)
	assert.Equal(t, 1, sim.deletes["0s"])
	clk.t = 360
	res, err = syncRound(ctx, c)
	require.NoError(t, err)
	assert.Equal(t, map[string]topology.GPUType{"pod/v1/job": topology.V100}, res.Assigned, "its GPUs are back in the plan")
	assert.Positive(t, reasons(t, cs, "att")[ReasonGraceCapped])
}

// A pod force-deleted already (grace 0) that its finalizers and its
// kubelet keep is not force-deleted again (review of #40): deleting it
// again changes nothing, and each delete cost a request of its tenant's
// budget. att's 2-GPU pod (a
// finalizer, a kubelet that never confirms) is deleted by its tenant with
// a day's grace; the controller cuts the deletion to 30 s, force-deletes
// it 5 s past that, and leaves it be; the controller sweeps every second
// for 120 s. Before, it force-deleted it at every sweep from 35 s on (86
// deletes: each succeeded, which reset its backoff; the Warning event,
// the same each time, was written once). Its GPUs stay out of the plan.
func TestForceDeletedOnce(t *testing.T) {
	ctx := context.Background()
	day := int64(86400)
	p := gatedPod("att", "gpu", 2, rates("v100=1"))
	p.Spec.SchedulingGates, p.Spec.NodeName, p.Spec.TerminationGracePeriodSeconds = nil, "n1", &day
	p.Finalizers = []string{"example.com/hold"}
	cs := fake.NewClientset(gpuNode("n1", "Tesla-V100-SXM2-16GB", 4), p, gatedPod("v1", "job", 4, rates("v100=1")))
	wall := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	sim := newKubeSim(t, cs, &wall, map[string]int{"n1": 4})
	sim.stuck["att/*"] = true
	ten, err := tenancy.Parse([]byte(attackTenancy))
	require.NoError(t, err)
	clk := &testClock{}
	c := newController(t, cs, clk, func(cfg *Config) {
		cfg.Tenancy = ten
		cfg.Now = func() time.Time { return wall }
	})
	require.NoError(t, cs.CoreV1().Pods("att").Delete(ctx, "gpu", metav1.DeleteOptions{}))
	_, err = syncRound(ctx, c)
	require.NoError(t, err)
	for range 120 {
		wall = wall.Add(time.Second)
		sim.step()
		syncSweep(ctx, t, c)
	}
	assert.Equal(t, 1, sim.deletes["0s"], "force-deletes")
	assert.Equal(t, 1, sim.deletes["30s"], "the deletion cut to the bound")
	warnings := 0
	evs, err := cs.CoreV1().Events("att").List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	for _, e := range evs.Items {
		if e.Reason == ReasonGraceCapped && strings.HasPrefix(e.Message, "force-deleted") {
			warnings++
		}
	}
	assert.Equal(t, 1, warnings, "Warnings that it was force-deleted")
	got := getPod(t, cs, "att", "gpu")
	require.NotNil(t, got.DeletionGracePeriodSeconds)
	assert.Zero(t, *got.DeletionGracePeriodSeconds, "force-deleted, still there")
	clk.t = 360
	res, err := syncRound(ctx, c)
	require.NoError(t, err)
	assert.NotContains(t, res.Assigned, "pod/v1/job", "its 2 GPUs are still held: 2 of 4 left")
}
