package gpusched

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gpusched/gpusched/kube/internal/dratest"
	"github.com/gpusched/gpusched/kube/model"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/dynamic-resource-allocation/deviceclass/extendedresourcecache"
	resourceslicetracker "k8s.io/dynamic-resource-allocation/resourceslice/tracker"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/dynamicresources"
	"k8s.io/utils/ptr"

	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
	"k8s.io/kubernetes/pkg/scheduler/util/assumecache"
)

// withDRA gives the framework a DRA manager as kube-scheduler builds one
// (pkg/scheduler/scheduler.go): an assume cache over the claims, a slice
// tracker with device taint rules.
func withDRA(t *testing.T) func(ctx context.Context, cs *fake.Clientset, inf informers.SharedInformerFactory) []frameworkruntime.Option {
	return func(ctx context.Context, cs *fake.Clientset, inf informers.SharedInformerFactory) []frameworkruntime.Option {
		claims := assumecache.NewAssumeCache(klog.FromContext(ctx), inf.Resource().V1().ResourceClaims().Informer(), "ResourceClaim", "", nil)
		tr, err := resourceslicetracker.StartTracker(ctx, resourceslicetracker.Options{
			EnableDeviceTaintRules: true, SliceInformer: inf.Resource().V1().ResourceSlices(),
			TaintInformer: inf.Resource().V1().DeviceTaintRules(), KubeClient: cs,
		})
		require.NoError(t, err)
		// The API server names what is created with generateName, and
		// versions what it stores (the claim tracker's assume cache
		// compares versions); the fake does neither.
		var n, rv atomic.Int64
		rv.Store(1000)
		version := func(a k8stesting.Action) (bool, runtime.Object, error) {
			o, ok := a.(interface{ GetObject() runtime.Object })
			if !ok {
				return false, nil, nil
			}
			if c, ok := o.GetObject().(*resourcev1.ResourceClaim); ok {
				if c.Name == "" && c.GenerateName != "" {
					c.Name = fmt.Sprintf("%s%05d", c.GenerateName, n.Add(1))
				}
				c.ResourceVersion = fmt.Sprint(rv.Add(1))
			}
			return false, nil, nil
		}
		cs.PrependReactor("create", "resourceclaims", version)
		cs.PrependReactor("update", "resourceclaims", version)
		mgr := dynamicresources.NewDRAManager(ctx, claims, tr, inf)
		// The scheduler feeds the extended resource mapping from its
		// DeviceClass events (pkg/scheduler/eventhandlers.go).
		_, err = inf.Resource().V1().DeviceClasses().Informer().AddEventHandler(mgr.DeviceClassResolver().(*extendedresourcecache.ExtendedResourceCache))
		require.NoError(t, err)
		return []frameworkruntime.Option{frameworkruntime.WithSharedDRAManager(mgr)}
	}
}

// waitDRA waits until the DRA node is in the ledger with its total GPUs,
// the claim tracker holds claims claims of which allocated devices are in
// use, and the DeviceClass mapping of nvidia.com/gpu is known (when the
// class maps it).
func waitDRA(t *testing.T, e *env, node string, total, claims, allocated int, mapped bool) {
	t.Helper()
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		// As a claim pod's PreFilter does: the node and slice events may
		// both have come before the other's object was there.
		if rs, err := e.pl.dra.mgr.ResourceSlices().ListWithDeviceTaintRules(); err == nil {
			e.pl.refreshFromSlices(rs)
		}
		_, n, err := e.pl.Ledger().Room(node)
		assert.NoError(c, err, "the DRA node")
		assert.Equal(c, total, n, "its GPUs")
		cl, _ := e.pl.dra.mgr.ResourceClaims().List()
		assert.Len(c, cl, claims, "the claims in the tracker")
		in, _ := e.pl.dra.mgr.ResourceClaims().ListAllAllocatedDevices()
		assert.Equal(c, allocated, in.Len(), "the devices in use")
		assert.Equal(c, mapped, e.pl.dra.mgr.DeviceClassResolver().GetDeviceClass(model.ResourceGPU) != nil, "nvidia.com/gpu mapped")
	}, 10*time.Second, 10*time.Millisecond)
}

// gpuClaim is a claim of n GPUs of the driver's class.
func gpuClaim(name string, n int64) *resourcev1.ResourceClaim {
	return &resourcev1.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID("claim-" + name), ResourceVersion: "1"},
		Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{{Name: "gpus",
			Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: model.DriverGPU, AllocationMode: resourcev1.DeviceAllocationModeExactCount, Count: n}}}}},
	}
}

// allocatedTo marks a claim allocated the devices of node's pool, and
// reserved for another pod.
func allocatedTo(c *resourcev1.ResourceClaim, node string, devices ...string) *resourcev1.ResourceClaim {
	a := &resourcev1.AllocationResult{NodeSelector: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
		MatchFields: []corev1.NodeSelectorRequirement{{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{node}}}}}}}
	for _, d := range devices {
		a.Devices.Results = append(a.Devices.Results, resourcev1.DeviceRequestAllocationResult{Request: "gpus", Driver: model.DriverGPU, Pool: node, Device: d})
	}
	c.Status.Allocation = a
	c.Status.ReservedFor = []resourcev1.ResourceClaimConsumerReference{{Resource: "pods", Name: "other", UID: "uid-other"}}
	return c
}

// claimPod asks for its GPUs through the named claims.
func claimPod(name string, claims ...string) *corev1.Pod {
	p := gpuPod(name, 0)
	for _, c := range claims {
		p.Spec.ResourceClaims = append(p.Spec.ResourceClaims, corev1.PodResourceClaim{Name: c, ResourceClaimName: &c})
	}
	return p
}

// A cluster of both kinds: a PCIe node whose four A100s the DRA driver
// publishes (two per socket), gpu-0 held by another pod's claim, and a
// device-plugin node. A pod asking two GPUs through a claim goes to the
// DRA node, gets the linked pair gpu-2 and gpu-3 (the first fit would
// cross the sockets), and its claim is written as the driver reads it:
// allocation, reservedFor, the finalizer. A pod asking nvidia.com/gpu
// never lands on the DRA node (nothing there would give it a GPU), and a
// claim pod never on the device-plugin node.
func TestDRAClaimPod(t *testing.T) {
	gpus := dratest.Node(4, "NVIDIA A100-PCIE-40GB", 40, false)
	dn := dratest.ReadyNode("pcie", nil)
	dp := node("dp", "Tesla-V100-SXM2-16GB", 4, true, nil, nil)
	cls := dratest.DeviceClass()
	cls.Spec.ExtendedResourceName = nil // no KEP-5004 mapping: see TestDRAExtendedResource
	objs := []runtime.Object{dn, dp, cls, gpuClaim("two", 2), allocatedTo(gpuClaim("held", 1), "pcie", "gpu-0")}
	for _, s := range dratest.Slices("pcie", gpus) {
		objs = append(objs, s)
	}
	e := newEnvWith(t, nil, withDRA(t), objs...)
	waitDRA(t, e, "pcie", 4, 2, 1, false) // the DRA node read from its slices, gpu-0 held by a claim

	p := claimPod("trainer", "two")
	got, st, state := e.schedule(t, p, dn, dp)
	require.True(t, st.IsSuccess(), "%v", st)
	require.Equal(t, "pcie", got)
	_, devices, ok := e.pl.Ledger().Booking(p.UID)
	require.True(t, ok)
	assert.Equal(t, []int{2, 3}, devices, "the pair on one PCIe root, not gpu-1 and gpu-2 across the sockets")
	free, _, err := e.pl.Ledger().Room("pcie")
	require.NoError(t, err)
	assert.Equal(t, 1, free, "gpu-0 held by the other pod's claim, gpu-2 and gpu-3 by this pod")

	require.True(t, e.fw.RunPreBindPlugins(context.Background(), state, p, got).IsSuccess())
	c, err := e.cs.ResourceV1().ResourceClaims("ns").Get(context.Background(), "two", metav1.GetOptions{})
	require.NoError(t, err)
	require.NotNil(t, c.Status.Allocation)
	var names []string
	for _, r := range c.Status.Allocation.Devices.Results {
		names = append(names, r.Pool+"/"+r.Device)
	}
	assert.Equal(t, []string{"pcie/gpu-2", "pcie/gpu-3"}, names)
	assert.Equal(t, []resourcev1.ResourceClaimConsumerReference{{Resource: "pods", Name: p.Name, UID: p.UID}}, c.Status.ReservedFor)
	assert.Contains(t, c.Finalizers, finalizerDeleteProtection)

	// The device-plugin pod: the DRA node is filtered out, saying why.
	dpPod := gpuPod("plain", 1)
	got, st, _ = e.schedule(t, dpPod, dn)
	assert.Empty(t, got)
	assert.False(t, st.IsSuccess())
	state2 := newCycle(t, e, dpPod)
	st = e.fw.RunFilterPlugins(context.Background(), state2, dpPod, nodeInfo(dn))
	assert.Contains(t, strings.Join(st.Reasons(), " "), "DRA devices")
	got, st, _ = e.schedule(t, dpPod, dn, dp)
	require.True(t, st.IsSuccess(), "%v", st)
	assert.Equal(t, "dp", got)

	// A claim pod on the device-plugin node: refused.
	e2 := claimPod("second", "held")
	state3 := newCycle(t, e, e2)
	st = e.fw.RunFilterPlugins(context.Background(), state3, e2, nodeInfo(dp))
	assert.False(t, st.IsSuccess())
}

// newCycle runs PreFilter for p and returns the cycle's state.
func newCycle(t *testing.T, e *env, p *corev1.Pod) fwk.CycleState {
	t.Helper()
	state := framework.NewCycleState()
	_, st, _ := e.fw.RunPreFilterPlugins(context.Background(), state, p)
	require.True(t, st.IsSuccess(), "%v", st)
	return state
}

func nodeInfo(n *corev1.Node) fwk.NodeInfo {
	ni := framework.NewNodeInfo()
	ni.SetNode(n)
	return ni
}

// A claim that does not exist yet (its template's claim not made) keeps
// the pod waiting, saying which; a pod asking both ways is refused.
func TestDRAClaimPodBadInput(t *testing.T) {
	gpus := dratest.Node(2, "NVIDIA A100-PCIE-40GB", 40, false)
	objs := []runtime.Object{dratest.ReadyNode("pcie", nil), dratest.DeviceClass(), gpuClaim("one", 1)}
	for _, s := range dratest.Slices("pcie", gpus) {
		objs = append(objs, s)
	}
	e := newEnvWith(t, nil, withDRA(t), objs...)
	waitDRA(t, e, "pcie", 2, 1, 0, true)
	_, st, _ := e.schedule(t, claimPod("waits", "missing"), dratest.ReadyNode("pcie", nil))
	assert.Equal(t, fwk.UnschedulableAndUnresolvable, st.Code())
	assert.Contains(t, st.Message(), "waiting for ResourceClaim ns/missing")

	both := claimPod("both", "one")
	both.Spec.Containers[0].Resources.Limits = corev1.ResourceList{model.ResourceGPU: resourceMust("1")}
	_, st, _ = e.schedule(t, both, dratest.ReadyNode("pcie", nil))
	assert.Contains(t, st.Message(), "both")
}

// KEP-5004: with the driver's DeviceClass mapping nvidia.com/gpu, a pod
// asking nvidia.com/gpu may go to a DRA node. gpusched allocates the claim
// the in-tree plugin would make (a request per long-lived container, named
// as upstream names them; an init container reuses a later container's),
// with its GPU choice; PreBind makes the claim (owned by the pod, with its
// allocation, reserved for it) and records the container mappings in the
// pod's status, where the kubelet reads them.
func TestDRAExtendedResource(t *testing.T) {
	gpus := dratest.Node(4, "NVIDIA A100-PCIE-40GB", 40, false)
	dn := dratest.ReadyNode("pcie", nil)
	p := gpuPod("ext", 1, func(p *corev1.Pod) {
		p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: "d", Image: "x", Resources: corev1.ResourceRequirements{
			Limits: corev1.ResourceList{model.ResourceGPU: resourceMust("1"), corev1.ResourceCPU: resourceMust("2")}}})
		p.Spec.InitContainers = []corev1.Container{{Name: "fetch", Image: "x", Resources: corev1.ResourceRequirements{
			Limits: corev1.ResourceList{model.ResourceGPU: resourceMust("1")}}}}
	})
	objs := []runtime.Object{dn, dratest.DeviceClass(), allocatedTo(gpuClaim("held", 1), "pcie", "gpu-0"), p}
	for _, s := range dratest.Slices("pcie", gpus) {
		objs = append(objs, s)
	}
	e := newEnvWith(t, nil, withDRA(t), objs...)
	waitDRA(t, e, "pcie", 4, 1, 1, true)

	got, st, state := e.schedule(t, p, dn)
	require.True(t, st.IsSuccess(), "%v", st)
	require.Equal(t, "pcie", got)
	_, devices, _ := e.pl.Ledger().Booking(p.UID)
	assert.Equal(t, []int{2, 3}, devices, "two GPUs (the containers' 1 and 1; the init container reuses one), the linked pair")
	require.True(t, e.fw.RunPreBindPlugins(context.Background(), state, p, got).IsSuccess())

	claims, err := e.cs.ResourceV1().ResourceClaims("ns").List(context.Background(), metav1.ListOptions{})
	require.NoError(t, err)
	var made *resourcev1.ResourceClaim
	for i := range claims.Items {
		if claims.Items[i].Annotations[annotationExtClaim] == "true" {
			made = &claims.Items[i]
		}
	}
	require.NotNil(t, made, "the claim made in the API")
	assert.Equal(t, p.UID, made.OwnerReferences[0].UID)
	var reqs []string
	for _, r := range made.Spec.Devices.Requests {
		reqs = append(reqs, fmt.Sprintf("%s:%d", r.Name, r.Exactly.Count))
	}
	assert.Equal(t, []string{"container-1-request-0:1", "container-2-request-1:1"}, reqs, "index among init and regular containers; the resource's index among the container's sorted requests")
	require.NotNil(t, made.Status.Allocation)
	assert.Len(t, made.Status.Allocation.Devices.Results, 2)
	assert.Equal(t, p.UID, made.Status.ReservedFor[0].UID)
	pod, err := e.cs.CoreV1().Pods("ns").Get(context.Background(), "ext", metav1.GetOptions{})
	require.NoError(t, err)
	require.NotNil(t, pod.Status.ExtendedResourceClaimStatus)
	assert.Equal(t, made.Name, pod.Status.ExtendedResourceClaimStatus.ResourceClaimName)
	var maps []string
	for _, m := range pod.Status.ExtendedResourceClaimStatus.RequestMappings {
		maps = append(maps, m.ContainerName+"->"+m.RequestName)
	}
	assert.Equal(t, []string{"c->container-1-request-0", "d->container-2-request-1", "fetch->container-1-request-0"}, maps)
	assert.Nil(t, e.pl.dra.mgr.ResourceClaims().GetPendingAllocation(state2UID(t, state)), "the allocation in flight withdrawn once the tracker sees the claim")
}

// state2UID returns the UID of the claim in memory of a cycle.
func state2UID(t *testing.T, state fwk.CycleState) types.UID {
	t.Helper()
	d := cycle(state)
	require.NotNil(t, d)
	require.NotNil(t, d.claims)
	return d.claims.toAllocate[0].UID
}

// A pod whose binding fails after PreBind wrote its claim (Unreserve) gives
// the claim back: no reservation, no allocation, its devices free again;
// the claim made for a pod's nvidia.com/gpu is deleted.
func TestDRAUnreserveTakesBack(t *testing.T) {
	gpus := dratest.Node(4, "NVIDIA A100-PCIE-40GB", 40, false)
	dn := dratest.ReadyNode("pcie", nil)
	pods := []*corev1.Pod{claimPod("claims", "two"), gpuPod("ext", 1)}
	objs := []runtime.Object{dn, dratest.DeviceClass(), gpuClaim("two", 2), pods[0], pods[1]}
	for _, s := range dratest.Slices("pcie", gpus) {
		objs = append(objs, s)
	}
	e := newEnvWith(t, nil, withDRA(t), objs...)
	waitDRA(t, e, "pcie", 4, 1, 0, true)
	ctx := context.Background()
	for _, p := range pods {
		got, st, state := e.schedule(t, p, dn)
		require.True(t, st.IsSuccess(), "%v", st)
		require.True(t, e.fw.RunPreBindPlugins(ctx, state, p, got).IsSuccess())
		e.fw.RunReservePluginsUnreserve(ctx, state, p, got)
	}
	c, err := e.cs.ResourceV1().ResourceClaims("ns").Get(ctx, "two", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Nil(t, c.Status.Allocation)
	assert.Empty(t, c.Status.ReservedFor)
	l, err := e.cs.ResourceV1().ResourceClaims("ns").List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	assert.Len(t, l.Items, 1, "the claim made for pod ext deleted")
	require.Eventually(t, func() bool {
		in, err := e.pl.dra.mgr.ResourceClaims().ListAllAllocatedDevices()
		return err == nil && in.Len() == 0
	}, 5*time.Second, 10*time.Millisecond, "the tracker sees the devices free")
	// The ledger follows the tracker at the next claim pod's cycle.
	newCycle(t, e, gpuPod("next", 1))
	free, _, err := e.pl.Ledger().Room("pcie")
	require.NoError(t, err)
	assert.Equal(t, 4, free)
}

// The claim of a pod's nvidia.com/gpu asks for what the pod's request
// counts (model.PodGPUs, what the admission controller counted), however
// its init containers, sidecars and containers share them: an init
// container uses the requests of the containers after it and asks only
// for what they lack, as upstream's claim does.
func TestExtClaimCountsThePodRequest(t *testing.T) {
	pl := &Plugin{res: model.ResourceGPU, dra: &draPart{mgr: fakeResolver{}}}
	c := func(name string, n int64) corev1.Container {
		return corev1.Container{Name: name, Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{model.ResourceGPU: *resource.NewQuantity(n, resource.DecimalSI)}}}
	}
	sidecar := func(name string, n int64) corev1.Container {
		x := c(name, n)
		x.RestartPolicy = ptr.To(corev1.ContainerRestartPolicyAlways)
		return x
	}
	for _, tc := range []struct {
		name         string
		init, main   []corev1.Container
		wantRequests []string
	}{
		{"init 4, two of 2", []corev1.Container{c("i", 4)}, []corev1.Container{c("a", 2), c("b", 2)}, []string{"container-1-request-0:2", "container-2-request-0:2"}},
		{"init 5, two of 2", []corev1.Container{c("i", 5)}, []corev1.Container{c("a", 2), c("b", 2)}, []string{"container-0-request-0:1", "container-1-request-0:2", "container-2-request-0:2"}},
		{"two inits of 3, one of 1", []corev1.Container{c("i", 3), c("j", 3)}, []corev1.Container{c("a", 1)}, []string{"container-0-request-0:2", "container-2-request-0:1"}},
		{"a sidecar and a main", []corev1.Container{sidecar("s", 1)}, []corev1.Container{c("a", 2)}, []string{"container-0-request-0:1", "container-1-request-0:2"}},
		{"init of 1 before a sidecar of 2", []corev1.Container{c("i", 1), sidecar("s", 2)}, []corev1.Container{c("a", 1)}, []string{"container-1-request-0:2", "container-2-request-0:1"}},
	} {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "u"}, Spec: corev1.PodSpec{InitContainers: tc.init, Containers: tc.main}}
		claim, maps := pl.extClaim(p)
		require.NotNil(t, claim, tc.name)
		var got []string
		var total int64
		for _, r := range claim.Spec.Devices.Requests {
			got = append(got, fmt.Sprintf("%s:%d", r.Name, r.Exactly.Count))
			total += r.Exactly.Count
		}
		assert.Equal(t, tc.wantRequests, got, tc.name)
		want, err := model.PodGPUs(p, model.ResourceGPU)
		require.NoError(t, err)
		assert.Equal(t, int64(want), total, "%s: the claim asks for the pod's request", tc.name)
		names := map[string]bool{}
		for _, r := range claim.Spec.Devices.Requests {
			names[r.Name] = true
		}
		for _, m := range maps {
			assert.True(t, names[m.RequestName], "%s: %s mapped to a request of the claim", tc.name, m.ContainerName)
		}
	}
}

// fakeResolver maps nvidia.com/gpu to the driver's class; only its
// resolver is used.
type fakeResolver struct{ fwk.SharedDRAManager }

func (fakeResolver) DeviceClassResolver() fwk.DeviceClassResolver { return fakeResolver{} }

func (fakeResolver) GetDeviceClass(corev1.ResourceName) *resourcev1.DeviceClass {
	return dratest.DeviceClass()
}

// A pod another scheduler bound on a DRA node (the stock profile's
// nvidia.com/gpu pod, with no gpusched record) is not a stand-in: the
// claims are the record, and its devices are booked once, from the
// tracker.
func TestDRAForeignPodCountedOnce(t *testing.T) {
	gpus := dratest.Node(4, "NVIDIA A100-PCIE-40GB", 40, false)
	dn := dratest.ReadyNode("pcie", nil)
	foreign := gpuPod("stock", 2, onNode("pcie", ""))
	objs := []runtime.Object{dn, dratest.DeviceClass(), allocatedTo(gpuClaim("stock-claim", 2), "pcie", "gpu-2", "gpu-3"), foreign}
	for _, s := range dratest.Slices("pcie", gpus) {
		objs = append(objs, s)
	}
	e := newEnvWith(t, nil, withDRA(t), objs...)
	waitDRA(t, e, "pcie", 4, 1, 2, true)
	// The pod changes once the node is known (its status, say).
	foreign.Labels["seen"] = "yes"
	_, err := e.cs.CoreV1().Pods("ns").Update(context.Background(), foreign, metav1.UpdateOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		p, err := e.pl.h.SharedInformerFactory().Core().V1().Pods().Lister().Pods("ns").Get("stock")
		return err == nil && p.Labels["seen"] == "yes"
	}, 5*time.Second, 10*time.Millisecond)
	time.Sleep(100 * time.Millisecond) // the handlers run after the store
	p := gpuPod("two", 2)
	got, st, _ := e.schedule(t, p, dn)
	require.True(t, st.IsSuccess(), "%v", st)
	assert.Equal(t, "pcie", got)
	_, devices, _ := e.pl.Ledger().Booking(p.UID)
	assert.Equal(t, []int{0, 1}, devices)
}

// A claim an earlier cycle made for a pod's nvidia.com/gpu (a scheduler
// that stopped while binding) is the pod's claim still: allocated, it
// pins the pod to its node and is reserved for it; not yet allocated, it
// is the one allocated now. No second claim is made.
func TestDRAExtClaimReused(t *testing.T) {
	for _, allocated := range []bool{true, false} {
		t.Run(fmt.Sprint("allocated=", allocated), func(t *testing.T) {
			gpus := dratest.Node(4, "NVIDIA A100-PCIE-40GB", 40, false)
			dn := dratest.ReadyNode("pcie", nil)
			p := gpuPod("ext", 1)
			old := gpuClaim("ext-extended-resources-x", 1)
			old.Annotations = map[string]string{annotationExtClaim: "true"}
			old.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: p.Name, UID: p.UID, Controller: ptr.To(true)}}
			inUse := 0
			if allocated {
				allocatedTo(old, "pcie", "gpu-1")
				old.Status.ReservedFor = nil
				inUse = 1
			}
			objs := []runtime.Object{dn, dratest.DeviceClass(), old, p}
			for _, s := range dratest.Slices("pcie", gpus) {
				objs = append(objs, s)
			}
			e := newEnvWith(t, nil, withDRA(t), objs...)
			waitDRA(t, e, "pcie", 4, 1, inUse, true)
			got, st, state := e.schedule(t, p, dn)
			require.True(t, st.IsSuccess(), "%v", st)
			require.Equal(t, "pcie", got)
			require.True(t, e.fw.RunPreBindPlugins(context.Background(), state, p, got).IsSuccess())
			l, err := e.cs.ResourceV1().ResourceClaims("ns").List(context.Background(), metav1.ListOptions{})
			require.NoError(t, err)
			require.Len(t, l.Items, 1, "no second claim")
			c := l.Items[0]
			require.NotNil(t, c.Status.Allocation)
			assert.Len(t, c.Status.Allocation.Devices.Results, 1)
			assert.Equal(t, p.UID, c.Status.ReservedFor[0].UID)
			pod, err := e.cs.CoreV1().Pods("ns").Get(context.Background(), "ext", metav1.GetOptions{})
			require.NoError(t, err)
			require.NotNil(t, pod.Status.ExtendedResourceClaimStatus)
			assert.Equal(t, old.Name, pod.Status.ExtendedResourceClaimStatus.ResourceClaimName)
		})
	}
}
