package admission

import (
	"math"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gpusched/gpusched/perfmodel/learn"
	"github.com/gpusched/gpusched/scheduler"
	"github.com/gpusched/gpusched/topology"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// setRunning marks every bound pod Running, as its kubelet would.
func setRunning(t *testing.T, p *playground) {
	t.Helper()
	for _, pod := range p.pods() {
		if pod.Spec.NodeName != "" && pod.Status.Phase != corev1.PodRunning && !terminal(pod) {
			pod.Status.Phase = corev1.PodRunning
			_, err := p.cs.CoreV1().Pods(pod.Namespace).UpdateStatus(p.ctx, pod, metav1.UpdateOptions{})
			require.NoError(t, err)
		}
	}
	require.NoError(t, p.c.SyncCaches(p.ctx))
}

// With Config.Estimator, the progress channel's resolver (Workload) maps
// a running pod to its workload (a bare pod's own key, a Job's pod to its
// Job), and its sink (Progress) feeds the core: after two rounds of
// reports every workload is measured on the V100s it ran on, its claim
// on K80 (a type the cluster has not) left as a claim. A pod with another
// UID, a pod that is not running, a workload the core does not learn and
// a tenant's pod naming another namespace's Job resolve to nothing.
func TestProgressChannelFeedsTheCore(t *testing.T) {
	l, err := learn.New(learn.Config{})
	require.NoError(t, err)
	p := newPlayground(t, DefaultPolicy, "", func(cfg *Config) { cfg.Estimator = l },
		gatedPod("v1", "solo", 4, rates("v100=2,k80=1")), gatedJob("v2", "train", 1, 4, nil))
	steps := map[string]float64{}
	for r := range 3 {
		p.round(r)
		setRunning(t, p)
		for _, pod := range p.pods() {
			if pod.Status.Phase != corev1.PodRunning {
				continue
			}
			key, ok := p.c.Workload(pod.Namespace, pod.Name, pod.UID)
			require.True(t, ok, "round %d: %s/%s resolves", r, pod.Namespace, pod.Name)
			start := p.clk.t
			for i := 0; i <= 6; i++ {
				p.clk.t = start + 60*float64(i)
				require.NoError(t, p.c.Progress(key, steps[key]+100*float64(i), time.Now()), "round %d: %s", r, key)
			}
			steps[key] += 600
			p.clk.t = start
		}
	}
	for _, key := range []string{"pod/v1/solo", "job/v2/train"} {
		st, err := p.c.Scheduler().Status(key)
		require.NoError(t, err)
		require.True(t, st.Spec.Learn, key)
		got := map[topology.GPUType]learn.Source{}
		for _, e := range st.Estimates {
			got[e.Type] = e.Source
		}
		assert.Equal(t, learn.SourceMeasured, got[topology.V100], "%s: %+v", key, st.Estimates)
	}
	solo, err := p.cs.CoreV1().Pods("v1").Get(p.ctx, "solo", metav1.GetOptions{})
	require.NoError(t, err)
	_, ok := p.c.Workload("v1", "solo", types.UID("not-its-uid"))
	assert.False(t, ok, "another UID")
	_, ok = p.c.Workload("v1", "nobody", solo.UID)
	assert.False(t, ok, "no such pod")
	// A tenant's pod naming v2's Job as its controller, from its own
	// namespace: not that Job's.
	forged := gatedPod("v1", "forged", 1, nil)
	forged.Spec.SchedulingGates, forged.Spec.NodeName, forged.Status.Phase = nil, "n1", corev1.PodRunning
	job, err := p.cs.BatchV1().Jobs("v2").Get(p.ctx, "train", metav1.GetOptions{})
	require.NoError(t, err)
	yes := true
	forged.OwnerReferences = []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: "train", UID: job.UID, Controller: &yes}}
	_, err = p.cs.CoreV1().Pods("v1").Create(p.ctx, forged, metav1.CreateOptions{})
	require.NoError(t, err)
	require.NoError(t, p.c.SyncCaches(p.ctx))
	_, ok = p.c.Workload("v1", "forged", forged.UID)
	assert.False(t, ok, "a pod naming another namespace's Job")
	// The core refuses what does not hold: steps back past a restart are
	// a new run, a report of an unknown workload an error.
	err = p.c.Progress("pod/v1/nobody", 10, time.Now())
	assert.ErrorIs(t, err, scheduler.ErrUnknownJob)
}

// Without Config.Estimator nothing resolves: the core learns no rates.
func TestProgressChannelOffWithoutEstimator(t *testing.T) {
	p := newPlayground(t, DefaultPolicy, "", nil, gatedPod("v1", "solo", 4, rates("v100=2")))
	p.round(0)
	setRunning(t, p)
	solo, err := p.cs.CoreV1().Pods("v1").Get(p.ctx, "solo", metav1.GetOptions{})
	require.NoError(t, err)
	_, ok := p.c.Workload("v1", "solo", solo.UID)
	assert.False(t, ok)
}

// The channel's calls never wait for a round and race with none (run
// under -race): reports of every pod while rounds run and the tenancy's
// core is rebuilt.
func TestProgressChannelConcurrent(t *testing.T) {
	l, err := learn.New(learn.Config{})
	require.NoError(t, err)
	var clock atomic.Uint64 // the rounds' clock, read by the reports too
	p := newPlayground(t, DefaultPolicy, "", func(cfg *Config) {
		cfg.Estimator = l
		cfg.Clock = func() float64 { return math.Float64frombits(clock.Load()) }
	}, gatedPod("v1", "solo", 4, nil), gatedPod("v2", "other", 4, nil))
	p.round(0)
	setRunning(t, p)
	pods := p.pods()
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range 200 {
			for _, pod := range pods {
				if key, ok := p.c.Workload(pod.Namespace, pod.Name, pod.UID); ok {
					_ = p.c.Progress(key, float64(i), time.Now())
				}
			}
		}
	}()
	for r := 1; r < 4; r++ {
		clock.Store(math.Float64bits(float64(r) * 360))
		p.round(r)
	}
	<-done
}

// A learned workload measured on two types is told so: three 4-GPU pods
// on 8 V100s and 4 K80s take turns on the K80s; each reports its steps
// at its true rate on the type the round gave it (a: 3 steps/s on V100,
// 1 on K80); once measured on both, a says "learned: 3.0x faster on v100
// than k80" in a GPUSchedLearned event, once (not at every round).
func TestLearnedEvent(t *testing.T) {
	l, err := learn.New(learn.Config{})
	require.NoError(t, err)
	p := newPlayground(t, DefaultPolicy, "", func(cfg *Config) { cfg.Estimator = l },
		gatedPod("v1", "a", 4, nil), gatedPod("v2", "b", 4, nil), gatedPod("v3", "c", 4, nil), gpuNode("k1", "Tesla-K80", 4))
	truth := map[string]map[topology.GPUType]float64{
		"pod/v1/a": {topology.V100: 3, topology.K80: 1}, "pod/v2/b": {topology.V100: 1.2, topology.K80: 1}, "pod/v3/c": {topology.V100: 1.2, topology.K80: 1},
	}
	runAtTruth(t, p, truth, map[string]float64{}, 0, 12)
	msgs := reasonMessages(t, p.cs, ReasonLearned)
	var a []string
	for _, m := range msgs {
		if strings.Contains(m, "learned: 3.0x faster on v100 than k80") {
			a = append(a, m)
		}
	}
	t.Logf("%q", msgs)
	require.NotEmpty(t, a, "a is told what was learned")
	assert.Len(t, a, 1, "once, not at every round")
}

// runAtTruth runs rounds from, ..., to-1 of p, each admitted workload
// reporting its progress every 60 s of the round at its truth on the
// type it runs on (steps: each workload's steps so far).
func runAtTruth(t *testing.T, p *playground, truth map[string]map[topology.GPUType]float64, steps map[string]float64, from, to int) {
	t.Helper()
	for r := from; r < to; r++ {
		res := p.round(r)
		setRunning(t, p)
		for key, typ := range res.Admitted {
			rate := truth[key][typ]
			start := p.clk.t
			for i := 0; i <= 6; i++ {
				p.clk.t = start + 60*float64(i)
				require.NoError(t, p.c.Progress(key, steps[key]+rate*60*float64(i), time.Now()), "round %d: %s on %s", r, key, typ)
			}
			steps[key] += rate * 360
			p.clk.t = start
		}
	}
}
