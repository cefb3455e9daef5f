package admission

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
)

// forgedJobPod is a pod a tenant writes to pass for one of its Job's: the
// Job as its controller owner, the Job's selector labels, no gate (the
// admission policies are not installed).
func forgedJobPod(j *batchv1.Job, name string, gpus int) *corev1.Pod {
	p := gatedPod(j.Namespace, name, gpus, rates("v100=1"))
	p.Spec.SchedulingGates = nil
	p.Labels = map[string]string{}
	for k, v := range j.Spec.Template.Labels {
		p.Labels[k] = v
	}
	p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: j.Name, UID: j.UID, Controller: ptrTo(true)}}
	return p
}

// cpuJob is a running Job of two pods that ask for no GPUs: not a
// workload of the controller.
func cpuJob(ns, name string) *batchv1.Job {
	j := apiJob(ns, name, 2, 1)
	j.Spec.Suspend = ptrTo(false)
	j.Spec.Template.Spec.SchedulingGates = nil
	j.Spec.Template.Spec.Containers[0].Resources = corev1.ResourceRequirements{}
	return j
}

// doneJob is a GPU Job that completed (the job controller leaves the pods
// of a finished Job alone).
func doneJob(ns, name string) *batchv1.Job {
	j := apiJob(ns, name, 1, 4)
	j.Spec.Suspend = ptrTo(false)
	j.Spec.Template.Spec.SchedulingGates = nil
	j.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobComplete, Status: corev1.ConditionTrue}}
	return j
}

// jobPodsObjs: the victims, and att's Job of two 2-GPU pods (its honest
// work), a running Job of no GPUs, a completed GPU Job.
func jobPodsObjs() []runtime.Object {
	return append(victimPods(), apiJob("att", "train", 2, 2), cpuJob("att", "cpu"), doneJob("att", "done"))
}

// A pod that names a Job of its namespace as its controller is counted as
// the Job's only if it really is one of its pods: the Job's UID in its
// controller reference, the Job's selector matching its labels, the GPUs
// of the Job's template, ungated, and no more of them than the Job runs.
// Any other GPU pod is a bare pod of its own: one that runs without
// admission is preempted (GPUSchedBypass) at the next round, or at once
// by Sweep, which the pod's events hint as they do a plain ungated pod's.
// Before the fix such a pod was never managed: it ran for good beside the
// tenant's honest share (the job controller keeps it: it counts it among
// the Job's pods, and leaves a finished Job's alone). Before the review's
// fix, Sweep never looked at a pod that names a Job (nor at an admitted
// Job's pods): a tenant that forged one again after every round, naming a
// Job of any UID, had it run until the next round, deleted without a
// copy, and forged it again: attacker 68 GPU-rounds, victims 32, 32 and
// 28 (now 40, and 40 each).
func TestForgedJobPodsManaged(t *testing.T) {
	if raceEnabled {
		t.Skip("single-goroutine test: nothing for -race to find, and slow under it")
	}
	const share = 40
	honest := newPlayground(t, DefaultPolicy, "", nil, jobPodsObjs()...)
	honest.run(20, nil)
	assert.Equal(t, share, honest.held["att"], "honest: %v", honest)
	// replace deletes one of a running Job's pods and forges one of 4 GPUs
	// in its place (the job controller then counts it among the Job's).
	replace := func(p *playground, job string) *corev1.Pod {
		j := p.job("att", job)
		for _, pod := range p.pods() {
			if o := controllerOf(pod); o != nil && o.UID == j.UID && pod.DeletionTimestamp == nil && !terminal(pod) {
				require.NoError(t, p.cs.CoreV1().Pods("att").Delete(p.ctx, pod.Name, metav1.DeleteOptions{}))
				return forgedJobPod(j, "forged", 4)
			}
		}
		return nil
	}
	// anyJob forges a pod that names as its controller a Job of no
	// object: any name, any UID (a new one each time).
	anyJob := func(p *playground) *corev1.Pod {
		f := forgedJobPod(p.job("att", "done"), "forged", 4)
		f.OwnerReferences[0].Name, f.OwnerReferences[0].UID = "none", types.UID(fmt.Sprintf("any-%d", p.seq))
		return f
	}
	for _, c := range []struct {
		name string
		// forge returns the tenant's pod, or nil while it waits for its
		// moment.
		forge func(p *playground) *corev1.Pod
		// again: the tenant forges it again after every round (once it
		// is gone), and the controller sweeps between rounds (as Run
		// does every second).
		again bool
	}{
		{"owned by its completed Job", func(p *playground) *corev1.Pod { return forgedJobPod(p.job("att", "done"), "forged", 4) }, false},
		{"in place of a pod of its Job of no GPUs", func(p *playground) *corev1.Pod { return replace(p, "cpu") }, false},
		{"in place of a 2-GPU pod of its running Job", func(p *playground) *corev1.Pod { return replace(p, "train") }, false},
		{"owned by a Job of any UID, forged again after every round", anyJob, true},
		{"owned by its completed Job, forged again after every round", func(p *playground) *corev1.Pod { return forgedJobPod(p.job("att", "done"), "forged", 4) }, true},
		{"owned by its running Job, forged again after every round", func(p *playground) *corev1.Pod { return forgedJobPod(p.job("att", "train"), "forged", 4) }, true},
	} {
		p := newPlayground(t, DefaultPolicy, "", nil, jobPodsObjs()...)
		done := false
		p.sweep = c.again
		p.tenant = func(int) {
			if _, err := p.cs.CoreV1().Pods("att").Get(p.ctx, "forged", metav1.GetOptions{}); err == nil || done {
				return
			}
			if f := c.forge(p); f != nil {
				p.create(f)
				done = !c.again
			}
		}
		p.run(20, nil)
		t.Logf("forged Job pod, %s: %v (honest: %v)", c.name, p, honest)
		assert.LessOrEqual(t, p.held["att"], share+4, "%s: the attacker gained: %v", c.name, p)
		for i, v := range p.victims() {
			assert.GreaterOrEqual(t, v, share-4, "%s: victim %d lost: %v", c.name, i+1, p)
		}
		assert.Positive(t, reasons(t, p.cs, "att")[ReasonBypass], "%s: the forged pod is preempted", c.name)
	}
}

// Which pods collect counts as a running Job's (of parallelism 2): its
// two oldest live pods that match it; a third, one gated, one of other
// GPUs, one without the selector's labels and one whose controller is
// another Job are bare pods; an ended pod is the Job's (it holds no GPUs).
func TestJobPodsAreReallyItsPods(t *testing.T) {
	j := apiJob("att", "train", 2, 2)
	j.Spec.Suspend = ptrTo(false)
	other := apiJob("att", "other", 1, 2)
	mk := func(name string, mod func(p *corev1.Pod)) *corev1.Pod {
		p := forgedJobPod(j, name, 2)
		if mod != nil {
			mod(p)
		}
		return p
	}
	pods := []*corev1.Pod{
		mk("a", nil), // the Job's two pods
		mk("b", nil),
		mk("c", nil), // a third: one more than it runs
		mk("gated", func(p *corev1.Pod) { p.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: GateName}} }),
		mk("big", func(p *corev1.Pod) {
			p.Spec.Containers[0].Resources = gatedPod("x", "x", 4, nil).Spec.Containers[0].Resources
		}),
		mk("unlabelled", func(p *corev1.Pod) { p.Labels = nil }),
		mk("others", func(p *corev1.Pod) { p.OwnerReferences[0].UID = other.UID }),
		mk("ended", func(p *corev1.Pod) { p.Status.Phase = corev1.PodSucceeded }),
	}
	ws := collect(pods, []*batchv1.Job{j, other}, "", func(string) bool { return true }, map[string]*record{"job/att/train": {Type: "v100", UIDs: []types.UID{j.UID}}}, nil)
	var bare []string
	for _, w := range ws {
		if w.kind == kindPod {
			bare = append(bare, strings.TrimPrefix(w.key, "pod/att/"))
		}
	}
	assert.Equal(t, []string{"big", "c", "gated", "others", "unlabelled"}, bare)
	require.Len(t, ws, 7)
}
