package admission

import (
	"maps"
	"slices"
	"sort"

	"github.com/gpusched/gpusched/scheduler"
	"github.com/gpusched/gpusched/topology"
	"k8s.io/component-base/metrics"
)

// MetricsSubsystem is the subsystem of the controller's metrics:
// gpusched_admission_<name>_<unit>.
const MetricsSubsystem = "admission"

// Label values of the workload states (gpusched_admission_workloads).
const (
	StatePending  = "pending"
	StateAdmitted = "admitted"
	StateRunning  = "running"
)

// Preemption reasons (gpusched_admission_preemptions_total).
const (
	PreemptLeaseEnded = "lease_ended"
	PreemptBypass     = "bypass"
)

// Metrics are the controller's Prometheus metrics, in the Kubernetes
// convention (k8s.io/component-base/metrics, stability ALPHA). Their
// labels take only values the admin or the cluster bounds: tenant names
// (the admin's tenancy), GPU types (the cluster's), reasons and states
// (fixed sets); never a name a tenant writes. NewMetrics makes a set;
// Register adds it to a registry, which serves it (a set not registered
// records nothing and costs nothing). Safe for concurrent use.
type Metrics struct {
	roundDuration   *metrics.Histogram
	solveDuration   *metrics.Histogram
	rounds          *metrics.CounterVec
	lastRound       *metrics.Gauge
	lpSize          *metrics.GaugeVec
	apiRequests     *metrics.Histogram
	apiRequestsLast *metrics.Gauge
	workloads       *metrics.GaugeVec
	waiting         *metrics.GaugeVec
	gpus            *metrics.GaugeVec
	share           *metrics.GaugeVec
	fairShare       *metrics.GaugeVec
	gap             *metrics.GaugeVec
	preemptions     *metrics.CounterVec
	admissions      *metrics.CounterVec
	conflicts       *metrics.Counter
	events          *metrics.CounterVec
	conditions      *metrics.CounterVec
	names           []string
}

// NewMetrics returns a new set of the controller's metrics.
func NewMetrics() *Metrics {
	m := &Metrics{}
	const ns, sub = "gpusched", MetricsSubsystem
	name := func(n string) string {
		full := ns + "_" + sub + "_" + n
		m.names = append(m.names, full)
		return n
	}
	gauge := func(n, help string, labels ...string) *metrics.GaugeVec {
		return metrics.NewGaugeVec(&metrics.GaugeOpts{Namespace: ns, Subsystem: sub, Name: name(n), Help: help, StabilityLevel: metrics.ALPHA}, labels)
	}
	counter := func(n, help string, labels ...string) *metrics.CounterVec {
		return metrics.NewCounterVec(&metrics.CounterOpts{Namespace: ns, Subsystem: sub, Name: name(n), Help: help, StabilityLevel: metrics.ALPHA}, labels)
	}
	hist := func(n, help string, buckets []float64) *metrics.Histogram {
		return metrics.NewHistogram(&metrics.HistogramOpts{Namespace: ns, Subsystem: sub, Name: name(n), Help: help, Buckets: buckets, StabilityLevel: metrics.ALPHA})
	}
	single := func(n, help string) *metrics.Gauge {
		return metrics.NewGauge(&metrics.GaugeOpts{Namespace: ns, Subsystem: sub, Name: name(n), Help: help, StabilityLevel: metrics.ALPHA})
	}
	// 5 ms to 11 min: with 10,000 workloads on 5,000 nodes a round's
	// writes took 2 to 4 minutes on 2 cores (docs/operations.md), above
	// the 164 s the highest bucket was.
	m.roundDuration = hist("round_duration_seconds", "Wall time of a round: reading the caches, the policy's solve, admissions, preemptions, saving the state.",
		metrics.ExponentialBuckets(0.005, 2, 18))
	m.solveDuration = hist("solve_duration_seconds", "Wall time of the allocation policy's solves in a round that re-solved (scheduler.RoundStats.SolveTime).",
		metrics.ExponentialBuckets(0.001, 2, 18))
	m.rounds = counter("rounds_total", "Rounds run, by result (ok, error).", "result")
	m.lastRound = single("last_round_timestamp_seconds", "Unix time at which the last successful round ended (alert when it stops moving).")
	m.lpSize = gauge("lp_size", "Size of the largest linear program of the last solve, by dimension (rows, columns, nonzeros).", "dimension")
	m.apiRequests = hist("round_api_requests", "API requests a round sent (writes and the state's save; reads come from the informers' caches), when Config.Requests counts them.",
		metrics.ExponentialBuckets(1, 2, 16))
	m.apiRequestsLast = single("last_round_api_requests", "API requests the last round sent.")
	m.workloads = gauge("workloads", "Workloads after the last round, by tenant, GPU type and state: pending (waiting; gpu_type \"none\"), admitted (gate off, pods not all bound yet), running (admitted and bound).", "tenant", "gpu_type", "state")
	m.waiting = gauge("waiting_workloads", "Pending workloads after the last round, by tenant and the reason they wait (the reason of their condition gpusched.io/Admitted).", "tenant", "reason")
	m.gpus = gauge("gpus", "GPUs by type after the last round: capacity (healthy GPUs of ready nodes) and admitted (held by admitted workloads).", "gpu_type", "state")
	m.share = gauge("tenant_share_ratio", "Each tenant's share of the cluster's GPUs after the last round: its admitted GPUs over the healthy GPUs.", "tenant")
	m.fairShare = gauge("tenant_fair_share_ratio", "Each tenant's fair share of the cluster's GPUs: weighted max-min (water filling) of the healthy GPUs over the tenants' demands (the GPUs of their workloads, but of those that cannot run: unrunnable, pod groups not complete), by the tenancy's weights.", "tenant")
	m.gap = gauge("fairness_gap_ratio", "tenant_share_ratio less tenant_fair_share_ratio: negative for a tenant below its fair share.", "tenant")
	m.preemptions = counter("preemptions_total", "Workloads preempted, by reason: lease_ended (the policy gave their GPUs to others), bypass (ran without admission).", "reason")
	m.admissions = counter("admissions_total", "Workloads admitted, by GPU type.", "gpu_type")
	m.conflicts = metrics.NewCounter(&metrics.CounterOpts{Namespace: ns, Subsystem: sub, Name: name("update_conflicts_total"),
		Help: "Writes to pods and Jobs refused for a stale resource version (retried on a fresh copy).", StabilityLevel: metrics.ALPHA})
	m.events = counter("events_total", "Events the controller recorded, by type and reason (before the event broadcaster's aggregation and rate limits).", "type", "reason")
	m.conditions = counter("condition_writes_total", "Writes of the pod condition gpusched.io/Admitted, by result (ok, error).", "result")
	return m
}

// Names lists the metrics' full names (a histogram's series add _bucket,
// _sum and _count).
func (m *Metrics) Names() []string { return slices.Clone(m.names) }

// Register adds the metrics to a registry (a metrics.KubeRegistry, or
// legacyregistry's).
func (m *Metrics) Register(reg interface {
	Register(metrics.Registerable) error
}) error {
	for _, r := range []metrics.Registerable{m.roundDuration, m.solveDuration, m.rounds, m.lastRound, m.lpSize, m.apiRequests,
		m.apiRequestsLast, m.workloads, m.waiting, m.gpus, m.share, m.fairShare, m.gap, m.preemptions, m.admissions,
		m.conflicts, m.events, m.conditions} {
		if err := reg.Register(r); err != nil {
			return err
		}
	}
	// The counters of known label values start at 0, so that a query of
	// them finds a series before the first event (Prometheus's advice).
	for _, r := range []string{"ok", "error"} {
		m.rounds.WithLabelValues(r)
		m.conditions.WithLabelValues(r)
	}
	for _, r := range []string{PreemptLeaseEnded, PreemptBypass} {
		m.preemptions.WithLabelValues(r)
	}
	return nil
}

// The recording methods take a nil *Metrics as "no metrics".

func (m *Metrics) preempted(reason string) {
	if m != nil {
		m.preemptions.WithLabelValues(reason).Inc()
	}
}

func (m *Metrics) admitted(t topology.GPUType) {
	if m != nil {
		m.admissions.WithLabelValues(string(t)).Inc()
	}
}

func (m *Metrics) conflict() {
	if m != nil {
		m.conflicts.Inc()
	}
}

func (m *Metrics) event(typ, reason string) {
	if m != nil {
		m.events.WithLabelValues(typ, reason).Inc()
	}
}

func (m *Metrics) conditionWrite(err error) {
	if m == nil {
		return
	}
	if err != nil {
		m.conditions.WithLabelValues("error").Inc()
	} else {
		m.conditions.WithLabelValues("ok").Inc()
	}
}

func (m *Metrics) roundFailed() {
	if m != nil {
		m.rounds.WithLabelValues("error").Inc()
	}
}

// roundView is what a round's metrics are computed from.
type roundView struct {
	seconds  float64 // wall time
	endUnix  float64
	stats    scheduler.RoundStats
	requests int64 // -1: not counted
	capacity map[topology.GPUType]int
	// per workload in the round: tenant, GPUs, admitted type, bound, why it waits
	items   []viewItem
	weights map[string]float64 // tenant weights (1 if absent)
}

type viewItem struct {
	tenant   string
	gpus     int
	admitted topology.GPUType
	running  bool
	reason   string
	// noDemand: its GPUs are no demand for the fair share (it cannot run,
	// or not yet: unrunnable, a pod group not complete).
	noDemand bool
}

// observe sets the metrics of a round.
func (m *Metrics) observe(v *roundView) {
	if m == nil {
		return
	}
	m.rounds.WithLabelValues("ok").Inc()
	m.roundDuration.Observe(v.seconds)
	m.lastRound.Set(v.endUnix)
	if v.stats.Solves > 0 {
		m.solveDuration.Observe(v.stats.SolveTime.Seconds())
	}
	if v.stats.LPSolves > 0 {
		m.lpSize.WithLabelValues("rows").Set(float64(v.stats.LPRows))
		m.lpSize.WithLabelValues("columns").Set(float64(v.stats.LPColumns))
		m.lpSize.WithLabelValues("nonzeros").Set(float64(v.stats.LPNonzeros))
	}
	if v.requests >= 0 {
		m.apiRequests.Observe(float64(v.requests))
		m.apiRequestsLast.Set(float64(v.requests))
	}
	type wkey struct{ tenant, typ, state string }
	counts := map[wkey]int{}
	waiting := map[[2]string]int{}
	demand := map[string]float64{}
	held := map[string]float64{}
	used := map[topology.GPUType]int{}
	for _, it := range v.items {
		if it.noDemand {
			demand[it.tenant] += 0 // a tenant with none has a fair share of 0
		} else {
			demand[it.tenant] += float64(it.gpus)
		}
		switch {
		case it.admitted == "":
			counts[wkey{it.tenant, "none", StatePending}]++
			waiting[[2]string{it.tenant, it.reason}]++
		case it.running:
			counts[wkey{it.tenant, string(it.admitted), StateRunning}]++
		default:
			counts[wkey{it.tenant, string(it.admitted), StateAdmitted}]++
		}
		if it.admitted != "" {
			held[it.tenant] += float64(it.gpus)
			used[it.admitted] += it.gpus
		}
	}
	m.workloads.Reset()
	for k, n := range counts {
		m.workloads.WithLabelValues(k.tenant, k.typ, k.state).Set(float64(n))
	}
	m.waiting.Reset()
	for k, n := range waiting {
		m.waiting.WithLabelValues(k[0], k[1]).Set(float64(n))
	}
	m.gpus.Reset()
	total := 0
	for t, n := range v.capacity {
		total += n
		m.gpus.WithLabelValues(string(t), "capacity").Set(float64(n))
		m.gpus.WithLabelValues(string(t), "admitted").Set(float64(used[t]))
	}
	fair := fairShares(float64(total), demand, v.weights)
	m.share.Reset()
	m.fairShare.Reset()
	m.gap.Reset()
	for tenant := range demand {
		share := 0.0
		if total > 0 {
			share = held[tenant] / float64(total)
		}
		m.share.WithLabelValues(tenant).Set(share)
		m.fairShare.WithLabelValues(tenant).Set(fair[tenant])
		m.gap.WithLabelValues(tenant).Set(share - fair[tenant])
	}
}

// fairShares is weighted max-min fairness by water filling: each tenant
// gets capacity in proportion to its weight, never more than its demand,
// what a satisfied tenant leaves going to the others; as fractions of the
// capacity. Weights not given (or not positive) count 1.
func fairShares(capacity float64, demand, weights map[string]float64) map[string]float64 {
	out := map[string]float64{}
	if capacity <= 0 {
		for t := range demand {
			out[t] = 0
		}
		return out
	}
	w := func(t string) float64 {
		if x := weights[t]; x > 0 {
			return x
		}
		return 1
	}
	// Tenants in order of demand per weight: the least hungry are
	// satisfied first.
	ts := slices.Collect(maps.Keys(demand))
	sort.Slice(ts, func(i, j int) bool {
		a, b := demand[ts[i]]/w(ts[i]), demand[ts[j]]/w(ts[j])
		if a != b {
			return a < b
		}
		return ts[i] < ts[j]
	})
	left := capacity
	wsum := 0.0
	for _, t := range ts {
		wsum += w(t)
	}
	for _, t := range ts {
		give := min(demand[t], left*w(t)/wsum)
		out[t] = give / capacity
		left -= give
		wsum -= w(t)
	}
	return out
}
