package admission

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/gpusched/gpusched/kube/tenancy"
	"github.com/gpusched/gpusched/perfmodel/learn"
	"github.com/gpusched/gpusched/topology"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// learnTruth is what TestLearnedEvent's jobs really do: a is 3x faster on
// a V100 than on a K80, b and c 1.2x.
var learnTruth = map[string]map[topology.GPUType]float64{
	"pod/v1/a": {topology.V100: 3, topology.K80: 1}, "pod/v2/b": {topology.V100: 1.2, topology.K80: 1}, "pod/v3/c": {topology.V100: 1.2, topology.K80: 1},
}

// learnRun is TestLearnedEvent's cluster (8 V100s, 4 K80s, three 4-GPU
// pods that take turns on the K80s and report their true rates every
// 60 s of the round they ran), learning from nothing.
type learnRun struct {
	*playground
	l     *learn.Learner
	steps map[string]float64
}

func newLearnRun(t *testing.T) *learnRun {
	l, err := learn.New(learn.Config{})
	require.NoError(t, err)
	p := newPlayground(t, DefaultPolicy, "", func(cfg *Config) { cfg.Estimator = l },
		gatedPod("v1", "a", 4, nil), gatedPod("v2", "b", 4, nil), gatedPod("v3", "c", 4, nil), gpuNode("k1", "Tesla-K80", 4))
	return &learnRun{playground: p, l: l, steps: map[string]float64{}}
}

// round runs round r and the jobs' reports; it returns where each job
// was admitted. between, if not nil, runs after the round (and its save)
// and before the reports.
func (lr *learnRun) round(r int, between func()) map[string]topology.GPUType {
	t := lr.t
	t.Helper()
	res := lr.playground.round(r)
	if between != nil {
		between()
	}
	setRunning(t, lr.playground)
	for key, typ := range res.Admitted {
		rate := learnTruth[key][typ]
		start := lr.clk.t
		for i := 0; i <= 6; i++ {
			lr.clk.t = start + 60*float64(i)
			require.NoError(t, lr.c.Progress(key, lr.steps[key]+rate*60*float64(i), time.Now()), "round %d: %s on %s", r, key, typ)
		}
		lr.steps[key] += rate * 360
		lr.clk.t = start
	}
	return res.Assigned
}

// restart closes the controller and starts another on the same API
// server with a new, empty learner (est: the estimator it is given, nil
// for a new *learn.Learner), as a restarted process would.
func (lr *learnRun) restart(est learn.Estimator) {
	t := lr.t
	t.Helper()
	if est == nil {
		l, err := learn.New(learn.Config{})
		require.NoError(t, err)
		lr.l, est = l, l
	}
	tn, err := tenancy.Parse([]byte(attackTenancy))
	require.NoError(t, err)
	zero := int64(0)
	lr.c.Close()
	lr.c = newController(t, lr.cs, lr.clk, func(cfg *Config) {
		cfg.Policy, cfg.Tenancy, cfg.PodDeletionGrace = mustPolicy(t, DefaultPolicy), tn, &zero
		cfg.Estimator = est
	})
}

// refreshed is what l's estimates of job are once its population is fit,
// taken on a copy (l itself is not refit: the core refits on its own
// clock).
func refreshed(t *testing.T, l *learn.Learner, job string) []learn.Estimate {
	t.Helper()
	snap, err := l.Snapshot()
	require.NoError(t, err)
	cp, err := learn.New(learn.Config{})
	require.NoError(t, err)
	require.NoError(t, cp.Restore(snap))
	cp.Refresh()
	return cp.Estimates(job, nil)
}

// measuredOn lists the types an estimate list measured.
func measuredOn(es []learn.Estimate) []topology.GPUType {
	var out []topology.GPUType
	for _, e := range es {
		if e.Source == learn.SourceMeasured {
			out = append(out, e.Type)
		}
	}
	return out
}

// What the admission controller learned survives a restart: the
// estimator's snapshot is saved with the state, and a controller
// restarted with an empty learner at round 12 (once the round is saved,
// before its reports: reports after the last save are lost, as they
// would be), where a was measured on both types, has a's estimates
// (measured on v100 and k80, the same means and sigmas), and makes the
// decisions of a controller that ran on through 12 more rounds, with the
// same estimates at the end.
func TestLearnedSurvivesRestart(t *testing.T) {
	run := func(restartAt int) ([]map[string]topology.GPUType, []learn.Estimate) {
		lr := newLearnRun(t)
		var out []map[string]topology.GPUType
		for r := range 24 {
			var restart func()
			if r == restartAt {
				restart = func() {
					before := refreshed(t, lr.l, "pod/v1/a")
					require.ElementsMatch(t, []topology.GPUType{topology.V100, topology.K80}, measuredOn(before), "a measured on both types before the restart")
					require.NotEmpty(t, savedDoc(t, lr.cs).Learner, "the estimator's snapshot is saved")
					lr.restart(nil)
					assert.Equal(t, before, refreshed(t, lr.l, "pod/v1/a"), "a's estimates after the restart")
					assert.Empty(t, reasonMessages(t, lr.cs, ReasonLearnerState))
					assert.Empty(t, reasonMessages(t, lr.cs, ReasonBadState))
				}
			}
			out = append(out, lr.round(r, restart))
		}
		st, err := lr.c.Scheduler().Status("pod/v1/a")
		require.NoError(t, err)
		return out, st.Estimates
	}
	plain, plainEst := run(-1)
	restarted, est := run(12)
	assert.Equal(t, plain, restarted, "the same decisions, round by round")
	sameEstimates(t, plainEst, est, "the same estimates at the end")
	require.ElementsMatch(t, []topology.GPUType{topology.V100, topology.K80}, measuredOn(est))
	var v100, k80 float64
	for _, e := range est {
		switch e.Type {
		case topology.V100:
			v100 = e.Mean
		case topology.K80:
			k80 = e.Mean
		}
	}
	assert.InEpsilon(t, 3, v100/k80, 0.1, "a is 3x faster on a V100: %+v", est)
}

// rewriteLearner replaces the estimator's snapshot in the saved state
// (as a corrupt etcd or a bug would), keeping the head's hash right.
func rewriteLearner(t *testing.T, lr *learnRun, learner json.RawMessage) {
	t.Helper()
	doc := savedDoc(t, lr.cs)
	doc.Learner = learner
	gz, err := encodeState(doc)
	require.NoError(t, err)
	cms := lr.cs.CoreV1().ConfigMaps("gpusched")
	head, err := cms.Get(lr.ctx, DefaultStateName, metav1.GetOptions{})
	require.NoError(t, err)
	var h stateHead
	require.NoError(t, json.Unmarshal([]byte(head.Data[stateKeyHead]), &h))
	require.Zero(t, h.Chunks, "an inline state")
	sum := sha256.Sum256(gz)
	h.Bytes, h.SHA256 = len(gz), hex.EncodeToString(sum[:])
	hj, err := json.Marshal(h)
	require.NoError(t, err)
	head.Data[stateKeyHead], head.BinaryData[stateKeyBlob] = string(hj), gz
	_, err = cms.Update(lr.ctx, head, metav1.UpdateOptions{})
	require.NoError(t, err)
}

// A saved estimator's state that cannot be restored (corrupt, or beyond
// the new learner's Config: here it may learn only A100s) leaves the
// learner empty to learn afresh, with a Warning event
// GPUSchedLearnerState on the state ConfigMap naming the fault; the rest
// of the state is restored (no GPUSchedBadState, the admissions and the
// rounds go on), and the next save replaces the bad snapshot.
func TestBadLearnerStateLearnsAfresh(t *testing.T) {
	for name, tc := range map[string]struct {
		snap json.RawMessage
		cfg  learn.Config
		want string
	}{
		"corrupt":         {snap: json.RawMessage(`{"version":1,"types":["v100"],"seq":1,"jobs":[{"name":"pod/v1/a","gpus":-4,"info":{}}]}`), want: "gpus"},
		"another version": {snap: json.RawMessage(`{"version":99}`), want: "version"},
		"other types":     {cfg: learn.Config{Types: []topology.GPUType{topology.A100}}, want: "types[0]: malformed snapshot"},
	} {
		t.Run(name, func(t *testing.T) {
			lr := newLearnRun(t)
			for r := range 4 {
				lr.round(r, nil)
			}
			if tc.snap != nil {
				rewriteLearner(t, lr, tc.snap)
			}
			admitted := savedState(t, lr.cs).Admitted
			require.NotEmpty(t, admitted)
			l, err := learn.New(tc.cfg)
			require.NoError(t, err)
			lr.restart(l)
			lr.l = l
			msgs := reasonMessages(t, lr.cs, ReasonLearnerState)
			require.Len(t, msgs, 1, "one Warning on the state ConfigMap")
			assert.Contains(t, msgs[0], "gpusched/"+DefaultStateName+": what the estimator learned cannot be restored, learning afresh")
			assert.Contains(t, msgs[0], tc.want)
			assert.Empty(t, reasonMessages(t, lr.cs, ReasonBadState), "the rest of the state is read")
			for key := range learnTruth {
				assert.Empty(t, measuredOn(l.Estimates(key, nil)), "%s: the learner starts afresh", key)
			}
			assert.Equal(t, admitted, lr.c.state.Admitted, "the admissions are restored")
			if tc.cfg.Types == nil {
				lr.round(4, nil)
				active, _ := l.Jobs()
				assert.Equal(t, 3, active, "the jobs are registered again")
				require.NoError(t, l.Restore(savedDoc(t, lr.cs).Learner), "the next save replaced the bad snapshot")
			}
		})
	}
}

// The estimator's refusal is the typed error the event's text comes from.
func TestRestoreLearnerTypedError(t *testing.T) {
	l, err := learn.New(learn.Config{})
	require.NoError(t, err)
	err = restoreSafely(l, []byte(`{"version":1,"types":["v100"],"seq":1,"jobs":[{"name":"x","gpus":-4,"info":{}}]}`))
	var le *learn.Error
	require.True(t, errors.As(err, &le), "%v", err)
	assert.ErrorIs(t, err, learn.ErrMalformedSnapshot)
}

// A state that would exceed its caps with the estimator's snapshot is
// saved without it (the admissions and the core's state are kept), and
// a Warning GPUSchedLearnerState says so once, not at every save; a
// restart from it learns afresh and reads the rest.
func TestLearnerStateTooLargeSavedWithout(t *testing.T) {
	lr := newLearnRun(t)
	for r := range 4 {
		lr.round(r, nil)
	}
	doc := savedDoc(t, lr.cs)
	require.NotEmpty(t, doc.Learner)
	with, err := encodeState(doc)
	require.NoError(t, err)
	doc.Learner = nil
	without, err := encodeState(doc)
	require.NoError(t, err)
	defer func(i, c int) { inlineMax, chunkMax = i, c }(inlineMax, chunkMax)
	chunkMax = (len(without) + len(with)) / 2 / maxChunks
	inlineMax = chunkMax
	require.Greater(t, len(with), maxChunks*chunkMax, "the test's caps hold the state only without the learner")
	for r := 4; r < 7; r++ {
		lr.round(r, nil)
	}
	assert.Empty(t, savedDoc(t, lr.cs).Learner, "saved without the learner")
	msgs := reasonMessages(t, lr.cs, ReasonLearnerState)
	require.Len(t, msgs, 1, "said once")
	assert.Contains(t, msgs[0], "the state is saved without what the estimator learned")
	rounds := savedState(t, lr.cs).Rounds
	lr.restart(nil)
	assert.Equal(t, rounds, lr.c.state.Rounds, "the rest of the state is read")
	assert.Empty(t, reasonMessages(t, lr.cs, ReasonBadState))
}

// sameEstimates asserts that two jobs' estimates are equal but for
// rounding (1e-9 relative in their numbers: a restored learner sums its
// rows in another order).
func sameEstimates(t *testing.T, want, got []learn.Estimate, msg string) {
	t.Helper()
	if !assert.Len(t, got, len(want), msg) {
		return
	}
	for i, w := range want {
		g := got[i]
		for _, f := range [][2]float64{{w.Mean, g.Mean}, {w.LogMean, g.LogMean}, {w.Sigma, g.Sigma}, {w.PriorMean, g.PriorMean}, {w.PriorSigma, g.PriorSigma}, {w.Scaling, g.Scaling}} {
			assert.InEpsilon(t, f[0]+1e-300, f[1]+1e-300, 1e-9, "%s: %s", msg, w.Type)
		}
		w.Mean, w.LogMean, w.Sigma, w.PriorMean, w.PriorSigma, w.Scaling = g.Mean, g.LogMean, g.Sigma, g.PriorMean, g.PriorSigma, g.Scaling
		assert.Equal(t, w, g, "%s: %s", msg, w.Type)
	}
}
