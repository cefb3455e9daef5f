package admission_test

import (
	"context"
	"fmt"
	"maps"
	"slices"

	"github.com/gpusched/gpusched/kube/admission"
	"github.com/gpusched/gpusched/kube/model"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

// Embedding the controller: one V100 node and one K80 node of 4 GPUs, two
// gated pods of 4 GPUs that run 4 and 2 times faster on the V100. Under
// heterogeneity-aware max-min fairness each round admits both, one per
// type, and the next round swaps them (each pod is preempted, created
// again, gated, and admitted on its new type in the same round).
func ExampleController() {
	ctx := context.Background()
	node := func(name, product string) *corev1.Node {
		four := *resource.NewQuantity(4, resource.DecimalSI)
		return &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{model.LabelProduct: product, model.LabelCount: "4"}},
			Status: corev1.NodeStatus{Capacity: corev1.ResourceList{model.ResourceGPU: four}, Allocatable: corev1.ResourceList{model.ResourceGPU: four},
				Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}},
		}
	}
	pod := func(name, rates string) *corev1.Pod {
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: "ml", Name: name, Annotations: map[string]string{model.AnnotationThroughput: rates}},
			Spec: corev1.PodSpec{
				SchedulingGates: []corev1.PodSchedulingGate{{Name: admission.GateName}},
				Containers: []corev1.Container{{Name: "train", Image: "trainer",
					Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{model.ResourceGPU: *resource.NewQuantity(4, resource.DecimalSI)}}}},
			},
		}
	}
	cs := fake.NewClientset(node("dgx", "Tesla-V100-SXM2-16GB"), node("old", "Tesla-K80"), pod("resnet", "v100=4,k80=1"), pod("lstm", "v100=2,k80=1"))
	policy, err := admission.PolicyByName("max-min-fairness")
	if err != nil {
		panic(err)
	}
	now := 0.0
	c, err := admission.New(ctx, admission.Config{Client: cs, Policy: policy, Clock: func() float64 { return now }, StateNamespace: "gpusched"})
	if err != nil {
		panic(err)
	}
	defer c.Close()
	for round := range 3 {
		now = float64(round) * 360
		// Rounds read the informers' caches; here, where one round follows
		// another at once, wait until they hold what the API server does.
		if err := c.SyncCaches(ctx); err != nil {
			panic(err)
		}
		r, err := c.Round(ctx)
		if err != nil {
			panic(err)
		}
		for _, k := range slices.Sorted(maps.Keys(r.Admitted)) {
			fmt.Printf("round %d: %s on %s\n", r.Round, k, r.Admitted[k])
		}
	}
	// Output:
	// round 1: pod/ml/lstm on v100
	// round 1: pod/ml/resnet on k80
	// round 2: pod/ml/lstm on k80
	// round 2: pod/ml/resnet on v100
	// round 3: pod/ml/lstm on v100
	// round 3: pod/ml/resnet on k80
}
