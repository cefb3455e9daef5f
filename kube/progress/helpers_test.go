package progress_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gpusched/gpusched/kube/progress"
	authnv1 "k8s.io/api/authentication/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// clock is a settable clock, safe for concurrent use.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// token is what the fake API server knows of a token it issued.
type token struct {
	audiences []string
	user      authnv1.UserInfo
	exp       time.Time
}

// apiServer plays the TokenReview API over a fake clientset: it accepts
// the tokens it issued, for the audiences they were issued for, as the
// real one does (spec.audiences intersected with the token's; none left:
// unauthenticated).
type apiServer struct {
	cs      *fake.Clientset
	clock   *clock
	mu      sync.Mutex
	tokens  map[string]token
	fail    error    // returned by every review while set
	ignore  bool     // an API server that ignores spec.audiences
	asked   []string // the audiences of the last review
	reviews atomic.Int64
	n       int
}

func newAPIServer(c *clock) *apiServer {
	a := &apiServer{cs: fake.NewClientset(), clock: c, tokens: map[string]token{}}
	a.cs.PrependReactor("create", "tokenreviews", func(act k8stesting.Action) (bool, runtime.Object, error) {
		a.reviews.Add(1)
		tr := act.(k8stesting.CreateAction).GetObject().(*authnv1.TokenReview).DeepCopy()
		a.mu.Lock()
		defer a.mu.Unlock()
		if a.fail != nil {
			return true, nil, a.fail
		}
		a.asked = slices.Clone(tr.Spec.Audiences)
		t, ok := a.tokens[tr.Spec.Token]
		if !ok || !a.clock.Now().Before(t.exp) {
			tr.Status = authnv1.TokenReviewStatus{Error: "invalid bearer token"}
			return true, tr, nil
		}
		if a.ignore {
			tr.Status = authnv1.TokenReviewStatus{Authenticated: true, User: t.user}
			return true, tr, nil
		}
		var both []string
		for _, au := range tr.Spec.Audiences {
			if slices.Contains(t.audiences, au) {
				both = append(both, au)
			}
		}
		if len(both) == 0 {
			tr.Status = authnv1.TokenReviewStatus{Error: "token audiences are invalid for the target audiences"}
			return true, tr, nil
		}
		tr.Status = authnv1.TokenReviewStatus{Authenticated: true, User: t.user, Audiences: both}
		return true, tr, nil
	})
	return a
}

// issue makes a JWT-shaped token that expires in an hour.
func (a *apiServer) issue(t token) string {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.n++
	if t.exp.IsZero() {
		t.exp = a.clock.Now().Add(time.Hour)
	}
	enc := base64.RawURLEncoding.EncodeToString
	payload, _ := json.Marshal(map[string]any{"exp": t.exp.Unix(), "n": a.n})
	tok := enc([]byte(`{"alg":"RS256"}`)) + "." + enc(payload) + "." + enc(fmt.Appendf(nil, "sig%d", a.n))
	a.tokens[tok] = t
	return tok
}

// podToken issues a projected token for the audience, bound to a pod of
// the namespace's service account "trainer".
func (a *apiServer) podToken(audience, ns, pod string, uid types.UID) string {
	return a.issue(token{
		audiences: []string{audience},
		user: authnv1.UserInfo{
			Username: "system:serviceaccount:" + ns + ":trainer",
			Groups:   []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"},
			Extra: map[string]authnv1.ExtraValue{
				"authentication.kubernetes.io/pod-name": {pod},
				"authentication.kubernetes.io/pod-uid":  {string(uid)},
			},
		},
	})
}

// resolver knows pods by namespace, name and UID.
type resolver struct {
	mu   sync.Mutex
	pods map[string]string // ns/name/uid -> workload
}

func (r *resolver) add(ns, pod string, uid types.UID, key string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.pods == nil {
		r.pods = map[string]string{}
	}
	r.pods[ns+"/"+pod+"/"+string(uid)] = key
}

func (r *resolver) Workload(ns, pod string, uid types.UID) (string, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	k, ok := r.pods[ns+"/"+pod+"/"+string(uid)]
	return k, ok
}

// got is one report the sink took.
type got struct {
	key   string
	steps float64
	at    time.Time
}

// sink records reports; err, while set, refuses them.
type sink struct {
	mu   sync.Mutex
	got  []got
	err  error
	busy map[string]bool // workloads in Progress now, to catch overlaps
	bad  atomic.Int64    // overlapping calls for one workload
}

func (s *sink) Progress(key string, steps float64, at time.Time) error {
	s.mu.Lock()
	if s.busy == nil {
		s.busy = map[string]bool{}
	}
	if s.busy[key] {
		s.bad.Add(1)
	}
	s.busy[key] = true
	err := s.err
	s.mu.Unlock()
	time.Sleep(time.Microsecond) // widen the window for overlaps
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.busy, key)
	if err != nil {
		return err
	}
	s.got = append(s.got, got{key, steps, at})
	return nil
}

func (s *sink) all() []got {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.got)
}

func (s *sink) setErr(err error) {
	s.mu.Lock()
	s.err = err
	s.mu.Unlock()
}

// env is a server over a fake API server, a resolver and a sink; pod
// "a/p1" (UID u1) is workload "job/a/train".
type env struct {
	t     testing.TB
	clock *clock
	api   *apiServer
	res   *resolver
	sink  *sink
	srv   *progress.Server
	tok   string // p1's token
}

var t0 = time.Date(2026, 12, 7, 6, 0, 0, 0, time.UTC)

func newEnv(t testing.TB, cfg progress.Config) *env {
	t.Helper()
	e := &env{t: t, clock: &clock{t: t0}, res: &resolver{}, sink: &sink{}}
	e.api = newAPIServer(e.clock)
	cfg.Client, cfg.Resolver, cfg.Sink, cfg.Now = e.api.cs, e.res, e.sink, e.clock.Now
	srv, err := progress.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	e.srv = srv
	e.res.add("a", "p1", "u1", "job/a/train")
	e.tok = e.api.podToken(progress.DefaultAudience, "a", "p1", "u1")
	return e
}

// answer is a response: its status, Retry-After and body's fields.
type answer struct {
	status int
	retry  string
	code   string
	msg    string
	raw    string
}

func (e *env) post(tok, body string) answer {
	e.t.Helper()
	return e.do(http.MethodPost, progress.Path, tok, "application/json", body)
}

func (e *env) do(method, path, tok, ctype, body string) answer {
	e.t.Helper()
	req := httptest.NewRequest(method, path, bytes.NewBufferString(body))
	if tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	rec := httptest.NewRecorder()
	e.srv.ServeHTTP(rec, req)
	a := answer{status: rec.Code, retry: rec.Header().Get("Retry-After"), raw: rec.Body.String()}
	if rec.Code != http.StatusNoContent {
		var b struct{ Error, Message string }
		if err := json.Unmarshal(rec.Body.Bytes(), &b); err != nil {
			e.t.Fatalf("%d answer %q is not JSON: %v", rec.Code, rec.Body.String(), err)
		}
		a.code, a.msg = b.Error, b.Message
	} else if rec.Body.Len() != 0 {
		e.t.Fatalf("204 with a body %q", rec.Body.String())
	}
	return a
}

func steps(n float64) string { return fmt.Sprintf(`{"steps": %v}`, n) }

// want checks an answer's status and code.
func (e *env) want(a answer, status int, code string) {
	e.t.Helper()
	if a.status != status || a.code != code {
		e.t.Fatalf("answer %d %q (%s), want %d %q", a.status, a.code, a.msg, status, code)
	}
}

var errBoom = errors.New("boom")
