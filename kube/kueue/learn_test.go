package kueue_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gpusched/gpusched/kube/kueue"
	"github.com/gpusched/gpusched/kube/model"
	"github.com/gpusched/gpusched/perfmodel/learn"
	"github.com/gpusched/gpusched/scheduler"
	"github.com/gpusched/gpusched/topology"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

// learnedCluster is base() with the controller learning: its estimator,
// and a clock the test moves (seconds).
func learnedCluster(t *testing.T, now *float64, ws ...wl) (*cluster, *learn.Learner) {
	t.Helper()
	l, err := learn.New(learn.Config{})
	require.NoError(t, err)
	c := newCluster(t, nil, base(objects(ws...)...)...)
	c.tune = func(cfg *kueue.Config) {
		cfg.Estimator, cfg.Clock = l, func() float64 { return *now }
	}
	c.ctrl = c.controller(nil)
	return c, l
}

// add creates a Workload's objects (wl.objects: the Workload and its Job).
func (c *cluster) add(objs ...*unstructured.Unstructured) {
	c.t.Helper()
	for _, o := range objs {
		gvr := map[string]schema.GroupVersionResource{"Workload": kueue.WorkloadsGVR, "Job": jobsGVR}[o.GetKind()]
		_, err := c.dyn.Resource(gvr).Namespace(o.GetNamespace()).Create(context.Background(), o, metav1.CreateOptions{})
		require.NoError(c.t, err)
	}
}

// runningPod adds, in the typed API, the Job behind a Workload of wl (its
// UID as wl's objects name it, a selector) and one running pod of it, and
// returns the pod's UID.
func runningPod(t *testing.T, c *cluster, ns, name string) types.UID {
	t.Helper()
	ctx := context.Background()
	sel := map[string]string{"batch.kubernetes.io/controller-uid": "uid-" + ns + "-job-" + name}
	job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "job-" + name, UID: types.UID("uid-" + ns + "-job-" + name)},
		Spec: batchv1.JobSpec{Selector: &metav1.LabelSelector{MatchLabels: sel}}}
	_, err := c.cs.BatchV1().Jobs(ns).Create(ctx, job, metav1.CreateOptions{})
	require.NoError(t, err)
	yes := true
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name + "-0", UID: types.UID("pod-" + name), Labels: sel, CreationTimestamp: metav1.Now(),
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: job.Name, UID: job.UID, Controller: &yes}}},
		Spec: corev1.PodSpec{NodeName: "n1"}, Status: corev1.PodStatus{Phase: corev1.PodRunning}}
	_, err = c.cs.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
	require.NoError(t, err)
	return pod.UID
}

// Under Kueue a workload runs on one type for its life, so what is learned
// reaches a program's next runs through its group: run-k80 and run-v100,
// two runs of one program (one container, image x, one GPU) admitted on a
// K80 and a V100, report through the channel that the program runs 3
// times faster on the V100; they finish; run-2, the program's next run,
// is steered to the V100, where the same workload without learning (the
// same rate everywhere) is steered to the K80.
func TestKueueLearnedRatesSteerTheNextRun(t *testing.T) {
	now := 0.0
	c, l := learnedCluster(t, &now,
		wl{ns: "a", name: "run-k80", queue: "q", gpus: 1, admittedOn: "k80", cq: "team-a"},
		wl{ns: "a", name: "run-v100", queue: "q", gpus: 1, admittedOn: "v100", cq: "team-a"})
	c.round()
	rate := map[string]float64{"run-k80": 1, "run-v100": 3}
	for name, r := range rate {
		uid := runningPod(t, c, "a", name)
		key, ok := c.ctrl.Workload("a", name+"-0", uid)
		require.True(t, ok, name)
		require.Equal(t, "a/"+name, key)
		for i := range 10 {
			now = 60 * float64(i)
			require.NoError(t, c.ctrl.Progress(key, r*60*float64(i), time.Time{}), "%s window %d", name, i)
		}
	}
	for _, e := range l.Estimates("a/run-v100", nil) {
		if e.Type == topology.V100 {
			assert.Equal(t, learn.SourceMeasured, e.Source)
			assert.InDelta(t, 3, e.Mean, 0.1)
		}
	}
	// They finish (their Workloads are gone); the next run arrives.
	for name := range rate {
		require.NoError(t, c.dyn.Resource(kueue.WorkloadsGVR).Namespace("a").Delete(context.Background(), name, metav1.DeleteOptions{}))
	}
	c.round() // forgets them: their rows stay in the population and group
	c.add(objects(wl{ns: "a", name: "run-2", queue: "q", gpus: 1, created: 100})...)
	now = 3 * 3600 // past the next refit
	r := c.round()
	assert.Equal(t, topology.V100, r.Decisions["a/run-2"].Type, "learned: the program is 3x faster on V100")
	for _, e := range l.Estimates("a/run-2", nil) {
		assert.Equal(t, learn.SourceGroup, e.Source, "%+v", e)
	}
	said := grep(c.events(), kueue.ReasonLearned)
	require.Len(t, said, 1, "said once")
	assert.Contains(t, said[0], "learned: 3.0x faster on v100 than k80 (measured on 2 types")
	c.round()
	assert.Empty(t, grep(c.events(), kueue.ReasonLearned), "not said again (events drains what was recorded)")
	plain := newCluster(t, nil, base(objects(wl{ns: "a", name: "run-2", queue: "q", gpus: 1, created: 100})...)...)
	assert.Equal(t, topology.K80, plain.round().Decisions["a/run-2"].Type, "without learning: the same rate everywhere")
}

// The channel's resolver and sink take only what holds: a pod of another
// UID, a pod that is not running, a pod whose Job's selector does not
// select it, resolve to nothing; a report of a workload the controller
// does not learn, or of one without quota, is the core's refusal; steps
// going back within an admission start a new segment; time going back is
// invalid.
func TestKueueProgressRefusals(t *testing.T) {
	now := 0.0
	c, l := learnedCluster(t, &now,
		wl{ns: "a", name: "run", queue: "q", gpus: 1, admittedOn: "k80", cq: "team-a"},
		wl{ns: "a", name: "waiting", queue: "q", gpus: 1})
	c.round()
	uid := runningPod(t, c, "a", "run")
	_, ok := c.ctrl.Workload("a", "run-0", "another-uid")
	assert.False(t, ok, "another UID")
	_, ok = c.ctrl.Workload("a", "nobody", uid)
	assert.False(t, ok, "no such pod")
	ctx := context.Background()
	yes := true
	// A pod naming run's Job without its labels: not the Job's.
	stray := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "stray", UID: "pod-stray", CreationTimestamp: metav1.Now(),
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: "job-run", UID: "uid-a-job-run", Controller: &yes}}},
		Spec: corev1.PodSpec{NodeName: "n1"}, Status: corev1.PodStatus{Phase: corev1.PodRunning}}
	_, err := c.cs.CoreV1().Pods("a").Create(ctx, stray, metav1.CreateOptions{})
	require.NoError(t, err)
	_, ok = c.ctrl.Workload("a", "stray", "pod-stray")
	assert.False(t, ok, "a pod its Job does not select")
	// A pod of the Job made before the Workload's admission (one of an
	// earlier admission's, terminating): not this admission's.
	old := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "old", UID: "pod-old", CreationTimestamp: metav1.NewTime(time.Unix(1_600_000_000, 0)),
		Labels:          map[string]string{"batch.kubernetes.io/controller-uid": "uid-a-job-run"},
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: "job-run", UID: "uid-a-job-run", Controller: &yes}}},
		Spec: corev1.PodSpec{NodeName: "n1"}, Status: corev1.PodStatus{Phase: corev1.PodRunning}}
	_, err = c.cs.CoreV1().Pods("a").Create(ctx, old, metav1.CreateOptions{})
	require.NoError(t, err)
	_, ok = c.ctrl.Workload("a", "old", "pod-old")
	assert.False(t, ok, "a pod older than the admission")
	pending := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "pending", UID: "pod-pending"}}
	_, err = c.cs.CoreV1().Pods("a").Create(ctx, pending, metav1.CreateOptions{})
	require.NoError(t, err)
	_, ok = c.ctrl.Workload("a", "pending", "pod-pending")
	assert.False(t, ok, "a pod not running")
	key, ok := c.ctrl.Workload("a", "run-0", uid)
	require.True(t, ok)
	assert.ErrorIs(t, c.ctrl.Progress("a/nobody", 1, time.Time{}), scheduler.ErrUnknownJob)
	assert.ErrorIs(t, c.ctrl.Progress("a/waiting", 1, time.Time{}), scheduler.ErrNotRunning, "no quota reserved")
	for i := range 8 {
		now = 60 * float64(i)
		require.NoError(t, c.ctrl.Progress(key, 100*float64(i), time.Time{}))
	}
	// Steps going back within the admission: a pod restarted in place,
	// a new segment (as the scheduling core does), not a refusal.
	now = 480
	require.NoError(t, c.ctrl.Progress(key, 50, time.Time{}), "steps going back")
	now = 540
	require.NoError(t, c.ctrl.Progress(key, 150, time.Time{}), "the new segment goes on")
	tr := l.Tracks(key)
	require.Len(t, tr, 1)
	assert.Equal(t, 1, tr[0].Segments, "the first segment closed (Tracks counts closed ones; a second runs)")
	now = 100
	assert.ErrorIs(t, c.ctrl.Progress(key, 60, time.Time{}), scheduler.ErrInvalid, "time going back")
	// Without an estimator nothing resolves.
	plain := newCluster(t, nil, base(objects(wl{ns: "a", name: "run", queue: "q", gpus: 1, admittedOn: "k80", cq: "team-a"})...)...)
	plain.round()
	_, ok = plain.ctrl.Workload("a", "run-0", uid)
	assert.False(t, ok)
}

// The channel's calls (Workload, Progress) run beside rounds: under
// -race, two reporters post while rounds run, and every report after the
// first round is taken.
func TestKueueLearningConcurrent(t *testing.T) {
	var mu sync.Mutex
	now := 0.0
	l, err := learn.New(learn.Config{})
	require.NoError(t, err)
	c := newCluster(t, nil, base(objects(
		wl{ns: "a", name: "r1", queue: "q", gpus: 1, admittedOn: "k80", cq: "team-a"},
		wl{ns: "a", name: "r2", queue: "q", gpus: 1, admittedOn: "v100", cq: "team-a"},
		wl{ns: "a", name: "w", queue: "q", gpus: 1})...)...)
	c.tune = func(cfg *kueue.Config) {
		cfg.Estimator, cfg.Clock = l, func() float64 { mu.Lock(); defer mu.Unlock(); return now }
	}
	c.ctrl = c.controller(nil)
	c.round()
	uids := map[string]types.UID{"r1": runningPod(t, c, "a", "r1"), "r2": runningPod(t, c, "a", "r2")}
	var wg sync.WaitGroup
	for name, uid := range uids {
		wg.Go(func() {
			for i := range 200 {
				key, ok := c.ctrl.Workload("a", name+"-0", uid)
				if !assert.True(t, ok, name) {
					return
				}
				mu.Lock()
				now = max(now, float64(i))
				mu.Unlock()
				assert.NoError(t, c.ctrl.Progress(key, float64(i), time.Time{}))
			}
		})
	}
	for range 20 {
		_, err := c.ctrl.Round(context.Background())
		require.NoError(t, err)
	}
	wg.Wait()
	assert.NotEmpty(t, l.Tracks("a/r1"))
}

// Exploration: a program measured on the K80 only (at 1 step/s), among a
// population of programs measured on both types, V100 from 0.3 to 1.3
// times the K80: its next run starts on the V100, whose upper confidence bound
// beats the K80's measurement, and the round says it explores; with
// Explore -1 it starts on the K80, and nothing explores.
func TestKueueExploration(t *testing.T) {
	run := func(explore float64) *kueue.RoundResult {
		now := 0.0
		l := explorePopulation(t, "a")
		c := newCluster(t, nil, base(objects(wl{ns: "a", name: "run", queue: "q", gpus: 1})...)...)
		c.tune = func(cfg *kueue.Config) {
			cfg.Estimator, cfg.Clock, cfg.Explore = l, func() float64 { return now }, explore
		}
		c.ctrl = c.controller(nil)
		return c.round()
	}
	r := run(1)
	assert.Equal(t, topology.V100, r.Decisions["a/run"].Type, "it explores the V100")
	assert.Equal(t, []string{"a/run"}, r.Exploring)
	assert.Equal(t, 1, r.ExploringGPUs)
	r = run(-1)
	assert.Equal(t, topology.K80, r.Decisions["a/run"].Type, "without exploration: its measured type")
	assert.Empty(t, r.Exploring)
}

// explorePopulation is a learner whose population puts the V100 at 0.3
// to 1.3 times the K80, and where the program of wl's workloads (one
// container of image x, one GPU) in each namespace was measured on the
// K80 by an earlier run.
func explorePopulation(t *testing.T, namespaces ...string) *learn.Learner {
	t.Helper()
	l, err := learn.New(learn.Config{})
	require.NoError(t, err)
	for i := range 12 {
		ratio := 0.3 + float64(i)/11
		for seg, typ := range []topology.GPUType{topology.K80, topology.V100} {
			rate := 1.0
			if typ == topology.V100 {
				rate = ratio
			}
			for w := range 6 {
				o := learn.Observation{Type: typ, GPUs: 1, Segment: uint64(seg + 1), Steps: rate * 60 * float64(w), Time: float64(1000*seg) + 60*float64(w)}
				require.NoError(t, l.Observe(fmt.Sprint("pop-", i), o))
			}
		}
		l.Forget(fmt.Sprint("pop-", i))
	}
	for _, ns := range namespaces {
		group := model.ProgramGroup(ns, &corev1.PodSpec{Containers: []corev1.Container{{Image: "x"}}}, 1, nil)
		require.NoError(t, l.Register(ns+"/earlier", learn.JobInfo{GPUs: 1, Group: group}))
		for w := range 6 {
			require.NoError(t, l.Observe(ns+"/earlier", learn.Observation{Type: topology.K80, GPUs: 1, Segment: 1, Steps: 60 * float64(w), Time: 60 * float64(w)}))
		}
		l.Forget(ns + "/earlier")
	}
	return l
}

// The exploration budget is each ClusterQueue's (Config.Explore of its
// nominal GPUs): team-a's two workloads of a program measured on the K80
// only may explore one GPU's worth, and team-b's workload explores on its
// own queue's part, however many of team-a's pend (a cluster-wide budget
// let team-a's take all of it).
func TestKueueExplorationPerClusterQueue(t *testing.T) {
	now := 0.0
	l := explorePopulation(t, "a", "b")
	objs := append(base(), cqObj("team-b", "", "", quota{"v100", 1, -1, -1}, quota{"k80", 1, -1, -1}), lqObj("b", "q", "team-b"))
	objs = append(objs, objects(wl{ns: "a", name: "a1", queue: "q", gpus: 1}, wl{ns: "a", name: "a2", queue: "q", gpus: 1, created: 1},
		wl{ns: "b", name: "b1", queue: "q", gpus: 1, created: 2})...)
	c := newCluster(t, nil, objs...)
	c.tune = func(cfg *kueue.Config) {
		cfg.Estimator, cfg.Clock, cfg.Explore = l, func() float64 { return now }, 0.5
	}
	c.ctrl = c.controller(nil)
	r := c.round()
	assert.Contains(t, r.Exploring, "b/b1", "team-b explores on its own part: %+v", r.Decisions)
	n := 0
	for _, k := range r.Exploring {
		if strings.HasPrefix(k, "a/") {
			n++
		}
	}
	assert.LessOrEqual(t, n, 1, "team-a explores one GPU's worth at most: %v", r.Exploring)
}

// Pods of a JobSet's Job, of a TrainJob's JobSet's Job and of a Kubeflow
// training job resolve to the Workload Kueue made for the JobSet, the
// TrainJob or the training job (its owner); a pod of a kind
// gpusched-kueue does not gate resolves to nothing.
func TestKueueResolvesJobSetAndKubeflowPods(t *testing.T) {
	now := 0.0
	ctx := context.Background()
	yes := true
	owned := func(name string, ref metav1.OwnerReference) *unstructured.Unstructured {
		u := objects(wl{ns: "a", name: name, queue: "q", gpus: 1, admittedOn: "v100", cq: "team-a"})[0]
		u.SetOwnerReferences([]metav1.OwnerReference{ref})
		return u
	}
	jobset := metav1.OwnerReference{APIVersion: "jobset.x-k8s.io/v1alpha2", Kind: "JobSet", Name: "js", UID: "uid-jobset", Controller: &yes}
	pytorch := metav1.OwnerReference{APIVersion: "kubeflow.org/v1", Kind: "PyTorchJob", Name: "pt", UID: "uid-pytorch", Controller: &yes}
	ray := metav1.OwnerReference{APIVersion: "ray.io/v1", Kind: "RayJob", Name: "rj", UID: "uid-ray", Controller: &yes}
	c, _ := learnedCluster(t, &now)
	train := metav1.OwnerReference{APIVersion: "trainer.kubeflow.org/v1alpha1", Kind: "TrainJob", Name: "tj", UID: "uid-train", Controller: &yes}
	for _, u := range []*unstructured.Unstructured{owned("wl-js", jobset), owned("wl-pt", pytorch), owned("wl-ray", ray), owned("wl-tj", train)} {
		_, err := c.dyn.Resource(kueue.WorkloadsGVR).Namespace("a").Create(ctx, u, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	c.round()
	sel := map[string]string{"batch.kubernetes.io/controller-uid": "uid-js-job"}
	job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "js-workers-0", UID: "uid-js-job", OwnerReferences: []metav1.OwnerReference{jobset}},
		Spec: batchv1.JobSpec{Selector: &metav1.LabelSelector{MatchLabels: sel}}}
	_, err := c.cs.BatchV1().Jobs("a").Create(ctx, job, metav1.CreateOptions{})
	require.NoError(t, err)
	pod := func(name string, labels map[string]string, ref metav1.OwnerReference) types.UID {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: name, UID: types.UID("pod-" + name), Labels: labels, CreationTimestamp: metav1.Now(),
			OwnerReferences: []metav1.OwnerReference{ref}}, Spec: corev1.PodSpec{NodeName: "n1"}, Status: corev1.PodStatus{Phase: corev1.PodRunning}}
		_, err := c.cs.CoreV1().Pods("a").Create(ctx, p, metav1.CreateOptions{})
		require.NoError(t, err)
		return p.UID
	}
	jobRef := metav1.OwnerReference{APIVersion: "batch/v1", Kind: "Job", Name: job.Name, UID: job.UID, Controller: &yes}
	key, ok := c.ctrl.Workload("a", "js-0", pod("js-0", sel, jobRef))
	assert.True(t, ok, "a JobSet's pod")
	assert.Equal(t, "a/wl-js", key)
	// A TrainJob's JobSet, its Job and its pod.
	tjs := &unstructured.Unstructured{}
	tjs.SetAPIVersion("jobset.x-k8s.io/v1alpha2")
	tjs.SetKind("JobSet")
	tjs.SetNamespace("a")
	tjs.SetName("tj")
	tjs.SetUID("uid-tj-jobset")
	tjs.SetOwnerReferences([]metav1.OwnerReference{train})
	_, err = c.dyn.Resource(schema.GroupVersionResource{Group: "jobset.x-k8s.io", Version: "v1alpha2", Resource: "jobsets"}).Namespace("a").Create(ctx, tjs, metav1.CreateOptions{})
	require.NoError(t, err)
	tsel := map[string]string{"batch.kubernetes.io/controller-uid": "uid-tj-job"}
	tjob := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "tj-node-0", UID: "uid-tj-job", OwnerReferences: []metav1.OwnerReference{
		{APIVersion: "jobset.x-k8s.io/v1alpha2", Kind: "JobSet", Name: "tj", UID: "uid-tj-jobset", Controller: &yes}}},
		Spec: batchv1.JobSpec{Selector: &metav1.LabelSelector{MatchLabels: tsel}}}
	_, err = c.cs.BatchV1().Jobs("a").Create(ctx, tjob, metav1.CreateOptions{})
	require.NoError(t, err)
	key, ok = c.ctrl.Workload("a", "tj-0", pod("tj-0", tsel, metav1.OwnerReference{APIVersion: "batch/v1", Kind: "Job", Name: tjob.Name, UID: tjob.UID, Controller: &yes}))
	assert.True(t, ok, "a TrainJob's pod")
	assert.Equal(t, "a/wl-tj", key)
	key, ok = c.ctrl.Workload("a", "pt-0", pod("pt-0", nil, pytorch))
	assert.True(t, ok, "a PyTorchJob's pod")
	assert.Equal(t, "a/wl-pt", key)
	_, ok = c.ctrl.Workload("a", "rj-0", pod("rj-0", nil, ray))
	assert.False(t, ok, "a RayJob's pod: not a kind the controller resolves")
}
