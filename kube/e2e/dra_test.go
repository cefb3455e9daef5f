package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gpusched/gpusched/kube/internal/dratest"
	"github.com/gpusched/gpusched/kube/internal/kubetest"
	"github.com/gpusched/gpusched/kube/model"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/dynamic-resource-allocation/resourceslice"
)

// draStock is the stock profile the DRA test runs in the same scheduler
// process as gpusched's (so that both share one claim tracker): the
// in-tree DynamicResources plugin allocates its pods' claims.
const draStock = "e2e-dra-stock"

// publishSlices publishes a node's GPUs as NVIDIA's driver does, through
// k8s.io/dynamic-resource-allocation/resourceslice: one pool named after
// the node, owned by it.
func publishSlices(ctx context.Context, t *testing.T, cs kubernetes.Interface, node string, gpus []dratest.GPU) {
	t.Helper()
	n, err := cs.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	must(t, err, "node %s", node)
	devs := dratest.Devices(node, gpus)
	c, err := resourceslice.StartController(ctx, resourceslice.Options{
		DriverName: model.DriverGPU, KubeClient: cs,
		Owner:     &resourceslice.Owner{APIVersion: "v1", Kind: "Node", Name: node, UID: n.UID},
		Resources: &resourceslice.DriverResources{Pools: map[string]resourceslice.Pool{node: {Slices: []resourceslice.Slice{{Devices: devs}}}}},
	})
	must(t, err, "the test driver's slice controller for %s", node)
	t.Cleanup(c.Stop)
}

// claimOf is a claim of n GPUs of the driver's class.
func claimOf(ns, name string, n int64) *resourcev1.ResourceClaim {
	return &resourcev1.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{{Name: "gpus",
			Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: model.DriverGPU, AllocationMode: resourcev1.DeviceAllocationModeExactCount, Count: n}}}}},
	}
}

// claimPodOf is a pod of scheduler sched that uses claim, on one of nodes.
func claimPodOf(ns, name, sched, claim string, nodes ...string) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.PodSpec{
			SchedulerName: sched,
			Containers: []corev1.Container{{Name: "train", Image: "registry.k8s.io/pause:3.10",
				Resources: corev1.ResourceRequirements{Claims: []corev1.ResourceClaim{{Name: "gpus"}}}}},
			ResourceClaims: []corev1.PodResourceClaim{{Name: "gpus", ResourceClaimName: &claim}},
			Affinity: &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
				NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{
					{Key: "kubernetes.io/hostname", Operator: corev1.NodeSelectorOpIn, Values: nodes}}}}}}},
		},
	}
	if claim == "" {
		p.Spec.ResourceClaims, p.Spec.Containers[0].Resources.Claims = nil, nil
	}
	return p
}

// allocated returns the devices of a claim's allocation ("pool/device"),
// and whether it is reserved for pod.
func allocated(c *resourcev1.ResourceClaim, pod string) ([]string, bool) {
	if c.Status.Allocation == nil {
		return nil, false
	}
	var out []string
	for _, r := range c.Status.Allocation.Devices.Results {
		out = append(out, r.Pool+"/"+r.Device)
	}
	return out, slices.ContainsFunc(c.Status.ReservedFor, func(r resourcev1.ResourceClaimConsumerReference) bool { return r.Name == pod })
}

// TestE2EDRA runs gpusched on GPUs that a DRA driver publishes
// (kube-apiserver and kube-scheduler v1.37.2, the driver's schema
// published by a test driver as the driver would), beside a device-plugin
// node and the in-tree DynamicResources plugin in a stock profile of the
// same scheduler process:
//   - a claim pod gets the linked pair of a PCIe node (gpu-2 and gpu-3)
//     where the first fit would cross the sockets, its claim's allocation
//     written where the driver reads it and reserved for the pod;
//   - a tainted device (gpu.nvidia.com/gpu-lost, NoSchedule) is never
//     given, and a pod that would need it waits;
//   - a pod asking nvidia.com/gpu is served by the device plugin on its
//     node, and by the DRA driver on a DRA node (KEP-5004: a claim made
//     for it, its container mapped in its status);
//   - stock pods and gpusched pods racing for one node's eight GPUs: eight
//     bound, no device allocated twice.
func TestE2EDRA(t *testing.T) {
	c, bin := controlPlane(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cs := c.Client
	const ns = "e2e-dra"
	must(t, kubetest.EnsureNamespace(ctx, cs, ns), "namespace")
	t.Cleanup(func() { _ = cs.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{}) })

	pcie := dratest.Node(4, "NVIDIA A100-PCIE-40GB", 40, false)
	hgx := dratest.Node(8, "NVIDIA H100 80GB HBM3", 80, true)
	hgx[5].Taints = []resourcev1.DeviceTaint{{Key: "gpu.nvidia.com/gpu-lost", Effect: resourcev1.DeviceTaintEffectNoSchedule}}
	race := dratest.Node(8, "NVIDIA H100 80GB HBM3", 80, true)
	createNodes(ctx, t, cs, []kubetest.GPUNode{{Name: "dra-pcie"}, {Name: "dra-hgx"}, {Name: "dra-race"},
		{Name: "dra-dp", Product: kubetest.ProductV100, GPUs: 4, MemoryMiB: 16160}})
	_, err := cs.ResourceV1().DeviceClasses().Create(ctx, dratest.DeviceClass(), metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("DeviceClass: %v", err)
	}
	publishSlices(ctx, t, cs, "dra-pcie", pcie)
	publishSlices(ctx, t, cs, "dra-hgx", hgx)
	publishSlices(ctx, t, cs, "dra-race", race)
	waitFor(ctx, t, "the slices published", nil, func() (bool, string) {
		l, err := cs.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		return len(l.Items) >= 3, fmt.Sprintf("%d slices", len(l.Items))
	})

	cfg := schedulerConfig(t, c, nil)
	// One queue sort for all the profiles of a process: GPUSched's, with
	// the same arguments.
	gp := cfg["profiles"].([]any)[0].(map[string]any)
	stock := map[string]any{"schedulerName": draStock, "pluginConfig": gp["pluginConfig"], "plugins": map[string]any{"queueSort": map[string]any{
		"enabled": []any{map[string]any{"name": "GPUSched"}}, "disabled": []any{map[string]any{"name": "*"}}}}}
	cfg["profiles"] = append(cfg["profiles"].([]any), stock)
	sched := startScheduler(t, testDir(t), "gpusched-dra", bin, cfg)

	create := func(p *corev1.Pod, claim *resourcev1.ResourceClaim) {
		t.Helper()
		if claim != nil {
			_, err := cs.ResourceV1().ResourceClaims(ns).Create(ctx, claim, metav1.CreateOptions{})
			must(t, err, "claim %s", claim.Name)
		}
		_, err := cs.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{})
		must(t, err, "pod %s", p.Name)
	}
	boundTo := func(name string) string {
		p, err := cs.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return ""
		}
		return p.Spec.NodeName
	}
	claimed := func(name, pod string) ([]string, bool) {
		cl, err := cs.ResourceV1().ResourceClaims(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil, false
		}
		return allocated(cl, pod)
	}
	waitAllocated := func(claim, pod string) []string {
		t.Helper()
		var devs []string
		waitFor(ctx, t, "claim "+claim+" allocated and reserved for "+pod, sched, func() (bool, string) {
			d, ok := claimed(claim, pod)
			devs = d
			return ok && boundTo(pod) != "", fmt.Sprintf("devices %v, reserved %v, node %q", d, ok, boundTo(pod))
		})
		return devs
	}

	// The stock profile takes the first GPU of dra-pcie (first fit).
	create(claimPodOf(ns, "stock-0", draStock, "stock-0", "dra-pcie"), claimOf(ns, "stock-0", 1))
	if d := waitAllocated("stock-0", "stock-0"); !slices.Equal(d, []string{"dra-pcie/gpu-0"}) {
		t.Fatalf("the in-tree allocator gave %v, want its first fit dra-pcie/gpu-0", d)
	}
	// gpusched: the pair on one PCIe root.
	create(claimPodOf(ns, "pair", "gpusched", "pair", "dra-pcie"), claimOf(ns, "pair", 2))
	if d := waitAllocated("pair", "pair"); !slices.Equal(d, []string{"dra-pcie/gpu-2", "dra-pcie/gpu-3"}) {
		t.Errorf("gpusched gave %v, want the linked pair dra-pcie/gpu-2 and gpu-3 (first fit: gpu-1 and gpu-2, across the sockets)", d)
	}
	cl, err := cs.ResourceV1().ResourceClaims(ns).Get(ctx, "pair", metav1.GetOptions{})
	must(t, err, "claim pair")
	if !slices.Contains(cl.Finalizers, "resource.kubernetes.io/delete-protection") {
		t.Errorf("claim pair has no delete protection: %v", cl.Finalizers)
	}

	// The tainted device is never given: 7 of 8 fit, 8 wait.
	create(claimPodOf(ns, "seven", "gpusched", "seven", "dra-hgx"), claimOf(ns, "seven", 7))
	if d := waitAllocated("seven", "seven"); slices.Contains(d, "dra-hgx/gpu-5") || len(d) != 7 {
		t.Errorf("gpusched gave %v: want 7 GPUs, never the tainted gpu-5", d)
	}
	create(claimPodOf(ns, "one-more", "gpusched", "one-more", "dra-hgx"), claimOf(ns, "one-more", 1))

	// nvidia.com/gpu: the device plugin serves it on its node, and the
	// DRA driver on its own (KEP-5004: the DeviceClass maps the resource):
	// the claim made for the pod, owned by it, and the pod's status
	// mapping its container to the claim's request.
	plain := claimPodOf(ns, "plain", "gpusched", "", "dra-dp")
	plain.Spec.Containers[0].Resources.Limits = corev1.ResourceList{model.ResourceGPU: resource.MustParse("1")}
	create(plain, nil)
	ext := claimPodOf(ns, "ext", "gpusched", "", "dra-pcie")
	ext.Spec.Containers[0].Resources.Limits = corev1.ResourceList{model.ResourceGPU: resource.MustParse("1")}
	create(ext, nil)
	waitFor(ctx, t, "pods plain and ext bound", sched, func() (bool, string) {
		return boundTo("plain") == "dra-dp" && boundTo("ext") == "dra-pcie", boundTo("plain") + " " + boundTo("ext")
	})
	pod, err := cs.CoreV1().Pods(ns).Get(ctx, "ext", metav1.GetOptions{})
	must(t, err, "pod ext")
	if st := pod.Status.ExtendedResourceClaimStatus; st == nil || len(st.RequestMappings) != 1 || st.RequestMappings[0].ContainerName != "train" {
		t.Errorf("pod ext's extendedResourceClaimStatus: %+v", st)
	} else if d, ok := claimed(st.ResourceClaimName, "ext"); !ok || !slices.Equal(d, []string{"dra-pcie/gpu-1"}) {
		t.Errorf("pod ext's claim %s: devices %v, reserved %v; want dra-pcie/gpu-1, the one left", st.ResourceClaimName, d, ok)
	}

	// The race: 6 stock and 6 gpusched pods for 8 GPUs.
	var racers []string
	for i := range 6 {
		for _, s := range []string{draStock, "gpusched"} {
			name := fmt.Sprintf("race-%s-%d", strings.TrimPrefix(s, "e2e-dra-"), i)
			racers = append(racers, name)
			create(claimPodOf(ns, name, s, name, "dra-race"), claimOf(ns, name, 1))
		}
	}
	waitFor(ctx, t, "8 racers bound", sched, func() (bool, string) {
		n := 0
		for _, r := range racers {
			if _, ok := claimed(r, r); ok && boundTo(r) != "" {
				n++
			}
		}
		return n == 8, fmt.Sprintf("%d bound", n)
	})
	time.Sleep(2 * time.Second) // would a ninth come?
	seen := map[string]string{}
	bound := 0
	for _, r := range racers {
		d, _ := claimed(r, r)
		if boundTo(r) != "" {
			bound++
		}
		for _, dev := range d {
			if o, dup := seen[dev]; dup {
				t.Errorf("device %s allocated to claims %s and %s", dev, o, r)
			}
			seen[dev] = r
		}
	}
	if bound != 8 || len(seen) != 8 {
		t.Errorf("%d racers bound with %d devices, want 8 and 8", bound, len(seen))
	}
	if n := boundTo("one-more"); n != "" {
		t.Errorf("pod one-more bound to %s: only the tainted GPU was left", n)
	}
}
