package admission

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	toolsrecord "k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/flowcontrol"
	"k8s.io/client-go/util/workqueue"
)

// What a user reads with kubectl describe. Every workload's state is
// told twice: by Events on the pod or Job (the broadcaster of
// client-go's tools/record, whose correlator aggregates similar events
// of an object and rate-limits each object's, behind a queue that drops
// events rather than block when full), and, for pods, by the condition
// ConditionAdmitted in their status, written by a background worker from
// a deduplicating work queue when its status or reason changes. Both
// writers share one token bucket (Config.EventQPS, Config.EventBurst),
// so that thousands of workloads changing at once do not flood the API
// server: their events and conditions arrive late (events are dropped
// past the queue's 1,000) rather than crowd out the admissions.

// ConditionAdmitted is the pod condition the controller writes: True
// when the pod's workload is admitted (reason ReasonAdmitted), False with
// the reason it waits otherwise. For people only: the controller never
// reads it back.
const ConditionAdmitted corev1.PodConditionType = "gpusched.io/Admitted"

// Why a workload waits: the reason of its Event and of its condition
// ConditionAdmitted.
const (
	// ReasonNoCapacity: the round gave the GPUs of the types it may run on
	// to other jobs (the policy's allocation and the round mechanism).
	ReasonNoCapacity = "GPUSchedNoCapacity"
	// ReasonQuota: its tenant's quota (maxGPUs) leaves no room on any type
	// it may run on.
	ReasonQuota = "GPUSchedQuota"
	// ReasonGangIncomplete: a pod group with fewer members than its
	// min-member.
	ReasonGangIncomplete = "GPUSchedGangIncomplete"
	// ReasonUnrunnable: it asks for more GPUs than the cluster has of any
	// type it may run on.
	ReasonUnrunnable = "GPUSchedUnrunnable"
	// ReasonAwaitingGPUs: the round assigned it a type but the GPUs are not
	// free yet (preempted pods still leaving, or without preemption) or
	// its preempted pods are not back.
	ReasonAwaitingGPUs = "GPUSchedAwaitingGPUs"
)

// Defaults of Config.EventQPS and Config.EventBurst.
const (
	DefaultEventQPS   = 20
	DefaultEventBurst = 200
)

// eventer records events and pod conditions. Safe for concurrent use.
type eventer struct {
	broadcaster toolsrecord.EventBroadcaster
	recorder    toolsrecord.EventRecorder
	limiter     flowcontrol.RateLimiter
	cl          kubernetes.Interface
	log         *slog.Logger
	metrics     *Metrics
	now         func() time.Time

	mu   sync.Mutex
	sent map[string]string // object and reason -> last message
	seq  int

	queue   *workqueue.Typed[types.NamespacedName]
	want    map[types.NamespacedName]wantCond // under mu
	workers sync.WaitGroup
	ctx     context.Context
	cancel  context.CancelFunc
}

type wantCond struct {
	uid  types.UID
	cond corev1.PodCondition
}

// limitedSink makes the broadcaster's writes wait for the shared bucket.
type limitedSink struct {
	toolsrecord.EventSink
	limiter flowcontrol.RateLimiter
}

func (s limitedSink) Create(e *corev1.Event) (*corev1.Event, error) {
	s.limiter.Accept()
	return s.EventSink.Create(e)
}

func (s limitedSink) Update(e *corev1.Event) (*corev1.Event, error) {
	s.limiter.Accept()
	return s.EventSink.Update(e)
}

func (s limitedSink) Patch(e *corev1.Event, data []byte) (*corev1.Event, error) {
	s.limiter.Accept()
	return s.EventSink.Patch(e, data)
}

// conditionWorkers write pod conditions in parallel (the bucket bounds
// their rate).
const conditionWorkers = 2

func newEvents(ctx context.Context, cfg Config, log *slog.Logger) *eventer {
	qps, burst := cfg.EventQPS, cfg.EventBurst
	if qps <= 0 {
		qps = DefaultEventQPS
	}
	if burst <= 0 {
		burst = DefaultEventBurst
	}
	cl := cfg.EventClient
	if cl == nil {
		cl = cfg.Client
	}
	e := &eventer{cl: cl, log: log, metrics: cfg.Metrics, now: time.Now, sent: map[string]string{},
		limiter: flowcontrol.NewTokenBucketRateLimiter(qps, burst),
		queue:   workqueue.NewTyped[types.NamespacedName](), want: map[types.NamespacedName]wantCond{}}
	if cfg.Now != nil {
		e.now = cfg.Now
	}
	e.ctx, e.cancel = context.WithCancel(context.WithoutCancel(ctx))
	e.broadcaster = toolsrecord.NewBroadcaster(toolsrecord.WithContext(e.ctx))
	e.broadcaster.StartRecordingToSink(limitedSink{EventSink: &typedcorev1.EventSinkImpl{Interface: cl.CoreV1().Events("")}, limiter: e.limiter})
	e.recorder = e.broadcaster.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "gpusched-admission"})
	for range conditionWorkers {
		e.workers.Go(e.work)
	}
	return e
}

// close stops the workers (conditions not written yet are dropped) and
// the broadcaster.
func (e *eventer) close() {
	e.queue.ShutDown()
	e.cancel()
	e.workers.Wait()
	e.broadcaster.Shutdown()
}

// record records an event on an object unless its last event of this
// reason said the same.
func (e *eventer) record(obj corev1.ObjectReference, typ, reason, msg string) {
	id := obj.Namespace + "/" + obj.Name + "|" + string(obj.UID) + "|" + reason
	msg = cut1k(msg)
	e.mu.Lock()
	if e.sent[id] == msg {
		e.mu.Unlock()
		return
	}
	if len(e.sent) >= 1<<16 {
		clear(e.sent)
	}
	e.sent[id] = msg
	e.mu.Unlock()
	e.metrics.event(typ, reason)
	if syncEvents {
		e.recordNow(obj, typ, reason, msg)
	} else {
		e.recorder.Event(&obj, typ, reason, msg)
	}
	if typ == corev1.EventTypeWarning {
		e.log.Warn(reason, "object", obj.Namespace+"/"+obj.Name, "msg", msg)
	}
}

// condition asks for the pod's condition ConditionAdmitted to say
// status, reason and msg; it is written (later, by a worker) only if the
// pod's (cached) condition says otherwise.
func (e *eventer) condition(p *corev1.Pod, status corev1.ConditionStatus, reason, msg string) {
	msg = cut1k(msg)
	var cur *corev1.PodCondition
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == ConditionAdmitted {
			cur = &p.Status.Conditions[i]
		}
	}
	key := types.NamespacedName{Namespace: p.Namespace, Name: p.Name}
	c := corev1.PodCondition{Type: ConditionAdmitted, Status: status, Reason: reason, Message: msg,
		LastTransitionTime: metav1.NewTime(e.now().Truncate(time.Second))}
	e.mu.Lock()
	defer e.mu.Unlock()
	if w, ok := e.want[key]; ok && w.uid == p.UID && w.cond.Status == status && w.cond.Reason == reason && w.cond.Message == msg {
		return // queued already
	}
	if cur != nil && cur.Status == status && cur.Reason == reason && cur.Message == msg {
		delete(e.want, key)
		return
	}
	if cur != nil && cur.Status == status {
		c.LastTransitionTime = cur.LastTransitionTime
	}
	if syncEvents {
		e.metrics.conditionWrite(e.writeCondition(key, wantCond{uid: p.UID, cond: c}))
		return
	}
	if len(e.want) >= maxRecords {
		return
	}
	e.want[key] = wantCond{uid: p.UID, cond: c}
	e.queue.Add(key)
}

func (e *eventer) work() {
	for {
		key, quit := e.queue.Get()
		if quit {
			return
		}
		e.mu.Lock()
		w, ok := e.want[key]
		delete(e.want, key)
		e.mu.Unlock()
		if ok {
			e.limiter.Accept()
			err := e.writeCondition(key, w)
			e.metrics.conditionWrite(err)
			if err != nil {
				e.log.Debug("pod condition", "pod", key.String(), "err", err)
			}
		}
		e.queue.Done(key)
	}
}

// writeCondition patches the pod's status (a strategic merge on the
// conditions' type; the UID makes it a precondition).
func (e *eventer) writeCondition(key types.NamespacedName, w wantCond) error {
	patch := map[string]any{
		"metadata": map[string]any{"uid": w.uid},
		"status":   map[string]any{"conditions": []corev1.PodCondition{w.cond}},
	}
	b, err := json.Marshal(patch)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(e.ctx, 30*time.Second)
	defer cancel()
	_, err = e.cl.CoreV1().Pods(key.Namespace).Patch(ctx, key.Name, types.StrategicMergePatchType, b, metav1.PatchOptions{}, "status")
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil // gone, or another pod of that name
	}
	if err != nil {
		return fmt.Errorf("admission: condition of pod %s: %w", key, err)
	}
	return nil
}

// event records an event on the workload's object.
func (c *Controller) event(w *workload, typ, reason, msg string) {
	kind, ns, name, uid := w.object()
	apiVersion := "v1"
	if kind == "Job" {
		apiVersion = "batch/v1"
	}
	c.eventOn(corev1.ObjectReference{Kind: kind, APIVersion: apiVersion, Namespace: ns, Name: name, UID: types.UID(uid)}, typ, reason, msg)
}

// eventOn records an event on an object.
func (c *Controller) eventOn(obj corev1.ObjectReference, typ, reason, msg string) {
	c.events.record(obj, typ, reason, msg)
}

// tell says where a workload stands: an event (Normal, or Warning for
// typ Warning) and, on its pods, the condition ConditionAdmitted.
func (c *Controller) tell(w *workload, typ, reason, msg string, admitted bool) {
	c.event(w, typ, reason, msg)
	status := corev1.ConditionFalse
	if admitted {
		status = corev1.ConditionTrue
	}
	for _, p := range w.pods {
		if !terminal(p) && p.DeletionTimestamp == nil {
			c.events.condition(p, status, reason, msg)
		}
	}
}

// syncEvents makes record write each event, and condition each pod
// condition, at once through the client, bypassing the broadcaster and
// the work queue (the package's tests count events right after a round,
// and the fake client takes a patch's UID for a change, not a
// precondition).
var syncEvents bool

func (e *eventer) recordNow(obj corev1.ObjectReference, typ, reason, msg string) {
	now := metav1.NewTime(e.now())
	name := obj.Name
	if len(name) > 200 {
		name = name[:200]
	}
	ev := &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{Name: fmt.Sprintf("%s.%x", name, now.UnixNano()), Namespace: obj.Namespace},
		InvolvedObject: obj, Reason: reason, Message: msg, Type: typ,
		Source:         corev1.EventSource{Component: "gpusched-admission"},
		FirstTimestamp: now, LastTimestamp: now, Count: 1,
	}
	e.mu.Lock()
	e.seq++
	ev.Name += fmt.Sprintf(".%d", e.seq)
	e.mu.Unlock()
	if _, err := e.cl.CoreV1().Events(obj.Namespace).Create(e.ctx, ev, metav1.CreateOptions{}); err != nil {
		e.log.Warn("event", "object", obj.Namespace+"/"+obj.Name, "reason", reason, "err", err)
	}
}
