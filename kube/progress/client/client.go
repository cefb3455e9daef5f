// Package client reports a training job's progress to gpusched's progress
// channel (package kube/progress) from Go. It uses the standard library
// only. In three lines:
//
//	c, err := client.FromEnv()                 // once; err (and c nil) when not configured
//	...
//	c.ReportAsync(float64(step))               // in the loop: never blocks
//
// or c.Report(ctx, steps) to wait (at most Config.Timeout) for the
// answer. The URL comes from GPUSCHED_PROGRESS_URL, the token from the
// file GPUSCHED_PROGRESS_TOKEN_FILE names (/var/run/secrets/gpusched/token
// by default: a projected service account token, read again at every
// report, since the kubelet rotates it), an extra CA bundle from
// GPUSCHED_PROGRESS_CA_FILE. The client sends at most one report per
// Config.Interval and honours the server's Retry-After.
package client

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

const (
	// EnvURL names the environment variable with the channel's URL (the
	// controller's service, https://..., with or without the path).
	EnvURL = "GPUSCHED_PROGRESS_URL"
	// EnvTokenFile names the environment variable with the token's path.
	EnvTokenFile = "GPUSCHED_PROGRESS_TOKEN_FILE"
	// EnvCAFile names the environment variable with a PEM bundle of CAs
	// to trust besides the system's (optional).
	EnvCAFile = "GPUSCHED_PROGRESS_CA_FILE"
	// DefaultTokenFile is where the projected token is mounted by default.
	DefaultTokenFile = "/var/run/secrets/gpusched/token"
	// Path is the channel's path, added to a URL that has none.
	Path = "/v1/progress"
	// maxTokenFile bounds what is read of the token file.
	maxTokenFile = 64 << 10
)

var (
	// ErrConfig: no URL, a URL that is not https, a CA file that cannot
	// be read.
	ErrConfig = errors.New("progress client: invalid configuration")
	// ErrSkipped: the report was not sent, because the last was sent
	// less than Config.Interval ago, the server asked to wait
	// (Retry-After), or another is in flight. It is not a failure: the
	// next report carries the steps.
	ErrSkipped = errors.New("progress client: report skipped")
	// ErrInvalid: steps that are not a finite number in [0, 1e15].
	ErrInvalid = errors.New("progress client: invalid steps")
	// ErrToken: the token file cannot be read or is empty.
	ErrToken = errors.New("progress client: token unreadable")
)

// Error is the server's refusal of a report: its HTTP status and the
// code and message of its body. It is a value: safe for concurrent use.
type Error struct {
	// Status is the HTTP status.
	Status int
	// Code is the refusal's short name ("not_monotone", "rate_limited",
	// ...), empty if the body had none.
	Code string
	// Message is the server's text.
	Message string
}

// Error is the status and the server's message, one line.
func (e *Error) Error() string {
	if e.Message != "" {
		return fmt.Sprintf("progress client: server answered %d: %s", e.Status, e.Message)
	}
	return fmt.Sprintf("progress client: server answered %d", e.Status)
}

// Config configures a [Client]. It is read once by New: it is safe for
// concurrent use as long as no one writes it.
type Config struct {
	// URL of the channel (https). A URL without a path gets Path.
	URL string
	// TokenFile is the token's path; DefaultTokenFile if empty.
	TokenFile string
	// CAFile is a PEM bundle of CAs to trust besides the system's.
	CAFile string
	// Interval is the least time between two reports sent (5 s by
	// default, the server's default rate).
	Interval time.Duration
	// Timeout bounds one report, connection included (2 s by default).
	Timeout time.Duration
	// HTTPClient sends the reports (one with Timeout and the CAs by
	// default); its Timeout is left as it is.
	HTTPClient *http.Client
	// Now is the client's clock (time.Now by default).
	Now func() time.Time
}

// FromEnv is New with the URL, token file and CA file of the
// environment (EnvURL, EnvTokenFile, EnvCAFile).
func FromEnv() (*Client, error) {
	return New(Config{URL: os.Getenv(EnvURL), TokenFile: os.Getenv(EnvTokenFile), CAFile: os.Getenv(EnvCAFile)})
}

// Client sends progress reports. It is safe for concurrent use: a
// report made while another is in flight, or within Interval of the last
// sent, is skipped (ErrSkipped). A nil *Client (FromEnv's where the
// environment names no URL) sends nothing: ReportAsync and Wait do
// nothing, Report returns ErrConfig, so a training loop needs no check.
type Client struct {
	cfg Config
	url string

	mu       sync.Mutex
	busy     bool
	next     time.Time // no report before it
	lastErr  error     // the last report's outcome, for ReportAsync
	inflight sync.WaitGroup
}

// New checks cfg and returns a Client. Errors wrap ErrConfig.
func New(cfg Config) (*Client, error) {
	if cfg.URL == "" {
		return nil, fmt.Errorf("%w: no URL (set %s)", ErrConfig, EnvURL)
	}
	u, err := url.Parse(cfg.URL)
	if err != nil || u.Scheme != "https" || u.Host == "" {
		// The token is a bearer credential: never sent in clear text.
		return nil, fmt.Errorf("%w: URL must be https://host[:port][/path]", ErrConfig)
	}
	if u.Path == "" || u.Path == "/" {
		u.Path = Path
	}
	if cfg.TokenFile == "" {
		cfg.TokenFile = DefaultTokenFile
	}
	if cfg.Interval == 0 {
		cfg.Interval = 5 * time.Second
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = 2 * time.Second
	}
	if cfg.Interval < 0 || cfg.Timeout < 0 {
		return nil, fmt.Errorf("%w: negative Interval or Timeout", ErrConfig)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.HTTPClient == nil {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		if cfg.CAFile != "" {
			pem, err := os.ReadFile(cfg.CAFile)
			if err != nil {
				return nil, fmt.Errorf("%w: CA file: %w", ErrConfig, err)
			}
			pool, err := x509.SystemCertPool()
			if err != nil {
				pool = x509.NewCertPool()
			}
			if !pool.AppendCertsFromPEM(pem) {
				return nil, fmt.Errorf("%w: CA file %s holds no PEM certificate", ErrConfig, cfg.CAFile)
			}
			tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
		}
		cfg.HTTPClient = &http.Client{Transport: tr, Timeout: cfg.Timeout}
	}
	return &Client{cfg: cfg, url: u.String()}, nil
}

// Report sends the job's cumulative steps and waits for the answer, at
// most Config.Timeout (or ctx's deadline, if sooner): nil when the
// server took them, ErrSkipped when the client held the report back, an
// [*Error] when the server refused it, another error when it could not
// be sent.
func (c *Client) Report(ctx context.Context, steps float64) error {
	if c == nil {
		return fmt.Errorf("%w: no client", ErrConfig)
	}
	if err := c.begin(steps); err != nil {
		return err
	}
	err := c.send(ctx, steps)
	c.end(err)
	return err
}

// ReportAsync sends the steps in the background and returns at once;
// the report is dropped if one is in flight or the last was sent less
// than Config.Interval ago. LastError says how the last sent one went.
func (c *Client) ReportAsync(steps float64) {
	if c == nil {
		return
	}
	if err := c.begin(steps); err != nil {
		return
	}
	c.inflight.Add(1)
	go func() {
		defer c.inflight.Done()
		err := c.send(context.Background(), steps)
		c.end(err)
	}()
}

// Wait waits until no report is in flight.
func (c *Client) Wait() {
	if c != nil {
		c.inflight.Wait()
	}
}

// LastError is the outcome of the last report sent (nil if it was taken
// or none was sent).
func (c *Client) LastError() error {
	if c == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lastErr
}

func (c *Client) begin(steps float64) error {
	if math.IsNaN(steps) || steps < 0 || steps > 1e15 {
		return fmt.Errorf("%w: %g not in [0, 1e15]", ErrInvalid, steps)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.cfg.Now()
	if c.busy || now.Before(c.next) {
		return ErrSkipped
	}
	c.busy = true
	c.next = now.Add(c.cfg.Interval)
	return nil
}

func (c *Client) end(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.busy = false
	c.lastErr = err
	var e *retryError
	if errors.As(err, &e) {
		if t := c.cfg.Now().Add(e.after); t.After(c.next) {
			c.next = t
		}
	}
}

// retryError is a refusal with a Retry-After; it unwraps to the *Error.
type retryError struct {
	err   *Error
	after time.Duration
}

func (e *retryError) Error() string { return e.err.Error() }
func (e *retryError) Unwrap() error { return e.err }

func (c *Client) send(ctx context.Context, steps float64) error {
	ctx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
	defer cancel()
	tok, err := readToken(c.cfg.TokenFile)
	if err != nil {
		return err
	}
	body, _ := json.Marshal(struct {
		Steps float64 `json:"steps"`
	}{steps})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("%w: %w", ErrConfig, err)
	}
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set("Content-Type", "application/json")
	res, err := c.cfg.HTTPClient.Do(req)
	if err != nil {
		return err
	}
	defer func() { _ = res.Body.Close() }()
	msg, _ := io.ReadAll(io.LimitReader(res.Body, 4<<10))
	if res.StatusCode/100 == 2 {
		return nil
	}
	e := &Error{Status: res.StatusCode}
	var b struct {
		Error   string `json:"error"`
		Message string `json:"message"`
	}
	if json.Unmarshal(msg, &b) == nil {
		e.Code, e.Message = b.Error, b.Message
	}
	if s, err := strconv.Atoi(res.Header.Get("Retry-After")); err == nil && s > 0 {
		return &retryError{err: e, after: time.Duration(min(s, 3600)) * time.Second}
	}
	return e
}

// readToken reads the token file afresh (projected tokens rotate).
func readToken(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("%w: %w", ErrToken, err)
	}
	defer func() { _ = f.Close() }()
	b, err := io.ReadAll(io.LimitReader(f, maxTokenFile))
	if err != nil {
		return "", fmt.Errorf("%w: %w", ErrToken, err)
	}
	tok := strings.TrimSpace(string(b))
	if tok == "" {
		return "", fmt.Errorf("%w: %s is empty", ErrToken, path)
	}
	return tok, nil
}
