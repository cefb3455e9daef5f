package kueue_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/gpusched/gpusched/allocation"
	"github.com/gpusched/gpusched/kube/kueue"
	"github.com/gpusched/gpusched/perfmodel/learn"
	"github.com/gpusched/gpusched/topology"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	k8stesting "k8s.io/client-go/testing"
)

// measureTwoRuns is TestKueueLearnedRatesSteerTheNextRun's history: two
// runs of one program report through the channel that it runs 3 times
// faster on the V100 than on the K80, and finish; a third run, run-3,
// admitted on the K80, has reported and still runs.
func measureTwoRuns(t *testing.T, c *cluster, now *float64) {
	t.Helper()
	c.round()
	rate := map[string]float64{"run-k80": 1, "run-v100": 3, "run-3": 1}
	for name, r := range rate {
		uid := runningPod(t, c, "a", name)
		key, ok := c.ctrl.Workload("a", name+"-0", uid)
		require.True(t, ok, name)
		for i := range 10 {
			*now = 60 * float64(i)
			require.NoError(t, c.ctrl.Progress(key, r*60*float64(i), time.Time{}), "%s window %d", name, i)
		}
	}
	for _, name := range []string{"run-k80", "run-v100"} {
		require.NoError(t, c.dyn.Resource(kueue.WorkloadsGVR).Namespace("a").Delete(context.Background(), name, metav1.DeleteOptions{}))
	}
	c.round() // forgets them: their rows stay in the population and group
}

func stateCluster(t *testing.T, now *float64, state string) (*cluster, *learn.Learner) {
	t.Helper()
	c, l := learnedCluster(t, now,
		wl{ns: "a", name: "run-k80", queue: "q", gpus: 1, admittedOn: "k80", cq: "team-a"},
		wl{ns: "a", name: "run-v100", queue: "q", gpus: 1, admittedOn: "v100", cq: "team-a"},
		wl{ns: "a", name: "run-3", queue: "q", gpus: 1, admittedOn: "k80", cq: "team-a"})
	c.tune = func(cfg *kueue.Config) {
		cfg.Estimator, cfg.Clock, cfg.StateNamespace = l, func() float64 { return *now }, state
	}
	c.ctrl = c.controller(nil)
	return c, l
}

// restart makes a new controller on the same API, with a new learner.
func restart(c *cluster, now *float64, state string) *learn.Learner {
	c.t.Helper()
	l, err := learn.New(learn.Config{})
	require.NoError(c.t, err)
	c.tune = func(cfg *kueue.Config) {
		cfg.Estimator, cfg.Clock, cfg.StateNamespace = l, func() float64 { return *now }, state
	}
	c.ctrl = c.controller(nil)
	return l
}

// What was learned survives a restart: the restarted controller (a new,
// empty learner) restores the saved one at Start, and the program's next
// run is steered to the V100 as it is without the restart; without the
// state (or with a state that cannot be read: a Warning event) the next
// run goes to the K80, as knowing nothing. run-3, which finished while
// no controller ran, is forgotten at the first round.
func TestKueueLearnedSurvivesRestart(t *testing.T) {
	for _, tc := range []struct {
		name    string
		state   string
		corrupt bool
		want    topology.GPUType
	}{
		{"kept", "gpusched", false, topology.V100},
		{"not kept", "", false, topology.K80},
		{"corrupt", "gpusched", true, topology.K80},
	} {
		t.Run(tc.name, func(t *testing.T) {
			now := 0.0
			c, _ := stateCluster(t, &now, tc.state)
			measureTwoRuns(t, c, &now)
			ctx := context.Background()
			require.NoError(t, c.ctrl.Save(ctx))
			if tc.corrupt {
				cm, err := c.cs.CoreV1().ConfigMaps("gpusched").Get(ctx, kueue.DefaultStateName, metav1.GetOptions{})
				require.NoError(t, err)
				for k, v := range cm.BinaryData {
					cm.BinaryData[k] = v[:len(v)/2]
				}
				_, err = c.cs.CoreV1().ConfigMaps("gpusched").Update(ctx, cm, metav1.UpdateOptions{})
				require.NoError(t, err)
			}
			// run-3 finishes while no controller runs.
			require.NoError(t, c.dyn.Resource(kueue.WorkloadsGVR).Namespace("a").Delete(ctx, "run-3", metav1.DeleteOptions{}))
			l := restart(c, &now, tc.state)
			if tc.state != "" && !tc.corrupt {
				active, remembered := l.Jobs()
				assert.Equal(t, 1, active, "run-3, until the first round")
				assert.Equal(t, 2, remembered)
			}
			c.add(objects(wl{ns: "a", name: "run-2", queue: "q", gpus: 1, created: 100})...)
			now = 3 * 3600
			r := c.round()
			assert.Equal(t, tc.want, r.Decisions["a/run-2"].Type)
			events := grep(c.events(), kueue.ReasonLearnerState)
			if tc.corrupt {
				require.Len(t, events, 1)
				assert.Contains(t, events[0], "learning afresh")
				assert.Contains(t, events[0], "gpusched/"+kueue.DefaultStateName)
				return
			}
			assert.Empty(t, events)
			if tc.state != "" {
				active, remembered := l.Jobs()
				assert.Equal(t, 1, active, "run-2 only: run-3 is forgotten")
				assert.Equal(t, 3, remembered, "run-3's row joins the population")
			}
		})
	}
}

// A save writes only what changed; Run saves as it ends.
func TestKueueSaveWritesWhatChanged(t *testing.T) {
	now := 0.0
	c, _ := stateCluster(t, &now, "gpusched")
	measureTwoRuns(t, c, &now)
	ctx := context.Background()
	writes := func() int {
		n := 0
		for _, a := range c.cs.Actions() {
			if a.GetResource().Resource == "configmaps" && (a.GetVerb() == "create" || a.GetVerb() == "update") {
				n++
			}
		}
		return n
	}
	require.NoError(t, c.ctrl.Save(ctx))
	first := writes()
	require.Positive(t, first)
	require.NoError(t, c.ctrl.Save(ctx))
	assert.Equal(t, first, writes(), "nothing changed")
	now = 600
	require.NoError(t, c.ctrl.Progress("a/run-3", 1000, time.Time{}))
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- c.ctrl.Run(runCtx) }()
	time.Sleep(50 * time.Millisecond)
	cancel()
	require.ErrorIs(t, <-done, context.Canceled)
	assert.Greater(t, writes(), first, "saved as Run ended")
	_, err := c.cs.CoreV1().ConfigMaps("gpusched").Get(ctx, kueue.DefaultStateName, metav1.GetOptions{})
	require.NoError(t, err)
}

// A Workload whose pod restarted in place (its steps went back: a new
// segment of its admission) reports on after the controller restarts:
// the restart count is saved with what was learned.
func TestKueueRestartsInPlaceSurviveRestart(t *testing.T) {
	now := 0.0
	c, _ := stateCluster(t, &now, "gpusched")
	c.round()
	uid := runningPod(t, c, "a", "run-3")
	key, ok := c.ctrl.Workload("a", "run-3-0", uid)
	require.True(t, ok)
	steps := []float64{0, 60, 120, 180, 30, 90, 150} // back at 30: a restart in place
	for i, s := range steps {
		now = 60 * float64(i)
		require.NoError(t, c.ctrl.Progress(key, s, time.Time{}), "report %d", i)
	}
	ctx := context.Background()
	require.NoError(t, c.ctrl.Save(ctx))
	restart(c, &now, "gpusched")
	c.round()
	uid2 := types.UID("pod-run-3")
	_, ok = c.ctrl.Workload("a", "run-3-0", uid2)
	require.True(t, ok)
	for i := range 3 {
		now = 60 * float64(len(steps)+i)
		require.NoError(t, c.ctrl.Progress(key, 210+60*float64(i), time.Time{}), "after the restart, report %d", i)
	}
}

// An account that may not read the state ConfigMap (kube/deploy's
// learning.yaml not applied) starts, says so in a Warning, and keeps
// nothing; a Save before Start does nothing.
func TestKueueStateForbidden(t *testing.T) {
	now := 0.0
	c, _ := stateCluster(t, &now, "gpusched")
	c.cs.PrependReactor("get", "configmaps", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "configmaps"}, kueue.DefaultStateName, errors.New("no rights"))
	})
	restart(c, &now, "gpusched")
	said := grep(c.events(), kueue.ReasonLearnerState)
	require.Len(t, said, 1)
	assert.Contains(t, said[0], "not kept across restarts")
	before := len(c.cs.Actions())
	require.NoError(t, c.ctrl.Save(context.Background()))
	assert.Len(t, c.cs.Actions(), before, "nothing written")

	l, err := learn.New(learn.Config{})
	require.NoError(t, err)
	ctrl, err := kueue.New(kueue.Config{Client: c.cs, Dynamic: c.dyn, Policy: &allocation.MaxMinFairness{}, Recorder: c.rec,
		Estimator: l, StateNamespace: "gpusched"})
	require.NoError(t, err)
	before = len(c.cs.Actions())
	require.NoError(t, ctrl.Save(context.Background()), "before Start")
	assert.Len(t, c.cs.Actions(), before, "nothing written before Start")
}
