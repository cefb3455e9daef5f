package kubetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// EnvBin names a folder holding etcd, kube-apiserver and kube-scheduler,
// used instead of the module's .cache/bin.
const EnvBin = "GPUSCHED_KUBE_BIN"

// Binaries are the paths of the control plane's programs (a value, safe
// for concurrent use).
type Binaries struct {
	Etcd, APIServer, Scheduler string
}

// ModuleRoot returns the kube module's folder: the first parent of the
// working directory holding hack/e2e-binaries.sh.
func ModuleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "hack", "e2e-binaries.sh")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("kubetest: no parent folder holds hack/e2e-binaries.sh")
		}
		dir = parent
	}
}

// BinDir returns where the binaries are looked for.
func BinDir() (string, error) {
	if d := os.Getenv(EnvBin); d != "" {
		return d, nil
	}
	root, err := ModuleRoot()
	if err != nil {
		return "", err
	}
	return filepath.Join(root, ".cache", "bin"), nil
}

// FindBinaries returns the binaries if all three are there.
func FindBinaries() (Binaries, error) {
	dir, err := BinDir()
	if err != nil {
		return Binaries{}, err
	}
	b := Binaries{
		Etcd:      filepath.Join(dir, "etcd"),
		APIServer: filepath.Join(dir, "kube-apiserver"),
		Scheduler: filepath.Join(dir, "kube-scheduler"),
	}
	for _, p := range []string{b.Etcd, b.APIServer, b.Scheduler} {
		st, err := os.Stat(p)
		if err != nil {
			return b, fmt.Errorf("kubetest: %w", err)
		}
		if st.Mode()&0o111 == 0 {
			return b, fmt.Errorf("kubetest: %s is not executable", p)
		}
	}
	return b, nil
}

var (
	ensureOnce sync.Once
	ensured    Binaries
	ensureErr  error
)

// EnsureBinaries returns the binaries, building the missing ones with
// hack/e2e-binaries.sh first (about 20 minutes on 2 cores from a cold Go
// build cache) within ctx. It builds at most once per process.
func EnsureBinaries(ctx context.Context) (Binaries, error) {
	ensureOnce.Do(func() {
		if ensured, ensureErr = FindBinaries(); ensureErr == nil {
			return
		}
		if ensureErr = buildBinaries(ctx); ensureErr == nil {
			ensured, ensureErr = FindBinaries()
		}
	})
	return ensured, ensureErr
}

// buildBinaries runs hack/e2e-binaries.sh, which builds the binaries that
// are missing, within ctx.
func buildBinaries(ctx context.Context) error {
	root, err := ModuleRoot()
	if err != nil {
		return err
	}
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, filepath.Join(root, "hack", "e2e-binaries.sh"))
	cmd.Dir = root
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.WaitDelay = 10 * time.Second
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("kubetest: hack/e2e-binaries.sh: %w\n%s", err, tail(out.Bytes(), 2000))
	}
	return nil
}

// RequireBinaries returns the binaries, building them when missing; if they
// cannot be built it skips the test, saying why and how to build them.
func RequireBinaries(t testing.TB) Binaries {
	t.Helper()
	ctx := context.Background()
	if d, ok := deadline(t); ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, d.Add(-2*time.Minute))
		defer cancel()
	}
	b, err := EnsureBinaries(ctx)
	if err != nil {
		t.Skipf("end-to-end test skipped: the control plane binaries are missing and could not be built "+
			"(run kube/hack/e2e-binaries.sh, or set %s to a folder holding etcd, kube-apiserver and kube-scheduler): %v", EnvBin, err)
	}
	return b
}

func deadline(t testing.TB) (time.Time, bool) {
	if d, ok := t.(interface{ Deadline() (time.Time, bool) }); ok {
		return d.Deadline()
	}
	return time.Time{}, false
}

// BuildScheduler builds the kube module's scheduler binary into dir and
// returns its path (fast when the Go build cache is warm).
func BuildScheduler(ctx context.Context, dir string) (string, error) {
	root, err := ModuleRoot()
	if err != nil {
		return "", err
	}
	out := filepath.Join(dir, "gpusched-scheduler")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", out, "./cmd/gpusched-scheduler")
	cmd.Dir = root
	var log bytes.Buffer
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("kubetest: go build ./cmd/gpusched-scheduler: %w\n%s", err, tail(log.Bytes(), 4000))
	}
	return out, nil
}

func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}
