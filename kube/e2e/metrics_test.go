package e2e

import (
	"context"
	"fmt"
	"maps"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gpusched/gpusched/kube/admission"
	"github.com/gpusched/gpusched/kube/deploy"
	"github.com/gpusched/gpusched/kube/internal/kubetest"
	"github.com/gpusched/gpusched/kube/internal/metricstest"
	"github.com/gpusched/gpusched/kube/model"
	"github.com/gpusched/gpusched/kube/tenancy"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// TestE2EMetrics runs both binaries on kwok's nodes (two 8-GPU V100
// nodes, two 4-GPU K80 nodes) and scrapes their /metrics while they work:
// gpusched-admission (3-second rounds, hierarchical water filling, two
// tenants of weights 1 and 3, more demand than GPUs, so that leases end
// and workloads are preempted) and gpusched-scheduler (which binds what
// is admitted; its /metrics served as in a cluster, the caller
// authenticated and authorized through the API server). The values are
// checked against what happened, read from the API in a window in which
// no round ran and nothing was bound: the GPUs of each type, each
// tenant's fair share (worked by hand), its share against the GPUs
// admitted, the workloads per tenant and why the unrunnable one waits,
// admissions against preemptions and the workloads that hold GPUs,
// preemptions against the count each workload carries, the plugin's
// binds against kube-scheduler's own count of scheduled pods, the GPUs
// its ledger holds against the bound pods, no ledger conflict, a pod
// group's permits. Every metric the Grafana dashboard queries is in the
// scrapes.
func TestE2EMetrics(t *testing.T) {
	c, schedBin := controlPlane(t)
	startKwok(t, c)
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	cs := c.Client
	dir := testDir(t)
	const sysNS, nsA, nsB, pool = "metrics-sys", "metrics-a", "metrics-b", "metrics"
	for _, ns := range []string{sysNS, nsA, nsB} {
		must(t, kubetest.EnsureNamespace(ctx, cs, ns), "namespace %s", ns)
	}
	t.Cleanup(func() { admDeletePods(cs, nsA); admDeletePods(cs, nsB) })
	var nodes []kubetest.GPUNode
	var names []string
	for i := range 2 {
		nodes = append(nodes,
			kubetest.GPUNode{Name: fmt.Sprintf("metrics-v100-%d", i), Product: kubetest.ProductV100, GPUs: 8, Links: `{"interconnect":"hybrid-cube-mesh"}`,
				Labels: map[string]string{admPoolLabel: pool}},
			kubetest.GPUNode{Name: fmt.Sprintf("metrics-k80-%d", i), Product: productK80, GPUs: 4, Labels: map[string]string{admPoolLabel: pool}})
	}
	for _, n := range nodes {
		names = append(names, n.Name)
	}
	deleteNodesAtEnd(t, cs, names)
	must(t, kubetest.CreateKwokNodes(ctx, cs, nodes, 4), "nodes")

	_, err := cs.CoreV1().ConfigMaps(sysNS).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: sysNS, Name: tenancy.DefaultConfigMap},
		Data: map[string]string{tenancy.ConfigKey: "tenants:\n- {name: a, namespaces: [" + nsA + "]}\n- {name: b, weight: 3, namespaces: [" + nsB + "]}\n"}},
		metav1.CreateOptions{})
	must(t, err, "tenancy")

	// The workloads: tenant a four 4-GPU pods; tenant b three 4-GPU pods,
	// a pod group of two 2-GPU members and a 16-GPU pod no node can hold.
	pod := func(ns, name string, gpus int, labels, ann map[string]string) *corev1.Pod {
		if ann == nil {
			ann = map[string]string{}
		}
		ann[model.AnnotationThroughput] = "v100=4,k80=1"
		p := gpuPodSpec(ns, name, gpus, "", labels, ann)
		p.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: admission.GateName}}
		return p
	}
	var pods []*corev1.Pod
	for i := range 4 {
		pods = append(pods, pod(nsA, fmt.Sprint("a", i), 4, nil, nil))
	}
	for i := range 3 {
		pods = append(pods, pod(nsB, fmt.Sprint("b", i), 4, nil, nil))
	}
	for i := range 2 {
		pods = append(pods, pod(nsB, fmt.Sprint("g", i), 2, map[string]string{model.LabelPodGroup: "g"}, map[string]string{model.AnnotationMinMember: "2"}))
	}
	pods = append(pods, pod(nsB, "huge", 16, nil, nil))
	createAll(ctx, t, cs, pods)

	sched, schedURL := servingScheduler(t, c, dir, "gpusched-metrics", schedBin, schedulerConfig(t, c, nil))
	admPorts, err := kubetest.FreePorts(1)
	must(t, err, "port")
	admURL := fmt.Sprintf("http://127.0.0.1:%d/metrics", admPorts[0])
	adm, err := kubetest.StartProcess(dir, "gpusched-admission", admissionBinary(ctx, t),
		"--kubeconfig", c.Kubeconfig, "--policy", "hierarchical", "--round", "3s", "--grace", "0s",
		"--node-selector", admPoolLabel+"="+pool, "--state-namespace", sysNS, "--leader-elect=false",
		"--metrics-bind-address", fmt.Sprintf("127.0.0.1:%d", admPorts[0]))
	must(t, err, "start gpusched-admission")
	t.Cleanup(func() {
		adm.Stop(10 * time.Second)
		if t.Failed() {
			t.Logf("gpusched-admission log tail:\n%s", adm.LogTail(4000))
		}
	})

	// Wait until the rounds have rotated the workloads.
	var am metricstest.Families
	waitFor(ctx, t, "four rounds, a preemption and bound pods", adm, func() (bool, string) {
		if done, err := sched.Exited(); done {
			t.Fatalf("the scheduler exited (%v):\n%s", err, sched.LogTail(4000))
		}
		var err error
		if am, err = scrape(ctx, admURL, ""); err != nil {
			return false, err.Error()
		}
		rounds, _ := am.Value("gpusched_admission_rounds_total", map[string]string{"result": "ok"})
		pre, _ := am.Value("gpusched_admission_preemptions_total", map[string]string{"reason": admission.PreemptLeaseEnded})
		running := am.Sum("gpusched_admission_workloads", map[string]string{"state": admission.StateRunning})
		return rounds >= 4 && pre >= 1 && running >= 1, fmt.Sprintf("%v rounds, %v preemptions, %v running", rounds, pre, running)
	})

	// A quiet window: the same round count and bind count before and
	// after reading the API, no pod leaving, every workload's pods there.
	type window struct {
		adm, sched metricstest.Families
		pods       []corev1.Pod
		nodes      []corev1.Node
	}
	var w window
	waitFor(ctx, t, "a window with no round and no binding", adm, func() (bool, string) {
		a1, err := scrape(ctx, admURL, "")
		if err != nil {
			return false, err.Error()
		}
		s1, err := scrape(ctx, schedURL, c.Config.BearerToken)
		if err != nil {
			return false, err.Error()
		}
		pods := listPods(ctx, t, cs, nsA, nsB)
		all, err := cs.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
		must(t, err, "pods")
		nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		must(t, err, "nodes")
		a2, err := scrape(ctx, admURL, "")
		if err != nil {
			return false, err.Error()
		}
		s2, err := scrape(ctx, schedURL, c.Config.BearerToken)
		if err != nil {
			return false, err.Error()
		}
		r1, _ := a1.Value("gpusched_admission_rounds_total", map[string]string{"result": "ok"})
		r2, _ := a2.Value("gpusched_admission_rounds_total", map[string]string{"result": "ok"})
		b1, _ := s1.Value("gpusched_plugin_extension_point_duration_seconds", map[string]string{"extension_point": "Bind"})
		b2, _ := s2.Value("gpusched_plugin_extension_point_duration_seconds", map[string]string{"extension_point": "Bind"})
		if r1 != r2 || b1 != b2 {
			return false, "a round or a binding in the window"
		}
		if len(pods) != len(pods0(pods)) || len(pods) != 10 {
			return false, fmt.Sprintf("%d pods, some leaving", len(pods))
		}
		w = window{adm: a2, sched: s2, pods: all.Items, nodes: nodes.Items}
		return true, ""
	})

	// The admission controller's metrics.
	val := func(f metricstest.Families, name string, labels map[string]string) float64 {
		v, ok := f.Value(name, labels)
		if !ok {
			t.Errorf("no sample %s%v", name, labels)
		}
		return v
	}
	rounds := val(w.adm, "gpusched_admission_rounds_total", map[string]string{"result": "ok"})
	if got := val(w.adm, "gpusched_admission_round_duration_seconds", nil); got != rounds {
		t.Errorf("round durations observed %v, rounds %v", got, rounds)
	}
	for typ, want := range map[string]float64{"v100": 16, "k80": 8} {
		if got := val(w.adm, "gpusched_admission_gpus", map[string]string{"gpu_type": typ, "state": "capacity"}); got != want {
			t.Errorf("%s capacity %v, want %v", typ, got, want)
		}
	}
	// Fair shares of the 24 GPUs for demands a 16, b 16 (12 + 4: the
	// 16-GPU pod, larger than any node, is no demand) at weights 1 and 3:
	// b's demand per weight is the smaller (16/3 < 16), its 3/4 of 24 = 18
	// cover its 16; a gets the 8 left (below its 16).
	for tenant, want := range map[string]float64{"a": 8.0 / 24, "b": 16.0 / 24} {
		if got := val(w.adm, "gpusched_admission_tenant_fair_share_ratio", map[string]string{"tenant": tenant}); math.Abs(got-want) > 1e-9 {
			t.Errorf("tenant %s fair share %v, want %v", tenant, got, want)
		}
		share := val(w.adm, "gpusched_admission_tenant_share_ratio", map[string]string{"tenant": tenant})
		if gap := val(w.adm, "gpusched_admission_fairness_gap_ratio", map[string]string{"tenant": tenant}); math.Abs(gap-(share-want)) > 1e-9 {
			t.Errorf("tenant %s gap %v, share %v, fair share %v", tenant, gap, share, want)
		}
	}
	shares := w.adm.Sum("gpusched_admission_tenant_share_ratio", nil)
	if held := w.adm.Sum("gpusched_admission_gpus", map[string]string{"state": "admitted"}); math.Abs(shares-held/24) > 1e-9 {
		t.Errorf("shares sum to %v, the admitted GPUs are %v of 24", shares, held)
	}
	for tenant, want := range map[string]float64{"a": 4, "b": 5} {
		if got := w.adm.Sum("gpusched_admission_workloads", map[string]string{"tenant": tenant}); got != want {
			t.Errorf("tenant %s: %v workloads, want %v", tenant, got, want)
		}
	}
	if got := val(w.adm, "gpusched_admission_waiting_workloads", map[string]string{"tenant": "b", "reason": admission.ReasonUnrunnable}); got != 1 {
		t.Errorf("%v unrunnable workloads of b, want 1 (the 16-GPU pod)", got)
	}
	// Every admission either holds its GPUs still or was preempted since.
	admissions := w.adm.Sum("gpusched_admission_admissions_total", nil)
	preemptions := val(w.adm, "gpusched_admission_preemptions_total", map[string]string{"reason": admission.PreemptLeaseEnded})
	holding := w.adm.Sum("gpusched_admission_workloads", map[string]string{"state": admission.StateAdmitted}) +
		w.adm.Sum("gpusched_admission_workloads", map[string]string{"state": admission.StateRunning})
	if admissions != holding+preemptions {
		t.Errorf("%v admissions, %v workloads holding GPUs, %v preemptions", admissions, holding, preemptions)
	}
	// Each workload's pods count its preemptions (a group's members
	// each).
	counted := map[string]int{}
	for _, p := range w.pods {
		if p.Namespace != nsA && p.Namespace != nsB {
			continue
		}
		key := p.Namespace + "/" + p.Name
		if g := model.PodGroup(&p); g != "" {
			key = g
		}
		n, _ := strconv.Atoi(p.Annotations[admission.AnnotationPreemptions])
		counted[key] = max(counted[key], n)
	}
	sum := 0
	for _, n := range counted {
		sum += n
	}
	if float64(sum) != preemptions {
		t.Errorf("the workloads count %d preemptions (%v), the metric %v", sum, counted, preemptions)
	}
	if got := val(w.adm, "gpusched_admission_last_round_api_requests", nil); got < 1 || got > 100 {
		t.Errorf("the last round sent %v API requests (want 1 to 100: reads come from the caches)", got)
	}

	// The plugin's metrics, on kube-scheduler's /metrics.
	binds := val(w.sched, "gpusched_plugin_extension_point_duration_seconds", map[string]string{"extension_point": "Bind"})
	scheduled := w.sched.Sum("scheduler_schedule_attempts_total", map[string]string{"profile": "gpusched", "result": "scheduled"})
	if binds != scheduled || binds < 1 {
		t.Errorf("the plugin bound %v pods, kube-scheduler scheduled %v", binds, scheduled)
	}
	if pf := val(w.sched, "gpusched_plugin_extension_point_duration_seconds", map[string]string{"extension_point": "PreFilter"}); pf < binds {
		t.Errorf("%v PreFilter calls for %v binds", pf, binds)
	}
	gpuNodes := map[string]bool{}
	total := 0
	for _, n := range w.nodes {
		if nd, err := model.ParseNode(&n, model.NodeOptions{}); err == nil {
			gpuNodes[n.Name] = true
			total += len(nd.Server.GPUs)
		}
	}
	used := 0
	for _, p := range w.pods {
		if gpuNodes[p.Spec.NodeName] && p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
			g, _ := model.PodGPUs(&p, "")
			used += g
		}
	}
	if got := w.sched.Sum("gpusched_plugin_gpus", map[string]string{"state": "used"}); got != float64(used) {
		t.Errorf("the ledger holds %v GPUs, bound pods %d", got, used)
	}
	if got := w.sched.Sum("gpusched_plugin_gpus", nil); got != float64(total) {
		t.Errorf("the ledger has %v GPUs, the nodes %d", got, total)
	}
	if got := w.sched.Sum("gpusched_plugin_ledger_conflicts_total", nil); got != 0 {
		t.Errorf("%v ledger conflicts", got)
	}
	if got := val(w.sched, "gpusched_plugin_pod_group_permits_total", map[string]string{"result": "allow"}); got < 1 {
		t.Errorf("%v pod group admissions at Permit", got)
	}

	// The dashboard's queries name metrics the binaries serve (the Kueue
	// controller's, gpusched_kueue_*, are checked by TestE2EKueueSmoke,
	// which runs it).
	exprs, err := deploy.DashboardQueries()
	must(t, err, "dashboard")
	served := map[string]bool{}
	for _, f := range []metricstest.Families{w.adm, w.sched} {
		for n := range f {
			served[n] = true
		}
	}
	missing := map[string]bool{}
	for _, e := range exprs {
		for _, n := range regexp.MustCompile(`\b(gpusched|scheduler)_[a-z0-9_]+`).FindAllString(e, -1) {
			if strings.HasPrefix(n, "gpusched_kueue_") {
				continue
			}
			base := strings.TrimSuffix(n, "_bucket")
			if !served[base] && !served[n] {
				missing[n] = true
			}
		}
	}
	if len(missing) > 0 {
		t.Errorf("the dashboard queries metrics no binary serves: %v", slices.Sorted(maps.Keys(missing)))
	}
	t.Logf("after %v rounds: %v admissions, %v preemptions, %v binds; shares a %.2f, b %.2f",
		rounds, admissions, preemptions, binds, val(w.adm, "gpusched_admission_tenant_share_ratio", map[string]string{"tenant": "a"}),
		val(w.adm, "gpusched_admission_tenant_share_ratio", map[string]string{"tenant": "b"}))
}

// listPods lists the pods of namespaces.
func listPods(ctx context.Context, t *testing.T, cs kubernetes.Interface, nss ...string) []corev1.Pod {
	t.Helper()
	var out []corev1.Pod
	for _, ns := range nss {
		l, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		must(t, err, "pods of %s", ns)
		out = append(out, l.Items...)
	}
	return out
}

// pods0 keeps the pods not being deleted.
func pods0(pods []corev1.Pod) []corev1.Pod {
	var out []corev1.Pod
	for _, p := range pods {
		if p.DeletionTimestamp == nil {
			out = append(out, p)
		}
	}
	return out
}
