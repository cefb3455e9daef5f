package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/gpusched/gpusched/kube/internal/kubetest"
)

// The control plane is shared by the tests of this package (started by
// the first that needs it, stopped at the end); each test works in its own
// namespace and removes the nodes it made.
var (
	cpOnce   sync.Once
	cp       *kubetest.ControlPlane
	cpErr    error
	cpDir    string
	schedBin string
)

func TestMain(m *testing.M) {
	code := m.Run()
	stopKueueEnv(code != 0)
	kwokProc.Stop(10 * time.Second)
	if cp != nil && scaleCount > 0 {
		deleteScaleNodes(cp.Client)
	}
	if cp != nil {
		cp.Stop()
	}
	if cpDir != "" && code == 0 && os.Getenv("GPUSCHED_E2E_KEEP") == "" {
		_ = os.RemoveAll(cpDir)
	} else if cpDir != "" {
		fmt.Fprintf(os.Stderr, "e2e: control plane logs kept in %s\n", cpDir)
	}
	os.Exit(code)
}

// controlPlane returns the shared control plane and the scheduler binary,
// starting and building them the first time; it skips the test when the
// binaries are missing and cannot be built.
func controlPlane(t *testing.T) (*kubetest.ControlPlane, string) {
	t.Helper()
	bins := kubetest.RequireBinaries(t)
	cpOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
		defer cancel()
		cpDir, cpErr = os.MkdirTemp("", "gpusched-e2e-")
		if cpErr != nil {
			return
		}
		if schedBin, cpErr = kubetest.BuildScheduler(ctx, cpDir); cpErr != nil {
			return
		}
		cp, cpErr = kubetest.Start(ctx, bins, cpDir)
	})
	if cpErr != nil {
		t.Fatalf("control plane: %v", cpErr)
	}
	return cp, schedBin
}

func mkdir(d string) error { return os.MkdirAll(d, 0o755) }

// testDir returns a folder for the test's files (scheduler configs and
// logs) beside the control plane's, kept when a test fails.
func testDir(t *testing.T) string {
	t.Helper()
	d := filepath.Join(cpDir, t.Name())
	if err := os.MkdirAll(d, 0o755); err != nil {
		t.Fatal(err)
	}
	return d
}
