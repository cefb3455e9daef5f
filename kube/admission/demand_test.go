package admission

import (
	"context"
	"strings"
	"testing"

	"github.com/gpusched/gpusched/kube/model"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

// raiseParallelism plays the tenant of issue #40 (item 4) that raises its
// Job's spec.parallelism from 1 to 2 (4 to 8 GPUs) once the Job runs;
// with cycle, it lowers it back to 1 whenever the Job is suspended (so
// that it would be admitted small again) and raises it at each admission.
func raiseParallelism(p *playground, cycle bool) func(r int) {
	return func(int) {
		j := p.job("att", "train")
		switch par := *j.Spec.Parallelism; {
		case !suspended(j) && par == 1:
			*j.Spec.Parallelism = 2
		case cycle && suspended(j) && par == 2:
			*j.Spec.Parallelism = 1
		default:
			return
		}
		p.updateJob(j)
	}
}

// demandCase is how the tenant plays and how the controller runs:
// cycle (raiseParallelism), sweep (Sweep between rounds, as Run does),
// typeOnly (Config.TypeOnly: admitted workloads steered to their type
// only, not pinned to the core's nodes, as the issue measured).
type demandCase struct{ cycle, sweep, typeOnly bool }

func parallelismRun(t *testing.T, attack bool, c demandCase) *playground {
	t.Helper()
	p := newPlayground(t, DefaultPolicy, "", func(cfg *Config) { cfg.TypeOnly = c.typeOnly }, append(victimPods(), apiJob("att", "train", 1, 4))...)
	if attack {
		p.tenant, p.sweep = raiseParallelism(p, c.cycle), c.sweep
	}
	p.run(20, nil)
	return p
}

// A Job whose parallelism is raised after its admission is preempted at
// the next round (or at once, by Sweep, which sees the Job's update) and
// re-admitted at its new size against its tenant's share; lowered while
// suspended, it is re-admitted at that size. Before the fix its GPUs were
// frozen at admission: the attacker ran 8 GPUs charged 4, and the
// controller, counting them, left the victims' GPUs idle.
func TestRaisedParallelismReadmitted(t *testing.T) {
	if raceEnabled {
		t.Skip("single-goroutine test: nothing for -race to find, and slow under it")
	}
	const share = 40
	for _, typeOnly := range []bool{false, true} {
		honest := parallelismRun(t, false, demandCase{typeOnly: typeOnly})
		assert.Equal(t, share, honest.held["att"], "honest: %v", honest)
		for _, c := range []demandCase{{false, false, typeOnly}, {true, false, typeOnly}, {false, true, typeOnly}, {true, true, typeOnly}} {
			p := parallelismRun(t, true, c)
			t.Logf("parallelism raised after admission (%+v): %v (honest: %v)", c, p, honest)
			assert.LessOrEqual(t, p.held["att"], share+4, "%+v: the attacker gained: %v", c, p)
			for i, v := range p.victims() {
				assert.GreaterOrEqual(t, v, share-4, "%+v: victim %d lost: %v", c, i+1, p)
			}
			assert.Zero(t, p.over+p.admittedOver, "%v", p)
			// GPUs idle are the attacker's own share it forgoes (its Job
			// suspended as soon as it grows, under sweep), within a round.
			assert.LessOrEqual(t, p.idle, max(share-p.held["att"], 0)+8, "%+v: idle GPUs: %v", c, p)
			assert.Positive(t, reasons(t, p.cs, "att")[ReasonResized], "%+v: the change is told", c)
		}
	}
}

// swapMember plays the tenant that, once its pod group of two 2-GPU
// members runs, deletes a member and creates a larger one (4 GPUs) in
// its place, gated as the admission policy creates it.
func swapMember(p *playground) func(r int) {
	swapped := false
	return func(int) {
		if swapped {
			return
		}
		old, err := p.cs.CoreV1().Pods("att").Get(p.ctx, "g-1", metav1.GetOptions{})
		if err != nil || hasGate(old.Spec.SchedulingGates) {
			return
		}
		swapped = true
		require.NoError(p.t, p.cs.CoreV1().Pods("att").Delete(p.ctx, "g-1", metav1.DeleteOptions{}))
		p.create(groupMember("att", "g", "g-1", 4))
	}
}

// A pod group whose member is swapped for a larger one after admission is
// preempted and re-admitted whole at its new size (6 GPUs) against its
// share. Before the fix the core kept charging it 4 GPUs.
func TestSwappedGroupMemberReadmitted(t *testing.T) {
	if raceEnabled {
		t.Skip("single-goroutine test: nothing for -race to find, and slow under it")
	}
	const share = 40
	for _, typeOnly := range []bool{false, true} {
		mod := func(cfg *Config) { cfg.TypeOnly = typeOnly }
		objs := append(victimPods(), groupMember("att", "g", "g-0", 2), groupMember("att", "g", "g-1", 2))
		honest := newPlayground(t, DefaultPolicy, "", mod, objs...)
		honest.run(20, nil)
		objs = append(victimPods(), groupMember("att", "g", "g-0", 2), groupMember("att", "g", "g-1", 2))
		p := newPlayground(t, DefaultPolicy, "", mod, objs...)
		p.tenant = swapMember(p)
		p.run(20, nil)
		t.Logf("group member swapped for a larger one (typeOnly %v): %v (honest: %v)", typeOnly, p, honest)
		assert.Equal(t, share, honest.held["att"], "honest: %v", honest)
		assert.LessOrEqual(t, p.held["att"], share+4, "the attacker gained: %v", p)
		for i, v := range p.victims() {
			assert.GreaterOrEqual(t, v, share-4, "victim %d lost: %v", i+1, p)
		}
		assert.Zero(t, p.over+p.admittedOver, "%v", p)
		st, err := p.c.sched.Status("group/att/g")
		require.NoError(t, err)
		assert.Equal(t, 6, st.Spec.GPUs, "the core is charged its real GPUs")
		assert.Positive(t, reasons(t, p.cs, "att")[ReasonResized], "the change is told")
	}
}

// The template's resources of a suspended Job, raised past the largest
// node (8 GPUs a pod on nodes of 4): the Job is refused (GPUSchedUnrunnable,
// out of the rounds), never admitted to sit pending on GPUs it holds.
// Before the fix the core kept its 4 GPUs and admitted it: its pod never
// bound and the GPUs the round gave it stayed idle.
func TestSuspendedJobTemplateResized(t *testing.T) {
	if raceEnabled {
		t.Skip("single-goroutine test: nothing for -race to find, and slow under it")
	}
	p := newPlayground(t, DefaultPolicy, "", nil, append(victimPods(), apiJob("att", "train", 1, 4))...)
	p.tenant = func(int) {
		j := p.job("att", "train")
		c := &j.Spec.Template.Spec.Containers[0]
		if q := c.Resources.Limits[model.ResourceGPU]; !suspended(j) || q.Value() == 8 {
			return
		}
		c.Resources.Limits[model.ResourceGPU] = *resource.NewQuantity(8, resource.DecimalSI)
		p.updateJob(j)
	}
	var unrunnable int
	for r := range 20 {
		res := p.round(r)
		if len(res.Unrunnable) > 0 {
			unrunnable++
		}
	}
	t.Logf("template resized to 8 GPUs a pod while suspended: %v", p)
	assert.LessOrEqual(t, p.idle, 8, "GPUs idle: %v", p)
	assert.Positive(t, unrunnable)
	assert.Positive(t, reasons(t, p.cs, "att")[ReasonUnrunnable])
	_, err := p.c.sched.Status("job/att/train")
	assert.Error(t, err, "out of the rounds")
}

// Sweep sees the update of an admitted Job that grew and preempts it at
// once (the writes of several at once), without waiting for the round;
// the next round updates the core's spec (its real GPUs) and says so.
func TestSweepPreemptsGrownJobs(t *testing.T) {
	ctx := context.Background()
	cs := fake.NewClientset(gpuNode("n1", "Tesla-V100-SXM2-16GB", 4), gpuNode("n2", "Tesla-V100-SXM2-16GB", 4))
	for _, n := range []string{"a", "b", "c", "d"} {
		_, err := cs.BatchV1().Jobs(testNS).Create(ctx, apiJob(testNS, n, 1, 2), metav1.CreateOptions{})
		require.NoError(t, err)
	}
	clk := &testClock{}
	c := newController(t, cs, clk, nil)
	res, err := syncRound(ctx, c)
	require.NoError(t, err)
	require.Len(t, res.Admitted, 4)
	for _, n := range []string{"a", "b", "c"} {
		j, err := cs.BatchV1().Jobs(testNS).Get(ctx, n, metav1.GetOptions{})
		require.NoError(t, err)
		*j.Spec.Parallelism = 2
		_, err = cs.BatchV1().Jobs(testNS).Update(ctx, j, metav1.UpdateOptions{})
		require.NoError(t, err)
	}
	require.NoError(t, c.SyncCaches(ctx))
	require.NoError(t, c.Sweep(ctx))
	for _, n := range []string{"a", "b", "c", "d"} {
		j, err := cs.BatchV1().Jobs(testNS).Get(ctx, n, metav1.GetOptions{})
		require.NoError(t, err)
		assert.Equal(t, n != "d", suspended(j), "%s: the grown Jobs are suspended at once, the other runs", n)
		if n != "d" {
			assert.Contains(t, j.Annotations[AnnotationPreempted], "asks for 4 GPUs, 2 pods of 2 GPUs (spec.parallelism 2, spec.completions unset), where it entered the rounds with 2", n)
		}
	}
	assert.Equal(t, 3, reasons(t, cs, testNS)[ReasonPreempted])
	assert.Len(t, savedState(t, cs).Admitted, 1, "the preemptions are saved")
	clk.t = 360
	res, err = syncRound(ctx, c)
	require.NoError(t, err)
	for _, n := range []string{"a", "b", "c"} {
		st, err := c.sched.Status("job/" + testNS + "/" + n)
		require.NoError(t, err)
		assert.Equal(t, 4, st.Spec.GPUs, n)
		assert.Equal(t, 4, res.GPUs["job/"+testNS+"/"+n], n)
	}
	assert.Equal(t, 3, reasons(t, cs, testNS)[ReasonResized])
	checkInvariants(t, cs, res)
}

// A Job that ran and is then resized past every node while suspended
// (8 GPUs a pod on nodes of 4) is refused but kept in the core with what
// it ran (its attained time and rounds); resized back to 4 GPUs, it comes
// back to the rounds with them, and an event says so. Before the fix it
// left the core when refused and came back as a new job, its attained
// time 0: a head start over the tenants it had been sharing with.
func TestRefusedJobComesBackWithWhatItRan(t *testing.T) {
	if raceEnabled {
		t.Skip("single-goroutine test: nothing for -race to find, and slow under it")
	}
	p := newPlayground(t, DefaultPolicy, "", nil, append(victimPods(), apiJob("att", "train", 1, 4))...)
	const key = "job/att/train"
	resize := func(gpus int64) {
		j := p.job("att", "train")
		c := &j.Spec.Template.Spec.Containers[0]
		c.Resources.Limits[model.ResourceGPU] = *resource.NewQuantity(gpus, resource.DecimalSI)
		p.updateJob(j)
	}
	attained := func() float64 {
		st, err := p.c.sched.Status(key)
		require.NoError(t, err, "the job stays in the core")
		got := 0.0
		for _, v := range st.Attained {
			got += v
		}
		return got
	}
	state, ranBefore := 0, 0.0 // 0: runs; 1: refused; 2: back
	refusedRounds := 0
	for r := range 30 {
		switch j := p.job("att", "train"); {
		case state == 0 && r > 0 && suspended(j) && attained() > 0:
			ranBefore = attained()
			resize(8)
			state = 1
		case state == 1 && refusedRounds == 3:
			resize(4)
			state = 2
		}
		res := p.round(r)
		if state == 1 {
			refusedRounds++
			_, admitted := res.Admitted[key]
			assert.False(t, admitted, "round %d: refused, never admitted", r)
			assert.InDelta(t, ranBefore, attained(), 1, "round %d: refused, it keeps what it ran (its last pods' exit charged)", r)
		}
	}
	require.Equal(t, 2, state, "the Job ran, was refused and resized back: %v", p)
	assert.Greater(t, attained(), ranBefore, "back in the rounds, it runs again from what it ran")
	assert.Positive(t, reasons(t, p.cs, "att")[ReasonUnrunnable])
	found := false
	for _, m := range reasonMessages(t, p.cs, ReasonResized) {
		found = found || strings.Contains(m, "back in the rounds with the time it ran")
	}
	assert.True(t, found, "its return is told")
}
