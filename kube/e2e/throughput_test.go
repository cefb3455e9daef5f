package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gpusched/gpusched/kube/gpusched"
	"github.com/gpusched/gpusched/kube/internal/kubetest"
	"github.com/gpusched/gpusched/kube/internal/metricstest"
	"github.com/gpusched/gpusched/kube/model"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// EnvResults names a file where TestE2EThroughput writes its results as
// JSON.
const EnvResults = "GPUSCHED_E2E_RESULTS"

// EnvRounds sets the rounds of TestE2EThroughput (four runs each).
const EnvRounds = "GPUSCHED_E2E_ROUNDS"

// throughputRun is one measured run.
type throughputRun struct {
	Phase     string  `json:"phase"`
	Round     int     `json:"round"`
	Scheduler string  `json:"scheduler"`
	Pods      int     `json:"pods"`
	Seconds   float64 `json:"seconds"`
	PodsPerS  float64 `json:"pods_per_second"`
	// SchedulerCPU and APIServerCPU are the CPU seconds the scheduler
	// process used in all and the API server used while it ran.
	SchedulerCPU float64 `json:"scheduler_cpu_s"`
	APIServerCPU float64 `json:"apiserver_cpu_s"`
	// Plugin statistics (gpusched only).
	Stats *gpusched.Stats `json:"stats,omitempty"`
	// SchedulerPeakMiB is the scheduler's peak resident memory (VmHWM).
	SchedulerPeakMiB float64 `json:"scheduler_peak_mib,omitempty"`
	// Points gives the plugin's latency per extension point, p50 and p99
	// in microseconds, from its /metrics (gpusched, when scraped);
	// GroupWaitMs the p50 and p99 of pod groups' waits at Permit.
	Points      map[string][2]float64 `json:"points_us,omitempty"`
	GroupWaitMs [2]float64            `json:"group_wait_ms,omitzero"`
	// From the scheduler's own metrics (either scheduler, when it serves
	// them): the Bind extension point's p50 and p99 in milliseconds
	// (scheduler_framework_extension_point_duration_seconds, the Binding
	// request included, for DefaultBinder as for GPUSched), and the
	// scheduling attempts by result (scheduler_schedule_attempts_total).
	BindMs   [2]float64         `json:"bind_ms,omitzero"`
	Attempts map[string]float64 `json:"attempts,omitempty"`
	// Batch counts the cycles of opportunistic batching (KEP-5598) by
	// result (scheduler_batch_attempts_total: hint_used, hint_not_used,
	// no_hint) and the batch state's flushes by reason
	// (scheduler_batch_cache_flushed_total, as "flush <reason>"): a
	// cycle whose hint was used filtered and scored the last pod's node
	// and the hinted one, not every node.
	Batch map[string]float64 `json:"batch,omitempty"`
	// GroupPermits counts gpusched's Permit decisions on pod group
	// members by result.
	GroupPermits map[string]float64 `json:"group_permits,omitempty"`
}

// runSpec says what one measured run schedules.
type runSpec struct {
	phase, sched string // "single" or "gangs"; "stock" or "gpusched"
	round        int
	// total pods of one GPU, gangPods of them in groups of groupSize.
	total, gangPods, groupSize int
	// tolerate: the pods tolerate the scale nodes' taint.
	tolerate bool
	// serve: the scheduler serves /metrics, scraped at the end.
	serve bool
	// workers create the pods.
	workers int
	// timeout bounds the wait for every pod to be bound.
	timeout time.Duration
}

// TestE2EThroughput measures scheduling throughput, the stock kube-scheduler
// against gpusched-scheduler on the same control plane in the same run:
// 1,000 single-GPU pods on 100 nodes of 16 GPUs, then 1,000 pods of which
// 200 in 50 pod groups of 4, each measured twice per scheduler and round
// (GPUSCHED_E2E_ROUNDS). The pods are created first, then the scheduler is
// started; throughput is the pods bound after the first over the time from
// the first binding to the last. It reports, and asserts nothing about
// wall-clock time: docs/kubernetes.md records the figures (GPUSCHED_E2E_RESULTS
// names a file for them as JSON).
func TestE2EThroughput(t *testing.T) {
	c, bin := controlPlane(t)
	bins := kubetest.RequireBinaries(t)
	rounds := 1
	if v := os.Getenv(EnvRounds); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 10 {
			t.Fatalf("%s=%q: want 1 to 10", EnvRounds, v)
		}
		rounds = n
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(rounds)*8*time.Minute)
	defer cancel()
	cs := c.Client
	var nodes []kubetest.GPUNode
	for i := range 100 {
		n := kubetest.GPUNode{Name: fmt.Sprintf("perf-%d", i), GPUs: 16,
			Labels: map[string]string{model.LabelRack: fmt.Sprintf("r%d", i/10)}}
		if i%2 == 0 {
			n.Product, n.Links = kubetest.ProductV100, `{"interconnect":"nvswitch"}` // DGX-2
		} else {
			n.Product, n.Links = kubetest.ProductA100, `{"interconnect":"pcie-dual-socket"}`
		}
		nodes = append(nodes, n)
	}
	createNodes(ctx, t, cs, nodes)
	dir := testDir(t)

	// Rounds of four runs per phase in the order stock, gpusched,
	// gpusched, stock (ABBA), so that a drift in the machine's load weighs
	// on both alike; GPUSCHED_E2E_ROUNDS sets how many (1 by default). The
	// ratio is that of the medians, steadier than the means on a shared
	// machine.
	var runs []throughputRun
	ratios := map[string]float64{}
	for _, phase := range []string{"single", "gangs"} {
		rate := map[string][]float64{}
		for i := range 4 * rounds {
			sched := []string{"stock", "gpusched", "gpusched", "stock"}[i%4]
			r := measure(ctx, t, c, cs, dir, phase, sched, i/2, bin, bins.Scheduler)
			t.Logf("%-7s %-9s %4d pods in %6.2f s: %6.1f pods/s; CPU: scheduler %.1f s, API server %.1f s",
				r.Phase, r.Scheduler, r.Pods, r.Seconds, r.PodsPerS, r.SchedulerCPU, r.APIServerCPU)
			if r.Stats != nil {
				t.Logf("        plugin time per pod p50 %.0f us, p99 %.0f us; bind call p50 %.1f ms, p99 %.1f ms",
					r.Stats.PluginP50Micros, r.Stats.PluginP99Micros, r.Stats.BindP50Micros/1e3, r.Stats.BindP99Micros/1e3)
			}
			runs = append(runs, r)
			rate[sched] = append(rate[sched], r.PodsPerS)
		}
		stock, ours := median(rate["stock"]), median(rate["gpusched"])
		ratios[phase] = ours / stock
		t.Logf("%s: median pods/s stock %.1f, gpusched %.1f: gpusched / stock = %.2f", phase, stock, ours, ours/stock)
	}
	if path := os.Getenv(EnvResults); path != "" {
		b, err := json.MarshalIndent(map[string]any{"runs": runs, "ratios": ratios}, "", "  ")
		must(t, err, "results")
		must(t, os.WriteFile(path, b, 0o644), "write %s", path)
	}
}

func measure(ctx context.Context, t *testing.T, c *kubetest.ControlPlane, cs kubernetes.Interface, dir, phase, sched string, round int, ours, stock string) throughputRun {
	t.Helper()
	return measureRun(ctx, t, c, cs, dir, runSpec{phase: phase, sched: sched, round: round, total: 1000, gangPods: 200, groupSize: 4}, ours, stock)
}

// measureRun creates the pods of r, starts the scheduler, waits until
// every pod is bound and measures the throughput.
func measureRun(ctx context.Context, t *testing.T, c *kubetest.ControlPlane, cs kubernetes.Interface, dir string, r runSpec, ours, stock string) throughputRun {
	t.Helper()
	ns := fmt.Sprintf("perf-%s-%s-%d", r.phase, r.sched, r.round)
	if r.tolerate {
		ns = "scale-" + ns
	}
	must(t, kubetest.EnsureNamespace(ctx, cs, ns), "namespace")
	w, err := watch(ctx, cs, ns, 0, r.sched == "gpusched")
	must(t, err, "watcher")
	defer w.stop()
	schedName := "default-scheduler"
	if r.sched == "gpusched" {
		schedName = "gpusched"
	}
	total := r.total
	pods := make([]*corev1.Pod, 0, total)
	for i := range total {
		var labels, ann map[string]string
		if r.phase == "gangs" && i < r.gangPods {
			labels = map[string]string{model.LabelPodGroup: fmt.Sprint("g", i/r.groupSize)}
			ann = map[string]string{model.AnnotationMinMember: strconv.Itoa(r.groupSize)}
		}
		p := gpuPodSpec(ns, "p"+strconv.Itoa(i), 1, "", labels, ann)
		p.Spec.SchedulerName = schedName
		if r.tolerate {
			p.Spec.Tolerations = []corev1.Toleration{scaleToleration}
		}
		pods = append(pods, p)
	}
	createAllWith(ctx, t, cs, pods, max(r.workers, 8))

	stats := filepath.Join(dir, ns+"-stats.json")
	apiBefore, err := c.APIServerCPU()
	must(t, err, "API server CPU")
	var p *kubetest.Process
	metricsURL := ""
	cfg := stockConfig(c)
	bin := stock
	if r.sched == "gpusched" {
		cfg, bin = schedulerConfig(t, c, map[string]any{"statsFile": stats}), ours
	}
	profDir := os.Getenv(EnvProfile)
	var profiled chan struct{}
	if r.serve || profDir != "" {
		p, metricsURL = servingScheduler(t, c, dir, ns, bin, cfg)
	} else {
		p = startScheduler(t, dir, ns, bin, cfg)
	}
	if profDir != "" {
		profiled = make(chan struct{})
		go func() {
			defer close(profiled)
			out := filepath.Join(profDir, ns+".pprof")
			if err := cpuProfile(ctx, strings.TrimSuffix(metricsURL, "/metrics"), c.Config.BearerToken, out, 20); err != nil {
				t.Logf("%s: CPU profile: %v", ns, err)
			}
		}()
	}
	wctx := ctx
	if r.timeout > 0 {
		var cancel context.CancelFunc
		wctx, cancel = context.WithTimeout(ctx, r.timeout)
		defer cancel()
	}
	waitFor(wctx, t, ns+": every pod bound", p, func() (bool, string) {
		all, _, _ := w.snapshot()
		return len(all) >= total, fmt.Sprintf("%d of %d bound", len(all), total)
	})
	schedCPU, err := p.CPUTime()
	must(t, err, "scheduler CPU")
	apiAfter, err := c.APIServerCPU()
	must(t, err, "API server CPU")
	_, peak, err := p.Memory()
	must(t, err, "scheduler memory")
	var points map[string][2]float64
	var groupWait, bindMs [2]float64
	var attempts, permits, batch map[string]float64
	if metricsURL != "" {
		m, err := scrape(ctx, metricsURL, c.Config.BearerToken)
		must(t, err, "scrape %s", metricsURL)
		bl := map[string]string{"extension_point": "Bind", "status": "Success", "profile": schedName}
		b50, _ := m.Quantile("scheduler_framework_extension_point_duration_seconds", bl, 0.5)
		b99, _ := m.Quantile("scheduler_framework_extension_point_duration_seconds", bl, 0.99)
		bindMs = [2]float64{b50 * 1e3, b99 * 1e3}
		attempts = map[string]float64{}
		for _, res := range []string{"scheduled", "unschedulable", "error"} {
			attempts[res] = m.Sum("scheduler_schedule_attempts_total", map[string]string{"result": res})
		}
		batch = batchCounts(m)
		if r.sched == "gpusched" {
			permits = map[string]float64{}
			for _, res := range []string{"allow", "wait", "reject"} {
				permits[res] = m.Sum("gpusched_plugin_pod_group_permits_total", map[string]string{"result": res})
			}
			points = map[string][2]float64{}
			for _, pt := range []string{"PreFilter", "Filter", "PreScore", "Score", "Reserve", "Permit", "Bind"} {
				l := map[string]string{"extension_point": pt}
				p50, _ := m.Quantile("gpusched_plugin_extension_point_duration_seconds", l, 0.5)
				p99, _ := m.Quantile("gpusched_plugin_extension_point_duration_seconds", l, 0.99)
				points[pt] = [2]float64{p50 * 1e6, p99 * 1e6}
			}
			g50, _ := m.Quantile("gpusched_plugin_pod_group_wait_duration_seconds", nil, 0.5)
			g99, _ := m.Quantile("gpusched_plugin_pod_group_wait_duration_seconds", nil, 0.99)
			groupWait = [2]float64{g50 * 1e3, g99 * 1e3}
		}
	}
	if profiled != nil {
		<-profiled
	}
	p.Stop(30 * time.Second)
	all, _, violations := w.snapshot()
	for _, v := range violations {
		t.Errorf("%s: %s", ns, v)
	}
	first, last := all[0].at, all[0].at
	for _, b := range all {
		first, last = minTime(first, b.at), maxTime(last, b.at)
	}
	res := throughputRun{Phase: r.phase, Round: r.round, Scheduler: r.sched, Pods: len(all), Seconds: last.Sub(first).Seconds(),
		SchedulerPeakMiB: float64(peak) / (1 << 20), Points: points, GroupWaitMs: groupWait,
		BindMs: bindMs, Attempts: attempts, Batch: batch, GroupPermits: permits}
	res.PodsPerS = float64(len(all)-1) / res.Seconds
	res.SchedulerCPU, res.APIServerCPU = schedCPU.Seconds(), (apiAfter - apiBefore).Seconds()
	if r.sched == "gpusched" {
		var s gpusched.Stats
		b, err := os.ReadFile(stats)
		must(t, err, "stats")
		must(t, json.Unmarshal(b, &s), "stats")
		res.Stats = &s
	}
	// Empty the cluster for the next run (bound pods go at once: nothing
	// runs them).
	// A DeleteCollection of 10,000 pods (5,000 nodes) can outlast the API
	// server's request timeout and be cut; it is sent again until they
	// are gone.
	zero := int64(0)
	waitFor(ctx, t, ns+": pods gone", nil, func() (bool, string) {
		l, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{Limit: 1})
		if err != nil {
			return false, err.Error()
		}
		if len(l.Items) == 0 {
			return true, ""
		}
		err = cs.CoreV1().Pods(ns).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: &zero}, metav1.ListOptions{})
		return false, fmt.Sprintf("pods left (delete: %v)", err)
	})
	return res
}

// createAll creates the pods, 8 at a time.
func createAll(ctx context.Context, t *testing.T, cs kubernetes.Interface, pods []*corev1.Pod) {
	t.Helper()
	createAllWith(ctx, t, cs, pods, 8)
}

// createAllWith creates the pods, workers at a time.
func createAllWith(ctx context.Context, t *testing.T, cs kubernetes.Interface, pods []*corev1.Pod, workers int) {
	t.Helper()
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
		next = make(chan *corev1.Pod)
	)
	for range workers {
		wg.Go(func() {
			for p := range next {
				if _, err := cs.CoreV1().Pods(p.Namespace).Create(ctx, p, metav1.CreateOptions{}); err != nil {
					mu.Lock()
					errs = append(errs, fmt.Errorf("create %s: %w", p.Name, err))
					mu.Unlock()
				}
			}
		})
	}
	for _, p := range pods {
		next <- p
	}
	close(next)
	wg.Wait()
	if len(errs) > 0 {
		t.Fatal(errs[0])
	}
}

// median of v (the mean of the middle two for an even count).
func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	n := len(s)
	if n == 0 {
		return 0
	}
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// batchCounts reads a scheduler's opportunistic batching counters: the
// cycles by result, and the flushes of its batch state by reason (as
// "flush <reason>").
func batchCounts(m metricstest.Families) map[string]float64 {
	out := m.SumBy("scheduler_batch_attempts_total", "result")
	for reason, v := range m.SumBy("scheduler_batch_cache_flushed_total", "reason") {
		out["flush "+reason] = v
	}
	return out
}
