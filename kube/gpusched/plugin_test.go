package gpusched

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gpusched/gpusched/kube/model"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"
	fwk "k8s.io/kube-scheduler/framework"
	internalcache "k8s.io/kubernetes/pkg/scheduler/backend/cache"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
	tf "k8s.io/kubernetes/pkg/scheduler/testing/framework"
	"k8s.io/utils/ptr"
)

// env is a scheduler framework with the plugin at every extension point,
// over a fake clientset.
type env struct {
	fw       framework.Framework
	pl       *Plugin
	cs       *fake.Clientset
	recorder *events.FakeRecorder

	mu       sync.Mutex
	bindings []*corev1.Binding
}

func newEnv(t *testing.T, args runtime.Object, objs ...runtime.Object) *env {
	t.Helper()
	return newEnvWith(t, args, nil, objs...)
}

// newEnvWith is newEnv with more framework options (a DRA manager) made
// from the clientset and informers.
func newEnvWith(t *testing.T, args runtime.Object, more func(ctx context.Context, cs *fake.Clientset, inf informers.SharedInformerFactory) []frameworkruntime.Option, objs ...runtime.Object) *env {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	e := &env{cs: fake.NewClientset(objs...), recorder: events.NewFakeRecorder(1000)}
	e.cs.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() != "binding" {
			return false, nil, nil
		}
		b := a.(k8stesting.CreateAction).GetObject().(*corev1.Binding)
		e.mu.Lock()
		e.bindings = append(e.bindings, b)
		e.mu.Unlock()
		return true, b, nil
	})
	inf := informers.NewSharedInformerFactory(e.cs, 0)
	var nodes []*corev1.Node
	for _, o := range objs {
		if n, ok := o.(*corev1.Node); ok {
			nodes = append(nodes, n)
		}
	}
	factory := func(ctx context.Context, _ runtime.Object, h fwk.Handle) (fwk.Plugin, error) {
		p, err := New(ctx, args, h)
		if err == nil {
			e.pl = p.(*Plugin)
			e.pl.ledger.SetRecordKey(testKey)
		}
		return p, err
	}
	opts := []frameworkruntime.Option{
		frameworkruntime.WithClientSet(e.cs),
		frameworkruntime.WithInformerFactory(inf),
		frameworkruntime.WithEventRecorder(e.recorder),
		frameworkruntime.WithWaitingPods(frameworkruntime.NewWaitingPodsMap()),
		frameworkruntime.WithSnapshotSharedLister(internalcache.NewSnapshot(nil, nodes)),
	}
	if more != nil {
		opts = append(opts, more(ctx, e.cs, inf)...)
	}
	fw, err := tf.NewFramework(ctx, []tf.RegisterPluginFunc{
		tf.RegisterPluginAsExtensionsWithWeight(Name, 1, factory,
			"QueueSort", "PreFilter", "Filter", "PreScore", "Score", "Reserve", "Permit", "PreBind", "Bind", "PostBind"),
	}, "gpusched", opts...)
	require.NoError(t, err)
	e.fw = fw
	t.Cleanup(func() { _ = e.pl.Close() })
	inf.Start(ctx.Done())
	inf.WaitForCacheSync(ctx.Done())
	require.Nil(t, e.pl.waitSynced(ctx))
	return e
}

// schedule runs one scheduling cycle for p over the nodes, as the
// scheduler does up to Permit, and returns the node chosen.
func (e *env) schedule(t *testing.T, p *corev1.Pod, nodes ...*corev1.Node) (string, *fwk.Status, fwk.CycleState) {
	t.Helper()
	ctx := context.Background()
	state := framework.NewCycleState()
	var infos []fwk.NodeInfo
	for _, n := range nodes {
		ni := framework.NewNodeInfo()
		ni.SetNode(n)
		infos = append(infos, ni)
	}
	_, st, _ := e.fw.RunPreFilterPlugins(ctx, state, p)
	if !st.IsSuccess() && !st.IsSkip() {
		return "", st, state
	}
	var feasible []fwk.NodeInfo
	for _, ni := range infos {
		if st := e.fw.RunFilterPlugins(ctx, state, p, ni); st.IsSuccess() {
			feasible = append(feasible, ni)
		}
	}
	if len(feasible) == 0 {
		return "", fwk.NewStatus(fwk.Unschedulable, "no node fits"), state
	}
	if st := e.fw.RunPreScorePlugins(ctx, state, p, feasible); !st.IsSuccess() {
		return "", st, state
	}
	scores, st := e.fw.RunScorePlugins(ctx, state, p, feasible)
	if !st.IsSuccess() {
		return "", st, state
	}
	best := scores[0]
	for _, s := range scores[1:] {
		if s.TotalScore > best.TotalScore {
			best = s
		}
	}
	if st := e.fw.RunReservePluginsReserve(ctx, state, p, best.Name); !st.IsSuccess() {
		e.fw.RunReservePluginsUnreserve(ctx, state, p, best.Name)
		return "", st, state
	}
	wait, st := e.fw.RunPermitPlugins(ctx, state, p, best.Name)
	switch {
	case st.IsWait():
		e.fw.AddWaitingPod(p, wait)
	case !st.IsSuccess():
		e.fw.RunReservePluginsUnreserve(ctx, state, p, best.Name)
	}
	return best.Name, st, state
}

func (e *env) events() []string {
	var out []string
	for {
		select {
		case ev := <-e.recorder.Events:
			out = append(out, ev)
		default:
			return out
		}
	}
}

func TestPluginPlacesOnNVLinkPair(t *testing.T) {
	dgx := node("dgx", kubeV100, 8, true, map[string]string{model.AnnotationLinks: dgx1Links}, nil)
	pcie := node("pcie", kubeV100, 8, true, nil, nil)
	a100 := node("a100", "NVIDIA-A100-SXM4-80GB", 8, true, map[string]string{model.AnnotationLinks: `{"interconnect":"nvswitch"}`}, nil)
	e := newEnv(t, nil, dgx, pcie, a100)
	p := gpuPod("p", 2, ann(model.AnnotationGPUTypes, "v100"))
	host, st, state := e.schedule(t, p, dgx, pcie, a100)
	require.True(t, st.IsSuccess(), st.Message())
	assert.Equal(t, "dgx", host, "the NVLink pair beats an unknown PCIe layout")
	require.True(t, e.fw.RunBindPlugins(context.Background(), state, p, host).IsSuccess())
	require.Len(t, e.bindings, 1)
	b := e.bindings[0]
	assert.Equal(t, "dgx", b.Target.Name)
	devs, err := model.ParseIndices("", b.Annotations[model.AnnotationGPUs])
	require.NoError(t, err)
	require.Len(t, devs, 2)
	_, booked, _ := e.pl.Ledger().Booking(p.UID)
	assert.Equal(t, devs, booked)
	assert.True(t, testKey.Verify(p.UID, "dgx", devs, b.Annotations[model.AnnotationGPUsMAC]), "the Binding carries the plugin's record")
	// A pod without GPUs is left to the next binder.
	assert.True(t, e.fw.RunBindPlugins(context.Background(), framework.NewCycleState(), gpuPod("cpu", 0), "pcie").IsSkip())
}

func TestPluginBadInput(t *testing.T) {
	n := node("n", kubeV100, 8, true, nil, nil)
	bad := node("bad", kubeV100, 8, true, map[string]string{model.AnnotationLinks: "GPU0 GPU1\nGPU0 X"}, nil)
	g1 := gpuPod("g1", 1, inGroup("job", 2))
	g2 := gpuPod("g2", 1, inGroup("job", 3))
	short := gpuPod("s", 1, inGroup("short", 4))
	e := newEnv(t, nil, n, bad, g1, g2, short)
	evs := e.events()
	require.Len(t, evs, 1)
	assert.Contains(t, evs[0], "Warning InvalidGPUAnnotation")
	assert.Contains(t, evs[0], model.AnnotationLinks)

	for name, tc := range map[string]struct {
		pod  *corev1.Pod
		want string
		code fwk.Code
	}{
		"too large":     {gpuPod("big", 16), "asks for 16 GPUs but the largest node has 8", fwk.UnschedulableAndUnresolvable},
		"no such type":  {gpuPod("t", 1, ann(model.AnnotationGPUTypes, "a100")), "largest node of type a100 has 0", fwk.UnschedulableAndUnresolvable},
		"bad type":      {gpuPod("bt", 1, ann(model.AnnotationGPUTypes, "%%")), model.AnnotationGPUTypes, fwk.UnschedulableAndUnresolvable},
		"disagree":      {g1, `disagree on its size: gpusched.io/min-member "2" by g1; gpusched.io/min-member "3" by g2`, fwk.UnschedulableAndUnresolvable},
		"members short": {short, "has 1 of the 4 pods it needs", fwk.Unschedulable},
		"fractional": {gpuPod("f", 0, func(p *corev1.Pod) {
			p.Spec.Containers[0].Resources.Limits = corev1.ResourceList{model.ResourceGPU: resourceMust("1500m")}
		}), "whole GPUs", fwk.UnschedulableAndUnresolvable},
	} {
		t.Run(name, func(t *testing.T) {
			_, st, _ := e.schedule(t, tc.pod, n, bad)
			require.Equal(t, tc.code, st.Code(), st.Message())
			assert.Contains(t, st.Message(), tc.want)
		})
	}
	// The node with the bad annotation still takes pods.
	host, st, _ := e.schedule(t, gpuPod("ok", 8), bad)
	require.True(t, st.IsSuccess(), st.Message())
	assert.Equal(t, "bad", host)
}

func TestPluginFilter(t *testing.T) {
	ready := node("ready", kubeV100, 4, true, nil, nil)
	down := node("down", kubeV100, 8, false, nil, nil)
	sick := node("sick", kubeV100, 8, true, map[string]string{model.AnnotationUnhealthy: "0,1,2,3,4"}, nil)
	cpu := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "cpu"}}
	e := newEnv(t, nil, ready, down, sick, cpu)
	host, st, _ := e.schedule(t, gpuPod("p", 4), ready, down, sick, cpu)
	require.True(t, st.IsSuccess(), st.Message())
	assert.Equal(t, "ready", host)
	_, st, _ = e.schedule(t, gpuPod("q", 4), ready, down, sick, cpu)
	assert.False(t, st.IsSuccess(), "no node has 4 free healthy GPUs now")
	host, st, _ = e.schedule(t, gpuPod("r", 3), ready, down, sick, cpu)
	require.True(t, st.IsSuccess(), st.Message())
	assert.Equal(t, "sick", host)
}

// gangOfThree is four 8-GPU V100 nodes in two racks and a pod group of
// three 8-GPU members.
func gangOfThree() (nodes []*corev1.Node, members []*corev1.Pod, objs []runtime.Object) {
	for i := range 4 {
		n := node(fmt.Sprint("n", i), kubeV100, 8, true, nil, map[string]string{model.LabelRack: fmt.Sprint("r", i/2)})
		nodes = append(nodes, n)
		objs = append(objs, n)
	}
	for i := range 3 {
		p := gpuPod(fmt.Sprint("m", i), 8, inGroup("job", 3))
		members = append(members, p)
		objs = append(objs, p)
	}
	return nodes, members, objs
}

func TestPluginGangPermit(t *testing.T) {
	nodes, members, objs := gangOfThree()
	e := newEnv(t, &Args{PermitTimeoutSeconds: 30, BackoffSeconds: -1}, objs...)
	var hosts []string
	for i, p := range members {
		host, st, _ := e.schedule(t, p, nodes...)
		hosts = append(hosts, host)
		if i < 2 {
			require.True(t, st.IsWait(), st.Message())
			require.NotNil(t, e.fw.GetWaitingPod(p.UID))
		} else {
			require.True(t, st.IsSuccess(), st.Message())
		}
	}
	for _, p := range members[:2] {
		require.True(t, e.fw.WaitOnPermit(context.Background(), p).IsSuccess())
	}
	// The second and third members went next to the first: same rack first.
	place0, _ := e.pl.Ledger().PlaceOf(hosts[0])
	place1, _ := e.pl.Ledger().PlaceOf(hosts[1])
	assert.Equal(t, place0.Rack, place1.Rack, "hosts %v", hosts)
}

func TestPluginGangRejectReleases(t *testing.T) {
	n0, n1 := node("n0", kubeV100, 8, true, nil, nil), node("n1", kubeV100, 8, true, nil, nil)
	a, b := gpuPod("a", 4, inGroup("job", 3)), gpuPod("b", 4, inGroup("job", 3))
	c := gpuPod("c", 4, inGroup("job", 3))
	e := newEnv(t, &Args{PermitTimeoutSeconds: 30, BackoffSeconds: 60}, n0, n1, a, b, c)
	hostA, st, _ := e.schedule(t, a, n0, n1)
	require.True(t, st.IsWait(), st.Message())
	hostB, st, _ := e.schedule(t, b, n0, n1)
	require.True(t, st.IsWait(), st.Message())
	assert.Equal(t, hostA, hostB, "best fit: the second member joins the first")
	// A member fails (its binding cycle's Unreserve): the one waiting is
	// rejected, and every booking is released.
	e.fw.RunReservePluginsUnreserve(context.Background(), framework.NewCycleState(), a, hostA)
	stB := e.fw.WaitOnPermit(context.Background(), b)
	require.True(t, stB.IsRejected(), stB.Message())
	assert.Contains(t, stB.Message(), "a member of pod group ns/job failed")
	e.fw.RunReservePluginsUnreserve(context.Background(), framework.NewCycleState(), b, hostB)
	require.NoError(t, e.pl.Ledger().Fit(hostA, 8, anyType), "every booking released")
	// In the backoff window a member is turned away at Permit at once, and
	// its booking released.
	_, st, _ = e.schedule(t, c, n0, n1)
	require.True(t, st.IsRejected(), st.Message())
	assert.Contains(t, st.Message(), "backs off")
	require.NoError(t, e.pl.Ledger().Fit("n0", 8, anyType))
	require.NoError(t, e.pl.Ledger().Fit("n1", 8, anyType))
}

// A pod group's members waiting at Permit on a node that goes away are
// rejected at once (their group is unreserved and tried again), and Bind
// refuses a node that went away after Permit: the API server would bind a
// pod to a deleted node all the same (the e2e's fenced-node check caught a
// member bound 7 s after its node was deleted).
func TestPluginNodeLossRejectsWaiting(t *testing.T) {
	for _, tc := range []struct {
		name string
		lose func(context.Context, *env, *corev1.Node) error
		want string
	}{
		{"deleted", func(ctx context.Context, e *env, n *corev1.Node) error {
			return e.cs.CoreV1().Nodes().Delete(ctx, n.Name, metav1.DeleteOptions{})
		}, "node n0 was deleted"},
		{"NotReady", func(ctx context.Context, e *env, n *corev1.Node) error {
			n = n.DeepCopy()
			n.Status.Conditions[0].Status = corev1.ConditionFalse
			_, err := e.cs.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{})
			return err
		}, "node n0 went NotReady or was cordoned"},
		{"cordoned", func(ctx context.Context, e *env, n *corev1.Node) error {
			n = n.DeepCopy()
			n.Spec.Unschedulable = true
			_, err := e.cs.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{})
			return err
		}, "node n0 went NotReady or was cordoned"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			n0 := node("n0", kubeV100, 8, true, nil, nil)
			a, b := gpuPod("a", 2, inGroup("job", 3)), gpuPod("b", 2, inGroup("job", 3))
			c, other := gpuPod("c", 2, inGroup("job", 3)), gpuPod("other", 1)
			e := newEnv(t, &Args{PermitTimeoutSeconds: 30, BackoffSeconds: -1}, n0, a, b, c, other)
			for _, p := range []*corev1.Pod{a, b} {
				host, st, _ := e.schedule(t, p, n0)
				require.True(t, st.IsWait(), st.Message())
				require.Equal(t, "n0", host)
			}
			// A single pod past Permit, not yet bound.
			_, st, state := e.schedule(t, other, n0)
			require.True(t, st.IsSuccess(), st.Message())
			require.NoError(t, tc.lose(ctx, e, n0))
			for _, p := range []*corev1.Pod{a, b} {
				st := e.fw.WaitOnPermit(ctx, p)
				require.True(t, st.IsRejected(), "%s: %v", p.Name, st)
				assert.Contains(t, st.Message(), tc.want)
			}
			st = e.pl.Bind(ctx, state, other, "n0")
			require.False(t, st.IsSuccess())
			assert.False(t, st.IsSkip())
			e.mu.Lock()
			assert.Empty(t, e.bindings, "nothing bound to the lost node")
			e.mu.Unlock()
		})
	}
}

func TestPluginStatsFile(t *testing.T) {
	path := t.TempDir() + "/stats.json"
	nodes := []*corev1.Node{node("n0", kubeV100, 8, true, nil, nil), node("n1", kubeV100, 8, true, nil, nil), node("n2", kubeV100, 8, true, nil, nil)}
	e := newEnv(t, &Args{StatsFile: path}, nodes[0], nodes[1], nodes[2])
	for i := range 20 {
		_, st, _ := e.schedule(t, gpuPod(fmt.Sprint("p", i), 1), nodes...)
		require.True(t, st.IsSuccess())
	}
	require.NoError(t, e.pl.Close())
	s := e.pl.stats.Snapshot()
	assert.Equal(t, 20, s.Pods)
	assert.Equal(t, 20/metricsSampleEvery, s.Timed, "the pods of one cycle in ten are timed")
	assert.Greater(t, s.PluginP50Micros, 0.0)
	assert.LessOrEqual(t, s.PluginP50Micros, s.PluginP99Micros)
	b, err := readFile(path)
	require.NoError(t, err)
	assert.True(t, strings.Contains(b, `"pods": 20`), b)
	assert.True(t, strings.Contains(b, `"timed": 2`), b)
}

func TestEventsToRegister(t *testing.T) {
	e := newEnv(t, nil)
	evs, err := e.pl.EventsToRegister(context.Background())
	require.NoError(t, err)
	var got []fwk.EventResource
	for _, ev := range evs {
		got = append(got, ev.Event.Resource)
	}
	assert.Equal(t, []fwk.EventResource{fwk.Pod, fwk.Node, fwk.ResourceClaim, fwk.ResourceSlice, fwk.DeviceClass}, got,
		"GPUs freed, nodes changed, claims made from templates, slices published")
	_ = time.Second
}

func TestSignPod(t *testing.T) {
	pl := plugin(t, Args{})
	sign := func(p *corev1.Pod) ([]fwk.SignFragment, *fwk.Status) { return pl.SignPod(context.Background(), p) }
	a, st := sign(gpuPod("a", 2, ann(model.AnnotationGPUTypes, "a100,v100")))
	require.True(t, st.IsSuccess())
	b, _ := sign(gpuPod("b", 2, ann(model.AnnotationGPUTypes, "v100, a100")))
	c, _ := sign(gpuPod("c", 1, ann(model.AnnotationGPUTypes, "v100,a100")))
	assert.Equal(t, a, b, "same request, same signature")
	assert.NotEqual(t, a, c)
	g1, st := sign(gpuPod("g1", 1, inGroup("g", 2)))
	require.True(t, st.IsSuccess(), "pod group members are batched with their group's")
	g2, _ := sign(gpuPod("g2", 1, inGroup("g", 2)))
	h, _ := sign(gpuPod("h1", 1, inGroup("h", 2)))
	assert.Equal(t, g1, g2, "members of one group share a ranking")
	assert.NotEqual(t, g1, h, "members of two groups do not")
	assert.NotEqual(t, g1, c, "nor a member and a single pod")
	_, st = sign(gpuPod("bad", 1, ann(model.AnnotationGPUTypes, "!")))
	assert.Equal(t, fwk.Unschedulable, st.Code())
}

func TestPluginHooksWithoutState(t *testing.T) {
	// Hooks called out of order (or by a framework that skipped PreFilter)
	// answer with a status, never a panic.
	n := node("n", kubeV100, 8, true, nil, nil)
	e := newEnv(t, nil, n)
	ctx := context.Background()
	state := framework.NewCycleState()
	p := gpuPod("p", 2)
	ni := framework.NewNodeInfo()
	assert.Equal(t, fwk.Error, e.pl.Filter(ctx, state, p, ni).Code())
	ni.SetNode(n)
	assert.Equal(t, fwk.Error, e.pl.Filter(ctx, state, p, ni).Code())
	_, st := e.pl.Score(ctx, state, p, ni)
	assert.Equal(t, fwk.Error, st.Code())
	assert.True(t, e.pl.PreScore(ctx, state, p, nil).IsSkip())
	assert.True(t, e.pl.Reserve(ctx, state, p, "n").IsSuccess())
	st, _ = e.pl.Permit(ctx, state, p, "n")
	assert.True(t, st.IsSuccess())
	e.pl.Unreserve(ctx, state, p, "n")
	assert.True(t, e.pl.Bind(ctx, state, p, "n").IsSkip())
	e.pl.PostBind(ctx, state, p, "n")
	// Informer objects of the wrong type are ignored.
	e.pl.onPod("not a pod")
	e.pl.onNode(42)
	e.pl.onPodDelete(nil)
	e.pl.onNodeDelete(cache.DeletedFinalStateUnknown{Key: "x", Obj: "y"})
	require.NoError(t, e.pl.Ledger().Check())
}

// The record key comes from its Secret, which the admin makes at install:
// the plugin only reads it (one GET, no create: before #40 it created the
// Secret when missing, which needed the right to create any Secret in
// kube-system); a missing Secret is an error naming it and the command
// that makes it. Or the key comes from a file.
func TestRecordKeySources(t *testing.T) {
	ctx := context.Background()
	defer func(w time.Duration) { recordKeyWait = w }(recordKeyWait)
	recordKeyWait = time.Millisecond
	cs := fake.NewClientset()
	a := &Args{RecordKeySecret: "kube-system/rk"}
	_, err := loadRecordKey(ctx, a, cs)
	require.ErrorIs(t, err, ErrNoRecordKey)
	assert.Contains(t, err.Error(), "kube-system/rk")
	assert.Contains(t, err.Error(), RecordKeyCommand("kube-system", "rk"))
	assert.Equal(t, `kubectl -n kube-system create secret generic rk --from-literal=key="$(openssl rand -hex 32)"`, RecordKeyCommand("kube-system", "rk"))
	for _, act := range cs.Actions() {
		assert.Equal(t, "get", act.GetVerb(), "the plugin only reads its Secret: %v", act)
	}
	_, err = cs.CoreV1().Secrets("kube-system").Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "rk"},
		Data: map[string][]byte{"key": []byte("0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef")}}, metav1.CreateOptions{})
	require.NoError(t, err)
	k1, err := loadRecordKey(ctx, a, cs)
	require.NoError(t, err)
	k2, err := loadRecordKey(ctx, a, cs)
	require.NoError(t, err)
	assert.Equal(t, k1.Sign("u", "n", []int{1}), k2.Sign("u", "n", []int{1}), "one key for every replica")
	// A key too short, a refusal (the Role lacks get), an API server that
	// answers at the third try.
	_, err = cs.CoreV1().Secrets("kube-system").Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "short"},
		Data: map[string][]byte{"key": []byte("short")}}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = loadRecordKey(ctx, &Args{RecordKeySecret: "kube-system/short"}, cs)
	require.ErrorIs(t, err, ErrNoRecordKey)
	assert.Contains(t, err.Error(), "kubectl -n kube-system delete secret short")
	gets := 0
	cs.PrependReactor("get", "secrets", func(k8stesting.Action) (bool, runtime.Object, error) {
		gets++
		if gets < 3 {
			return true, nil, apierrors.NewServiceUnavailable("starting")
		}
		return false, nil, nil
	})
	k3, err := loadRecordKey(ctx, a, cs)
	require.NoError(t, err)
	assert.Equal(t, 3, gets)
	assert.Equal(t, k1.Sign("u", "n", []int{1}), k3.Sign("u", "n", []int{1}))
	gets = 0
	cs.PrependReactor("get", "secrets", func(k8stesting.Action) (bool, runtime.Object, error) {
		gets++
		return true, nil, apierrors.NewForbidden(corev1.Resource("secrets"), "rk", errors.New("no"))
	})
	_, err = loadRecordKey(ctx, a, cs)
	require.ErrorIs(t, err, ErrNoRecordKey)
	assert.Contains(t, err.Error(), "forbidden")
	assert.Equal(t, 1, gets, "a refusal is not tried again")

	f := t.TempDir() + "/key"
	require.NoError(t, os.WriteFile(f, []byte("a-key-of-at-least-16-bytes\n"), 0o600))
	k4, err := loadRecordKey(ctx, &Args{RecordKeyFile: f}, nil)
	require.NoError(t, err)
	assert.True(t, k4.Verify("u", "n", []int{0, 1}, k4.Sign("u", "n", []int{0, 1})))
	require.NoError(t, os.WriteFile(f, []byte("short"), 0o600))
	_, err = loadRecordKey(ctx, &Args{RecordKeyFile: f}, nil)
	require.ErrorIs(t, err, ErrArgs)
	_, err = loadRecordKey(ctx, &Args{RecordKeyFile: f + ".missing"}, nil)
	require.ErrorIs(t, err, ErrArgs)
	k5, err := loadRecordKey(ctx, &Args{}, nil)
	require.NoError(t, err)
	assert.False(t, k5.Verify("u", "n", []int{1}, k1.Sign("u", "n", []int{1})))
}

// The plugin named a Secret that does not exist: New fails, with the
// command that makes it, rather than schedule with a key of its own that
// a restart forgets.
func TestPluginNeedsItsRecordKey(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cs := fake.NewClientset()
	_, err := tf.NewFramework(ctx, []tf.RegisterPluginFunc{
		tf.RegisterQueueSortPlugin(Name, func(ctx context.Context, _ runtime.Object, h fwk.Handle) (fwk.Plugin, error) {
			return New(ctx, &Args{RecordKeySecret: "kube-system/gpusched-scheduler-record-key"}, h)
		}),
		tf.RegisterBindPlugin("DefaultBinder", func(context.Context, runtime.Object, fwk.Handle) (fwk.Plugin, error) { return nil, nil }),
	}, "gpusched", frameworkruntime.WithClientSet(cs), frameworkruntime.WithInformerFactory(informers.NewSharedInformerFactory(cs, 0)))
	require.ErrorIs(t, err, ErrNoRecordKey)
	assert.Contains(t, err.Error(), RecordKeyCommand("kube-system", "gpusched-scheduler-record-key"))
}

// A node update that changes nothing gpusched reads (a kubelet's
// heartbeat) leaves the ledger alone: the node's generation, which
// invalidates its cached choices, moves only for the update that marks a
// GPU unhealthy after it.
func TestPluginNodeHeartbeatIgnored(t *testing.T) {
	ctx := context.Background()
	n0 := node("n0", kubeV100, 8, true, nil, nil)
	e := newEnv(t, nil, n0)
	gen := func() uint64 {
		e.pl.ledger.mu.RLock()
		defer e.pl.ledger.mu.RUnlock()
		return e.pl.ledger.nodes["n0"].gen
	}
	before := gen()
	hb := n0.DeepCopy()
	hb.Status.Conditions[0].LastHeartbeatTime = metav1.Now()
	hb.Status.Images = []corev1.ContainerImage{{Names: []string{"x"}}}
	hb, err := e.cs.CoreV1().Nodes().Update(ctx, hb, metav1.UpdateOptions{})
	require.NoError(t, err)
	sick := hb.DeepCopy()
	sick.Annotations = map[string]string{model.AnnotationUnhealthy: "0"}
	_, err = e.cs.CoreV1().Nodes().Update(ctx, sick, metav1.UpdateOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool { return e.pl.Ledger().Fit("n0", 8, anyType) != nil }, 5*time.Second, 10*time.Millisecond)
	require.NoError(t, e.pl.Ledger().Fit("n0", 7, anyType))
	assert.Equal(t, before+1, gen(), "the heartbeat moved the node's generation")
	require.NoError(t, e.pl.Ledger().Check())
}

// A pod in an upstream PodGroup (spec.schedulingGroup) has one barrier:
// kube-scheduler's GangScheduling, which holds the PodGroup's minCount.
// gpusched's Permit lets it through at once, even when it is also
// labelled into a gpusched group (whose min-member is not read), and still
// keeps the group's members close.
func TestPluginUpstreamPodGroup(t *testing.T) {
	nodes, members, objs := gangOfThree()
	for _, p := range members {
		p.Spec.SchedulingGroup = &corev1.PodSchedulingGroup{PodGroupName: ptr.To("job")}
	}
	e := newEnv(t, &Args{PermitTimeoutSeconds: 30, BackoffSeconds: -1}, objs...)
	var hosts []string
	for _, p := range members {
		host, st, _ := e.schedule(t, p, nodes...)
		require.True(t, st.IsSuccess(), "no gpusched barrier: %s", st.Message())
		assert.Nil(t, e.fw.GetWaitingPod(p.UID))
		hosts = append(hosts, host)
	}
	place0, _ := e.pl.Ledger().PlaceOf(hosts[0])
	place1, _ := e.pl.Ledger().PlaceOf(hosts[1])
	assert.Equal(t, place0.Rack, place1.Rack, "closeness kept: hosts %v", hosts)
	req, err := model.ParseRequest(members[0], model.ResourceGPU)
	require.NoError(t, err)
	assert.Equal(t, model.Request{GPUs: 8, Group: "ns/job", MinMember: 1, Upstream: true}, req)
}

// assignment is a proposed node for a member, in a pod group cycle.
type assignment struct {
	fwk.ProposedAssignment
	node string
}

func (a assignment) GetNodeName() string { return a.node }

// ScorePlacement prefers the placement whose members are closest: one
// node over one rack over several racks; its scores are what the pairs
// say (3 members: 3 pairs).
func TestPluginScorePlacement(t *testing.T) {
	nodes, _, objs := gangOfThree() // n0, n1 in rack r0; n2, n3 in r1
	e := newEnv(t, nil, objs...)
	_ = nodes
	score := func(hosts ...string) int64 {
		pa := &fwk.PodGroupAssignments{Placement: &fwk.Placement{Name: "p"}}
		for _, h := range hosts {
			pa.ProposedAssignments = append(pa.ProposedAssignments, assignment{node: h})
		}
		s, st := e.pl.ScorePlacement(context.Background(), nil, nil, pa)
		require.True(t, st.IsSuccess())
		return s
	}
	assert.Equal(t, fwk.MaxScore, score("n0", "n0", "n0"))
	assert.Equal(t, int64(0), score("n0"))
	oneRack := score("n0", "n1", "n0") // pairs: n0-n1 rack, n0-n0 node, n1-n0 rack: (1+3+1)/9
	twoRacks := score("n0", "n2", "n3")
	assert.Equal(t, 5*fwk.MaxScore/9, oneRack)
	assert.Equal(t, fwk.MaxScore/9, twoRacks)
	assert.Equal(t, int64(0), score("n0", "n2", "unknown"), "no pair shares a node or rack")
	s, st := e.pl.ScorePlacement(context.Background(), nil, nil, nil)
	assert.True(t, st.IsSuccess())
	assert.Zero(t, s)
}

// A pod group's first member goes where the rest can follow: the rack
// with room for all three (24 GPUs on three nodes), not the lone node of
// the other rack, however the nodes are ordered.
func TestPluginGroupFirstMemberRoom(t *testing.T) {
	for trial := range 4 {
		var nodes []*corev1.Node
		var objs []runtime.Object
		for i := range 4 {
			rack := "r0"
			if i == trial {
				rack = "r1" // the lone node, each time another
			}
			n := node(fmt.Sprint("n", i), kubeV100, 8, true, nil, map[string]string{model.LabelRack: rack})
			nodes = append(nodes, n)
			objs = append(objs, n)
		}
		var members []*corev1.Pod
		for i := range 3 {
			p := gpuPod(fmt.Sprint("m", i), 8)
			p.Spec.SchedulingGroup = &corev1.PodSchedulingGroup{PodGroupName: ptr.To("trio")}
			members = append(members, p)
			objs = append(objs, p)
		}
		e := newEnv(t, nil, objs...)
		host, st, _ := e.schedule(t, members[0], nodes...)
		require.True(t, st.IsSuccess(), st.Message())
		place, _ := e.pl.Ledger().PlaceOf(host)
		assert.Equal(t, "r0", place.Rack, "trial %d: the first member went to %s", trial, host)
	}
}
