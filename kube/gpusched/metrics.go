package gpusched

import (
	"sync"
	"time"

	"github.com/gpusched/gpusched/topology"
	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
)

// MetricsSubsystem is the subsystem of the plugin's metrics:
// gpusched_plugin_<name>_<unit>. They are registered in component-base's
// legacyregistry, so that kube-scheduler serves them on its own /metrics
// beside its scheduler_* metrics.
const MetricsSubsystem = "plugin"

// Extension points, as the label extension_point names them.
const (
	pointPreFilter = "PreFilter"
	pointFilter    = "Filter"
	pointPreScore  = "PreScore"
	pointScore     = "Score"
	pointReserve   = "Reserve"
	pointPermit    = "Permit"
	pointPreBind   = "PreBind"
	pointBind      = "Bind"
)

// metricsSampleEvery: Filter and Score run once per node and pod; their
// latencies are observed in one scheduling cycle of this many (as
// kube-scheduler samples its plugin_execution_duration_seconds), the
// other extension points in every cycle.
const metricsSampleEvery = 10

var (
	extensionPointDuration = metrics.NewHistogramVec(&metrics.HistogramOpts{
		Namespace: "gpusched", Subsystem: MetricsSubsystem, Name: "extension_point_duration_seconds",
		Help:           "Latency of one call of the plugin at an extension point (Filter and Score: in one scheduling cycle of ten; Bind: the Binding request included; Permit: without the wait for the pod group).",
		Buckets:        metrics.ExponentialBuckets(1e-6, 2, 25), // 1 us to 17 s: a Bind waits on a loaded API server
		StabilityLevel: metrics.ALPHA,
	}, []string{"extension_point"})
	podDuration = metrics.NewHistogram(&metrics.HistogramOpts{
		Namespace: "gpusched", Subsystem: MetricsSubsystem, Name: "pod_duration_seconds",
		Help:           "The plugin's time for one pod with GPUs: the sum of its calls from PreFilter to Permit over the nodes they ran on, in the cycle that placed the pod; observed in one scheduling cycle of ten, those whose Filter and Score calls are timed.",
		Buckets:        metrics.ExponentialBuckets(1e-5, 2, 20),
		StabilityLevel: metrics.ALPHA,
	})
	ledgerConflicts = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace: "gpusched", Subsystem: MetricsSubsystem, Name: "ledger_conflicts_total",
		Help:           "Bad input and conflicts the device ledger found and resolved, by reason: GPURecordChanged, InvalidGPUAnnotation, GPUConflict (stand-ins: bound pods whose devices the ledger could not believe), InvalidGPUNode (a node whose GPUs it does not use), ReserveRace (a booking lost to a concurrent change).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"reason"})
	draFirstFit = metrics.NewCounter(&metrics.CounterOpts{
		Namespace: "gpusched", Subsystem: MetricsSubsystem, Name: "dra_first_fit_total",
		Help:           "DRA claims allocated on upstream's first fit because their selectors or constraints ruled out gpusched's GPU choice.",
		StabilityLevel: metrics.ALPHA,
	})
	groupPermits = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace: "gpusched", Subsystem: MetricsSubsystem, Name: "pod_group_permits_total",
		Help:           "Permit decisions on pod group members, by result: allow (the group is complete, or bound already), wait (for the other members), reject (the group failed or backs off).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"result"})
	groupWait = metrics.NewHistogram(&metrics.HistogramOpts{
		Namespace: "gpusched", Subsystem: MetricsSubsystem, Name: "pod_group_wait_duration_seconds",
		Help:           "Time from a pod group's first member waiting at Permit to the group's admission.",
		Buckets:        metrics.ExponentialBuckets(1e-3, 2, 18),
		StabilityLevel: metrics.ALPHA,
	})
	gpusDesc = metrics.NewDesc("gpusched_plugin_gpus",
		"GPUs in the plugin's device ledger, by type and state: free, used (held by pods), unhealthy.",
		[]string{"gpu_type", "state"}, nil, metrics.ALPHA, "")
)

// MetricNames lists the full names of the plugin's metrics (a histogram's
// series add _bucket, _sum and _count).
func MetricNames() []string {
	return []string{
		"gpusched_plugin_extension_point_duration_seconds", "gpusched_plugin_pod_duration_seconds",
		"gpusched_plugin_ledger_conflicts_total", "gpusched_plugin_pod_group_permits_total",
		"gpusched_plugin_pod_group_wait_duration_seconds", "gpusched_plugin_gpus",
	}
}

var (
	registerOnce sync.Once
	// pointObservers are extensionPointDuration's children, resolved
	// once registered (a lookup by label per call would cost more than
	// some calls it times).
	pointObservers map[string]metrics.ObserverMetric
)

// registerMetrics registers the plugin's metrics in legacyregistry, once
// per process (a scheduler may run several profiles, each with a plugin).
func registerMetrics() {
	registerOnce.Do(func() {
		legacyregistry.MustRegister(extensionPointDuration, podDuration, ledgerConflicts, draFirstFit, groupPermits, groupWait)
		legacyregistry.CustomMustRegister(&gpuCollector{})
		// Known label values start at 0 (a query finds a series before
		// the first event).
		for _, r := range []string{"InvalidGPUNode", "InvalidGPUAnnotation", "GPURecordChanged", "GPUConflict", "ReserveRace"} {
			ledgerConflicts.WithLabelValues(r)
		}
		for _, r := range []string{"allow", "wait", "reject"} {
			groupPermits.WithLabelValues(r)
		}
		pointObservers = map[string]metrics.ObserverMetric{}
		for _, p := range []string{pointPreFilter, pointFilter, pointPreScore, pointScore, pointReserve, pointPermit, pointPreBind, pointBind} {
			pointObservers[p] = extensionPointDuration.WithLabelValues(p)
		}
	})
}

// ledgers are the live plugins' ledgers, summed by the GPU collector.
var ledgers sync.Map // *Ledger -> struct{}

// gpuCollector reports the GPUs of the live plugins' ledgers at each
// scrape.
type gpuCollector struct {
	metrics.BaseStableCollector
}

func (c *gpuCollector) DescribeWithStability(ch chan<- *metrics.Desc) { ch <- gpusDesc }

func (c *gpuCollector) CollectWithStability(ch chan<- metrics.Metric) {
	sum := map[topology.GPUType]GPUCounts{}
	ledgers.Range(func(k, _ any) bool {
		for t, n := range k.(*Ledger).Counts() {
			s := sum[t]
			s.Total, s.Healthy, s.Free = s.Total+n.Total, s.Healthy+n.Healthy, s.Free+n.Free
			sum[t] = s
		}
		return true
	})
	for t, n := range sum {
		ch <- metrics.NewLazyConstMetric(gpusDesc, metrics.GaugeValue, float64(n.Free), string(t), "free")
		ch <- metrics.NewLazyConstMetric(gpusDesc, metrics.GaugeValue, float64(n.Healthy-n.Free), string(t), "used")
		ch <- metrics.NewLazyConstMetric(gpusDesc, metrics.GaugeValue, float64(n.Total-n.Healthy), string(t), "unhealthy")
	}
}

// observe records one call's latency at an extension point.
func observe(point string, start time.Time) {
	if o := pointObservers[point]; o != nil {
		o.Observe(time.Since(start).Seconds())
	}
}
