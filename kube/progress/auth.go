package progress

import (
	"container/list"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

const (
	// DefaultAudience is the audience the pods' projected tokens are made
	// for (the volume's serviceAccountToken.audience) and that the server
	// asks the TokenReview API to check.
	DefaultAudience = "gpusched-progress"
	// MaxToken is the longest bearer token the server sends for review
	// (a projected token is about 1 KiB).
	MaxToken = 8 << 10

	saPrefix = "system:serviceaccount:"
	// The extra fields of a token bound to a pod (TokenRequest with a
	// boundObjectRef of kind Pod; the kubelet's projected tokens).
	extraPodName = "authentication.kubernetes.io/pod-name"
	extraPodUID  = "authentication.kubernetes.io/pod-uid"
)

// Caller is who a report comes from: the pod a service account token is
// bound to, as the TokenReview API vouches for it. A Caller is a value:
// safe for concurrent use.
type Caller struct {
	// Namespace is the service account's namespace, which is the pod's.
	Namespace string
	// ServiceAccount is the account's name.
	ServiceAccount string
	// Pod and UID name the pod the token is bound to.
	Pod string
	UID types.UID
}

// review is a cached TokenReview outcome: a caller, or a refusal.
type review struct {
	caller  Caller
	err     *Error // nil for a caller
	expires time.Time
	elem    *list.Element // in reviewCache.order
	key     [sha256.Size]byte
}

// reviewCache keeps recent reviews by the token's SHA-256 (never the
// token), at most max, each until its expiry; the oldest goes first.
type reviewCache struct {
	mu    sync.Mutex
	max   int
	byKey map[[sha256.Size]byte]*review
	order list.List // oldest first
}

func (c *reviewCache) get(key [sha256.Size]byte, now time.Time) (*review, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	r, ok := c.byKey[key]
	if !ok {
		return nil, false
	}
	if !now.Before(r.expires) {
		c.order.Remove(r.elem)
		delete(c.byKey, key)
		return nil, false
	}
	return r, true
}

func (c *reviewCache) put(r *review) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if old, ok := c.byKey[r.key]; ok {
		c.order.Remove(old.elem)
		delete(c.byKey, r.key)
	}
	for len(c.byKey) >= c.max {
		front := c.order.Front()
		old := front.Value.(*review)
		c.order.Remove(front)
		delete(c.byKey, old.key)
	}
	r.elem = c.order.PushBack(r)
	c.byKey[r.key] = r
}

func (c *reviewCache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.byKey)
}

// bearer extracts the token of an Authorization header, checked for the
// characters and length of a JWT before anyone sees it.
func bearer(header string) (string, *Error) {
	scheme, tok, ok := strings.Cut(header, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", newError(ErrUnauthenticated, "no bearer token")
	}
	tok = strings.TrimSpace(tok)
	if tok == "" || len(tok) > MaxToken {
		return "", newError(ErrUnauthenticated, "bearer token empty or too long")
	}
	for i := 0; i < len(tok); i++ {
		if !jwtByte(tok[i]) {
			return "", newError(ErrUnauthenticated, "bearer token is not a JWT")
		}
	}
	return tok, nil
}

// jwtByte reports whether c may be in a JWT (base64url and dots).
func jwtByte(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_' || c == '.'
}

// authenticate returns the caller of a token: from the cache, or by a
// TokenReview for the server's audience.
func (s *Server) authenticate(ctx context.Context, tok string) (Caller, *Error) {
	key := sha256.Sum256([]byte(tok))
	now := s.now()
	if r, ok := s.reviews.get(key, now); ok {
		s.count("review_cached")
		return r.caller, nil
	}
	if r, ok := s.refusals.get(key, now); ok {
		s.count("review_cached")
		return Caller{}, r.err
	}
	s.reviewMu.Lock()
	wait, ok := s.reviewLimit.take(now)
	s.reviewMu.Unlock()
	if !ok {
		e := newError(ErrRateLimited, "too many new tokens to review; try again")
		e.RetryAfter = retrySeconds(wait)
		return Caller{}, e
	}
	s.count("review")
	ctx, cancel := context.WithTimeout(ctx, s.cfg.ReviewTimeout)
	defer cancel()
	res, err := s.cfg.Client.AuthenticationV1().TokenReviews().Create(ctx, &authnv1.TokenReview{
		Spec: authnv1.TokenReviewSpec{Token: tok, Audiences: []string{s.cfg.Audience}},
	}, metav1.CreateOptions{})
	if err != nil {
		e := newError(ErrUnavailable, "token review failed")
		e.RetryAfter = 5
		e.Cause = err
		return Caller{}, e // not cached: the next report reviews again
	}
	caller, e := s.judge(res.Status)
	r := &review{key: key, caller: caller, err: e, expires: now.Add(s.cfg.ReviewTTL)}
	if e != nil {
		r.expires = now.Add(s.cfg.RefusalTTL)
	} else if exp, ok := tokenExpiry(tok); ok && exp.Before(r.expires) {
		// Never trust a review past the token's own expiry (the review
		// vouched for the token's bytes, so its exp claim is the API
		// server's).
		r.expires = exp
	}
	if e != nil {
		s.refusals.put(r) // kept apart: refused tokens never push out accepted ones
	} else {
		s.reviews.put(r)
	}
	return caller, e
}

// judge turns a TokenReview's status into a caller: authenticated for the
// server's audience, a service account, bound to a pod (by name and UID).
func (s *Server) judge(st authnv1.TokenReviewStatus) (Caller, *Error) {
	if !st.Authenticated {
		e := newError(ErrUnauthenticated, "")
		if st.Error != "" {
			e.Cause = fmt.Errorf("token review: %s", st.Error)
		}
		return Caller{}, e
	}
	// An API server that honours spec.audiences echoes the ones the
	// token is good for; one that does not leaves them empty: both are
	// refused unless the server's audience is among them.
	if !slices.Contains(st.Audiences, s.cfg.Audience) {
		return Caller{}, newError(ErrUnauthenticated, "token not issued for this audience")
	}
	rest, ok := strings.CutPrefix(st.User.Username, saPrefix)
	ns, sa, ok2 := strings.Cut(rest, ":")
	if !ok || !ok2 || ns == "" || sa == "" || strings.Contains(sa, ":") {
		return Caller{}, newError(ErrForbidden, "not a service account")
	}
	pod, okPod := single(st.User.Extra[extraPodName])
	uid, okUID := single(st.User.Extra[extraPodUID])
	if !okPod || !okUID {
		return Caller{}, newError(ErrForbidden, "token not bound to a pod")
	}
	return Caller{Namespace: ns, ServiceAccount: sa, Pod: pod, UID: types.UID(uid)}, nil
}

// single is the one non-empty value of an extra field.
func single(v authnv1.ExtraValue) (string, bool) {
	if len(v) != 1 || v[0] == "" {
		return "", false
	}
	return v[0], true
}

// tokenExpiry reads the exp claim of a JWT's payload (unverified: call it
// only on a token the API server accepted).
func tokenExpiry(tok string) (time.Time, bool) {
	parts := strings.Split(tok, ".")
	if len(parts) != 3 {
		return time.Time{}, false
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return time.Time{}, false
	}
	var claims struct {
		Exp *int64 `json:"exp"`
	}
	if err := json.Unmarshal(payload, &claims); err != nil || claims.Exp == nil {
		return time.Time{}, false
	}
	return time.Unix(*claims.Exp, 0), true
}
