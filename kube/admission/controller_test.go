package admission

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gpusched/gpusched/allocation"
	"github.com/gpusched/gpusched/kube/model"
	"github.com/gpusched/gpusched/kube/tenancy"
	"github.com/gpusched/gpusched/perfmodel"
	"github.com/gpusched/gpusched/perfmodel/gavel"
	"github.com/gpusched/gpusched/topology"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
)

// Three 4-GPU jobs on one V100 and one K80 node of 4 GPUs each: each
// round admits two of them, one per type, and the third waits; the
// mechanism rotates them, so pods are preempted (deleted, created again
// gated) and others admitted, and the gates are off exactly for the
// admitted ones.
func TestRoundAdmitsRotatesAndPreempts(t *testing.T) {
	ctx := context.Background()
	cs := fake.NewClientset(gpuNode("v1", "Tesla-V100-SXM2-16GB", 4), gpuNode("k1", "Tesla-K80", 4), gpuNode("other", "Tesla-V100-SXM2-16GB", 8))
	// The "other" node is not in the pool: the controller leaves it alone.
	require.NoError(t, cs.Tracker().Update(corev1.SchemeGroupVersion.WithResource("nodes"), func() *corev1.Node {
		n := gpuNode("other", "Tesla-V100-SXM2-16GB", 8)
		delete(n.Labels, "pool")
		return n
	}(), ""))
	for _, n := range []string{"a", "b", "c"} {
		_, err := cs.CoreV1().Pods(testNS).Create(ctx, gatedPod(testNS, n, 4, rates("v100=4,k80=1")), metav1.CreateOptions{})
		require.NoError(t, err)
	}
	clk := &testClock{}
	c := newController(t, cs, clk, nil)
	ran := map[string]map[topology.GPUType]int{}
	preemptions := 0
	for round := range 9 {
		clk.t = float64(round) * 360
		res, err := syncRound(ctx, c)
		require.NoError(t, err)
		require.Equal(t, round+1, res.Round)
		require.Equal(t, map[topology.GPUType]int{topology.V100: 4, topology.K80: 4}, res.Capacity)
		require.Len(t, res.Admitted, 2, "round %d: %+v", round, res)
		require.Equal(t, res.Assigned, res.Admitted, "round %d", round)
		checkInvariants(t, cs, res)
		for k, typ := range res.Admitted {
			if ran[k] == nil {
				ran[k] = map[topology.GPUType]int{}
			}
			ran[k][typ]++
			p := getPod(t, cs, testNS, strings.TrimPrefix(k, "pod/"+testNS+"/"))
			want := []string{"Tesla-K80"}
			if typ == topology.V100 {
				want = []string{"Tesla-V100-SXM2-16GB"}
			}
			require.Equal(t, want, affinityProducts(&p.Spec), k)
			require.Equal(t, []string{"test"}, selectorValues(&p.Spec, "pool"), k)
			// Pinned to the node the core placed it on.
			node := map[topology.GPUType]string{topology.V100: "v1", topology.K80: "k1"}[typ]
			require.Equal(t, []string{node}, p.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms[0].MatchFields[0].Values, k)
		}
		preemptions += len(res.Preempted)
		for _, k := range res.Preempted {
			_, err := cs.CoreV1().Pods(testNS).Get(ctx, strings.TrimPrefix(k, "pod/"+testNS+"/"), metav1.GetOptions{})
			require.True(t, err == nil || isNotFound(err))
		}
	}
	// Max-min fairness with rates 4 (V100) and 1 (K80): each job gets
	// 1/3 of the V100 time and 2/3 of... the equal-share optimum gives
	// every job the same normalised rate; over 9 rounds every job ran,
	// on both types, and some pods were preempted and requeued.
	require.Len(t, ran, 3)
	for k, m := range ran {
		assert.Greater(t, m[topology.V100]+m[topology.K80], 3, k)
	}
	assert.Positive(t, preemptions)
	// A requeued pod carries its preemption count and no affinity of ours.
	pods, err := cs.CoreV1().Pods(testNS).List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	require.Len(t, pods.Items, 3)
	total := 0
	for _, p := range pods.Items {
		total += atoi(p.Annotations[AnnotationPreemptions])
	}
	assert.Equal(t, preemptions, total)
	// The events say why.
	evs, err := cs.CoreV1().Events(testNS).List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	reasons := map[string]int{}
	for _, e := range evs.Items {
		reasons[e.Reason]++
		if e.Reason == ReasonPreempted {
			assert.Contains(t, e.Message, "lease ended at round")
		}
	}
	assert.Positive(t, reasons[ReasonAdmitted])
	assert.Positive(t, reasons[ReasonPreempted])
}

func selectorValues(p *corev1.PodSpec, key string) []string {
	var out []string
	for _, term := range p.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
		for _, r := range term.MatchExpressions {
			if r.Key == key {
				out = append(out, r.Values...)
			}
		}
	}
	return out
}

func isNotFound(err error) bool { return err != nil && strings.Contains(err.Error(), "not found") }

// A malformed workload gets a Warning event naming what is wrong and is
// skipped; the others are admitted.
func TestMalformedWorkloadsReportedAndSkipped(t *testing.T) {
	ctx := context.Background()
	cs := fake.NewClientset(gpuNode("v1", "Tesla-V100-SXM2-16GB", 8))
	bad := []*corev1.Pod{
		gatedPod(testNS, "bad-rates", 1, rates("v100=fast")),
		gatedPod(testNS, "no-gpus", 0, nil),
		func() *corev1.Pod {
			p := gatedPod(testNS, "bad-queue", 1, nil)
			p.Labels = map[string]string{LabelQueue: "team-b"}
			return p
		}(),
		gatedPod(testNS, "bad-types", 1, map[string]string{model.AnnotationGPUTypes: ""}),
	}
	g1 := gatedPod(testNS, "gang-0", 1, map[string]string{model.AnnotationMinMember: "2"})
	g2 := gatedPod(testNS, "gang-1", 1, map[string]string{model.AnnotationMinMember: "3"})
	g1.Labels = map[string]string{model.LabelPodGroup: "g"}
	g2.Labels = map[string]string{model.LabelPodGroup: "g"}
	good := gatedPod(testNS, "good", 2, rates("v100=1"))
	for _, p := range append(bad, g1, g2, good) {
		_, err := cs.CoreV1().Pods(testNS).Create(ctx, p, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	clk := &testClock{}
	c := newController(t, cs, clk, nil)
	res, err := syncRound(ctx, c)
	require.NoError(t, err)
	assert.Equal(t, map[string]topology.GPUType{"pod/team-a/good": topology.V100}, res.Admitted)
	assert.Equal(t, []string{"group/team-a/g", "pod/team-a/bad-queue", "pod/team-a/bad-rates", "pod/team-a/bad-types", "pod/team-a/no-gpus"}, res.Skipped)
	checkInvariants(t, cs, res)
	evs, err := cs.CoreV1().Events(testNS).List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	warned := map[string]string{}
	for _, e := range evs.Items {
		if e.Type == corev1.EventTypeWarning {
			require.Equal(t, ReasonMalformed, e.Reason)
			warned[e.InvolvedObject.Name] = e.Message
		}
	}
	assert.Contains(t, warned["bad-rates"], model.AnnotationThroughput)
	assert.Contains(t, warned["no-gpus"], "asks for no GPUs")
	assert.Contains(t, warned["bad-queue"], "may use only queue team-a")
	assert.Contains(t, warned["gang-0"], "members disagree")
	// A second round records no second event for the same fault.
	clk.t = 360
	_, err = syncRound(ctx, c)
	require.NoError(t, err)
	evs2, err := cs.CoreV1().Events(testNS).List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	assert.Len(t, evs2.Items, len(evs.Items))
}

// A Job is admitted by clearing spec.suspend, taking the gate off its
// template and steering the template to the type; preempted, it is
// suspended, and admitted again later.
func TestJobAdmittedAndSuspended(t *testing.T) {
	ctx := context.Background()
	cs := fake.NewClientset(gpuNode("v1", "Tesla-V100-SXM2-16GB", 4))
	j1 := gatedJob(testNS, "j1", 2, 2, rates("v100=1"))
	j2 := gatedJob(testNS, "j2", 2, 2, rates("v100=1"))
	for _, j := range []*batchv1.Job{j1, j2} {
		_, err := cs.BatchV1().Jobs(testNS).Create(ctx, j, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	clk := &testClock{}
	c := newController(t, cs, clk, nil)
	seen := map[string]int{}
	for round := range 4 {
		clk.t = float64(round) * 360
		res, err := syncRound(ctx, c)
		require.NoError(t, err)
		require.Len(t, res.Admitted, 1, "round %d", round)
		assert.Equal(t, 4, res.GPUs["job/team-a/j1"])
		for _, name := range []string{"j1", "j2"} {
			j, err := cs.BatchV1().Jobs(testNS).Get(ctx, name, metav1.GetOptions{})
			require.NoError(t, err)
			_, admitted := res.Admitted["job/team-a/"+name]
			require.Equal(t, !admitted, *j.Spec.Suspend, name)
			if admitted || seen[name] == 0 {
				// Gated until first admitted; a preempted Job is only
				// suspended (its template cannot change while it runs).
				require.Equal(t, !admitted, hasGate(j.Spec.Template.Spec.SchedulingGates), name)
			}
			if admitted {
				seen[name]++
				require.Equal(t, []string{"Tesla-V100-SXM2-16GB"}, affinityProducts(&j.Spec.Template.Spec))
			} else if round > 0 && seen[name] > 0 {
				assert.Contains(t, j.Annotations[AnnotationPreempted], "lease ended")
			}
		}
	}
	assert.Equal(t, 2, seen["j1"])
	assert.Equal(t, 2, seen["j2"])
	// A finished Job is forgotten.
	j, err := cs.BatchV1().Jobs(testNS).Get(ctx, "j1", metav1.GetOptions{})
	require.NoError(t, err)
	j.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobComplete, Status: corev1.ConditionTrue}}
	_, err = cs.BatchV1().Jobs(testNS).UpdateStatus(ctx, j, metav1.UpdateOptions{})
	require.NoError(t, err)
	clk.t = 4 * 360
	res, err := syncRound(ctx, c)
	require.NoError(t, err)
	assert.Equal(t, []string{"job/team-a/j1"}, res.Finished)
	assert.Equal(t, map[string]topology.GPUType{"job/team-a/j2": topology.V100}, res.Admitted)
}

// Without preemption a job once admitted keeps its GPUs; newcomers are
// admitted only into free GPUs.
func TestNoPreemptionAdmitsIntoFreeGPUs(t *testing.T) {
	ctx := context.Background()
	cs := fake.NewClientset(gpuNode("v1", "Tesla-V100-SXM2-16GB", 4))
	for _, n := range []string{"a", "b", "c"} {
		_, err := cs.CoreV1().Pods(testNS).Create(ctx, gatedPod(testNS, n, 2, rates("v100=1")), metav1.CreateOptions{})
		require.NoError(t, err)
	}
	clk := &testClock{}
	c := newController(t, cs, clk, func(cfg *Config) { cfg.NoPreemption = true })
	var first map[string]topology.GPUType
	for round := range 5 {
		clk.t = float64(round) * 360
		res, err := syncRound(ctx, c)
		require.NoError(t, err)
		checkInvariants(t, cs, res)
		assert.Empty(t, res.Preempted)
		if round == 0 {
			first = res.Admitted
			require.Len(t, first, 2)
		}
		assert.Equal(t, first, res.Admitted, "round %d", round)
	}
	// One admitted job ends: the waiting one takes its GPUs.
	done := slices.Sorted(maps.Keys(first))[0]
	p := getPod(t, cs, testNS, strings.TrimPrefix(done, "pod/team-a/"))
	p.Status.Phase = corev1.PodSucceeded
	_, err := cs.CoreV1().Pods(testNS).UpdateStatus(ctx, p, metav1.UpdateOptions{})
	require.NoError(t, err)
	clk.t = 5 * 360
	res, err := syncRound(ctx, c)
	require.NoError(t, err)
	assert.Equal(t, []string{done}, res.Finished)
	assert.Len(t, res.Admitted, 2)
	assert.NotContains(t, res.Admitted, done)
	checkInvariants(t, cs, res)
}

// A preempted pod keeps running through its grace, annotated with the
// reason; the sweep deletes it when the grace is over and creates it again,
// gated.
func TestGraceThenDeleteAndRequeue(t *testing.T) {
	ctx := context.Background()
	cs := fake.NewClientset(gpuNode("v1", "Tesla-V100-SXM2-16GB", 4))
	for _, n := range []string{"a", "b"} {
		_, err := cs.CoreV1().Pods(testNS).Create(ctx, gatedPod(testNS, n, 4, rates("v100=1")), metav1.CreateOptions{})
		require.NoError(t, err)
	}
	clk := &testClock{}
	wall := time.Date(2026, 12, 1, 5, 0, 0, 0, time.UTC)
	c := newController(t, cs, clk, func(cfg *Config) {
		cfg.Grace = 30 * time.Second
		cfg.Now = func() time.Time { return wall }
	})
	res, err := syncRound(ctx, c)
	require.NoError(t, err)
	require.Len(t, res.Admitted, 1)
	first := slices.Sorted(maps.Keys(res.Admitted))[0]
	name := strings.TrimPrefix(first, "pod/team-a/")
	clk.t = 360
	res, err = syncRound(ctx, c)
	require.NoError(t, err)
	require.Equal(t, []string{first}, res.Preempted)
	// The other job is held: its type's GPUs are still in the grace of the
	// preempted pod? No: the preempted pod no longer counts as admitted,
	// so the other is admitted and waits in the scheduler for the GPUs.
	require.Len(t, res.Admitted, 1)
	p := getPod(t, cs, testNS, name)
	assert.Contains(t, p.Annotations[AnnotationPreempted], "lease ended at round 2")
	assert.Equal(t, wall.Add(30*time.Second).Format(time.RFC3339Nano), p.Annotations[AnnotationDeleteAfter])
	require.NoError(t, c.Sweep(ctx))
	getPod(t, cs, testNS, name) // still there
	wall = wall.Add(31 * time.Second)
	uid := p.UID
	require.NoError(t, c.Sweep(ctx)) // deletes it
	require.NoError(t, c.Sweep(ctx)) // creates it again
	p = getPod(t, cs, testNS, name)
	assert.NotEqual(t, uid, p.UID)
	assert.True(t, hasGate(p.Spec.SchedulingGates))
	assert.Empty(t, p.Annotations[AnnotationPreempted])
	assert.Equal(t, "1", p.Annotations[AnnotationPreemptions])
	assert.Nil(t, p.Spec.Affinity)
}

// A controller that restarts from its ConfigMap makes the decisions one
// that ran on would have made: same admissions, same types, every round,
// with jobs arriving and finishing around the restart.
func TestRestartChangesNothing(t *testing.T) {
	run := func(restartAt int) []map[string]topology.GPUType {
		ctx := context.Background()
		cs := fake.NewClientset(gpuNode("v1", "Tesla-V100-SXM2-16GB", 4), gpuNode("p1", "Tesla-P100-PCIE-16GB", 4), gpuNode("k1", "Tesla-K80", 4))
		clk := &testClock{}
		mk := func() *Controller { return newController(t, cs, clk, nil) }
		c := mk()
		kinds := []string{"v100=4,p100=2,k80=1", "v100=2,p100=1.5,k80=1", "v100=3,p100=3,k80=1"}
		var out []map[string]topology.GPUType
		for round := range 14 {
			if round < 6 {
				for i := range 2 {
					name := fmt.Sprintf("j%d-%d", round, i)
					p := gatedPod(testNS, name, 1+(round+i)%2*1, rates(kinds[(round+i)%3]))
					p.UID = ""
					p.CreationTimestamp = metav1.NewTime(time.Unix(int64(100+round*2+i), 0))
					_, err := cs.CoreV1().Pods(testNS).Create(ctx, p, metav1.CreateOptions{})
					require.NoError(t, err)
				}
			}
			if round == 9 {
				p := getPod(t, cs, testNS, "j0-0")
				p.Status.Phase = corev1.PodSucceeded
				_, err := cs.CoreV1().Pods(testNS).UpdateStatus(ctx, p, metav1.UpdateOptions{})
				require.NoError(t, err)
			}
			if round == restartAt {
				c = mk()
			}
			clk.t = float64(round) * 360
			res, err := syncRound(ctx, c)
			require.NoError(t, err)
			checkInvariants(t, cs, res)
			out = append(out, res.Assigned)
		}
		return out
	}
	plain := run(-1)
	for _, at := range []int{3, 8} {
		restarted := run(at)
		for i := range plain {
			require.Equal(t, plain[i], restarted[i], "restart at round %d changes round %d", at, i)
		}
	}
}

// The rates a job gets are its claim (annotation, or the model's entry
// for its kind) relative to itself, within the admin's ratio, at the
// admin's reference rate; weight, steps and tenant never come from the
// workload.
func TestThroughputSources(t *testing.T) {
	known := []topology.GPUType{topology.K80, topology.V100}
	env := &specEnv{ten: tenancy.PerNamespace(), model: gavel.Simulation(), known: known}
	mk := func(ann map[string]string) *workload {
		w := &workload{key: "pod/ns/x", kind: kindPod, ns: "ns", name: "x", gpus: 1, ann: ann,
			pods: []*corev1.Pod{{}}}
		var err error
		w.place, err = env.ten.Resolve("ns", nil)
		require.NoError(t, err)
		return w
	}
	spec, notes, err := mk(rates("Tesla-V100-SXM2-16GB=3, k80=1")).spec(env)
	require.NoError(t, err)
	assert.Empty(t, notes)
	assert.Equal(t, map[topology.GPUType]float64{topology.V100: 1, topology.K80: 0.3333}, spec.Throughput)
	assert.Equal(t, "ns", spec.Tenant)
	assert.InDelta(t, 1, spec.Weight, 0)

	// A claim a billion times larger is the same job.
	spec2, _, err := mk(rates("v100=3e9,k80=1e9")).spec(env)
	require.NoError(t, err)
	assert.Equal(t, spec.Throughput, spec2.Throughput)

	// The model's rates for the kind, normalized too.
	spec, notes, err = mk(map[string]string{model.AnnotationJobKind: "ResNet-18", model.AnnotationBatchSize: "64"}).spec(env)
	require.NoError(t, err)
	assert.Empty(t, notes)
	assert.Nil(t, spec.Model)
	assert.InDelta(t, 1, spec.Throughput[topology.V100], 0)
	k80, _ := gavel.Simulation().Throughput(perfmodel.JobKey{Model: "ResNet-18", BatchSize: 64, ScaleFactor: 1}, topology.K80)
	v100, _ := gavel.Simulation().Throughput(perfmodel.JobKey{Model: "ResNet-18", BatchSize: 64, ScaleFactor: 1}, topology.V100)
	assert.InDelta(t, k80/v100, spec.Throughput[topology.K80], 1e-3)

	spec, notes, err = mk(map[string]string{model.AnnotationJobKind: "NoSuchNet"}).spec(env)
	require.NoError(t, err)
	assert.Contains(t, strings.Join(notes, ";"), "does not know NoSuchNet")
	assert.Equal(t, map[topology.GPUType]float64{topology.V100: 1, topology.K80: 1}, spec.Throughput)

	// Weight and steps annotations are ignored, and said so.
	spec, notes, err = mk(map[string]string{AnnotationWeight: "1e9", AnnotationSteps: "1"}).spec(env)
	require.NoError(t, err)
	assert.InDelta(t, 1, spec.Weight, 0)
	assert.Zero(t, spec.RemainingSteps)
	assert.Contains(t, strings.Join(notes, ";"), AnnotationWeight+" ignored")
	assert.Contains(t, strings.Join(notes, ";"), AnnotationSteps+" ignored")

	// A tenancy: the queue's weight, priority cap and expected run time.
	ten, err := tenancy.Parse([]byte(`
rates: {maxRatio: 4, reference: 2}
tenants:
- name: vision
  weight: 3
  namespaces: [ns]
  queues:
  - {name: batch, jobWeight: 2, maxPriority: 10, expectedSeconds: 100}`))
	require.NoError(t, err)
	env.ten = ten
	w := mk(rates("v100=100,k80=1"))
	w.pods[0].Spec.Priority = ptrTo(int32(1000))
	spec, notes, err = w.spec(env)
	require.NoError(t, err)
	assert.Equal(t, "vision", spec.Tenant)
	assert.InDelta(t, 2, spec.Weight, 0)
	assert.Equal(t, 10, spec.Priority)
	assert.InDelta(t, 200, spec.RemainingSteps, 0)
	assert.Equal(t, map[topology.GPUType]float64{topology.V100: 2, topology.K80: 0.5}, spec.Throughput)
	assert.Contains(t, strings.Join(notes, ";"), "capped at 10")
	assert.Contains(t, strings.Join(notes, ";"), "maxRatio")

	// Types the cluster lacks are dropped; a claim rating none of the
	// cluster's types is refused.
	spec, _, err = mk(map[string]string{model.AnnotationThroughput: "v100=1,a100=2", model.AnnotationGPUTypes: "v100,a100"}).spec(env)
	require.NoError(t, err)
	assert.Equal(t, []topology.GPUType{topology.V100}, spec.Types)
	assert.Equal(t, map[topology.GPUType]float64{topology.V100: 2}, spec.Throughput)
	for _, bad := range []string{"", "v100", "v100=1,v100=2", "v100=-1", "v100=NaN", "=1", strings.Repeat("a", 5000), "a100=1"} {
		_, _, err := mk(rates(bad)).spec(env)
		assert.ErrorIs(t, err, ErrMalformed, "%q", bad)
	}
	_, _, err = mk(map[string]string{model.AnnotationGPUTypes: "a100"}).spec(env)
	assert.ErrorIs(t, err, ErrMalformed)
}

func TestConfigErrors(t *testing.T) {
	cs := fake.NewClientset()
	pol, err := PolicyByName("fifo")
	require.NoError(t, err)
	for name, cfg := range map[string]Config{
		"no client":   {Policy: pol},
		"no policy":   {Client: cs},
		"round":       {Client: cs, Policy: pol, RoundSeconds: -1},
		"grace":       {Client: cs, Policy: pol, Grace: -time.Second, StateNamespace: "x"},
		"round (NaN)": {Client: cs, Policy: pol, RoundSeconds: nan(), StateNamespace: "x"},
		"no state ns": {Client: cs, Policy: pol},
		"tenancy cm":  {Client: cs, Policy: pol, NoState: true, TenancyConfigMap: "t"},
	} {
		_, err := New(context.Background(), cfg)
		assert.ErrorIs(t, err, ErrConfig, name)
	}
	_, err = PolicyByName("best")
	assert.ErrorIs(t, err, ErrConfig)
	for _, n := range Policies() {
		p, err := PolicyByName(n)
		require.NoError(t, err)
		require.NotNil(t, p)
	}
}

func nan() float64 { z := 0.0; return z / z }

// A state this controller cannot read (hostile, corrupt, of another
// format) gets a Warning event on its ConfigMap and a clean start, never
// an error: no saved state can keep the controller from starting.
func TestBadStateCleanStart(t *testing.T) {
	for name, data := range map[string]map[string]string{
		"old format":  {"controller.json": `{"version":1}`},
		"bad head":    {stateKeyHead: `{"version":`},
		"big head":    {stateKeyHead: `{"version":2,"gen":1,"chunks":1000000,"bytes":1,"sha256":""}`},
		"hash":        {stateKeyHead: `{"version":2,"gen":1,"chunks":0,"bytes":0,"sha256":"00"}`},
		"extra field": {stateKeyHead: `{"version":2,"evil":1}`},
	} {
		cs := fake.NewClientset(gpuNode("v1", "Tesla-V100-SXM2-16GB", 4), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: DefaultStateName, Namespace: "gpusched"}, Data: data},
			gatedPod(testNS, "a", 4, rates("v100=1")))
		c, err := New(context.Background(), Config{Client: cs, Policy: &allocation.MaxMinFairness{}, StateNamespace: "gpusched"})
		require.NoError(t, err, name)
		t.Cleanup(c.Close)
		evs, err := cs.CoreV1().Events("gpusched").List(context.Background(), metav1.ListOptions{})
		require.NoError(t, err)
		require.Len(t, evs.Items, 1, name)
		assert.Equal(t, ReasonBadState, evs.Items[0].Reason, name)
		assert.Equal(t, corev1.EventTypeWarning, evs.Items[0].Type, name)
		assert.Equal(t, "ConfigMap", evs.Items[0].InvolvedObject.Kind, name)
		res, err := syncRound(context.Background(), c)
		require.NoError(t, err, name)
		assert.Len(t, res.Admitted, 1, name)
		// The next save replaced it: a second controller starts quietly.
		c2, err := New(context.Background(), Config{Client: cs, Policy: &allocation.MaxMinFairness{}, StateNamespace: "gpusched"})
		require.NoError(t, err, name)
		c2.Close()
		evs, err = cs.CoreV1().Events("gpusched").List(context.Background(), metav1.ListOptions{})
		require.NoError(t, err)
		assert.Len(t, evs.Items, 1, name)
	}
}

var _ kubernetes.Interface = (*fake.Clientset)(nil)
