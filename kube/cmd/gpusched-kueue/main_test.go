package main

import (
	"strings"
	"testing"
	"time"

	"github.com/gpusched/gpusched/kube/kueue"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
)

// The flags' defaults (the policy fair between ClusterQueues, the wait
// rule on at the break-even, an hour assumed, nvidia.com/gpu) and every
// refused value, with the flag named in the message.
func TestParse(t *testing.T) {
	o, err := parse([]string{"--leader-elect=false"})
	require.NoError(t, err)
	assert.Equal(t, "quota-water-filling", o.policy, "per ClusterQueue, not per workload")
	assert.Equal(t, []corev1.ResourceName{"nvidia.com/gpu"}, o.resources)
	assert.Equal(t, 1.0, o.patience)
	assert.Equal(t, time.Hour, o.jobDuration)
	o, err = parse([]string{"--leader-elect=false", "--patience", "0", "--job-duration", "20m"})
	require.NoError(t, err)
	assert.Zero(t, o.patience)
	assert.Equal(t, 20*time.Minute, o.jobDuration)
	o, err = parse([]string{"--leader-elect=false", "--policy", "max-min-fairness", "--gpu-resources", " nvidia.com/gpu, nvidia.com/mig-1g.5gb,nvidia.com/gpu"})
	require.NoError(t, err)
	assert.Equal(t, "max-min-fairness", o.policy, "per-job max-min stays available")
	assert.Equal(t, []corev1.ResourceName{"nvidia.com/gpu", "nvidia.com/mig-1g.5gb"}, o.resources)
	assert.False(t, o.learning.Learn, "no learning unless asked")
	o, err = parse([]string{"--leader-elect=false", "--learn"})
	require.NoError(t, err)
	assert.True(t, o.learning.Learn)
	assert.False(t, o.learning.Serving(), "no channel unless asked")
	for _, flagName := range []string{"--metrics-bind-address", "--metrics-address"} {
		o, err = parse([]string{"--leader-elect=false", flagName + "=:9090"})
		require.NoError(t, err)
		assert.Equal(t, ":9090", o.MetricsAddr, "%s (the admission controller's name, and the former one)", flagName)
	}
	t.Setenv("POD_NAMESPACE", "gpusched-system")
	o, err = parse([]string{"--leader-elect=false", "--learn"})
	require.NoError(t, err)
	assert.Equal(t, "gpusched-system", o.stateNamespace, "what is learned is kept in its own namespace")
	o, err = parse([]string{"--leader-elect=false", "--learn", "--state-namespace="})
	require.NoError(t, err)
	assert.Empty(t, o.stateNamespace, "--state-namespace= keeps nothing")
	t.Setenv("POD_NAMESPACE", "")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--patience", "-1"}, "--patience"},
		{[]string{"--patience", "NaN"}, "--patience"},
		{[]string{"--patience", "101"}, "--patience"},
		{[]string{"--job-duration", "0s"}, "--job-duration"},
		{[]string{"--job-duration", "9000h"}, "--job-duration"},
		{[]string{"--max-ratio", "0.5"}, "--max-ratio"},
		{[]string{"--min-interval", "0s"}, "--min-interval"},
		{[]string{"--policy", "best"}, "--policy"},
		{[]string{"--gpu-resources", ""}, "--gpu-resources"},
		{[]string{"--gpu-resources", "nvidia.com/gpu,bad name"}, "--gpu-resources"},
		{[]string{"extra"}, "unexpected arguments"},
		{[]string{"--leader-elect=true"}, "--lease-namespace"},
		{[]string{"--progress-bind-address", ":8443", "--progress-tls-cert-file", "c", "--progress-tls-key-file", "k"}, "without --learn"},
		{[]string{"--learn", "--progress-bind-address", ":8443"}, "--progress-tls-cert-file"},
	} {
		_, err := parse(append([]string{"--leader-elect=false"}, c.args...))
		if assert.Error(t, err, "%q", c.args) {
			assert.Contains(t, err.Error(), c.want, "%q", c.args)
		}
	}
}

// FuzzParseResources: --gpu-resources gives 1 to kueue.MaxResources
// distinct qualified names, or an error naming the flag; never a panic.
func FuzzParseResources(f *testing.F) {
	f.Add("nvidia.com/gpu")
	f.Add("nvidia.com/gpu, nvidia.com/mig-1g.5gb,,")
	f.Add("a/b/c,")
	f.Fuzz(func(t *testing.T, v string) {
		out, err := parseResources(v)
		if err != nil {
			if !strings.Contains(err.Error(), "--gpu-resources") {
				t.Fatalf("error without the flag: %v", err)
			}
			return
		}
		if len(out) == 0 || len(out) > kueue.MaxResources {
			t.Fatalf("%d names from %q", len(out), v)
		}
		seen := map[corev1.ResourceName]bool{}
		for _, n := range out {
			if seen[n] || len(validation.IsQualifiedName(string(n))) > 0 {
				t.Fatalf("%q from %q", n, v)
			}
			seen[n] = true
		}
	})
}
