package gpusched

import (
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"sync"

	"github.com/gpusched/gpusched/cluster"
	"github.com/gpusched/gpusched/kube/model"
	"github.com/gpusched/gpusched/placement"
	"github.com/gpusched/gpusched/topology"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Ledger is the device-level book of which pod holds which GPUs: a
// cluster.State over the GPU nodes whose holders are pod UIDs, kept in step
// with the node and pod objects (OnNode, OnNodeDelete, OnPod, OnPodDelete)
// and with the scheduler's own bookings (Reserve, Release). Only the
// scheduler's own records count: its bookings, and the device annotations
// of bound pods whose record (model.AnnotationGPUsMAC) verifies under its
// RecordKey, so that a ledger fed the API objects at start books exactly
// what a scheduler holding the key bound before. A bound pod whose
// annotation is missing, does not verify, names GPUs the node lacks or
// that a verified pod holds is booked as a stand-in: on free GPUs, given
// up to a verified pod that claims them (then booked elsewhere), and
// reported by a Warning event. So whatever order the pods come in, and
// whatever a tenant writes on its pods, the verified bookings are the
// same and every bound pod's GPUs are counted.
//
// It is safe for concurrent use: Filter and Score read it from many
// goroutines while the informers and the binding cycles change it.
type Ledger struct {
	mu      sync.RWMutex
	st      *cluster.State
	opts    model.NodeOptions
	res     corev1.ResourceName
	chooser placement.GPUChooser
	nodes   map[string]*nodeEntry
	pods    map[types.UID]*podEntry
	byNode  map[string]map[types.UID]bool
	used    map[string]int // GPUs of the pods in byNode, per node
	// warn reports a problem with an object (a Warning event).
	warn func(obj any, reason, msg string)
	// key verifies the device records of bound pods.
	key *RecordKey
	// slices lists a node's ResourceSlices, for nodes whose GPUs a DRA
	// driver publishes (nil: none are read).
	slices func(node string) []*resourcev1.ResourceSlice
}

type nodeEntry struct {
	node   model.Node
	warned string // the warnings last reported, to report each once
	// cordoned: spec.unschedulable (its GPUs still count; it takes no
	// new pod).
	cordoned bool
	// server is the node's position in the ledger's cluster.State (kept
	// up to date on removals), so that Filter and Score look up one map.
	server int
	// typ and total are the node's GPU type (a node has one) and its
	// GPUs, fixed for the entry (a change of either builds a new one):
	// Fit and Room read them here, not through the state's server.
	typ   topology.GPUType
	total int
	// gen counts the changes of the node's GPUs (bookings, health); it
	// moves under the ledger's write lock.
	gen uint64

	cacheMu sync.Mutex
	ideal   []int // best GPUChooser score of k GPUs on the empty node; -1 unknown
	choices map[int]cachedChoice
}

// cachedChoice is a Choice computed at a generation of the node.
type cachedChoice struct {
	gen uint64
	c   Choice
	err error
}

// touchLocked records that a node's GPUs changed.
func (l *Ledger) touchLocked(node string) {
	if e := l.nodes[node]; e != nil {
		e.gen++
	}
}

type podEntry struct {
	ns, name, node string
	// devices are NVML indices; nil for a stand-in that waits for its
	// node or for free GPUs.
	devices []int
	gpus    int
	// bound: the API shows the pod bound (versus booked at Reserve).
	bound bool
	// trusted: the devices are the scheduler's own booking or a verified
	// record; else the pod is a stand-in.
	trusted bool
	// warned is the annotation last reported as not believed.
	warned string
	// dra: the GPUs are DRA devices given through the pod's claims (its
	// record is their allocation, not an annotation).
	dra bool
}

// NewLedger returns an empty ledger. warn, if not nil, is told of bad node
// labels and annotations and of conflicting bookings. Its record key is
// random until SetRecordKey.
func NewLedger(opts model.NodeOptions, warn func(obj any, reason, msg string)) *Ledger {
	st, err := cluster.New(nil)
	if err != nil { // cannot happen for an empty cluster
		panic(err)
	}
	if warn == nil {
		warn = func(any, string, string) {}
	}
	res := opts.Resource
	if res == "" {
		res = model.ResourceGPU
	}
	return &Ledger{st: st, opts: opts, res: res, nodes: map[string]*nodeEntry{},
		pods: map[types.UID]*podEntry{}, byNode: map[string]map[types.UID]bool{}, used: map[string]int{}, warn: warn, key: RandomRecordKey()}
}

// SetRecordKey sets the key under which bound pods' device records
// verify; call it before the ledger sees pods.
func (l *Ledger) SetRecordKey(k *RecordKey) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.key = k
}

// Sign returns the record of a booking, for the Binding.
func (l *Ledger) Sign(uid types.UID, node string, devices []int) string {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.key.Sign(uid, node, devices)
}

// SetSlices has the ledger read the GPUs of nodes without device-plugin
// GPUs from the ResourceSlices that slices lists for a node
// (model.ParseDRANode). Call it before the first OnNode.
func (l *Ledger) SetSlices(slices func(node string) []*resourcev1.ResourceSlice) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.slices = slices
}

// parseNode reads a node: its device-plugin GPUs, else those its DRA
// driver publishes.
func (l *Ledger) parseNode(n *corev1.Node) (model.Node, error) {
	nd, err := model.ParseNode(n, l.opts)
	if !errors.Is(err, model.ErrNoGPUs) {
		return nd, err
	}
	l.mu.RLock()
	list := l.slices
	l.mu.RUnlock()
	if list == nil {
		return nd, err
	}
	rs := list(n.Name)
	if len(rs) == 0 {
		return nd, err
	}
	return model.ParseDRANode(n, rs, l.opts)
}

// OnNode follows a node added or updated.
func (l *Ledger) OnNode(n *corev1.Node) {
	nd, err := l.parseNode(n)
	l.onNode(n, nd, err)
}

// OnSlices follows the ResourceSlices of a node whose GPUs a DRA driver
// publishes: rs are its slices now (or the cluster's).
func (l *Ledger) OnSlices(n *corev1.Node, rs []*resourcev1.ResourceSlice) {
	nd, err := model.ParseNode(n, l.opts)
	if errors.Is(err, model.ErrNoGPUs) {
		nd, err = model.ParseDRANode(n, rs, l.opts)
	}
	l.onNode(n, nd, err)
}

func (l *Ledger) onNode(n *corev1.Node, nd model.Node, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	old := l.nodes[n.Name]
	if err != nil {
		if old != nil {
			l.removeNodeLocked(n.Name)
		}
		if !errors.Is(err, model.ErrNoGPUs) {
			l.warn(n, "InvalidGPUNode", fmt.Sprintf("gpusched does not use this node's GPUs: %v", err))
		}
		return
	}
	if msg := joinErrs(nd.Warnings); msg != "" && (old == nil || old.warned != msg) {
		l.warn(n, "InvalidGPUAnnotation", "gpusched ignores: "+msg)
	}
	if old != nil && reflect.DeepEqual(old.node.Server, nd.Server) {
		old.node.Ready, old.node.Unhealthy, old.node.Allocatable, old.warned = nd.Ready, nd.Unhealthy, nd.Allocatable, joinErrs(nd.Warnings)
		old.node.DRA = nd.DRA
		old.cordoned = n.Spec.Unschedulable
		l.applyHealthLocked(n.Name)
		return
	}
	if old != nil {
		l.removeNodeLocked(n.Name) // its GPUs or links changed: build it again
	}
	if _, err := l.st.AddServer(nd.Server); err != nil {
		l.warn(n, "InvalidGPUNode", fmt.Sprintf("gpusched does not use this node's GPUs: %v", err))
		return
	}
	srv, _ := l.st.ServerIndex(n.Name)
	l.nodes[n.Name] = &nodeEntry{node: nd, warned: joinErrs(nd.Warnings), cordoned: n.Spec.Unschedulable, server: srv,
		typ: nd.Server.GPUs[0].Type, total: len(nd.Server.GPUs)}
	l.rebookLocked(n.Name, nd.DRA != nil)
	l.applyHealthLocked(n.Name)
}

// rebookLocked books again the pods of a node built anew, trusted ones
// first; on a DRA node only those booked through claims (its claims are
// the record of the others: OnPod).
func (l *Ledger) rebookLocked(node string, isDRA bool) {
	uids := slices.Collect(maps.Keys(l.byNode[node]))
	slices.SortFunc(uids, func(a, b types.UID) int {
		ta, tb := l.pods[a].trusted, l.pods[b].trusted
		if ta != tb {
			if ta {
				return -1
			}
			return 1
		}
		return strings.Compare(string(a), string(b))
	})
	for _, uid := range uids {
		if e := l.pods[uid]; isDRA && !e.dra {
			l.dropLocked(uid)
			continue
		}
		l.bookLocked(uid, l.pods[uid])
	}
}

// OnNodeDelete follows a node deleted.
func (l *Ledger) OnNodeDelete(name string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.removeNodeLocked(name)
}

func (l *Ledger) removeNodeLocked(name string) {
	if l.nodes[name] == nil {
		return
	}
	delete(l.nodes, name)
	_, _ = l.st.RemoveServer(name) // the pods keep their entries, should the node return
	// The servers after it moved down one position.
	for id, e := range l.nodes {
		e.server, _ = l.st.ServerIndex(id)
	}
}

// applyHealthLocked marks failed the GPUs of a node that is not Ready and
// those its annotation lists, and recovers the others.
func (l *Ledger) applyHealthLocked(name string) {
	e := l.nodes[name]
	s, ok := l.st.ServerIndex(name)
	if e == nil || !ok {
		return
	}
	var fail, recover []cluster.GPURef
	for i := range l.st.Server(s).GPUs {
		r := cluster.GPURef{Server: s, GPU: i}
		want := !e.node.Ready || slices.Contains(e.node.Unhealthy, i)
		switch got := l.st.Failed(r); {
		case want && !got:
			fail = append(fail, r)
		case !want && got:
			recover = append(recover, r)
		}
	}
	if len(fail) > 0 {
		_, _ = l.st.Fail(fail...)
	}
	if len(recover) > 0 {
		_ = l.st.Recover(recover...)
	}
	e.gen++
}

// OnPod follows a pod added or updated. Pods that are not bound are the
// scheduler's business (Reserve); bound pods are booked as the scheduler's
// own records say: its booking, or an annotation whose record verifies;
// any other bound GPU pod is a stand-in.
func (l *Ledger) OnPod(p *corev1.Pod) {
	if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed || p.DeletionTimestamp != nil && p.Spec.NodeName == "" {
		l.OnPodDelete(p.UID)
		return
	}
	if p.Spec.NodeName == "" {
		return
	}
	if l.keepDRA(p.UID) {
		return
	}
	gpus, err := model.PodGPUs(p, l.res)
	if err != nil || gpus == 0 {
		l.OnPodDelete(p.UID)
		return
	}
	node := p.Spec.NodeName
	v, hasAnn := p.Annotations[model.AnnotationGPUs]
	mac := p.Annotations[model.AnnotationGPUsMAC]
	l.mu.Lock()
	defer l.mu.Unlock()
	if ne := l.nodes[node]; ne != nil && ne.node.DRA != nil {
		// On a DRA node the claims are the record (SyncDRA books their
		// devices): a stand-in would count the pod's GPUs twice.
		l.dropLocked(p.UID)
		return
	}
	var devices []int
	why := "the pod is bound without gpusched's device record (by another scheduler, or on spec.nodeName)"
	if hasAnn {
		d, err := model.ParseIndices(model.AnnotationGPUs, v)
		switch {
		case err != nil || len(d) != gpus:
			why = fmt.Sprintf("annotation %s %q does not name the pod's %d GPUs", model.AnnotationGPUs, cutStr(v), gpus)
		case !l.key.Verify(p.UID, node, d, mac):
			why = fmt.Sprintf("annotation %s %q is not gpusched's record (%s does not verify)", model.AnnotationGPUs, cutStr(v), model.AnnotationGPUsMAC)
		default:
			devices = d
		}
	}
	if e := l.pods[p.UID]; e != nil && e.node == node && (e.trusted || devices == nil) {
		// The scheduler's own booking, or a stand-in that stays one: an
		// annotation changed since (by whoever may edit the pod) changes
		// nothing.
		e.bound = true
		if e.trusted && hasAnn && !slices.Equal(devices, e.devices) && e.warned != v {
			e.warned = v
			l.warn(p, "GPURecordChanged", fmt.Sprintf("annotation %s %q is not what gpusched booked (%s); gpusched keeps its record", model.AnnotationGPUs, cutStr(v), model.FormatIndices(e.devices)))
		}
		if !e.trusted && e.warned != v+"|"+mac {
			e.warned = v + "|" + mac
			l.warn(p, "InvalidGPUAnnotation", why+"; gpusched books stand-ins on free GPUs")
		}
		return
	}
	l.dropLocked(p.UID)
	e := &podEntry{ns: p.Namespace, name: p.Name, node: node, devices: devices, gpus: gpus, bound: true, trusted: devices != nil}
	if !e.trusted {
		e.warned = v + "|" + mac
		l.warn(p, "InvalidGPUAnnotation", why+"; gpusched books stand-ins on free GPUs")
	}
	l.addLocked(p.UID, e)
	l.bookLocked(p.UID, e)
}

// keepDRA marks bound a pod booked with DRA devices and reports whether
// it is one: its claims, not its annotations, are its record.
func (l *Ledger) keepDRA(uid types.UID) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	e := l.pods[uid]
	if e == nil || !e.dra {
		return false
	}
	e.bound = true
	return true
}

func cutStr(s string) string {
	if len(s) > 64 {
		return s[:64] + "..."
	}
	return s
}

// OnPodDelete follows a pod deleted or finished: its GPUs are free.
func (l *Ledger) OnPodDelete(uid types.UID) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.dropLocked(uid)
}

func (l *Ledger) addLocked(uid types.UID, e *podEntry) {
	l.pods[uid] = e
	if l.byNode[e.node] == nil {
		l.byNode[e.node] = map[types.UID]bool{}
	}
	l.byNode[e.node][uid] = true
	l.used[e.node] += e.gpus
}

func (l *Ledger) dropLocked(uid types.UID) {
	e := l.pods[uid]
	if e == nil {
		return
	}
	l.st.Release(string(uid))
	l.touchLocked(e.node)
	delete(l.pods, uid)
	delete(l.byNode[e.node], uid)
	l.used[e.node] -= e.gpus
	if len(l.byNode[e.node]) == 0 {
		delete(l.byNode, e.node)
		delete(l.used, e.node)
	}
}

// bookLocked binds a pod's GPUs in the state, if its node is there. A
// trusted pod takes its devices, moving the stand-ins that hold some of
// them to other free GPUs; if a device is missing or another trusted pod
// holds it, the pod becomes a stand-in (reported). A stand-in takes the
// lowest free GPUs, as many as it has (fewer if there are not, reported).
func (l *Ledger) bookLocked(uid types.UID, e *podEntry) {
	s, ok := l.st.ServerIndex(e.node)
	if !ok || len(l.st.Held(string(uid))) > 0 {
		return
	}
	if e.trusted {
		var refs []cluster.GPURef
		var missing, taken []int
		var displaced []types.UID
		for _, d := range e.devices {
			r, err := l.st.Lookup(e.node, d)
			if err != nil {
				missing = append(missing, d)
				continue
			}
			if h := l.st.Holder(r); h != "" {
				if o := l.pods[types.UID(h)]; o != nil && !o.trusted {
					if !slices.Contains(displaced, types.UID(h)) {
						displaced = append(displaced, types.UID(h))
					}
				} else {
					taken = append(taken, d)
					continue
				}
			}
			refs = append(refs, r)
		}
		if len(missing)+len(taken) == 0 {
			for _, h := range displaced {
				l.st.Release(string(h))
				l.pods[h].devices = nil
			}
			l.bindLocked(string(uid), refs)
			for _, h := range displaced {
				l.bookLocked(h, l.pods[h])
			}
			return
		}
		l.warn(podRef(e), "GPUConflict", fmt.Sprintf("GPUs %v of node %s are missing and %v are booked by another pod; gpusched books stand-ins on free GPUs", missing, e.node, taken))
		e.trusted, e.devices = false, nil
	}
	srv := l.st.Server(s)
	e.devices = e.devices[:0]
	var refs []cluster.GPURef
	for i := range srv.GPUs {
		r := cluster.GPURef{Server: s, GPU: i}
		if len(refs) < e.gpus && l.st.Holder(r) == "" {
			refs = append(refs, r)
			e.devices = append(e.devices, srv.GPUs[i].Index)
		}
	}
	slices.Sort(e.devices)
	if len(refs) < e.gpus {
		l.warn(podRef(e), "GPUConflict", fmt.Sprintf("node %s has %d free GPUs for a pod bound with %d; gpusched counts the %d", e.node, len(refs), e.gpus, len(refs)))
	}
	l.bindLocked(string(uid), refs)
}

// bindLocked binds refs, healthy or not (a bound pod may sit on GPUs that
// failed since): failed GPUs are recovered for the bind and failed again.
func (l *Ledger) bindLocked(holder string, refs []cluster.GPURef) {
	var failed []cluster.GPURef
	for _, r := range refs {
		if l.st.Failed(r) {
			failed = append(failed, r)
		}
	}
	if len(failed) > 0 {
		_ = l.st.Recover(failed...)
	}
	_ = l.st.Bind(holder, refs) // every ref is free and named once
	if len(refs) > 0 {
		l.touchLocked(l.st.Server(refs[0].Server).ID)
	}
	if len(failed) > 0 {
		_, _ = l.st.Fail(failed...)
	}
}

// Fit says whether node has n free healthy GPUs of an allowed type, and
// why not.
// A node whose GPUs a DRA driver publishes takes only pods that ask for
// them through claims (FitClaims).
func (l *Ledger) Fit(node string, n int, allows func(topology.GPUType) bool) error {
	return l.fit(node, n, allows, false)
}

// FitClaims is Fit for a pod that asks for its GPUs through DRA claims:
// only DRA nodes take it.
func (l *Ledger) FitClaims(node string, n int, allows func(topology.GPUType) bool) error {
	return l.fit(node, n, allows, true)
}

// errKind: the pod asks for GPUs in a way the node does not serve.
var errKind = errors.New("gpusched: GPUs of another kind")

func (l *Ledger) fit(node string, n int, allows func(topology.GPUType) bool, claims bool) error {
	l.mu.RLock()
	defer l.mu.RUnlock()
	e, s, err := l.nodeLocked(node)
	if err != nil {
		return err
	}
	switch isDRA := e.node.DRA != nil; {
	case isDRA && !claims:
		return fmt.Errorf("%w: the node's GPUs are DRA devices (%s): ask for them with a ResourceClaim of DeviceClass %s; gpusched does not map %s to them", errKind, e.node.DRA.Driver, e.node.DRA.Driver, l.res)
	case !isDRA && claims:
		return fmt.Errorf("%w: the pod asks for GPUs with ResourceClaims, the node's are a device plugin's (%s)", errKind, l.res)
	}
	if !allows(e.typ) {
		return fmt.Errorf("%w: GPU type %s is not allowed", errTypeNotAllowed, e.typ)
	}
	if !e.node.Ready {
		return fmt.Errorf("%w: node is not Ready", ErrNoRoom)
	}
	// The node's GPUs are all of e.typ: its free GPUs of any type are
	// those of e.typ (one index, where ServerFreeOf looks the type up).
	if free := l.st.ServerFree(s); free < n {
		return fmt.Errorf("%w: %d free healthy GPUs, the pod needs %d", ErrNoRoom, free, n)
	}
	// Allocatable below the GPU count: GPUs the device plugin withholds.
	// The pods' GPUs, bound or reserved, count against it, as in
	// kube-scheduler's resource accounting.
	if a := e.node.Allocatable; a >= 0 && a < e.total {
		if used := l.used[node]; a-used < n {
			return fmt.Errorf("%w: allocatable %s is %d with %d in use, the pod needs %d", ErrNoRoom, l.res, a, used, n)
		}
	}
	return nil
}

var errTypeNotAllowed = errors.New("gpusched: GPU type not allowed")

func (l *Ledger) nodeLocked(node string) (*nodeEntry, int, error) {
	e := l.nodes[node]
	if e == nil {
		return nil, 0, fmt.Errorf("%w: %s", ErrUnknownNode, node)
	}
	return e, e.server, nil
}

// Choice is the best set of n free GPUs on a node: their NVML indices,
// their GPUChooser score and that of the best set on the empty node, and
// the node's free and total GPUs. A Choice is a value the ledger hands
// out; it shares nothing with the ledger and is safe for concurrent reads.
type Choice struct {
	Devices     []int
	Score, Best int
	Free, Total int
}

// Choose returns the best set of n free GPUs on node, changing nothing.
// Answers are cached until the node's GPUs change, so that scoring a node
// that did not change since the last pod costs a lookup.
func (l *Ledger) Choose(node string, n int) (Choice, error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	e := l.nodes[node]
	if e == nil {
		return Choice{}, fmt.Errorf("%w: %s", ErrUnknownNode, node)
	}
	e.cacheMu.Lock()
	if cc, ok := e.choices[n]; ok && cc.gen == e.gen {
		e.cacheMu.Unlock()
		return cc.c, cc.err
	}
	e.cacheMu.Unlock()
	c, err := l.chooseLocked(node, n)
	e.cacheMu.Lock()
	if e.choices == nil {
		e.choices = map[int]cachedChoice{}
	}
	e.choices[n] = cachedChoice{gen: e.gen, c: c, err: err}
	e.cacheMu.Unlock()
	return c, err
}

// Usable reports whether node can take a new pod now: nil, or an error
// wrapping ErrUnknownNode (deleted, or not a GPU node) or ErrNodeNotReady.
func (l *Ledger) Usable(node string) error {
	l.mu.RLock()
	defer l.mu.RUnlock()
	e, _, err := l.nodeLocked(node)
	if err != nil {
		return err
	}
	if !e.node.Ready || e.cordoned {
		return fmt.Errorf("%w: %s", ErrNodeNotReady, node)
	}
	return nil
}

// Room returns the free GPUs and the GPUs of a node, without choosing.
func (l *Ledger) Room(node string) (free, total int, err error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	e, s, err := l.nodeLocked(node)
	if err != nil {
		return 0, 0, err
	}
	return l.st.ServerFree(s), e.total, nil
}

func (l *Ledger) chooseLocked(node string, n int) (Choice, error) {
	e, s, err := l.nodeLocked(node)
	if err != nil {
		return Choice{}, err
	}
	srv := l.st.Server(s)
	c := Choice{Free: l.st.ServerFree(s), Total: len(srv.GPUs)}
	if n <= 0 || n > c.Free || !e.node.Ready {
		return c, fmt.Errorf("%w: %d free, %d asked", ErrNoRoom, c.Free, n)
	}
	pos, err := l.chooser.Choose(srv, l.st.FreeMask(s), n)
	if err != nil {
		return c, fmt.Errorf("%w: %w", ErrNoRoom, err)
	}
	c.Score = placement.Score(srv, pos)
	c.Best = e.best(srv, n, l.chooser)
	c.Devices = make([]int, len(pos))
	for k, p := range pos {
		c.Devices[k] = srv.GPUs[p].Index
	}
	slices.Sort(c.Devices)
	return c, nil
}

// best returns the best score of n GPUs on the empty server, cached.
func (e *nodeEntry) best(srv *topology.Server, n int, ch placement.GPUChooser) int {
	e.cacheMu.Lock()
	defer e.cacheMu.Unlock()
	if e.ideal == nil {
		e.ideal = make([]int, len(srv.GPUs)+1)
		for k := range e.ideal {
			e.ideal[k] = -1
		}
	}
	if e.ideal[n] < 0 {
		all := make([]bool, len(srv.GPUs))
		for i := range all {
			all[i] = true
		}
		e.ideal[n] = 0
		if pos, err := ch.Choose(srv, all, n); err == nil {
			e.ideal[n] = placement.Score(srv, pos)
		}
	}
	return e.ideal[n]
}

// Reserve books the best n free GPUs on node for the pod and returns
// their NVML indices. A pod that held GPUs already gives them back first.
func (l *Ledger) Reserve(p *corev1.Pod, node string, n int) ([]int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if e := l.pods[p.UID]; e != nil {
		if e.bound {
			return nil, fmt.Errorf("gpusched: pod %s/%s is bound already", p.Namespace, p.Name)
		}
		l.dropLocked(p.UID)
	}
	c, err := l.chooseLocked(node, n)
	if err != nil {
		return nil, err
	}
	e := &podEntry{ns: p.Namespace, name: p.Name, node: node, devices: c.Devices, gpus: n, trusted: true}
	l.addLocked(p.UID, e)
	l.bookLocked(p.UID, e)
	return c.Devices, nil
}

// Release gives back the GPUs booked for a pod that was not bound (at
// Unreserve); a bound pod keeps its GPUs until it is deleted or finishes.
func (l *Ledger) Release(uid types.UID) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if e := l.pods[uid]; e != nil && !e.bound {
		l.dropLocked(uid)
	}
}

// DRANode returns what a DRA node's slices tell (its server and devices),
// and false for a node the ledger does not hold or whose GPUs a device
// plugin serves. The node is a copy: the caller may keep it.
func (l *Ledger) DRANode(node string) (model.Node, bool) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	e := l.nodes[node]
	if e == nil || e.node.DRA == nil {
		return model.Node{}, false
	}
	return e.node, true
}

// ReserveDevices books the GPUs at positions pos of DRA node node for the
// pod (the allocation of its claims, kube/dra). A pod that held GPUs
// already gives them back first; a position out of range or held by
// another is an error, and nothing is booked.
func (l *Ledger) ReserveDevices(p *corev1.Pod, node string, pos []int) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if e := l.pods[p.UID]; e != nil {
		if e.bound {
			return fmt.Errorf("gpusched: pod %s/%s is bound already", p.Namespace, p.Name)
		}
		l.dropLocked(p.UID)
	}
	ne, s, err := l.nodeLocked(node)
	if err != nil {
		return err
	}
	if ne.node.DRA == nil {
		return fmt.Errorf("gpusched: node %s: its GPUs are not DRA devices", node)
	}
	refs := make([]cluster.GPURef, 0, len(pos))
	idx := make([]int, 0, len(pos))
	for _, i := range pos {
		r := cluster.GPURef{Server: s, GPU: i}
		if i < 0 || i >= ne.total || l.st.Holder(r) != "" {
			return fmt.Errorf("%w: GPU %d of node %s is not free", ErrNoRoom, i, node)
		}
		refs = append(refs, r)
		idx = append(idx, ne.node.Server.GPUs[i].Index)
	}
	e := &podEntry{ns: p.Namespace, name: p.Name, node: node, devices: idx, gpus: len(pos), trusted: true, dra: true}
	l.addLocked(p.UID, e)
	l.bindLocked(string(p.UID), refs)
	return nil
}

// draHolder holds, in the ledger's state, the GPUs of a DRA node that
// claims hold but no pod the ledger books (claims allocated by another
// scheduler or profile, or before a restart).
func draHolder(node string) string { return "dra-claims/" + node }

// SyncDRA books as held by claims the GPUs of DRA node node that inUse
// reports allocated (the claim tracker's devices, in-flight allocations
// included) and no pod of the ledger holds, and frees those no longer
// allocated. A node the ledger does not hold, or not a DRA node, is left
// alone.
func (l *Ledger) SyncDRA(node string, inUse func(driver, pool, device string) bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	e := l.nodes[node]
	if e == nil || e.node.DRA == nil {
		return
	}
	h := draHolder(node)
	l.st.Release(h)
	var refs []cluster.GPURef
	for i, d := range e.node.DRA.Devices {
		r := cluster.GPURef{Server: e.server, GPU: i}
		if l.st.Holder(r) == "" && inUse(e.node.DRA.Driver, d.Pool, d.Name) {
			refs = append(refs, r)
		}
	}
	l.bindLocked(h, refs)
	l.touchLocked(node)
}

// MarkBound records that the pod was bound with its booking.
func (l *Ledger) MarkBound(uid types.UID) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if e := l.pods[uid]; e != nil {
		e.bound = true
	}
}

// Booking returns the node and NVML indices booked for a pod.
func (l *Ledger) Booking(uid types.UID) (node string, devices []int, ok bool) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	e := l.pods[uid]
	if e == nil {
		return "", nil, false
	}
	return e.node, slices.Clone(e.devices), true
}

// Bound reports whether the pod is booked and bound.
func (l *Ledger) Bound(uid types.UID) bool {
	l.mu.RLock()
	defer l.mu.RUnlock()
	e := l.pods[uid]
	return e != nil && e.bound
}

// roomFor returns a score of a node, for a pod group's first member: 1
// when the node's NVLink domain has need free healthy GPUs of an allowed
// type on Ready nodes, 0.5 when its rack has, else 0. The counts are taken
// once, now.
func (l *Ledger) roomFor(need int, allows func(topology.GPUType) bool) func(node string) float64 {
	l.mu.RLock()
	byDomain, byRack := map[string]int{}, map[string]int{}
	places := make(map[string]Place, len(l.nodes))
	for name, e := range l.nodes {
		srv := l.st.Server(e.server)
		places[name] = Place{Node: name, Rack: srv.Rack, Domain: srv.Domain}
		if !e.node.Ready || e.cordoned || !allows(e.typ) {
			continue
		}
		free := l.st.ServerFree(e.server)
		if srv.Domain != "" {
			byDomain[srv.Domain] += free
		}
		if srv.Rack != "" {
			byRack[srv.Rack] += free
		}
	}
	l.mu.RUnlock()
	return func(node string) float64 {
		p := places[node]
		switch {
		case p.Domain != "" && byDomain[p.Domain] >= need:
			return 1
		case p.Rack != "" && byRack[p.Rack] >= need:
			return 0.5
		}
		return 0
	}
}

// Place describes where a node is: its rack and NVLink domain. It is a
// value, safe for concurrent use.
type Place struct{ Node, Rack, Domain string }

// PlaceOf returns the rack and domain of a node.
func (l *Ledger) PlaceOf(node string) (Place, bool) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	e := l.nodes[node]
	if e == nil {
		return Place{}, false
	}
	return Place{Node: node, Rack: e.node.Server.Rack, Domain: e.node.Server.Domain}, true
}

// Largest returns the most GPUs one node has of a type that allows says
// yes to.
func (l *Ledger) Largest(allows func(topology.GPUType) bool) int {
	l.mu.RLock()
	defer l.mu.RUnlock()
	m := 0
	for _, t := range l.st.Types() {
		if allows(t) {
			m = max(m, l.st.LargestServer(t))
		}
	}
	return m
}

// Free returns the free GPUs of the types allows says yes to.
func (l *Ledger) Free(allows func(topology.GPUType) bool) int {
	l.mu.RLock()
	defer l.mu.RUnlock()
	n := 0
	for _, t := range l.st.Types() {
		if allows(t) {
			n += l.st.Free(t)
		}
	}
	return n
}

// Check verifies the ledger: the state's invariants, and that every pod
// entry on a known node holds exactly its devices.
func (l *Ledger) Check() error {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if err := l.st.Check(); err != nil {
		return err
	}
	for name, e := range l.nodes {
		s, ok := l.st.ServerIndex(name)
		if !ok || s != e.server {
			return fmt.Errorf("gpusched: node %s is at position %d of the state, cached %d (%v)", name, s, e.server, ok)
		}
		srv := l.st.Server(s)
		if len(srv.GPUs) != e.total || srv.GPUs[0].Type != e.typ || l.st.ServerFree(s) != l.st.ServerFreeOf(s, e.typ) {
			return fmt.Errorf("gpusched: node %s has %d GPUs of type %s, cached %d of %s", name, len(srv.GPUs), srv.GPUs[0].Type, e.total, e.typ)
		}
	}
	for node, uids := range l.byNode {
		n := 0
		for uid := range uids {
			n += l.pods[uid].gpus
		}
		if n != l.used[node] {
			return fmt.Errorf("gpusched: pods on node %s hold %d GPUs, counted %d", node, n, l.used[node])
		}
	}
	for uid, e := range l.pods {
		if _, ok := l.st.ServerIndex(e.node); !ok {
			continue
		}
		held := l.st.Held(string(uid))
		if len(held) != len(e.devices) || len(e.devices) > e.gpus || e.trusted && len(e.devices) != e.gpus {
			return fmt.Errorf("gpusched: pod %s/%s holds %d GPUs, booked %d, asks %d", e.ns, e.name, len(held), len(e.devices), e.gpus)
		}
		for _, r := range held {
			if !slices.Contains(e.devices, l.st.Server(r.Server).GPUs[r.GPU].Index) {
				return fmt.Errorf("gpusched: pod %s/%s holds GPU %d of %s, not booked", e.ns, e.name, r.GPU, e.node)
			}
		}
	}
	return nil
}

func joinErrs(errs []error) string {
	s := ""
	for i, e := range errs {
		if i > 0 {
			s += "; "
		}
		s += e.Error()
	}
	return s
}

// podRef is a minimal object to report an event about a pod entry.
func podRef(e *podEntry) *corev1.ObjectReference {
	return &corev1.ObjectReference{Kind: "Pod", Namespace: e.ns, Name: e.name}
}

// GPUCounts are a type's GPUs in the ledger: all of them, the healthy
// ones, and the healthy ones no pod holds. A plain value, safe for
// concurrent use once made (nothing changes it).
type GPUCounts struct {
	Total, Healthy, Free int
}

// Counts returns the GPUs of each type.
func (l *Ledger) Counts() map[topology.GPUType]GPUCounts {
	l.mu.RLock()
	defer l.mu.RUnlock()
	out := make(map[topology.GPUType]GPUCounts, len(l.st.Types()))
	for _, t := range l.st.Types() {
		out[t] = GPUCounts{Total: l.st.Total(t), Healthy: l.st.Capacity(t), Free: l.st.Free(t)}
	}
	return out
}
