package e2e

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/gpusched/gpusched/kube/internal/kubetest"
	"github.com/gpusched/gpusched/kube/internal/metricstest"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// Shared by the tests that need them: kwok (one controller for the
// control plane: two would play the same nodes) and the admission
// binary, each started or built the first time.
var (
	kwokOnce sync.Once
	kwokProc *kubetest.Process
	kwokErr  error

	admBinOnce sync.Once
	admBin     string
	admBinErr  error
)

// startKwok returns the control plane's kwok, starting it the first time
// (TestMain stops it); it skips the test if kwok is missing and cannot be
// installed.
func startKwok(t *testing.T, c *kubetest.ControlPlane) *kubetest.Process {
	t.Helper()
	bin := kubetest.RequireKwok(t)
	kwokOnce.Do(func() {
		dir := filepath.Join(cpDir, "kwok")
		if kwokErr = mkdir(dir); kwokErr != nil {
			return
		}
		kwokProc, kwokErr = kubetest.StartKwok(dir, bin, c, kubetest.KwokOptions{PodParallelism: 8, NodeParallelism: 4})
	})
	if kwokErr != nil {
		t.Fatalf("kwok: %v", kwokErr)
	}
	if done, err := kwokProc.Exited(); done {
		t.Fatalf("kwok exited (%v):\n%s", err, kwokProc.LogTail(4000))
	}
	return kwokProc
}

// admissionBinary builds cmd/gpusched-admission once per run.
func admissionBinary(ctx context.Context, t *testing.T) string {
	t.Helper()
	admBinOnce.Do(func() {
		admBin = filepath.Join(cpDir, "gpusched-admission")
		build := exec.CommandContext(ctx, "go", "build", "-o", admBin, "./cmd/gpusched-admission")
		build.Dir = ".."
		if out, err := build.CombinedOutput(); err != nil {
			admBinErr = fmt.Errorf("go build ./cmd/gpusched-admission: %w\n%s", err, out)
		}
	})
	if admBinErr != nil {
		t.Fatal(admBinErr)
	}
	return admBin
}

// scrape reads a /metrics page (with a bearer token if not empty; a
// loopback server's self-signed certificate is accepted).
func scrape(ctx context.Context, url, token string) (metricstest.Families, error) {
	client := &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{TLSClientConfig: insecureTLS()}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return metricstest.Parse(resp.Body)
}

// EnvProfile names a folder for CPU profiles of the schedulers in the
// throughput and scale runs: each run's scheduler serves its secure port
// and the first 20 s of its work are profiled from /debug/pprof/profile
// (kube-scheduler's --profiling, on by default) into NAMESPACE.pprof.
const EnvProfile = "GPUSCHED_E2E_PPROF"

// cpuProfile fetches a CPU profile of seconds from base's /debug/pprof,
// retrying while the server starts, into out.
func cpuProfile(ctx context.Context, base, token, out string, seconds int) error {
	client := &http.Client{Timeout: time.Duration(seconds+30) * time.Second, Transport: &http.Transport{TLSClientConfig: insecureTLS()}}
	url := fmt.Sprintf("%s/debug/pprof/profile?seconds=%d", base, seconds)
	var last error
	for range 100 {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := client.Do(req)
		if err != nil {
			last = err
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(100 * time.Millisecond):
			}
			continue
		}
		b, err := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if err != nil {
			return err
		}
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("GET %s: %s: %.200s", url, resp.Status, b)
		}
		return os.WriteFile(out, b, 0o644)
	}
	return last
}

// servingScheduler starts a scheduler that serves its /metrics on a free
// loopback port, authenticating and authorizing callers through the API
// server (as in a cluster); it returns the process and the metrics URL.
func servingScheduler(t *testing.T, c *kubetest.ControlPlane, dir, name, bin string, cfg map[string]any) (*kubetest.Process, string) {
	t.Helper()
	ports, err := kubetest.FreePorts(1)
	must(t, err, "port")
	p := startScheduler(t, dir, name, bin, cfg, "--secure-port", fmt.Sprint(ports[0]), "--bind-address", "127.0.0.1",
		"--cert-dir", filepath.Join(dir, name+"-certs"),
		"--authentication-kubeconfig", c.Kubeconfig, "--authorization-kubeconfig", c.Kubeconfig)
	return p, fmt.Sprintf("https://127.0.0.1:%d/metrics", ports[0])
}

// deleteNodes deletes nodes when the test ends.
func deleteNodesAtEnd(t *testing.T, cs kubernetes.Interface, names []string) {
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		for _, n := range names {
			_ = cs.CoreV1().Nodes().Delete(ctx, n, metav1.DeleteOptions{})
		}
	})
}

// insecureTLS accepts a loopback test server's self-signed certificate.
func insecureTLS() *tls.Config {
	return &tls.Config{InsecureSkipVerify: true} //nolint:gosec // loopback test servers' self-signed certificates
}
