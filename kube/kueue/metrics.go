package kueue

import (
	"k8s.io/component-base/metrics"
)

// Metrics are the controller's Prometheus metrics, in Kubernetes' metrics
// framework (k8s.io/component-base/metrics), subsystem kueue:
//
//	gpusched_kueue_round_duration_seconds                  histogram
//	gpusched_kueue_workloads_pending{cluster_queue,gpu_type} gauge: pending GPU
//	    workloads by the type they start on or wait for ("none": outside
//	    the round, or no flavor can hold them)
//	gpusched_kueue_workloads_steered_total{cluster_queue,gpu_type} counter:
//	    node selectors written
//	gpusched_kueue_api_writes_total{kind,result}           counter: writes of
//	    steering, kind workload (node selector) or gate (gate removed),
//	    result ok or error
//	gpusched_kueue_workloads_unreadable                    gauge
//
// A nil *Metrics records nothing. Its methods are safe for concurrent use
// (the framework's metrics are).
type Metrics struct {
	RoundDuration *metrics.Histogram
	Pending       *metrics.GaugeVec
	Steered       *metrics.CounterVec
	Writes        *metrics.CounterVec
	Unreadable    *metrics.Gauge
}

// NewMetrics returns the metrics, not yet registered.
func NewMetrics() *Metrics {
	const ns, sub = "gpusched", "kueue"
	return &Metrics{
		RoundDuration: metrics.NewHistogram(&metrics.HistogramOpts{Namespace: ns, Subsystem: sub, Name: "round_duration_seconds",
			Help: "Wall time of a steering round: reading the informers' stores, the policy, the writes.",
			// 1 ms to 17 min: a round's patches over 15,000 Workloads took
			// minutes on 2 cores (docs/kueue.md); a top bucket of 32.8 s
			// read every such round as 32.8 s.
			Buckets: metrics.ExponentialBuckets(0.001, 2, 21), StabilityLevel: metrics.ALPHA}),
		Pending: metrics.NewGaugeVec(&metrics.GaugeOpts{Namespace: ns, Subsystem: sub, Name: "workloads_pending",
			Help: "Pending GPU workloads of the last round, by ClusterQueue and the GPU type they start on or wait for.", StabilityLevel: metrics.ALPHA},
			[]string{"cluster_queue", "gpu_type"}),
		Steered: metrics.NewCounterVec(&metrics.CounterOpts{Namespace: ns, Subsystem: sub, Name: "workloads_steered_total",
			Help: "Node selectors written on pending Workloads, by ClusterQueue and GPU type.", StabilityLevel: metrics.ALPHA},
			[]string{"cluster_queue", "gpu_type"}),
		Writes: metrics.NewCounterVec(&metrics.CounterOpts{Namespace: ns, Subsystem: sub, Name: "api_writes_total",
			Help: "API writes of steering: kind workload (a node selector) or gate (an admission gate removed), by result.", StabilityLevel: metrics.ALPHA},
			[]string{"kind", "result"}),
		Unreadable: metrics.NewGauge(&metrics.GaugeOpts{Namespace: ns, Subsystem: sub, Name: "workloads_unreadable",
			Help: "Pending GPU workloads of the last round the controller could not read (left to Kueue).", StabilityLevel: metrics.ALPHA}),
	}
}

// Names returns the full names of the metrics (a histogram's series add
// _bucket, _sum and _count).
func (m *Metrics) Names() []string {
	return []string{"gpusched_kueue_round_duration_seconds", "gpusched_kueue_workloads_pending",
		"gpusched_kueue_workloads_steered_total", "gpusched_kueue_api_writes_total", "gpusched_kueue_workloads_unreadable"}
}

// Register registers the metrics with r.
func (m *Metrics) Register(r metrics.KubeRegistry) error {
	for _, c := range []metrics.Registerable{m.RoundDuration, m.Pending, m.Steered, m.Writes, m.Unreadable} {
		if err := r.Register(c); err != nil {
			return err
		}
	}
	return nil
}

func (m *Metrics) observe(res *RoundResult, pending map[[2]string]float64) {
	if m == nil {
		return
	}
	m.RoundDuration.Observe(res.Took.Seconds())
	m.Pending.Reset()
	for k, v := range pending {
		m.Pending.WithLabelValues(k[0], k[1]).Set(v)
	}
	m.Unreadable.Set(float64(len(res.Unreadable)))
}

func (m *Metrics) write(kind string, err error) {
	if m == nil {
		return
	}
	result := "ok"
	if err != nil {
		result = "error"
	}
	m.Writes.WithLabelValues(kind, result).Inc()
}

func (m *Metrics) steered(queue, typ string) {
	if m == nil {
		return
	}
	m.Steered.WithLabelValues(queue, typ).Inc()
}
