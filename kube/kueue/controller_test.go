package kueue_test

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/gpusched/gpusched/allocation"
	"github.com/gpusched/gpusched/flavor"
	"github.com/gpusched/gpusched/kube/internal/metricstest"
	"github.com/gpusched/gpusched/kube/kueue"
	"github.com/gpusched/gpusched/topology"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/testutil"
)

// Gavel's measured rates (simulation_throughputs.json): Recommendation
// (batch size 1024) runs faster on a K80 than on a V100, ResNet-50 seven
// times faster on a V100.
var (
	recRates    = map[string]string{"gpusched.io/throughput": "v100=13.28,k80=20.05"}
	resnetRates = map[string]string{"gpusched.io/job-kind": "ResNet-50", "gpusched.io/batch-size": "64"}
)

// base is two flavors, v100 first (Kueue's walk tries it first), one
// ClusterQueue with one GPU of each, and its LocalQueue in namespace a.
func base(extra ...*unstructured.Unstructured) []*unstructured.Unstructured {
	return append([]*unstructured.Unstructured{
		flavorObj("v100", v100), flavorObj("k80", k80),
		cqObj("team-a", "", "", quota{"v100", 1, -1, -1}, quota{"k80", 1, -1, -1}),
		lqObj("a", "q", "team-a"),
	}, extra...)
}

func objects(ws ...wl) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, w := range ws {
		out = append(out, w.objects()...)
	}
	return out
}

// Without the gate, each pending workload's node selector names the type
// the policy gives it: Kueue's walk alone would give the V100 to the older
// Recommendation job and the K80 to ResNet-50; gpusched swaps them.
func TestSteerUngated(t *testing.T) {
	c := newCluster(t, nil, base(objects(
		wl{ns: "a", name: "rec", queue: "q", gpus: 1, ann: recRates},
		wl{ns: "a", name: "resnet", queue: "q", gpus: 1, ann: resnetRates, created: 10},
	)...)...)
	r := c.round()
	assert.Equal(t, []topology.GPUType{"k80", "v100"}, r.Types)
	require.Len(t, r.Decisions, 2)
	assert.Equal(t, kueue.Decision{ClusterQueue: "team-a", Type: "k80", Flavor: "k80", Why: flavor.Start, Share: r.Decisions["a/rec"].Share}, r.Decisions["a/rec"])
	assert.Equal(t, topology.GPUType("v100"), r.Decisions["a/resnet"].Type)
	assert.Equal(t, flavor.Start, r.Decisions["a/resnet"].Why)
	assert.Equal(t, []string{"a/rec", "a/resnet"}, r.Patched)
	assert.Equal(t, 2, r.Writes)
	assert.Equal(t, k80, c.selector("a", "rec"))
	assert.Equal(t, v100, c.selector("a", "resnet"))
	assert.Equal(t, k80, c.get(kueue.WorkloadsGVR, "a", "rec").GetAnnotations()[kueue.AnnotationSteered])
	ev := c.events()
	assert.Len(t, grep(ev, kueue.ReasonSteered), 2, "%q", ev)
	assert.Len(t, grep(ev, "steered to k80 (flavor k80 of ClusterQueue team-a)"), 1, "%q", ev)
	assert.Empty(t, c.patches("jobs"), "no gate, no job written")

	// The next round finds the selectors in place: nothing written.
	r = c.round()
	assert.Zero(t, r.Writes)
	assert.Empty(t, c.events(), "nothing new to say")
}

// A restarted controller decides as the one before it, from the objects
// alone, and writes nothing.
func TestRestartChangesNoDecision(t *testing.T) {
	c := newCluster(t, nil, base(objects(
		wl{ns: "a", name: "rec", queue: "q", gpus: 1, ann: recRates},
		wl{ns: "a", name: "resnet", queue: "q", gpus: 1, ann: resnetRates, created: 10},
		wl{ns: "a", name: "third", queue: "q", gpus: 1, ann: resnetRates, created: 20},
	)...)...)
	before := c.round()
	require.Equal(t, 3, before.Writes)
	c.ctrl = c.controller(nil)
	after := c.round()
	assert.Equal(t, before.Decisions, after.Decisions)
	assert.Zero(t, after.Writes)
	assert.Equal(t, flavor.Busy, after.Decisions["a/third"].Why, "the third waits for a V100")
	assert.Equal(t, topology.GPUType("v100"), after.Decisions["a/third"].Type)
}

// With the gate, a workload waits without writes until it starts; then
// its node selector is written and the gate removed from its job. An
// admitted workload is never written, and holds its quota.
func TestSteerGated(t *testing.T) {
	const gate = "example.com/other," + kueue.DefaultGate
	c := newCluster(t, nil, base(objects(
		wl{ns: "a", name: "old", queue: "q", gpus: 1, ann: recRates, admittedOn: "k80", cq: "team-a"},
		wl{ns: "a", name: "rec", queue: "q", gpus: 1, ann: recRates, gate: gate},
		wl{ns: "a", name: "resnet", queue: "q", gpus: 1, ann: resnetRates, gate: gate, created: 10},
	)...)...)
	r := c.round()
	assert.Equal(t, 1, r.Running)
	assert.Equal(t, flavor.Start, r.Decisions["a/resnet"].Why)
	assert.Equal(t, topology.GPUType("v100"), r.Decisions["a/resnet"].Type)
	assert.NotEqual(t, flavor.Start, r.Decisions["a/rec"].Why, "the K80 is taken")
	assert.Equal(t, topology.GPUType("k80"), r.Decisions["a/rec"].Type)
	assert.Equal(t, []string{"a/resnet"}, r.Patched)
	assert.Equal(t, []string{"a/resnet"}, r.Released)
	assert.Equal(t, 2, r.Writes)
	assert.Equal(t, v100, c.selector("a", "resnet"))
	assert.Empty(t, c.selector("a", "rec"), "a gated workload that waits is not written")
	assert.Empty(t, c.selector("a", "old"))
	job := c.get(jobsGVR, "a", "job-resnet")
	assert.Equal(t, "example.com/other", job.GetAnnotations()[kueue.AnnotationAdmissionGatedBy], "only its own gate removed")
	assert.Equal(t, gate, c.get(jobsGVR, "a", "job-rec").GetAnnotations()[kueue.AnnotationAdmissionGatedBy])
	assert.Len(t, c.patches("jobs"), 1)
	ev := c.events()
	assert.Len(t, grep(ev, "waits for k80"), 1, "%q", ev)
}

// A workload the controller cannot read gets a Warning event that names
// the field at fault. A gated one stays gated (the attack: a tenant shed
// the gate by writing one malformed annotation, and Kueue admitted it by
// its own walk, outside the policy's order); an ungated one is left to
// Kueue's own walk.
func TestUnreadableStaysGated(t *testing.T) {
	c := newCluster(t, nil, base(objects(
		wl{ns: "a", name: "bad", queue: "q", gpus: 1, ann: map[string]string{"gpusched.io/throughput": "v100=fast"}, gate: kueue.DefaultGate},
		wl{ns: "a", name: "bad-ungated", queue: "q", gpus: 1, ann: map[string]string{"gpusched.io/job-kind": "ResNet-50", "gpusched.io/batch-size": "lots"}},
		wl{ns: "a", name: "good", queue: "q", gpus: 1, ann: resnetRates, created: 10},
	)...)...)
	r := c.round()
	assert.Equal(t, []string{"a/bad", "a/bad-ungated"}, r.Unreadable)
	assert.Empty(t, r.Released, "the unreadable gated workload keeps its gate")
	assert.Equal(t, []string{"a/good"}, r.Patched, "the others go on")
	assert.Empty(t, c.selector("a", "bad"))
	assert.Empty(t, c.selector("a", "bad-ungated"))
	assert.Equal(t, kueue.DefaultGate, c.get(jobsGVR, "a", "job-bad").GetAnnotations()[kueue.AnnotationAdmissionGatedBy], "still gated")
	assert.Empty(t, c.patches("jobs"))
	ev := grep(c.events(), kueue.ReasonUnreadable)
	require.Len(t, ev, 2)
	gated, ungated := grep(ev, "stays gated"), grep(ev, "Kueue's own flavor order decides")
	require.Len(t, gated, 1, "%q", ev)
	require.Len(t, ungated, 1, "%q", ev)
	assert.Contains(t, gated[0], "Warning")
	assert.Contains(t, gated[0], "spec.podSets[main].template.metadata.annotations[gpusched.io/throughput]: annotation gpusched.io/throughput")
	assert.Contains(t, gated[0], "an admin removes gpusched.io/kueue from kueue.x-k8s.io/admission-gated-by of its job")
	assert.Contains(t, ungated[0], "spec.podSets[main].template.metadata.annotations[gpusched.io/batch-size]")

	// Said once.
	c.round()
	assert.Empty(t, c.events())
}

// A tenant's own node selector on the type label is kept: the workload
// starts where it asked, and is never rewritten.
func TestTenantSelectorKept(t *testing.T) {
	c := newCluster(t, nil, base(objects(
		wl{ns: "a", name: "mine", queue: "q", gpus: 1, ann: resnetRates, selector: map[string]string{"nvidia.com/gpu.product": k80}},
	)...)...)
	r := c.round()
	assert.Equal(t, topology.GPUType("k80"), r.Decisions["a/mine"].Type)
	assert.Zero(t, r.Writes)
	assert.Len(t, grep(c.events(), "the type its own node selector names"), 1)
}

// Workloads outside gpusched's queues (no GPU, or a queue without GPU
// flavors) are ignored.
func TestNotOurs(t *testing.T) {
	c := newCluster(t, nil, base(append(objects(
		wl{ns: "a", name: "cpu", queue: "q", gpus: 0},
		wl{ns: "b", name: "elsewhere", queue: "q", gpus: 1},
	), lqObj("b", "q", "cpu-only"), cqObj("cpu-only", "", ""))...)...)
	r := c.round()
	assert.Empty(t, r.Decisions)
	assert.Zero(t, r.Writes)
}

// A gated workload the controller does not steer is never left waiting
// silently for ever: in a ClusterQueue without a GPU flavor it steers
// (here none names its GPU: an untyped flavor) it is released to Kueue's
// own flavor order; one whose LocalQueue does not exist, or whose
// ClusterQueue is stopped, stays gated (Kueue could not admit it either,
// and a released one would shed the gate for good) with an event saying
// why. Before, all three stayed gated with no event.
func TestGatedNotSteered(t *testing.T) {
	untyped := obj("kueue.x-k8s.io/v1beta2", "ResourceFlavor", "", "plain", map[string]any{"spec": map[string]any{}})
	stoppedCQ := cqObj("held", "", "", quota{"v100", 1, -1, -1})
	require.NoError(t, unstructured.SetNestedField(stoppedCQ.Object, "Hold", "spec", "stopPolicy"))
	c := newCluster(t, nil, base(append(objects(
		wl{ns: "b", name: "untyped", queue: "q", gpus: 1, gate: kueue.DefaultGate},
		wl{ns: "a", name: "nolq", queue: "missing", gpus: 1, gate: kueue.DefaultGate},
		wl{ns: "c", name: "stopped", queue: "q", gpus: 1, gate: kueue.DefaultGate},
	), untyped, cqObj("plain-gpus", "", "", quota{"plain", 4, -1, -1}), lqObj("b", "q", "plain-gpus"),
		stoppedCQ, lqObj("c", "q", "held"))...)...)
	r := c.round()
	assert.Equal(t, []string{"b/untyped"}, r.Released)
	assert.Empty(t, c.get(jobsGVR, "b", "job-untyped").GetAnnotations()[kueue.AnnotationAdmissionGatedBy])
	assert.Equal(t, kueue.DefaultGate, c.get(jobsGVR, "a", "job-nolq").GetAnnotations()[kueue.AnnotationAdmissionGatedBy])
	assert.Equal(t, kueue.DefaultGate, c.get(jobsGVR, "c", "job-stopped").GetAnnotations()[kueue.AnnotationAdmissionGatedBy])
	ev := c.events()
	require.Len(t, grep(ev, "released to Kueue's own flavor order: ClusterQueue plain-gpus has no GPU flavor gpusched steers"), 1, "%q", ev)
	nolq := grep(ev, `waits gated: its LocalQueue "missing" does not exist in a`)
	require.Len(t, nolq, 1, "%q", ev)
	assert.Contains(t, nolq[0], "Warning")
	assert.Len(t, grep(ev, "waits gated: ClusterQueue held is stopped"), 1, "%q", ev)
	// Said once.
	c.round()
	assert.Empty(t, c.events())
}

// The metrics of a round, by their names.
func TestMetrics(t *testing.T) {
	m := kueue.NewMetrics()
	reg := metrics.NewKubeRegistry()
	require.NoError(t, m.Register(reg))
	c := newCluster(t, nil, base(objects(
		wl{ns: "a", name: "rec", queue: "q", gpus: 1, ann: recRates},
		wl{ns: "a", name: "resnet", queue: "q", gpus: 1, ann: resnetRates, created: 10},
		wl{ns: "a", name: "third", queue: "q", gpus: 1, ann: resnetRates, created: 20},
	)...)...)
	c.metrics = m
	c.ctrl = c.controller(nil)
	c.round()
	v, err := testutil.GetGaugeMetricValue(m.Pending.WithLabelValues("team-a", "v100"))
	require.NoError(t, err)
	assert.Equal(t, 2.0, v, "resnet and third, one starts, one waits")
	v, err = testutil.GetCounterMetricValue(m.Writes.WithLabelValues("workload", "ok"))
	require.NoError(t, err)
	assert.Equal(t, 3.0, v)
	fams, err := reg.Gather()
	require.NoError(t, err)
	var names []string
	for _, f := range fams {
		names = append(names, f.GetName())
	}
	assert.ElementsMatch(t, names, m.Names(), "Names names every metric a round serves")
}

// A round of minutes (the 15,000-Workload test's took 130 s) reads as
// minutes in the round histogram's quantiles, not as its highest bucket.
func TestMetricsLongRound(t *testing.T) {
	m := kueue.NewMetrics()
	reg := metrics.NewKubeRegistry()
	require.NoError(t, m.Register(reg))
	for range 10 {
		m.RoundDuration.Observe(130)
	}
	fams, err := metricstest.Gather(reg)
	require.NoError(t, err)
	p99, ok := fams.Quantile("gpusched_kueue_round_duration_seconds", nil, 0.99)
	require.True(t, ok)
	assert.Greater(t, p99, 65.0, "p99 of 130 s rounds")
	assert.LessOrEqual(t, p99, 262.2, "p99 of 130 s rounds")
}

// A claim of huge rates weighs what an honest claim of the same ratios
// does: the policy sees rates normalized to the job's fastest type.
func TestClaimsBounded(t *testing.T) {
	decide := func(claim string) kueue.Decision {
		c := newCluster(t, nil, base(objects(
			wl{ns: "a", name: "honest", queue: "q", gpus: 1, ann: map[string]string{"gpusched.io/throughput": "v100=4.39,k80=0.62"}},
			wl{ns: "a", name: "claimer", queue: "q", gpus: 1, ann: map[string]string{"gpusched.io/throughput": claim}, created: 10},
		)...)...)
		return c.round().Decisions["a/honest"]
	}
	honest := decide("v100=4.39,k80=0.62")
	assert.Equal(t, honest, decide("v100=4.39e9,k80=0.62e9"), "scaled by 1e9: nothing changes")
	assert.Equal(t, honest.Type, decide("v100=1e12,k80=1").Type, "a ratio of 1e12 counts as the admin's 10")
}

// The notes on a claim and the decision are said once each, not again at
// every round.
func TestEventsOnce(t *testing.T) {
	c := newCluster(t, nil, base(objects(
		wl{ns: "a", name: "plain", queue: "q", gpus: 1},
		wl{ns: "a", name: "resnet", queue: "q", gpus: 1, ann: resnetRates, created: 10},
		wl{ns: "a", name: "third", queue: "q", gpus: 1, ann: resnetRates, created: 20},
	)...)...)
	c.round()
	first := c.events()
	assert.Len(t, grep(first, kueue.ReasonDefault), 1, "%q", first)
	for range 3 {
		c.round()
	}
	assert.Empty(t, c.events())
}

// The wait rule (Config.Patience): a ResNet-50 job runs 7.10 times
// faster on the V100, which another job holds, than on the free K80
// (Gavel's 4.3948 and 0.6190 steps/s; the trusted rates keep four
// digits, 1 and 0.1409: 7.097). With patience 1 it waits for the V100 as
// long as the K80 would cost it, an hour (JobDuration) times 6.097:
// until 21,950.03 s after its creation (Until rounds up to the second).
// Its node selector names the V100 meanwhile (Kueue admits it there the
// moment the V100 frees), and an event says why and until when. After
// that it is steered to the K80.
func TestHeldForFasterType(t *testing.T) {
	const created = 1_700_000_010
	now := time.Unix(created+100, 0)
	c := newCluster(t, nil, base(objects(
		wl{ns: "a", name: "old", queue: "q", gpus: 1, ann: resnetRates, admittedOn: "v100", cq: "team-a"},
		wl{ns: "a", name: "resnet", queue: "q", gpus: 1, ann: resnetRates, created: 10},
	)...)...)
	r := c.round()
	assert.Equal(t, flavor.Start, r.Decisions["a/resnet"].Why, "without the rule it takes the K80")
	assert.Equal(t, k80, c.selector("a", "resnet"))

	c.tune = func(cfg *kueue.Config) {
		cfg.Patience = 1
		cfg.Now = func() time.Time { return now }
	}
	c.ctrl = c.controller(nil)
	_ = c.events()
	r = c.round()
	d := r.Decisions["a/resnet"]
	assert.Equal(t, flavor.Held, d.Why)
	assert.Equal(t, topology.GPUType("v100"), d.Type)
	assert.Equal(t, topology.GPUType("k80"), d.HeldFrom)
	assert.Equal(t, time.Unix(created+21951, 0), d.Until)
	assert.Equal(t, v100, c.selector("a", "resnet"), "it waits on the V100")
	ev := c.events()
	assert.Len(t, grep(ev, "waits for v100 (flavor v100 of ClusterQueue team-a), where it runs 7.1x faster than on k80"), 1, "%q", ev)
	assert.Len(t, grep(ev, "until 2023-11-15T04:19:21Z (patience 1)"), 1, "%q", ev)

	now = time.Unix(created+21951, 0)
	r = c.round()
	assert.Equal(t, flavor.Start, r.Decisions["a/resnet"].Why, "its wait has cost what the K80 would")
	assert.Equal(t, k80, c.selector("a", "resnet"))

	for _, bad := range []kueue.Config{{Patience: -1}, {Patience: math.NaN()}, {Patience: 101}, {JobDuration: -time.Second}, {Explore: 1.5}, {Explore: math.NaN()}, {Refit: -time.Second}, {SaveInterval: -time.Second}, {StateName: "Bad_Name"}, {StateName: strings.Repeat("a", 59)}} {
		bad.Client, bad.Dynamic, bad.Policy = fake.NewClientset(), c.dyn, &allocation.MaxMinFairness{}
		_, err := kueue.New(bad)
		assert.ErrorIs(t, err, kueue.ErrConfig, "%+v", bad)
	}
}
