// Package startup is the start-up the kube binaries (gpusched-admission,
// gpusched-kueue) share (issue #44): their common flags (--kubeconfig,
// --metrics-bind-address, --leader-elect, --debug), the logger, the API
// client's configuration, the metrics endpoint and the signals that stop
// them.
package startup

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/component-base/metrics"
)

// Flags are the flags every kube binary has. Not safe for concurrent
// use while the flags are parsed; a plain value after.
type Flags struct {
	// Kubeconfig is a kubeconfig file ("": the in-cluster config).
	Kubeconfig string
	// MetricsAddr is the address of /metrics and /healthz ("" or "0":
	// none).
	MetricsAddr string
	// LeaderElect runs the controller only while it holds the lease.
	LeaderElect bool
	// Debug logs at debug level.
	Debug bool
}

// Register registers the flags on fs, with their defaults: no kubeconfig,
// metrics on :8080, leader election on, info level.
func (f *Flags) Register(fs *flag.FlagSet) {
	fs.StringVar(&f.Kubeconfig, "kubeconfig", "", "kubeconfig file (default: in-cluster config)")
	fs.StringVar(&f.MetricsAddr, "metrics-bind-address", ":8080", "address of the /metrics and /healthz endpoints (plain HTTP); 0 or empty turns them off")
	fs.BoolVar(&f.LeaderElect, "leader-elect", true, "run only while holding the leader lease")
	fs.BoolVar(&f.Debug, "debug", false, "log at debug level")
}

// Logger logs text to standard error, at debug level with --debug.
func (f *Flags) Logger() *slog.Logger {
	level := slog.LevelInfo
	if f.Debug {
		level = slog.LevelDebug
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
}

// RESTConfig returns the API client's configuration: --kubeconfig's, or
// the in-cluster one.
func (f *Flags) RESTConfig() (*rest.Config, error) {
	var rc *rest.Config
	var err error
	if f.Kubeconfig != "" {
		rc, err = clientcmd.BuildConfigFromFlags("", f.Kubeconfig)
	} else {
		rc, err = rest.InClusterConfig()
	}
	if err != nil {
		return nil, fmt.Errorf("client config: %w", err)
	}
	return rc, nil
}

// ServeMetrics serves /metrics (g's) and /healthz on --metrics-bind-address
// until ctx ends, then shuts the server down within 5 s; it returns the
// address it listens on, "" when the flag turns the endpoint off. A
// failure of the server after it started is logged.
func (f *Flags) ServeMetrics(ctx context.Context, g prometheus.Gatherer, log *slog.Logger) (string, error) {
	if f.MetricsAddr == "" || f.MetricsAddr == "0" {
		return "", nil
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", metrics.HandlerFor(g, metrics.HandlerOpts{ErrorHandling: metrics.ContinueOnError}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") })
	l, err := (&net.ListenConfig{}).Listen(ctx, "tcp", f.MetricsAddr)
	if err != nil {
		return "", fmt.Errorf("--metrics-bind-address %s: %w", f.MetricsAddr, err)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	Serve(ctx, srv, func() error { return srv.Serve(l) }, func(err error) { log.Error("metrics server", "err", err) })
	return l.Addr().String(), nil
}

// Serve runs an HTTP server (serve calls its Serve or ServeTLS) until ctx
// ends, then shuts it down within 5 s; an error other than the shutdown's
// goes to onErr (if set).
func Serve(ctx context.Context, srv *http.Server, serve func() error, onErr func(error)) {
	go func() {
		if err := serve(); err != nil && !errors.Is(err, http.ErrServerClosed) && onErr != nil {
			onErr(err)
		}
	}()
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
}

// Context returns a context that SIGINT or SIGTERM cancels, and its stop.
func Context() (context.Context, context.CancelFunc) {
	return signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
}
