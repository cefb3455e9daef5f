package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpusched/gpusched/kube/admission"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

func TestParse(t *testing.T) {
	o, err := parse([]string{"--policy", "hierarchical", "--round", "2m", "--no-preemption", "--state-namespace", "gpusched-system"})
	require.NoError(t, err)
	assert.Equal(t, "gpusched-tenancy", o.tenancyConfigMap)
	assert.Equal(t, "hierarchical", o.policy)
	assert.Equal(t, 2*time.Minute, o.round)
	assert.True(t, o.noPreemption)
	assert.True(t, o.leaderElect)
	// The default is fair per tenant (issue #40): splitting work into
	// more jobs wins a tenant nothing (admission.TestSplitWinsNothing).
	o, err = parse([]string{"--state-namespace", "gpusched-system"})
	require.NoError(t, err)
	assert.Equal(t, "quota-water-filling", o.policy)
	assert.Equal(t, admission.DefaultPolicy, o.policy)
	t.Setenv("POD_NAMESPACE", "")
	for _, bad := range [][]string{{"--round", "0s"}, {"--grace", "-1s"}, {"extra"}, {"--nope"}, {"--policy", "best"}, {},
		{"--state-namespace", "x", "--tenancy-configmap", ""}, {"--tenant-label", "x"}, {"--default-throughput", "2"}} {
		_, err := parse(bad)
		assert.Error(t, err, "%q", bad)
	}
	sel, err := selector("pool=gpu, zone=a")
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"pool": "gpu", "zone": "a"}, sel)
	_, err = selector("pool")
	assert.Error(t, err)
}

// The admin's check of a tenancy document: the shipped example passes.
func TestCheckTenancy(t *testing.T) {
	b, err := os.ReadFile("../../deploy/tenancy.yaml")
	require.NoError(t, err)
	var cm corev1.ConfigMap
	require.NoError(t, yaml.Unmarshal(b, &cm))
	f := filepath.Join(t.TempDir(), "t.yaml")
	require.NoError(t, os.WriteFile(f, []byte(cm.Data["tenancy.yaml"]), 0o600))
	var out strings.Builder
	require.NoError(t, checkTenancy(f, &out))
	assert.Contains(t, out.String(), "tenant vision: weight 2, at most 256 jobs, namespaces vision,vision-dev, queues vision-batch,vision-urgent, guaranteed 0.25 of the throughput, limit 16 a100")
	require.NoError(t, os.WriteFile(f, []byte("tenants: [{name: a}]"), 0o600))
	require.Error(t, checkTenancy(f, &out))
	o, err := parse([]string{"--check-tenancy", f})
	require.NoError(t, err)
	assert.Equal(t, f, o.checkTenancy)
}
