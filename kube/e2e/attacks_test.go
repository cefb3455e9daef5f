package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/gpusched/gpusched/kube/admission"
	"github.com/gpusched/gpusched/kube/internal/kubetest"
	"github.com/gpusched/gpusched/kube/model"
	"github.com/gpusched/gpusched/kube/tenancy"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// The attack table on the real control plane: 8 V100 GPUs (two
// fake nodes of 4), the attacker's job and three victims' of 4 GPUs each,
// each in a tenant namespace of its own with pod-creation rights only,
// the admission policies of deploy/ in force, the controller in-process
// on a virtual clock (a round every 360 s of it). The honest share is 10
// of 20 rounds; each row is run honestly (the control) and attacked.

const (
	atkPool   = "e2e-attack"
	atkSystem = "e2e-attack-system"
)

var atkTenants = []string{"e2e-atk-att", "e2e-atk-v1", "e2e-atk-v2", "e2e-atk-v3", "e2e-atk-vip"}

func atkTenancy(t *testing.T) *tenancy.Tenancy {
	t.Helper()
	doc := "tenants:\n"
	for _, ns := range atkTenants {
		w := 1
		if strings.HasSuffix(ns, "vip") {
			w = 3
		}
		doc += fmt.Sprintf("- {name: %s, weight: %d, namespaces: [%s]}\n", ns, w, ns)
	}
	ten, err := tenancy.Parse([]byte(doc))
	must(t, err, "tenancy")
	return ten
}

// e2eAttack is a row: what the attacker's tenant does (its pod's
// annotations and labels, or an action of its own), under which policy.
type e2eAttack struct {
	name, policy string
	att, vic     map[string]string
	label        map[string]string
	gpus         int
	noPreemption bool
	rounds       int
	// act runs as the attacker instead of creating its pod: it returns
	// what the API server said.
	act func(ctx context.Context, tc kubernetes.Interface, ns string, attacking bool) string
	// before runs as the admin before the controller starts.
	before func(ctx context.Context, t *testing.T, cs kubernetes.Interface, state string, attacking bool)
}

type e2eResult struct {
	att    int
	vic    []int
	failed int
	note   string
}

func runE2EAttack(ctx context.Context, t *testing.T, c *kubetest.ControlPlane, tcs map[string]kubernetes.Interface, a e2eAttack, attacking bool, run int) e2eResult {
	t.Helper()
	cs := c.Client
	zero := int64(0)
	for _, ns := range atkTenants {
		_ = cs.CoreV1().Pods(ns).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: &zero}, metav1.ListOptions{})
		_ = cs.BatchV1().Jobs(ns).DeleteCollection(ctx, metav1.DeleteOptions{PropagationPolicy: ptr(metav1.DeletePropagationBackground)}, metav1.ListOptions{})
	}
	waitFor(ctx, t, "the tenants' namespaces empty", nil, func() (bool, string) {
		for _, ns := range atkTenants {
			p, err1 := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
			j, err2 := cs.BatchV1().Jobs(ns).List(ctx, metav1.ListOptions{})
			if err1 != nil || err2 != nil || len(p.Items)+len(j.Items) > 0 {
				return false, ns
			}
		}
		return true, ""
	})
	var res e2eResult
	for i, ns := range atkTenants[:4] {
		ann := map[string]string{model.AnnotationThroughput: "v100=1"}
		for k, v := range a.vic {
			ann[k] = v
		}
		g := 4
		p := gpuPod(ns, "job", g, ann)
		if i == 0 {
			if a.act != nil {
				res.note = a.act(ctx, tcs[ns], ns, attacking)
				continue
			}
			if attacking {
				for k, v := range a.att {
					ann[k] = v
				}
				p.Labels = a.label
				if a.gpus > 0 {
					p = gpuPod(ns, "job", a.gpus, ann)
					p.Labels = a.label
				}
			}
		}
		_, err := tcs[ns].CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{})
		if i == 0 && attacking && err != nil {
			res.note = "refused: " + reasonOf(err)
			continue
		}
		must(t, err, "create %s/job", ns)
	}
	state := fmt.Sprintf("state-%d", run)
	if a.before != nil {
		a.before(ctx, t, cs, state, attacking)
	}
	pol, err := admission.PolicyByName(a.policy)
	must(t, err, "policy")
	clock := 0.0
	ctl, err := admission.New(ctx, admission.Config{
		Client: cs, NodeSelector: map[string]string{admPoolLabel: atkPool}, Policy: pol, Tenancy: atkTenancy(t),
		RoundSeconds: admRound, Clock: func() float64 { return clock }, PodDeletionGrace: &zero,
		StateNamespace: atkSystem, StateName: state, NoPreemption: a.noPreemption,
	})
	must(t, err, "controller")
	defer ctl.Close()
	n := a.rounds
	if n == 0 {
		n = 20
	}
	res.vic = make([]int, 3)
	for r := range n {
		clock = float64(r) * admRound
		rr, err := syncedRound(ctx, ctl)
		if err != nil {
			res.failed++
			t.Logf("%s: round %d: %v", a.name, r, err)
			continue
		}
		for k := range rr.Admitted {
			for i, ns := range atkTenants[:4] {
				if strings.Contains(k, "/"+ns+"/") {
					if i == 0 {
						res.att++
					} else {
						res.vic[i-1]++
					}
				}
			}
		}
	}
	return res
}

func reasonOf(err error) string {
	switch {
	case apierrors.IsForbidden(err):
		return "forbidden"
	case apierrors.IsInvalid(err):
		return "invalid"
	}
	return err.Error()
}

// TestE2EAttacks plays every row of the attack table against the
// real control plane and prints the table: each attack yields the
// attacker no more than its honest share (within one round) and never
// costs a victim more than a round; the honest run is the control.
func TestE2EAttacks(t *testing.T) {
	c, bin := controlPlane(t)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	applyPolicies(ctx, t, c)
	cs := c.Client
	must(t, kubetest.EnsureNamespace(ctx, cs, atkSystem), "namespace")
	tcs := map[string]kubernetes.Interface{}
	for _, ns := range atkTenants {
		tcs[ns] = tenantNamespace(ctx, t, c, ns)
	}
	t.Cleanup(func() {
		for _, ns := range atkTenants {
			admDeletePods(cs, ns)
		}
	})
	var nodes []kubetest.GPUNode
	for i := range 2 {
		nodes = append(nodes, kubetest.GPUNode{Name: fmt.Sprintf("atk-v100-%d", i), Product: kubetest.ProductV100, GPUs: 4,
			Labels: map[string]string{admPoolLabel: atkPool}})
	}
	createNodes(ctx, t, cs, nodes)
	var huge strings.Builder
	for i := 0; huge.Len() < 4000; i++ {
		fmt.Fprintf(&huge, "t%04d=1.000000000000001,", i)
	}
	huge.WriteString("v100=1")
	rows := []e2eAttack{
		{name: "gpusched.io/weight: 1e9 under water-filling", policy: "water-filling", att: map[string]string{admission.AnnotationWeight: "1e9"}},
		{name: "a claimed rate of 1e9 steps/s under max-throughput", policy: "max-throughput", att: map[string]string{model.AnnotationThroughput: "v100=1e9"}},
		{name: "gpusched.io/steps: 1 under finish-time fairness", policy: "finish-time-fairness", att: map[string]string{admission.AnnotationSteps: "1"}},
		{name: "the queue label naming another tenant (hierarchical)", policy: "hierarchical", label: map[string]string{tenancy.LabelQueue: "e2e-atk-vip"}},
		{name: "an ungated pod carrying admitted-type (8 GPUs, no preemption, 6 rounds)", policy: "max-min-fairness", gpus: 8, noPreemption: true, rounds: 6,
			att: map[string]string{admission.AnnotationAdmittedType: "v100"}},
		{name: "simply not adding the scheduling gate, then taking it off", policy: "max-min-fairness",
			act: func(ctx context.Context, tc kubernetes.Interface, ns string, attacking bool) string {
				p, err := tc.CoreV1().Pods(ns).Create(ctx, gpuPod(ns, "job", 4, map[string]string{model.AnnotationThroughput: "v100=1"}), metav1.CreateOptions{})
				if err != nil || !attacking {
					return fmt.Sprint(err)
				}
				note := fmt.Sprintf("created gated: %v", gated(p.Spec.SchedulingGates))
				p.Spec.SchedulingGates = nil
				_, err = tc.CoreV1().Pods(ns).Update(ctx, p, metav1.UpdateOptions{})
				return note + "; gate off: " + reasonOf(err)
			}},
		{name: "a forged gpusched.io/gpus on its pod", policy: "max-min-fairness",
			act: func(ctx context.Context, tc kubernetes.Interface, ns string, attacking bool) string {
				p, err := tc.CoreV1().Pods(ns).Create(ctx, gpuPod(ns, "job", 4, map[string]string{model.AnnotationThroughput: "v100=1"}), metav1.CreateOptions{})
				if err != nil || !attacking {
					return fmt.Sprint(err)
				}
				p.Annotations[model.AnnotationGPUs] = "0,1,2,3"
				_, err = tc.CoreV1().Pods(ns).Update(ctx, p, metav1.UpdateOptions{})
				return "update: " + reasonOf(err)
			}},
		{name: "300 suspended, gated Jobs with 4 KB throughput annotations (hierarchical)", policy: "hierarchical",
			act: func(ctx context.Context, tc kubernetes.Interface, ns string, attacking bool) string {
				rates := "v100=1"
				if attacking {
					rates = huge.String()
				}
				for i := range 300 {
					if _, err := tc.BatchV1().Jobs(ns).Create(ctx, gpuJob(ns, fmt.Sprintf("j%03d", i), map[string]string{model.AnnotationThroughput: rates}), metav1.CreateOptions{}); err != nil {
						return err.Error()
					}
				}
				return "300 Jobs created (suspended and gated by the policy)"
			}},
		{name: "a tenant writing the state ConfigMap; a hostile state", policy: "max-min-fairness",
			act: func(ctx context.Context, tc kubernetes.Interface, ns string, attacking bool) string {
				_, err := tc.CoreV1().Pods(ns).Create(ctx, gpuPod(ns, "job", 4, map[string]string{model.AnnotationThroughput: "v100=1"}), metav1.CreateOptions{})
				if err != nil || !attacking {
					return fmt.Sprint(err)
				}
				_, err = tc.CoreV1().ConfigMaps(atkSystem).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "state-x"}}, metav1.CreateOptions{})
				return "tenant's write: " + reasonOf(err)
			},
			before: func(ctx context.Context, t *testing.T, cs kubernetes.Interface, state string, attacking bool) {
				if !attacking {
					return
				}
				_, err := cs.CoreV1().ConfigMaps(atkSystem).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: state},
					Data: map[string]string{"scheduler.json": `{"version":1,"next_id":-5,"jobs":[{"key":"x","id":1,"spec":{"gpus":1e9}}]}`,
						"head.json": `{"version":2,"gen":1,"chunks":64,"bytes":58982400,"sha256":""}`}}, metav1.CreateOptions{})
				must(t, err, "hostile state")
			}},
	}
	table := []string{"| attack | attacker rounds | victims' rounds | honest share | what the API server or controller said |", "| --- | --- | --- | --- | --- |"}
	for k, a := range rows {
		honest := runE2EAttack(ctx, t, c, tcs, a, false, 2*k)
		got := runE2EAttack(ctx, t, c, tcs, a, true, 2*k+1)
		table = append(table, fmt.Sprintf("| %s | %d | %v | %d (victims %v) | %s |", a.name, got.att, got.vic, honest.att, honest.vic, got.note))
		if got.failed+honest.failed > 0 {
			t.Errorf("%s: %d and %d rounds failed", a.name, honest.failed, got.failed)
		}
		if got.att > honest.att+1 {
			t.Errorf("%s: the attacker got %d rounds, its honest share is %d", a.name, got.att, honest.att)
		}
		for i := range got.vic {
			if got.vic[i] < honest.vic[i]-1 {
				t.Errorf("%s: victim %d got %d rounds, %d in the honest run", a.name, i+1, got.vic[i], honest.vic[i])
			}
		}
	}
	// The hostile state gave a Warning event and a clean start.
	if _, warned := findEvent(ctx, t, cs, atkSystem, func(e *corev1.Event) bool {
		return e.Reason == admission.ReasonBadState && e.Type == corev1.EventTypeWarning
	}); !warned {
		t.Errorf("no %s event for the hostile state", admission.ReasonBadState)
	}
	table = append(table, forgedDevicesRow(ctx, t, c, bin), measuredServiceRow(ctx, t, c, bin))
	t.Logf("attack table (20 rounds on 8 GPUs; honest share 10 rounds each):\n%s", strings.Join(table, "\n"))
}

// forgedDevicesRow: a tenant's bound pod rewrites its gpus annotation to
// name a victim's GPUs, in a namespace where no admission policy stops it,
// and the scheduler restarts. The restarted plugin books the victim on its
// GPUs and the forger as a stand-in (Warning event), so a third pod does
// not get GPUs in use: before, the ledger showed the forger's GPUs free.
func forgedDevicesRow(ctx context.Context, t *testing.T, c *kubetest.ControlPlane, bin string) string {
	t.Helper()
	cs := c.Client
	const ns = "e2e-forge"
	must(t, kubetest.EnsureNamespace(ctx, cs, ns), "namespace")
	t.Cleanup(func() { admDeletePods(cs, ns) })
	sel := map[string]string{"gpusched.io/e2e": "forge"}
	createNodes(ctx, t, cs, []kubetest.GPUNode{{Name: "forge-0", Product: kubetest.ProductA100, GPUs: 8, Links: `{"interconnect":"nvswitch"}`, Labels: sel}})
	dir := testDir(t)
	cfg := schedulerConfig(t, c, nil)
	sched := startScheduler(t, dir, "gpusched-forge", bin, cfg)
	mk := func(name string) *corev1.Pod {
		p := gpuPodSpec(ns, name, 4, "", nil, nil)
		p.Spec.NodeSelector = sel
		return p
	}
	for _, n := range []string{"victim", "forger"} {
		_, err := cs.CoreV1().Pods(ns).Create(ctx, mk(n), metav1.CreateOptions{})
		must(t, err, "create %s", n)
	}
	var victim string
	waitFor(ctx, t, "victim and forger bound", sched, func() (bool, string) {
		for _, n := range []string{"victim", "forger"} {
			p, err := cs.CoreV1().Pods(ns).Get(ctx, n, metav1.GetOptions{})
			if err != nil || p.Spec.NodeName == "" || p.Annotations[model.AnnotationGPUsMAC] == "" {
				return false, n + " not bound"
			}
			if n == "victim" {
				victim = p.Annotations[model.AnnotationGPUs]
			}
		}
		return true, ""
	})
	p, err := cs.CoreV1().Pods(ns).Get(ctx, "forger", metav1.GetOptions{})
	must(t, err, "get forger")
	p.Annotations[model.AnnotationGPUs] = victim
	_, err = cs.CoreV1().Pods(ns).Update(ctx, p, metav1.UpdateOptions{})
	must(t, err, "forge")
	sched.Stop(10 * time.Second)
	sched = startScheduler(t, dir, "gpusched-forge-restarted", bin, cfg)
	_, err = cs.CoreV1().Pods(ns).Create(ctx, mk("third"), metav1.CreateOptions{})
	must(t, err, "create third")
	waitFor(ctx, t, "the third pod refused for want of GPUs, the forger reported", sched, func() (bool, string) {
		evs, err := cs.EventsV1().Events(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		refused, reported := false, false
		for _, e := range evs.Items {
			refused = refused || e.Regarding.Name == "third" && e.Reason == "FailedScheduling"
			reported = reported || e.Regarding.Name == "forger" && e.Reason == "InvalidGPUAnnotation"
		}
		return refused && reported, fmt.Sprintf("refused %v, reported %v", refused, reported)
	})
	third, err := cs.CoreV1().Pods(ns).Get(ctx, "third", metav1.GetOptions{})
	must(t, err, "get third")
	sched.Stop(10 * time.Second) // the next row runs a scheduler of the same name
	if third.Spec.NodeName != "" {
		t.Errorf("a third pod of 4 GPUs was bound on a node whose 8 GPUs are in use (after the forger's edit and a restart)")
	}
	return fmt.Sprintf("| a bound pod's forged gpusched.io/gpus (a victim's GPUs), scheduler restarted | the forger keeps 4 GPUs (a stand-in, Warning event) | the victim keeps its GPUs %s | - | a third 4-GPU pod on the full node: bound %v |", victim, third.Spec.NodeName != "")
}

// measuredServiceRow: under 2D-LAS, a job that has run (4 GPUs for a few
// seconds, past the first queue's 1 GPU-second) is created again claiming
// no attained service and no remaining time, just before a victim that
// has had none; the node frees: the plugin's own measure puts the victim
// first, honest run and attack alike (before, the claim put the attacker
// first).
func measuredServiceRow(ctx context.Context, t *testing.T, c *kubetest.ControlPlane, bin string) string {
	t.Helper()
	cs := c.Client
	const ns = "e2e-las"
	must(t, kubetest.EnsureNamespace(ctx, cs, ns), "namespace")
	t.Cleanup(func() { admDeletePods(cs, ns) })
	sel := map[string]string{"gpusched.io/e2e": "las"}
	createNodes(ctx, t, cs, []kubetest.GPUNode{{Name: "las-0", Product: kubetest.ProductA100, GPUs: 4, Links: `{"interconnect":"nvswitch"}`, Labels: sel}})
	cfg := schedulerConfig(t, c, map[string]any{"order": "las", "lasThresholds": []float64{1}})
	cfg["podInitialBackoffSeconds"] = 1
	cfg["podMaxBackoffSeconds"] = 1
	sched := startScheduler(t, testDir(t), "gpusched-las", bin, cfg)
	zero := int64(0)
	pods := cs.CoreV1().Pods(ns)
	mk := func(name string, claim bool) *corev1.Pod {
		p := gpuPodSpec(ns, name, 4, "", nil, nil)
		p.Spec.NodeSelector = sel
		if claim {
			p.Annotations["gpusched.io/attained-gpu-seconds"] = "0"
			p.Annotations["gpusched.io/remaining-seconds"] = "0"
		}
		return p
	}
	isBound := func(name string) bool {
		p, err := pods.Get(ctx, name, metav1.GetOptions{})
		return err == nil && p.Spec.NodeName != ""
	}
	first := map[bool]string{}
	for _, attack := range []bool{false, true} {
		att := fmt.Sprintf("att-%v", attack)
		_, err := pods.Create(ctx, mk(att, false), metav1.CreateOptions{})
		must(t, err, "create")
		waitFor(ctx, t, "the attacker's first run", sched, func() (bool, string) { return isBound(att), "" })
		time.Sleep(1500 * time.Millisecond) // 4 GPUs x 1.5 s: past the first queue
		must(t, pods.Delete(ctx, att, metav1.DeleteOptions{GracePeriodSeconds: &zero}), "delete")
		waitFor(ctx, t, "the attacker's pod gone", sched, func() (bool, string) {
			_, err := pods.Get(ctx, att, metav1.GetOptions{})
			return apierrors.IsNotFound(err), ""
		})
		_, err = pods.Create(ctx, mk("blocker", false), metav1.CreateOptions{})
		must(t, err, "blocker")
		waitFor(ctx, t, "blocker bound", sched, func() (bool, string) { return isBound("blocker"), "" })
		victim := fmt.Sprintf("victim-%v", attack)
		_, err = pods.Create(ctx, mk(att, attack), metav1.CreateOptions{})
		must(t, err, "create again")
		time.Sleep(50 * time.Millisecond) // the attacker first in time
		_, err = pods.Create(ctx, mk(victim, false), metav1.CreateOptions{})
		must(t, err, "victim")
		time.Sleep(2500 * time.Millisecond) // both tried, past their backoff
		must(t, pods.Delete(ctx, "blocker", metav1.DeleteOptions{GracePeriodSeconds: &zero}), "delete blocker")
		waitFor(ctx, t, "one of them bound", sched, func() (bool, string) { return isBound(att) || isBound(victim), "" })
		first[attack] = "victim"
		if isBound(att) {
			first[attack] = "attacker"
		}
		for _, n := range []string{att, victim} {
			_ = pods.Delete(ctx, n, metav1.DeleteOptions{GracePeriodSeconds: &zero})
		}
	}
	if first[true] != first[false] || first[true] == "attacker" {
		t.Errorf("under 2D-LAS the attacker's claims changed who runs first: honest %s, attacked %s", first[false], first[true])
	}
	return fmt.Sprintf("| claimed attained 0 / remaining 0 GPU-seconds (2D-LAS) | bound first: %v | %s first | honest run: %s first | the plugin measured the attacker's 6 GPU-seconds |",
		first[true] == "attacker", first[true], first[false])
}
