package kueue

import (
	"cmp"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/gpusched/gpusched/flavor"
	"github.com/gpusched/gpusched/kube/admission"
	"github.com/gpusched/gpusched/kube/model"
	"github.com/gpusched/gpusched/topology"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/cache"
)

// deepCopy copies a value through JSON (the stores' objects are small and
// copied rarely: only tests and tombstones ask).
func deepCopy[T any](v *T) *T {
	b, err := json.Marshal(v)
	out := new(T)
	if err == nil {
		_ = json.Unmarshal(b, out)
	}
	return out
}

// decoded is what the informers store for an object that did not decode
// into its struct: its metadata and the error (events say it).
type decoded interface{ setReadErr(error) }

// transform decodes an unstructured object into T as it arrives, so that
// the stores hold only what the controller reads and a round decodes
// nothing. An object that does not decode keeps its metadata and the
// error. Tombstones pass through.
func transform[T any, P interface {
	*T
	runtime.Object
	decoded
}](obj any) (any, error) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return obj, nil
	}
	p := P(new(T))
	b, err := json.Marshal(u.Object)
	if err == nil {
		err = json.Unmarshal(b, p)
	}
	if err != nil {
		p = P(new(T))
		meta, _ := json.Marshal(map[string]any{"apiVersion": u.GetAPIVersion(), "kind": u.GetKind(), "metadata": u.Object["metadata"]})
		_ = json.Unmarshal(meta, p)
		p.setReadErr(err)
	}
	return p, nil
}

var _ cache.TransformFunc = transform[Workload]

// flavorInfo is a ResourceFlavor as steering sees it.
type flavorInfo struct {
	typ   topology.GPUType
	value string // the flavor's value of the type label ("" without one)
}

// snapshot is what a round decides over: the GPU types of the flavors,
// the ClusterQueues as the flavor model's queues, the LocalQueues.
type snapshot struct {
	types   []topology.GPUType
	typeIdx map[topology.GPUType]int
	flavors map[string]flavorInfo
	queues  *flavor.Quotas
	// byName maps a ClusterQueue to its index in queues.
	byName map[string]int
	// flavorNames of each queue, in order (flavor.Flavor.Name too).
	lq map[string]string // "ns/name" -> ClusterQueue
	// values maps a type label value to the types of the flavors that
	// carry it.
	values map[string][]int
}

// flavorType reads a ResourceFlavor's GPU type: the product its node
// labels name (the type label), else its label LabelGPUType.
func flavorType(rf *ResourceFlavor, typeLabel string) (flavorInfo, bool) {
	if v, ok := rf.Spec.NodeLabels[typeLabel]; ok && v != "" {
		p, err := topology.ParseProduct(v)
		if err == nil {
			return flavorInfo{typ: p.Type, value: v}, true
		}
	}
	if v, ok := rf.Labels[LabelGPUType]; ok && v != "" {
		p, err := topology.ParseProduct(v)
		if err == nil {
			return flavorInfo{typ: p.Type, value: rf.Spec.NodeLabels[typeLabel]}, true
		}
	}
	return flavorInfo{}, false
}

// quantity reads a quota in whole GPUs, within flavor.MaxQuota.
func quantity(q *resource.Quantity) int {
	if q == nil {
		return flavor.NoLimit
	}
	v := q.Value()
	return int(min(max(v, 0), flavor.MaxQuota))
}

// buildSnapshot reads the flavors, ClusterQueues and LocalQueues from the
// stores. ClusterQueues without a GPU resource group, and stopped ones,
// are left out; so are flavors without a GPU type (their workloads are
// Kueue's alone).
func (c *Controller) buildSnapshot() (*snapshot, error) {
	s := &snapshot{flavors: map[string]flavorInfo{}, typeIdx: map[topology.GPUType]int{}, byName: map[string]int{}, lq: map[string]string{}, values: map[string][]int{}}
	for _, o := range c.rf.GetStore().List() {
		rf, ok := o.(*ResourceFlavor)
		if !ok || rf.decodeErr != nil {
			continue
		}
		if fi, ok := flavorType(rf, c.cfg.TypeLabel); ok {
			s.flavors[rf.Name] = fi
		}
	}
	cqs := make([]*ClusterQueue, 0)
	for _, o := range c.cq.GetStore().List() {
		if cq, ok := o.(*ClusterQueue); ok && cq.decodeErr == nil {
			cqs = append(cqs, cq)
		}
	}
	slices.SortFunc(cqs, func(a, b *ClusterQueue) int { return cmp.Compare(a.Name, b.Name) })
	type groupFlavor struct {
		name  string
		quota ResourceQuota
	}
	groups := make([][]groupFlavor, len(cqs))
	for i, cq := range cqs {
		if cq.Spec.StopPolicy != nil && *cq.Spec.StopPolicy != "" && *cq.Spec.StopPolicy != "None" {
			continue
		}
		for _, rg := range cq.Spec.ResourceGroups {
			if !slices.Contains(rg.CoveredResources, c.cfg.Resource) {
				continue
			}
			for _, fq := range rg.Flavors {
				fi, ok := s.flavors[fq.Name]
				if !ok {
					continue
				}
				for _, r := range fq.Resources {
					if r.Name == c.cfg.Resource {
						groups[i] = append(groups[i], groupFlavor{fq.Name, r})
						if _, seen := s.typeIdx[fi.typ]; !seen {
							s.typeIdx[fi.typ] = -1
						}
					}
				}
			}
		}
	}
	for t := range s.typeIdx {
		s.types = append(s.types, t)
	}
	slices.Sort(s.types)
	for k, t := range s.types {
		s.typeIdx[t] = k
	}
	for name, fi := range s.flavors {
		if k, ok := s.typeIdx[fi.typ]; ok && fi.value != "" && !slices.Contains(s.values[fi.value], k) {
			s.values[fi.value] = append(s.values[fi.value], k)
		}
		_ = name
	}
	var queues []flavor.Queue
	for i, cq := range cqs {
		if len(groups[i]) == 0 {
			continue
		}
		q := flavor.Queue{Name: cq.Name, Cohort: cq.Spec.CohortName, Strict: cq.Spec.QueueingStrategy == StrictFIFO}
		if cq.Spec.FairSharing != nil && cq.Spec.FairSharing.Weight != nil {
			q.Weight = min(max(cq.Spec.FairSharing.Weight.AsApproximateFloat64(), 0), 1e9)
			if q.Weight == 0 {
				q.Weight = 1e-9 // Kueue: a weight of 0 borrows last
			}
		}
		if cq.Spec.FlavorFungibility != nil && cq.Spec.FlavorFungibility.WhenCanBorrow == TryNextFlavor {
			q.WhenCanBorrow = flavor.TryNextFlavor
		}
		for _, g := range groups[i] {
			q.Flavors = append(q.Flavors, flavor.Flavor{Name: g.name, Type: s.typeIdx[s.flavors[g.name].typ],
				Nominal: max(quantity(&g.quota.NominalQuota), 0), BorrowingLimit: quantity(g.quota.BorrowingLimit), LendingLimit: quantity(g.quota.LendingLimit)})
		}
		s.byName[cq.Name] = len(queues)
		queues = append(queues, q)
	}
	var err error
	if s.queues, err = flavor.NewQuotas(queues, len(s.types)); err != nil {
		return nil, err
	}
	for _, o := range c.lq.GetStore().List() {
		if lq, ok := o.(*LocalQueue); ok && lq.decodeErr == nil {
			s.lq[lq.Namespace+"/"+lq.Name] = lq.Spec.ClusterQueue
		}
	}
	return s, nil
}

// read is a Workload as a round sees it.
type read struct {
	w   *Workload
	key string
	// queue is its ClusterQueue's index (-1: none of gpusched's).
	queue int
	gpus  int
	// podSets lists the pod sets that ask for GPUs.
	podSets []int
	rates   []float64
	// pinned: the tenant's own node selector names a type; the
	// controller does not change it.
	pinned bool
	// gated: it carries the controller's admission gate.
	gated bool
	notes []string
	err   error
}

// readWorkload reads a pending Workload: its ClusterQueue, GPUs, the types
// it may run on and its trusted rates. ok is false for a Workload that is
// none of gpusched's business (asks for no GPUs, or its queue is not a GPU
// queue); err says why one cannot be read.
func (c *Controller) readWorkload(s *snapshot, w *Workload) (r read, ok bool) {
	r = read{w: w, key: w.Namespace + "/" + w.Name, queue: -1}
	r.gated = hasGate(w.Annotations[AnnotationAdmissionGatedBy], c.cfg.Gate)
	fail := func(format string, args ...any) (read, bool) {
		r.err = fmt.Errorf(format, args...)
		return r, true
	}
	if w.decodeErr != nil {
		return fail("the Workload does not decode: %v", w.decodeErr)
	}
	cq, found := s.lq[w.Namespace+"/"+w.Spec.QueueName]
	qi, isGPU := s.byName[cq]
	if !found || !isGPU {
		return r, false
	}
	r.queue = qi
	if len(w.Spec.PodSets) > maxPodSets {
		return fail("%d pod sets (at most %d)", len(w.Spec.PodSets), maxPodSets)
	}
	ann := map[string]string{}
	var tenantValue string
	for i := range w.Spec.PodSets {
		ps := &w.Spec.PodSets[i]
		per, err := model.PodGPUs(&corev1.Pod{Spec: ps.Template.Spec}, c.cfg.Resource)
		if err != nil {
			return fail("pod set %s: %v", ps.Name, err)
		}
		if per == 0 {
			continue
		}
		if ps.Count < 0 || ps.Count > model.MaxGroupMembers {
			return fail("pod set %s: %d pods (at most %d)", ps.Name, ps.Count, model.MaxGroupMembers)
		}
		r.gpus += per * int(ps.Count)
		r.podSets = append(r.podSets, i)
		for k, v := range ps.Template.Annotations {
			if _, dup := ann[k]; !dup {
				ann[k] = v
			}
		}
		if a := ps.Template.Spec.Affinity; a != nil && a.NodeAffinity != nil && a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution != nil {
			for _, t := range a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
				for _, e := range t.MatchExpressions {
					if e.Key == c.cfg.TypeLabel {
						return fail("pod set %s chooses GPUs by a required node affinity on %s: gpusched steers by node selector only", ps.Name, c.cfg.TypeLabel)
					}
				}
			}
		}
		if v, ok := ps.Template.Spec.NodeSelector[c.cfg.TypeLabel]; ok && v != w.Annotations[AnnotationSteered] {
			if tenantValue != "" && tenantValue != v {
				return fail("pod sets ask for %s=%s and %s", c.cfg.TypeLabel, tenantValue, v)
			}
			tenantValue = v
		}
	}
	if r.gpus == 0 {
		return r, false
	}
	if r.gpus > flavor.MaxQuota {
		return fail("%d GPUs (at most %d)", r.gpus, flavor.MaxQuota)
	}
	allowed := slices.Clone(s.types)
	if v, ok := ann[model.AnnotationGPUTypes]; ok {
		ts, err := model.ParseTypes(v)
		if err != nil {
			return fail("%v", err)
		}
		allowed = slices.DeleteFunc(allowed, func(t topology.GPUType) bool { return !slices.Contains(ts, t) })
	}
	if tenantValue != "" {
		r.pinned = true
		allowed = slices.DeleteFunc(allowed, func(t topology.GPUType) bool { return !slices.Contains(s.values[tenantValue], s.typeIdx[t]) })
	}
	claimed, notes, err := admission.ClaimedRates(ann, r.gpus, c.cfg.model(), allowed)
	if err != nil {
		return fail("%v", err)
	}
	rules := c.cfg.Rates
	trusted, clamped := rules.Trusted(claimed, allowed)
	if clamped {
		notes = append(notes, fmt.Sprintf("rates more than %gx apart raised to 1/%g of the fastest type's (the admin's maxRatio)", rules.Ratio(), rules.Ratio()))
	}
	r.notes = notes
	r.rates = make([]float64, len(s.types))
	for t, v := range trusted {
		r.rates[s.typeIdx[t]] = v
	}
	return r, true
}

// maxPodSets bounds a Workload's pod sets (Kueue allows 8).
const maxPodSets = 64

// hasGate reports whether the comma-separated gate list holds gate.
func hasGate(list, gate string) bool {
	for g := range strings.SplitSeq(list, ",") {
		if strings.TrimSpace(g) == gate {
			return true
		}
	}
	return false
}

// withoutGate is the gate list without gate ("" when none is left).
func withoutGate(list, gate string) string {
	var keep []string
	for g := range strings.SplitSeq(list, ",") {
		if g = strings.TrimSpace(g); g != "" && g != gate {
			keep = append(keep, g)
		}
	}
	return strings.Join(keep, ",")
}

// usage returns, for an admitted Workload, the GPUs of each flavor it
// holds (Kueue's status.admission), in flavor order.
func usage(w *Workload, res corev1.ResourceName) map[string]int {
	out := map[string]int{}
	if w.Status.Admission == nil {
		return out
	}
	for _, psa := range w.Status.Admission.PodSetAssignments {
		f, ok := psa.Flavors[res]
		if !ok {
			continue
		}
		q, ok := psa.ResourceUsage[res]
		if !ok {
			continue
		}
		out[f] += int(min(max(q.Value(), 0), flavor.MaxQuota))
	}
	return out
}

// sortedFlavors lists a usage map's flavors in name order.
func sortedFlavors(u map[string]int) []string { return slices.Sorted(maps.Keys(u)) }
