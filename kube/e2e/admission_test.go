package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gpusched/gpusched/allocation"
	"github.com/gpusched/gpusched/kube/admission"
	"github.com/gpusched/gpusched/kube/internal/kubetest"
	"github.com/gpusched/gpusched/kube/model"
	"github.com/gpusched/gpusched/perfmodel"
	"github.com/gpusched/gpusched/perfmodel/gavel"
	"github.com/gpusched/gpusched/perfmodel/learn"
	"github.com/gpusched/gpusched/sim"
	"github.com/gpusched/gpusched/topology"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
)

// The admission scenario's cluster: three GPU types on labelled fake nodes
// of 4 GPUs, 8 GPUs of each type.
const (
	admPoolLabel = "gpusched.io/pool"
	admPool      = "admission-e2e"
	admRound     = 360.0
	productK80   = "Tesla-K80"
	productP100  = "Tesla-P100-PCIE-16GB"
)

var admTypes = []struct {
	typ     topology.GPUType
	product string
}{{topology.K80, productK80}, {topology.P100, productP100}, {topology.V100, kubetest.ProductV100}}

// admNodes makes the six nodes, their names prefixed so that each test
// has its own.
func admNodes(prefix string) []kubetest.GPUNode {
	var nodes []kubetest.GPUNode
	for _, t := range admTypes {
		for i := range 2 {
			nodes = append(nodes, kubetest.GPUNode{Name: fmt.Sprintf("%s-%s-%d", prefix, t.typ, i), Product: t.product, GPUs: 4,
				Labels: map[string]string{admPoolLabel: admPool}})
		}
	}
	return nodes
}

// admJob is one job of the workload: a gated pod.
type admJob struct {
	name    string
	arrival float64
	key     perfmodel.JobKey
	steps   float64
	ann     map[string]string // extra annotations (throughput, malformed)
}

func (j *admJob) pod(ns string) *corev1.Pod {
	ann := map[string]string{admission.AnnotationSteps: strconv.FormatFloat(j.steps, 'f', -1, 64)}
	if j.key.Model != "" {
		ann[model.AnnotationJobKind] = j.key.Model
		ann[model.AnnotationBatchSize] = strconv.Itoa(j.key.BatchSize)
	}
	for k, v := range j.ann {
		ann[k] = v
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: j.name, Annotations: ann},
		Spec: corev1.PodSpec{
			SchedulingGates: []corev1.PodSchedulingGate{{Name: admission.GateName}},
			Containers: []corev1.Container{{Name: "train", Image: "registry.k8s.io/pause:3.10",
				Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{
					model.ResourceGPU: *resource.NewQuantity(int64(j.key.ScaleFactor), resource.DecimalSI)}}}},
		},
	}
}

// admWorkload draws n jobs of Gavel's table (scale factors 1, 2 and 4, 70
// / 15 / 15 %) that run 0.5 to 4 hours on V100s, arriving as a Poisson
// process of perHour jobs per hour from t = 0 (perHour 0: all at t = 0).
func admWorkload(n int, perHour float64, seed uint64) []admJob {
	tab := gavel.Simulation()
	rng := rand.New(rand.NewPCG(seed, 19))
	var keys []perfmodel.JobKey
	for _, k := range tab.Jobs() {
		if k.ScaleFactor == 1 {
			keys = append(keys, k)
		}
	}
	var jobs []admJob
	t := 0.0
	for i := range n {
		k := keys[rng.IntN(len(keys))]
		switch r := rng.Float64(); {
		case r < 0.15:
			k.ScaleFactor = 4
		case r < 0.3:
			k.ScaleFactor = 2
		}
		v, err := tab.Throughput(k, topology.V100)
		if err != nil || v <= 0 {
			k.ScaleFactor = 1
			v, _ = tab.Throughput(k, topology.V100)
		}
		hours := 0.5 + 3.5*rng.Float64()
		jobs = append(jobs, admJob{name: fmt.Sprintf("job-%02d", i), arrival: t, key: k, steps: math.Round(hours * 3600 * v)})
		if perHour > 0 {
			t += rng.ExpFloat64() * 3600 / perHour
		}
	}
	return jobs
}

// admRecorder wraps a policy and keeps its last allocation, so that the
// test compares what ran with the X the controller's core used.
type admRecorder struct {
	inner allocation.Policy
	mu    sync.Mutex
	last  *allocation.Allocation
	calls int
}

func (r *admRecorder) Allocate(ctx context.Context, p *allocation.Problem) (*allocation.Allocation, error) {
	a, err := r.inner.Allocate(ctx, p)
	r.mu.Lock()
	defer r.mu.Unlock()
	if err == nil {
		r.last, r.calls = a, r.calls+1
	}
	return a, err
}

// admRun is what one run through the control plane did.
type admRun struct {
	assigned []map[string]topology.GPUType // per round, by pod name
	finish   map[string]float64
	ran      map[string]map[topology.GPUType]int // rounds run per type, by pod name
	rounds   int
	wall     time.Duration
	ctl      *admission.Controller
}

type admOptions struct {
	ns        string
	nodes     string // the nodes' prefix
	policy    allocation.Policy
	restartAt int // round at which a new controller takes over from the state ConfigMap; -1 never
	maxRounds int
	// rates gives the completer a job's rates when they are not the
	// table's (throughput annotation, or the default of 1 step/s).
	rates map[string]map[topology.GPUType]float64
	// hideKinds creates the pods without their job kind (the controller
	// knows nothing of their rates; the completer runs them at the
	// table's), their program named only in their containers' arguments; learn gives the controller an estimator and serves the
	// progress channel, through which the completer reports each running
	// job's steps every 60 s of the round, as the job would (learn_test.go).
	hideKinds, learn bool
}

// runAdmission drives the controller round by round on a virtual clock
// (a round every 360 s of it): before each round the jobs that arrived
// are created, gated; after it the test checks that the gates are off
// exactly for the admitted jobs, that no type's capacity is exceeded by
// admitted jobs nor any node's by bound pods, and waits until the stock
// kube-scheduler has bound every admitted pod (on a node of its type);
// then the completer runs each admitted job for the round at its rate
// and marks a pod Succeeded when its work is done (at the time it
// finished), as a kubelet would report it.
func runAdmission(ctx context.Context, t *testing.T, cs kubernetes.Interface, jobs []admJob, bad []string, o admOptions) *admRun {
	t.Helper()
	tab := gavel.Simulation()
	clock := 0.0
	var clockBits atomic.Uint64 // clock, for the progress channel's goroutines
	zero := int64(0)
	cfg := admission.Config{
		Client: cs, Namespace: o.ns, NodeSelector: map[string]string{admPoolLabel: admPool}, Policy: o.policy,
		RoundSeconds: admRound, Clock: func() float64 { return math.Float64frombits(clockBits.Load()) }, PodDeletionGrace: &zero, StateNamespace: o.ns,
	}
	if o.learn {
		est, err := learn.New(learn.Config{})
		must(t, err, "estimator")
		cfg.Estimator = est
	}
	ctl, err := admission.New(ctx, cfg)
	must(t, err, "controller")
	var ch *progressChannel
	if o.learn {
		ch = startProgressChannel(ctx, t, cs, o.ns, ctl)
	}
	t.Cleanup(func() { ctl.Close() })
	t.Cleanup(func() { admDeletePods(cs, o.ns) })
	run := &admRun{finish: map[string]float64{}, ran: map[string]map[topology.GPUType]int{}}
	remaining := map[string]float64{}
	byName := map[string]*admJob{}
	for i := range jobs {
		byName[jobs[i].name] = &jobs[i]
		remaining[jobs[i].name] = jobs[i].steps
	}
	nodeType := map[string]topology.GPUType{}
	for _, n := range admNodes(o.nodes) {
		for _, at := range admTypes {
			if at.product == n.Product {
				nodeType[n.Name] = at.typ
			}
		}
	}
	created := 0
	createdNames := map[string]bool{}
	start := time.Now()
	done := map[string]float64{} // steps done, by pod name (the jobs' global steps)
	for round := 0; round < o.maxRounds && len(run.finish) < len(jobs)-len(bad); round++ {
		clock = float64(round) * admRound
		clockBits.Store(math.Float64bits(clock))
		for created < len(jobs) && jobs[created].arrival <= clock {
			pod := jobs[created].pod(o.ns)
			if o.hideKinds {
				// Its kind unknown, but not where it fits: the types it can
				// run on (its memory), as its tenant would say.
				delete(pod.Annotations, model.AnnotationJobKind)
				delete(pod.Annotations, model.AnnotationBatchSize)
				var fits []string
				for _, at := range admTypes {
					if r, err := tab.Throughput(jobs[created].key, at.typ); err == nil && r > 0 {
						fits = append(fits, string(at.typ))
					}
				}
				pod.Annotations[model.AnnotationGPUTypes] = strings.Join(fits, ",")
				// Its program, as a training script's arguments name it
				// (what the controller groups runs by: model.ProgramGroup).
				k := jobs[created].key
				pod.Spec.Containers[0].Args = []string{"--model", k.Model, "--batch-size", strconv.Itoa(k.BatchSize)}
			}
			if o.learn {
				pod.Spec.ServiceAccountName = "default" // its token is bound to it
			}
			_, err := cs.CoreV1().Pods(o.ns).Create(ctx, pod, metav1.CreateOptions{})
			must(t, err, "create %s", jobs[created].name)
			createdNames[jobs[created].name] = true
			created++
		}
		if round == o.restartAt {
			ctl.Close() // as if its process died
			ctl, err = admission.New(ctx, cfg)
			must(t, err, "controller restarted from its state")
		}
		res, err := syncedRound(ctx, ctl)
		must(t, err, "round %d", round)
		assigned := map[string]topology.GPUType{}
		for k, v := range res.Assigned {
			assigned[strings.TrimPrefix(k, "pod/"+o.ns+"/")] = v
		}
		run.assigned = append(run.assigned, assigned)
		for _, name := range bad {
			if !slices.Contains(res.Skipped, "pod/"+o.ns+"/"+name) && createdNames[name] {
				t.Errorf("round %d: malformed %s not skipped: %v", round, name, res.Skipped)
			}
		}
		// Gates off exactly for the admitted; capacity per type.
		used := map[topology.GPUType]int{}
		pods, err := cs.CoreV1().Pods(o.ns).List(ctx, metav1.ListOptions{})
		must(t, err, "list pods")
		for _, p := range pods.Items {
			if p.Status.Phase == corev1.PodSucceeded {
				continue
			}
			typ, admitted := res.Admitted["pod/"+o.ns+"/"+p.Name]
			gated := slices.ContainsFunc(p.Spec.SchedulingGates, func(g corev1.PodSchedulingGate) bool { return g.Name == admission.GateName })
			if gated == admitted {
				t.Fatalf("round %d: pod %s gated=%v admitted=%v", round, p.Name, gated, admitted)
			}
			if admitted {
				used[typ] += byName[p.Name].key.ScaleFactor
			}
		}
		for typ, n := range used {
			if n > res.Capacity[typ] {
				t.Fatalf("round %d: %d %s GPUs admitted, capacity %d", round, n, typ, res.Capacity[typ])
			}
		}
		// Every admitted pod bound, on its type, no node over its GPUs.
		waitFor(ctx, t, fmt.Sprintf("round %d: admitted pods bound", round), nil, func() (bool, string) {
			pods, err := cs.CoreV1().Pods(o.ns).List(ctx, metav1.ListOptions{})
			if err != nil {
				return false, err.Error()
			}
			perNode := map[string]int{}
			for _, p := range pods.Items {
				typ, admitted := res.Admitted["pod/"+o.ns+"/"+p.Name]
				if !admitted || p.Status.Phase == corev1.PodSucceeded {
					continue
				}
				if p.Spec.NodeName == "" {
					return false, "pod " + p.Name + " not bound"
				}
				if nodeType[p.Spec.NodeName] != typ {
					t.Fatalf("round %d: pod %s admitted on %s bound to %s", round, p.Name, typ, p.Spec.NodeName)
				}
				perNode[p.Spec.NodeName] += byName[p.Name].key.ScaleFactor
			}
			for n, g := range perNode {
				if g > 4 {
					t.Fatalf("round %d: node %s holds %d GPUs of pods", round, n, g)
				}
			}
			return true, ""
		})
		// The completer.
		for _, name := range slices.Sorted(maps.Keys(res.Admitted)) {
			typ := res.Admitted[name]
			name = strings.TrimPrefix(name, "pod/"+o.ns+"/")
			j := byName[name]
			if run.ran[name] == nil {
				run.ran[name] = map[topology.GPUType]int{}
			}
			run.ran[name][typ]++
			rate := o.rates[name][typ]
			if o.rates[name] == nil {
				rate, err = tab.Throughput(j.key, typ)
				must(t, err, "rate of %s on %s", name, typ)
			}
			if rate <= 0 {
				t.Fatalf("round %d: %s admitted on %s where it cannot run", round, name, typ)
			}
			if ch != nil {
				// The job reports its steps every 60 s of the round until it
				// finishes, through the channel, authenticated as its pod.
				secs := min(admRound, remaining[name]/rate)
				ch.running(ctx, t, name)
				for at := 0.0; ; at = min(at+60, secs) {
					clockBits.Store(math.Float64bits(clock + at))
					ch.report(ctx, t, name, done[name]+rate*at)
					if at >= secs {
						break
					}
				}
				clockBits.Store(math.Float64bits(clock))
				done[name] += rate * secs
			}
			if left := remaining[name]; left <= rate*admRound {
				run.finish[name] = clock + left/rate
				remaining[name] = 0
				// The controller writes the pod's condition gpusched.io/Admitted
				// from a queue of its own, at any time: a stale copy is retried,
				// as a kubelet would.
				err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
					p, err := cs.CoreV1().Pods(o.ns).Get(ctx, name, metav1.GetOptions{})
					if err != nil {
						return err
					}
					p.Status.Phase = corev1.PodSucceeded
					_, err = cs.CoreV1().Pods(o.ns).UpdateStatus(ctx, p, metav1.UpdateOptions{})
					return err
				})
				must(t, err, "complete %s", name)
			} else {
				remaining[name] = left - rate*admRound
			}
		}
		run.rounds = round + 1
	}
	run.wall = time.Since(start)
	run.ctl = ctl
	return run
}

// admDeletePods deletes a namespace's pods at once: no namespace controller
// runs here, and pods left bound would hold GPUs of nodes of the same name
// in later tests.
func admDeletePods(cs kubernetes.Interface, ns string) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	zero := int64(0)
	_ = cs.CoreV1().Pods(ns).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: &zero}, metav1.ListOptions{})
}

func admSetup(ctx context.Context, t *testing.T, ns string) kubernetes.Interface {
	t.Helper()
	c, _ := controlPlane(t)
	cs := c.Client
	must(t, kubetest.EnsureNamespace(ctx, cs, ns), "namespace %s", ns)
	return cs
}

// startStock starts the stock kube-scheduler, which binds the admitted
// pods (it honours their node affinity and the nodes' nvidia.com/gpu).
func startStock(t *testing.T) {
	t.Helper()
	c, _ := controlPlane(t)
	bins := kubetest.RequireBinaries(t)
	startScheduler(t, testDir(t), "kube-scheduler", bins.Scheduler, stockConfig(c))
}

func malformedEvent(ctx context.Context, t *testing.T, cs kubernetes.Interface, ns, pod string) string {
	t.Helper()
	e, _ := findEvent(ctx, t, cs, ns, func(e *corev1.Event) bool {
		return e.InvolvedObject.Name == pod && e.Reason == admission.ReasonMalformed && e.Type == corev1.EventTypeWarning
	})
	return e.Message
}

// findEvent waits (up to 20 s: the controller's event broadcaster writes
// in the background) for an event of namespace ns that match accepts.
func findEvent(ctx context.Context, t *testing.T, cs kubernetes.Interface, ns string, match func(*corev1.Event) bool) (corev1.Event, bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		evs, err := cs.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
		must(t, err, "events")
		for i := range evs.Items {
			if match(&evs.Items[i]) {
				return evs.Items[i], true
			}
		}
		if time.Now().After(deadline) {
			return corev1.Event{}, false
		}
		select {
		case <-ctx.Done():
			return corev1.Event{}, false
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// syncedRound runs a round once the controller's caches hold what the API
// server does: these tests change objects and run a round at once, where
// a real controller's rounds are minutes apart.
func syncedRound(ctx context.Context, ctl *admission.Controller) (*admission.RoundResult, error) {
	sctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := ctl.SyncCaches(sctx); err != nil {
		return nil, err
	}
	return ctl.Round(ctx)
}

// TestE2EAdmissionShares: 50 jobs present from the start on three GPU
// types (8 K80s, 8 P100s, 8 V100s on six labelled nodes), under Gavel's
// heterogeneity-aware max-min fairness, rates from the performance model
// by job kind, from a throughput annotation, or the default; one more
// job is malformed. Over 20 rounds the gates come off only for admitted
// jobs, no type's capacity (nor any node's) is exceeded, the stock
// kube-scheduler binds every admitted pod on its type, and every job's
// share of rounds on each type is within 0.1 of the allocation's X.
func TestE2EAdmissionShares(t *testing.T) {
	controlPlane(t) // started (and the binaries built) before the clock runs
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	const ns = "adm-shares"
	cs := admSetup(ctx, t, ns)
	createNodes(ctx, t, cs, admNodes("adm-shares"))
	startStock(t)

	jobs := admWorkload(50, 0, 1)
	rates := map[string]map[topology.GPUType]float64{}
	for i := range jobs {
		jobs[i].steps = 1e12 // nobody finishes within the test
		switch {
		case i%10 == 3: // rates by annotation
			r := map[topology.GPUType]float64{topology.K80: 1, topology.P100: 2 + float64(i%3), topology.V100: 4}
			jobs[i].ann = map[string]string{model.AnnotationThroughput: fmt.Sprintf("k80=%g,p100=%g,v100=%g", r[topology.K80], r[topology.P100], r[topology.V100])}
			rates[jobs[i].name] = r
		case i == 7 || i == 27: // nothing known: the default, 1 step/s everywhere
			jobs[i].key.Model = ""
			rates[jobs[i].name] = map[topology.GPUType]float64{topology.K80: 1, topology.P100: 1, topology.V100: 1}
		}
	}
	jobs = append(jobs, admJob{name: "bad-00", key: perfmodel.JobKey{Model: "ResNet-18", BatchSize: 32, ScaleFactor: 1}, steps: 1,
		ann: map[string]string{model.AnnotationThroughput: "v100=fast"}})
	rec := &admRecorder{inner: &allocation.MaxMinFairness{}}
	run := runAdmission(ctx, t, cs, jobs, []string{"bad-00"}, admOptions{ns: ns, nodes: "adm-shares", policy: rec, restartAt: -1, maxRounds: 20, rates: rates})
	if run.rounds != 20 {
		t.Fatalf("%d rounds", run.rounds)
	}
	if msg := malformedEvent(ctx, t, cs, ns, "bad-00"); !strings.Contains(msg, model.AnnotationThroughput) {
		t.Errorf("malformed pod: event %q", msg)
	}
	// The allocation the core used, by job name.
	snap, err := run.ctl.Scheduler().Snapshot()
	must(t, err, "snapshot")
	var s struct {
		Jobs []struct {
			Key string `json:"key"`
			ID  int    `json:"id"`
		} `json:"jobs"`
	}
	must(t, json.Unmarshal(snap, &s), "snapshot json")
	names := map[int]string{}
	for _, j := range s.Jobs {
		names[j.ID] = strings.TrimPrefix(j.Key, "pod/"+ns+"/")
	}
	a := rec.last
	if a == nil || len(a.JobIDs) != 50 {
		t.Fatalf("allocation: %+v", a)
	}
	t.Logf("policy solved %d times; max-min level %.4f", rec.calls, a.Objective)
	worst, worstJob := 0.0, ""
	var sumDev float64
	for m, id := range a.JobIDs {
		name := names[id]
		for k, typ := range a.Types {
			share := float64(run.ran[name][typ]) / float64(run.rounds)
			d := math.Abs(share - a.X[m][k])
			sumDev += d
			if d > worst {
				worst, worstJob = d, fmt.Sprintf("%s on %s: share %.2f, X %.3f", name, typ, share, a.X[m][k])
			}
		}
	}
	t.Logf("realised share vs X after %d rounds: max |share - X| = %.3f (%s), mean %.3f; %.0f ms of wall time per round",
		run.rounds, worst, worstJob, sumDev/float64(len(a.JobIDs)*len(a.Types)), float64(run.wall.Milliseconds())/float64(run.rounds))
	if worst > 0.1 {
		t.Errorf("a job's realised share is %.3f from its X (want <= 0.1): %s", worst, worstJob)
	}
}

// TestE2EAdmissionTrace: 50 jobs arriving as a Poisson process (4 per
// hour) and finishing, through the control plane twice (once with the
// controller restarted from its ConfigMap at round 15) and through the
// simulator. The restart changes no round's decision and no completion
// time; the malformed job is skipped while the rest finish; mean JCT
// through the control plane is within 10% of the simulator's.
func TestE2EAdmissionTrace(t *testing.T) {
	c, _ := controlPlane(t)
	ctx, cancel := context.WithTimeout(context.Background(), 9*time.Minute)
	defer cancel()
	cs := c.Client
	createNodes(ctx, t, cs, admNodes("adm-trace"))
	startStock(t)
	jobs := admWorkload(50, 4, 7)
	// A malformed job arrives with the others.
	jobs = slices.Insert(jobs, 10, admJob{name: "bad-00", arrival: jobs[10].arrival, key: perfmodel.JobKey{Model: "ResNet-18", BatchSize: 32, ScaleFactor: 1},
		steps: 1, ann: map[string]string{model.AnnotationMinMember: "2"}}) // min-member without a pod group
	runs := map[string]*admRun{}
	for _, v := range []struct {
		ns      string
		restart int
	}{{"adm-trace", -1}, {"adm-trace-restart", 15}} {
		must(t, kubetest.EnsureNamespace(ctx, cs, v.ns), "namespace")
		runs[v.ns] = runAdmission(ctx, t, cs, jobs, []string{"bad-00"}, admOptions{ns: v.ns, nodes: "adm-trace", policy: &allocation.MaxMinFairness{}, restartAt: v.restart, maxRounds: 600})
		if msg := malformedEvent(ctx, t, cs, v.ns, "bad-00"); msg == "" {
			t.Errorf("%s: no event on the malformed pod", v.ns)
		}
	}
	plain, restarted := runs["adm-trace"], runs["adm-trace-restart"]
	if len(plain.finish) != 50 {
		t.Fatalf("%d of 50 jobs finished in %d rounds", len(plain.finish), plain.rounds)
	}
	if plain.rounds != restarted.rounds {
		t.Errorf("rounds: %d without a restart, %d with", plain.rounds, restarted.rounds)
	}
	for i := range min(len(plain.assigned), len(restarted.assigned)) {
		if !mapsEqual(plain.assigned[i], restarted.assigned[i]) {
			t.Errorf("round %d decided differently after the restart:\n%v\n%v", i, plain.assigned[i], restarted.assigned[i])
			break
		}
	}
	for name, f := range plain.finish {
		if restarted.finish[name] != f {
			t.Errorf("%s finished at %v without a restart, %v with", name, f, restarted.finish[name])
		}
	}
	// The same workload through the simulator.
	var sj []sim.Job
	arrival := map[string]float64{}
	for _, j := range jobs {
		if j.name == "bad-00" {
			continue
		}
		arrival[j.name] = j.arrival
		sj = append(sj, sim.Job{ID: len(sj), Arrival: j.arrival, Key: j.key, Steps: j.steps, Name: j.name})
	}
	res, err := sim.Run(ctx, sim.Config{
		Types: []topology.GPUType{topology.K80, topology.P100, topology.V100}, Capacity: []int{8, 8, 8}, GPUsPerServer: []int{4, 4, 4},
		Policy: &allocation.MaxMinFairness{}, Mechanism: allocation.Mechanism{RoundLength: admRound},
	}, sj)
	must(t, err, "simulation")
	var simJCT, cpJCT float64
	for _, r := range res.Records {
		simJCT += r.JCT()
	}
	simJCT /= float64(len(res.Records))
	for name, f := range plain.finish {
		cpJCT += f - arrival[name]
	}
	cpJCT /= float64(len(plain.finish))
	ratio := cpJCT / simJCT
	t.Logf("mean JCT: control plane %.2f h (%d rounds, %.0f ms of wall time per round), simulator %.2f h (%d rounds); ratio %.3f",
		cpJCT/3600, plain.rounds, float64(plain.wall.Milliseconds())/float64(plain.rounds), simJCT/3600, res.Rounds, ratio)
	if math.Abs(ratio-1) > 0.1 {
		t.Errorf("mean JCT through the control plane is %.1f%% off the simulator's (want within 10%%)", 100*(ratio-1))
	}
}

func mapsEqual[K comparable, V comparable](a, b map[K]V) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}
