package admission

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gpusched/gpusched/kube/model"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	batchlisters "k8s.io/client-go/listers/batch/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	resourcelisters "k8s.io/client-go/listers/resource/v1"
	schedlisters "k8s.io/client-go/listers/scheduling/v1"
	schedv1beta1listers "k8s.io/client-go/listers/scheduling/v1beta1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
)

// The controller reads the cluster through shared informers (one watch per
// resource, a List only when a watch cannot resume): a round reads their
// caches, and the writes are the only requests it sends. The pod cache
// has an index by workload (indexWorkload), so that a Job's pods and a pod
// group's members are found without a scan.
const (
	// indexWorkload indexes pods by the workload they belong to: the
	// workload key of a bare pod or a group member (workloadKey), and
	// jobPodIndex(namespace, uid) for a pod that names a Job as its
	// controller (and jobOwnedIndex(its workload key), for Sweep).
	indexWorkload = "gpusched.io/workload"
	// ownTTL bounds how long an object the controller wrote overrides
	// what the cache shows (the watch normally delivers it within
	// milliseconds).
	ownTTL = 2 * time.Minute
	// syncWait bounds the wait for the informers' first List at New.
	syncWait = 2 * time.Minute
)

// jobPodIndex is the index key of the pods that name the Job of a
// namespace and UID as their controller. The namespace is the pod's own:
// a pod of another namespace that names a Job's UID is none of that
// Job's (issue #40 review), neither to the rounds (jobPods) nor to its
// charges (podsHold, allBound).
func jobPodIndex(ns string, uid types.UID) string { return "job-uid/" + ns + "/" + string(uid) }

// jobOwnedIndex is the index key, by its own workload key (workloadKey),
// of a pod that names a Job as its controller: Sweep reads the pods an
// event hinted by it, to tell the Job's own from forged ones.
func jobOwnedIndex(key string) string { return "job-owned/" + key }

func podWorkloadIndex(obj any) ([]string, error) {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return nil, nil
	}
	if o := controllerOf(p); o != nil && o.Kind == "Job" {
		key, _ := workloadKey(p, 0)
		return []string{jobPodIndex(p.Namespace, o.UID), jobOwnedIndex(key)}, nil
	}
	return workloadKeys(p), nil
}

// workloadKeys are the keys of the workloads a pod may belong to: its
// own, and, for a member of an upstream PodGroup, the group's (which of
// the two depends on the PodGroup, read at each round).
func workloadKeys(p *corev1.Pod) []string {
	key, _ := workloadKey(p, 0)
	if model.UpstreamPodGroup(p) == "" {
		return []string{key}
	}
	g, _ := workloadKey(p, 2)
	return []string{key, g}
}

// stripManaged drops the managed fields from cached objects (the
// controller never reads them; they are a good part of an object's
// memory). An update sent without managed fields leaves them as they are.
func stripManaged(obj any) (any, error) {
	if m, err := meta.Accessor(obj); err == nil {
		m.SetManagedFields(nil)
	}
	return obj, nil
}

// caches are the controller's informers and listers. The informers run
// until Close; their handlers only record hints (under hintMu), never
// take the controller's lock.
type caches struct {
	factories []informers.SharedInformerFactory
	synced    []cache.InformerSynced
	cancel    context.CancelFunc

	pods    cache.SharedIndexInformer
	podList corelisters.PodLister
	jobs    batchlisters.JobLister
	nodes   corelisters.NodeLister
	pcs     schedlisters.PriorityClassLister
	// slices indexes the ResourceSlices by node, and classes lists the
	// DeviceClasses (both nil with Config.NoDRA).
	slices  cache.Indexer
	classes resourcelisters.DeviceClassLister
	// podGroups lists the upstream PodGroups (nil where the API server
	// does not serve scheduling.k8s.io/v1beta1).
	podGroups schedv1beta1listers.PodGroupLister
	// cms holds the tenancy ConfigMap (nil without Config.TenancyConfigMap).
	cms corelisters.ConfigMapLister

	own ownWrites

	hintMu sync.Mutex
	// hints are workloads an event showed running ungated or unsuspended:
	// Sweep checks them for a bypass of admission at once.
	hints map[string]bool
}

// startCaches starts the informers and waits for their first List.
func (c *Controller) startCaches(ctx context.Context) error {
	cl := c.cfg.Client
	k := &caches{hints: map[string]bool{}}
	k.own.init()
	ictx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	k.cancel = cancel
	strip := informers.WithTransform(stripManaged)
	work := informers.NewSharedInformerFactoryWithOptions(cl, 0, informers.WithNamespace(c.cfg.Namespace), strip)
	k.pods = work.Core().V1().Pods().Informer()
	if err := k.pods.AddIndexers(cache.Indexers{indexWorkload: podWorkloadIndex, indexTerminating: podTerminatingIndex, indexNode: podNodeIndex}); err != nil {
		cancel()
		return fmt.Errorf("admission: pod index: %w", err)
	}
	k.podList = work.Core().V1().Pods().Lister()
	jobInf := work.Batch().V1().Jobs().Informer()
	k.jobs = work.Batch().V1().Jobs().Lister()
	cluster := informers.NewSharedInformerFactoryWithOptions(cl, 0, strip)
	k.pcs = cluster.Scheduling().V1().PriorityClasses().Lister()
	pcInf := cluster.Scheduling().V1().PriorityClasses().Informer()
	nodeOpts := []informers.SharedInformerOption{strip}
	if len(c.cfg.NodeSelector) > 0 {
		sel := labels.SelectorFromSet(c.cfg.NodeSelector).String()
		nodeOpts = append(nodeOpts, informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = sel }))
	}
	nodeF := informers.NewSharedInformerFactoryWithOptions(cl, 0, nodeOpts...)
	nodeInf := nodeF.Core().V1().Nodes().Informer()
	k.nodes = nodeF.Core().V1().Nodes().Lister()
	k.factories = []informers.SharedInformerFactory{work, cluster, nodeF}
	k.synced = []cache.InformerSynced{k.pods.HasSynced, jobInf.HasSynced, pcInf.HasSynced, nodeInf.HasSynced}
	if !c.cfg.NoDRA {
		sliceInf := cluster.Resource().V1().ResourceSlices().Informer()
		if err := sliceInf.AddIndexers(cache.Indexers{indexNode: sliceNodeIndex}); err != nil {
			cancel()
			return fmt.Errorf("admission: ResourceSlice index: %w", err)
		}
		k.slices = sliceInf.GetIndexer()
		classInf := cluster.Resource().V1().DeviceClasses().Informer()
		k.classes = cluster.Resource().V1().DeviceClasses().Lister()
		k.synced = append(k.synced, sliceInf.HasSynced, classInf.HasSynced)
	}
	if servesPodGroups(cl) {
		pgInf := work.Scheduling().V1beta1().PodGroups().Informer()
		k.podGroups = work.Scheduling().V1beta1().PodGroups().Lister()
		k.synced = append(k.synced, pgInf.HasSynced)
	}
	if c.cfg.TenancyConfigMap != "" {
		ns, _ := c.cfg.stateLocation()
		name := fields.OneTermEqualSelector("metadata.name", c.cfg.TenancyConfigMap).String()
		cmF := informers.NewSharedInformerFactoryWithOptions(cl, 0, informers.WithNamespace(ns), strip,
			informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.FieldSelector = name }))
		cmInf := cmF.Core().V1().ConfigMaps().Informer()
		k.cms = cmF.Core().V1().ConfigMaps().Lister()
		k.factories = append(k.factories, cmF)
		k.synced = append(k.synced, cmInf.HasSynced)
	}
	for _, inf := range []cache.SharedIndexInformer{k.pods, jobInf} {
		if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    func(o any) { k.hint(o) },
			UpdateFunc: func(_, o any) { k.hint(o) },
		}); err != nil {
			cancel()
			return fmt.Errorf("admission: informer handler: %w", err)
		}
	}
	c.caches = k
	c.shared.caches.Store(k)
	for _, f := range k.factories {
		f.Start(ictx.Done())
	}
	wctx, wcancel := context.WithTimeout(ctx, syncWait)
	defer wcancel()
	if !cache.WaitForCacheSync(wctx.Done(), k.synced...) {
		k.close()
		return fmt.Errorf("admission: the informers did not sync within %v: %w", syncWait, cmpErr(ctx.Err(), context.DeadlineExceeded))
	}
	return nil
}

// sliceNodeIndex indexes a ResourceSlice by the node it is local to.
func sliceNodeIndex(o any) ([]string, error) {
	if s, ok := o.(*resourcev1.ResourceSlice); ok && s.Spec.NodeName != nil {
		return []string{*s.Spec.NodeName}, nil
	}
	return nil, nil
}

// nodeSlices returns the ResourceSlices local to node (nil with
// Config.NoDRA).
func (k *caches) nodeSlices(node string) []*resourcev1.ResourceSlice {
	if k.slices == nil {
		return nil
	}
	objs, err := k.slices.ByIndex(indexNode, node)
	if err != nil {
		return nil
	}
	out := make([]*resourcev1.ResourceSlice, 0, len(objs))
	for _, o := range objs {
		if s, ok := o.(*resourcev1.ResourceSlice); ok {
			out = append(out, s)
		}
	}
	return out
}

// servesPodGroups reports whether the API server serves upstream PodGroups
// (scheduling.k8s.io/v1beta1, off by default in Kubernetes 1.37).
func servesPodGroups(cl kubernetes.Interface) bool {
	l, err := cl.Discovery().ServerResourcesForGroupVersion("scheduling.k8s.io/v1beta1")
	if err != nil {
		return false
	}
	return slices.ContainsFunc(l.APIResources, func(r metav1.APIResource) bool { return r.Name == "podgroups" })
}

// gang returns the minCount of the upstream PodGroup ns/name when it is a
// gang, else 0 (no such PodGroup, a basic one, or none served).
func (k *caches) gang(ns, name string) int {
	if k == nil || k.podGroups == nil {
		return 0
	}
	pg, err := k.podGroups.PodGroups(ns).Get(name)
	if err != nil || pg.Spec.SchedulingPolicy.Gang == nil {
		return 0
	}
	return int(min(max(pg.Spec.SchedulingPolicy.Gang.MinCount, 0), model.MaxGroupMembers))
}

// mapsResource reports whether a DeviceClass maps the extended resource
// res to DRA devices (KEP-5004), so that a DRA driver serves pods asking
// for it.
func (k *caches) mapsResource(res corev1.ResourceName) bool {
	if k.classes == nil {
		return false
	}
	cls, err := k.classes.List(labels.Everything())
	if err != nil {
		return false
	}
	for _, c := range cls {
		if c.Spec.ExtendedResourceName != nil && *c.Spec.ExtendedResourceName == string(res) {
			return true
		}
	}
	return false
}

func cmpErr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

// close stops the informers and waits for their goroutines.
func (k *caches) close() {
	k.cancel()
	for _, f := range k.factories {
		f.Shutdown()
	}
}

// hint notes a GPU workload an event shows running without a gate (a pod
// not gated, a Job not suspended): most are the controller's own
// admissions, which Sweep recognises by its records; the others bypassed
// admission. A pod that names a Job as its controller is noted by its own
// key and by its Job's: it may be one of the Job's pods or a tenant's
// forgery (a bare pod, issue #40 review), which only the selection of the
// Job's pods (jobPods) tells apart.
func (k *caches) hint(o any) {
	var keys []string
	switch v := o.(type) {
	case *corev1.Pod:
		if hasGate(v.Spec.SchedulingGates) || terminal(v) || v.DeletionTimestamp != nil {
			return
		}
		keys = append(keys, workloadKeys(v)...)
		if o := controllerOf(v); o != nil && o.Kind == "Job" {
			keys = append(keys, "job/"+v.Namespace+"/"+o.Name)
		}
	case *batchv1.Job:
		if suspended(v) || jobFinished(v) {
			return
		}
		keys = append(keys, "job/"+v.Namespace+"/"+v.Name)
	default:
		return
	}
	k.hintMu.Lock()
	for _, key := range keys {
		if len(k.hints) < maxRecords {
			k.hints[key] = true
		}
	}
	k.hintMu.Unlock()
}

// takeHints returns the hinted workload keys and forgets them.
func (k *caches) takeHints() map[string]bool {
	k.hintMu.Lock()
	defer k.hintMu.Unlock()
	h := k.hints
	k.hints = map[string]bool{}
	return h
}

// listPods returns the cached pods of the workloads' namespace (all
// namespaces when Config.Namespace is ""), the controller's own recent
// writes over the cache's older copies.
func (c *Controller) listPods() ([]*corev1.Pod, error) {
	pods, err := c.caches.podList.Pods(c.cfg.Namespace).List(labels.Everything())
	if err != nil {
		return nil, fmt.Errorf("admission: reading the pod cache: %w", err)
	}
	return c.caches.own.pods(pods, c.cfg.Namespace), nil
}

// podsOf returns the cached pods of an index key (indexWorkload).
func (c *Controller) podsOf(key string) []*corev1.Pod {
	objs, err := c.caches.pods.GetIndexer().ByIndex(indexWorkload, key)
	if err != nil {
		return nil
	}
	out := make([]*corev1.Pod, 0, len(objs))
	for _, o := range objs {
		if p, ok := o.(*corev1.Pod); ok {
			out = append(out, p)
		}
	}
	return c.caches.own.pods(out, "\x00")
}

// getPod returns the cached pod (nil if the cache has none), the
// controller's own write over an older copy.
func (c *Controller) getPod(ns, name string) *corev1.Pod {
	p, err := c.caches.podList.Pods(ns).Get(name)
	if err != nil {
		p = nil
	}
	var in []*corev1.Pod
	if p != nil {
		in = []*corev1.Pod{p}
	}
	out := c.caches.own.pods(in, "\x00")
	for _, q := range out {
		if q.Namespace == ns && q.Name == name {
			return q
		}
	}
	return nil
}

func (c *Controller) listJobs() ([]*batchv1.Job, error) {
	jobs, err := c.caches.jobs.Jobs(c.cfg.Namespace).List(labels.Everything())
	if err != nil {
		return nil, fmt.Errorf("admission: reading the Job cache: %w", err)
	}
	return c.caches.own.jobs(jobs), nil
}

// ownWrites are the objects the controller wrote lately, which override
// the cache's copies until the watch delivers them (or newer ones): a
// round or sweep right after a write reads what it wrote. Deleted pods
// are hidden likewise until the cache drops them. Safe for concurrent use.
type ownWrites struct {
	mu      sync.Mutex
	pod     map[types.NamespacedName]ownEntry[*corev1.Pod]
	job     map[types.NamespacedName]ownEntry[*batchv1.Job]
	deleted map[types.UID]time.Time
	// deleting holds the pods the controller deleted lately, gone or
	// still terminating: until the cache shows which, the API is asked.
	deleting map[types.UID]time.Time
}

// deletingTTL is how long after a deletion the API is asked whether a pod
// is gone, rather than the cache.
const deletingTTL = 10 * time.Second

type ownEntry[T any] struct {
	obj T
	at  time.Time
	// created: the controller created the object (the cache may not have
	// it at all yet).
	created bool
}

func (o *ownWrites) init() {
	o.pod = map[types.NamespacedName]ownEntry[*corev1.Pod]{}
	o.job = map[types.NamespacedName]ownEntry[*batchv1.Job]{}
	o.deleted = map[types.UID]time.Time{}
	o.deleting = map[types.UID]time.Time{}
}

// sentDelete notes a pod the controller asked the API to delete.
func (o *ownWrites) sentDelete(uid types.UID) {
	o.mu.Lock()
	defer o.mu.Unlock()
	now := time.Now()
	for u, at := range o.deleting {
		if now.Sub(at) >= deletingTTL {
			delete(o.deleting, u)
		}
	}
	if len(o.deleting) < maxRecords {
		o.deleting[uid] = now
	}
}

// askAPI reports whether the controller deleted the pod lately (so that
// a cache still showing it may be behind).
func (o *ownWrites) askAPI(uid types.UID) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	at, ok := o.deleting[uid]
	return ok && time.Since(at) < deletingTTL
}

func (o *ownWrites) wrotePod(p *corev1.Pod, created bool) {
	if p == nil {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	o.pod[types.NamespacedName{Namespace: p.Namespace, Name: p.Name}] = ownEntry[*corev1.Pod]{obj: p, at: time.Now(), created: created}
	delete(o.deleted, p.UID)
}

func (o *ownWrites) wroteJob(j *batchv1.Job) {
	if j == nil {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	o.job[types.NamespacedName{Namespace: j.Namespace, Name: j.Name}] = ownEntry[*batchv1.Job]{obj: j, at: time.Now()}
}

// deletedPod hides the pod from reads until the cache drops it.
func (o *ownWrites) deletedPod(p *corev1.Pod) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.deleted[p.UID] = time.Now()
	delete(o.pod, types.NamespacedName{Namespace: p.Namespace, Name: p.Name})
}

// newerRV reports whether resource version a is newer than b. Resource
// versions are opaque, but the API server's are integers that grow; an
// unreadable one is never newer.
func newerRV(a, b string) bool {
	x, err1 := strconv.ParseUint(a, 10, 64)
	y, err2 := strconv.ParseUint(b, 10, 64)
	return err1 == nil && err2 == nil && x > y
}

// pods merges the cached pods with the controller's writes: a written
// copy newer than the cached one replaces it, a deleted pod is left out,
// and a created pod the cache lacks is added when ns matches ("" all,
// "\x00" none). Entries the cache has caught up with are forgotten.
func (o *ownWrites) pods(cached []*corev1.Pod, ns string) []*corev1.Pod {
	o.mu.Lock()
	defer o.mu.Unlock()
	if len(o.pod) == 0 && len(o.deleted) == 0 {
		return cached
	}
	now := time.Now()
	out := make([]*corev1.Pod, 0, len(cached))
	seen := map[types.NamespacedName]bool{}
	for _, p := range cached {
		if at, ok := o.deleted[p.UID]; ok {
			if now.Sub(at) < ownTTL {
				continue
			}
			delete(o.deleted, p.UID)
		}
		key := types.NamespacedName{Namespace: p.Namespace, Name: p.Name}
		if e, ok := o.pod[key]; ok {
			seen[key] = true
			if e.obj.UID == p.UID && newerRV(e.obj.ResourceVersion, p.ResourceVersion) && now.Sub(e.at) < ownTTL {
				out = append(out, e.obj)
				continue
			}
			if e.obj.UID == p.UID || !e.created || now.Sub(e.at) >= ownTTL {
				delete(o.pod, key)
			}
		}
		out = append(out, p)
	}
	for key, e := range o.pod {
		switch {
		case seen[key]:
		case now.Sub(e.at) >= ownTTL || !e.created:
			if !e.created {
				delete(o.pod, key) // gone from the cache: deleted since
			}
		case ns == "" || ns == key.Namespace:
			out = append(out, e.obj)
		}
	}
	for uid, at := range o.deleted {
		if now.Sub(at) >= ownTTL {
			delete(o.deleted, uid)
		}
	}
	return out
}

func (o *ownWrites) jobs(cached []*batchv1.Job) []*batchv1.Job {
	o.mu.Lock()
	defer o.mu.Unlock()
	if len(o.job) == 0 {
		return cached
	}
	now := time.Now()
	out := make([]*batchv1.Job, 0, len(cached))
	for _, j := range cached {
		key := types.NamespacedName{Namespace: j.Namespace, Name: j.Name}
		if e, ok := o.job[key]; ok {
			if e.obj.UID == j.UID && newerRV(e.obj.ResourceVersion, j.ResourceVersion) && now.Sub(e.at) < ownTTL {
				out = append(out, e.obj)
				continue
			}
			delete(o.job, key)
		}
		out = append(out, j)
	}
	return out
}

// SyncCaches waits until the controller's caches hold what the API server
// holds now: the pods, Jobs, nodes, PriorityClasses (and the tenancy
// ConfigMap) of a fresh List, at the same resource versions (or, where
// the server gives none, equal). Round reads the caches, which the
// watches update within milliseconds of a change; a caller that changes
// objects and runs a round at once (a test, a tool driving rounds on a
// virtual clock) calls SyncCaches first. It costs one List per resource,
// which Round itself never sends. It returns ctx's error if the caches
// do not catch up before ctx ends.
func (c *Controller) SyncCaches(ctx context.Context) error {
	cl := c.cfg.Client
	type check struct {
		what   string
		list   func() (runtime.Object, error)
		cached func() ([]runtime.Object, error)
	}
	caughtUp := func(ch check) (bool, error) {
		list, err := ch.list()
		if err != nil {
			return false, fmt.Errorf("admission: listing %s: %w", ch.what, err)
		}
		items, err := meta.ExtractList(list)
		if err != nil {
			return false, fmt.Errorf("admission: listing %s: %w", ch.what, err)
		}
		want := make(map[types.NamespacedName]runtime.Object, len(items))
		for _, o := range items {
			m, err := meta.Accessor(o)
			if err != nil {
				return false, err
			}
			want[types.NamespacedName{Namespace: m.GetNamespace(), Name: m.GetName()}] = o
		}
		cached, err := ch.cached()
		if err != nil {
			return false, err
		}
		return same(want, cached), nil
	}
	nodeOpts := metav1.ListOptions{}
	if len(c.cfg.NodeSelector) > 0 {
		nodeOpts.LabelSelector = labels.SelectorFromSet(c.cfg.NodeSelector).String()
	}
	checks := []check{
		{"pods", func() (runtime.Object, error) {
			return cl.CoreV1().Pods(c.cfg.Namespace).List(ctx, metav1.ListOptions{})
		}, func() ([]runtime.Object, error) {
			ps, err := c.caches.podList.Pods(c.cfg.Namespace).List(labels.Everything())
			return objects(ps), err
		}},
		{"jobs", func() (runtime.Object, error) {
			return cl.BatchV1().Jobs(c.cfg.Namespace).List(ctx, metav1.ListOptions{})
		}, func() ([]runtime.Object, error) {
			js, err := c.caches.jobs.Jobs(c.cfg.Namespace).List(labels.Everything())
			return objects(js), err
		}},
		{"nodes", func() (runtime.Object, error) {
			return cl.CoreV1().Nodes().List(ctx, nodeOpts)
		}, func() ([]runtime.Object, error) {
			ns, err := c.caches.nodes.List(labels.Everything())
			return objects(ns), err
		}},
		{"priority classes", func() (runtime.Object, error) {
			return cl.SchedulingV1().PriorityClasses().List(ctx, metav1.ListOptions{})
		}, func() ([]runtime.Object, error) {
			ps, err := c.caches.pcs.List(labels.Everything())
			return objects(ps), err
		}},
	}
	if c.caches.cms != nil {
		ns, _ := c.cfg.stateLocation()
		sel := fields.OneTermEqualSelector("metadata.name", c.cfg.TenancyConfigMap).String()
		checks = append(checks, check{"tenancy", func() (runtime.Object, error) {
			return cl.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{FieldSelector: sel})
		}, func() ([]runtime.Object, error) {
			cms, err := c.caches.cms.ConfigMaps(ns).List(labels.Everything())
			return objects(cms), err
		}})
	}
	for _, ch := range checks {
		// Listed again while they differ: objects may change meanwhile
		// (the controller's own condition writes, say).
		for {
			ok, err := caughtUp(ch)
			if err != nil {
				return err
			}
			if ok {
				break
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("admission: the %s cache has not caught up: %w", ch.what, ctx.Err())
			case <-time.After(10 * time.Millisecond):
			}
		}
	}
	return nil
}

func objects[T runtime.Object](in []T) []runtime.Object {
	out := make([]runtime.Object, len(in))
	for i, o := range in {
		out[i] = o
	}
	return out
}

// same reports whether the cached objects are those of a List: the same
// objects (name and UID) at the same resource versions (equal, where there
// are none).
func same(want map[types.NamespacedName]runtime.Object, cached []runtime.Object) bool {
	if len(cached) != len(want) {
		return false
	}
	for _, o := range cached {
		m, err := meta.Accessor(o)
		if err != nil {
			return false
		}
		w, ok := want[types.NamespacedName{Namespace: m.GetNamespace(), Name: m.GetName()}]
		if !ok {
			return false
		}
		wm, _ := meta.Accessor(w)
		if wm.GetUID() != m.GetUID() || wm.GetResourceVersion() != m.GetResourceVersion() {
			return false
		}
		if m.GetResourceVersion() == "" {
			w = w.DeepCopyObject()
			_, _ = stripManaged(w)
			if !equality.Semantic.DeepEqual(w, o) {
				return false
			}
		}
	}
	return true
}

// Close stops the controller's informers. A controller is not used after
// Close; Run's end does not close it (a caller may run it again).
func (c *Controller) Close() {
	if c.caches != nil {
		c.caches.close()
	}
	if c.events != nil {
		c.events.close()
	}
}

// sortedKeys lists a set's keys in order.
func sortedKeys(m map[string]bool) []string { return slices.Sorted(maps.Keys(m)) }

// CountRequests makes every client built from rc count its API requests
// (a wrapper around its transport) and returns the count so far, for
// Config.Requests. Safe for concurrent use.
func CountRequests(rc *rest.Config) func() uint64 {
	var n atomic.Uint64
	prev := rc.WrapTransport
	rc.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
		if prev != nil {
			rt = prev(rt)
		}
		return countingTransport{rt: rt, n: &n}
	}
	return n.Load
}

type countingTransport struct {
	rt http.RoundTripper
	n  *atomic.Uint64
}

func (t countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	t.n.Add(1)
	return t.rt.RoundTrip(r)
}
