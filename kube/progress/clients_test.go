package progress_test

import (
	"context"
	"encoding/pem"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpusched/gpusched/kube/progress"
	"github.com/gpusched/gpusched/kube/progress/client"
)

// tlsEnv serves e's server over TLS and writes the pod's token and the
// server's CA to files, as the projected volume would.
func tlsEnv(t *testing.T, e *env) (srv *httptest.Server, tokFile, caFile string) {
	t.Helper()
	mux := http.NewServeMux()
	mux.Handle(progress.Path, e.srv)
	srv = httptest.NewTLSServer(mux)
	t.Cleanup(srv.Close)
	dir := t.TempDir()
	tokFile, caFile = filepath.Join(dir, "token"), filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(tokFile, []byte(e.tok), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	return srv, tokFile, caFile
}

// TestGoClient: the Go client against the server over TLS; the paths
// and names agree.
func TestGoClient(t *testing.T) {
	if progress.Path != client.Path {
		t.Fatalf("server path %s, client path %s", progress.Path, client.Path)
	}
	e := newEnv(t, progress.Config{})
	srv, tokFile, caFile := tlsEnv(t, e)
	c, err := client.New(client.Config{URL: srv.URL, TokenFile: tokFile, CAFile: caFile, Interval: time.Nanosecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := c.Report(ctx, 500); err != nil {
		t.Fatal(err)
	}
	err = c.Report(ctx, 400)
	var ce *client.Error
	if !errors.As(err, &ce) || ce.Status != http.StatusConflict || ce.Code != "not_monotone" {
		t.Fatalf("steps going back: %v", err)
	}
	if g := e.sink.all(); len(g) != 1 || g[0].steps != 500 || g[0].key != "job/a/train" {
		t.Errorf("sink got %v", g)
	}
}

// pythonScript plays a training loop's three lines and the ways a
// reporter must not fail.
const pythonScript = `
import logging, sys
sys.path.insert(0, sys.argv[1])
from gpusched_progress import Reporter

class Tensor:  # what torch gives: a 1-element tensor with item()
    def __init__(self, v): self.v = v
    def item(self): return self.v

r = Reporter()
assert r.enabled
assert r.report(1200) is True
assert r.report(1300) is False, "a report within the interval was sent"
r.wait(10)
assert r.sent == 1 and r.last_error is None, (r.sent, r.last_error)

r2 = Reporter(interval=0)
assert r2.report(float("nan")) is False
assert r2.report(-1) is False
assert r2.report("garbage") is False
assert r2.report(1100) is True  # goes back: 409, never raised
r2.wait(10)
assert "409" in str(r2.last_error), r2.last_error
assert r2.report(Tensor(1500.0)) is True
r2.wait(10)
assert r2.sent == 1 and r2.last_error is None, (r2.sent, r2.last_error)

off = Reporter(url="http://gpusched.example")  # not https: off, never raises
assert not off.enabled and off.report(5) is False
import os
url = os.environ.pop("GPUSCHED_PROGRESS_URL")
none = Reporter()  # no URL: off, one log line, never raises
assert not none.enabled and none.report(5) is False
os.environ["GPUSCHED_PROGRESS_URL"] = url
bad = Reporter(interval=0, token_file="/nonexistent/token")
assert bad.report(5) is True
bad.wait(10)
assert bad.last_error is not None
print("ok")
`

// TestPythonClient runs the Python client against the server over TLS
// (skipped without python3).
func TestPythonClient(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("no python3")
	}
	e := newEnv(t, progress.Config{})
	srv, tokFile, caFile := tlsEnv(t, e)
	dir, err := filepath.Abs("python")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, py, "-c", pythonScript, dir)
	cmd.Env = append(os.Environ(),
		client.EnvURL+"="+srv.URL,
		client.EnvTokenFile+"="+tokFile,
		client.EnvCAFile+"="+caFile,
		"PYTHONDONTWRITEBYTECODE=1",
	)
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "ok") {
		t.Fatalf("python: %v\n%s", err, out)
	}
	if strings.Contains(string(out), e.tok) {
		t.Errorf("the token was logged:\n%s", out)
	}
	var got []float64
	for _, g := range e.sink.all() {
		got = append(got, g.steps)
	}
	if len(got) != 2 || got[0] != 1200 || got[1] != 1500 {
		t.Errorf("sink got %v, want [1200 1500]", got)
	}
	t.Logf("python's log:\n%s", out)
}
