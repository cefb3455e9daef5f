package kueue_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/gpusched/gpusched/allocation"
	"github.com/gpusched/gpusched/kube/kueue"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"
)

// Products as GPU feature discovery labels them.
const (
	v100 = "Tesla-V100-SXM2-16GB"
	k80  = "Tesla-K80"
	p100 = "Tesla-P100-PCIE-16GB"
)

var jobsGVR = schema.GroupVersionResource{Group: "batch", Version: "v1", Resource: "jobs"}

func obj(apiVersion, kind, ns, name string, fields map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": apiVersion, "kind": kind}}
	for k, v := range fields {
		u.Object[k] = v
	}
	u.SetName(name)
	if ns != "" {
		u.SetNamespace(ns)
	}
	u.SetUID(types.UID("uid-" + ns + "-" + name))
	u.SetCreationTimestamp(metav1.NewTime(time.Unix(1_700_000_000, 0)))
	return u
}

// flavorObj is a ResourceFlavor of a product.
func flavorObj(name, product string) *unstructured.Unstructured {
	return obj("kueue.x-k8s.io/v1beta2", "ResourceFlavor", "", name, map[string]any{
		"spec": map[string]any{"nodeLabels": map[string]any{"nvidia.com/gpu.product": product}}})
}

// quota is a flavor's quota in a ClusterQueue: nominal, and borrowing and
// lending limits (-1: none).
type quota struct {
	flavor                  string
	nominal, borrow, lendTo int
}

func cqObj(name, cohort string, weight string, qs ...quota) *unstructured.Unstructured {
	var flavors []any
	for _, q := range qs {
		r := map[string]any{"name": "nvidia.com/gpu", "nominalQuota": fmt.Sprint(q.nominal)}
		if q.borrow >= 0 {
			r["borrowingLimit"] = fmt.Sprint(q.borrow)
		}
		if q.lendTo >= 0 {
			r["lendingLimit"] = fmt.Sprint(q.lendTo)
		}
		flavors = append(flavors, map[string]any{"name": q.flavor, "resources": []any{r}})
	}
	// namespaceSelector {} takes every namespace (Kueue's nil takes none).
	spec := map[string]any{"resourceGroups": []any{map[string]any{"coveredResources": []any{"nvidia.com/gpu"}, "flavors": flavors}},
		"namespaceSelector": map[string]any{}}
	if cohort != "" {
		spec["cohortName"] = cohort
	}
	if weight != "" {
		spec["fairSharing"] = map[string]any{"weight": weight}
	}
	return obj("kueue.x-k8s.io/v1beta2", "ClusterQueue", "", name, map[string]any{"spec": spec})
}

// withPreemption sets a ClusterQueue's spec.preemption.
func withPreemption(cq *unstructured.Unstructured, p map[string]any) *unstructured.Unstructured {
	cq.Object["spec"].(map[string]any)["preemption"] = p
	return cq
}

func lqObj(ns, name, cq string) *unstructured.Unstructured {
	return obj("kueue.x-k8s.io/v1beta2", "LocalQueue", ns, name, map[string]any{"spec": map[string]any{"clusterQueue": cq}})
}

// wl describes a Workload of one pod set.
type wl struct {
	ns, name, queue string
	gpus, count     int
	ann             map[string]string // pod template annotations
	selector        map[string]string
	gate            string // kueue.x-k8s.io/admission-gated-by
	admittedOn      string // flavor, with the ClusterQueue in cq
	cq              string
	priority        int
	created         int64 // seconds after the base time
	// res is the GPU resource ("": nvidia.com/gpu); initGPUs and
	// sidecarGPUs, if set, add a plain init container and a sidecar (an
	// init container with restartPolicy Always) asking for that many.
	res                   string
	initGPUs, sidecarGPUs int
}

func (w wl) objects() []*unstructured.Unstructured {
	ann := map[string]any{}
	for k, v := range w.ann {
		ann[k] = v
	}
	res := w.res
	if res == "" {
		res = "nvidia.com/gpu"
	}
	limits := func(n int) map[string]any { return map[string]any{"limits": map[string]any{res: fmt.Sprint(n)}} }
	podSpec := map[string]any{"containers": []any{map[string]any{"name": "main", "image": "x", "resources": limits(w.gpus)}}}
	var inits []any
	if w.initGPUs > 0 {
		inits = append(inits, map[string]any{"name": "init", "image": "x", "resources": limits(w.initGPUs)})
	}
	if w.sidecarGPUs > 0 {
		inits = append(inits, map[string]any{"name": "sidecar", "image": "x", "restartPolicy": "Always", "resources": limits(w.sidecarGPUs)})
	}
	if inits != nil {
		podSpec["initContainers"] = inits
	}
	if w.selector != nil {
		sel := map[string]any{}
		for k, v := range w.selector {
			sel[k] = v
		}
		podSpec["nodeSelector"] = sel
	}
	count := max(w.count, 1)
	u := obj("kueue.x-k8s.io/v1beta2", "Workload", w.ns, w.name, map[string]any{
		"spec": map[string]any{"queueName": w.queue, "priority": int64(w.priority), "podSets": []any{map[string]any{
			"name": "main", "count": int64(count), "template": map[string]any{"metadata": map[string]any{"annotations": ann}, "spec": podSpec}}}}})
	u.SetCreationTimestamp(metav1.NewTime(time.Unix(1_700_000_000+w.created, 0)))
	job := obj("batch/v1", "Job", w.ns, "job-"+w.name, map[string]any{"spec": map[string]any{}})
	t := true
	u.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: job.GetName(), UID: job.GetUID(), Controller: &t}})
	if w.gate != "" {
		u.SetAnnotations(map[string]string{kueue.AnnotationAdmissionGatedBy: w.gate})
		job.SetAnnotations(map[string]string{kueue.AnnotationAdmissionGatedBy: w.gate})
	}
	if w.admittedOn != "" {
		u.Object["status"] = map[string]any{
			"conditions": []any{map[string]any{"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved", "message": "", "lastTransitionTime": "2023-11-14T22:13:20Z"},
				map[string]any{"type": "Admitted", "status": "True", "reason": "Admitted", "message": "", "lastTransitionTime": "2023-11-14T22:13:20Z"}},
			"admission": map[string]any{"clusterQueue": w.cq, "podSetAssignments": []any{map[string]any{"name": "main",
				"flavors": map[string]any{res: w.admittedOn}, "resourceUsage": map[string]any{res: fmt.Sprint(w.gpus * count)}, "count": int64(count)}}},
		}
	}
	return []*unstructured.Unstructured{u, job}
}

// withNamespaceSelector sets a ClusterQueue's spec.namespaceSelector
// (nil: none, as Kueue reads it: no namespace).
func withNamespaceSelector(cq *unstructured.Unstructured, sel map[string]any) *unstructured.Unstructured {
	spec := cq.Object["spec"].(map[string]any)
	if sel == nil {
		delete(spec, "namespaceSelector")
	} else {
		spec["namespaceSelector"] = sel
	}
	return cq
}

// cluster is a fake API with Kueue's objects, and a controller over it.
type cluster struct {
	t    testing.TB
	cs   *fake.Clientset
	dyn  *dynamicfake.FakeDynamicClient
	rec  *record.FakeRecorder
	ctrl *kueue.Controller
	// metrics, if set, are given to the controllers made after.
	metrics *kueue.Metrics
	// tune, if set, changes the Config of the controllers made after.
	tune func(*kueue.Config)
}

func newCluster(t testing.TB, pol allocation.Policy, objs ...*unstructured.Unstructured) *cluster {
	t.Helper()
	sch := runtime.NewScheme()
	lists := map[schema.GroupVersionResource]string{
		kueue.WorkloadsGVR: "WorkloadList", kueue.ClusterQueuesGVR: "ClusterQueueList", kueue.LocalQueuesGVR: "LocalQueueList",
		kueue.ResourceFlavorGVR: "ResourceFlavorList", jobsGVR: "JobList",
	}
	ros := make([]runtime.Object, len(objs))
	for i, o := range objs {
		ros[i] = o
	}
	c := &cluster{t: t, cs: fake.NewClientset(namespaces(objs)...), dyn: dynamicfake.NewSimpleDynamicClientWithCustomListKinds(sch, lists, ros...), rec: record.NewFakeRecorder(1 << 16)}
	c.ctrl = c.controller(pol)
	return c
}

func (c *cluster) controller(pol allocation.Policy) *kueue.Controller {
	c.t.Helper()
	if pol == nil {
		pol = &allocation.MaxMinFairness{}
	}
	cfg := kueue.Config{Client: c.cs, Dynamic: c.dyn, Policy: pol, PolicyName: "max-min-fairness",
		Recorder: c.rec, Metrics: c.metrics, MinInterval: time.Millisecond, Interval: time.Second}
	if c.tune != nil {
		c.tune(&cfg)
	}
	ctrl, err := kueue.New(cfg)
	require.NoError(c.t, err)
	ctx, cancel := context.WithCancel(context.Background())
	c.t.Cleanup(cancel)
	require.NoError(c.t, ctrl.Start(ctx))
	return ctrl
}

// namespaces are the namespaces of the objects, each labelled with its
// name (kubernetes.io/metadata.name, as the API server labels them).
func namespaces(objs []*unstructured.Unstructured) []runtime.Object {
	var out []runtime.Object
	seen := map[string]bool{}
	for _, o := range objs {
		if ns := o.GetNamespace(); ns != "" && !seen[ns] {
			seen[ns] = true
			out = append(out, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: map[string]string{corev1.LabelMetadataName: ns}}})
		}
	}
	return out
}

// round runs a round once the informers show the API's objects.
func (c *cluster) round() *kueue.RoundResult {
	c.t.Helper()
	c.settle()
	r, err := c.ctrl.Round(context.Background())
	require.NoError(c.t, err)
	return r
}

// settle waits until the Workload informer shows what the API holds.
func (c *cluster) settle() {
	c.t.Helper()
	want := map[string]string{}
	list, err := c.dyn.Resource(kueue.WorkloadsGVR).List(context.Background(), metav1.ListOptions{})
	require.NoError(c.t, err)
	for _, w := range list.Items {
		want[w.GetNamespace()+"/"+w.GetName()] = kueue.Fingerprint(&w)
	}
	require.Eventually(c.t, func() bool { return c.ctrl.Synced(want) }, 5*time.Second, 5*time.Millisecond)
}

// patches returns the patch actions on a resource, as "name: body".
func (c *cluster) patches(resource string) []string {
	var out []string
	for _, a := range c.dyn.Actions() {
		if p, ok := a.(clienttesting.PatchAction); ok && a.GetResource().Resource == resource {
			out = append(out, p.GetName()+": "+string(p.GetPatch()))
		}
	}
	return out
}

// get returns an object of the fake API.
func (c *cluster) get(gvr schema.GroupVersionResource, ns, name string) *unstructured.Unstructured {
	c.t.Helper()
	u, err := c.dyn.Resource(gvr).Namespace(ns).Get(context.Background(), name, metav1.GetOptions{})
	require.NoError(c.t, err)
	return u
}

// selector is a Workload's node selector value for the product label.
func (c *cluster) selector(ns, name string) string {
	u := c.get(kueue.WorkloadsGVR, ns, name)
	ps, _, _ := unstructured.NestedSlice(u.Object, "spec", "podSets")
	sel, _, _ := unstructured.NestedStringMap(ps[0].(map[string]any), "template", "spec", "nodeSelector")
	return sel["nvidia.com/gpu.product"]
}

// events drains the recorded events.
func (c *cluster) events() []string {
	var out []string
	for {
		select {
		case e := <-c.rec.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

func grep(lines []string, s string) []string {
	var out []string
	for _, l := range lines {
		if strings.Contains(l, s) {
			out = append(out, l)
		}
	}
	return out
}
