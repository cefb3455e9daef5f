package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gpusched/gpusched/allocation"
	"github.com/gpusched/gpusched/kube/kueue"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"
	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/testutil"
)

// perfClass is a workload class of Kueue's scheduler performance test
// (test/performance/scheduler/configs/baseline/generator.yaml), in GPUs.
type perfClass struct {
	name     string
	count    int
	interval time.Duration
	runtime  time.Duration
	priority int
	gpus     int
}

var perfClasses = []perfClass{
	{"small", 350, 100 * time.Millisecond, 200 * time.Millisecond, 50, 1},
	{"medium", 100, 500 * time.Millisecond, 500 * time.Millisecond, 100, 5},
	{"large", 50, 1200 * time.Millisecond, time.Second, 200, 20},
}

// perfResult is one run of the performance test.
type perfResult struct {
	wall                time.Duration
	admit               map[string]time.Duration // mean time to admission, by class
	rounds              float64
	roundMean, roundP99 float64 // seconds
	writes              float64
	load                [2]string
}

// TestE2EKueuePerformance runs Kueue's own scheduler performance test
// shape on the real Kueue v0.17.0: 5 cohorts of 6 ClusterQueues (10 GPUs
// of each of V100 and K80 nominal, a borrowing limit of 50 each), 500
// Workloads per queue created directly at the generator's intervals (350
// of 1 GPU every 100 ms, 100 of 5 every 500 ms, 50 of 20 every 1.2 s),
// each finished by the test once admitted after its runtime (200 ms, 500
// ms, 1 s): 15,000 Workloads, under Kueue alone and with gpusched's
// controller steering them (node selectors, no gate). It reports the
// wall time, the mean time to admission by class, the controller's round
// time and API writes, and the load average. It takes tens of minutes on
// 2 cores: GPUSCHED_KUEUE_PERF=1 runs it (see docs/kueue.md).
func TestE2EKueuePerformance(t *testing.T) {
	if os.Getenv("GPUSCHED_KUEUE_PERF") == "" {
		t.Skip("set GPUSCHED_KUEUE_PERF=1 to run Kueue's 15,000-workload performance shape (tens of minutes; go test ./e2e -run TestE2EKueuePerformance -timeout 120m -v)")
	}
	e := kueueEnvironment(t)
	scale := 1
	if os.Getenv("GPUSCHED_KUEUE_PERF") == "small" {
		scale = 10 // a tenth of the workloads, for a quick look
	}
	alone := perfRun(t, e, "perf-alone", false, scale)
	steered := perfRun(t, e, "perf-gpusched", true, scale)
	for _, r := range []struct {
		name string
		p    perfResult
	}{{"kueue alone", alone}, {"kueue+gpusched", steered}} {
		t.Logf("%s: %d workloads in %v (load %s -> %s); mean time to admission: small %v, medium %v, large %v",
			r.name, 15000/scale, r.p.wall.Round(time.Second), r.p.load[0], r.p.load[1],
			r.p.admit["small"].Round(time.Millisecond), r.p.admit["medium"].Round(time.Millisecond), r.p.admit["large"].Round(time.Millisecond))
	}
	t.Logf("gpusched: %.0f rounds, round time mean %.3f s, p99 %.3f s, %.0f API writes", steered.rounds, steered.roundMean, steered.roundP99, steered.writes)
}

func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

func perfRun(t *testing.T, e *kueueEnv, run string, steer bool, scale int) perfResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Minute)
	defer cancel()
	ns := run
	e.namespace(ctx, t, ns, run, nil)
	type queue struct{ cq, lq string }
	var queues []queue
	for c := range 5 {
		for i := range 6 {
			name := fmt.Sprintf("%s-%d-%d", run, c, i)
			var flavors []any
			for _, f := range []string{"v100", "k80"} {
				flavors = append(flavors, map[string]any{"name": f, "resources": []any{map[string]any{"name": "nvidia.com/gpu", "nominalQuota": "10", "borrowingLimit": "50"}}})
			}
			cq := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue",
				"metadata": map[string]any{"name": name},
				"spec": map[string]any{"cohortName": fmt.Sprintf("%s-%d", run, c), "namespaceSelector": map[string]any{},
					"preemption":     map[string]any{"reclaimWithinCohort": "Any", "withinClusterQueue": "LowerPriority"},
					"resourceGroups": []any{map[string]any{"coveredResources": []any{"nvidia.com/gpu"}, "flavors": flavors}}}}}
			_, err := e.dyn.Resource(kueue.ClusterQueuesGVR).Create(ctx, cq, metav1.CreateOptions{})
			must(t, err, "ClusterQueue %s", name)
			lq := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
				"metadata": map[string]any{"name": name, "namespace": ns}, "spec": map[string]any{"clusterQueue": name}}}
			_, err = e.dyn.Resource(kueue.LocalQueuesGVR).Namespace(ns).Create(ctx, lq, metav1.CreateOptions{})
			must(t, err, "LocalQueue %s", name)
			queues = append(queues, queue{name, name})
		}
	}
	var m *kueue.Metrics
	reg := metrics.NewKubeRegistry()
	var stopCtl context.CancelFunc = func() {}
	ctlDone := make(chan error, 1)
	if steer {
		m = kueue.NewMetrics()
		must(t, m.Register(reg), "metrics")
		ctl, err := kueue.New(kueue.Config{Client: e.cp.Client, Dynamic: e.dyn, Namespace: ns, Policy: &allocation.MaxMinFairness{},
			PolicyName: "max-min-fairness", MinInterval: time.Second, Interval: 10 * time.Second, Metrics: m})
		must(t, err, "controller")
		cctx, stop := context.WithCancel(ctx)
		stopCtl = stop
		go func() { ctlDone <- ctl.Run(cctx) }()
	}
	// The finisher: an admitted Workload is finished after its runtime.
	var mu sync.Mutex
	created := map[string]time.Time{}
	admitted := map[string]time.Duration{}
	class := map[string]perfClass{}
	finished := 0
	total := 0
	factory := dynamicinformer.NewFilteredDynamicSharedInformerFactory(e.dyn, 0, ns, nil)
	inf := factory.ForResource(kueue.WorkloadsGVR).Informer()
	finish := make(chan string, 20000)
	onWorkload := func(obj any) {
		u, ok := obj.(*unstructured.Unstructured)
		if !ok || admittedFlavor(u) == "" {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		if _, seen := admitted[u.GetName()]; seen {
			return
		}
		t0, ok := created[u.GetName()]
		if !ok {
			return
		}
		admitted[u.GetName()] = time.Since(t0)
		name, rt := u.GetName(), class[u.GetName()].runtime
		time.AfterFunc(rt, func() { finish <- name })
	}
	_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: onWorkload, UpdateFunc: func(_, o any) { onWorkload(o) }})
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())
	var fwg sync.WaitGroup
	for range 8 {
		fwg.Go(func() {
			for name := range finish {
				err := e.retry(ctx, func() error { return finishWorkload(ctx, e, ns, name) })
				if err != nil {
					t.Errorf("finish %s: %v", name, err)
				}
				mu.Lock()
				finished++
				mu.Unlock()
			}
		})
	}
	loadStart := loadavg()
	start := time.Now()
	kinds := []map[string]any{
		{"gpusched.io/job-kind": "ResNet-50", "gpusched.io/batch-size": "64"}, {"gpusched.io/job-kind": "Transformer", "gpusched.io/batch-size": "128"},
		{"gpusched.io/job-kind": "A3C"}, {"gpusched.io/job-kind": "CycleGAN"}, {"gpusched.io/throughput": "v100=13.28,k80=20.05"},
	}
	var cwg sync.WaitGroup
	for qi, q := range queues {
		for _, c := range perfClasses {
			n := c.count / scale
			mu.Lock()
			total += n
			mu.Unlock()
			cwg.Go(func() {
				r := rand.New(rand.NewPCG(uint64(qi), uint64(c.gpus)))
				for k := range n {
					name := fmt.Sprintf("%s-%s-%03d", q.cq, c.name, k)
					w := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
						"metadata": map[string]any{"name": name, "namespace": ns},
						"spec": map[string]any{"queueName": q.lq, "priority": int64(c.priority), "podSets": []any{map[string]any{"name": "main", "count": int64(1),
							"template": map[string]any{"metadata": map[string]any{"annotations": kinds[r.IntN(len(kinds))]},
								"spec": map[string]any{"restartPolicy": "Never", "containers": []any{map[string]any{"name": "c", "image": "x",
									"resources": map[string]any{"requests": map[string]any{"nvidia.com/gpu": fmt.Sprint(c.gpus)}}}}}}}}}}}
					mu.Lock()
					created[name], class[name] = time.Now(), c
					mu.Unlock()
					if err := e.retry(ctx, func() error {
						_, err := e.dyn.Resource(kueue.WorkloadsGVR).Namespace(ns).Create(ctx, w, metav1.CreateOptions{})
						return err
					}); err != nil {
						t.Errorf("create %s: %v", name, err)
						return
					}
					time.Sleep(c.interval)
				}
			})
		}
	}
	cwg.Wait()
	waitFor(ctx, t, run+": every Workload finished", e.kueueProc, func() (bool, string) {
		mu.Lock()
		defer mu.Unlock()
		return finished == total, fmt.Sprintf("%d of %d finished, %d admitted", finished, total, len(admitted))
	})
	res := perfResult{wall: time.Since(start), admit: map[string]time.Duration{}, load: [2]string{loadStart, loadavg()}}
	close(finish)
	fwg.Wait()
	stopCtl()
	if steer {
		ctlStopped(t, <-ctlDone)
	}
	sums, counts := map[string]time.Duration{}, map[string]int{}
	for name, d := range admitted {
		sums[class[name].name] += d
		counts[class[name].name]++
	}
	for c, s := range sums {
		res.admit[c] = s / time.Duration(counts[c])
	}
	if m != nil {
		fams, err := reg.Gather()
		must(t, err, "metrics")
		for _, f := range fams {
			for _, mt := range f.GetMetric() {
				switch f.GetName() {
				case "gpusched_kueue_round_duration_seconds":
					h := mt.GetHistogram()
					res.rounds = float64(h.GetSampleCount())
					res.roundMean = h.GetSampleSum() / max(res.rounds, 1)
				case "gpusched_kueue_api_writes_total":
					res.writes += mt.GetCounter().GetValue()
				}
			}
		}
		vec, err := testutil.GetHistogramVecFromGatherer(reg, "gpusched_kueue_round_duration_seconds", nil)
		if err == nil {
			res.roundP99 = vec.Quantile(0.99)
		}
	}
	return res
}

// finishWorkload sets a Workload's Finished condition, as Kueue's
// performance runner does.
func finishWorkload(ctx context.Context, e *kueueEnv, ns, name string) error {
	u, err := e.dyn.Resource(kueue.WorkloadsGVR).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	if slices.ContainsFunc(conds, func(c any) bool { m, _ := c.(map[string]any); return m["type"] == "Finished" }) {
		return nil
	}
	conds = append(conds, map[string]any{"type": "Finished", "status": "True", "reason": "Succeeded", "message": "finished by the e2e runner",
		"lastTransitionTime": time.Now().UTC().Format(time.RFC3339)})
	if err := unstructured.SetNestedSlice(u.Object, conds, "status", "conditions"); err != nil {
		return err
	}
	_, err = e.dyn.Resource(kueue.WorkloadsGVR).Namespace(ns).UpdateStatus(ctx, u, metav1.UpdateOptions{})
	return err
}
