package kueue

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/gpusched/gpusched/allocation"
	"github.com/gpusched/gpusched/flavor"
	"github.com/gpusched/gpusched/kube/model"
	"github.com/gpusched/gpusched/kube/tenancy"
	"github.com/gpusched/gpusched/perfmodel"
	"github.com/gpusched/gpusched/perfmodel/gavel"
	"github.com/gpusched/gpusched/perfmodel/learn"
	"github.com/gpusched/gpusched/topology"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
)

// Names the controller reads and writes.
const (
	// DefaultGate is the controller's name in Kueue's admission gate
	// annotation (AnnotationAdmissionGatedBy).
	DefaultGate = "gpusched.io/kueue"
	// AnnotationSteered, on a Workload, is the value of the type label the
	// controller put in its pod sets' node selector: it tells the
	// controller's selector from one the tenant wrote, and says where the
	// workload was steered.
	AnnotationSteered = "gpusched.io/steered"
	// LabelGPUType, on a ResourceFlavor, names its GPU type (the admin's),
	// in place of the product its node labels give under the type label,
	// e.g. for a product gpusched does not know. The type label must be
	// among the flavor's node labels either way: the controller steers by
	// it.
	LabelGPUType = "gpusched.io/gpu-type"
)

// Event reasons.
const (
	// ReasonSteered: the workload's node selector now names the GPU type
	// the policy chose (Kueue's flavor walk can only take flavors of it).
	ReasonSteered = "GPUSchedSteered"
	// ReasonReleased: the controller removed its admission gate: Kueue
	// admits the workload on the chosen type, or, when no flavor has room
	// and Kueue would admit it by preemption (reclaiming quota its
	// ClusterQueue lent, by priority, or while borrowing), preempts for
	// it there.
	ReasonReleased = "GPUSchedReleased"
	// ReasonWaiting: why the workload waits.
	ReasonWaiting = "GPUSchedWaiting"
	// ReasonUnreadable (Warning): the controller cannot read the
	// workload; the event names the field at fault. A gated workload
	// stays gated until the field is fixed or an admin removes the gate;
	// an ungated one is left to Kueue's own flavor walk.
	ReasonUnreadable = "GPUSchedUnreadable"
	// ReasonDefault: what the tenant claimed was not taken as written.
	ReasonDefault = "GPUSchedDefaultThroughput"
	// ReasonLearned (with Config.Estimator): what was learned of a
	// pending workload's rates, from its program's runs, once two types
	// are known, and again when that changes (model.LearnedMessage:
	// "learned: 3.0x faster on v100 than k80 (measured on 2 types, 0
	// windows)"; the admission controller's reason of the same name).
	ReasonLearned = "GPUSchedLearned"
)

// MaxJobDuration bounds Config.JobDuration.
const MaxJobDuration = 365 * 24 * time.Hour

// MaxResources bounds Config.Resources.
const MaxResources = 16

// Errors of this package; test them with errors.Is.
var (
	// ErrConfig: a Config that cannot be used.
	ErrConfig = errors.New("kueue: invalid configuration")
	// ErrNoKueue: Kueue's API (kueue.x-k8s.io/v1beta2) is not served.
	ErrNoKueue = errors.New("kueue: Kueue's API kueue.x-k8s.io/v1beta2 is not served (install Kueue; checked with v0.17.0)")
)

// Config configures a Controller. Client, Dynamic and Policy are
// required. New copies it; its Policy, Throughput, Recorder and Metrics
// are shared with the controller. Safe for concurrent reads.
type Config struct {
	// Client writes events and watches the namespaces' labels (for the
	// ClusterQueues' namespaceSelectors); Dynamic reads Kueue's objects
	// and writes the Workloads' node selectors and the jobs' gates.
	Client  kubernetes.Interface
	Dynamic dynamic.Interface
	// Namespace limits the Workloads to one namespace; "" watches all.
	Namespace string
	// Policy allocates GPU time (admission.PolicyByName gives the usual
	// ones); PolicyName names it in events.
	Policy     allocation.Policy
	PolicyName string
	// Throughput rates jobs by kind (annotation gpusched.io/job-kind on
	// the pod template); nil means Gavel's table.
	Throughput perfmodel.ThroughputModel
	// Rates bound the tenants' claimed rates (kube/tenancy).
	Rates tenancy.RateRules
	// Resources are the extended resources of GPUs, each counted in its
	// own units (whole GPUs, or MIG slices where the admin lists a MIG
	// resource): a ClusterQueue's flavor is a GPU flavor for the first of
	// them its resource group covers, and a workload may ask for one of
	// them. A request for another resource that looks like a GPU
	// (nvidia.com/mig-*, names under nvidia.com/ with "gpu", names ending
	// in /gpu) makes the workload unreadable: it cannot be steered, and a
	// gated one stays gated. Empty means nvidia.com/gpu; at most
	// MaxResources.
	Resources []corev1.ResourceName
	// TypeLabel is the node label whose value, in a flavor's nodeLabels,
	// names its GPU (and which the controller sets in a workload's node
	// selector); "" means nvidia.com/gpu.product.
	TypeLabel string
	// Gate is the controller's name in kueue.x-k8s.io/admission-gated-by;
	// "" means DefaultGate.
	Gate string
	// MaxJobs bounds the workloads in a round's problem (flavor.Steerer);
	// 0 means flavor.DefaultMaxJobs.
	MaxJobs int
	// Patience turns on the wait rule for slow types (flavor.Steerer):
	// Kueue never moves an admitted workload, so one started on a type
	// many times slower than its best runs there for its life; with
	// Patience p a workload waits for a faster type up to p times the
	// time the slower one would cost it (its remaining time on its best
	// type, JobDuration, times the slowdown less 1). 0 leaves the rule
	// off; gpusched-kueue's --patience defaults to 1, the break-even
	// (docs/kueue.md has the measurements). At most flavor.MaxPatience.
	Patience float64
	// JobDuration is how long a workload is taken to run on its fastest
	// type (Kueue's Workloads do not say): T of the wait rule, and the
	// remaining work the policy sees (for the policies that use it,
	// finish-time fairness and makespan); 0 means an hour. At most
	// MaxJobDuration.
	JobDuration time.Duration
	// MinInterval is the least wall time between two rounds (a change
	// the informers see triggers one); 0 means 1 s. Interval is the most;
	// 0 means 30 s.
	MinInterval, Interval time.Duration
	// Recorder records events; nil records them through Client.
	Recorder record.EventRecorder
	// Metrics, if set, is updated every round (register it first).
	Metrics *Metrics
	// Estimator, when set, learns each workload's rates from its progress
	// (issue #41): a Workload's rates are its estimates, normalised and
	// bounded by Rates' maxRatio, its annotations' rates only claims
	// (weak evidence); Workload and Progress are the progress channel's
	// resolver and sink (kube/progress); a workload's group is its
	// program (model.ProgramGroup), through which what a run measured
	// reaches the next. What it learned is kept across restarts where
	// StateNamespace is set. nil: the annotations' rates, as they are.
	Estimator learn.Estimator
	// StateNamespace, with an Estimator that can be saved (Snapshot and
	// Restore: *learn.Learner), keeps what it learned across restarts in
	// the ConfigMap StateName there (see Save); "" keeps nothing.
	// StateName "" means DefaultStateName (else a DNS label of at most 58
	// characters: the chunks' names add 4). SaveInterval is the least time
	// between two saves while Run runs (it saves after a round, so at
	// most SaveInterval plus Interval apart; a save writes only what
	// changed); 0 means DefaultSaveInterval.
	StateNamespace, StateName string
	SaveInterval              time.Duration
	// Clock is the estimator's clock, in seconds (progress reports,
	// refits); nil means Now's Unix time.
	Clock func() float64
	// Refit is the least time between two refits of the estimator's
	// population (on Clock); 0 means DefaultRefit.
	Refit time.Duration
	// Explore bounds exploration with learned rates: the fraction of each
	// ClusterQueue's nominal GPUs (of its steered flavors) that its
	// workloads started on a type only because it might be their fastest
	// may hold, so that one queue's backlog cannot use another's (a type their program
	// has not run on, rated at the upper confidence bound exp(mean +
	// sigma) of its estimate where that beats the best type it has run
	// on: UCB1, Auer et al. 2002). Kueue never moves an admitted
	// workload, so a workload that explores stays for its life; 0 means
	// DefaultExplore, negative none, at most 1.
	Explore float64
	// Logger receives what the controller does; nil logs nothing.
	Logger *slog.Logger
	// Now gives the time (arrival times are the Workloads' creation
	// times); nil means time.Now.
	Now func() time.Time
}

func (c *Config) model() perfmodel.ThroughputModel {
	if c.Throughput != nil {
		return c.Throughput
	}
	return gavel.Simulation()
}

// Controller steers Kueue's pending Workloads to the GPU types an
// allocation policy chooses. It is safe for concurrent use: one mutex
// serialises rounds.
type Controller struct {
	mu     sync.Mutex
	cfg    Config
	log    *slog.Logger
	wl     cache.SharedIndexInformer
	cq, lq cache.SharedIndexInformer
	rf     cache.SharedIndexInformer
	// ns holds the namespaces' labels (ClusterQueues'
	// namespaceSelectors select them).
	ns      cache.SharedIndexInformer
	trigger chan struct{}
	rounds  int
	// said is the last thing said about a workload, by UID and topic
	// (its decision, the notes on its claims).
	said    map[types.UID]map[string]string
	started bool
	// learn is the state of learned rates (Config.Estimator).
	learn *learning
	// saves keeps what was learned across restarts (state.go); nil
	// where nothing is kept.
	saves *saving
}

// Workload states, for the informer's index.
const (
	indexState    = "state"
	statePending  = "pending"
	stateReserved = "reserved"
	stateDone     = "done"
)

func workloadState(obj any) ([]string, error) {
	w, ok := obj.(*Workload)
	switch {
	case !ok:
		return nil, nil
	case w.Finished():
		return []string{stateDone}, nil
	case w.HasQuotaReservation():
		return []string{stateReserved}, nil
	case w.Spec.Active != nil && !*w.Spec.Active:
		return []string{stateDone}, nil
	}
	return []string{statePending}, nil
}

// New returns a controller for cfg; Run starts its informers.
func New(cfg Config) (*Controller, error) {
	switch {
	case cfg.Client == nil || cfg.Dynamic == nil:
		return nil, fmt.Errorf("%w: no client", ErrConfig)
	case cfg.Policy == nil:
		return nil, fmt.Errorf("%w: no policy", ErrConfig)
	case cfg.MinInterval < 0 || cfg.Interval < 0:
		return nil, fmt.Errorf("%w: intervals %v and %v (want >= 0)", ErrConfig, cfg.MinInterval, cfg.Interval)
	case cfg.MaxJobs < 0:
		return nil, fmt.Errorf("%w: maxJobs %d", ErrConfig, cfg.MaxJobs)
	case !(cfg.Patience >= 0 && cfg.Patience <= flavor.MaxPatience):
		return nil, fmt.Errorf("%w: patience %v (want 0 to %d)", ErrConfig, cfg.Patience, flavor.MaxPatience)
	case !(cfg.Explore <= 1):
		return nil, fmt.Errorf("%w: explore %v (want at most 1; negative: none)", ErrConfig, cfg.Explore)
	case cfg.StateName != "" && (len(cfg.StateName) > 58 || len(validation.IsDNS1123Label(cfg.StateName)) > 0):
		return nil, fmt.Errorf("%w: state name %q (want a DNS label of at most 58 characters: it names the state's chunks and labels them)", ErrConfig, cfg.StateName)
	case cfg.SaveInterval < 0:
		return nil, fmt.Errorf("%w: save interval %v (want >= 0)", ErrConfig, cfg.SaveInterval)
	case cfg.Refit < 0:
		return nil, fmt.Errorf("%w: refit interval %v (want >= 0)", ErrConfig, cfg.Refit)
	case cfg.JobDuration < 0 || cfg.JobDuration > MaxJobDuration:
		return nil, fmt.Errorf("%w: job duration %v (want 0 to %v)", ErrConfig, cfg.JobDuration, MaxJobDuration)
	case len(cfg.Resources) > MaxResources || slices.Contains(cfg.Resources, ""):
		return nil, fmt.Errorf("%w: GPU resources %q (want 1 to %d names)", ErrConfig, cfg.Resources, MaxResources)
	}
	if len(cfg.Resources) == 0 {
		cfg.Resources = []corev1.ResourceName{model.ResourceGPU}
	}
	cfg.Resources = slices.Clone(cfg.Resources)
	if cfg.TypeLabel == "" {
		cfg.TypeLabel = model.LabelProduct
	}
	if cfg.Gate == "" {
		cfg.Gate = DefaultGate
	}
	if cfg.MinInterval == 0 {
		cfg.MinInterval = time.Second
	}
	if cfg.Interval == 0 {
		cfg.Interval = 30 * time.Second
	}
	if cfg.Refit == 0 {
		cfg.Refit = DefaultRefit
	}
	if cfg.Explore == 0 {
		cfg.Explore = DefaultExplore
	}
	if cfg.StateName == "" {
		cfg.StateName = DefaultStateName
	}
	if cfg.SaveInterval == 0 {
		cfg.SaveInterval = DefaultSaveInterval
	}
	if cfg.PolicyName == "" {
		cfg.PolicyName = strings.TrimPrefix(fmt.Sprintf("%T", cfg.Policy), "*allocation.")
	}
	c := &Controller{cfg: cfg, log: cfg.Logger, trigger: make(chan struct{}, 1), said: map[types.UID]map[string]string{},
		learn: &learning{keys: map[string]learnedKey{}, resolved: map[types.UID]resolvedPod{}, exploring: map[string]explorer{}, budget: map[string]float64{},
			restarts: map[string]restartCount{}}}
	c.saves = newSaving(&c.cfg)
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	if c.cfg.Recorder == nil {
		b := record.NewBroadcaster()
		b.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: cfg.Client.CoreV1().Events("")})
		c.cfg.Recorder = b.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "gpusched-kueue"})
	}
	namespaced := dynamicinformer.NewFilteredDynamicSharedInformerFactory(cfg.Dynamic, 0, cfg.Namespace, nil)
	clusterScoped := dynamicinformer.NewDynamicSharedInformerFactory(cfg.Dynamic, 0)
	inf := func(gvr schema.GroupVersionResource, tf cache.TransformFunc) cache.SharedIndexInformer {
		factory := namespaced
		if gvr != WorkloadsGVR && gvr != LocalQueuesGVR {
			factory = clusterScoped
		}
		i := factory.ForResource(gvr).Informer()
		_ = i.SetTransform(tf)
		_, _ = i.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    func(any) { c.poke() },
			UpdateFunc: func(any, any) { c.poke() },
			DeleteFunc: func(any) { c.poke() },
		})
		return i
	}
	c.wl = inf(WorkloadsGVR, transform[Workload])
	if err := c.wl.AddIndexers(cache.Indexers{indexState: workloadState, indexOwner: workloadOwner}); err != nil {
		return nil, err
	}
	c.lq = inf(LocalQueuesGVR, transform[LocalQueue])
	c.cq = inf(ClusterQueuesGVR, transform[ClusterQueue])
	c.rf = inf(ResourceFlavorGVR, transform[ResourceFlavor])
	c.ns = c.namespaceInformer()
	return c, nil
}

// namespaceInformer watches the namespaces (only Config.Namespace when
// set), keeping their names and labels: a ClusterQueue's
// namespaceSelector says whose workloads Kueue admits there.
func (c *Controller) namespaceInformer() cache.SharedIndexInformer {
	opts := []informers.SharedInformerOption{informers.WithTransform(namespaceLabelsOnly)}
	if ns := c.cfg.Namespace; ns != "" {
		opts = append(opts, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("metadata.name", ns).String()
		}))
	}
	i := informers.NewSharedInformerFactoryWithOptions(c.cfg.Client, 0, opts...).Core().V1().Namespaces().Informer()
	_, _ = i.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { c.poke() },
		UpdateFunc: func(old, cur any) { c.pokeIfRelabelled(old, cur) },
		DeleteFunc: func(any) { c.poke() },
	})
	return i
}

// pokeIfRelabelled asks for a round when a namespace's labels changed
// (its other updates, and resyncs, change nothing the controller reads).
func (c *Controller) pokeIfRelabelled(old, cur any) {
	o, ok1 := old.(*corev1.Namespace)
	n, ok2 := cur.(*corev1.Namespace)
	if !ok1 || !ok2 || !maps.Equal(o.Labels, n.Labels) {
		c.poke()
	}
}

// namespaceLabelsOnly keeps a namespace's name and labels (the store's
// only use). Tombstones pass through.
func namespaceLabelsOnly(obj any) (any, error) {
	n, ok := obj.(*corev1.Namespace)
	if !ok {
		return obj, nil
	}
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: n.Name, UID: n.UID, ResourceVersion: n.ResourceVersion, Labels: n.Labels}}, nil
}

// namespaceLabels gives a namespace's labels, false when the informer
// does not hold it.
func (c *Controller) namespaceLabels(name string) (labels.Set, bool) {
	o, ok, err := c.ns.GetStore().GetByKey(name)
	if err != nil || !ok {
		return nil, false
	}
	n, ok := o.(*corev1.Namespace)
	if !ok {
		return nil, false
	}
	return labels.Set(n.Labels), true
}

// poke asks for a round (without blocking: one pending request is
// enough).
func (c *Controller) poke() {
	select {
	case c.trigger <- struct{}{}:
	default:
	}
}

// Start starts the informers and waits until they have synced (within
// ctx), then restores what a previous controller learned
// (Config.StateNamespace; one that cannot be read is a Warning event
// ReasonLearnerState, and the estimator learns afresh). It fails with
// ErrNoKueue when Kueue's API is not served, and with the API's error
// when the state ConfigMap cannot be read.
func (c *Controller) Start(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.started {
		return nil
	}
	if _, err := c.cfg.Dynamic.Resource(WorkloadsGVR).Namespace(c.cfg.Namespace).List(ctx, metav1.ListOptions{Limit: 1}); err != nil {
		if apierrors.IsNotFound(err) {
			return fmt.Errorf("%w: %w", ErrNoKueue, err)
		}
		return fmt.Errorf("kueue: listing Workloads: %w", err)
	}
	for _, i := range []cache.SharedIndexInformer{c.wl, c.lq, c.cq, c.rf, c.ns} {
		go i.Run(ctx.Done())
	}
	if !cache.WaitForCacheSync(ctx.Done(), c.wl.HasSynced, c.lq.HasSynced, c.cq.HasSynced, c.rf.HasSynced, c.ns.HasSynced) {
		return fmt.Errorf("kueue: informers did not sync: %w", ctx.Err())
	}
	if err := c.restoreLearned(ctx); err != nil {
		return err
	}
	c.started = true
	return nil
}

// Run starts the informers and runs a round whenever they report a
// change (at most every MinInterval) and at least every Interval, until
// ctx ends. A failed round is logged and retried at the next. With
// Config.StateNamespace it saves what the estimator learned after a round
// at most every SaveInterval, and as it ends.
func (c *Controller) Run(ctx context.Context) error {
	if err := c.Start(ctx); err != nil {
		return err
	}
	tick := time.NewTicker(c.cfg.Interval)
	defer tick.Stop()
	for {
		if r, err := c.Round(ctx); err != nil {
			c.log.Error("round failed", "err", err)
		} else if len(r.Patched)+len(r.Released)+len(r.Unreadable) > 0 {
			c.log.Info("round", "round", r.Round, "pending", r.Pending, "running", r.Running, "steered", len(r.Patched),
				"released", len(r.Released), "unreadable", len(r.Unreadable), "took", r.Took)
		}
		c.saveDue(ctx)
		select {
		case <-ctx.Done():
			return c.lastSave(ctx)
		case <-c.trigger:
		case <-tick.C:
		}
		select {
		case <-ctx.Done():
			return c.lastSave(ctx)
		case <-time.After(c.cfg.MinInterval):
		}
	}
}

// lastSave saves what was learned as Run ends (for at most 10 s), and
// returns ctx's error.
func (c *Controller) lastSave(ctx context.Context) error {
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := c.Save(sctx); err != nil {
		c.log.Warn("saving what the estimator learned as the controller stops failed", "err", err)
	}
	return ctx.Err()
}

// Decision is what a round decided for one pending workload: a plain
// value, safe for concurrent reads.
type Decision struct {
	ClusterQueue string
	// Type is the GPU type it starts on or waits for ("" with Outside and
	// NoFlavor), Flavor the flavor of its ClusterQueue.
	Type   topology.GPUType
	Flavor string
	Why    flavor.Why
	// Share is the policy's time share of the workload on Type.
	Share float64
	// HeldFrom, with Why flavor.Held, is the slower type it could start
	// on now, and Until when its wait for Type ends (Config.Patience).
	HeldFrom topology.GPUType
	Until    time.Time
	// Rank, with Why flavor.Outside, is its place in its ClusterQueue's
	// order (priority, then age; 1 first).
	Rank int
	// Victims, with Why flavor.Preempt, are the admitted Workloads
	// (namespace/name) Kueue would preempt for it, as the controller
	// models Kueue's choice (Kueue makes it).
	Victims []string
}

// RoundResult says what a round decided and wrote. It belongs to the
// caller: safe for concurrent reads, not for concurrent writes.
type RoundResult struct {
	Round int
	// Types are the GPU types of the flavors.
	Types []topology.GPUType
	// Pending and Running count the GPU workloads of gpusched's queues.
	Pending, Running int
	// Decisions, by Workload key (namespace/name).
	Decisions map[string]Decision
	// Patched lists the Workloads whose node selector was written,
	// Released those whose gate was removed, Unreadable those left to
	// Kueue; all sorted.
	Patched, Released, Unreadable []string
	// Writes counts the API writes of steering (Workload patches and gate
	// removals; events not counted); Failed those refused.
	Writes, Failed int
	// Exploring lists the Workloads the round starts on a type only
	// because its learned rate's upper confidence bound beat the best
	// measured one (Config.Explore), sorted; ExploringGPUs are the GPUs
	// all exploring workloads hold or start with, against the budget.
	Exploring     []string
	ExploringGPUs int
	// Took is the round's wall time.
	Took time.Duration
}

// Round reads the stores, decides and steers.
func (c *Controller) Round(ctx context.Context) (*RoundResult, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	start := time.Now()
	c.rounds++
	res := &RoundResult{Round: c.rounds, Decisions: map[string]Decision{}}
	s, err := c.buildSnapshot()
	if err != nil {
		return nil, err
	}
	res.Types = s.types
	c.refit()
	c.exploreBudget(s)
	running, runKeys, err := c.charge(s)
	if err != nil {
		return nil, err
	}
	res.Running = len(running)
	objs, err := c.wl.GetIndexer().ByIndex(indexState, statePending)
	if err != nil {
		return nil, err
	}
	ws := make([]*Workload, 0, len(objs))
	for _, o := range objs {
		if w, ok := o.(*Workload); ok {
			ws = append(ws, w)
		}
	}
	slices.SortFunc(ws, func(a, b *Workload) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	})
	var reads []read
	var pending []flavor.Workload
	seen := make(map[types.UID]bool, len(ws))
	for _, w := range ws {
		r, ok := c.readWorkload(s, w)
		if !ok {
			if r.gated && r.skip != skipNone {
				seen[w.UID] = true
				c.notSteered(ctx, &r, res)
			}
			continue
		}
		seen[w.UID] = true
		if r.err != nil {
			c.unreadable(&r, res)
			continue
		}
		if len(r.notes) > 0 {
			c.say(w, corev1.EventTypeNormal, ReasonDefault, strings.Join(r.notes, "; "), "notes")
		}
		if r.learned != "" {
			c.say(w, corev1.EventTypeNormal, ReasonLearned, r.learned, "learned|"+model.LearnedTopic(r.learned))
		}
		reads = append(reads, r)
		pending = append(pending, flavor.Workload{ID: len(running) + len(pending), Queue: r.queue, GPUs: r.gpus, Rates: r.rates,
			Priority: int(ptrOr(w.Spec.Priority, 0)), Arrival: float64(w.CreationTimestamp.Unix()), Flavor: -1})
	}
	res.Pending = len(pending)
	for uid := range c.said {
		if !seen[uid] {
			delete(c.said, uid)
		}
	}
	st := flavor.Steerer{Types: s.types, Policy: c.cfg.Policy, MaxJobs: c.cfg.MaxJobs, Patience: c.cfg.Patience, Duration: c.cfg.JobDuration.Seconds()}
	out, err := st.Steer(ctx, float64(c.now().Unix()), s.queues, running, pending)
	if err != nil {
		return nil, fmt.Errorf("kueue: steering: %w", err)
	}
	pendingBy := map[[2]string]float64{}
	for i, d := range out.Decisions {
		r := &reads[i]
		dec := Decision{ClusterQueue: s.queues.Queue(r.queue).Name, Why: d.Why, Share: d.Share, Rank: d.Rank}
		for _, id := range d.Victims.IDs {
			dec.Victims = append(dec.Victims, runKeys[id])
		}
		if d.Flavor >= 0 {
			dec.Type, dec.Flavor = s.types[d.Type], s.queues.Queue(r.queue).Flavors[d.Flavor].Name
		}
		if d.Why == flavor.Held {
			dec.HeldFrom, dec.Until = s.types[d.HeldFrom], time.Unix(int64(math.Ceil(min(d.Until, 1<<40))), 0)
		}
		res.Decisions[r.key] = dec
		typ := string(dec.Type)
		if typ == "" {
			typ = "none"
		}
		pendingBy[[2]string{dec.ClusterQueue, typ}]++
		if d.Why == flavor.Outside {
			c.outside(r, s.queues.Queue(r.queue).Name, d.Rank, out.Places[r.queue], out.Queued[r.queue])
			continue
		}
		c.apply(ctx, s, r, d, dec, res)
		if c.noteExplore(r, d) {
			res.Exploring = append(res.Exploring, r.key)
		}
	}
	for _, e := range c.learn.exploring {
		res.ExploringGPUs += e.gpus
	}
	for _, l := range [][]string{res.Patched, res.Released, res.Unreadable, res.Exploring} {
		slices.Sort(l)
	}
	c.forgetGone()
	res.Took = time.Since(start)
	c.cfg.Metrics.observe(res, pendingBy)
	return res, nil
}

// charge charges the reserved Workloads to their ClusterQueues' flavors
// and returns them as running workloads for the policy (on the first GPU
// flavor each holds).
func (c *Controller) charge(s *snapshot) ([]flavor.Workload, []string, error) {
	objs, err := c.wl.GetIndexer().ByIndex(indexState, stateReserved)
	if err != nil {
		return nil, nil, err
	}
	ws := make([]*Workload, 0, len(objs))
	for _, o := range objs {
		if w, ok := o.(*Workload); ok && w.decodeErr == nil {
			ws = append(ws, w)
		}
	}
	slices.SortFunc(ws, func(a, b *Workload) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	})
	var running []flavor.Workload
	var keys []string
	for _, w := range ws {
		qi, ok := s.byName[w.Status.Admission.ClusterQueue]
		if !ok {
			continue
		}
		q := s.queues.Queue(qi)
		u := usage(w, c.cfg.Resources)
		first, gpus := -1, 0
		for _, name := range sortedFlavors(u) {
			f := slices.IndexFunc(q.Flavors, func(f flavor.Flavor) bool { return f.Name == name })
			if f < 0 || u[name] == 0 {
				continue
			}
			if err := s.queues.Add(qi, f, u[name]); err != nil {
				return nil, nil, err
			}
			if first < 0 {
				first = f
			}
			gpus += u[name]
		}
		if first < 0 {
			continue
		}
		rates := make([]float64, len(s.types))
		if r, ok := c.readWorkload(s, w); ok && r.err == nil && r.rates != nil {
			rates = r.rates
		}
		k := q.Flavors[first].Type
		if rates[k] <= 0 {
			rates[k] = c.cfg.Rates.Ref()
		}
		running = append(running, flavor.Workload{ID: len(running), Queue: qi, GPUs: gpus, Rates: rates,
			Priority: int(ptrOr(w.Spec.Priority, 0)), Arrival: float64(w.CreationTimestamp.Unix()), Flavor: first})
		keys = append(keys, w.Namespace+"/"+w.Name)
	}
	return running, keys, nil
}

func ptrOr[T any](p *T, v T) T {
	if p != nil {
		return *p
	}
	return v
}

func (c *Controller) now() time.Time {
	if c.cfg.Now != nil {
		return c.cfg.Now()
	}
	return time.Now()
}

// apply carries out one decision: a workload of the controller's gate
// that starts, or that Kueue would admit by preemption, gets its node
// selector and loses the gate; one without the gate gets the node
// selector of the type it starts on, is admitted on by preemption, or
// waits for, unless the tenant's own selector names a type; events say
// why.
func (c *Controller) apply(ctx context.Context, s *snapshot, r *read, d flavor.Decision, dec Decision, res *RoundResult) {
	w := r.w
	q := s.queues.Queue(r.queue)
	if d.Why == flavor.NoFlavor {
		c.say(w, corev1.EventTypeWarning, ReasonWaiting, fmt.Sprintf("no GPU flavor of ClusterQueue %s can ever hold its %d GPUs on a type it may run on", q.Name, r.gpus), "noflavor")
		return
	}
	value := s.flavors[dec.Flavor].value
	admits := d.Why == flavor.Start || d.Why == flavor.Preempt
	steer := !r.pinned && value != "" && (admits || !r.gated)
	if steer && !c.hasSelector(w, r.podSets, value) {
		if err := c.patchSelector(ctx, w, r.podSets, value); err != nil {
			res.Failed++
			c.cfg.Metrics.write("workload", err)
			c.log.Warn("steer", "workload", r.key, "err", err)
			return
		}
		c.cfg.Metrics.write("workload", nil)
		c.cfg.Metrics.steered(q.Name, string(dec.Type))
		res.Writes++
		res.Patched = append(res.Patched, r.key)
	}
	used := ""
	if d.Flavor >= 0 {
		used = quotaText(s.queues.Used(r.queue, d.Flavor), q.Flavors[d.Flavor])
	}
	c.explain(r, q, d, dec, used)
	if admits && r.gated {
		c.releaseCounted(ctx, r, res)
	}
}

// explain says why a workload starts, is released for preemption, or
// waits.
func (c *Controller) explain(r *read, q *flavor.Queue, d flavor.Decision, dec Decision, used string) {
	w := r.w
	switch d.Why {
	case flavor.Start:
		msg := fmt.Sprintf("steered to %s (flavor %s of ClusterQueue %s): the %s policy gives it %.0f%% of its time there; %s", dec.Type, dec.Flavor, q.Name,
			c.cfg.PolicyName, 100*d.Share, used)
		if r.pinned {
			msg = fmt.Sprintf("starts on %s, the type its own node selector names (flavor %s of ClusterQueue %s)", dec.Type, dec.Flavor, q.Name)
		}
		c.say(w, corev1.EventTypeNormal, ReasonSteered, msg, "start|"+string(dec.Type))
	case flavor.Preempt:
		what := preemptText(d.Victims, dec.Flavor, q.Name)
		if r.gated {
			c.say(w, corev1.EventTypeNormal, ReasonReleased, fmt.Sprintf("released for Kueue's preemption: %s (on %s, flavor %s of ClusterQueue %s; no flavor has room now)",
				what, dec.Type, dec.Flavor, q.Name), "preempt|"+string(dec.Type))
			return
		}
		c.say(w, corev1.EventTypeNormal, ReasonSteered, fmt.Sprintf("steered to %s (flavor %s of ClusterQueue %s), where Kueue admits it by preemption: %s",
			dec.Type, dec.Flavor, q.Name, what), "preempt|"+string(dec.Type))
	case flavor.Busy:
		c.say(w, corev1.EventTypeNormal, ReasonWaiting, fmt.Sprintf("waits for %s (flavor %s of ClusterQueue %s): the %s policy gives it %.0f%% of its time there, most on any type; %s",
			dec.Type, dec.Flavor, q.Name, c.cfg.PolicyName, 100*d.Share, used), "wait|"+string(dec.Type))
	case flavor.NoShare:
		c.say(w, corev1.EventTypeNormal, ReasonWaiting, fmt.Sprintf("waits for %s (flavor %s of ClusterQueue %s): the %s policy gives the GPUs free now to other workloads first",
			dec.Type, dec.Flavor, q.Name, c.cfg.PolicyName), "wait|"+string(dec.Type))
	case flavor.Held:
		r1, r2 := r.rates[d.Type], r.rates[d.HeldFrom]
		c.say(w, corev1.EventTypeNormal, ReasonWaiting, fmt.Sprintf("waits for %s (flavor %s of ClusterQueue %s), where it runs %.1fx faster than on %s, which has room now: Kueue never moves an admitted workload, so it waits for a faster type until %s (patience %g), then may start on %s",
			dec.Type, dec.Flavor, q.Name, r1/r2, dec.HeldFrom, dec.Until.UTC().Format(time.RFC3339), c.cfg.Patience, dec.HeldFrom), "held|"+string(dec.Type)+"|"+string(dec.HeldFrom))
	}
}

// outside says that a workload waits outside the round's problem, and
// where in its own queue.
func (c *Controller) outside(r *read, cq string, rank, places, queued int) {
	c.say(r.w, corev1.EventTypeNormal, ReasonWaiting, fmt.Sprintf("waits outside the %s policy's round: ClusterQueue %s has %d pending workloads and %d of the round's %d places "+
		"(shared among the ClusterQueues by fair-sharing weight); this one is number %d in its queue's order (priority, then age) and moves up as those before it start",
		c.cfg.PolicyName, cq, queued, places, c.maxJobs(), rank), "outside")
}

// preemptText says what Kueue would preempt for a workload.
func preemptText(v flavor.Victims, fl, cq string) string {
	var parts []string
	if v.Reclaimed > 0 {
		parts = append(parts, fmt.Sprintf("reclaims %s of %s its ClusterQueue lent", gpusText(v.Reclaimed), fl))
	}
	if v.WhileBorrowing > 0 {
		parts = append(parts, fmt.Sprintf("preempts %s of %s of lower-priority workloads of other ClusterQueues of its cohort while it borrows (borrowWithinCohort)", gpusText(v.WhileBorrowing), fl))
	}
	if v.InQueue > 0 {
		parts = append(parts, fmt.Sprintf("preempts %s of %s of lower-priority workloads of ClusterQueue %s", gpusText(v.InQueue), fl, cq))
	}
	return strings.Join(parts, "; ")
}

func gpusText(n int) string {
	if n == 1 {
		return "1 GPU"
	}
	return fmt.Sprintf("%d GPUs", n)
}

func quotaText(used int, f flavor.Flavor) string {
	return fmt.Sprintf("the ClusterQueue uses %d of its nominal %d GPUs of %s", used, f.Nominal, f.Name)
}

func (c *Controller) maxJobs() int {
	if c.cfg.MaxJobs > 0 {
		return c.cfg.MaxJobs
	}
	return flavor.DefaultMaxJobs
}

// unreadable reports a workload the controller cannot read, with the
// field at fault. A gated one stays gated: a tenant must not shed the
// gate by writing what the controller cannot read (it fixes the field, or
// an admin removes the gate); an ungated one is left to Kueue's own
// flavor walk.
func (c *Controller) unreadable(r *read, res *RoundResult) {
	res.Unreadable = append(res.Unreadable, r.key)
	msg := fmt.Sprintf("gpusched cannot read this workload: %v; Kueue's own flavor order decides its GPU type", r.err)
	if r.gated {
		msg = fmt.Sprintf("gpusched cannot read this workload: %v; it stays gated until that is fixed (re-create its job), or an admin removes %s from %s of its job",
			r.err, c.cfg.Gate, AnnotationAdmissionGatedBy)
	}
	c.say(r.w, corev1.EventTypeWarning, ReasonUnreadable, msg, "unreadable|"+r.err.Error())
}

// notSteered tells what becomes of a gated workload the controller does
// not steer. One whose ClusterQueue exists but has no GPU flavor the
// controller steers (or that asks for no GPU of Config.Resources) is
// released to Kueue's own flavor order: the controller would never start
// it. One whose LocalQueue or ClusterQueue does not exist, or whose
// ClusterQueue is stopped, stays gated, with an event: Kueue could not
// admit it either, and the controller steers it once its queue is one of
// its own (releasing it would let a tenant shed the gate by naming a
// LocalQueue that does not exist yet). So does one whose ClusterQueue's
// namespaceSelector does not select its namespace (a LocalQueue the
// tenant made for another tenant's ClusterQueue): Kueue never admits it
// there, and it is not counted in that queue.
func (c *Controller) notSteered(ctx context.Context, r *read, res *RoundResult) {
	w, cq := r.w, r.cq
	switch r.skip {
	case skipNoLocalQueue:
		c.say(w, corev1.EventTypeWarning, ReasonWaiting, fmt.Sprintf("waits gated: its LocalQueue %q does not exist in %s, or names no ClusterQueue that exists; gpusched steers it once it does", w.Spec.QueueName, w.Namespace), "nolq")
	case skipNamespace:
		c.say(w, corev1.EventTypeWarning, ReasonWaiting, fmt.Sprintf("waits gated: ClusterQueue %s (of its LocalQueue %q) does not take workloads of namespace %s (its namespaceSelector); Kueue admits it nowhere, and gpusched does not count it in that queue",
			cq, w.Spec.QueueName, w.Namespace), "namespace")
	case skipStopped:
		c.say(w, corev1.EventTypeNormal, ReasonWaiting, fmt.Sprintf("waits gated: ClusterQueue %s is stopped (its stopPolicy)", cq), "stopped")
	case skipNotSteered, skipNoGPU:
		why := fmt.Sprintf("ClusterQueue %s has no GPU flavor gpusched steers (none names its GPU under the node label %s, or none has quota of %s)", cq, c.cfg.TypeLabel, joinNames(c.cfg.Resources))
		if r.skip == skipNoGPU {
			why = "it asks for none of " + joinNames(c.cfg.Resources)
		}
		c.say(w, corev1.EventTypeNormal, ReasonReleased, "released to Kueue's own flavor order: "+why, "notsteered")
		c.releaseCounted(ctx, r, res)
	}
}

// releaseCounted removes the workload's gate and counts the write.
func (c *Controller) releaseCounted(ctx context.Context, r *read, res *RoundResult) {
	if err := c.release(ctx, r.w); err != nil {
		res.Failed++
		c.cfg.Metrics.write("gate", err)
		c.log.Warn("release gate", "workload", r.key, "err", err)
		return
	}
	c.cfg.Metrics.write("gate", nil)
	res.Writes++
	res.Released = append(res.Released, r.key)
}

// hasSelector reports whether the pod sets' node selectors already name
// value, by the controller's hand.
func (c *Controller) hasSelector(w *Workload, podSets []int, value string) bool {
	if w.Annotations[AnnotationSteered] != value {
		return false
	}
	for _, i := range podSets {
		if w.Spec.PodSets[i].Template.Spec.NodeSelector[c.cfg.TypeLabel] != value {
			return false
		}
	}
	return true
}

// jsonPointer escapes a map key for a JSON patch path.
func jsonPointer(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}

type patchOp struct {
	Op    string `json:"op"`
	Path  string `json:"path"`
	Value any    `json:"value,omitempty"`
}

// patchSelector sets the type label in the node selector of the pod sets
// that ask for GPUs, and AnnotationSteered, in one JSON patch whose tests
// pin the pod sets' names (a Workload rebuilt meanwhile is not patched).
// Kueue's webhook refuses it once quota is reserved.
func (c *Controller) patchSelector(ctx context.Context, w *Workload, podSets []int, value string) error {
	var ops []patchOp
	for _, i := range podSets {
		base := fmt.Sprintf("/spec/podSets/%d", i)
		ops = append(ops, patchOp{Op: "test", Path: base + "/name", Value: w.Spec.PodSets[i].Name})
		if w.Spec.PodSets[i].Template.Spec.NodeSelector == nil {
			ops = append(ops, patchOp{Op: "add", Path: base + "/template/spec/nodeSelector", Value: map[string]string{c.cfg.TypeLabel: value}})
		} else {
			ops = append(ops, patchOp{Op: "add", Path: base + "/template/spec/nodeSelector/" + jsonPointer(c.cfg.TypeLabel), Value: value})
		}
	}
	if w.Annotations == nil {
		ops = append(ops, patchOp{Op: "add", Path: "/metadata/annotations", Value: map[string]string{AnnotationSteered: value}})
	} else {
		ops = append(ops, patchOp{Op: "add", Path: "/metadata/annotations/" + jsonPointer(AnnotationSteered), Value: value})
	}
	b, err := json.Marshal(ops)
	if err != nil {
		return err
	}
	_, err = c.cfg.Dynamic.Resource(WorkloadsGVR).Namespace(w.Namespace).Patch(ctx, w.Name, types.JSONPatchType, b, metav1.PatchOptions{FieldManager: "gpusched-kueue"})
	return err
}

// ownerResource maps a Workload's owner to its resource: Kueue's job
// integrations name their kinds in the singular (Job, JobSet, PyTorchJob,
// RayJob, TrainJob, ...), whose resources are the plural in lower case.
func ownerResource(ref metav1.OwnerReference) (schema.GroupVersionResource, error) {
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	if err != nil || ref.Kind == "" {
		return schema.GroupVersionResource{}, fmt.Errorf("owner %s %q: %w", ref.APIVersion, ref.Kind, err)
	}
	return gv.WithResource(strings.ToLower(ref.Kind) + "s"), nil
}

// release removes the controller's name from the admission gate of the
// Workload's job (Kueue copies the job's gate to its Workload, and the
// Workload's own is overwritten from the job's), or of the Workload itself
// when no job owns it (a Workload created directly). The patch tests the
// value the Workload shows, and is retried once with the job's own.
func (c *Controller) release(ctx context.Context, w *Workload) error {
	gvr, name, uid := WorkloadsGVR, w.Name, w.UID
	if idx := slices.IndexFunc(w.OwnerReferences, func(o metav1.OwnerReference) bool { return o.Controller != nil && *o.Controller }); idx >= 0 {
		ref := w.OwnerReferences[idx]
		var err error
		if gvr, err = ownerResource(ref); err != nil {
			return err
		}
		name, uid = ref.Name, ref.UID
	}
	res := c.cfg.Dynamic.Resource(gvr).Namespace(w.Namespace)
	patch := func(old string) error {
		path := "/metadata/annotations/" + jsonPointer(AnnotationAdmissionGatedBy)
		ops := []patchOp{{Op: "test", Path: "/metadata/uid", Value: string(uid)}, {Op: "test", Path: path, Value: old}}
		if rest := withoutGate(old, c.cfg.Gate); rest == "" {
			ops = append(ops, patchOp{Op: "remove", Path: path})
		} else {
			ops = append(ops, patchOp{Op: "replace", Path: path, Value: rest})
		}
		b, err := json.Marshal(ops)
		if err != nil {
			return err
		}
		_, err = res.Patch(ctx, name, types.JSONPatchType, b, metav1.PatchOptions{FieldManager: "gpusched-kueue"})
		return err
	}
	err := patch(w.Annotations[AnnotationAdmissionGatedBy])
	if err == nil || apierrors.IsNotFound(err) {
		return err
	}
	cur, gerr := res.Get(ctx, name, metav1.GetOptions{})
	if gerr != nil {
		return errors.Join(err, gerr)
	}
	v, ok := cur.GetAnnotations()[AnnotationAdmissionGatedBy]
	if !ok || !hasGate(v, c.cfg.Gate) {
		return nil // released already
	}
	return patch(v)
}

// say records an event on the Workload unless the same was said last on
// the topic (key names what was said: a decision and its type, "notes",
// or "learned|" and what was learned).
func (c *Controller) say(w *Workload, typ, reason, msg, key string) {
	topic := "decision"
	switch {
	case key == "notes":
		topic = key
	case strings.HasPrefix(key, "learned|"):
		topic = "learned"
	}
	said := c.said[w.UID]
	if said == nil {
		said = map[string]string{}
		c.said[w.UID] = said
	}
	if said[topic] == key {
		return
	}
	said[topic] = key
	ref := &corev1.ObjectReference{Kind: "Workload", APIVersion: Group + "/" + Version, Namespace: w.Namespace, Name: w.Name, UID: w.UID, ResourceVersion: w.ResourceVersion}
	c.cfg.Recorder.Event(ref, typ, reason, msg)
	if typ == corev1.EventTypeWarning {
		c.log.Warn(reason, "workload", w.Namespace+"/"+w.Name, "msg", msg)
	}
}

// Keys returns the Workload keys of a result's decisions, sorted (for
// logs and tests).
func (r *RoundResult) Keys() []string { return slices.Sorted(maps.Keys(r.Decisions)) }
