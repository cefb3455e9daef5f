package e2e

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/gpusched/gpusched/kube/model"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// bound is one binding the watcher saw.
type bound struct {
	uid     types.UID
	name    string
	node    string
	devices []int
	gpus    int
	group   string
	min     int
	at      time.Time
}

// watcher sees every pod of a namespace and checks each binding as it
// happens: a pod with GPUs carries the annotation of its devices, no device
// of a node is held by two live pods, and no pod lands on a node after it
// was fenced (marked unhealthy or deleted). Informer events come in the
// order of the API server's writes, so the live set is exact.
type watcher struct {
	mu         sync.Mutex
	live       map[types.UID]bound
	all        []bound
	groups     map[string][]bound // bindings per pod group
	fenced     map[string]time.Time
	grace      time.Duration
	annotated  bool // pods with GPUs must carry the annotation
	violations []string
	deleted    int
	stop       context.CancelFunc
}

func watch(ctx context.Context, cs kubernetes.Interface, ns string, grace time.Duration, annotated bool) (*watcher, error) {
	w := &watcher{live: map[types.UID]bound{}, groups: map[string][]bound{}, fenced: map[string]time.Time{}, grace: grace, annotated: annotated}
	ctx, w.stop = context.WithCancel(ctx)
	f := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithNamespace(ns))
	inf := f.Core().V1().Pods().Informer()
	_, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(o any) {
			if p := o.(*corev1.Pod); p.Spec.NodeName != "" {
				w.onBind(p)
			}
		},
		UpdateFunc: func(o, n any) {
			if o.(*corev1.Pod).Spec.NodeName == "" && n.(*corev1.Pod).Spec.NodeName != "" {
				w.onBind(n.(*corev1.Pod))
			}
		},
		DeleteFunc: func(o any) {
			if d, ok := o.(cache.DeletedFinalStateUnknown); ok {
				o = d.Obj
			}
			if p, ok := o.(*corev1.Pod); ok {
				w.mu.Lock()
				if _, ok := w.live[p.UID]; ok {
					w.deleted++
				}
				delete(w.live, p.UID)
				w.mu.Unlock()
			}
		},
	})
	if err != nil {
		return nil, err
	}
	f.Start(ctx.Done())
	for _, ok := range f.WaitForCacheSync(ctx.Done()) {
		if !ok {
			return nil, fmt.Errorf("watcher: informer did not sync")
		}
	}
	return w, nil
}

func (w *watcher) violate(format string, args ...any) {
	w.violations = append(w.violations, fmt.Sprintf(format, args...))
}

func (w *watcher) onBind(p *corev1.Pod) {
	now := time.Now()
	gpus, _ := model.PodGPUs(p, "")
	b := bound{uid: p.UID, name: p.Name, node: p.Spec.NodeName, gpus: gpus, group: model.PodGroup(p), at: now}
	if r, err := model.ParseRequest(p, ""); err == nil {
		b.min = r.MinMember
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if gpus > 0 && w.annotated {
		v, ok := p.Annotations[model.AnnotationGPUs]
		d, err := model.ParseIndices("", v)
		if !ok || err != nil || len(d) != gpus {
			w.violate("pod %s bound to %s without the annotation of its %d GPUs (%q)", p.Name, b.node, gpus, v)
		}
		b.devices = d
		for _, o := range w.live {
			if o.node != b.node {
				continue
			}
			for _, x := range d {
				if slices.Contains(o.devices, x) {
					w.violate("GPU %d of node %s booked twice: by %s and by %s", x, b.node, o.name, p.Name)
				}
			}
		}
	}
	if t, ok := w.fenced[b.node]; ok && now.After(t.Add(w.grace)) {
		w.violate("pod %s bound to node %s %.1f s after the node was fenced", p.Name, b.node, now.Sub(t).Seconds())
	}
	if _, ok := w.live[p.UID]; ok {
		w.violate("pod %s bound twice", p.Name)
	}
	w.live[p.UID] = b
	w.all = append(w.all, b)
	if b.group != "" {
		w.groups[b.group] = append(w.groups[b.group], b)
	}
}

// fence records that node may take no new pod from now on (after grace).
func (w *watcher) fence(node string) {
	w.mu.Lock()
	w.fenced[node] = time.Now()
	w.mu.Unlock()
}

func (w *watcher) snapshot() (all []bound, live map[types.UID]bound, violations []string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	live = make(map[types.UID]bound, len(w.live))
	for k, v := range w.live {
		live[k] = v
	}
	return slices.Clone(w.all), live, slices.Clone(w.violations)
}

// completer deletes bound pods once they have run for lifetime, as if their
// jobs finished: single pods alone, a pod group all together once all its
// members are bound. Nothing runs pods here, so a bound pod is deleted with
// no grace period.
func complete(ctx context.Context, cs kubernetes.Interface, ns string, w *watcher, lifetime time.Duration, errs chan<- error) {
	zero := int64(0)
	del := metav1.DeleteOptions{GracePeriodSeconds: &zero}
	done := map[types.UID]bool{}
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(200 * time.Millisecond):
		}
		_, live, _ := w.snapshot()
		now := time.Now()
		groups := map[string][]bound{}
		for _, b := range live {
			if done[b.uid] {
				continue
			}
			if b.group != "" {
				groups[b.group] = append(groups[b.group], b)
				continue
			}
			if now.Sub(b.at) >= lifetime {
				done[b.uid] = true
				if err := cs.CoreV1().Pods(ns).Delete(ctx, b.name, del); err != nil && ctx.Err() == nil {
					errs <- fmt.Errorf("completer: delete %s: %w", b.name, err)
				}
			}
		}
		for _, members := range groups {
			if len(members) < members[0].min {
				continue
			}
			last := members[0].at
			for _, m := range members {
				if m.at.After(last) {
					last = m.at
				}
			}
			if now.Sub(last) < lifetime {
				continue
			}
			for _, m := range members {
				done[m.uid] = true
				if err := cs.CoreV1().Pods(ns).Delete(ctx, m.name, del); err != nil && ctx.Err() == nil {
					errs <- fmt.Errorf("completer: delete %s: %w", m.name, err)
				}
			}
		}
	}
}
