package admission

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/gpusched/gpusched/kube/model"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

var podsGVR = corev1.SchemeGroupVersion.WithResource("pods")

// kubeSim plays, over a fake clientset, the parts of a cluster the
// controller relies on to free GPUs: the API server's graceful deletion
// (a bound pod's delete sets its deletionTimestamp to now + the grace,
// DeleteOptions' or else the pod's terminationGracePeriodSeconds, default
// 30 s; a later delete only shortens it; grace 0, or an unbound pod, goes
// at once, but for one with finalizers, which stays: a terminating one's
// deletion grace becomes 0 and its deletionTimestamp its deletion's
// start, as the API server's BeforeDelete does, once), the kubelet (a
// terminating pod is removed at its deletionTimestamp, or ends if it has
// finalizers, unless stuck names it: a kubelet that never confirms), and
// the kube-scheduler (an ungated pod is bound, on the node
// its affinity names or any other, only where its GPUs are free: bound,
// non-terminal pods hold theirs, terminating or not). Time is the wall
// clock *now, which the test moves.
type kubeSim struct {
	t     *testing.T
	cs    *fake.Clientset
	now   *time.Time
	nodes []string
	gpus  map[string]int
	stuck map[string]bool // ns/name, or ns/* for all of a namespace
	// deletes counts the deletes by grace ("own" for the pod's own).
	deletes map[string]int
}

func newKubeSim(t *testing.T, cs *fake.Clientset, now *time.Time, nodes map[string]int) *kubeSim {
	k := &kubeSim{t: t, cs: cs, now: now, gpus: nodes, stuck: map[string]bool{}, deletes: map[string]int{}}
	for n := range nodes {
		k.nodes = append(k.nodes, n)
	}
	slices.Sort(k.nodes)
	cs.PrependReactor("delete", "pods", k.delete)
	return k
}

func (k *kubeSim) delete(a k8stesting.Action) (bool, runtime.Object, error) {
	da := a.(k8stesting.DeleteAction)
	obj, err := k.cs.Tracker().Get(podsGVR, da.GetNamespace(), da.GetName())
	if err != nil {
		return true, nil, err
	}
	p := obj.(*corev1.Pod).DeepCopy()
	opts := da.GetDeleteOptions()
	if pre := opts.Preconditions; pre != nil && pre.UID != nil && *pre.UID != p.UID {
		return true, nil, apierrors.NewConflict(podsGVR.GroupResource(), p.Name, nil)
	}
	grace := int64(30)
	if p.Spec.TerminationGracePeriodSeconds != nil {
		grace = *p.Spec.TerminationGracePeriodSeconds
	}
	k.deletes["own"]++
	if opts.GracePeriodSeconds != nil {
		grace = *opts.GracePeriodSeconds
		k.deletes["own"]--
		k.deletes[time.Duration(grace*int64(time.Second)).String()]++
	}
	if grace <= 0 || p.Spec.NodeName == "" || terminal(p) {
		grace = 0
		if len(p.Finalizers) == 0 {
			return true, nil, k.cs.Tracker().Delete(podsGVR, p.Namespace, p.Name)
		}
		if g := p.DeletionGracePeriodSeconds; p.DeletionTimestamp != nil && g != nil {
			if *g == 0 {
				return true, p, nil
			}
			start := p.DeletionTimestamp.Add(-time.Duration(*g) * time.Second)
			p.DeletionTimestamp, p.DeletionGracePeriodSeconds = &metav1.Time{Time: start}, &grace
			return true, p, k.cs.Tracker().Update(podsGVR, p, p.Namespace)
		}
	}
	at := k.now.Add(time.Duration(grace) * time.Second)
	if p.DeletionTimestamp != nil && !at.Before(p.DeletionTimestamp.Time) {
		return true, p, nil
	}
	p.DeletionTimestamp, p.DeletionGracePeriodSeconds = &metav1.Time{Time: at}, &grace
	return true, p, k.cs.Tracker().Update(podsGVR, p, p.Namespace)
}

func (k *kubeSim) pods() []*corev1.Pod {
	k.t.Helper()
	list, err := k.cs.Tracker().List(podsGVR, corev1.SchemeGroupVersion.WithKind("Pod"), "")
	require.NoError(k.t, err)
	var out []*corev1.Pod
	for i := range list.(*corev1.PodList).Items {
		out = append(out, &list.(*corev1.PodList).Items[i])
	}
	slices.SortFunc(out, func(a, b *corev1.Pod) int { return a.CreationTimestamp.Compare(b.CreationTimestamp.Time) })
	return out
}

// step removes the terminating pods whose time is up (a pod with
// finalizers ends instead: phase Failed) and binds the pending ones that
// fit.
func (k *kubeSim) step() {
	k.t.Helper()
	used := map[string]int{}
	for _, p := range k.pods() {
		if k.kubelet(p) && p.Spec.NodeName != "" && !terminal(p) {
			used[p.Spec.NodeName] += podGPUs(k.t, p)
		}
	}
	for _, p := range k.pods() {
		if p.Spec.NodeName != "" || hasGate(p.Spec.SchedulingGates) || terminal(p) || p.DeletionTimestamp != nil {
			continue
		}
		if n := k.bind(p, used); n != "" {
			used[n] += podGPUs(k.t, p)
		}
	}
}

// kubelet ends a terminating pod whose time is up: it removes it, or
// (with finalizers) fails it; it reports whether the pod is still there.
func (k *kubeSim) kubelet(p *corev1.Pod) bool {
	if p.DeletionTimestamp == nil || k.now.Before(p.DeletionTimestamp.Time) || k.stuck[p.Namespace+"/"+p.Name] || k.stuck[p.Namespace+"/*"] || terminal(p) {
		return true
	}
	if len(p.Finalizers) == 0 {
		require.NoError(k.t, k.cs.Tracker().Delete(podsGVR, p.Namespace, p.Name))
		return false
	}
	p = p.DeepCopy()
	p.Status.Phase = corev1.PodFailed
	require.NoError(k.t, k.cs.Tracker().Update(podsGVR, p, p.Namespace))
	return true
}

// bind binds a pending pod on the first node its affinity allows where
// its GPUs are free; it returns the node ("" if none).
func (k *kubeSim) bind(p *corev1.Pod, used map[string]int) string {
	g := podGPUs(k.t, p)
	for _, n := range k.nodes {
		if pinnedTo(p, n) && used[n]+g <= k.gpus[n] {
			p = p.DeepCopy()
			p.Spec.NodeName = n
			require.NoError(k.t, k.cs.Tracker().Update(podsGVR, p, p.Namespace))
			return n
		}
	}
	return ""
}

// held returns the GPUs of the bound, non-terminal pods, by namespace.
func (k *kubeSim) held() map[string]int {
	byNS := map[string]int{}
	for _, p := range k.pods() {
		if p.Spec.NodeName != "" && !terminal(p) {
			byNS[p.Namespace] += podGPUs(k.t, p)
		}
	}
	return byNS
}

// committed returns the GPUs of the pods let run (ungated) that are
// still there, not ended: bound or waiting for their GPUs, terminating
// or not.
func (k *kubeSim) committed() int {
	n := 0
	for _, p := range k.pods() {
		if !hasGate(p.Spec.SchedulingGates) && !terminal(p) {
			n += podGPUs(k.t, p)
		}
	}
	return n
}

// pinnedTo reports whether the pod's required affinity allows node n (by
// its metadata.name field; the product is the same on every node here).
func pinnedTo(p *corev1.Pod, n string) bool {
	a := p.Spec.Affinity
	if a == nil || a.NodeAffinity == nil || a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		return true
	}
	for _, term := range a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
		ok := true
		for _, f := range term.MatchFields {
			if f.Key == nodeNameField && !slices.Contains(f.Values, n) {
				ok = false
			}
		}
		if ok {
			return true
		}
	}
	return false
}

func podGPUs(t *testing.T, p *corev1.Pod) int {
	t.Helper()
	n, err := model.PodGPUs(p, "")
	require.NoError(t, err)
	return n
}

// syncSweep sweeps once the caches hold what the fake API server holds.
func syncSweep(ctx context.Context, t *testing.T, c *Controller) {
	t.Helper()
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	require.NoError(t, c.SyncCaches(sctx))
	require.NoError(t, c.Sweep(ctx))
}

// jobController plays the job controller: a suspended Job's pods are
// deleted (with their own grace, as it does), a running Job gets pods
// from its template up to its parallelism.
func (k *kubeSim) jobController(ctx context.Context) {
	k.t.Helper()
	jobs, err := k.cs.BatchV1().Jobs("").List(ctx, metav1.ListOptions{})
	require.NoError(k.t, err)
	for i := range jobs.Items {
		j := &jobs.Items[i]
		var active []*corev1.Pod
		for _, p := range k.pods() {
			if o := controllerOf(p); o != nil && o.UID == j.UID && !terminal(p) && p.DeletionTimestamp == nil {
				active = append(active, p)
			}
		}
		if suspended(j) {
			for _, p := range active {
				require.NoError(k.t, k.cs.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{}))
			}
			continue
		}
		for n := len(active); n < int(*j.Spec.Parallelism); n++ {
			uidSeq++
			p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: j.Namespace, Name: fmt.Sprintf("%s-%d", j.Name, uidSeq),
				UID: types.UID(fmt.Sprintf("uid-%d", uidSeq)), Labels: j.Spec.Template.Labels, Annotations: j.Spec.Template.Annotations,
				CreationTimestamp: metav1.NewTime(k.now.Add(time.Duration(uidSeq) * time.Millisecond)),
				OwnerReferences:   []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: j.Name, UID: j.UID, Controller: ptrTo(true)}}},
				Spec: *j.Spec.Template.Spec.DeepCopy()}
			_, err := k.cs.CoreV1().Pods(j.Namespace).Create(ctx, p, metav1.CreateOptions{})
			require.NoError(k.t, err)
		}
	}
}
