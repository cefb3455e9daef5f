package gpusched

import (
	"context"
	"errors"
	"fmt"
	"io"
	resourcehelper "k8s.io/component-helpers/resource"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gpusched/gpusched/gang"
	"github.com/gpusched/gpusched/kube/model"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/dynamicresources"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/feature"
)

// Name is the plugin's name in the scheduler's registry and profiles.
const Name = "GPUSched"

// Plugin is gpusched's scheduler plugin (see the package documentation).
// The framework calls it from its scheduling and binding goroutines; it is
// safe for that concurrent use.
type Plugin struct {
	h       fwk.Handle
	args    Args
	order   gang.Order
	res     corev1.ResourceName
	ledger  *Ledger
	groups  *groups
	cosched *gang.Coscheduler
	stats   *stats
	service *service
	logger  klog.Logger

	linkW, packW, gangW, hostW float64

	// dra is the plugin's part in DRA; nil without a DRA manager.
	dra *draPart

	synced   []cache.InformerSynced
	isSynced atomic.Bool
	attempt  atomic.Uint64
	cycles   atomic.Uint64

	// waitingSince is when each pod group's first member waited at
	// Permit, for gpusched_plugin_pod_group_wait_duration_seconds.
	waitingMu    sync.Mutex
	waitingSince map[string]time.Time

	backoffMu sync.Mutex
	backoff   map[string]*time.Timer // groups whose members are activated when their backoff ends

	stop context.CancelFunc
}

var (
	_ fwk.QueueSortPlugin   = (*Plugin)(nil)
	_ fwk.PreFilterPlugin   = (*Plugin)(nil)
	_ fwk.FilterPlugin      = (*Plugin)(nil)
	_ fwk.PreScorePlugin    = (*Plugin)(nil)
	_ fwk.ScorePlugin       = (*Plugin)(nil)
	_ fwk.ReservePlugin     = (*Plugin)(nil)
	_ fwk.PermitPlugin      = (*Plugin)(nil)
	_ fwk.BindPlugin        = (*Plugin)(nil)
	_ fwk.PreBindPlugin     = (*Plugin)(nil)
	_ fwk.PostBindPlugin    = (*Plugin)(nil)
	_ fwk.EnqueueExtensions = (*Plugin)(nil)
	_ fwk.SignPlugin        = (*Plugin)(nil)
	_ io.Closer             = (*Plugin)(nil)
)

// New builds the plugin (a framework PluginFactory): it decodes its args,
// and follows the nodes and pods of the handle's informers into its ledger.
func New(ctx context.Context, obj runtime.Object, h fwk.Handle) (fwk.Plugin, error) {
	args, err := decodeArgs(obj)
	if err != nil {
		return nil, err
	}
	order, err := args.order()
	if err != nil {
		return nil, err
	}
	registerMetrics()
	pl := &Plugin{h: h, args: args, order: order, res: args.resource(),
		logger: klog.FromContext(ctx).WithName(Name), backoff: map[string]*time.Timer{}, waitingSince: map[string]time.Time{}}
	pl.linkW, pl.packW, pl.gangW, pl.hostW = args.weights()
	pl.cosched = &gang.Coscheduler{Timeout: args.permitTimeout(), Backoff: args.backoff()}
	pl.groups = newGroups(pl.cosched.Delete)
	pl.ledger = NewLedger(model.NodeOptions{Resource: pl.res, RackLabel: args.RackLabel, DomainLabel: args.DomainLabel}, pl.warn)
	pl.service = newService(nil)
	if h == nil || h.SharedInformerFactory() == nil {
		return nil, errors.New("gpusched: the framework handle has no informer factory")
	}
	// A key the admin named but that cannot be read stops the scheduler at
	// start, with the reason (and, for a missing Secret, the command that
	// makes it): signing with a key of this process only would make every
	// bound pod a stand-in after the next restart.
	key, err := loadRecordKey(ctx, &args, h.ClientSet())
	if err != nil {
		return nil, err
	}
	if args.RecordKeySecret == "" && args.RecordKeyFile == "" {
		pl.logger.Info("no recordKeySecret or recordKeyFile: device records are signed with a key of this process only, and bound pods are stand-ins after a restart")
	}
	pl.ledger.SetRecordKey(key)
	ledgers.Store(pl.ledger, struct{}{})
	ctx, pl.stop = context.WithCancel(ctx)
	pl.stats = newStats(args.StatsFile)
	if args.StatsFile != "" {
		go pl.stats.run(ctx, pl.logger)
	}
	nodes := h.SharedInformerFactory().Core().V1().Nodes().Informer()
	reg, err := nodes.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(o any) { pl.onNode(o) },
		UpdateFunc: func(old, o any) {
			// A status update that changes nothing gpusched reads (a
			// kubelet's heartbeat) takes no ledger lock.
			if a, ok := old.(*corev1.Node); ok {
				if b, ok := o.(*corev1.Node); ok && model.SameNode(a, b, pl.ledger.opts) {
					return
				}
			}
			pl.onNode(o)
		},
		DeleteFunc: func(o any) { pl.onNodeDelete(o) },
	})
	if err != nil {
		return nil, fmt.Errorf("gpusched: node informer: %w", err)
	}
	pl.synced = append(pl.synced, reg.HasSynced)
	pods := h.SharedInformerFactory().Core().V1().Pods().Informer()
	reg, err = pods.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { pl.onPod(o) },
		UpdateFunc: func(_, o any) { pl.onPod(o) },
		DeleteFunc: func(o any) { pl.onPodDelete(o) },
	})
	if err != nil {
		return nil, fmt.Errorf("gpusched: pod informer: %w", err)
	}
	pl.synced = append(pl.synced, reg.HasSynced)
	if err := pl.setupDRA(dynamicresources.AllocatorFeatures(feature.NewSchedulerFeaturesFromGates(utilfeature.DefaultFeatureGate))); err != nil {
		return nil, err
	}
	return pl, nil
}

// Name implements fwk.Plugin.
func (pl *Plugin) Name() string { return Name }

// Close stops the plugin's goroutines and writes its statistics.
func (pl *Plugin) Close() error {
	pl.stop()
	ledgers.Delete(pl.ledger)
	pl.backoffMu.Lock()
	for _, t := range pl.backoff {
		t.Stop()
	}
	pl.backoffMu.Unlock()
	return pl.stats.write()
}

// Ledger returns the plugin's device ledger (for tests and embedders).
func (pl *Plugin) Ledger() *Ledger { return pl.ledger }

func (pl *Plugin) warn(obj any, reason, msg string) {
	pl.logger.Info("bad input", "reason", reason, "message", msg)
	ledgerConflicts.WithLabelValues(reason).Inc()
	ro, ok := obj.(runtime.Object)
	if !ok || pl.h == nil || pl.h.EventRecorder() == nil {
		return
	}
	pl.h.EventRecorder().Eventf(ro, nil, corev1.EventTypeWarning, reason, "Scheduling", "%s", msg)
}

func (pl *Plugin) onNode(o any) {
	if n, ok := o.(*corev1.Node); ok {
		pl.ledger.OnNode(n)
		if err := pl.ledger.Usable(n.Name); errors.Is(err, ErrNodeNotReady) {
			pl.rejectWaitingOn(n.Name, "went NotReady or was cordoned")
		}
	}
}

func (pl *Plugin) onNodeDelete(o any) {
	if n, ok := unwrapTombstone(o).(*corev1.Node); ok {
		pl.ledger.OnNodeDelete(n.Name)
		pl.rejectWaitingOn(n.Name, "was deleted")
	}
}

// unwrapTombstone returns the object a delete event carries, out of the
// informer's tombstone when it missed the deletion.
func unwrapTombstone(o any) any {
	if t, ok := o.(cache.DeletedFinalStateUnknown); ok {
		return t.Obj
	}
	return o
}

// rejectWaitingOn rejects the pods that wait at Permit for the rest of
// their pod group on a node that can no longer take them (deleted,
// NotReady, cordoned): their group is unreserved and tried again, instead
// of binding to that node once the group is complete. The stock
// coscheduling plugin leaves them waiting until the group's timeout.
func (pl *Plugin) rejectWaitingOn(node, why string) {
	if pl.h == nil {
		return
	}
	pl.h.IterateOverWaitingPods(func(wp fwk.WaitingPod) {
		uid := wp.GetPod().UID
		if on, _, ok := pl.ledger.Booking(uid); ok && on == node && !pl.ledger.Bound(uid) {
			wp.Reject(Name, fmt.Sprintf("gpusched: node %s %s while the pod waited for its pod group", node, why))
		}
	})
}

func (pl *Plugin) onPod(o any) {
	p, ok := o.(*corev1.Pod)
	if !ok {
		return
	}
	pl.groups.onPod(p, pl.res)
	pl.ledger.OnPod(p)
	switch gpus, _ := model.PodGPUs(p, pl.res); {
	case p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed || p.DeletionTimestamp != nil:
		pl.service.ended(p.UID)
	case p.Spec.NodeName != "" && gpus > 0:
		pl.service.bound(p, gpus)
	}
}

func (pl *Plugin) onPodDelete(o any) {
	if p, ok := unwrapTombstone(o).(*corev1.Pod); ok {
		pl.groups.onPodDelete(p)
		pl.ledger.OnPodDelete(p.UID)
		pl.service.ended(p.UID)
	}
}

// waitSynced waits, the first time, until the informers have handed the
// plugin every node and pod, so that the ledger holds what is bound.
func (pl *Plugin) waitSynced(ctx context.Context) *fwk.Status {
	if pl.isSynced.Load() {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if !cache.WaitForCacheSync(ctx.Done(), pl.synced...) {
		return fwk.NewStatus(fwk.Error, "gpusched: the node and pod informers have not synced yet")
	}
	pl.isSynced.Store(true)
	return nil
}

// cycleData is what the plugin keeps about a pod during one scheduling
// cycle.
type cycleData struct {
	req model.Request
	// milliCPU and memory are the pod's requests (the host term of the
	// score).
	milliCPU, memory int64
	nanos            atomic.Int64 // time spent in the plugin for this pod
	// places of the pod group's members already booked (PreScore); for
	// its first member, room scores a node by the room its NVLink domain
	// or rack has for the whole group.
	places []Place
	room   func(node string) float64
	// permitRejected: Permit rejected the pod (its group is backing off).
	permitRejected bool
	// sample: this cycle's Filter and Score calls are timed
	// (metricsSampleEvery), and so its time per pod is known.
	sample bool
	// claims: the pod asks for its GPUs through DRA claims (nil: through
	// the extended resource).
	claims *draClaims
}

// Clone implements fwk.StateData; the data is shared by design (the time
// spent is summed over every copy).
func (d *cycleData) Clone() fwk.StateData { return d }

const stateKey fwk.StateKey = Name

func cycle(state fwk.CycleState) *cycleData {
	if state == nil {
		return nil
	}
	v, err := state.Read(stateKey)
	if err != nil {
		return nil
	}
	d, _ := v.(*cycleData)
	return d
}

func (d *cycleData) since(t time.Time) {
	if d != nil {
		d.nanos.Add(int64(time.Since(t)))
	}
}

// signKey names the plugin's part of a pod's signature.
const signKey = "gpusched.io/Request()"

// signature is what the plugin's filtering and scoring of a pod depend
// on besides the nodes (and, for a pod group's member, where the others
// are).
type signature struct {
	GPUs  int      `json:"gpus"`
	Types []string `json:"types,omitempty"`
	Group string   `json:"group,omitempty"`
}

// SignPod implements fwk.SignPlugin, so that the scheduler may reuse the
// ranking of nodes between consecutive pods that ask for the same
// (opportunistic batching, KEP-5598): a pod's Filter and Score depend on
// its GPUs and allowed types, and on nothing else but the node. A pod
// group's member also scores nodes by closeness to the members placed
// before it, so its signature names its group: consecutive members of one
// group share a ranking, in which the framework rescores the node the
// last member went to (where closeness changed most: the member is
// there) and keeps the others' scores; members of different groups never
// share one. Unsigned, members were scheduled one full cycle each, which
// made a workload with pod groups the slowest (#28). Bad input is not
// signed: PreFilter reports it.
func (pl *Plugin) SignPod(_ context.Context, p *corev1.Pod) ([]fwk.SignFragment, *fwk.Status) {
	if len(p.Spec.ResourceClaims) > 0 {
		// Its Filter depends on its claims, which the signature cannot
		// name (the in-tree DynamicResources plugin does not sign them
		// either).
		return nil, fwk.NewStatus(fwk.Unschedulable, "gpusched: a pod with ResourceClaims is not signed")
	}
	req, err := model.ParseRequest(p, pl.res)
	if err != nil {
		return nil, fwk.NewStatus(fwk.Unschedulable, "gpusched: bad input")
	}
	sig := signature{GPUs: req.GPUs, Group: req.Group}
	for _, t := range req.Types {
		sig.Types = append(sig.Types, string(t))
	}
	slices.Sort(sig.Types)
	return []fwk.SignFragment{{Key: signKey, Value: sig}}, nil
}

// PreFilter implements fwk.PreFilterPlugin.
func (pl *Plugin) PreFilter(ctx context.Context, state fwk.CycleState, p *corev1.Pod, _ []fwk.NodeInfo) (*fwk.PreFilterResult, *fwk.Status) {
	start := time.Now()
	d := &cycleData{sample: pl.cycles.Add(1)%metricsSampleEvery == 0}
	defer func() {
		d.since(start)
		observe(pointPreFilter, start)
	}()
	st := pl.waitSynced(ctx)
	if st != nil {
		return nil, st
	}
	req, err := model.ParseRequest(p, pl.res)
	if err != nil {
		return nil, fwk.NewStatus(fwk.UnschedulableAndUnresolvable, "gpusched: "+err.Error())
	}
	if st := pl.preFilterClaims(p, &req, d); st != nil {
		return nil, st
	}
	d.req = req
	reqs := resourcehelper.PodRequests(p, resourcehelper.PodResourcesOptions{})
	d.milliCPU, d.memory = reqs.Cpu().MilliValue(), reqs.Memory().Value()
	state.Write(stateKey, d)
	if req.GPUs > 0 {
		if largest := pl.ledger.Largest(req.Allows); req.GPUs > largest {
			return nil, fwk.NewStatus(fwk.UnschedulableAndUnresolvable,
				fmt.Sprintf("gpusched: the pod asks for %d GPUs but the largest node%s has %d", req.GPUs, typesSuffix(req), largest))
		}
	}
	if req.Group != "" && !req.Upstream { // an upstream PodGroup's barrier is GangScheduling's
		if msg, unresolvable := pl.groups.check(req.Group, req.MinMember); msg != "" {
			code := fwk.Unschedulable
			if unresolvable {
				code = fwk.UnschedulableAndUnresolvable
			}
			return nil, fwk.NewStatus(code, "gpusched: "+msg)
		}
		if err := pl.cosched.SetGroup(req.Group, req.MinMember); err != nil {
			return nil, fwk.NewStatus(fwk.UnschedulableAndUnresolvable, "gpusched: "+err.Error())
		}
		if req.GPUs > 0 {
			if need, free := pl.groupNeed(req), pl.ledger.Free(req.Allows); need > free {
				return nil, fwk.NewStatus(fwk.Unschedulable,
					fmt.Sprintf("gpusched: pod group %s needs %d more GPUs%s, %d are free", req.Group, need, typesSuffix(req), free))
			}
		}
	}
	if req.GPUs == 0 && d.claims == nil {
		return nil, fwk.NewStatus(fwk.Skip)
	}
	return nil, nil
}

func typesSuffix(r model.Request) string {
	if r.Types == nil {
		return ""
	}
	s := " of type"
	for i, t := range r.Types {
		if i > 0 {
			s += ","
		}
		s += " " + string(t)
	}
	return s
}

// groupNeed returns the GPUs the group's members without a booking still
// need before it reaches its minimum.
func (pl *Plugin) groupNeed(req model.Request) int {
	members := pl.groups.members(req.Group)
	booked := 0
	for uid := range members {
		if _, _, ok := pl.ledger.Booking(uid); ok {
			booked++
		}
	}
	if booked >= req.MinMember {
		return req.GPUs
	}
	return (req.MinMember - booked) * req.GPUs
}

// PreFilterExtensions implements fwk.PreFilterPlugin: none (the ledger, not
// the node's pods, says what is free).
func (pl *Plugin) PreFilterExtensions() fwk.PreFilterExtensions { return nil }

// Filter implements fwk.FilterPlugin.
func (pl *Plugin) Filter(_ context.Context, state fwk.CycleState, _ *corev1.Pod, ni fwk.NodeInfo) *fwk.Status {
	d := cycle(state)
	if d == nil || ni == nil || ni.Node() == nil {
		return fwk.NewStatus(fwk.Error, "gpusched: no PreFilter state or no node")
	}
	// Filter runs once per node and pod: timed in one cycle of
	// metricsSampleEvery only (two clock reads and a shared counter per
	// node were a tenth of the plugin's CPU at 1,000 nodes).
	if !d.sample {
		return pl.filter(d, ni.Node())
	}
	start := time.Now()
	st := pl.filter(d, ni.Node())
	d.since(start)
	observe(pointFilter, start)
	return st
}

func (pl *Plugin) filter(d *cycleData, n *corev1.Node) *fwk.Status {
	var err error
	switch {
	case d.claims == nil:
		err = pl.ledger.Fit(n.Name, d.req.GPUs, d.req.Allows)
	case d.claims.ext != nil && len(d.claims.shared) > 0: // its claim, allocated by an earlier cycle
		return pl.filterDRA(d.claims, n)
	case d.claims.ext != nil: // the extended resource: either kind of node
		if err = pl.ledger.Fit(n.Name, d.req.GPUs, d.req.Allows); errors.Is(err, errKind) {
			if err = pl.ledger.FitClaims(n.Name, d.req.GPUs, d.req.Allows); err == nil {
				return pl.filterDRA(d.claims, n)
			}
		}
	case d.req.GPUs == 0: // claims allocated already, for other pods
		return pl.filterDRA(d.claims, n)
	default:
		if err = pl.ledger.FitClaims(n.Name, d.req.GPUs, d.req.Allows); err == nil {
			return pl.filterDRA(d.claims, n)
		}
	}
	switch {
	case err == nil:
		return nil
	case errors.Is(err, ErrUnknownNode):
		return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, "gpusched: node has no GPUs gpusched manages")
	case errors.Is(err, errTypeNotAllowed), errors.Is(err, errKind):
		return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, err.Error())
	}
	return fwk.NewStatus(fwk.Unschedulable, err.Error())
}

// PreScore implements fwk.PreScorePlugin: it finds where the pod's group
// members are booked.
func (pl *Plugin) PreScore(_ context.Context, state fwk.CycleState, p *corev1.Pod, _ []fwk.NodeInfo) *fwk.Status {
	start := time.Now()
	d := cycle(state)
	defer func() {
		d.since(start)
		observe(pointPreScore, start)
	}()
	if d == nil || d.req.GPUs == 0 {
		return fwk.NewStatus(fwk.Skip)
	}
	d.places, d.room = d.places[:0], nil
	if d.req.Group != "" {
		members := pl.groups.members(d.req.Group)
		for uid := range members {
			if uid == p.UID {
				continue
			}
			if node, _, ok := pl.ledger.Booking(uid); ok {
				if pc, ok := pl.ledger.PlaceOf(node); ok {
					d.places = append(d.places, pc)
				}
			}
		}
		if len(d.places) == 0 && len(members) > 1 {
			// The group's first member: where the rest can follow (the
			// NVLink domain, else the rack, with room for every member).
			d.room = pl.ledger.roomFor(len(members)*d.req.GPUs, d.req.Allows)
		}
	}
	return nil
}

// Score implements fwk.ScorePlugin: 0 to 100, from the links of the best
// GPU set on the node, best fit, and closeness to the group's members.
func (pl *Plugin) Score(_ context.Context, state fwk.CycleState, _ *corev1.Pod, ni fwk.NodeInfo) (int64, *fwk.Status) {
	d := cycle(state)
	if d == nil || ni == nil || ni.Node() == nil {
		return 0, fwk.NewStatus(fwk.Error, "gpusched: no PreFilter state or no node")
	}
	if !d.sample { // as Filter: timed in one cycle of metricsSampleEvery
		return pl.scoreNode(d, ni), nil
	}
	start := time.Now()
	v := pl.scoreNode(d, ni)
	d.since(start)
	observe(pointScore, start)
	return v, nil
}

func (pl *Plugin) scoreNode(d *cycleData, ni fwk.NodeInfo) int64 {
	node := ni.Node().Name
	var c Choice
	var err error
	if d.req.GPUs == 1 {
		// One GPU has no links to score: only the room matters.
		c.Free, c.Total, err = pl.ledger.Room(node)
	} else {
		c, err = pl.ledger.Choose(node, d.req.GPUs)
	}
	if err != nil {
		return 0 // Filter let it through and the state moved since: no preference
	}
	return pl.score(c, d, node, hostFit(c, d, ni))
}

// hostFit is how well the node's CPUs and memory keep up with its GPUs
// once the pod is there: the CPUs (and the memory) left free per GPU left
// free, over the node's per GPU (its proportional share), capped at 1; 1
// when no GPU is left free, or the node states no CPUs or memory.
func hostFit(c Choice, d *cycleData, ni fwk.NodeInfo) float64 {
	left := c.Free - d.req.GPUs
	if left <= 0 || c.Total <= 0 {
		return 1
	}
	alloc, used := ni.GetAllocatable(), ni.GetRequested()
	fit := 1.0
	for _, r := range [][3]int64{{alloc.GetMilliCPU(), used.GetMilliCPU(), d.milliCPU}, {alloc.GetMemory(), used.GetMemory(), d.memory}} {
		if r[0] <= 0 {
			continue
		}
		free := float64(r[0] - r[1] - r[2])
		share := float64(r[0]) / float64(c.Total)
		fit = min(fit, max(0, free/float64(left)/share))
	}
	return fit
}

func (pl *Plugin) score(c Choice, d *cycleData, node string, host float64) int64 {
	link := 1.0
	if c.Best > 0 {
		link = float64(c.Score) / float64(c.Best)
	}
	pack := float64(c.Total-c.Free+d.req.GPUs) / float64(c.Total)
	near, gw := 0.0, 0.0
	if d.room != nil {
		gw, near = pl.gangW, d.room(node)
	}
	if len(d.places) > 0 {
		gw = pl.gangW
		here, _ := pl.ledger.PlaceOf(node)
		for _, pc := range d.places {
			switch {
			case pc.Node == here.Node:
				near += 1
			case pc.Domain != "" && pc.Domain == here.Domain:
				near += 0.75
			case pc.Rack != "" && pc.Rack == here.Rack:
				near += 0.5
			}
		}
		near /= float64(len(d.places))
	}
	sum := pl.linkW + pl.packW + gw + pl.hostW
	if sum == 0 {
		return 0
	}
	s := (pl.linkW*link + pl.packW*pack + gw*near + pl.hostW*host) / sum
	return int64(s*float64(fwk.MaxScore) + 0.5)
}

// ScoreExtensions implements fwk.ScorePlugin: scores are already in
// [0, MaxNodeScore].
func (pl *Plugin) ScoreExtensions() fwk.ScoreExtensions { return nil }

// Reserve implements fwk.ReservePlugin: it books the best GPU set.
func (pl *Plugin) Reserve(ctx context.Context, state fwk.CycleState, p *corev1.Pod, node string) *fwk.Status {
	start := time.Now()
	d := cycle(state)
	defer func() {
		d.since(start)
		observe(pointReserve, start)
	}()
	if _, onDRA := pl.ledger.DRANode(node); d != nil && d.claims != nil && (d.claims.ext == nil || onDRA) {
		n, err := pl.h.SharedInformerFactory().Core().V1().Nodes().Lister().Get(node)
		if err != nil {
			return fwk.NewStatus(fwk.Unschedulable, fmt.Sprintf("gpusched: node %s: %v", node, err))
		}
		return pl.reserveDRA(ctx, d.claims, p, n)
	}
	if d == nil || d.req.GPUs == 0 {
		return nil
	}
	if _, err := pl.ledger.Reserve(p, node, d.req.GPUs); err != nil {
		ledgerConflicts.WithLabelValues("ReserveRace").Inc()
		return fwk.NewStatus(fwk.Unschedulable, err.Error())
	}
	return nil
}

// Unreserve implements fwk.ReservePlugin: it releases the booking and,
// for a pod group, rejects the members waiting (all or nothing).
func (pl *Plugin) Unreserve(_ context.Context, state fwk.CycleState, p *corev1.Pod, _ string) {
	if d := cycle(state); d != nil && d.claims != nil {
		pl.unreserveDRA(d.claims, p)
	}
	pl.ledger.Release(p.UID)
	grp := model.PodGroup(p)
	if grp == "" || model.UpstreamPodGroup(p) != "" {
		return // upstream's GangScheduling rejects its group's members
	}
	if d := cycle(state); d != nil && d.permitRejected {
		return // rejected by its group's backoff: nothing waits
	}
	pl.cosched.Reject(grp)
	pl.h.IterateOverWaitingPods(func(wp fwk.WaitingPod) {
		if wp.GetPod().UID != p.UID && model.PodGroup(wp.GetPod()) == grp {
			wp.Reject(Name, fmt.Sprintf("gpusched: a member of pod group %s failed", grp))
		}
	})
	pl.activateAfterBackoff(grp)
}

// Permit implements fwk.PermitPlugin: pod groups are admitted all
// together by gang.Coscheduler.
func (pl *Plugin) Permit(_ context.Context, state fwk.CycleState, p *corev1.Pod, _ string) (*fwk.Status, time.Duration) {
	start := time.Now()
	d := cycle(state)
	defer func() {
		d.since(start)
		observe(pointPermit, start)
		switch {
		case d == nil || d.req.GPUs == 0:
		case d.sample: // Filter and Score were timed in this cycle
			spent := time.Duration(d.nanos.Load())
			pl.stats.add(spent)
			podDuration.Observe(spent.Seconds())
		default:
			pl.stats.count()
		}
	}()
	if d == nil || d.req.Group == "" || d.req.Upstream {
		return nil, 0 // no group, or an upstream PodGroup: GangScheduling's barrier holds it
	}
	grp := d.req.Group
	if err := pl.cosched.SetGroup(grp, d.req.MinMember); err != nil {
		return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, "gpusched: "+err.Error()), 0
	}
	allow := func() (*fwk.Status, time.Duration) {
		groupPermits.WithLabelValues("allow").Inc()
		pl.groupWaited(grp, true)
		pl.h.IterateOverWaitingPods(func(wp fwk.WaitingPod) {
			if model.PodGroup(wp.GetPod()) == grp {
				wp.Allow(Name)
			}
		})
		return nil, 0
	}
	// A member of a group some of whose pods are bound joins them: the
	// group was admitted whole before (by this process, or by one that
	// stopped while binding it).
	for uid := range pl.groups.members(grp) {
		if uid != p.UID && pl.ledger.Bound(uid) {
			return allow()
		}
	}
	member := string(p.UID) + "#" + strconv.FormatUint(pl.attempt.Add(1), 10)
	switch st, wait := pl.cosched.Permit(grp, member); st {
	case gang.Allow:
		return allow()
	case gang.Wait:
		groupPermits.WithLabelValues("wait").Inc()
		pl.groupWaited(grp, false)
		return fwk.NewStatus(fwk.Wait, "gpusched: waiting for the other members of pod group "+grp), wait
	default:
		groupPermits.WithLabelValues("reject").Inc()
		pl.waitingMu.Lock()
		delete(pl.waitingSince, grp)
		pl.waitingMu.Unlock()
		d.permitRejected = true
		return fwk.NewStatus(fwk.Unschedulable,
			fmt.Sprintf("gpusched: pod group %s was rejected (a member failed or it timed out) and backs off for %s", grp, wait.Round(time.Second))), 0
	}
}

// activateAfterBackoff moves the group's pending pods back to the active
// queue when its backoff ends, so a quiet cluster tries the group again.
func (pl *Plugin) activateAfterBackoff(grp string) {
	b := pl.args.backoff()
	if b < 0 {
		b = 0
	}
	pl.backoffMu.Lock()
	defer pl.backoffMu.Unlock()
	if t := pl.backoff[grp]; t != nil {
		t.Stop()
	}
	pl.backoff[grp] = time.AfterFunc(b+100*time.Millisecond, func() {
		pl.backoffMu.Lock()
		delete(pl.backoff, grp)
		pl.backoffMu.Unlock()
		pl.activate(grp)
	})
}

func (pl *Plugin) activate(grp string) {
	lister := pl.h.SharedInformerFactory().Core().V1().Pods().Lister()
	pods := map[string]*corev1.Pod{}
	ns, name, ok := strings.Cut(grp, "/")
	if !ok {
		return
	}
	for _, key := range []string{model.LabelPodGroup, model.LabelPodGroupX} {
		list, err := lister.Pods(ns).List(labels.SelectorFromSet(labels.Set{key: name}))
		if err != nil {
			continue
		}
		for _, p := range list {
			if p.Spec.NodeName == "" && model.PodGroup(p) == grp {
				pods[p.Namespace+"/"+p.Name] = p
			}
		}
	}
	if len(pods) > 0 {
		pl.h.Activate(pl.logger, pods)
	}
}

// Bind implements fwk.BindPlugin: it binds a pod with GPUs and records
// them on the pod in the same request (the API server copies the
// Binding's annotations onto the pod). Pods without GPUs are left to the
// next binder.
func (pl *Plugin) Bind(ctx context.Context, _ fwk.CycleState, p *corev1.Pod, node string) *fwk.Status {
	start := time.Now()
	booked, devices, ok := pl.ledger.Booking(p.UID)
	if !ok {
		return fwk.NewStatus(fwk.Skip)
	}
	if booked != node {
		return fwk.AsStatus(fmt.Errorf("gpusched: pod %s/%s is booked on node %s, not %s", p.Namespace, p.Name, booked, node))
	}
	// The node may have gone since Filter (a pod group's members wait at
	// Permit): the API server would bind to a deleted node all the same.
	if err := pl.ledger.Usable(node); err != nil {
		return fwk.AsStatus(fmt.Errorf("gpusched: bind %s/%s: %w", p.Namespace, p.Name, err))
	}
	b := &corev1.Binding{
		ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: p.Name, UID: p.UID,
			Annotations: map[string]string{model.AnnotationGPUs: model.FormatIndices(devices),
				model.AnnotationGPUsMAC: pl.ledger.Sign(p.UID, node, devices)}},
		Target: corev1.ObjectReference{Kind: "Node", Name: node},
	}
	if err := pl.h.ClientSet().CoreV1().Pods(p.Namespace).Bind(ctx, b, metav1.CreateOptions{}); err != nil {
		return fwk.AsStatus(fmt.Errorf("gpusched: bind %s/%s to %s: %w", p.Namespace, p.Name, node, err))
	}
	pl.ledger.MarkBound(p.UID)
	pl.stats.addBind(time.Since(start))
	observe(pointBind, start)
	return nil
}

// PreBindPreFlight implements fwk.PreBindPlugin: PreBind runs for pods
// with DRA claims, on its own (it writes the claims the pod then uses).
func (pl *Plugin) PreBindPreFlight(_ context.Context, state fwk.CycleState, _ *corev1.Pod, _ string) (*fwk.PreBindPreFlightResult, *fwk.Status) {
	if d := cycle(state); d == nil || d.claims == nil || len(d.claims.allocated)+len(d.claims.shared) == 0 {
		return nil, fwk.NewStatus(fwk.Skip)
	}
	return &fwk.PreBindPreFlightResult{AllowParallel: false}, nil
}

// PreBind implements fwk.PreBindPlugin: it writes the allocations of the
// pod's claims and reserves them for the pod.
func (pl *Plugin) PreBind(ctx context.Context, state fwk.CycleState, p *corev1.Pod, _ string) *fwk.Status {
	d := cycle(state)
	if d == nil || d.claims == nil {
		return nil
	}
	start := time.Now()
	defer observe(pointPreBind, start)
	if err := pl.preBindDRA(ctx, d.claims, p); err != nil {
		return fwk.AsStatus(err)
	}
	return nil
}

// PostBind implements fwk.PostBindPlugin.
func (pl *Plugin) PostBind(_ context.Context, _ fwk.CycleState, p *corev1.Pod, _ string) {
	pl.ledger.MarkBound(p.UID)
}

// EventsToRegister implements fwk.EnqueueExtensions: pods come and go
// (GPUs freed, group members created), nodes change (GPUs, health).
func (pl *Plugin) EventsToRegister(context.Context) ([]fwk.ClusterEventWithHint, error) {
	return []fwk.ClusterEventWithHint{
		{Event: fwk.ClusterEvent{Resource: fwk.Pod, ActionType: fwk.All}},
		{Event: fwk.ClusterEvent{Resource: fwk.Node, ActionType: fwk.All}},
		{Event: fwk.ClusterEvent{Resource: fwk.ResourceClaim, ActionType: fwk.All}},
		{Event: fwk.ClusterEvent{Resource: fwk.ResourceSlice, ActionType: fwk.All}},
		{Event: fwk.ClusterEvent{Resource: fwk.DeviceClass, ActionType: fwk.All}},
	}, nil
}

// groupWaited notes a member of grp waiting at Permit (the group's first
// wait starts its clock) or the group's admission (which observes it).
func (pl *Plugin) groupWaited(grp string, admitted bool) {
	pl.waitingMu.Lock()
	defer pl.waitingMu.Unlock()
	since, ok := pl.waitingSince[grp]
	switch {
	case admitted && ok:
		groupWait.Observe(time.Since(since).Seconds())
		delete(pl.waitingSince, grp)
	case !admitted && !ok && len(pl.waitingSince) < maxStatSamples:
		pl.waitingSince[grp] = time.Now()
	}
}
