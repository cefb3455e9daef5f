package admission

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/gpusched/gpusched/allocation"
	"github.com/gpusched/gpusched/kube/model"
	"github.com/gpusched/gpusched/kube/tenancy"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// attackTenancy: four tenants of one namespace each, and an idle one of
// weight 3 (vip), as the attack table has them.
const attackTenancy = `
tenants:
- {name: att, namespaces: [att]}
- {name: v1, namespaces: [v1]}
- {name: v2, namespaces: [v2]}
- {name: v3, namespaces: [v3]}
- {name: vip, weight: 3, namespaces: [vip]}
`

// attack is one row of the attack table: what the attacker (a tenant with
// the right to create pods in its namespace only) writes, under which
// policy; the honest run is the same workload without it.
type attack struct {
	name, policy string
	// att and vic are annotations of the attacker's and the victims' pods;
	// label is the attacker's labels.
	att, vic, label map[string]string
	gpus            int  // the attacker's GPUs (default 4)
	ungated         bool // the attacker's pod has no gate
	noPreemption    bool
	rounds          int
}

type attackRun struct {
	att    int   // rounds the attacker's job was admitted
	vic    []int // the victims'
	failed int   // rounds that returned an error
	events []corev1.Event
}

// runAttack runs 20 rounds (or a.rounds) on 8 V100s in two nodes of 4,
// the attacker's job and three victims' of 4 GPUs each: the honest share
// is 10 rounds each.
func runAttack(t *testing.T, a attack, attacking bool) attackRun {
	t.Helper()
	ctx := context.Background()
	cs := fake.NewClientset(gpuNode("n1", "Tesla-V100-SXM2-16GB", 4), gpuNode("n2", "Tesla-V100-SXM2-16GB", 4))
	for i, ns := range []string{"att", "v1", "v2", "v3"} {
		ann := map[string]string{model.AnnotationThroughput: "v100=1"}
		for k, v := range a.vic {
			ann[k] = v
		}
		g := 4
		var labels map[string]string
		if i == 0 && attacking {
			for k, v := range a.att {
				ann[k] = v
			}
			labels = a.label
			if a.gpus > 0 {
				g = a.gpus
			}
		}
		p := gatedPod(ns, "job", g, ann)
		p.Labels = labels
		if i == 0 && attacking && a.ungated {
			p.Spec.SchedulingGates = nil
		}
		_, err := cs.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	ten, err := tenancy.Parse([]byte(attackTenancy))
	require.NoError(t, err)
	clk := &testClock{}
	zero := int64(0)
	c := newController(t, cs, clk, func(cfg *Config) {
		pol, err := PolicyByName(a.policy)
		require.NoError(t, err)
		cfg.Policy, cfg.Tenancy, cfg.PodDeletionGrace, cfg.NoPreemption = pol, ten, &zero, a.noPreemption
	})
	run := attackRun{vic: make([]int, 3)}
	n := a.rounds
	if n == 0 {
		n = 20
	}
	for r := range n {
		clk.t = float64(r) * 360
		res, err := syncRound(ctx, c)
		if err != nil {
			run.failed++
			continue
		}
		checkInvariants(t, cs, res)
		for k := range res.Admitted {
			switch {
			case strings.HasPrefix(k, "pod/att/"):
				run.att++
			case strings.HasPrefix(k, "pod/v"):
				run.vic[k[5]-'1']++
			}
		}
	}
	evs, err := cs.CoreV1().Events("").List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	run.events = evs.Items
	return run
}

// attackRows are the rows of the table that a unit test of the
// controller plays (the others: the state rows below, the plugin's in
// package gpusched, the admission policies in e2e).
var attackRows = []attack{
	{name: "weight 1e9 under water-filling", policy: "water-filling", att: map[string]string{AnnotationWeight: "1e9"}},
	{name: "claimed rate 1e9 steps/s under max-throughput", policy: "max-throughput", att: map[string]string{model.AnnotationThroughput: "v100=1e9"}},
	{name: "steps 1 under finish-time fairness", policy: "finish-time-fairness", att: map[string]string{AnnotationSteps: "1"}},
	{name: "queue label naming another tenant (hierarchical)", policy: "hierarchical", label: map[string]string{LabelQueue: "vip"}},
	{name: "ungated pod with admitted-type, no preemption", policy: "max-min-fairness", ungated: true, gpus: 8, noPreemption: true, rounds: 6,
		att: map[string]string{AnnotationAdmittedType: "v100"}},
	{name: "no scheduling gate", policy: "max-min-fairness", ungated: true},
}

// Every attack of the table yields the attacker no more than its honest
// share (within one round) and never stalls the others: each victim gets
// at least what it gets in the honest run, less one round.
func TestAttacksGainNothing(t *testing.T) {
	if raceEnabled {
		t.Skip("single-goroutine table: nothing for -race to find, and slow under it")
	}
	var table []string
	for _, a := range attackRows {
		honest := runAttack(t, a, false)
		got := runAttack(t, a, true)
		table = append(table, fmt.Sprintf("| %s | %d | %v | %d (victims %v) |", a.name, got.att, got.vic, honest.att, honest.vic))
		assert.Zero(t, got.failed+honest.failed, a.name)
		assert.LessOrEqual(t, got.att, honest.att+1, "%s: the attacker gained", a.name)
		for i := range got.vic {
			assert.GreaterOrEqual(t, got.vic[i], honest.vic[i]-1, "%s: victim %d lost", a.name, i+1)
		}
		reasons := map[string]bool{}
		for _, e := range got.events {
			if e.InvolvedObject.Namespace == "att" {
				reasons[e.Reason] = true
			}
		}
		switch a.name {
		case attackRows[3].name:
			assert.True(t, reasons[ReasonMalformed], "a queue of another tenant is refused: %v", reasons)
		case attackRows[4].name, attackRows[5].name:
			assert.True(t, reasons[ReasonBypass], "the bypass is reported: %v", reasons)
		case attackRows[0].name, attackRows[2].name:
			assert.True(t, reasons[ReasonDefault], "the ignored annotation is reported: %v", reasons)
		}
	}
	t.Logf("attack | attacker rounds | victims' rounds | honest share\n%s", strings.Join(table, "\n"))
}

// 300 suspended, gated Jobs with 4 KB throughput annotations (no GPUs
// used) neither make a round fail to save nor take the victims' rounds:
// the attacker's jobs in the rounds are capped by its tenant's MaxJobs,
// its rates are stored on the cluster's types, rounded, and the state is
// compressed (and would be split over ConfigMaps if it grew). The honest
// run is the same 300 Jobs with a short annotation. Nor do the 256 jobs in
// the rounds take more than the attacker's share: four tenants share the
// 8 GPUs under hierarchical water-filling, 2 GPUs each, so each victim's
// job of 4 GPUs is due 10 of the 20 rounds and the attacker 40 GPU-rounds;
// in both runs each victim gets at least 9 and the attacker at most 48
// (its share, within a round of the cluster). Running the jobs that never
// ran first (Gavel's rule) gave the victims 1 round each.
func TestStateBoundedWhateverTenantsWrite(t *testing.T) {
	if raceEnabled {
		t.Skip("single-goroutine test: nothing for -race to find, and slow under it")
	}
	var huge strings.Builder
	for i := 0; huge.Len() < 4000; i++ {
		fmt.Fprintf(&huge, "t%04d=1.000000000000001,", i)
	}
	huge.WriteString("v100=3.14159265358979")
	run := func(rates string) (vic []int, att, jobs, bytes, fails int) {
		ctx := context.Background()
		cs := fake.NewClientset(gpuNode("n1", "Tesla-V100-SXM2-16GB", 4), gpuNode("n2", "Tesla-V100-SXM2-16GB", 4))
		for i := range 300 {
			j := gatedJob("att", fmt.Sprintf("j%03d-%s", i, strings.Repeat("x", 50)), 1, 1, map[string]string{model.AnnotationThroughput: rates})
			_, err := cs.BatchV1().Jobs("att").Create(ctx, j, metav1.CreateOptions{})
			require.NoError(t, err)
		}
		for _, ns := range []string{"v1", "v2", "v3"} {
			_, err := cs.CoreV1().Pods(ns).Create(ctx, gatedPod(ns, "job", 4, map[string]string{model.AnnotationThroughput: "v100=1"}), metav1.CreateOptions{})
			require.NoError(t, err)
		}
		ten, err := tenancy.Parse([]byte(attackTenancy))
		require.NoError(t, err)
		clk := &testClock{}
		c := newController(t, cs, clk, func(cfg *Config) {
			cfg.Tenancy = ten
			cfg.Policy = mustPolicy(t, "hierarchical")
		})
		vic = make([]int, 3)
		for r := range 20 {
			clk.t = float64(r) * 360
			res, err := syncRound(ctx, c)
			if err != nil {
				fails++
				continue
			}
			for k := range res.Admitted {
				switch {
				case strings.HasPrefix(k, "pod/v"):
					vic[k[5]-'1']++
				case strings.HasPrefix(k, "job/att/"):
					att++ // 1 GPU each
				}
			}
			assert.Len(t, res.Waiting, 300-tenancy.DefaultTenantMaxJobs)
		}
		head, err := cs.CoreV1().ConfigMaps("gpusched").Get(ctx, DefaultStateName, metav1.GetOptions{})
		require.NoError(t, err)
		return vic, att, len(c.sched.Jobs()), len(head.BinaryData[stateKeyBlob]), fails
	}
	hv, hatt, hjobs, hbytes, hfails := run("v100=1")
	av, aatt, ajobs, abytes, afails := run(huge.String())
	t.Logf("honest: victims %v, attacker %d GPU-rounds, %d jobs in the rounds, %d bytes of state; attack: victims %v, attacker %d, %d jobs, %d bytes",
		hv, hatt, hjobs, hbytes, av, aatt, ajobs, abytes)
	assert.Zero(t, hfails+afails, "a round failed")
	assert.Equal(t, tenancy.DefaultTenantMaxJobs+3, ajobs)
	assert.Equal(t, hv, av)
	assert.Less(t, abytes, hbytes+hbytes/10, "the annotations grew the state")
	assert.Less(t, abytes, 64<<10)
	const rounds, share = 20, 10 // a victim's share: 10 of 20 rounds
	for i := range av {
		assert.GreaterOrEqual(t, hv[i], share-1, "honest run: victim %d below its share", i+1)
		assert.GreaterOrEqual(t, av[i], share-1, "attack: victim %d below its share", i+1)
	}
	assert.LessOrEqual(t, hatt, 2*rounds+8, "honest run: the attacker above its share")
	assert.LessOrEqual(t, aatt, 2*rounds+8, "attack: the attacker above its share")
}

func mustPolicy(t *testing.T, name string) allocation.Policy {
	t.Helper()
	p, err := PolicyByName(name)
	require.NoError(t, err)
	return p
}

// A state too large for one ConfigMap is split over chunks, written
// before the head that names them, and read back whole: a controller
// restarted from it decides as one that ran on. Chunks of an older save
// are deleted, and those an earlier process left: the first save lists
// them, later saves delete by name (no List each round).
func TestChunkedStateRestores(t *testing.T) {
	defer func(i, c int) { inlineMax, chunkMax = i, c }(inlineMax, chunkMax)
	inlineMax, chunkMax = 512, 700
	ctx := context.Background()
	stale := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "gpusched", Name: chunkName(DefaultStateName, 1, 40),
		Labels: map[string]string{labelStateOf: DefaultStateName, labelStateGen: "7"}}}
	cs := fake.NewClientset(gpuNode("n1", "Tesla-V100-SXM2-16GB", 4), gpuNode("k1", "Tesla-K80", 4), stale)
	lists := func() int {
		n := 0
		for _, a := range cs.Actions() {
			if a.GetVerb() == "list" && a.GetResource().Resource == "configmaps" {
				if l, ok := a.(k8stesting.ListAction); ok && l.GetListRestrictions().Labels.String() != "" {
					n++
				}
			}
		}
		return n
	}
	for i := range 12 {
		_, err := cs.CoreV1().Pods(testNS).Create(ctx, gatedPod(testNS, fmt.Sprintf("job-%02d", i), 1+i%3, rates(fmt.Sprintf("v100=%d,k80=1", 2+i%4))), metav1.CreateOptions{})
		require.NoError(t, err)
	}
	clk := &testClock{}
	c := newController(t, cs, clk, nil)
	for r := range 3 {
		clk.t = float64(r) * 360
		_, err := syncRound(ctx, c)
		require.NoError(t, err)
	}
	assert.Equal(t, 1, lists(), "only the first save lists the chunks")
	st := savedState(t, cs)
	assert.Equal(t, 3, st.Rounds)
	cms, err := cs.CoreV1().ConfigMaps("gpusched").List(ctx, metav1.ListOptions{LabelSelector: labelStateOf + "=" + DefaultStateName})
	require.NoError(t, err)
	require.Greater(t, len(cms.Items), 1, "the state is in chunks")
	gens := map[string]bool{}
	for _, cm := range cms.Items {
		gens[cm.Labels[labelStateGen]] = true
	}
	assert.Len(t, gens, 1, "older chunks are deleted")
	_, err = cs.CoreV1().ConfigMaps("gpusched").Get(ctx, stale.Name, metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err), "a chunk an earlier process left is deleted: %v", err)
	d := newController(t, cs, clk, nil)
	clk.t = 3 * 360
	n := lists()
	want, err := syncRound(ctx, c)
	require.NoError(t, err)
	assert.Equal(t, n, lists(), "a later save lists nothing")
	// d restored the state of round 3; c moved on: d must decide round 4
	// as c did.
	got, err := syncRound(ctx, d)
	require.NoError(t, err)
	assert.Equal(t, want.Assigned, got.Assigned)
	assert.Equal(t, want.Round, got.Round)
	assert.Equal(t, n+1, lists(), "a restored controller lists the chunks at its first save")
	cms, err = cs.CoreV1().ConfigMaps("gpusched").List(ctx, metav1.ListOptions{LabelSelector: labelStateOf + "=" + DefaultStateName})
	require.NoError(t, err)
	gens = map[string]bool{}
	for _, cm := range cms.Items {
		gens[cm.Labels[labelStateGen]] = true
	}
	assert.Len(t, gens, 1, "one save's chunks remain")
}

// A save whose delete of an older chunk fails, or whose head write
// fails after its chunks were written, leaves chunks the head does not
// name; the next save lists them and deletes them. Without failures a
// save lists only every listChunksEvery saves.
func TestChunkCleanupAfterFailures(t *testing.T) {
	defer func(i, c int) { inlineMax, chunkMax = i, c }(inlineMax, chunkMax)
	inlineMax, chunkMax = 512, 700
	ctx := context.Background()
	cs := chunkedCluster(t)
	lists := 0
	cs.PrependReactor("list", "configmaps", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if l, ok := a.(k8stesting.ListAction); ok && l.GetListRestrictions().Labels.String() != "" {
			lists++
		}
		return false, nil, nil
	})
	failDelete, failHead := false, false
	cs.PrependReactor("delete", "configmaps", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if d, ok := a.(k8stesting.DeleteAction); ok && failDelete && strings.HasPrefix(d.GetName(), DefaultStateName+"-") && !strings.Contains(d.GetName(), "-rq-") {
			failDelete = false
			return true, nil, errors.New("injected: delete failed")
		}
		return false, nil, nil
	})
	cs.PrependReactor("update", "configmaps", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if u, ok := a.(k8stesting.UpdateAction); ok && failHead {
			if m, err := meta.Accessor(u.GetObject()); err == nil && m.GetName() == DefaultStateName {
				failHead = false
				return true, nil, errors.New("injected: head write failed")
			}
		}
		return false, nil, nil
	})
	chunkGens := func() map[string]bool {
		cms, err := cs.CoreV1().ConfigMaps("gpusched").List(ctx, metav1.ListOptions{})
		require.NoError(t, err)
		gens := map[string]bool{}
		for _, cm := range cms.Items {
			if cm.Labels[labelStateOf] == DefaultStateName {
				gens[cm.Labels[labelStateGen]] = true
			}
		}
		return gens
	}
	round := roundsOf(t, cs)
	require.NoError(t, round(0))
	require.NoError(t, round(1))
	require.Equal(t, 1, lists, "the first save lists")
	failDelete = true
	require.NoError(t, round(2))
	assert.Len(t, chunkGens(), 2, "a chunk of the save before is left")
	assert.Equal(t, 1, lists)
	require.NoError(t, round(3))
	assert.Equal(t, 2, lists, "after a failed delete the next save lists")
	assert.Len(t, chunkGens(), 1, "and deletes what was left")
	failHead = true
	require.Error(t, round(4), "the head's write fails")
	assert.Len(t, chunkGens(), 2, "the failed save's chunks are left")
	require.NoError(t, round(5))
	assert.Equal(t, 3, lists, "after a failed write the next save lists")
	assert.Len(t, chunkGens(), 1)
	for r := 6; r < 6+listChunksEvery; r++ {
		require.NoError(t, round(r))
	}
	assert.Equal(t, 4, lists, "without failures, a list every %d saves", listChunksEvery)
	assert.Len(t, chunkGens(), 1)
	assert.Equal(t, 6+listChunksEvery, savedState(t, cs).Rounds, "the round whose save failed counts")
}

// A head write that reports a failure but landed (the API server wrote
// it; the answer was lost): the next save must not write its chunks into
// the slot that head names, or a crash in its middle leaves a head whose
// chunks do not match and the next start discards the state. Without
// readGen the next save reused the landed head's generation and slot.
func TestHeadWriteThatLanded(t *testing.T) {
	defer func(i, c int) { inlineMax, chunkMax = i, c }(inlineMax, chunkMax)
	inlineMax, chunkMax = 512, 700
	ctx := context.Background()
	cs := chunkedCluster(t)
	landThenFail, failGet, failHead := false, false, false
	var chunkWrites []string
	cmGVR := corev1.SchemeGroupVersion.WithResource("configmaps")
	cs.PrependReactor("update", "configmaps", func(a k8stesting.Action) (bool, runtime.Object, error) {
		u := a.(k8stesting.UpdateAction)
		m, err := meta.Accessor(u.GetObject())
		if err != nil {
			return false, nil, nil
		}
		if m.GetLabels()[labelStateOf] == DefaultStateName {
			chunkWrites = append(chunkWrites, m.GetName())
		}
		if failHead && m.GetName() == DefaultStateName {
			failHead = false
			return true, nil, errors.New("injected: head write failed")
		}
		if landThenFail && m.GetName() == DefaultStateName {
			landThenFail = false
			if err := cs.Tracker().Update(cmGVR, u.GetObject(), u.GetNamespace()); err != nil {
				return true, nil, err
			}
			return true, nil, errors.New("injected: the head was written, the answer lost")
		}
		return false, nil, nil
	})
	cs.PrependReactor("create", "configmaps", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if m, err := meta.Accessor(a.(k8stesting.CreateAction).GetObject()); err == nil && m.GetLabels()[labelStateOf] == DefaultStateName {
			chunkWrites = append(chunkWrites, m.GetName())
		}
		return false, nil, nil
	})
	cs.PrependReactor("get", "configmaps", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if failGet && a.(k8stesting.GetAction).GetName() == DefaultStateName {
			return true, nil, errors.New("injected: get failed")
		}
		return false, nil, nil
	})
	headGen := func() int64 {
		cm, err := cs.CoreV1().ConfigMaps("gpusched").Get(ctx, DefaultStateName, metav1.GetOptions{})
		require.NoError(t, err)
		var h stateHead
		require.NoError(t, strictJSON([]byte(cm.Data[stateKeyHead]), &h))
		require.Positive(t, h.Chunks, "the test's state is chunked")
		return h.Gen
	}
	round := roundsOf(t, cs)
	require.NoError(t, round(0))
	require.NoError(t, round(1))
	g := headGen()
	landThenFail = true
	require.Error(t, round(2), "the head's write reports a failure")
	require.Equal(t, g+1, headGen(), "but it landed")
	// The next save cannot read the head: it writes nothing.
	failGet, chunkWrites = true, nil
	require.Error(t, round(3))
	assert.Empty(t, chunkWrites, "no chunk written without knowing the head's generation")
	failGet = false
	assert.Equal(t, g+1, headGen())
	// The next save writes its chunks, and its head write fails (as a
	// crash after the chunks would leave it): the landed head still
	// reads, chunks and hash, at the round it saved.
	failHead = true
	require.Error(t, round(4))
	live := chunkName(DefaultStateName, (g+1)%2, 0)
	require.NotEmpty(t, chunkWrites)
	for _, name := range chunkWrites {
		assert.NotEqual(t, (g+1)%2, chunkSlot(t, name), "chunk %s written into the slot of the head in the API (%s)", name, live)
	}
	assert.Equal(t, g+1, headGen())
	assert.Equal(t, 3, savedState(t, cs).Rounds, "the landed head's state, rounds 0 to 2")
	require.NoError(t, round(5))
	assert.Equal(t, g+2, headGen(), "the save after the landed one is its next generation")
	assert.Equal(t, 6, savedState(t, cs).Rounds)
}

// The generation after a failed head write: past this process's last
// and the head's in the API, and never in the slot the head names (a
// former leader's head may be behind this process's).
func TestNextGenAfter(t *testing.T) {
	for _, c := range []struct{ own, live, want int64 }{
		{5, 5, 6},  // the failed write did not land
		{5, 6, 7},  // it landed
		{5, 4, 7},  // a former leader's head, behind: 6 is its slot
		{5, 3, 6},  // behind, in the other slot
		{5, 9, 10}, // ahead
		{0, 0, 1},
	} {
		got := nextGenAfter(c.own, c.live)
		assert.Equal(t, c.want, got, "own %d, live %d", c.own, c.live)
		assert.NotEqual(t, c.live%2, got%2, "own %d, live %d", c.own, c.live)
		assert.Greater(t, got, max(c.own, c.live))
	}
}

// readGen on a head it cannot believe (not JSON, a generation past
// maxGen, a negative one) keeps this process's generation, and a missing
// head too; it errs only when it cannot read the API.
func TestReadGenBadHead(t *testing.T) {
	ctx := context.Background()
	cs := chunkedCluster(t)
	c := newController(t, cs, &testClock{}, nil)
	cms := cs.CoreV1().ConfigMaps("gpusched")
	for _, head := range []string{`{"version":`, `{"version":2,"gen":9223372036854775807}`, `{"version":2,"gen":-3}`, ""} {
		_ = cms.Delete(ctx, DefaultStateName, metav1.DeleteOptions{})
		if head != "" {
			_, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: DefaultStateName, Namespace: "gpusched"},
				Data: map[string]string{stateKeyHead: head}}, metav1.CreateOptions{})
			require.NoError(t, err)
		}
		c.gen, c.genUnsure = 5, true
		require.NoError(t, c.readGen(ctx), head)
		assert.Equal(t, int64(5), c.gen, head)
		assert.False(t, c.genUnsure, head)
	}
}

// A generation past maxGen is a bad state: counting on from it would
// overflow into a negative slot.
func TestStateGenerationBound(t *testing.T) {
	gz := gzipped(t, []byte(`{"controller":{"version":2},"scheduler":{"version":1}}`))
	sum := sha256.Sum256(gz)
	head := func(gen int64) map[string]string {
		return map[string]string{stateKeyHead: fmt.Sprintf(`{"version":2,"gen":%d,"chunks":0,"bytes":%d,"sha256":%q}`, gen, len(gz), hex.EncodeToString(sum[:]))}
	}
	_, h, err := decodeState(head(maxGen), map[string][]byte{stateKeyBlob: gz}, nil)
	require.NoError(t, err)
	assert.Equal(t, int64(maxGen), h.Gen)
	_, _, err = decodeState(head(maxGen+1), map[string][]byte{stateKeyBlob: gz}, nil)
	require.ErrorContains(t, err, "generation")
}

// chunkedCluster is two 4-GPU nodes and twelve gated jobs: with the
// tests' inlineMax and chunkMax, a state of several chunks.
func chunkedCluster(t *testing.T) *fake.Clientset {
	t.Helper()
	cs := fake.NewClientset(gpuNode("n1", "Tesla-V100-SXM2-16GB", 4), gpuNode("k1", "Tesla-K80", 4))
	for i := range 12 {
		_, err := cs.CoreV1().Pods(testNS).Create(context.Background(), gatedPod(testNS, fmt.Sprintf("job-%02d", i), 1+i%3, rates(fmt.Sprintf("v100=%d,k80=1", 2+i%4))), metav1.CreateOptions{})
		require.NoError(t, err)
	}
	return cs
}

// roundsOf starts a controller on cs and returns a function that runs
// its round r at the r-th 6-minute mark.
func roundsOf(t *testing.T, cs *fake.Clientset) func(r int) error {
	t.Helper()
	clk := &testClock{}
	c := newController(t, cs, clk, nil)
	return func(r int) error {
		clk.t = float64(r) * 360
		_, err := syncRound(context.Background(), c)
		return err
	}
}

// chunkSlot reads the slot from a chunk's name (chunkName).
func chunkSlot(t *testing.T, name string) int64 {
	t.Helper()
	rest, ok := strings.CutPrefix(name, DefaultStateName+"-")
	require.True(t, ok, name)
	slot, _, ok := strings.Cut(rest, "-")
	require.True(t, ok, name)
	switch slot {
	case "0":
		return 0
	case "1":
		return 1
	}
	t.Fatalf("chunk %s: slot %q", name, slot)
	return -1
}

// The queue's expected run time is the job's remaining work, counted down
// by the rounds it ran, and never runs out while it runs: past its
// expected time, a job has two rounds of work left before a round. A
// round is reported when it is over, at the next round's start (before
// the floor is applied): after round r the core has counted down rounds 0
// to r-1.
func TestRemainingWorkFromTheQueue(t *testing.T) {
	ctx := context.Background()
	cs := fake.NewClientset(gpuNode("n1", "Tesla-V100-SXM2-16GB", 4))
	_, err := cs.CoreV1().Pods("att").Create(ctx, gatedPod("att", "job", 4, map[string]string{AnnotationSteps: "1"}), metav1.CreateOptions{})
	require.NoError(t, err)
	ten, err := tenancy.Parse([]byte(`tenants: [{name: att, namespaces: [att], queues: [{name: q, expectedSeconds: 1000}]}]`))
	require.NoError(t, err)
	clk := &testClock{}
	c := newController(t, cs, clk, func(cfg *Config) { cfg.Tenancy = ten })
	var left []float64
	for r := range 5 {
		clk.t = float64(r) * 360
		_, err := syncRound(ctx, c)
		require.NoError(t, err)
		st, err := c.sched.Status("pod/att/job")
		require.NoError(t, err)
		left = append(left, st.Spec.RemainingSteps)
	}
	assert.Equal(t, []float64{1000, 720, 720, 720, 720}, left, "1000 s at 1 step/s, 360 s a round, floored at two rounds")
}

// The tenancy's quotas reach the quota policy: tenant a is guaranteed half
// of the cluster's throughput, b nothing. While a is idle its half is
// lent to b (all 8 GPUs busy); from the round a's jobs arrive, a runs at
// least its half every round, and b keeps the rest.
func TestQuotaLentAndReclaimed(t *testing.T) {
	ctx := context.Background()
	cs := fake.NewClientset(gpuNode("n1", "Tesla-V100-SXM2-16GB", 4), gpuNode("n2", "Tesla-V100-SXM2-16GB", 4))
	for i := range 4 {
		_, err := cs.CoreV1().Pods("b").Create(ctx, gatedPod("b", fmt.Sprint("job-", i), 2, rates("v100=1")), metav1.CreateOptions{})
		require.NoError(t, err)
	}
	ten, err := tenancy.Parse([]byte(`
tenants:
- {name: a, namespaces: [a], quota: {guaranteed: {throughput: 0.5}}}
- {name: b, namespaces: [b]}`))
	require.NoError(t, err)
	clk := &testClock{}
	zero := int64(0)
	c := newController(t, cs, clk, func(cfg *Config) {
		cfg.Tenancy, cfg.Policy, cfg.PodDeletionGrace = ten, mustPolicy(t, "quota-fairness"), &zero
		cfg.MinResetInterval = -1
	})
	gpus := func(res *RoundResult, ns string) int {
		n := 0
		for k := range res.Admitted {
			if strings.HasPrefix(k, "pod/"+ns+"/") {
				n += res.GPUs[k]
			}
		}
		return n
	}
	for r := range 10 {
		if r == 4 {
			for i := range 2 {
				_, err := cs.CoreV1().Pods("a").Create(ctx, gatedPod("a", fmt.Sprint("job-", i), 2, rates("v100=1")), metav1.CreateOptions{})
				require.NoError(t, err)
			}
		}
		clk.t = float64(r) * 360
		res, err := syncRound(ctx, c)
		require.NoError(t, err)
		checkInvariants(t, cs, res)
		a, b := gpus(res, "a"), gpus(res, "b")
		if r < 4 {
			assert.Equal(t, 8, b, "round %d: a's idle half is lent to b", r)
		} else {
			assert.GreaterOrEqual(t, a, 4, "round %d: a's guarantee reclaimed", r)
			assert.Equal(t, 8, a+b, "round %d: no GPU idle", r)
		}
	}
}
