package kueue

import (
	"cmp"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/gpusched/gpusched/flavor"
	"github.com/gpusched/gpusched/kube/model"
	"github.com/gpusched/gpusched/topology"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
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
	// resources, by queue index and flavor index, is the GPU resource
	// (of Config.Resources) whose quota the flavor holds.
	resources [][]corev1.ResourceName
	lq        map[string]string // "ns/name" -> ClusterQueue
	// values maps a type label value to the types of the flavors that
	// carry it.
	values map[string][]int
	// stopped maps every ClusterQueue that exists (gpusched's or not) to
	// whether its stopPolicy holds its workloads.
	stopped map[string]bool
	// selectors maps every ClusterQueue that exists to its
	// namespaceSelector; namespace gives a namespace's labels (false: no
	// such namespace); matches caches their verdicts by ClusterQueue and
	// namespace.
	selectors map[string]labels.Selector
	namespace func(name string) (labels.Set, bool)
	matches   map[[2]string]bool
}

// selectorOf is a ClusterQueue's spec.namespaceSelector as Kueue
// v0.17 reads it (pkg/cache/scheduler/clusterqueue.go and
// pkg/cache/queue/cluster_queue.go: metav1.LabelSelectorAsSelector): nil
// selects no namespace, an empty selector every one. A selector that does
// not parse (Kueue's webhook refuses it; Kueue's cache would not take the
// ClusterQueue) selects none.
func selectorOf(cq *ClusterQueue) labels.Selector {
	sel, err := metav1.LabelSelectorAsSelector(cq.Spec.NamespaceSelector)
	if err != nil {
		return labels.Nothing()
	}
	return sel
}

// excludes reports whether ClusterQueue cq exists and its
// namespaceSelector does not select namespace ns, or ns does not exist:
// Kueue admits none of that namespace's workloads there ("Workload
// namespace doesn't match ClusterQueue selector", pkg/scheduler/
// scheduler.go), so they are no demand of that queue.
func (s *snapshot) excludes(cq, ns string) bool {
	sel, ok := s.selectors[cq]
	if !ok {
		return false
	}
	key := [2]string{cq, ns}
	if m, ok := s.matches[key]; ok {
		return !m
	}
	set, found := s.namespace(ns)
	m := found && sel.Matches(set)
	if s.matches == nil {
		s.matches = map[[2]string]bool{}
	}
	s.matches[key] = m
	return !m
}

// flavorType reads a ResourceFlavor's GPU type: its label LabelGPUType
// where the admin set one, else the product its node labels name under
// the type label (a product topology does not know is a custom type). A
// flavor without the type label among its node labels has no type: the
// controller pins a flavor by a node selector on that label, so it could
// not steer to it (its workloads are Kueue's alone).
func flavorType(rf *ResourceFlavor, typeLabel string) (flavorInfo, bool) {
	v := rf.Spec.NodeLabels[typeLabel]
	if v == "" {
		return flavorInfo{}, false
	}
	if t := rf.Labels[LabelGPUType]; t != "" {
		if p, err := topology.ParseProduct(t); err == nil {
			return flavorInfo{typ: p.Type, value: v}, true
		}
	}
	if p, err := topology.ParseProduct(v); err == nil {
		return flavorInfo{typ: p.Type, value: v}, true
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

// groupFlavor is a GPU flavor of a ClusterQueue: its name, the GPU
// resource it holds quota of, and that quota.
type groupFlavor struct {
	name  string
	res   corev1.ResourceName
	quota ResourceQuota
}

// buildSnapshot reads the flavors, ClusterQueues and LocalQueues from the
// stores. ClusterQueues without a GPU resource group, and stopped ones,
// are left out; so are flavors without a GPU type (their workloads are
// Kueue's alone).
func (c *Controller) buildSnapshot() (*snapshot, error) {
	s := &snapshot{flavors: map[string]flavorInfo{}, typeIdx: map[topology.GPUType]int{}, byName: map[string]int{}, lq: map[string]string{},
		values: map[string][]int{}, stopped: map[string]bool{}, selectors: map[string]labels.Selector{}, namespace: c.namespaceLabels}
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
			s.stopped[cq.Name] = stopped(cq)
			s.selectors[cq.Name] = selectorOf(cq)
		}
	}
	slices.SortFunc(cqs, func(a, b *ClusterQueue) int { return cmp.Compare(a.Name, b.Name) })
	groups := make([][]groupFlavor, len(cqs))
	for i, cq := range cqs {
		groups[i] = c.gpuFlavors(s, cq)
	}
	s.indexTypes()
	var queues []flavor.Queue
	for i, cq := range cqs {
		if len(groups[i]) == 0 {
			continue
		}
		q := queueOf(cq)
		var res []corev1.ResourceName
		for _, g := range groups[i] {
			q.Flavors = append(q.Flavors, flavor.Flavor{Name: g.name, Type: s.typeIdx[s.flavors[g.name].typ],
				Nominal: max(quantity(&g.quota.NominalQuota), 0), BorrowingLimit: quantity(g.quota.BorrowingLimit), LendingLimit: quantity(g.quota.LendingLimit)})
			res = append(res, g.res)
		}
		s.byName[cq.Name] = len(queues)
		queues = append(queues, q)
		s.resources = append(s.resources, res)
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

// gpuFlavors lists a ClusterQueue's GPU flavors (typed flavors with a
// quota of one of Config.Resources, the first listed where a flavor has
// several; each flavor once), in its resource groups' order, and notes
// their types in s.typeIdx (indexTypes numbers them). A stopped
// ClusterQueue has none.
func (c *Controller) gpuFlavors(s *snapshot, cq *ClusterQueue) []groupFlavor {
	if stopped(cq) {
		return nil
	}
	var out []groupFlavor
	seen := map[string]bool{}
	for _, rg := range cq.Spec.ResourceGroups {
		for _, fq := range rg.Flavors {
			fi, ok := s.flavors[fq.Name]
			if !ok || seen[fq.Name] {
				continue
			}
			for _, res := range c.cfg.Resources {
				i := slices.IndexFunc(fq.Resources, func(r ResourceQuota) bool { return r.Name == res })
				if i < 0 || !slices.Contains(rg.CoveredResources, res) {
					continue
				}
				out = append(out, groupFlavor{fq.Name, res, fq.Resources[i]})
				seen[fq.Name] = true
				if _, ok := s.typeIdx[fi.typ]; !ok {
					s.typeIdx[fi.typ] = -1
				}
				break
			}
		}
	}
	return out
}

// stopped reports whether the ClusterQueue's stopPolicy holds its
// workloads (Hold or HoldAndDrain).
func stopped(cq *ClusterQueue) bool {
	return cq.Spec.StopPolicy != nil && *cq.Spec.StopPolicy != "" && *cq.Spec.StopPolicy != "None"
}

// indexTypes numbers the types noted in s.typeIdx, in order, and maps
// the type label's values to them.
func (s *snapshot) indexTypes() {
	for t := range s.typeIdx {
		s.types = append(s.types, t)
	}
	slices.Sort(s.types)
	for k, t := range s.types {
		s.typeIdx[t] = k
	}
	for _, fi := range s.flavors {
		if k, ok := s.typeIdx[fi.typ]; ok && fi.value != "" && !slices.Contains(s.values[fi.value], k) {
			s.values[fi.value] = append(s.values[fi.value], k)
		}
	}
}

// queueOf is a ClusterQueue as the flavor model's queue, without its
// flavors: cohort, fair-sharing weight, queueing strategy, flavor
// fungibility and preemption.
func queueOf(cq *ClusterQueue) flavor.Queue {
	q := flavor.Queue{Name: cq.Name, Cohort: cq.Spec.CohortName, Strict: cq.Spec.QueueingStrategy == StrictFIFO,
		Preemption: preemptionOf(cq.Spec.Preemption)}
	if cq.Spec.FairSharing != nil && cq.Spec.FairSharing.Weight != nil {
		q.Weight = min(max(cq.Spec.FairSharing.Weight.AsApproximateFloat64(), 0), 1e9)
		if q.Weight == 0 {
			q.Weight = 1e-9 // Kueue: a weight of 0 borrows last
		}
	}
	if ff := cq.Spec.FlavorFungibility; ff != nil {
		if ff.WhenCanBorrow == TryNextFlavor {
			q.WhenCanBorrow = flavor.TryNextFlavor
		}
		q.PreemptStops = ff.WhenCanPreempt == MayStopSearch
	}
	return q
}

// preemptionOf reads a ClusterQueue's spec.preemption. Absent fields, and
// values Kueue does not define (its API refuses them), are Kueue's
// default, Never; borrowWithinCohort counts only with
// reclaimWithinCohort (Kueue refuses it without).
func preemptionOf(p *Preemption) flavor.Preemption {
	var out flavor.Preemption
	if p == nil {
		return out
	}
	out.ReclaimWithinCohort = map[string]flavor.PreemptionPolicy{"LowerPriority": flavor.PreemptLowerPriority, "Any": flavor.PreemptAny}[p.ReclaimWithinCohort]
	out.WithinClusterQueue = map[string]flavor.PreemptionPolicy{"LowerPriority": flavor.PreemptLowerPriority,
		"LowerOrNewerEqualPriority": flavor.PreemptLowerOrNewerEqualPriority}[p.WithinClusterQueue]
	if b := p.BorrowWithinCohort; b != nil && b.Policy == "LowerPriority" && out.ReclaimWithinCohort != flavor.PreemptNever {
		out.BorrowWithinCohort = flavor.PreemptLowerPriority
		if b.MaxPriorityThreshold != nil {
			out.HasThreshold, out.MaxPriorityThreshold = true, int(*b.MaxPriorityThreshold)
		}
	}
	return out
}

// read is a Workload as a round sees it.
type read struct {
	w   *Workload
	key string
	// queue is its ClusterQueue's index (-1: none of gpusched's), cq its
	// name (its LocalQueue's; "" without one).
	queue int
	cq    string
	gpus  int
	// podSets lists the pod sets that ask for GPUs.
	podSets []int
	rates   []float64
	// optimistic marks the types where a learned rate is an upper
	// confidence bound (Config.Explore).
	optimistic []bool
	// pinned: the tenant's own node selector names a type; the
	// controller does not change it.
	pinned bool
	// gated: it carries the controller's admission gate.
	gated bool
	// skip, for a workload the controller does not steer, says why
	// (what becomes of it if it is gated: notSteered).
	skip  skip
	notes []string
	// learned is what was learned of its rates (model.LearnedMessage),
	// said when it changes; "" before two types are known.
	learned string
	// err says why it cannot be read (a *ReadError).
	err error
}

// ReadError is why the controller cannot read a Workload: the field at
// fault, as a path in the Workload, and what is wrong with it. A plain
// value, safe for concurrent reads.
type ReadError struct {
	Field string
	Err   error
}

func (e *ReadError) Error() string { return e.Field + ": " + e.Err.Error() }
func (e *ReadError) Unwrap() error { return e.Err }

// podSetField is the path of a pod set's field.
func podSetField(ps *PodSet, field string) string {
	return fmt.Sprintf("spec.podSets[%s].%s", ps.Name, field)
}

// readWorkload reads a pending Workload: its ClusterQueue, GPUs, the types
// it may run on and its trusted rates. ok is false for a Workload that is
// none of gpusched's business (asks for no GPUs, or its queue is not a GPU
// queue, and does not carry the controller's gate with a GPU resource the
// controller does not steer); err says why one cannot be read.
func (c *Controller) readWorkload(s *snapshot, w *Workload) (r read, ok bool) {
	r = read{w: w, key: w.Namespace + "/" + w.Name, queue: -1}
	r.gated = hasGate(w.Annotations[AnnotationAdmissionGatedBy], c.cfg.Gate)
	fail := func(field string, err error) (read, bool) {
		r.err = &ReadError{Field: field, Err: err}
		return r, true
	}
	if w.decodeErr != nil {
		return fail("spec", fmt.Errorf("the Workload does not decode: %w", w.decodeErr))
	}
	cq, found := s.lq[w.Namespace+"/"+w.Spec.QueueName]
	r.cq = cq
	if found && s.excludes(cq, w.Namespace) {
		// A LocalQueue of the tenant's own that names a ClusterQueue
		// whose namespaceSelector leaves the tenant out: Kueue never
		// admits the workload there, so it is none of that queue's
		// demand (counted, it would take the queue's places and quota
		// from its own workloads at every round).
		r.skip = skipNamespace
		return r, false
	}
	qi, isGPU := s.byName[cq]
	if field, name := c.unsteered(w); field != "" && (isGPU || r.gated) {
		return fail(field, fmt.Errorf("asks for %s, a GPU resource gpusched does not steer (gpusched-kueue --gpu-resources lists %s)", name, joinNames(c.cfg.Resources)))
	}
	if !found || !isGPU {
		r.skip = skipReason(s, cq, found)
		return r, false
	}
	r.queue = qi
	if len(w.Spec.PodSets) > maxPodSets {
		return fail("spec.podSets", fmt.Errorf("%d pod sets (at most %d)", len(w.Spec.PodSets), maxPodSets))
	}
	ps, rerr := c.readPodSets(w, &r)
	if rerr != nil {
		r.err = rerr
		return r, true
	}
	if r.gpus == 0 {
		r.skip = skipNoGPU
		return r, false
	}
	if r.gpus > flavor.MaxQuota {
		return fail("spec.podSets", fmt.Errorf("%d GPUs (at most %d)", r.gpus, flavor.MaxQuota))
	}
	if rerr := c.readRates(s, &r, ps); rerr != nil {
		r.err = rerr
		return r, true
	}
	return r, true
}

// podSets is what readPodSets gathers from the pod sets that ask for
// GPUs: the pod templates' annotations (the first pod set's value of
// each, and where it came from), the GPU resource, and the tenant's own
// node selector value on the type label.
type podSets struct {
	ann, from map[string]string
	res       corev1.ResourceName
	selector  string
}

// readPodSets counts the GPUs of the pod sets that ask for some (into r)
// and gathers their annotations and node selectors.
func (c *Controller) readPodSets(w *Workload, r *read) (*podSets, error) {
	p := &podSets{ann: map[string]string{}, from: map[string]string{}}
	for i := range w.Spec.PodSets {
		ps := &w.Spec.PodSets[i]
		per, res, err := c.podGPUs(ps)
		if err != nil {
			return nil, err
		}
		if per == 0 {
			continue
		}
		if p.res != "" && p.res != res {
			return nil, &ReadError{podSetField(ps, "template.spec"), fmt.Errorf("asks for %s, another pod set for %s: one GPU resource per workload", res, p.res)}
		}
		p.res = res
		if ps.Count < 0 || ps.Count > model.MaxGroupMembers {
			return nil, &ReadError{podSetField(ps, "count"), fmt.Errorf("%d pods (at most %d)", ps.Count, model.MaxGroupMembers)}
		}
		r.gpus += per * int(ps.Count)
		r.podSets = append(r.podSets, i)
		for k, v := range ps.Template.Annotations {
			if _, dup := p.ann[k]; !dup {
				p.ann[k], p.from[k] = v, podSetField(ps, "template.metadata.annotations["+k+"]")
			}
		}
		if err := c.readSelector(w, ps, p); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// podGPUs is what one pod of a pod set asks of the GPU resources of
// Config.Resources (model.PodGPUs: containers and sidecars summed, plain
// init containers by their largest), and which resource: at most one.
func (c *Controller) podGPUs(ps *PodSet) (int, corev1.ResourceName, error) {
	pod := &corev1.Pod{Spec: ps.Template.Spec}
	n, which := 0, corev1.ResourceName("")
	for _, res := range c.cfg.Resources {
		per, err := model.PodGPUs(pod, res)
		if err != nil {
			return 0, "", &ReadError{podSetField(ps, "template.spec"), err}
		}
		if per == 0 {
			continue
		}
		if which != "" {
			return 0, "", &ReadError{podSetField(ps, "template.spec"), fmt.Errorf("asks for both %s and %s: one GPU resource per workload", which, res)}
		}
		n, which = per, res
	}
	return n, which, nil
}

// readSelector checks a pod set's node affinity and node selector on the
// type label: the controller steers by the node selector only, and the
// tenant's own value (one that is not the controller's) must be the same
// in every pod set.
func (c *Controller) readSelector(w *Workload, ps *PodSet, p *podSets) error {
	if a := ps.Template.Spec.Affinity; a != nil && a.NodeAffinity != nil && a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution != nil {
		for _, t := range a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
			for _, e := range t.MatchExpressions {
				if e.Key == c.cfg.TypeLabel {
					return &ReadError{podSetField(ps, "template.spec.affinity.nodeAffinity"),
						fmt.Errorf("chooses GPUs by a required node affinity on %s: gpusched steers by node selector only", c.cfg.TypeLabel)}
				}
			}
		}
	}
	if v, ok := ps.Template.Spec.NodeSelector[c.cfg.TypeLabel]; ok && v != w.Annotations[AnnotationSteered] {
		if p.selector != "" && p.selector != v {
			return &ReadError{podSetField(ps, "template.spec.nodeSelector["+c.cfg.TypeLabel+"]"), fmt.Errorf("%s, another pod set %s", v, p.selector)}
		}
		p.selector = v
	}
	return nil
}

// readRates narrows the workload's types (its GPU resource's flavors, the
// gpusched.io/gpu-types annotation, its own node selector) and reads its
// trusted rates on them.
func (c *Controller) readRates(s *snapshot, r *read, p *podSets) error {
	allowed := slices.DeleteFunc(slices.Clone(s.types), func(t topology.GPUType) bool { return !s.holds(r.queue, p.res, s.typeIdx[t]) })
	if v, ok := p.ann[model.AnnotationGPUTypes]; ok {
		ts, err := model.ParseTypes(v)
		if err != nil {
			return &ReadError{p.from[model.AnnotationGPUTypes], err}
		}
		allowed = slices.DeleteFunc(allowed, func(t topology.GPUType) bool { return !slices.Contains(ts, t) })
	}
	if p.selector != "" {
		r.pinned = true
		allowed = slices.DeleteFunc(allowed, func(t topology.GPUType) bool { return !slices.Contains(s.values[p.selector], s.typeIdx[t]) })
	}
	claimed, notes, err := model.ClaimedRates(p.ann, r.gpus, c.cfg.model(), allowed)
	if err != nil {
		key := model.AnnotationThroughput
		if _, ok := p.ann[key]; !ok {
			key = model.AnnotationBatchSize
		}
		return &ReadError{p.from[key], err}
	}
	var optimistic []topology.GPUType
	if c.cfg.Estimator != nil {
		// Learned: the claims are evidence for the estimator, and the
		// notes on them (said at every change) would change as it learns.
		if claimed, optimistic, err = c.learnedRates(r, p, claimed, allowed); err != nil {
			return &ReadError{"metadata.name", fmt.Errorf("the estimator refused the workload: %w", err)}
		}
		notes = nil
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
	if len(optimistic) > 0 {
		r.optimistic = make([]bool, len(s.types))
		for _, t := range optimistic {
			r.optimistic[s.typeIdx[t]] = true
		}
	}
	return nil
}

// holds reports whether queue qi has a flavor of type k that holds quota
// of the GPU resource res.
func (s *snapshot) holds(qi int, res corev1.ResourceName, k int) bool {
	q := s.queues.Queue(qi)
	for f, fl := range q.Flavors {
		if fl.Type == k && s.resources[qi][f] == res {
			return true
		}
	}
	return false
}

// unsteered finds a request, in a container or init container of the
// Workload's first maxPodSets pod sets, for a resource that looks like a
// GPU (MIG slices, nvidia.com/mig-*, or a name under nvidia.com/ with
// "gpu", or ending in /gpu) but is not one of Config.Resources: the field
// and the resource, or "" for none. Such a workload cannot be steered by
// GPU type, and is refused rather than left unseen. The answer is the
// same at every call: the smallest such name of the first pod set that
// has one, in the first container that asks for it (containers before
// init containers, each in order), so that the Warning, whose key holds
// the error, is said once.
func (c *Controller) unsteered(w *Workload) (field string, name corev1.ResourceName) {
	for i := range w.Spec.PodSets[:min(len(w.Spec.PodSets), maxPodSets)] {
		ps := &w.Spec.PodSets[i]
		for _, l := range []struct {
			kind string
			list []corev1.Container
		}{{"containers", ps.Template.Spec.Containers}, {"initContainers", ps.Template.Spec.InitContainers}} {
			for _, ctr := range l.list {
				for _, rl := range []corev1.ResourceList{ctr.Resources.Limits, ctr.Resources.Requests} {
					for n := range rl {
						if looksLikeGPU(n) && !slices.Contains(c.cfg.Resources, n) && (name == "" || n < name) {
							field, name = podSetField(ps, fmt.Sprintf("template.spec.%s[%s].resources", l.kind, ctr.Name)), n
						}
					}
				}
			}
		}
		if name != "" {
			return field, name
		}
	}
	return "", ""
}

// looksLikeGPU: MIG slices (nvidia.com/mig-*), another name under
// nvidia.com/ with "gpu" in it (nvidia.com/gpu.shared of time slicing),
// or any name ending in /gpu (amd.com/gpu).
func looksLikeGPU(n corev1.ResourceName) bool {
	s := string(n)
	return strings.HasPrefix(s, "nvidia.com/mig-") || strings.HasPrefix(s, "nvidia.com/") && strings.Contains(s, "gpu") || strings.HasSuffix(s, "/gpu")
}

func joinNames(names []corev1.ResourceName) string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = string(n)
	}
	return strings.Join(out, ",")
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

// usage returns, for an admitted Workload, the GPUs (of the resources
// given) of each flavor it holds (Kueue's status.admission).
func usage(w *Workload, resources []corev1.ResourceName) map[string]int {
	out := map[string]int{}
	if w.Status.Admission == nil {
		return out
	}
	for _, psa := range w.Status.Admission.PodSetAssignments {
		for _, res := range resources {
			f, ok := psa.Flavors[res]
			if !ok {
				continue
			}
			q, ok := psa.ResourceUsage[res]
			if !ok {
				continue
			}
			out[f] = min(out[f]+int(min(max(q.Value(), 0), flavor.MaxQuota)), flavor.MaxQuota)
		}
	}
	return out
}

// sortedFlavors lists a usage map's flavors in name order.
func sortedFlavors(u map[string]int) []string { return slices.Sorted(maps.Keys(u)) }

// skip is why the controller does not steer a pending workload.
type skip int

const (
	skipNone skip = iota
	// skipNoLocalQueue: its LocalQueue does not exist (or names no
	// ClusterQueue), or its ClusterQueue does not.
	skipNoLocalQueue
	// skipStopped: its ClusterQueue's stopPolicy holds its workloads.
	skipStopped
	// skipNotSteered: its ClusterQueue has no GPU flavor the controller
	// steers (none with a GPU type, or no quota of Config.Resources).
	skipNotSteered
	// skipNoGPU: it asks for none of Config.Resources.
	skipNoGPU
	// skipNamespace: its ClusterQueue's namespaceSelector does not
	// select its namespace (Kueue admits it nowhere).
	skipNamespace
)

// skipReason says why a workload of LocalQueue-derived ClusterQueue cq
// (found: its LocalQueue exists) is not one the controller steers.
func skipReason(s *snapshot, cq string, found bool) skip {
	stopped, exists := s.stopped[cq]
	switch {
	case !found || cq == "" || !exists:
		return skipNoLocalQueue
	case stopped:
		return skipStopped
	}
	return skipNotSteered
}
