// Package dra allocates the GPUs of DRA ResourceClaims with gpusched's
// device choice: on a node whose GPUs a DRA driver publishes
// (model.ParseDRANode), a pod's claims get the set of free, healthy GPUs
// that placement.GPUChooser picks (an NVLink-connected set where there is
// one), where the in-tree allocator would take the first that fit.
//
// The choice is checked by Kubernetes' own structured allocator
// (k8s.io/dynamic-resource-allocation/structured, the code the in-tree
// DynamicResources plugin runs), so a claim's semantics are upstream's:
// its DeviceClass and request selectors (CEL), its matchAttribute and
// distinctAttribute constraints, prioritized lists, admin access, other
// drivers' devices. The allocator is run with every GPU of the node
// outside the choice marked in use: the result is the choice when the
// claims accept it, and where they do not (a selector naming one device,
// a constraint the choice breaks), the first fit of upstream's search
// stands, and Result.Chosen says so. Tainted GPUs (NoSchedule or
// NoExecute, model.Node.Unhealthy) are never given, whatever a claim
// tolerates: a tenant's toleration is not a lever over the cluster's
// broken GPUs.
//
// The result is what the driver reads: a resourcev1.AllocationResult per
// claim, to be written in the claim's status.allocation (with
// status.reservedFor naming the pod) by the caller, which also keeps the
// claims it allocated in the scheduler's claim tracker until then, so
// that no other profile allocates the same devices.
package dra

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/gpusched/gpusched/kube/model"
	"github.com/gpusched/gpusched/placement"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/dynamic-resource-allocation/cel"
	"k8s.io/dynamic-resource-allocation/structured"
)

// Errors of this package; test them with errors.Is.
var (
	// ErrUnschedulable: the claims do not fit on the node (too few free
	// devices that match, or a pool published only in part).
	ErrUnschedulable = errors.New("claims do not fit on the node")
	// ErrInvalid: the input cannot be allocated anywhere (a claim's CEL
	// expression that does not compile, an unknown DeviceClass, too many
	// claims); the message names what.
	ErrInvalid = errors.New("claims cannot be allocated")
)

// MaxClaims bounds the claims of one pod that Allocate takes (the API
// allows a pod 128 resourceClaims).
const MaxClaims = 128

// celCacheSize is the number of compiled CEL expressions kept, as the
// in-tree plugin keeps.
const celCacheSize = 10

// Allocator allocates the GPUs of claims with gpusched's choice. Allocate
// may be called concurrently: the Allocator is not changed after New, and
// its CEL cache is safe for concurrent use.
type Allocator struct {
	chooser  placement.GPUChooser
	features structured.Features
	classes  structured.DeviceClassLister
	cel      *cel.Cache
}

// New returns an Allocator that reads DeviceClasses from classes, runs
// Kubernetes' structured allocator with features (those of the cluster's
// feature gates: the in-tree plugin's dynamicresources.AllocatorFeatures)
// and chooses GPU sets with chooser.
func New(classes structured.DeviceClassLister, features structured.Features, chooser placement.GPUChooser) *Allocator {
	return &Allocator{chooser: chooser, features: features, classes: classes,
		cel: cel.NewCache(celCacheSize, cel.Features{EnableConsumableCapacity: features.ConsumableCapacity, EnableListTypeAttributes: features.ListTypeAttributes})}
}

// Result is the allocation of one pod's claims on one node. It is a value
// the caller owns: safe for concurrent reads.
type Result struct {
	// Allocations holds one allocation per claim, in the order of the
	// claims given.
	Allocations []resourcev1.AllocationResult
	// GPUs are the positions (in the node's Server.GPUs) of the GPUs the
	// allocations give, ascending; devices given with admin access (which
	// others may hold) are not among them.
	GPUs []int
	// Chosen reports that the GPUs are gpusched's choice; false when the
	// claims ruled it out and the first fit stands.
	Chosen bool
}

// Fit reports whether claims fit on node nd (its ResourceSlices in rs,
// the devices in use in state) as upstream's allocator finds them: nil, an
// error wrapping ErrUnschedulable, or one wrapping ErrInvalid. It is the
// first half of Allocate, for a scheduler's Filter.
func (a *Allocator) Fit(ctx context.Context, node *corev1.Node, nd model.Node, rs []*resourcev1.ResourceSlice, state structured.AllocatedState, claims []*resourcev1.ResourceClaim) error {
	_, err := a.firstFit(ctx, node, nd, rs, state, claims)
	return err
}

// Allocate allocates claims on node nd: the GPUs gpusched chooses among
// the free healthy ones when the claims accept them, else the first fit.
// state holds the devices in use (the scheduler's claim tracker,
// GatherAllocatedState); it is not changed. Claims already allocated are
// not to be given.
func (a *Allocator) Allocate(ctx context.Context, node *corev1.Node, nd model.Node, rs []*resourcev1.ResourceSlice, state structured.AllocatedState, claims []*resourcev1.ResourceClaim) (Result, error) {
	first, err := a.firstFit(ctx, node, nd, rs, state, claims)
	if err != nil {
		return Result{}, err
	}
	res := Result{Allocations: first, GPUs: gpusOf(nd, first), Chosen: true}
	k := len(res.GPUs)
	if k == 0 {
		return res, nil
	}
	free := make([]bool, len(nd.DRA.Devices))
	for i, d := range nd.DRA.Devices {
		free[i] = !state.AllocatedDevices.Has(structured.MakeDeviceID(nd.DRA.Driver, d.Pool, d.Name))
	}
	for _, u := range nd.Unhealthy {
		free[u] = false
	}
	choice, err := a.chooser.Choose(&nd.Server, free, k)
	if err != nil || slices.Equal(choice, res.GPUs) {
		return res, nil //nolint:nilerr // no better choice than the first fit
	}
	hidden := withAllBut(state, nd, choice)
	hideUnread(hidden, nd, rs)
	alloc, err := a.allocator(ctx, hidden, rs)
	if err != nil {
		return res, nil //nolint:nilerr // the first fit stands
	}
	got, err := alloc.Allocate(ctx, node, claims)
	if err != nil || len(got) != len(claims) || !slices.Equal(gpusOf(nd, got), choice) {
		res.Chosen = false
		return res, nil //nolint:nilerr // the claims rule the choice out: the first fit stands
	}
	return Result{Allocations: got, GPUs: choice, Chosen: true}, nil
}

// firstFit runs upstream's allocator with the node's tainted GPUs in use.
func (a *Allocator) firstFit(ctx context.Context, node *corev1.Node, nd model.Node, rs []*resourcev1.ResourceSlice, state structured.AllocatedState, claims []*resourcev1.ResourceClaim) ([]resourcev1.AllocationResult, error) {
	if nd.DRA == nil {
		return nil, fmt.Errorf("%w: node %s: its GPUs are not DRA devices", ErrInvalid, nd.Server.ID)
	}
	if len(claims) > MaxClaims {
		return nil, fmt.Errorf("%w: %d claims, more than %d", ErrInvalid, len(claims), MaxClaims)
	}
	st := withDevices(state, nd, nd.Unhealthy)
	hideUnread(st, nd, rs)
	alloc, err := a.allocator(ctx, st, rs)
	if err != nil {
		return nil, err
	}
	got, err := alloc.Allocate(ctx, node, claims)
	switch {
	case errors.Is(err, structured.ErrFailedAllocationOnNode):
		return nil, fmt.Errorf("%w: node %s: %w", ErrUnschedulable, nd.Server.ID, err)
	case err != nil:
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	case got == nil:
		return nil, fmt.Errorf("%w: node %s has too few free devices that match", ErrUnschedulable, nd.Server.ID)
	case len(got) != len(claims):
		return nil, fmt.Errorf("%w: %d allocations for %d claims", ErrInvalid, len(got), len(claims))
	}
	return got, nil
}

func (a *Allocator) allocator(ctx context.Context, st structured.AllocatedState, rs []*resourcev1.ResourceSlice) (structured.Allocator, error) {
	alloc, err := structured.NewAllocator(ctx, a.features, st, a.classes, rs, a.cel)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	return alloc, nil
}

// withDevices returns state with the node's GPUs at positions pos in use
// too; state is not changed.
func withDevices(state structured.AllocatedState, nd model.Node, pos []int) structured.AllocatedState {
	st := state
	st.AllocatedDevices = sets.New[structured.DeviceID]()
	if state.AllocatedDevices != nil {
		st.AllocatedDevices = state.AllocatedDevices.Clone()
	}
	for _, p := range pos {
		d := nd.DRA.Devices[p]
		st.AllocatedDevices.Insert(structured.MakeDeviceID(nd.DRA.Driver, d.Pool, d.Name))
	}
	return st
}

// hideUnread marks in use, in st, the devices of the node's GPU driver
// that the node's model left out (a device of the wrong shape, a
// duplicate, slices beyond the bound): gpusched never gives what it does
// not book.
func hideUnread(st structured.AllocatedState, nd model.Node, rs []*resourcev1.ResourceSlice) {
	read := make(map[[2]string]bool, len(nd.DRA.Devices))
	for _, d := range nd.DRA.Devices {
		read[[2]string{d.Pool, d.Name}] = true
	}
	for _, s := range rs {
		if s == nil || s.Spec.Driver != nd.DRA.Driver || s.Spec.NodeName == nil || *s.Spec.NodeName != nd.Server.ID {
			continue
		}
		for i := range s.Spec.Devices {
			d := &s.Spec.Devices[i]
			if !read[[2]string{s.Spec.Pool.Name, d.Name}] && !isMIG(d, nd) {
				st.AllocatedDevices.Insert(structured.MakeDeviceID(nd.DRA.Driver, s.Spec.Pool.Name, d.Name))
			}
		}
	}
}

// isMIG reports whether a device is one of the node's MIG devices (read,
// and left to claims of their class).
func isMIG(d *resourcev1.Device, nd model.Node) bool {
	for _, m := range nd.DRA.MIG {
		if m.Name == d.Name {
			return true
		}
	}
	return false
}

// withAllBut returns state with every GPU of the node but those at
// positions keep in use.
func withAllBut(state structured.AllocatedState, nd model.Node, keep []int) structured.AllocatedState {
	var pos []int
	for i := range nd.DRA.Devices {
		if !slices.Contains(keep, i) {
			pos = append(pos, i)
		}
	}
	return withDevices(state, nd, pos)
}

// gpusOf returns the positions of the node's GPUs that allocations give,
// ascending.
func gpusOf(nd model.Node, allocs []resourcev1.AllocationResult) []int {
	var out []int
	for _, a := range allocs {
		for _, r := range a.Devices.Results {
			// Admin access (monitoring, in namespaces the admin labels)
			// takes no device from anyone.
			if r.Driver != nd.DRA.Driver || (r.AdminAccess != nil && *r.AdminAccess) {
				continue
			}
			for i, d := range nd.DRA.Devices {
				if d.Pool == r.Pool && d.Name == r.Device && !slices.Contains(out, i) {
					out = append(out, i)
				}
			}
		}
	}
	slices.Sort(out)
	return out
}
