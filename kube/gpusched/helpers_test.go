package gpusched

import (
	"math"
	"os"
	"strconv"
	"time"

	"github.com/gpusched/gpusched/kube/model"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
)

const dgx1Links = `{"interconnect":"hybrid-cube-mesh"}`

func node(name, product string, gpus int, ready bool, ann map[string]string, labels map[string]string) *corev1.Node {
	l := map[string]string{model.LabelProduct: product, model.LabelCount: strconv.Itoa(gpus)}
	for k, v := range labels {
		l[k] = v
	}
	st := corev1.ConditionTrue
	if !ready {
		st = corev1.ConditionFalse
	}
	q := *resource.NewQuantity(int64(gpus), resource.DecimalSI)
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: l, Annotations: ann},
		Status: corev1.NodeStatus{
			Capacity:    corev1.ResourceList{model.ResourceGPU: q},
			Allocatable: corev1.ResourceList{model.ResourceGPU: q},
			Conditions:  []corev1.NodeCondition{{Type: corev1.NodeReady, Status: st}},
		},
	}
}

type podOpt func(*corev1.Pod)

// testKey is the record key of the tests' ledgers and plugins.
var testKey, _ = NewRecordKey([]byte("gpusched-test-record-key"))

func newTestLedger(opts model.NodeOptions, warn func(any, string, string)) *Ledger {
	l := NewLedger(opts, warn)
	l.SetRecordKey(testKey)
	return l
}

// onNode binds the pod to node n with devices recorded as the plugin
// records them (signed with testKey).
func onNode(n string, devices string) podOpt {
	return func(p *corev1.Pod) {
		p.Spec.NodeName = n
		if devices != "" {
			p.Annotations[model.AnnotationGPUs] = devices
			d, err := model.ParseIndices("", devices)
			if err == nil {
				p.Annotations[model.AnnotationGPUsMAC] = testKey.Sign(p.UID, n, d)
			}
		}
	}
}

// forged binds the pod to node n with a devices annotation but no valid
// record (what a tenant can write).
func forged(n string, devices string) podOpt {
	return func(p *corev1.Pod) {
		p.Spec.NodeName = n
		p.Annotations[model.AnnotationGPUs] = devices
		p.Annotations[model.AnnotationGPUsMAC] = "v1:00000000000000000000000000000000"
	}
}

func inGroup(g string, min int) podOpt {
	return func(p *corev1.Pod) {
		p.Labels[model.LabelPodGroup] = g
		p.Annotations[model.AnnotationMinMember] = strconv.Itoa(min)
	}
}

func ann(k, v string) podOpt { return func(p *corev1.Pod) { p.Annotations[k] = v } }

func created(t time.Time) podOpt {
	return func(p *corev1.Pod) { p.CreationTimestamp = metav1.NewTime(t) }
}

func gpuPod(name string, gpus int, opts ...podOpt) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID("uid-" + name),
			Labels: map[string]string{}, Annotations: map[string]string{}},
		Spec: corev1.PodSpec{SchedulerName: "gpusched", Containers: []corev1.Container{{Name: "c", Image: "x"}}},
	}
	if gpus > 0 {
		p.Spec.Containers[0].Resources.Limits = corev1.ResourceList{model.ResourceGPU: *resource.NewQuantity(int64(gpus), resource.DecimalSI)}
	}
	for _, o := range opts {
		o(p)
	}
	return p
}

func resourceMust(s string) resource.Quantity { return resource.MustParse(s) }

func readFile(path string) (string, error) {
	b, err := os.ReadFile(path)
	return string(b), err
}

func unknown(raw string) *runtime.Unknown {
	return &runtime.Unknown{Raw: []byte(raw), ContentType: runtime.ContentTypeJSON}
}

func nan() float64 { return math.NaN() }
