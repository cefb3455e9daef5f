package progress

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/gpusched/gpusched/kube/internal/startup"
	"github.com/gpusched/gpusched/perfmodel/learn"
	"k8s.io/client-go/kubernetes"
)

// Flags are a controller's command-line flags of learned rates and of the
// channel (gpusched-admission's and gpusched-kueue's): --learn,
// --progress-bind-address, --progress-tls-cert-file,
// --progress-tls-key-file and --progress-audience. A plain value: not
// safe for concurrent writes.
type Flags struct {
	// Learn turns learning on; Addr is the channel's address ("0" or "":
	// not served); Cert and Key are its TLS files; Audience the tokens'.
	Learn                     bool
	Addr, Cert, Key, Audience string
}

// Register adds the flags to fs; learnHelp is --learn's help.
func (f *Flags) Register(fs *flag.FlagSet, learnHelp string) {
	fs.BoolVar(&f.Learn, "learn", false, learnHelp)
	fs.StringVar(&f.Addr, "progress-bind-address", "0", "address of the progress channel (HTTPS POST /v1/progress, kube/docs/progress.md), served by the leader; 0 turns it off; needs --learn and a certificate")
	fs.StringVar(&f.Cert, "progress-tls-cert-file", "", "the progress channel's TLS certificate (PEM)")
	fs.StringVar(&f.Key, "progress-tls-key-file", "", "the progress channel's TLS key (PEM)")
	fs.StringVar(&f.Audience, "progress-audience", DefaultAudience, "the audience of the pods' projected tokens that the channel accepts")
}

// Serving reports whether the channel is to be served.
func (f *Flags) Serving() bool { return f.Addr != "0" && f.Addr != "" }

// Check reports flags that do not go together, naming them.
func (f *Flags) Check() error {
	switch {
	case f.Serving() && !f.Learn:
		return errors.New("--progress-bind-address without --learn: the reports would feed nothing")
	case f.Serving() && (f.Cert == "" || f.Key == ""):
		return errors.New("--progress-bind-address needs --progress-tls-cert-file and --progress-tls-key-file: the pods' tokens travel in the requests")
	case f.Serving() && f.Audience == "":
		return errors.New("--progress-audience is empty")
	}
	return nil
}

// ServeTLS serves h over TLS (the PEM certificate and key files) at addr
// until ctx ends, then shuts it down within 5 s, and returns the address
// it listens on; an error of the server other than its shutdown is given
// to onErr (nil: dropped). The server's timeouts bound slow clients
// (headers 10 s, a request or its answer 30 s); TLS 1.2 at least.
func ServeTLS(ctx context.Context, addr, cert, key string, h http.Handler, onErr func(error)) (string, error) {
	pair, err := tls.LoadX509KeyPair(cert, key)
	if err != nil {
		return "", err
	}
	l, err := (&net.ListenConfig{}).Listen(ctx, "tcp", addr)
	if err != nil {
		return "", err
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second, WriteTimeout: 30 * time.Second,
		TLSConfig: &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{pair}}}
	startup.Serve(ctx, srv, func() error { return srv.ServeTLS(l, "", "") }, func(err error) {
		if onErr != nil {
			onErr(fmt.Errorf("progress channel: %w", err))
		}
	})
	return l.Addr().String(), nil
}

// Estimator returns a new learner with the defaults when Learn is set,
// else nil (no learning).
func (f *Flags) Estimator() (learn.Estimator, error) {
	if !f.Learn {
		return nil, nil
	}
	return learn.New(learn.Config{})
}

// Serve serves the channel, with r and s as its resolver and sink and
// client for the TokenReviews, when the flags ask for it, until ctx ends;
// it logs the address it listens on and later server errors.
func (f *Flags) Serve(ctx context.Context, client kubernetes.Interface, r Resolver, s Sink, log *slog.Logger) error {
	if !f.Serving() {
		return nil
	}
	srv, err := New(Config{Client: client, Resolver: r, Sink: s, Audience: f.Audience})
	if err != nil {
		return err
	}
	bound, err := ServeTLS(ctx, f.Addr, f.Cert, f.Key, srv, func(err error) { log.Error("serving", "err", err) })
	if err != nil {
		return fmt.Errorf("--progress-bind-address %s: %w", f.Addr, err)
	}
	log.Info("serving the progress channel", "address", bound)
	return nil
}
