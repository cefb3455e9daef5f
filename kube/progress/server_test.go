package progress_test

import (
	"errors"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gpusched/gpusched/kube/progress"
	"github.com/gpusched/gpusched/scheduler"
	authnv1 "k8s.io/api/authentication/v1"
	"k8s.io/apimachinery/pkg/types"
)

// TestTokenFlow: a pod's projected token for the server's audience is
// reviewed with that audience, and its steps reach the sink under its
// workload's key at the server's time.
func TestTokenFlow(t *testing.T) {
	e := newEnv(t, progress.Config{})
	e.want(e.post(e.tok, `{"steps": 1200, "total": 50000}`), http.StatusNoContent, "")
	if !slices.Equal(e.api.asked, []string{progress.DefaultAudience}) {
		t.Errorf("review asked for audiences %q, want [%s]", e.api.asked, progress.DefaultAudience)
	}
	want := []got{{"job/a/train", 1200, t0}}
	if g := e.sink.all(); !slices.Equal(g, want) {
		t.Errorf("sink got %v, want %v", g, want)
	}
	// Another audience configured: the same token is refused.
	e2 := newEnv(t, progress.Config{Audience: "elsewhere"})
	tok := e2.api.podToken(progress.DefaultAudience, "a", "p1", "u1")
	e2.want(e2.post(tok, steps(1)), http.StatusUnauthorized, "unauthenticated")
	if !slices.Equal(e2.api.asked, []string{"elsewhere"}) {
		t.Errorf("review asked for audiences %q, want [elsewhere]", e2.api.asked)
	}
}

// TestWrongAudience: a token made for another audience (the API server's
// own, or any other) is refused, and so is one an API server vouches for
// without saying its audiences.
func TestWrongAudience(t *testing.T) {
	e := newEnv(t, progress.Config{})
	for _, aud := range []string{"https://kubernetes.default.svc", "vault", ""} {
		tok := e.api.podToken(aud, "a", "p1", "u1")
		a := e.post(tok, steps(1))
		e.want(a, http.StatusUnauthorized, "unauthenticated")
		if strings.Contains(a.msg, "audiences are invalid") {
			t.Errorf("the review's error was sent back: %q", a.msg)
		}
	}
	e.api.mu.Lock()
	e.api.ignore = true
	e.api.mu.Unlock()
	tok := e.api.podToken(progress.DefaultAudience, "a", "p1", "u1")
	e.want(e.post(tok, steps(1)), http.StatusUnauthorized, "unauthenticated")
	if g := e.sink.all(); len(g) != 0 {
		t.Errorf("sink got %v", g)
	}
}

// TestCallers: only a service account's token bound to a pod is a
// caller; users, unbound (legacy Secret) tokens and tokens without a pod
// UID are forbidden, and headers that are no bearer token are refused
// before any review.
func TestCallers(t *testing.T) {
	e := newEnv(t, progress.Config{})
	bound := map[string]authnv1.ExtraValue{
		"authentication.kubernetes.io/pod-name": {"p1"},
		"authentication.kubernetes.io/pod-uid":  {"u1"},
	}
	forbidden := []authnv1.UserInfo{
		{Username: "alice", Extra: bound},
		{Username: "system:serviceaccount:a", Extra: bound},
		{Username: "system:serviceaccount::trainer", Extra: bound},
		{Username: "system:serviceaccount:a:trainer"},
		{Username: "system:serviceaccount:a:trainer", Extra: map[string]authnv1.ExtraValue{"authentication.kubernetes.io/pod-name": {"p1"}}},
		{Username: "system:serviceaccount:a:trainer", Extra: map[string]authnv1.ExtraValue{
			"authentication.kubernetes.io/pod-name": {"p1", "p2"},
			"authentication.kubernetes.io/pod-uid":  {"u1"},
		}},
		{Username: "system:serviceaccount:a:trainer", Extra: map[string]authnv1.ExtraValue{
			"authentication.kubernetes.io/pod-name": {"p1"},
			"authentication.kubernetes.io/pod-uid":  {""},
		}},
	}
	for _, u := range forbidden {
		tok := e.api.issue(token{audiences: []string{progress.DefaultAudience}, user: u})
		e.want(e.post(tok, steps(1)), http.StatusForbidden, "forbidden")
	}
	before := e.api.reviews.Load()
	for _, h := range []string{"", "Basic YTpi", "Bearer", "Bearer ", "Bearer a b", "Bearer " + strings.Repeat("a", progress.MaxToken+1), "Bearer tok\x00en", "Bearer {\"x\":1}"} {
		req := strings.NewReader(steps(1))
		r, _ := http.NewRequest(http.MethodPost, progress.Path, req)
		if h != "" {
			r.Header.Set("Authorization", h)
		}
		rec := &recorder{h: http.Header{}}
		e.srv.ServeHTTP(rec, r)
		if rec.code != http.StatusUnauthorized || !strings.HasPrefix(rec.h.Get("WWW-Authenticate"), "Bearer") {
			t.Errorf("Authorization %.20q: %d, WWW-Authenticate %q; want 401 Bearer", h, rec.code, rec.h.Get("WWW-Authenticate"))
		}
	}
	if n := e.api.reviews.Load() - before; n != 0 {
		t.Errorf("%d reviews for headers without a well-formed token, want 0", n)
	}
	e.want(e.post("not.a.token", steps(1)), http.StatusUnauthorized, "unauthenticated")
	if g := e.sink.all(); len(g) != 0 {
		t.Errorf("sink got %v", g)
	}
}

// recorder is a minimal ResponseWriter (httptest's would do; this one
// keeps the test free of a body check).
type recorder struct {
	h    http.Header
	code int
}

func (r *recorder) Header() http.Header         { return r.h }
func (r *recorder) Write(b []byte) (int, error) { return len(b), nil }
func (r *recorder) WriteHeader(c int)           { r.code = c }

// TestOtherNamespacesPod: a token of namespace b bound to a pod named as
// one of namespace a's, or an older pod of the same name (another UID),
// reports for nothing: the resolver is asked with the token's namespace,
// name and UID.
func TestOtherNamespacesPod(t *testing.T) {
	e := newEnv(t, progress.Config{})
	for _, c := range []struct {
		ns  string
		uid types.UID
	}{{"b", "u1"}, {"a", "u0"}, {"b", "u2"}} {
		tok := e.api.podToken(progress.DefaultAudience, c.ns, "p1", c.uid)
		e.want(e.post(tok, steps(5)), http.StatusNotFound, "unknown_pod")
	}
	// A pod the resolver does not know at all.
	tok := e.api.podToken(progress.DefaultAudience, "a", "notebook", "u9")
	e.want(e.post(tok, steps(5)), http.StatusNotFound, "unknown_pod")
	if g := e.sink.all(); len(g) != 0 {
		t.Errorf("sink got %v", g)
	}
	// Namespace b's own pod of a workload reports for its own workload only.
	e.res.add("b", "p1", "u2", "job/b/other")
	tok = e.api.podToken(progress.DefaultAudience, "b", "p1", "u2")
	e.want(e.post(tok, steps(5)), http.StatusNoContent, "")
	if g := e.sink.all(); len(g) != 1 || g[0].key != "job/b/other" {
		t.Errorf("sink got %v, want job/b/other only", g)
	}
}

// TestMonotone: steps may stay, not go back, within a pod; a refused
// report changes nothing.
func TestMonotone(t *testing.T) {
	e := newEnv(t, progress.Config{Burst: 100})
	for _, c := range []struct {
		steps  float64
		status int
	}{{10, 204}, {9, 409}, {10, 204}, {10.5, 204}, {0, 409}, {11, 204}} {
		a := e.post(e.tok, steps(c.steps))
		if a.status != c.status {
			t.Fatalf("steps %v: %d %q, want %d", c.steps, a.status, a.msg, c.status)
		}
		if c.status == 409 && (a.code != "not_monotone" || !strings.Contains(a.msg, "after 10")) {
			t.Errorf("steps %v: %q %q", c.steps, a.code, a.msg)
		}
	}
	var got []float64
	for _, g := range e.sink.all() {
		got = append(got, g.steps)
	}
	if want := []float64{10, 10, 10.5, 11}; !slices.Equal(got, want) {
		t.Errorf("sink got %v, want %v", got, want)
	}
}

// TestBodies: every malformed, out-of-range or over-size body is refused
// with its kind, and no answer echoes the token or the body.
func TestBodies(t *testing.T) {
	e := newEnv(t, progress.Config{Burst: 1000})
	cases := []struct {
		body   string
		status int
		code   string
	}{
		{`{"steps": NaN}`, 400, "malformed"},
		{`{"steps": Infinity}`, 400, "malformed"},
		{`{"steps": -Infinity}`, 400, "malformed"},
		{`{"steps": 1e400}`, 422, "out_of_range"},
		{`{"steps": -1}`, 422, "out_of_range"},
		{`{"steps": -1e-300}`, 422, "out_of_range"},
		{`{"steps": 1e16}`, 422, "out_of_range"},
		{`{"steps": 1000000000000001}`, 422, "out_of_range"},
		{`{"steps": 1, "total": -5}`, 422, "out_of_range"},
		{`{"steps": 1, "total": 1e300}`, 422, "out_of_range"},
		{`{"steps": "12"}`, 400, "malformed"},
		{`{"steps": null}`, 400, "malformed"},
		{`{"steps": true}`, 400, "malformed"},
		{`{"steps": [1]}`, 400, "malformed"},
		{`{}`, 400, "malformed"},
		{``, 400, "malformed"},
		{`[12]`, 400, "malformed"},
		{`12`, 400, "malformed"},
		{`null`, 400, "malformed"},
		{`{"steps": 1, "secretfield": 2}`, 400, "malformed"},
		{`{"steps": 1}{"steps": 2}`, 400, "malformed"},
		{`{"steps": 1, "steps": 2}`, 400, "malformed"},
		{`{"STEPS": 1}`, 400, "malformed"},
		{`{"steps": 1, "total": {"x": 1}}`, 400, "malformed"},
		{`{"steps" 1}`, 400, "malformed"},
		{`{"steps": 1,}`, 400, "malformed"},
		{`{"steps": 1} x`, 400, "malformed"},
		{`{"steps": 1`, 400, "malformed"},
		{"\xff\xfe", 400, "malformed"},
		{`{"steps": 1, "pad": "` + strings.Repeat("x", 2000) + `"}`, 413, "too_large"},
		{strings.Repeat(" ", progress.MaxBody) + `{"steps": 1}`, 413, "too_large"},
	}
	for _, c := range cases {
		a := e.post(e.tok, c.body)
		if a.status != c.status || a.code != c.code {
			t.Errorf("body %.40q: %d %q (%s), want %d %q", c.body, a.status, a.code, a.msg, c.status, c.code)
		}
		for _, secret := range []string{e.tok, strings.Split(e.tok, ".")[1], "secretfield", "xxxx", "Infinity"} {
			if strings.Contains(a.raw, secret) {
				t.Errorf("body %.40q: the answer %q echoes %.20q", c.body, a.raw, secret)
			}
		}
	}
	// The largest body allowed, and the bounds themselves, are taken.
	largest := `{"steps": 1e15}`
	largest += strings.Repeat(" ", progress.MaxBody-len(largest))
	e.want(e.post(e.tok, largest), 204, "")
	e2 := newEnv(t, progress.Config{})
	e2.want(e2.post(e2.tok, `{"steps": 0, "total": 0}`), 204, "")
	// A body not declared as JSON.
	e2.want(e2.do(http.MethodPost, progress.Path, e2.tok, "text/plain", steps(1)), 415, "content_type")
	if g := e.sink.all(); len(g) != 1 {
		t.Errorf("sink got %v, want the one valid report", g)
	}
}

// TestMethodAndPath: only POST to the path.
func TestMethodAndPath(t *testing.T) {
	e := newEnv(t, progress.Config{})
	req, _ := http.NewRequest(http.MethodGet, progress.Path, nil)
	rec := &recorder{h: http.Header{}}
	e.srv.ServeHTTP(rec, req)
	if rec.code != 405 || rec.h.Get("Allow") != "POST" {
		t.Errorf("GET: %d Allow %q, want 405 POST", rec.code, rec.h.Get("Allow"))
	}
	e.want(e.do(http.MethodPost, "/v1/progress/x", e.tok, "application/json", steps(1)), 404, "method")
	e.want(e.do(http.MethodPost, progress.Path, e.tok, "", steps(1)), 204, "") // no Content-Type: taken as JSON
}

// TestRateLimit: a pod's bucket holds Burst reports and fills at one per
// Interval; beyond it, 429 with the seconds to wait. Pods have buckets
// of their own.
func TestRateLimit(t *testing.T) {
	e := newEnv(t, progress.Config{})
	for i := range 3 {
		e.want(e.post(e.tok, steps(float64(i))), 204, "")
	}
	a := e.post(e.tok, steps(3))
	e.want(a, 429, "rate_limited")
	if a.retry != "5" {
		t.Errorf("Retry-After %q, want 5", a.retry)
	}
	e.clock.Add(2 * time.Second)
	if a := e.post(e.tok, steps(3)); a.status != 429 || a.retry != "3" {
		t.Errorf("2 s later: %d Retry-After %q, want 429 3", a.status, a.retry)
	}
	e.clock.Add(3 * time.Second)
	e.want(e.post(e.tok, steps(3)), 204, "")
	e.want(e.post(e.tok, steps(4)), 429, "rate_limited")
	// Another pod is not held back by p1.
	e.res.add("a", "p2", "u2", "job/a/train")
	tok2 := e.api.podToken(progress.DefaultAudience, "a", "p2", "u2")
	e.want(e.post(tok2, steps(3)), 204, "")
	// A long pause fills the bucket to Burst, no more.
	e.clock.Add(30 * time.Minute)
	for i := range 3 {
		e.want(e.post(e.tok, steps(float64(10+i))), 204, "")
	}
	e.want(e.post(e.tok, steps(20)), 429, "rate_limited")
	if n := len(e.sink.all()); n != 8 {
		t.Errorf("sink took %d reports, want 8", n)
	}
	if s := e.srv.Stats(); s["rate_limited"] != 4 || s["accepted"] != 8 {
		t.Errorf("stats %v", s)
	}
}

// TestReviewCache: a token is reviewed once per ReviewTTL, never past its
// expiry; a refused one once per RefusalTTL; a failed review is not kept;
// the cache holds at most MaxReviews.
func TestReviewCache(t *testing.T) {
	e := newEnv(t, progress.Config{Burst: 1000})
	for i := range 10 {
		e.want(e.post(e.tok, steps(float64(i))), 204, "")
		e.clock.Add(11 * time.Second) // 110 s in all, within the 2 min
	}
	if n := e.api.reviews.Load(); n != 1 {
		t.Errorf("%d reviews for 10 reports in 110 s, want 1", n)
	}
	e.clock.Add(10 * time.Second)
	e.want(e.post(e.tok, steps(20)), 204, "")
	if n := e.api.reviews.Load(); n != 2 {
		t.Errorf("%d reviews after the TTL, want 2", n)
	}
	// A token that expires in 20 s is reviewed again at its expiry (and
	// refused by then).
	short := e.api.issue(token{audiences: []string{progress.DefaultAudience}, exp: e.clock.Now().Add(20 * time.Second),
		user: authnv1.UserInfo{Username: "system:serviceaccount:a:trainer", Extra: map[string]authnv1.ExtraValue{
			"authentication.kubernetes.io/pod-name": {"p1"}, "authentication.kubernetes.io/pod-uid": {"u1"}}}})
	e.want(e.post(short, steps(21)), 204, "")
	e.clock.Add(20 * time.Second)
	e.want(e.post(short, steps(22)), 401, "unauthenticated")
	if n := e.api.reviews.Load(); n != 4 {
		t.Errorf("%d reviews, want 4 (the short token reviewed again at its expiry)", n)
	}
	// A refused token: once per RefusalTTL (10 s).
	bad := "eyJ.eyJ.bad"
	for range 5 {
		e.want(e.post(bad, steps(1)), 401, "unauthenticated")
	}
	e.clock.Add(10 * time.Second)
	e.want(e.post(bad, steps(1)), 401, "unauthenticated")
	if n := e.api.reviews.Load(); n != 6 {
		t.Errorf("%d reviews, want 6 (the refused token twice)", n)
	}
	// The API server fails: 503, not kept.
	e.api.mu.Lock()
	e.api.fail = errBoom
	e.api.mu.Unlock()
	e.clock.Add(time.Hour)
	a := e.post(e.tok, steps(30))
	e.want(a, 503, "unavailable")
	if strings.Contains(a.raw, "boom") || a.retry == "" {
		t.Errorf("answer %q Retry-After %q: the cause sent, or no Retry-After", a.raw, a.retry)
	}
	e.api.mu.Lock()
	e.api.fail = nil
	e.api.mu.Unlock()
	e.clock.Add(time.Second)
	e.want(e.post(e.tok, steps(30)), 401, "unauthenticated") // the token expired in the hour: reviewed again
	// Bounded: MaxReviews 2, three tokens.
	e2 := newEnv(t, progress.Config{MaxReviews: 2})
	var toks []string
	for i := range 3 {
		e2.res.add("a", fmt.Sprint("q", i), types.UID(fmt.Sprint("v", i)), "job/a/train")
		toks = append(toks, e2.api.podToken(progress.DefaultAudience, "a", fmt.Sprint("q", i), types.UID(fmt.Sprint("v", i))))
		e2.want(e2.post(toks[i], steps(1)), 204, "")
	}
	if n := e2.srv.Stats()["reviews_cached"]; n != 2 {
		t.Errorf("%d reviews cached, want 2", n)
	}
	e2.want(e2.post(toks[2], steps(2)), 204, "") // cached
	e2.want(e2.post(toks[0], steps(2)), 204, "") // the oldest, dropped: reviewed again
	if n := e2.api.reviews.Load(); n != 4 {
		t.Errorf("%d reviews, want 4", n)
	}
	// Refused tokens are kept apart: a flood of them pushes out no
	// accepted review.
	e3 := newEnv(t, progress.Config{MaxReviews: 32, ReviewQPS: 1e6, ReviewBurst: 1e5})
	e3.want(e3.post(e3.tok, steps(1)), 204, "")
	for i := range 100 {
		e3.want(e3.post(fmt.Sprintf("eyJ.eyJ.flood%d", i), steps(1)), 401, "unauthenticated")
	}
	e3.clock.Add(5 * time.Second)
	e3.want(e3.post(e3.tok, steps(2)), 204, "")
	if n, s := e3.api.reviews.Load(), e3.srv.Stats(); n != 101 || s["refusals_cached"] != 16 || s["reviews_cached"] != 1 {
		t.Errorf("%d reviews (want 101), stats %v", n, s)
	}
}

// TestReviewRate: new tokens are reviewed at most ReviewQPS a second
// (bursts of ReviewBurst); cached ones are not held back.
func TestReviewRate(t *testing.T) {
	e := newEnv(t, progress.Config{ReviewQPS: 1, ReviewBurst: 2})
	e.want(e.post(e.tok, steps(1)), 204, "")
	e.want(e.post("eyJ.eyJ.one", steps(1)), 401, "unauthenticated")
	a := e.post("eyJ.eyJ.two", steps(1))
	e.want(a, 429, "rate_limited")
	if a.retry != "1" {
		t.Errorf("Retry-After %q, want 1", a.retry)
	}
	e.want(e.post(e.tok, steps(2)), 204, "") // cached
	e.clock.Add(time.Second)
	e.want(e.post("eyJ.eyJ.two", steps(1)), 401, "unauthenticated")
}

// TestPodsBounded: beyond MaxPods, the pod that reported least recently
// is forgotten (its bucket and last steps with it).
func TestPodsBounded(t *testing.T) {
	e := newEnv(t, progress.Config{MaxPods: 2, Burst: 1})
	toks := []string{e.tok}
	for i := 2; i <= 3; i++ {
		uid := types.UID(fmt.Sprint("u", i))
		e.res.add("a", fmt.Sprint("p", i), uid, "job/a/train")
		toks = append(toks, e.api.podToken(progress.DefaultAudience, "a", fmt.Sprint("p", i), uid))
	}
	e.want(e.post(toks[0], steps(100)), 204, "")
	e.want(e.post(toks[1], steps(100)), 204, "")
	e.want(e.post(toks[1], steps(101)), 429, "rate_limited")
	e.want(e.post(toks[2], steps(100)), 204, "") // p1 forgotten
	s := e.srv.Stats()
	if s["pods"] != 2 || s["pods_evicted"] != 1 {
		t.Errorf("stats %v, want 2 pods, 1 evicted", s)
	}
	e.want(e.post(toks[1], steps(101)), 429, "rate_limited") // p2 kept
	e.want(e.post(toks[0], steps(50)), 204, "")              // p1 anew: its bucket full, its steps unknown
}

// TestSinkRefusals: the core's refusals are answered by kind; a refused
// report does not count as the pod's last.
func TestSinkRefusals(t *testing.T) {
	e := newEnv(t, progress.Config{Burst: 100})
	for _, c := range []struct {
		err    error
		status int
		code   string
	}{
		{fmt.Errorf("job/a/train: %w", scheduler.ErrNotRunning), 409, "not_running"},
		{fmt.Errorf("%w: steps out of order", scheduler.ErrInvalid), 422, "refused"},
		{fmt.Errorf("%w: job/a/train", scheduler.ErrUnknownJob), 422, "refused"},
		{errBoom, 503, "unavailable"},
	} {
		e.sink.setErr(c.err)
		a := e.post(e.tok, steps(100))
		e.want(a, c.status, c.code)
		if strings.Contains(a.raw, "job/a/train") || strings.Contains(a.raw, "boom") {
			t.Errorf("answer %q carries the cause", a.raw)
		}
	}
	e.sink.setErr(nil)
	e.want(e.post(e.tok, steps(5)), 204, "")
}

// TestLog: Log gets each refusal with its cause and caller.
func TestLog(t *testing.T) {
	var logged []error
	var callers []progress.Caller
	e := newEnv(t, progress.Config{Log: func(c progress.Caller, err *progress.Error) {
		logged = append(logged, err)
		callers = append(callers, c)
	}})
	e.sink.setErr(errBoom)
	e.want(e.post(e.tok, steps(1)), 503, "unavailable")
	if len(logged) != 1 || !errors.Is(logged[0], errBoom) || !errors.Is(logged[0], progress.ErrUnavailable) {
		t.Fatalf("logged %v", logged)
	}
	if want := (progress.Caller{Namespace: "a", ServiceAccount: "trainer", Pod: "p1", UID: "u1"}); callers[0] != want {
		t.Errorf("caller %+v, want %+v", callers[0], want)
	}
	e.want(e.post("eyJ.eyJ.x", steps(1)), 401, "unauthenticated")
	var pe *progress.Error
	if !errors.As(logged[1], &pe) || pe.Cause == nil || !strings.Contains(pe.Cause.Error(), "invalid bearer token") {
		t.Errorf("logged %v, want the review's error as the cause", logged[1])
	}
}

// TestConfig: bad configurations are refused, defaults filled in.
func TestConfig(t *testing.T) {
	e := newEnv(t, progress.Config{})
	c := e.srv.Config()
	if c.Audience != progress.DefaultAudience || c.Interval != 5*time.Second || c.Burst != 3 || c.MaxPods != 65536 || c.ReviewTTL != 2*time.Minute || c.MaxReviews != 65536 || c.ReviewQPS != 50 {
		t.Errorf("defaults %+v", c)
	}
	good := progress.Config{Client: e.api.cs, Resolver: e.res, Sink: e.sink}
	bad := []func(*progress.Config){
		func(c *progress.Config) { c.Client = nil },
		func(c *progress.Config) { c.Resolver = nil },
		func(c *progress.Config) { c.Sink = nil },
		func(c *progress.Config) { c.Interval = -time.Second },
		func(c *progress.Config) { c.ReviewTTL = 2 * time.Hour },
		func(c *progress.Config) { c.Burst = -1 },
		func(c *progress.Config) { c.MaxPods = 1 << 30 },
		func(c *progress.Config) { c.ReviewQPS = math.NaN() },
		func(c *progress.Config) { c.ReviewQPS = -1 },
	}
	for i, f := range bad {
		c := good
		f(&c)
		if _, err := progress.New(c); !errors.Is(err, progress.ErrConfig) {
			t.Errorf("case %d: %v, want ErrConfig", i, err)
		}
	}
}

// TestErrorText: one line, the kind and the detail.
func TestErrorText(t *testing.T) {
	_, err := progress.Decode([]byte(`{"steps": -3}`))
	if got, want := err.Error(), "progress: value out of range: steps -3 not in [0, 1e+15]"; got != want {
		t.Errorf("%q, want %q", got, want)
	}
	var pe *progress.Error
	if !errors.As(err, &pe) || pe.Status != 422 || pe.Code() != "out_of_range" || !errors.Is(err, progress.ErrOutOfRange) {
		t.Errorf("%+v", pe)
	}
}
