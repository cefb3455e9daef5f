package gpusched

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/gpusched/gpusched/kube/model"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/utils/ptr"
)

// A pod that asks for GPUs as the extended resource (nvidia.com/gpu) may
// get them on a DRA node when a DeviceClass maps the resource to the
// driver's devices (KEP-5004, GA in 1.37: the driver's chart sets
// extendedResourceName on its gpu.nvidia.com class): as the in-tree
// plugin does (pkg/scheduler/framework/plugins/dynamicresources/
// extendeddynamicresources.go), gpusched allocates an in-memory claim
// for the pod's containers, and at PreBind creates it in the API (owned by
// the pod, annotated resource.kubernetes.io/extended-resource-claim),
// writes its allocation, and records in the pod's
// status.extendedResourceClaimStatus which request serves which container
// (the kubelet hands each container its devices from there).

const (
	// extClaimName is the name of the claim in memory until PreBind makes
	// it: the in-tree plugin's, which the claim tracker recognises.
	extClaimName = "<extended-resources>"
	// annotationExtClaim marks a claim made for a pod's extended resources
	// (resourceapi.ExtendedResourceClaimAnnotation).
	annotationExtClaim = "resource.kubernetes.io/extended-resource-claim"
	// extClaimWait bounds PreBind's wait for the claim tracker to see the
	// claim it wrote (the in-tree plugin's bound).
	extClaimWait = 120 * time.Second
)

// extClaim returns the claim of a pod's GPUs as the extended resource on a
// DRA node, and which request serves which container; nil when no
// DeviceClass maps the resource. Each long-lived container (a regular one
// or a sidecar) has a request of its own, named as the in-tree plugin
// names them (container-<index among init and regular containers>-
// request-<index of the resource among its sorted requests>); an init
// container that runs before them uses theirs and asks only for what they
// lack (shortLived), so the claim asks for what the pod's request counts
// (model.PodGPUs), no more.
func (pl *Plugin) extClaim(p *corev1.Pod) (*resourcev1.ResourceClaim, []corev1.ContainerExtendedResourceRequest) {
	class := pl.dra.mgr.DeviceClassResolver().GetDeviceClass(pl.res)
	if class == nil {
		return nil, nil
	}
	containers := slices.Concat(p.Spec.InitContainers, p.Spec.Containers)
	nInit := len(p.Spec.InitContainers)
	long := make([]*resourcev1.DeviceRequest, len(containers))
	var maps []corev1.ContainerExtendedResourceRequest
	for i := range containers {
		c := &containers[i]
		if i < nInit && (c.RestartPolicy == nil || *c.RestartPolicy != corev1.ContainerRestartPolicyAlways) {
			continue
		}
		if r := pl.containerRequest(i, c, class.Name); r != nil {
			long[i] = r
			maps = append(maps, corev1.ContainerExtendedResourceRequest{ContainerName: c.Name, ResourceName: string(pl.res), RequestName: r.Name})
		}
	}
	short, shortMaps := pl.shortLived(containers[:nInit], long, class.Name)
	var reqs []resourcev1.DeviceRequest
	if short != nil {
		reqs = append(reqs, *short)
	}
	for _, r := range long {
		if r != nil {
			reqs = append(reqs, *r)
		}
	}
	slices.SortFunc(reqs, func(a, b resourcev1.DeviceRequest) int { return strings.Compare(a.Name, b.Name) })
	claim := &resourcev1.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{
			Name: extClaimName, Namespace: p.Namespace, UID: uuid.NewUUID(),
			GenerateName:    p.Name + "-extended-resources-",
			Annotations:     map[string]string{annotationExtClaim: "true"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: p.Name, UID: p.UID, Controller: ptr.To(true)}},
		},
		Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{Requests: reqs}},
	}
	return claim, append(maps, shortMaps...)
}

// shortLived maps the init containers that run before the others
// (inits, by index; long: the long-lived containers' requests, by index)
// as upstream does: an init container uses the requests of the
// containers after it, summed, and asks only for what they lack, in a
// request of its own; the largest of those serves every init container
// that needed one. It returns that request and the mappings.
func (pl *Plugin) shortLived(inits []corev1.Container, long []*resourcev1.DeviceRequest, class string) (*resourcev1.DeviceRequest, []corev1.ContainerExtendedResourceRequest) {
	var short *resourcev1.DeviceRequest
	var maps []corev1.ContainerExtendedResourceRequest
	own := map[string]bool{}
	for i := range inits {
		c := &inits[i]
		n := pl.containerGPUs(c)
		if long[i] != nil || n == 0 {
			continue
		}
		var sum int64
		for _, r := range long[i:] {
			if r == nil || sum >= n {
				continue
			}
			sum += r.Exactly.Count
			maps = append(maps, corev1.ContainerExtendedResourceRequest{ContainerName: c.Name, ResourceName: string(pl.res), RequestName: r.Name})
		}
		if sum >= n {
			continue
		}
		r := pl.containerRequest(i, c, class)
		r.Exactly.Count = n - sum
		own[r.Name] = true
		maps = append(maps, corev1.ContainerExtendedResourceRequest{ContainerName: c.Name, ResourceName: string(pl.res), RequestName: r.Name})
		if short == nil || r.Exactly.Count > short.Exactly.Count {
			short = r
		}
	}
	for i := range maps {
		if own[maps[i].RequestName] {
			maps[i].RequestName = short.Name
		}
	}
	return short, maps
}

// containerGPUs reads a container's GPUs (model.ContainerGPUs; PreFilter
// refused the pods whose counts do not read).
func (pl *Plugin) containerGPUs(c *corev1.Container) int64 {
	n, _ := model.ContainerGPUs(c, pl.res)
	return n
}

// containerRequest is container i's request of class, or nil when it asks
// for no GPU.
func (pl *Plugin) containerRequest(i int, c *corev1.Container, class string) *resourcev1.DeviceRequest {
	n := pl.containerGPUs(c)
	if n == 0 {
		return nil
	}
	keys := map[string]bool{}
	for k := range c.Resources.Requests {
		keys[string(k)] = true
	}
	for k := range c.Resources.Limits {
		keys[string(k)] = true
	}
	sorted := make([]string, 0, len(keys))
	for k := range keys {
		sorted = append(sorted, k)
	}
	slices.Sort(sorted)
	return &resourcev1.DeviceRequest{
		Name:    fmt.Sprintf("container-%d-request-%d", i, slices.Index(sorted, string(pl.res))),
		Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: class, AllocationMode: resourcev1.DeviceAllocationModeExactCount, Count: n},
	}
}

// preFilterExt makes the in-memory claim of a pod that asks for GPUs as
// the extended resource, when DRA nodes may serve them.
//
// A claim made for the pod by an earlier cycle that did not finish (a
// scheduler that stopped while binding) is the pod's claim still, as the
// in-tree plugin has it: allocated, it pins the pod to its node; not yet,
// it is the one allocated now. No second claim holds GPUs for the pod.
func (pl *Plugin) preFilterExt(p *corev1.Pod, req *model.Request, d *cycleData) *fwk.Status {
	if pl.dra == nil || req.GPUs == 0 || len(p.Spec.ResourceClaims) > 0 {
		return nil
	}
	claim, maps := pl.extClaim(p)
	if claim == nil {
		return nil
	}
	d.claims = &draClaims{toAllocate: []*resourcev1.ResourceClaim{claim}, gpus: req.GPUs, ext: maps}
	if old := pl.ownExtClaim(p); old != nil {
		d.claims.existing = old
		d.claims.toAllocate = []*resourcev1.ResourceClaim{old}
		if old.Status.Allocation != nil {
			d.claims.toAllocate, d.claims.shared = nil, []*resourcev1.ResourceClaim{old}
			req.GPUs = 0 // held by the claim already
		}
	}
	return pl.prepareFilter(d.claims)
}

// ownExtClaim returns the claim an earlier cycle made for the pod's
// extended resource (annotated, controlled by the pod, not being
// deleted), or nil.
func (pl *Plugin) ownExtClaim(p *corev1.Pod) *resourcev1.ResourceClaim {
	all, err := pl.dra.mgr.ResourceClaims().List()
	if err != nil {
		return nil
	}
	for _, c := range all {
		if c.Namespace != p.Namespace || c.Annotations[annotationExtClaim] != "true" || c.DeletionTimestamp != nil {
			continue
		}
		if o := metav1.GetControllerOf(c); o != nil && o.UID == p.UID {
			return c
		}
	}
	return nil
}

// patchExtStatus records in the pod's status which request of its claim
// serves which container (the kubelet hands each its devices from there).
func (pl *Plugin) patchExtStatus(ctx context.Context, p *corev1.Pod, maps []corev1.ContainerExtendedResourceRequest, claim string) error {
	patch, _ := json.Marshal(map[string]any{"status": map[string]any{"extendedResourceClaimStatus": corev1.PodExtendedResourceClaimStatus{
		RequestMappings: maps, ResourceClaimName: claim}}})
	if _, err := pl.h.ClientSet().CoreV1().Pods(p.Namespace).Patch(ctx, p.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status"); err != nil {
		return fmt.Errorf("gpusched: record the claim of %s/%s in its status: %w", p.Namespace, p.Name, err)
	}
	return nil
}

// preBindExisting writes a claim an earlier cycle made for the pod (its
// allocation, if this cycle made one, and the pod's reservation) and the
// pod's status.
func (pl *Plugin) preBindExisting(ctx context.Context, dc *draClaims, p *corev1.Pod) error {
	var alloc *resourcev1.AllocationResult
	if len(dc.allocated) > 0 {
		alloc = dc.allocated[0].Status.Allocation
	}
	if err := pl.writeClaim(ctx, dc, p, dc.existing, alloc); err != nil {
		return err
	}
	return pl.patchExtStatus(ctx, p, dc.ext, dc.existing.Name)
}

// preBindExt makes the pod's claim in the API with its allocation, records
// which request serves which container in the pod's status, and waits for
// the claim tracker to see the claim before the allocation in flight is
// withdrawn (so that no other cycle sees its devices free meanwhile).
func (pl *Plugin) preBindExt(ctx context.Context, dc *draClaims, p *corev1.Pod) error {
	mem := dc.allocated[0]
	claims := pl.h.ClientSet().ResourceV1().ResourceClaims(p.Namespace)
	c := &resourcev1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{
		Namespace: p.Namespace, GenerateName: mem.GenerateName, Annotations: mem.Annotations,
		OwnerReferences: mem.OwnerReferences, Finalizers: []string{finalizerDeleteProtection},
	}, Spec: mem.Spec}
	made, err := claims.Create(ctx, c, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("gpusched: create the claim of %s/%s's %s: %w", p.Namespace, p.Name, pl.res, err)
	}
	fail := func(err error) error {
		pl.deleteClaim(made)
		return err
	}
	made.Status.Allocation = mem.Status.Allocation
	made.Status.ReservedFor = []resourcev1.ResourceClaimConsumerReference{{Resource: "pods", Name: p.Name, UID: p.UID}}
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		_, err := claims.UpdateStatus(ctx, made, metav1.UpdateOptions{})
		if err != nil {
			if cur, gerr := claims.Get(ctx, made.Name, metav1.GetOptions{}); gerr == nil {
				cur.Status = made.Status
				made = cur
			}
		}
		return err
	}); err != nil {
		return fail(fmt.Errorf("gpusched: write the allocation of ResourceClaim %s/%s: %w", made.Namespace, made.Name, err))
	}
	if err := pl.patchExtStatus(ctx, p, dc.ext, made.Name); err != nil {
		return fail(err)
	}
	dc.made = made
	tracker := pl.dra.mgr.ResourceClaims()
	// Until the tracker sees the claim allocated, the allocation in flight
	// keeps its devices from other cycles; a claim it never sees fails
	// the binding (Unreserve deletes it), rather than leave a window.
	if err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, extClaimWait, true, func(context.Context) (bool, error) {
		got, err := tracker.Get(made.Namespace, made.Name)
		return err == nil && got.Status.Allocation != nil, nil
	}); err != nil {
		return fmt.Errorf("gpusched: the claim tracker did not see ResourceClaim %s/%s allocated: %w", made.Namespace, made.Name, err)
	}
	tracker.MaybeRemoveClaimPendingAllocation(mem.UID, true)
	return nil
}

// deleteClaim deletes a claim gpusched made, its finalizer taken off
// first (it was never used).
func (pl *Plugin) deleteClaim(c *resourcev1.ResourceClaim) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	claims := pl.h.ClientSet().ResourceV1().ResourceClaims(c.Namespace)
	patch := []byte(`{"metadata":{"finalizers":null}}`)
	if _, err := claims.Patch(ctx, c.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		pl.logger.Info("could not take the finalizer off a claim gpusched made", "claim", c.Namespace+"/"+c.Name, "err", err)
	}
	if err := claims.Delete(ctx, c.Name, metav1.DeleteOptions{}); err != nil {
		pl.logger.Info("could not delete a claim gpusched made", "claim", c.Namespace+"/"+c.Name, "err", err)
	}
}
