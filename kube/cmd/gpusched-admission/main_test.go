package main

import (
	"context"
	"github.com/gpusched/gpusched/kube/progress"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpusched/gpusched/kube/admission"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"sigs.k8s.io/yaml"
)

func TestParse(t *testing.T) {
	o, err := parse([]string{"--policy", "hierarchical", "--round", "2m", "--no-preemption", "--state-namespace", "gpusched-system"})
	require.NoError(t, err)
	assert.Equal(t, "gpusched-tenancy", o.tenancyConfigMap)
	assert.Equal(t, "hierarchical", o.policy)
	assert.Equal(t, 2*time.Minute, o.round)
	assert.True(t, o.noPreemption)
	assert.True(t, o.LeaderElect)
	// The default is fair per tenant (issue #40): splitting work into
	// more jobs wins a tenant nothing (admission.TestSplitWinsNothing).
	o, err = parse([]string{"--state-namespace", "gpusched-system"})
	require.NoError(t, err)
	assert.Equal(t, "quota-water-filling", o.policy)
	assert.Equal(t, admission.DefaultPolicy, o.policy)
	t.Setenv("POD_NAMESPACE", "")
	for _, bad := range [][]string{{"--round", "0s"}, {"--grace", "-1s"}, {"extra"}, {"--nope"}, {"--policy", "best"}, {},
		{"--state-namespace", "x", "--tenancy-configmap", ""}, {"--tenant-label", "x"}, {"--default-throughput", "2"},
		{"--state-namespace", "x", "--max-deletion-grace", "0s"}, {"--state-namespace", "x", "--max-deletion-grace", "2h"},
		{"--state-namespace", "x", "--copy-key-secret", "a", "--copy-key-file", "b"}, {"--state-namespace", "x", "--tenant-budget", "0"}} {
		_, err := parse(bad)
		assert.Error(t, err, "%q", bad)
	}
	assert.Equal(t, removalOptions{maxDeletionGrace: 30 * time.Second, tenantBudget: admission.DefaultTenantBudget}, o.removal)
	o, err = parse([]string{"--state-namespace", "x", "--max-deletion-grace", "1m", "--copy-key-secret", "key", "--tenant-budget", "3"})
	require.NoError(t, err)
	assert.Equal(t, removalOptions{maxDeletionGrace: time.Minute, copyKeySecret: "key", tenantBudget: 3}, o.removal)
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

// The copy key comes from the file, else the Secret (read, never
// created), else none.
func TestCopyKeyFlags(t *testing.T) {
	ctx := context.Background()
	key := []byte("0123456789abcdef0123456789abcdef")
	cs := fake.NewClientset(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "gpusched-system", Name: "gpusched-admission-copy-key"},
		Data: map[string][]byte{admission.CopyKeySecretKey: key}})
	log := slog.New(slog.DiscardHandler)
	got, err := (&removalOptions{copyKeySecret: "gpusched-admission-copy-key"}).copyKey(ctx, cs, "gpusched-system", log)
	require.NoError(t, err)
	assert.Equal(t, key, got)
	_, err = (&removalOptions{copyKeySecret: "missing"}).copyKey(ctx, cs, "gpusched-system", log)
	require.Error(t, err, "a Secret named but missing stops the start")
	f := filepath.Join(t.TempDir(), "key")
	require.NoError(t, os.WriteFile(f, key, 0o600))
	got, err = (&removalOptions{copyKeyFile: f}).copyKey(ctx, cs, "gpusched-system", log)
	require.NoError(t, err)
	assert.Equal(t, key, got)
	got, err = (&removalOptions{}).copyKey(ctx, cs, "gpusched-system", log)
	require.NoError(t, err)
	assert.Nil(t, got)
}

// The progress channel's flags: served only with --learn and a
// certificate; --learn alone learns without a channel (reports through
// another one, or none).
func TestLearnFlags(t *testing.T) {
	o, err := parse([]string{"--state-namespace", "x", "--learn"})
	require.NoError(t, err)
	assert.True(t, o.learning.Learn)
	assert.Equal(t, "0", o.learning.Addr, "no channel unless asked")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--progress-bind-address", ":8443"}, "without --learn"},
		{[]string{"--learn", "--progress-bind-address", ":8443"}, "--progress-tls-cert-file"},
		{[]string{"--learn", "--progress-bind-address", ":8443", "--progress-tls-cert-file", "c", "--progress-tls-key-file", "k", "--progress-audience", ""}, "--progress-audience"},
	} {
		_, err := parse(append([]string{"--state-namespace", "x"}, c.args...))
		require.Error(t, err, "%q", c.args)
		assert.Contains(t, err.Error(), c.want)
	}
	o, err = parse([]string{"--state-namespace", "x", "--learn", "--progress-bind-address", ":8443", "--progress-tls-cert-file", "c", "--progress-tls-key-file", "k"})
	require.NoError(t, err)
	assert.Equal(t, "gpusched-progress", o.learning.Audience)
}

// A certificate file that is not there is an error naming it, before
// anything listens.
func TestServeTLSMissingCert(t *testing.T) {
	_, err := progress.ServeTLS(context.Background(), "127.0.0.1:0", "/nonexistent/cert.pem", "/nonexistent/key.pem", http.NotFoundHandler(), nil)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "/nonexistent/cert.pem")
}

func TestHostProfiles(t *testing.T) {
	ps, err := hostProfiles("synergy")
	require.NoError(t, err)
	require.NotNil(t, ps.Lookup("res18"))
	ps, err = hostProfiles("")
	require.NoError(t, err)
	require.Nil(t, ps)
	for _, bad := range []string{"/dev/zero", t.TempDir(), "/no/such/file"} {
		_, err := hostProfiles(bad)
		require.ErrorContains(t, err, "--host-profiles", bad)
	}
	f := filepath.Join(t.TempDir(), "p.json")
	require.NoError(t, os.WriteFile(f, []byte(`{"proportional": {"cpus": 3, "mem_gb": 62.5}, "cpus": [3], "mem_gb": [62.5], "models": [{"name": "a", "iter_time_s": 1, "rate": [[2]]}]}`), 0o600))
	_, err = hostProfiles(f)
	require.ErrorContains(t, err, "want 1 (rates are relative to it)")
}
