package e2e

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/gpusched/gpusched/kube/internal/kubetest"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"
)

// schedulerConfig returns the profile of deploy/scheduler-config.yaml for
// a test: the control plane's kubeconfig, no leader election, a client fast
// enough not to be the bottleneck, and args merged into GPUSched's.
//
// The profile's record key Secret is made first if missing, as the admin
// makes it at install (deploy/rbac.yaml): the scheduler only reads it.
func schedulerConfig(t *testing.T, c *kubetest.ControlPlane, args map[string]any) map[string]any {
	t.Helper()
	if err := ensureRecordKey(context.Background(), c.Client); err != nil {
		t.Fatalf("the record key's Secret: %v", err)
	}
	b, err := os.ReadFile(filepath.Join("..", "deploy", "scheduler-config.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var cfg map[string]any
	if err := yaml.Unmarshal(b, &cfg); err != nil {
		t.Fatal(err)
	}
	cfg["leaderElection"] = map[string]any{"leaderElect": false}
	cfg["clientConnection"] = map[string]any{"kubeconfig": c.Kubeconfig, "qps": 1000, "burst": 1000}
	prof := cfg["profiles"].([]any)[0].(map[string]any)
	for _, pc := range prof["pluginConfig"].([]any) {
		pc := pc.(map[string]any)
		if pc["name"] == "GPUSched" {
			a := pc["args"].(map[string]any)
			for k, v := range args {
				a[k] = v
			}
		}
	}
	return cfg
}

// recordKeySecret is the shipped profile's record key Secret
// (deploy/scheduler-config.yaml).
const recordKeyNamespace, recordKeyName = "kube-system", "gpusched-scheduler-record-key"

// ensureRecordKey makes the record key's Secret with a random key, as
// gpusched.RecordKeyCommand does at install, unless it exists.
func ensureRecordKey(ctx context.Context, cs kubernetes.Interface) error {
	return ensureKeySecret(ctx, cs, recordKeyNamespace, recordKeyName)
}

// ensureKeySecret makes the Secret ns/name holding a random key under
// "key" (64 hex digits), as gpusched.RecordKeyCommand does at install,
// unless it exists: the scheduler's record key, the admission
// controller's copy key.
func ensureKeySecret(ctx context.Context, cs kubernetes.Interface, ns, name string) error {
	if err := kubetest.EnsureNamespace(ctx, cs, ns); err != nil {
		return err
	}
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	_, err := cs.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Data:       map[string][]byte{"key": []byte(hex.EncodeToString(b))},
	}, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	return err
}

// stockConfig is kube-scheduler's default profile with the same client.
func stockConfig(c *kubetest.ControlPlane) map[string]any {
	return map[string]any{
		"apiVersion":       "kubescheduler.config.k8s.io/v1",
		"kind":             "KubeSchedulerConfiguration",
		"leaderElection":   map[string]any{"leaderElect": false},
		"clientConnection": map[string]any{"kubeconfig": c.Kubeconfig, "qps": 1000, "burst": 1000},
	}
}

// startScheduler writes cfg and starts bin with it (and extra flags); the
// process is stopped when the test ends (if the test has not stopped it).
func startScheduler(t *testing.T, dir, name, bin string, cfg map[string]any, extra ...string) *kubetest.Process {
	t.Helper()
	b, err := yaml.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, name+"-config.yaml")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	args := append([]string{"--config", path, "--secure-port", "0", "--v", "2"}, extra...) // a flag given twice: the last wins
	p, err := kubetest.StartProcess(dir, name, bin, args...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		p.Stop(10 * time.Second)
		if t.Failed() {
			t.Logf("%s log tail:\n%s", name, p.LogTail(4000))
		}
	})
	return p
}

// waitFor polls cond every 100 ms until it holds, ctx ends (a failure,
// with what last) or the process dies.
func waitFor(ctx context.Context, t *testing.T, what string, p *kubetest.Process, cond func() (bool, string)) {
	t.Helper()
	last := ""
	for {
		ok, msg := cond()
		if ok {
			return
		}
		last = msg
		if p != nil {
			if done, err := p.Exited(); done {
				t.Fatalf("waiting for %s: %s exited (%v):\n%s", what, p.Name, err, p.LogTail(4000))
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("waiting for %s: %v (%s)", what, ctx.Err(), last)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func must(t *testing.T, err error, format string, args ...any) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", fmt.Sprintf(format, args...), err)
	}
}
