package gpusched

import (
	"context"
	"testing"
	"time"

	"github.com/gpusched/gpusched/kube/internal/metricstest"
	"github.com/gpusched/gpusched/kube/model"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/component-base/metrics/legacyregistry"
)

// sample reads one sample of legacyregistry: the metric with exactly
// these labels (a histogram's count); 0 if there is none.
func sample(t *testing.T, name string, labels map[string]string) float64 {
	t.Helper()
	fams, err := metricstest.Gather(legacyregistry.DefaultGatherer)
	require.NoError(t, err)
	v, _ := fams.Value(name, labels)
	return v
}

// The plugin's metrics reach legacyregistry (which kube-scheduler serves
// on /metrics) and count what happened: a pod group of three 8-GPU pods
// on four 8-GPU nodes is one PreFilter, PreScore, Reserve and Permit per
// pod, one time per pod (the first cycle is timed, the other two not),
// two waits and one admission of the group, and leaves 24 of the 32
// GPUs used; a forged device annotation is a ledger conflict.
func TestPluginMetrics(t *testing.T) {
	nodes, members, objs := gangOfThree()
	point := func(p string) float64 {
		return sample(t, "gpusched_plugin_extension_point_duration_seconds", map[string]string{"extension_point": p})
	}
	before := map[string]float64{}
	for _, p := range []string{pointPreFilter, pointPreScore, pointReserve, pointPermit, pointBind} {
		before[p] = point(p)
	}
	waits := sample(t, "gpusched_plugin_pod_group_permits_total", map[string]string{"result": "wait"})
	allows := sample(t, "gpusched_plugin_pod_group_permits_total", map[string]string{"result": "allow"})
	groupWaits := sample(t, "gpusched_plugin_pod_group_wait_duration_seconds", nil)
	pods := sample(t, "gpusched_plugin_pod_duration_seconds", nil)

	e := newEnv(t, &Args{PermitTimeoutSeconds: 30, BackoffSeconds: -1}, objs...)
	e.pl.cycles.Store(metricsSampleEvery - 1) // the first cycle is timed, the next two not
	for _, p := range members {
		_, st, _ := e.schedule(t, p, nodes...)
		require.True(t, st.IsSuccess() || st.IsWait(), st.Message())
	}
	for _, p := range members[:2] {
		require.True(t, e.fw.WaitOnPermit(context.Background(), p).IsSuccess())
	}
	for _, p := range []string{pointPreFilter, pointPreScore, pointReserve, pointPermit} {
		assert.Equal(t, 3.0, point(p)-before[p], p)
	}
	assert.Equal(t, 2.0, sample(t, "gpusched_plugin_pod_group_permits_total", map[string]string{"result": "wait"})-waits)
	assert.Equal(t, 1.0, sample(t, "gpusched_plugin_pod_group_permits_total", map[string]string{"result": "allow"})-allows)
	assert.Equal(t, 1.0, sample(t, "gpusched_plugin_pod_group_wait_duration_seconds", nil)-groupWaits)
	assert.Equal(t, 1.0, sample(t, "gpusched_plugin_pod_duration_seconds", nil)-pods, "the time per pod of timed cycles only")
	assert.Equal(t, 24.0, sample(t, "gpusched_plugin_gpus", map[string]string{"gpu_type": "v100", "state": "used"}))
	assert.Equal(t, 8.0, sample(t, "gpusched_plugin_gpus", map[string]string{"gpu_type": "v100", "state": "free"}))
	assert.Equal(t, 0.0, sample(t, "gpusched_plugin_gpus", map[string]string{"gpu_type": "v100", "state": "unhealthy"}))

	// A bound pod whose device annotation does not verify.
	conflicts := sample(t, "gpusched_plugin_ledger_conflicts_total", map[string]string{"reason": "InvalidGPUAnnotation"})
	forged := gpuPod("forged", 1, onNode("n3", ""))
	forged.Annotations[model.AnnotationGPUs] = "0"
	e.pl.onPod(forged)
	assert.Equal(t, 1.0, sample(t, "gpusched_plugin_ledger_conflicts_total", map[string]string{"reason": "InvalidGPUAnnotation"})-conflicts)
}

// MetricNames names every metric the plugin registers.
func TestMetricNames(t *testing.T) {
	registerMetrics()
	// Families with samples appear; make one of each.
	observe(pointBind, time.Now())
	podDuration.Observe(0)
	ledgerConflicts.WithLabelValues("test").Add(0)
	groupPermits.WithLabelValues("allow").Add(0)
	groupWait.Observe(0)
	fams, err := metricstest.Gather(legacyregistry.DefaultGatherer)
	require.NoError(t, err)
	for _, n := range MetricNames() {
		if n == "gpusched_plugin_gpus" {
			continue // only while a plugin lives
		}
		assert.Contains(t, fams, n)
	}
}
