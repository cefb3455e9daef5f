package admission

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gpusched/gpusched/kube/model"
	"github.com/gpusched/gpusched/kube/tenancy"
	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// playground plays the cluster (issue #40): 8 V100s in two nodes
// of 4, the controller's rounds of 360 s, and, between them, what the
// cluster's other controllers do: the job controller (a running Job gets
// its pods, a suspended one loses them) and the kube-scheduler (each
// ungated pod, oldest first, is bound to a node its affinity allows where
// its GPUs are free; a bound pod keeps its GPUs until it is deleted). It
// counts what really runs: the GPUs of the bound pods, by namespace, in
// GPU-rounds (one GPU for one round).
type playground struct {
	t   *testing.T
	ctx context.Context
	cs  *fake.Clientset
	c   *Controller
	clk *testClock
	// held is the GPU-rounds bound, by namespace; over counts the rounds
	// that bound more GPUs than the cluster has (never: the kube-scheduler
	// binds only free GPUs) and admittedOver those whose admitted
	// workloads (by res.GPUs) ask for more; idle the GPU-rounds bound to
	// nothing.
	held               map[string]int
	over, admittedOver int
	idle               int
	rounds             int
	// tenant, if not nil, is what the tenants do in round r, once the
	// round's admissions run (the job controller has created their pods);
	// sweep runs the controller's Sweep right after (as Run does every
	// second).
	tenant func(r int)
	sweep  bool
	seq    int // objects p.create stamped
}

// stamp is a creation time in the round under way: its start (on the
// controller's clock, after every object the test made before) plus
// offset seconds (less than a round).
func (p *playground) stamp(offset int) metav1.Time {
	return metav1.NewTime(time.Unix(1_000_000+int64(p.clk.t)+int64(offset), 0))
}

const playgroundGPUs = 8

// newPlayground starts a controller under the policy and tenancy (a
// document; "" is attackTenancy) on the cluster and the objects.
func newPlayground(t *testing.T, policy, ten string, mod func(*Config), objs ...runtime.Object) *playground {
	t.Helper()
	if ten == "" {
		ten = attackTenancy
	}
	tn, err := tenancy.Parse([]byte(ten))
	require.NoError(t, err)
	objs = append(objs, gpuNode("n1", "Tesla-V100-SXM2-16GB", 4), gpuNode("n2", "Tesla-V100-SXM2-16GB", 4))
	p := &playground{t: t, ctx: context.Background(), cs: fake.NewClientset(objs...), clk: &testClock{}, held: map[string]int{}}
	// The API server stamps a pod's creation (the kube-scheduler's queue
	// takes the pods that waited longest first): the pods the controller
	// and the job controller create are stamped with the round's time (in
	// the order of their names within a round, whatever the order of the
	// controller's concurrent writes), after the objects the test created
	// before; p.create stamps the tenants' in the order they come.
	p.cs.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if pod, ok := a.(k8stesting.CreateAction).GetObject().(*corev1.Pod); ok && pod.CreationTimestamp.IsZero() {
			pod.CreationTimestamp = p.stamp(0)
		}
		return false, nil, nil
	})
	zero := int64(0)
	p.c = newController(t, p.cs, p.clk, func(cfg *Config) {
		cfg.Policy, cfg.Tenancy, cfg.PodDeletionGrace = mustPolicy(t, policy), tn, &zero
		if mod != nil {
			mod(cfg)
		}
	})
	return p
}

// round runs the controller's round r (at r x 360 s), then the job
// controller and the kube-scheduler, and counts the GPUs bound.
func (p *playground) round(r int) *RoundResult {
	p.t.Helper()
	p.clk.t = float64(r) * 360
	res, err := syncRound(p.ctx, p.c)
	require.NoError(p.t, err, "round %d", r)
	p.jobController()
	if p.tenant != nil {
		p.tenant(r)
		if p.sweep {
			require.NoError(p.t, p.c.SyncCaches(p.ctx))
			require.NoError(p.t, p.c.Sweep(p.ctx))
		}
		p.jobController()
	}
	p.bind()
	p.count(res)
	return res
}

// run runs rounds 0 to n-1, calling before(r) (if not nil) before each.
func (p *playground) run(n int, before func(r int)) {
	p.t.Helper()
	for r := range n {
		if before != nil {
			before(r)
		}
		p.round(r)
	}
}

func (p *playground) pods() []*corev1.Pod {
	p.t.Helper()
	l, err := p.cs.CoreV1().Pods("").List(p.ctx, metav1.ListOptions{})
	require.NoError(p.t, err)
	out := make([]*corev1.Pod, len(l.Items))
	for i := range l.Items {
		out[i] = &l.Items[i]
	}
	slices.SortFunc(out, func(a, b *corev1.Pod) int {
		return cmp.Or(a.CreationTimestamp.Compare(b.CreationTimestamp.Time), cmp.Compare(a.Namespace+"/"+a.Name, b.Namespace+"/"+b.Name))
	})
	return out
}

// jobController plays the job controller: a Job's pods are the live
// pods that name it as their controller and match its selector (one that
// names it and does not match is released: its owner reference goes); a
// running Job gets min(parallelism, completions) of them from its
// template, its newest beyond that are deleted, a suspended one's are all
// deleted, and a finished Job's are left alone.
func (p *playground) jobController() {
	p.t.Helper()
	jobs, err := p.cs.BatchV1().Jobs("").List(p.ctx, metav1.ListOptions{})
	require.NoError(p.t, err)
	owned := map[string][]*corev1.Pod{}
	for _, pod := range p.pods() {
		if o := controllerOf(pod); o != nil && o.Kind == "Job" && pod.DeletionTimestamp == nil && !terminal(pod) {
			owned[string(o.UID)] = append(owned[string(o.UID)], pod)
		}
	}
	for i := range jobs.Items {
		j := &jobs.Items[i]
		if jobFinished(j) {
			continue
		}
		sel, err := metav1.LabelSelectorAsSelector(j.Spec.Selector)
		require.NoError(p.t, err)
		var active []*corev1.Pod
		for _, pod := range owned[string(j.UID)] {
			if sel.Matches(labels.Set(pod.Labels)) {
				active = append(active, pod)
				continue
			}
			pod.OwnerReferences = nil
			_, err := p.cs.CoreV1().Pods(pod.Namespace).Update(p.ctx, pod, metav1.UpdateOptions{})
			require.NoError(p.t, err)
		}
		want := 0
		if !suspended(j) {
			want = int(*j.Spec.Parallelism)
			if j.Spec.Completions != nil {
				want = min(want, int(*j.Spec.Completions))
			}
		}
		for n := len(active); n < want; n++ {
			p.createJobPod(j)
		}
		for _, pod := range active[min(want, len(active)):] {
			require.NoError(p.t, p.cs.CoreV1().Pods(pod.Namespace).Delete(p.ctx, pod.Name, metav1.DeleteOptions{}))
		}
	}
}

var jobPodSeq int

func (p *playground) createJobPod(j *batchv1.Job) {
	p.t.Helper()
	jobPodSeq++
	pod := gatedPod(j.Namespace, fmt.Sprintf("%s-%d", j.Name, jobPodSeq), 0, nil)
	pod.CreationTimestamp = metav1.Time{} // the reactor stamps it
	pod.Spec = *j.Spec.Template.Spec.DeepCopy()
	pod.Labels = map[string]string{}
	for k, v := range j.Spec.Template.Labels {
		pod.Labels[k] = v
	}
	pod.Annotations = j.Spec.Template.Annotations
	pod.OwnerReferences = []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: j.Name, UID: j.UID, Controller: ptrTo(true)}}
	_, err := p.cs.CoreV1().Pods(j.Namespace).Create(p.ctx, pod, metav1.CreateOptions{})
	require.NoError(p.t, err)
}

// bind binds each ungated, unbound pod, oldest first, to the first node
// its affinity allows (the nodes the controller pinned it to, if any)
// with its GPUs free.
func (p *playground) bind() {
	p.t.Helper()
	free := map[string]int{"n1": 4, "n2": 4}
	pods := p.pods()
	for _, pod := range pods {
		if pod.Spec.NodeName != "" && !terminal(pod) {
			g, err := model.PodGPUs(pod, "")
			require.NoError(p.t, err)
			free[pod.Spec.NodeName] -= g
		}
	}
	for _, pod := range pods {
		if pod.Spec.NodeName != "" || terminal(pod) || pod.DeletionTimestamp != nil || hasGate(pod.Spec.SchedulingGates) {
			continue
		}
		g, err := model.PodGPUs(pod, "")
		require.NoError(p.t, err)
		for _, n := range allowedNodes(&pod.Spec) {
			if free[n] >= g {
				free[n] -= g
				pod.Spec.NodeName = n
				_, err := p.cs.CoreV1().Pods(pod.Namespace).Update(p.ctx, pod, metav1.UpdateOptions{})
				require.NoError(p.t, err)
				break
			}
		}
	}
}

// allowedNodes are the nodes a pod's required affinity pins it to
// (metadata.name), else both.
func allowedNodes(ps *corev1.PodSpec) []string {
	if a := ps.Affinity; a != nil && a.NodeAffinity != nil && a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution != nil {
		for _, term := range a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
			for _, f := range term.MatchFields {
				if f.Key == "metadata.name" {
					return f.Values
				}
			}
		}
	}
	return []string{"n1", "n2"}
}

// count adds the round's bound GPUs, by namespace.
func (p *playground) count(res *RoundResult) {
	p.t.Helper()
	total := 0
	for _, pod := range p.pods() {
		if pod.Spec.NodeName == "" || terminal(pod) {
			continue
		}
		g, err := model.PodGPUs(pod, "")
		require.NoError(p.t, err)
		p.held[pod.Namespace] += g
		total += g
	}
	if total > playgroundGPUs {
		p.over++
	}
	p.idle += max(playgroundGPUs-total, 0)
	admitted := 0
	for k := range res.Admitted {
		admitted += res.GPUs[k]
	}
	if admitted > playgroundGPUs {
		p.admittedOver++
	}
	p.rounds++
}

// victims are the victims' GPU-rounds, in the order v1, v2, v3.
func (p *playground) victims() []int {
	return []int{p.held["v1"], p.held["v2"], p.held["v3"]}
}

func (p *playground) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "attacker %d, victims %v, idle %d of %d GPU-rounds", p.held["att"], p.victims(), p.idle, p.rounds*playgroundGPUs)
	if p.over+p.admittedOver > 0 {
		fmt.Fprintf(&b, ", %d rounds over capacity (%d by the admitted GPUs)", p.over, p.admittedOver)
	}
	return b.String()
}

// create creates objects in the playground's cluster, stamped in the
// round under way in the order they come.
func (p *playground) create(objs ...runtime.Object) {
	p.t.Helper()
	for _, o := range objs {
		var err error
		p.seq++
		switch v := o.(type) {
		case *corev1.Pod:
			v.CreationTimestamp = p.stamp(p.seq)
			_, err = p.cs.CoreV1().Pods(v.Namespace).Create(p.ctx, v, metav1.CreateOptions{})
		case *batchv1.Job:
			v.CreationTimestamp = p.stamp(p.seq)
			_, err = p.cs.BatchV1().Jobs(v.Namespace).Create(p.ctx, v, metav1.CreateOptions{})
		default:
			p.t.Fatalf("create: %T", o)
		}
		require.NoError(p.t, err)
	}
}

// victimPods are the three victims' jobs: a pod of 4 GPUs each.
func victimPods() []runtime.Object {
	var out []runtime.Object
	for _, ns := range []string{"v1", "v2", "v3"} {
		out = append(out, gatedPod(ns, "job", 4, rates("v100=1")))
	}
	return out
}

// apiJob is a suspended, gated Job as the API server stores it (its
// selector and its template's labels defaulted to its controller UID, as
// gatedJob makes them), with the V100 rate of the cluster.
func apiJob(ns, name string, parallelism int32, gpus int) *batchv1.Job {
	return gatedJob(ns, name, parallelism, gpus, rates("v100=1"))
}

func (p *playground) job(ns, name string) *batchv1.Job {
	p.t.Helper()
	j, err := p.cs.BatchV1().Jobs(ns).Get(p.ctx, name, metav1.GetOptions{})
	require.NoError(p.t, err)
	return j
}

func (p *playground) updateJob(j *batchv1.Job) {
	p.t.Helper()
	_, err := p.cs.BatchV1().Jobs(j.Namespace).Update(p.ctx, j, metav1.UpdateOptions{})
	require.NoError(p.t, err)
}

// groupMember is a gated member of a pod group of two.
func groupMember(ns, group, name string, gpus int) *corev1.Pod {
	m := gatedPod(ns, name, gpus, map[string]string{model.AnnotationMinMember: "2", model.AnnotationThroughput: "v100=1"})
	m.Labels = map[string]string{model.LabelPodGroup: group}
	return m
}
