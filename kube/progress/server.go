package progress

import (
	"container/list"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"mime"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/gpusched/gpusched/scheduler"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
)

// Resolver maps a pod to the key of the workload it is part of, as the
// controller that schedules it keys its jobs (the admission controller's
// "pod/<ns>/<name>", "group/<name>" or its Job's key; the Kueue
// controller's Workload). Workload reports ok only for a pod of that
// namespace, name and UID that the controller holds in a workload now: a
// pod of another namespace with the same name, or an older pod of the
// same name, is unknown. Implementations must be safe for concurrent use;
// the server calls Workload on every report, so it should be a lookup in
// the controller's caches.
type Resolver interface {
	Workload(namespace, pod string, uid types.UID) (key string, ok bool)
}

// ResolverFunc adapts a function to a [Resolver]; it is safe for
// concurrent use when the function is.
type ResolverFunc func(namespace, pod string, uid types.UID) (string, bool)

// Workload calls f.
func (f ResolverFunc) Workload(namespace, pod string, uid types.UID) (string, bool) {
	return f(namespace, pod, uid)
}

// Sink takes the reports the server accepts: a workload's cumulative
// steps at a time of the server's clock (never the reporter's). The
// controllers pass them to scheduler.Scheduler.Progress on the rounds'
// clock. An error that wraps scheduler.ErrNotRunning, ErrInvalid or
// ErrUnknownJob is the core refusing the report (answered 409 or 422);
// any other is the sink's failure (503). Implementations must be safe for
// concurrent use; the server never calls Progress twice at once for one
// pod.
type Sink interface {
	Progress(workload string, steps float64, at time.Time) error
}

// SinkFunc adapts a function to a [Sink]; it is safe for concurrent use
// when the function is.
type SinkFunc func(workload string, steps float64, at time.Time) error

// Progress calls f.
func (f SinkFunc) Progress(workload string, steps float64, at time.Time) error {
	return f(workload, steps, at)
}

// Config configures a [Server]; zero values take the defaults. A Config
// is read once by New: it is safe for concurrent use as long as no one
// writes it.
type Config struct {
	// Client reviews the tokens (authentication.k8s.io/v1 TokenReview;
	// the server's account needs create on tokenreviews). Required.
	Client kubernetes.Interface
	// Resolver maps pods to workloads. Required.
	Resolver Resolver
	// Sink takes the accepted reports. Required.
	Sink Sink
	// Audience the tokens must be issued for; DefaultAudience if empty.
	Audience string
	// ReviewTTL is how long an accepted token's review is reused (2 min
	// by default, as kube-apiserver's webhook token authenticator; never
	// past the token's expiry); RefusalTTL how long a refused token's is
	// (10 s). A pod's token is reviewed again at most once a ReviewTTL,
	// however often it reports; the pod's deletion is seen sooner, by the
	// Resolver.
	ReviewTTL, RefusalTTL time.Duration
	// MaxReviews bounds the accepted reviews kept (65,536 by default, as
	// MaxPods); the oldest goes first. Refused ones are kept apart, at
	// most MaxReviews/16 (at least 16), so that a flood of bad tokens
	// never pushes out the good ones.
	MaxReviews int
	// ReviewTimeout bounds one TokenReview (5 s by default).
	ReviewTimeout time.Duration
	// ReviewQPS and ReviewBurst bound the TokenReviews the server sends
	// (tokens it has no review of): 50 a second, bursts of 100, by
	// default, which reviews the tokens of 6,000 pods once every
	// ReviewTTL. Beyond them a report is answered 429.
	ReviewQPS   float64
	ReviewBurst int
	// Interval and Burst are each pod's token bucket: one report per
	// Interval (5 s by default), Burst at once (3).
	Interval time.Duration
	Burst    int
	// MaxPods bounds the pods whose last steps and bucket the server
	// keeps (65,536 by default); the one that reported least recently is
	// forgotten first (its next report is taken as its first: it may go
	// back, and the core refuses it then if it goes back within a run).
	MaxPods int
	// Now is the server's clock (time.Now by default); the sink's times
	// come from it.
	Now func() time.Time
	// Log, if set, receives every refused report with its cause (which
	// responses never carry) and the caller when known; it must be safe
	// for concurrent use.
	Log func(c Caller, err *Error)
}

// Server is the progress channel: an http.Handler for POST [Path] that
// authenticates each report as the pod it comes from (a projected service
// account token for the configured audience, checked by the TokenReview
// API and bound to a pod of the account's namespace), maps the pod to its
// workload (Resolver) and passes the steps, at the server's time, to the
// Sink: monotone and rate-limited per pod, bounded in size. Refusals are
// answered with a JSON body {"error": code, "message": text} that never
// holds the token or a cause. Serve it over TLS: the tokens are bearer
// credentials. A Server is safe for concurrent use (ServeHTTP is called
// from many goroutines; the sink is never called twice at once for one
// pod).
type Server struct {
	cfg         Config
	reviews     reviewCache // accepted tokens
	refusals    reviewCache // refused tokens
	reviewMu    sync.Mutex
	reviewLimit *bucket // guarded by reviewMu

	mu    sync.Mutex
	pods  map[types.UID]*podState
	order list.List // of *podState, least recently used first
	stats map[string]uint64
}

// podState is what the server keeps of a pod: its bucket and last steps.
type podState struct {
	uid  types.UID
	elem *list.Element // in Server.order; guarded by Server.mu
	// users counts the reports that hold the state; a state in use is
	// never forgotten. Guarded by Server.mu.
	users int
	mu    sync.Mutex // serializes the pod's reports, from check to sink
	b     bucket     // guarded by mu
	last  float64    // the last accepted steps; guarded by mu
	seen  bool       // whether any report was accepted; guarded by mu
}

// New checks cfg, fills its defaults and returns a Server. Errors wrap
// ErrConfig.
func New(cfg Config) (*Server, error) {
	if cfg.Client == nil || cfg.Resolver == nil || cfg.Sink == nil {
		return nil, fmt.Errorf("%w: Client, Resolver and Sink are required", ErrConfig)
	}
	if cfg.Audience == "" {
		cfg.Audience = DefaultAudience
	}
	durations := []struct {
		name string
		p    *time.Duration
		def  time.Duration
	}{
		{"ReviewTTL", &cfg.ReviewTTL, 2 * time.Minute},
		{"RefusalTTL", &cfg.RefusalTTL, 10 * time.Second},
		{"ReviewTimeout", &cfg.ReviewTimeout, 5 * time.Second},
		{"Interval", &cfg.Interval, 5 * time.Second},
	}
	for _, d := range durations {
		if *d.p == 0 {
			*d.p = d.def
		}
		if *d.p < 0 || *d.p > time.Hour {
			return nil, fmt.Errorf("%w: %s %v not in (0, 1h]", ErrConfig, d.name, *d.p)
		}
	}
	ints := []struct {
		name     string
		p        *int
		def, max int
	}{
		{"MaxReviews", &cfg.MaxReviews, 1 << 16, 1 << 22},
		{"ReviewBurst", &cfg.ReviewBurst, 100, 1 << 20},
		{"Burst", &cfg.Burst, 3, 1000},
		{"MaxPods", &cfg.MaxPods, 1 << 16, 1 << 22},
	}
	for _, n := range ints {
		if *n.p == 0 {
			*n.p = n.def
		}
		if *n.p < 0 || *n.p > n.max {
			return nil, fmt.Errorf("%w: %s %d not in [1, %d]", ErrConfig, n.name, *n.p, n.max)
		}
	}
	if cfg.ReviewQPS == 0 {
		cfg.ReviewQPS = 50
	}
	if !(cfg.ReviewQPS > 0 && cfg.ReviewQPS <= 1e6) {
		return nil, fmt.Errorf("%w: ReviewQPS %v not in (0, 1e6]", ErrConfig, cfg.ReviewQPS)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	s := &Server{
		cfg:   cfg,
		pods:  map[types.UID]*podState{},
		stats: map[string]uint64{},
	}
	s.reviews = reviewCache{max: cfg.MaxReviews, byKey: map[[32]byte]*review{}}
	s.refusals = reviewCache{max: max(16, cfg.MaxReviews/16), byKey: map[[32]byte]*review{}}
	s.reviewLimit = &bucket{every: time.Duration(float64(time.Second) / cfg.ReviewQPS), burst: cfg.ReviewBurst}
	return s, nil
}

// Config returns the server's configuration, defaults filled in.
func (s *Server) Config() Config { return s.cfg }

func (s *Server) now() time.Time { return s.cfg.Now() }

// ServeHTTP takes one report: 204 No Content when the sink took it, else
// the refusal's status and JSON body (see [Error]).
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	c, err := s.serve(w, r)
	if err == nil {
		s.count("accepted")
		w.WriteHeader(http.StatusNoContent)
		return
	}
	s.count(err.Code())
	if s.cfg.Log != nil {
		s.cfg.Log(c, err)
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Cache-Control", "no-store")
	switch {
	case errors.Is(err.Kind, ErrMethod) && r.URL.Path == Path:
		h.Set("Allow", http.MethodPost)
	case errors.Is(err.Kind, ErrUnauthenticated):
		h.Set("WWW-Authenticate", `Bearer realm="gpusched-progress"`)
	}
	if err.RetryAfter > 0 {
		h.Set("Retry-After", strconv.Itoa(err.RetryAfter))
	}
	w.WriteHeader(err.Status)
	body, _ := json.Marshal(struct {
		Error   string `json:"error"`
		Message string `json:"message"`
	}{err.Code(), err.Error()})
	_, _ = w.Write(append(body, '\n'))
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) (Caller, *Error) {
	if r.URL.Path != Path {
		e := newError(ErrMethod, "no such path")
		e.Status = http.StatusNotFound
		return Caller{}, e
	}
	if r.Method != http.MethodPost {
		return Caller{}, newError(ErrMethod, "only POST")
	}
	tok, err := bearer(r.Header.Get("Authorization"))
	if err != nil {
		return Caller{}, err
	}
	c, err := s.authenticate(r.Context(), tok)
	if err != nil {
		return c, err
	}
	key, ok := s.cfg.Resolver.Workload(c.Namespace, c.Pod, c.UID)
	if !ok {
		return c, newError(ErrUnknownPod, "")
	}
	if ct := r.Header.Get("Content-Type"); ct != "" {
		if mt, _, perr := mime.ParseMediaType(ct); perr != nil || mt != "application/json" {
			return c, newError(ErrContentType, "")
		}
	}
	// The body is read before the pod's lock: a slow sender holds up no
	// other report of its pod.
	body, rerr := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBody))
	p := s.pod(c.UID)
	defer s.release(p)
	p.mu.Lock()
	defer p.mu.Unlock()
	now := s.now()
	if wait, ok := p.b.take(now); !ok {
		e := newError(ErrRateLimited, fmt.Sprintf("one report per %v, %d at once", s.cfg.Interval, s.cfg.Burst))
		e.RetryAfter = retrySeconds(wait)
		return c, e
	}
	if rerr != nil {
		if _, big := errors.AsType[*http.MaxBytesError](rerr); big {
			return c, newError(ErrTooLarge, fmt.Sprintf("at most %d bytes", MaxBody))
		}
		return c, newError(ErrMalformed, "body not read")
	}
	rep, derr := decode(body)
	if derr != nil {
		return c, derr
	}
	if p.seen && rep.Steps < p.last {
		return c, newError(ErrNotMonotone, fmt.Sprintf("%g after %g", rep.Steps, p.last))
	}
	if serr := s.cfg.Sink.Progress(key, rep.Steps, now); serr != nil {
		return c, sinkError(serr)
	}
	p.last, p.seen = rep.Steps, true
	return c, nil
}

// sinkError classifies a sink's refusal.
func sinkError(err error) *Error {
	var e *Error
	switch {
	case errors.Is(err, scheduler.ErrNotRunning):
		e = newError(ErrNotRunning, "")
	case errors.Is(err, scheduler.ErrInvalid), errors.Is(err, scheduler.ErrUnknownJob):
		e = newError(ErrRefused, "")
	default:
		e = newError(ErrUnavailable, "the scheduler did not take the report")
		e.RetryAfter = 5
	}
	e.Cause = err
	return e
}

// pod returns the pod's state, made if new, marked used and held (until
// release). Beyond MaxPods the least recently used state that no report
// holds is forgotten; while every state is held (as many reports in
// flight as MaxPods) the bound is exceeded by those.
func (s *Server) pod(uid types.UID) *podState {
	s.mu.Lock()
	defer s.mu.Unlock()
	if p, ok := s.pods[uid]; ok {
		s.order.MoveToBack(p.elem)
		p.users++
		return p
	}
	s.trim(s.cfg.MaxPods - 1)
	p := &podState{uid: uid, users: 1, b: bucket{every: s.cfg.Interval, burst: s.cfg.Burst}}
	p.elem = s.order.PushBack(p)
	s.pods[uid] = p
	return p
}

// release lets go of a state pod returned, and forgets the states the
// bound could not while they were held.
func (s *Server) release(p *podState) {
	s.mu.Lock()
	p.users--
	if len(s.pods) > s.cfg.MaxPods {
		s.trim(s.cfg.MaxPods)
	}
	s.mu.Unlock()
}

// trim forgets the least recently used states no report holds until at
// most n are left. The caller holds s.mu.
func (s *Server) trim(n int) {
	for el := s.order.Front(); el != nil && len(s.pods) > n; {
		old := el.Value.(*podState)
		next := el.Next()
		if old.users == 0 {
			s.order.Remove(el)
			delete(s.pods, old.uid)
			s.stats["pods_evicted"]++
		}
		el = next
	}
}

func (s *Server) count(what string) {
	s.mu.Lock()
	s.stats[what]++
	s.mu.Unlock()
}

// Stats returns counters of what the server did since New: "accepted",
// each refusal's code ("not_monotone", "rate_limited", ...), "review"
// (TokenReviews sent), "review_cached" (reviews reused), "pods_evicted";
// and the gauges "pods", "reviews_cached" and "refusals_cached". Its keys are fixed words,
// never a name a tenant writes.
func (s *Server) Stats() map[string]uint64 {
	s.mu.Lock()
	out := make(map[string]uint64, len(s.stats)+2)
	for k, v := range s.stats {
		out[k] = v
	}
	out["pods"] = uint64(len(s.pods))
	s.mu.Unlock()
	out["reviews_cached"] = uint64(s.reviews.len())
	out["refusals_cached"] = uint64(s.refusals.len())
	return out
}

// bucket is a token bucket: burst tokens, one more every `every`. It is
// not safe for concurrent use; its owner locks it.
type bucket struct {
	every  time.Duration
	burst  int
	tokens float64
	at     time.Time // when tokens was counted; zero: full
}

// take spends a token at now, or says how long until one is there.
func (b *bucket) take(now time.Time) (time.Duration, bool) {
	if b.at.IsZero() {
		b.tokens, b.at = float64(b.burst), now
	}
	if el := now.Sub(b.at); el > 0 {
		b.tokens = math.Min(float64(b.burst), b.tokens+float64(el)/float64(b.every))
		b.at = now
	}
	if b.tokens >= 1 {
		b.tokens--
		return 0, true
	}
	return time.Duration((1 - b.tokens) * float64(b.every)), false
}

// retrySeconds rounds a wait up to whole seconds, at least 1.
func retrySeconds(d time.Duration) int {
	return max(1, int(math.Ceil(d.Seconds())))
}
