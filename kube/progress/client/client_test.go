package client_test

import (
	"context"
	"encoding/json"
	"encoding/pem"
	"errors"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/gpusched/gpusched/kube/progress/client"
)

// server records what it is sent and answers what the test says.
type server struct {
	*httptest.Server
	mu     sync.Mutex
	got    []req
	status int
	retry  string
	hang   chan struct{} // while open, requests wait for it
}

type req struct {
	path, auth, ctype string
	steps             float64
}

func newServer(t *testing.T) *server {
	s := &server{status: http.StatusNoContent}
	s.Server = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		hang := s.hang
		s.mu.Unlock()
		if hang != nil {
			select {
			case <-hang:
			case <-r.Context().Done():
				return
			}
		}
		b, _ := io.ReadAll(r.Body)
		var body struct{ Steps float64 }
		_ = json.Unmarshal(b, &body)
		s.mu.Lock()
		defer s.mu.Unlock()
		s.got = append(s.got, req{r.URL.Path, r.Header.Get("Authorization"), r.Header.Get("Content-Type"), body.Steps})
		if s.retry != "" {
			w.Header().Set("Retry-After", s.retry)
		}
		if s.status != http.StatusNoContent {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(s.status)
			_, _ = io.WriteString(w, `{"error":"rate_limited","message":"progress: too many reports"}`)
			return
		}
		w.WriteHeader(s.status)
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *server) requests() []req {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]req(nil), s.got...)
}

type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func writeToken(t *testing.T, path, tok string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(tok+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestReport: the token is read at every report (a rotated token is
// sent), the URL gets the path, the body is the steps, the client holds
// reports back for Interval and for the server's Retry-After.
func TestReport(t *testing.T) {
	s := newServer(t)
	dir := t.TempDir()
	tokFile := filepath.Join(dir, "token")
	writeToken(t, tokFile, "tok-1")
	clk := &clock{t: time.Unix(1e9, 0)}
	c, err := client.New(client.Config{URL: s.URL, TokenFile: tokFile, HTTPClient: s.Client(), Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := c.Report(ctx, 100); err != nil {
		t.Fatal(err)
	}
	if err := c.Report(ctx, 101); !errors.Is(err, client.ErrSkipped) {
		t.Errorf("a report 0 s after the last: %v, want ErrSkipped", err)
	}
	clk.Add(5 * time.Second)
	writeToken(t, tokFile, "tok-2")
	if err := c.Report(ctx, 102); err != nil {
		t.Fatal(err)
	}
	got := s.requests()
	want := []req{{client.Path, "Bearer tok-1", "application/json", 100}, {client.Path, "Bearer tok-2", "application/json", 102}}
	if len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("server got %+v, want %+v", got, want)
	}
	// A refusal with Retry-After: 30 s: the client waits 30 s, not 5.
	s.mu.Lock()
	s.status, s.retry = http.StatusTooManyRequests, "30"
	s.mu.Unlock()
	clk.Add(5 * time.Second)
	err = c.Report(ctx, 103)
	var ce *client.Error
	if !errors.As(err, &ce) || ce.Status != 429 || ce.Code != "rate_limited" || ce.Message != "progress: too many reports" {
		t.Fatalf("refused report: %v (%+v)", err, ce)
	}
	s.mu.Lock()
	s.status, s.retry = http.StatusNoContent, ""
	s.mu.Unlock()
	clk.Add(10 * time.Second)
	if err := c.Report(ctx, 104); !errors.Is(err, client.ErrSkipped) {
		t.Errorf("10 s into a Retry-After of 30: %v, want ErrSkipped", err)
	}
	clk.Add(20 * time.Second)
	if err := c.Report(ctx, 104); err != nil {
		t.Errorf("after the Retry-After: %v", err)
	}
	// Steps that are no count are refused before anything is sent.
	for _, v := range []float64{math.NaN(), math.Inf(1), math.Inf(-1), -1, 2e15} {
		if err := c.Report(ctx, v); !errors.Is(err, client.ErrInvalid) {
			t.Errorf("steps %v: %v, want ErrInvalid", v, err)
		}
	}
	// No token file: ErrToken, and nothing sent.
	clk.Add(time.Minute)
	_ = os.Remove(tokFile)
	if err := c.Report(ctx, 105); !errors.Is(err, client.ErrToken) {
		t.Errorf("no token: %v, want ErrToken", err)
	}
	if n := len(s.requests()); n != 4 {
		t.Errorf("%d requests, want 4", n)
	}
}

// TestNeverBlocksLong: a server that does not answer holds Report for
// Timeout at most, and ReportAsync not at all; reports meanwhile are
// dropped.
func TestNeverBlocksLong(t *testing.T) {
	s := newServer(t)
	s.hang = make(chan struct{})
	defer close(s.hang)
	tokFile := filepath.Join(t.TempDir(), "token")
	writeToken(t, tokFile, "tok")
	hc := s.Client()
	c, err := client.New(client.Config{URL: s.URL + "/custom", TokenFile: tokFile, HTTPClient: hc, Timeout: 200 * time.Millisecond, Interval: time.Nanosecond})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	err = c.Report(context.Background(), 1)
	if el := time.Since(start); err == nil || el > 2*time.Second {
		t.Errorf("Report to a hung server: %v after %v, want an error within the timeout", err, el)
	}
	start = time.Now()
	c.ReportAsync(2)
	c.ReportAsync(3) // in flight: dropped
	if el := time.Since(start); el > 50*time.Millisecond {
		t.Errorf("ReportAsync took %v", el)
	}
	if err := c.Report(context.Background(), 4); !errors.Is(err, client.ErrSkipped) {
		t.Errorf("a report while one is in flight: %v, want ErrSkipped", err)
	}
	c.Wait()
	if c.LastError() == nil {
		t.Error("LastError nil after a report that timed out")
	}
}

// TestConfig: the URL must be https; FromEnv reads the environment,
// with a CA bundle that lets the default HTTP client trust the server.
func TestConfig(t *testing.T) {
	for _, u := range []string{"", "http://gpusched-admission.gpusched-system.svc:8443", "https://", "ftp://x", "::"} {
		if _, err := client.New(client.Config{URL: u}); !errors.Is(err, client.ErrConfig) {
			t.Errorf("URL %q: %v, want ErrConfig", u, err)
		}
	}
	// Not configured: a nil client, which does nothing.
	t.Setenv(client.EnvURL, "")
	c, err := client.FromEnv()
	if !errors.Is(err, client.ErrConfig) || c != nil {
		t.Fatalf("FromEnv without a URL: %v, %v", c, err)
	}
	c.ReportAsync(1)
	c.Wait()
	if err := c.Report(context.Background(), 1); !errors.Is(err, client.ErrConfig) || c.LastError() != nil {
		t.Errorf("a nil client's Report: %v", err)
	}
	if _, err := client.New(client.Config{URL: "https://x", CAFile: "/nonexistent"}); !errors.Is(err, client.ErrConfig) {
		t.Errorf("missing CA file: %v, want ErrConfig", err)
	}
	s := newServer(t)
	dir := t.TempDir()
	ca := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: s.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	tokFile := filepath.Join(dir, "token")
	writeToken(t, tokFile, "tok")
	t.Setenv(client.EnvURL, s.URL)
	t.Setenv(client.EnvTokenFile, tokFile)
	t.Setenv(client.EnvCAFile, ca)
	c, err = client.FromEnv()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Report(context.Background(), 7); err != nil {
		t.Fatalf("with the CA bundle: %v", err)
	}
	t.Setenv(client.EnvCAFile, "")
	c, err = client.FromEnv()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Report(context.Background(), 8); err == nil {
		t.Error("a server signed by an unknown CA was trusted")
	}
}
