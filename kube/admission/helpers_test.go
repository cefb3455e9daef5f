package admission

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/gpusched/gpusched/kube/model"
	"github.com/gpusched/gpusched/topology"
	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
)

const testNS = "team-a"

// The tests count events right after a round: write them at once.
func init() { syncEvents = true }

func gpuNode(name, product string, gpus int) *corev1.Node {
	q := *resource.NewQuantity(int64(gpus), resource.DecimalSI)
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
			model.LabelProduct: product, model.LabelCount: strconv.Itoa(gpus), "pool": "test"}},
		Status: corev1.NodeStatus{
			Capacity: corev1.ResourceList{model.ResourceGPU: q}, Allocatable: corev1.ResourceList{model.ResourceGPU: q},
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
		},
	}
}

var uidSeq int

func gatedPod(ns, name string, gpus int, ann map[string]string) *corev1.Pod {
	uidSeq++
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Annotations: ann, UID: types.UID("uid-" + strconv.Itoa(uidSeq)),
			CreationTimestamp: metav1.NewTime(time.Unix(int64(1000+uidSeq), 0))},
		Spec: corev1.PodSpec{
			SchedulingGates: []corev1.PodSchedulingGate{{Name: GateName}},
			Containers: []corev1.Container{{Name: "train", Image: "pause",
				Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{model.ResourceGPU: *resource.NewQuantity(int64(gpus), resource.DecimalSI)}}}},
		},
	}
}

func gatedJob(ns, name string, parallelism int32, gpus int, ann map[string]string) *batchv1.Job {
	uidSeq++
	uid := "uid-" + strconv.Itoa(uidSeq)
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Annotations: ann, UID: types.UID(uid),
			CreationTimestamp: metav1.NewTime(time.Unix(int64(1000+uidSeq), 0))},
		Spec: batchv1.JobSpec{
			Parallelism: &parallelism, Suspend: ptrTo(true),
			// The selector and template labels the API server defaults a
			// Job to (its pods are the Job's only where they match).
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{batchv1.ControllerUidLabel: uid}},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{batchv1.ControllerUidLabel: uid, batchv1.JobNameLabel: name}},
				Spec: gatedPod(ns, name, gpus, nil).Spec},
		},
	}
}

// rates is a throughput annotation.
func rates(v string) map[string]string { return map[string]string{model.AnnotationThroughput: v} }

// testClock is a controller clock the test moves.
type testClock struct{ t float64 }

func (c *testClock) now() float64 { return c.t }

func newController(t *testing.T, cs kubernetes.Interface, clk *testClock, mod func(*Config)) *Controller {
	t.Helper()
	pol, err := PolicyByName("max-min-fairness")
	require.NoError(t, err)
	cfg := Config{Client: cs, Policy: pol, Clock: clk.now, StateNamespace: "gpusched", NodeSelector: map[string]string{"pool": "test"}}
	if mod != nil {
		mod(&cfg)
	}
	c, err := New(context.Background(), cfg)
	require.NoError(t, err)
	t.Cleanup(c.Close)
	return c
}

func getPod(t *testing.T, cs kubernetes.Interface, ns, name string) *corev1.Pod {
	t.Helper()
	p, err := cs.CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{})
	require.NoError(t, err)
	return p
}

// affinityType returns the type a pod's affinity steers it to, by
// product, and whether the node selector is in it too.
func affinityProducts(p *corev1.PodSpec) []string {
	if p.Affinity == nil || p.Affinity.NodeAffinity == nil || p.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		return nil
	}
	var out []string
	for _, term := range p.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
		for _, r := range term.MatchExpressions {
			if r.Key == model.LabelProduct {
				out = append(out, r.Values...)
			}
		}
	}
	return out
}

// checkInvariants checks that the gates are off exactly for the admitted
// workloads and that no type's capacity is exceeded.
func checkInvariants(t *testing.T, cs kubernetes.Interface, res *RoundResult) {
	t.Helper()
	pods, err := cs.CoreV1().Pods("").List(context.Background(), metav1.ListOptions{})
	require.NoError(t, err)
	used := map[topology.GPUType]int{}
	for i := range pods.Items {
		p := &pods.Items[i]
		if terminal(p) || p.Annotations[AnnotationPreempted] != "" {
			continue
		}
		key := "pod/" + p.Namespace + "/" + p.Name
		if g := model.PodGroup(p); g != "" {
			key = "group/" + g
		}
		typ, admitted := res.Admitted[key]
		require.Equal(t, !admitted, hasGate(p.Spec.SchedulingGates), "pod %s: gate vs admitted %v", key, admitted)
		if admitted {
			require.Equal(t, string(typ), p.Annotations[AnnotationAdmittedType], key)
			n, err := model.PodGPUs(p, "")
			require.NoError(t, err)
			used[typ] += n
		}
	}
	for typ, n := range used {
		require.LessOrEqual(t, n, res.Capacity[typ], "type %s over capacity", typ)
	}
}

// savedState decodes the controller's state ConfigMap in namespace
// gpusched.
func savedState(t *testing.T, cs kubernetes.Interface) ctrlState {
	t.Helper()
	return savedDoc(t, cs).Controller
}

// savedDoc decodes the whole saved state: the controller's records, the
// core's snapshot and the estimator's.
func savedDoc(t *testing.T, cs kubernetes.Interface) stateDoc {
	t.Helper()
	ctx := context.Background()
	cms := cs.CoreV1().ConfigMaps("gpusched")
	head, err := cms.Get(ctx, DefaultStateName, metav1.GetOptions{})
	require.NoError(t, err)
	doc, _, err := decodeState(head.Data, head.BinaryData, func(slot int64, i int) ([]byte, error) {
		cm, err := cms.Get(ctx, chunkName(DefaultStateName, slot, i), metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		return cm.BinaryData[chunkKey], nil
	})
	require.NoError(t, err)
	return doc
}

// syncRound runs a round once the controller's caches hold what the
// (fake) API server holds: the tests change objects and run a round at
// once, where a real controller's rounds are minutes apart.
func syncRound(ctx context.Context, c *Controller) (*RoundResult, error) {
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := c.SyncCaches(sctx); err != nil {
		return nil, err
	}
	return c.Round(ctx)
}
