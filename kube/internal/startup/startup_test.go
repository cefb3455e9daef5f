package startup

import (
	"context"
	"flag"
	"io"
	"log/slog"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// The flags' defaults, and what they give: the endpoint serves /healthz
// and /metrics until the context ends, and is off for "" and "0"; a
// kubeconfig that is not there is an error naming the client config.
func TestFlags(t *testing.T) {
	var f Flags
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	f.Register(fs)
	if err := fs.Parse([]string{"--metrics-bind-address", "127.0.0.1:0", "--debug"}); err != nil {
		t.Fatal(err)
	}
	if !f.LeaderElect || !f.Debug || f.Kubeconfig != "" {
		t.Fatalf("flags %+v", f)
	}
	if !f.Logger().Enabled(context.Background(), slog.LevelDebug) {
		t.Error("--debug does not log at debug level")
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	reg := prometheus.NewRegistry()
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: "startup_test_total", Help: "a counter"})
	reg.MustRegister(c)
	c.Inc()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	addr, err := f.ServeMetrics(ctx, reg, log)
	if err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]string{"/healthz": "ok", "/metrics": "startup_test_total 1"} {
		resp, err := http.Get("http://" + addr + path)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if !strings.Contains(string(b), want) {
			t.Errorf("%s: %q lacks %q", path, b, want)
		}
	}
	for _, off := range []string{"", "0"} {
		f.MetricsAddr = off
		if addr, err := f.ServeMetrics(ctx, reg, log); addr != "" || err != nil {
			t.Errorf("--metrics-bind-address %q: %q, %v", off, addr, err)
		}
	}
	f.MetricsAddr = "256.0.0.1:1"
	if _, err := f.ServeMetrics(ctx, reg, log); err == nil || !strings.Contains(err.Error(), "--metrics-bind-address 256.0.0.1:1") {
		t.Errorf("a bad address: %v", err)
	}
	f.Kubeconfig = filepath.Join(t.TempDir(), "missing")
	if _, err := f.RESTConfig(); err == nil || !strings.Contains(err.Error(), "client config") {
		t.Errorf("a missing kubeconfig: %v", err)
	}
}
