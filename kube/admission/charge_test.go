package admission

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/gpusched/gpusched/kube/tenancy"
	"github.com/gpusched/gpusched/scheduler"
	"github.com/gpusched/gpusched/topology"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

// A preempted job is charged what its pods held after its lease ended,
// and the job admitted in its place is not charged for the time it waited
// for those GPUs. One node of 4 V100s, two 4-GPU bare pods (the
// attacker's with a terminationGracePeriodSeconds of 1e7 s), rounds of
// 360 s, --grace 30 s, the cluster simulated every 15 s (kubeSim). Round
// 0 runs att; round 1 (at 360 s) preempts it and admits v1. att's pod
// runs on for the grace, 30 s, is then deleted with the admin's maximum
// grace, 30 s (not its own), and is gone 60 s after the preemption, when
// v1's pod is bound. At round 2 the core has att at 360 + 60 = 420 s (4
// GPUs for 60 s: 240 GPU-seconds, scheduler.RoundReport.Held) and v1 at
// 360 - 60 = 300 s. Before, rounds 0 and 1 charged att 360 s (its
// minute free) and v1 360 s (att's minute charged to it).
func TestPreemptedChargedWhatItHeld(t *testing.T) {
	ctx := context.Background()
	cs := fake.NewClientset(gpuNode("n1", "Tesla-V100-SXM2-16GB", 4))
	wall := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	sim := newKubeSim(t, cs, &wall, map[string]int{"n1": 4})
	long := int64(1e7)
	att := gatedPod("att", "job", 4, rates("v100=1"))
	att.Spec.TerminationGracePeriodSeconds = &long
	for _, p := range []*corev1.Pod{att, gatedPod("v1", "job", 4, rates("v100=1"))} {
		_, err := cs.CoreV1().Pods(p.Namespace).Create(ctx, p, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	ten, err := tenancy.Parse([]byte(attackTenancy))
	require.NoError(t, err)
	clk := &testClock{}
	c := newController(t, cs, clk, func(cfg *Config) {
		cfg.Tenancy, cfg.Grace = ten, 30*time.Second
		cfg.Now = func() time.Time { return wall }
	})
	var held []map[string]int
	for r := range 3 {
		clk.t = float64(r) * 360
		res, err := syncRound(ctx, c)
		require.NoError(t, err)
		switch r {
		case 0:
			require.Equal(t, map[string]topology.GPUType{"pod/att/job": topology.V100}, res.Assigned)
		case 1:
			require.Equal(t, []string{"pod/att/job"}, res.Preempted)
			require.Equal(t, []string{"pod/v1/job"}, res.Started)
		case 2:
			continue
		}
		sim.step()
		for range 24 {
			wall = wall.Add(15 * time.Second)
			sim.step()
			syncSweep(ctx, t, c)
			if r == 1 {
				held = append(held, sim.held())
			}
		}
	}
	// The GPUs changed hands 60 s into round 1.
	assert.Equal(t, map[string]int{"att": 4}, held[2], "at 45 s")
	assert.Equal(t, map[string]int{"v1": 4}, held[3], "at 60 s")
	for key, want := range map[string]float64{"pod/att/job": 420, "pod/v1/job": 300} {
		st, err := c.sched.Status(key)
		require.NoError(t, err)
		assert.InDelta(t, want, st.Attained[topology.V100], 1e-9, key)
	}
}

// The report of a round waits, until the round is over, in the saved
// state: a controller restarted meanwhile sends it. The work it counts
// down shows it (the core's own credit of a round left unreported counts
// none): 2000 s of expected work at 1 step/s, 360 s run in round 0, 1640
// steps left after round 1, restart or not.
func TestReportSavedWithTheState(t *testing.T) {
	for _, restart := range []bool{false, true} {
		ctx := context.Background()
		cs := fake.NewClientset(gpuNode("n1", "Tesla-V100-SXM2-16GB", 4))
		_, err := cs.CoreV1().Pods("att").Create(ctx, gatedPod("att", "job", 4, nil), metav1.CreateOptions{})
		require.NoError(t, err)
		ten, err := tenancy.Parse([]byte(`tenants: [{name: att, namespaces: [att], queues: [{name: q, expectedSeconds: 2000}]}]`))
		require.NoError(t, err)
		clk := &testClock{}
		mk := func() *Controller { return newController(t, cs, clk, func(cfg *Config) { cfg.Tenancy = ten }) }
		c := mk()
		_, err = syncRound(ctx, c)
		require.NoError(t, err)
		require.NotNil(t, savedState(t, cs).Report, "the report waits in the state")
		if restart {
			c = mk()
		}
		clk.t = 360
		_, err = syncRound(ctx, c)
		require.NoError(t, err)
		st, err := c.sched.Status("pod/att/job")
		require.NoError(t, err)
		assert.InDelta(t, 1640, st.Spec.RemainingSteps, 1e-9, "restart %v", restart)
		assert.InDelta(t, 360, st.Attained[topology.V100], 1e-9, "restart %v", restart)
	}
}

// A report the core refuses is sent again without its Held part only when
// the core refused an entry of that part (scheduler.ReportError naming
// scheduler.FieldHeld): then the runs are credited. Refused for anything
// else, it is not sent again (review of #40: it was, on any error, and a
// core that had credited the runs before failing credited them twice).
// One node of 4 V100s: att's 4-GPU pod runs in round 0, v1's waits.
func TestReportResentOnlyWithoutABadHeld(t *testing.T) {
	ctx := context.Background()
	cs := fake.NewClientset(gpuNode("n1", "Tesla-V100-SXM2-16GB", 4))
	for _, ns := range []string{"att", "v1"} {
		_, err := cs.CoreV1().Pods(ns).Create(ctx, gatedPod(ns, "job", 4, rates("v100=1")), metav1.CreateOptions{})
		require.NoError(t, err)
	}
	ten, err := tenancy.Parse([]byte(attackTenancy))
	require.NoError(t, err)
	var logs bytes.Buffer
	clk := &testClock{}
	c := newController(t, cs, clk, func(cfg *Config) {
		cfg.Tenancy = ten
		cfg.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	})
	res, err := syncRound(ctx, c)
	require.NoError(t, err)
	require.Equal(t, []string{"pod/att/job"}, res.Started)
	ran := scheduler.Ran{Job: "pod/att/job", Seconds: 360}
	held := scheduler.Held{Job: "pod/v1/job", Type: topology.V100, GPUSeconds: 4 * 35}

	// A run the core refuses: sent once. Before: sent again without Held.
	logs.Reset()
	c.sendReport(&scheduler.RoundReport{Ran: []scheduler.Ran{ran, {Job: "nope", Seconds: 1}}, Held: []scheduler.Held{held}})
	assert.Equal(t, 1, strings.Count(logs.String(), "msg=report "), logs.String())
	assert.NotContains(t, logs.String(), "not charged")

	// A Held entry the core refuses: sent again without Held, the runs
	// credited.
	logs.Reset()
	c.sendReport(&scheduler.RoundReport{Ran: []scheduler.Ran{ran}, Held: []scheduler.Held{held, {Job: "nope", Type: topology.V100, GPUSeconds: 1}}})
	assert.Contains(t, logs.String(), "not charged")
	assert.NotContains(t, logs.String(), "msg=report ")
	for key, want := range map[string]float64{"pod/att/job": 360, "pod/v1/job": 0} {
		st, err := c.sched.Status(key)
		require.NoError(t, err)
		assert.InDelta(t, want, st.Attained[topology.V100], 1e-9, key)
	}
}
