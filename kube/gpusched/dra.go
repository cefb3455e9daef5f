package gpusched

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/gpusched/gpusched/kube/dra"
	"github.com/gpusched/gpusched/kube/model"
	"github.com/gpusched/gpusched/placement"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/retry"
	"k8s.io/dynamic-resource-allocation/resourceclaim"
	"k8s.io/dynamic-resource-allocation/structured"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
)

// The plugin's part in DRA (#42): on nodes whose GPUs a DRA driver
// publishes, a pod asks for GPUs through ResourceClaims (its
// spec.resourceClaims, from templates or by name), and gpusched allocates
// them itself with kube/dra (its GPU choice, checked by upstream's
// allocator), in place of the in-tree DynamicResources plugin, which the
// gpusched profile disables (deploy/scheduler-config.yaml). The two never
// give one device twice: every profile of a scheduler process shares one
// claim tracker (fwk.SharedDRAManager), in which Reserve signals the
// allocations in flight, and whose allocated devices the ledger books
// (SyncDRA) for the claims other profiles allocated.

// finalizerDeleteProtection is the finalizer the scheduler puts on a claim
// it allocates, so that the claim controller deallocates it before it
// goes (the in-tree plugin's, resourceapi.Finalizer).
const finalizerDeleteProtection = "resource.kubernetes.io/delete-protection"

// draPart is the plugin's DRA state; nil when the scheduler has no DRA
// manager. Its fields are set at New; the manager and the allocator are
// safe for concurrent use.
type draPart struct {
	mgr   fwk.SharedDRAManager
	alloc *dra.Allocator
	class string // the DeviceClass of whole GPUs

	// read holds, per node, the fingerprint of the slices the ledger read
	// it from (refreshFromSlices).
	mu   sync.Mutex
	read map[string]string
}

// setupDRA follows ResourceSlices (a DRA node's GPUs) and DeviceTaintRules
// (their health) when the handle has a DRA manager; the devices in use
// are read from its claim tracker at each claim pod's PreFilter.
func (pl *Plugin) setupDRA(features structured.Features) error {
	mgr := pl.h.SharedDRAManager()
	if mgr == nil {
		return nil
	}
	pl.dra = &draPart{mgr: mgr, alloc: dra.New(mgr.DeviceClasses(), features, placement.GPUChooser{}), class: model.DriverGPU, read: map[string]string{}}
	pl.ledger.SetSlices(func(node string) []*resourcev1.ResourceSlice {
		all, err := mgr.ResourceSlices().ListWithDeviceTaintRules()
		if err != nil {
			return nil
		}
		var out []*resourcev1.ResourceSlice
		for _, s := range all {
			if s.Spec.NodeName != nil && *s.Spec.NodeName == node {
				out = append(out, s)
			}
		}
		return out
	})
	inf := pl.h.SharedInformerFactory().Resource().V1()
	// The tracker behind ListWithDeviceTaintRules follows the same
	// informer and may not have seen the slice of this event yet: the
	// event's slice replaces its namesake.
	onSlice := func(o any, deleted bool) {
		if s, ok := unwrapTombstone(o).(*resourcev1.ResourceSlice); ok && s.Spec.NodeName != nil {
			pl.refreshDRANode(*s.Spec.NodeName, s, deleted)
		}
	}
	reg, err := inf.ResourceSlices().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { onSlice(o, false) },
		UpdateFunc: func(_, o any) { onSlice(o, false) },
		DeleteFunc: func(o any) { onSlice(o, true) },
	})
	if err != nil {
		return fmt.Errorf("gpusched: ResourceSlice informer: %w", err)
	}
	pl.synced = append(pl.synced, reg.HasSynced)
	if _, err := inf.ResourceClaims().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{}); err != nil {
		return fmt.Errorf("gpusched: ResourceClaim informer: %w", err)
	}
	onRule := func(any) {
		for _, n := range pl.ledger.draNodes() {
			pl.refreshDRANode(n, nil, false)
		}
	}
	if _, err := inf.DeviceTaintRules().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: onRule, UpdateFunc: func(_, o any) { onRule(o) }, DeleteFunc: onRule,
	}); err != nil {
		return fmt.Errorf("gpusched: DeviceTaintRule informer: %w", err)
	}
	return nil
}

// allocationNode returns the node an allocation is for (a node-local
// driver's allocation selects the node by metadata.name), or "".
func allocationNode(a *resourcev1.AllocationResult) string {
	if a.NodeSelector == nil {
		return ""
	}
	for _, t := range a.NodeSelector.NodeSelectorTerms {
		for _, f := range t.MatchFields {
			if f.Key == "metadata.name" && f.Operator == corev1.NodeSelectorOpIn && len(f.Values) == 1 {
				return f.Values[0]
			}
		}
	}
	return ""
}

// refreshDRANode reads a node again after its slices changed (ev, added,
// changed or deleted, is the slice of the event), then books the devices
// its claims hold.
func (pl *Plugin) refreshDRANode(name string, ev *resourcev1.ResourceSlice, deleted bool) {
	n, err := pl.h.SharedInformerFactory().Core().V1().Nodes().Lister().Get(name)
	if err != nil {
		return // the node's own events will read it
	}
	all, err := pl.dra.mgr.ResourceSlices().ListWithDeviceTaintRules()
	if err != nil {
		return
	}
	var rs []*resourcev1.ResourceSlice
	for _, s := range all {
		if s.Spec.NodeName != nil && *s.Spec.NodeName == name && (ev == nil || s.Name != ev.Name) {
			rs = append(rs, s)
		}
	}
	if ev != nil && !deleted {
		rs = append(rs, ev)
	}
	pl.ledger.OnSlices(n, rs)
	pl.syncDRA(name)
}

// refreshFromSlices reads again the nodes whose slices changed since the
// ledger read them: the slice and node events may come in any order, and
// before the tracker behind ListWithDeviceTaintRules has the slices, so
// the slices a claim pod's cycle sees are the authority.
func (pl *Plugin) refreshFromSlices(rs []*resourcev1.ResourceSlice) {
	byNode := map[string][]*resourcev1.ResourceSlice{}
	fp := map[string]*strings.Builder{}
	for _, s := range rs {
		if s.Spec.Driver != model.DriverGPU || s.Spec.NodeName == nil {
			continue
		}
		n := *s.Spec.NodeName
		byNode[n] = append(byNode[n], s)
		b := fp[n]
		if b == nil {
			b = &strings.Builder{}
			fp[n] = b
		}
		fmt.Fprintf(b, "%s@%s", s.Name, s.ResourceVersion)
		for i := range s.Spec.Devices {
			for _, t := range s.Spec.Devices[i].Taints {
				fmt.Fprintf(b, "|%d:%s=%s:%s", i, t.Key, t.Value, t.Effect)
			}
		}
		b.WriteByte(';')
	}
	nodes := pl.h.SharedInformerFactory().Core().V1().Nodes().Lister()
	for n, list := range byNode {
		f := fp[n].String()
		pl.dra.mu.Lock()
		same := pl.dra.read[n] == f
		pl.dra.mu.Unlock()
		if same {
			continue
		}
		node, err := nodes.Get(n)
		if err != nil {
			continue
		}
		pl.ledger.OnSlices(node, list)
		pl.dra.mu.Lock()
		pl.dra.read[n] = f
		pl.dra.mu.Unlock()
	}
}

// syncDRA books in the ledger the GPUs of a DRA node that claims hold.
func (pl *Plugin) syncDRA(node string) {
	if st, err := gatherAllocated(pl.dra.mgr); err == nil {
		pl.ledger.SyncDRA(node, inState(st))
	}
}

// inState reports the devices in use in st.
func inState(st structured.AllocatedState) func(driver, pool, device string) bool {
	return func(driver, pool, device string) bool {
		return st.AllocatedDevices.Has(structured.MakeDeviceID(driver, pool, device))
	}
}

// draClaims is what PreFilter reads of a pod's claims.
type draClaims struct {
	// toAllocate are the claims gpusched allocates at Reserve; shared are
	// those allocated already (for another pod), which bind the pod to
	// their node.
	toAllocate, shared []*resourcev1.ResourceClaim
	// gpus counts the GPUs toAllocate asks for (of the GPU class, not
	// with admin access); requests counts its requests of the class.
	gpus, requests int
	// state and slices: the devices in use and the slices, read once per
	// cycle for Filter.
	state  structured.AllocatedState
	slices []*resourcev1.ResourceSlice
	// allocated are the claims Reserve allocated and signalled, with
	// their allocation, for PreBind.
	allocated []*resourcev1.ResourceClaim
	// written are the claims PreBind wrote for the pod (true: with the
	// allocation gpusched made), which Unreserve takes back.
	written map[*resourcev1.ResourceClaim]bool
	// made is the claim preBindExt made for the pod's extended resource,
	// which Unreserve deletes; existing, one an earlier cycle made, reused.
	made, existing *resourcev1.ResourceClaim
	// ext, for a pod that asks for GPUs as the extended resource, maps its
	// containers to the requests of its claim in memory (toAllocate[0],
	// ext.go); nil for a pod that asks through claims.
	ext []corev1.ContainerExtendedResourceRequest
}

// readClaims reads a pod's claims from the tracker: nil for a pod without
// any; a status for a claim not made yet (from its template) or bad.
func (pl *Plugin) readClaims(p *corev1.Pod) (*draClaims, *fwk.Status) {
	if len(p.Spec.ResourceClaims) == 0 {
		return nil, nil
	}
	if pl.dra == nil {
		return nil, fwk.NewStatus(fwk.UnschedulableAndUnresolvable, "gpusched: the pod has ResourceClaims but the scheduler has no DRA manager")
	}
	dc := &draClaims{}
	for i := range p.Spec.ResourceClaims {
		pc := &p.Spec.ResourceClaims[i]
		name, mustCheckOwner, err := resourceclaim.Name(p, pc)
		switch {
		case err != nil:
			return nil, fwk.NewStatus(fwk.UnschedulableAndUnresolvable, "gpusched: "+err.Error())
		case name == nil:
			continue // a template that needs no claim
		}
		c, err := pl.dra.mgr.ResourceClaims().Get(p.Namespace, *name)
		if err != nil {
			return nil, fwk.NewStatus(fwk.UnschedulableAndUnresolvable, fmt.Sprintf("gpusched: waiting for ResourceClaim %s/%s: %v", p.Namespace, *name, err))
		}
		if mustCheckOwner {
			if err := resourceclaim.IsForPod(p, c, false); err != nil {
				return nil, fwk.NewStatus(fwk.UnschedulableAndUnresolvable, "gpusched: "+err.Error())
			}
		}
		if c.DeletionTimestamp != nil {
			return nil, fwk.NewStatus(fwk.UnschedulableAndUnresolvable, fmt.Sprintf("gpusched: ResourceClaim %s/%s is being deleted", c.Namespace, c.Name))
		}
		if c.Status.Allocation != nil {
			dc.shared = append(dc.shared, c)
			continue
		}
		if pl.dra.mgr.ResourceClaims().GetPendingAllocation(c.UID) != nil {
			return nil, fwk.NewStatus(fwk.Unschedulable, fmt.Sprintf("gpusched: ResourceClaim %s/%s is being allocated for another pod", c.Namespace, c.Name))
		}
		dc.toAllocate = append(dc.toAllocate, c)
		n, reqs := pl.claimGPUs(c)
		dc.gpus += n
		dc.requests += reqs
	}
	return dc, nil
}

// preFilterClaims reads the pod's claims into d and counts their GPUs in
// req: a pod asks for GPUs either as the extended resource (which DRA
// nodes may serve too, preFilterExt) or through claims, and a pod whose
// claims ask for no GPU is not gpusched's.
func (pl *Plugin) preFilterClaims(p *corev1.Pod, req *model.Request, d *cycleData) *fwk.Status {
	var st *fwk.Status
	if d.claims, st = pl.readClaims(p); st != nil {
		return st
	}
	if d.claims == nil {
		return pl.preFilterExt(p, req, d)
	}
	switch {
	case req.GPUs > 0:
		return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, fmt.Sprintf("gpusched: the pod asks for GPUs both as %s and through ResourceClaims; ask one way", pl.res))
	case d.claims.requests == 0 && len(d.claims.toAllocate) > 0:
		return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, fmt.Sprintf("gpusched: the pod's ResourceClaims ask for no GPUs of DeviceClass %s; claims of other devices alone are the default scheduler's", pl.dra.class))
	}
	req.GPUs = d.claims.gpus
	return pl.prepareFilter(d.claims)
}

// claimGPUs counts the whole GPUs a claim asks for: its exact-count
// requests of the GPU class (the first choice of a prioritized list; a
// request for all the node's GPUs counts as one, the allocator says how
// many there are; a request with admin access takes none), and its
// requests of the class.
func (pl *Plugin) claimGPUs(c *resourcev1.ResourceClaim) (gpus, requests int) {
	n := 0
	for _, r := range c.Spec.Devices.Requests {
		e := r.Exactly
		if e == nil && len(r.FirstAvailable) > 0 {
			s := r.FirstAvailable[0]
			e = &resourcev1.ExactDeviceRequest{DeviceClassName: s.DeviceClassName, AllocationMode: s.AllocationMode, Count: s.Count}
		}
		if e == nil || e.DeviceClassName != pl.dra.class {
			continue
		}
		requests++
		switch {
		case e.AdminAccess != nil && *e.AdminAccess:
		case e.AllocationMode == resourcev1.DeviceAllocationModeAll:
			n++
		default:
			n += int(min(max(e.Count, 0), int64(model.MaxGPUsPerNode)+1))
		}
	}
	return n, requests
}

// prepareFilter reads, once per cycle, the devices in use and the slices
// Filter runs the allocator on.
func (pl *Plugin) prepareFilter(dc *draClaims) *fwk.Status {
	var err error
	if dc.state, err = gatherAllocated(pl.dra.mgr); err != nil {
		return fwk.AsStatus(fmt.Errorf("gpusched: the devices in use: %w", err))
	}
	if dc.slices, err = pl.dra.mgr.ResourceSlices().ListWithDeviceTaintRules(); err != nil {
		return fwk.AsStatus(fmt.Errorf("gpusched: ResourceSlices: %w", err))
	}
	pl.refreshFromSlices(dc.slices)
	// The claim tracker is the record of the devices in use (claims
	// allocated by any profile, or in flight): the ledger books them
	// before Filter and Score count the free GPUs.
	for _, n := range pl.ledger.draNodes() {
		pl.ledger.SyncDRA(n, inState(dc.state))
	}
	return nil
}

// gatherAllocated reads the tracker's devices in use, trying again on a
// concurrent change (as the in-tree plugin does).
func gatherAllocated(mgr fwk.SharedDRAManager) (structured.AllocatedState, error) {
	var err error
	for range 5 {
		var st *structured.AllocatedState
		if st, err = mgr.ResourceClaims().GatherAllocatedState(); err == nil && st != nil {
			return *st, nil
		}
	}
	if err == nil {
		err = errors.New("no state")
	}
	return structured.AllocatedState{}, err
}

// filterDRA says whether a pod's claims fit on node: a DRA node, the
// shared claims' node, upstream's allocator's answer.
func (pl *Plugin) filterDRA(dc *draClaims, n *corev1.Node) *fwk.Status {
	for _, c := range dc.shared {
		if an := allocationNode(c.Status.Allocation); an != "" && an != n.Name {
			return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, fmt.Sprintf("gpusched: ResourceClaim %s is allocated on node %s", c.Name, an))
		}
	}
	if len(dc.toAllocate) == 0 {
		return nil
	}
	nd, ok := pl.ledger.DRANode(n.Name)
	if !ok {
		return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, "gpusched: the node's GPUs are not DRA devices")
	}
	err := pl.dra.alloc.Fit(context.Background(), n, nd, dc.slices, dc.state, dc.toAllocate)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, dra.ErrUnschedulable):
		return fwk.NewStatus(fwk.Unschedulable, "gpusched: "+err.Error())
	}
	return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, "gpusched: "+err.Error())
}

// reserveDRA allocates the pod's claims on node, books their GPUs and
// signals the allocations in flight.
func (pl *Plugin) reserveDRA(ctx context.Context, dc *draClaims, p *corev1.Pod, n *corev1.Node) *fwk.Status {
	if len(dc.toAllocate) == 0 {
		return nil
	}
	nd, ok := pl.ledger.DRANode(n.Name)
	if !ok {
		return fwk.NewStatus(fwk.Unschedulable, "gpusched: the node's GPUs are not DRA devices")
	}
	st, err := gatherAllocated(pl.dra.mgr)
	if err != nil {
		return fwk.AsStatus(err)
	}
	rs, err := pl.dra.mgr.ResourceSlices().ListWithDeviceTaintRules()
	if err != nil {
		return fwk.AsStatus(err)
	}
	res, err := pl.dra.alloc.Allocate(ctx, n, nd, rs, st, dc.toAllocate)
	if err != nil {
		return fwk.NewStatus(fwk.Unschedulable, "gpusched: "+err.Error())
	}
	// The ledger books the node's devices in use as this state has them
	// (the tracker may have moved since PreFilter).
	pl.ledger.SyncDRA(n.Name, inState(st))
	if err := pl.ledger.ReserveDevices(p, n.Name, res.GPUs); err != nil {
		ledgerConflicts.WithLabelValues("ReserveRace").Inc()
		return fwk.NewStatus(fwk.Unschedulable, err.Error())
	}
	for i, c := range dc.toAllocate {
		a := c.DeepCopy()
		a.Status.Allocation = &res.Allocations[i]
		if err := pl.dra.mgr.ResourceClaims().SignalClaimPendingAllocation(a.UID, a); err != nil {
			pl.unreserveDRA(dc, p)
			pl.ledger.Release(p.UID)
			return fwk.NewStatus(fwk.Unschedulable, fmt.Sprintf("gpusched: ResourceClaim %s: %v", c.Name, err))
		}
		dc.allocated = append(dc.allocated, a)
	}
	if !res.Chosen {
		draFirstFit.Inc()
	}
	return nil
}

// unreserveDRA withdraws the allocations in flight.
func (pl *Plugin) unreserveDRA(dc *draClaims, p *corev1.Pod) {
	for _, c := range dc.allocated {
		pl.dra.mgr.ResourceClaims().MaybeRemoveClaimPendingAllocation(c.UID, false)
		if c.Name != extClaimName {
			pl.dra.mgr.ResourceClaims().AssumedClaimRestore(c.Namespace, c.Name)
		}
	}
	dc.allocated = nil
	for c, ours := range dc.written {
		pl.unwriteClaim(p, c, ours)
	}
	dc.written = nil
	if dc.made != nil {
		pl.deleteClaim(dc.made)
		dc.made = nil
	}
}

// unwriteClaim takes back what PreBind wrote in a claim for a pod that is
// not bound after all (a later PreBind or the Bind failed): the pod's
// reservation, and the allocation gpusched made once no pod holds the
// claim, so that its devices are free again.
func (pl *Plugin) unwriteClaim(p *corev1.Pod, c *resourcev1.ResourceClaim, ours bool) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	claims := pl.h.ClientSet().ResourceV1().ResourceClaims(c.Namespace)
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := claims.Get(ctx, c.Name, metav1.GetOptions{})
		if err != nil || cur.UID != c.UID {
			return err
		}
		cur.Status.ReservedFor = slices.DeleteFunc(cur.Status.ReservedFor, func(r resourcev1.ResourceClaimConsumerReference) bool { return r.UID == p.UID })
		if ours && len(cur.Status.ReservedFor) == 0 {
			cur.Status.Allocation = nil
		}
		_, err = claims.UpdateStatus(ctx, cur, metav1.UpdateOptions{})
		return err
	})
	if err != nil && !apierrors.IsNotFound(err) {
		pl.logger.Info("could not take back a claim's reservation", "claim", klog.KObj(c), "pod", klog.KObj(p), "err", err)
	}
}

// preBindDRA writes the allocations and reserves every claim for the pod
// (status.reservedFor, which the kubelet needs), as the in-tree plugin's
// PreBind does: the finalizer first, then the status.
func (pl *Plugin) preBindDRA(ctx context.Context, dc *draClaims, p *corev1.Pod) error {
	if dc.ext != nil {
		switch {
		case dc.existing != nil:
			return pl.preBindExisting(ctx, dc, p)
		case len(dc.allocated) == 0:
			return nil // on a device-plugin node
		}
		return pl.preBindExt(ctx, dc, p)
	}
	for _, a := range dc.allocated {
		if err := pl.writeClaim(ctx, dc, p, a, a.Status.Allocation); err != nil {
			return err
		}
	}
	for _, c := range dc.shared {
		if err := pl.writeClaim(ctx, dc, p, c, nil); err != nil {
			return err
		}
	}
	return nil
}

// writeClaim reserves claim c for the pod, with allocation alloc when it
// is gpusched's to write (nil: allocated already).
func (pl *Plugin) writeClaim(ctx context.Context, dc *draClaims, p *corev1.Pod, c *resourcev1.ResourceClaim, alloc *resourcev1.AllocationResult) error {
	claims := pl.h.ClientSet().ResourceV1().ResourceClaims(c.Namespace)
	ref := resourcev1.ResourceClaimConsumerReference{Resource: "pods", Name: p.Name, UID: p.UID}
	var written *resourcev1.ResourceClaim
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := claims.Get(ctx, c.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if cur.UID != c.UID {
			return fmt.Errorf("ResourceClaim %s/%s was replaced", c.Namespace, c.Name)
		}
		if alloc != nil {
			if cur.Status.Allocation != nil {
				return fmt.Errorf("ResourceClaim %s/%s was allocated by another scheduler meanwhile", c.Namespace, c.Name)
			}
			if !slices.Contains(cur.Finalizers, finalizerDeleteProtection) {
				cur.Finalizers = append(cur.Finalizers, finalizerDeleteProtection)
				if cur, err = claims.Update(ctx, cur, metav1.UpdateOptions{}); err != nil {
					return err
				}
			}
			cur.Status.Allocation = alloc
		}
		if !slices.ContainsFunc(cur.Status.ReservedFor, func(r resourcev1.ResourceClaimConsumerReference) bool { return r.UID == p.UID }) {
			cur.Status.ReservedFor = append(cur.Status.ReservedFor, ref)
		}
		written, err = claims.UpdateStatus(ctx, cur, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		if apierrors.IsNotFound(err) {
			return fmt.Errorf("gpusched: ResourceClaim %s/%s is gone", c.Namespace, c.Name)
		}
		return fmt.Errorf("gpusched: write ResourceClaim %s/%s: %w", c.Namespace, c.Name, err)
	}
	if dc.written == nil {
		dc.written = map[*resourcev1.ResourceClaim]bool{}
	}
	dc.written[c] = alloc != nil
	if alloc != nil {
		if err := pl.dra.mgr.ResourceClaims().AssumeClaimAfterAPICall(written); err != nil {
			pl.logger.V(4).Info("claim not assumed", "claim", klog.KObj(c), "err", err)
		}
		pl.dra.mgr.ResourceClaims().MaybeRemoveClaimPendingAllocation(c.UID, true)
	}
	return nil
}

// draNodes lists the DRA nodes the ledger holds.
func (l *Ledger) draNodes() []string {
	l.mu.RLock()
	defer l.mu.RUnlock()
	var out []string
	for n, e := range l.nodes {
		if e.node.DRA != nil {
			out = append(out, n)
		}
	}
	return out
}
