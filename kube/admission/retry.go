package admission

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// DefaultTenantBudget is Config.TenantBudget's default: a tenant's
// workloads cost a sweep (Run sweeps every second) at most 10 requests,
// a tenth of the controller's client (100 QPS by default).
const DefaultTenantBudget = 10

// The backoff of a failed write: retried after retryBase, then twice as
// long after each further failure, at most retryMax (Kubernetes'
// controllers back off the same way: client-go's
// workqueue.DefaultTypedControllerRateLimiter, 5 ms to 1000 s).
const (
	retryBase = time.Second
	retryMax  = 5 * time.Minute
	// maxRetryEntries bounds the objects and tenants tracked.
	maxRetryEntries = 1 << 16
)

// checkRemoval checks the settings of preemption, deletion, requeue and
// their retries.
func (c *Config) checkRemoval() error {
	switch {
	case c.MaxDeletionGrace < 0 || c.MaxDeletionGrace > time.Hour:
		return fmt.Errorf("%w: max deletion grace %v (want 0 to 1h)", ErrConfig, c.MaxDeletionGrace)
	case c.PodDeletionGrace != nil && *c.PodDeletionGrace < 0:
		return fmt.Errorf("%w: pod deletion grace %d s (want >= 0)", ErrConfig, *c.PodDeletionGrace)
	case len(c.CopyKey) > 0 && (len(c.CopyKey) < MinCopyKeyBytes || len(c.CopyKey) > maxCopyKeyBytes):
		return fmt.Errorf("%w: a copy key of %d bytes (want %d to %d)", ErrConfig, len(c.CopyKey), MinCopyKeyBytes, maxCopyKeyBytes)
	case c.TenantBudget < 0 || c.TenantBudget > 1e6:
		return fmt.Errorf("%w: tenant budget %d (want 0 to 1e6)", ErrConfig, c.TenantBudget)
	}
	return nil
}

// retrier paces the writes of the sweeps: a capped exponential backoff
// per object (by a key of the caller's; time is the caller's, Config.Now)
// and a budget of requests per tenant and sweep, a token bucket that each
// sweep (pass) refills by the budget, up to the budget. Safe for
// concurrent use (the writes of a sweep run in parallel).
type retrier struct {
	budget int

	mu sync.Mutex
	// unbounded: the pass under way is a round's own sweep (newPass).
	unbounded bool
	pass      int64
	buckets   map[string]*bucket
	backoff   map[string]backoff
}

type bucket struct {
	tokens int
	pass   int64 // the pass it was last refilled in
}

type backoff struct {
	fails int
	next  time.Time
}

func newRetrier(cfg *Config) *retrier {
	r := &retrier{budget: cfg.TenantBudget, buckets: map[string]*bucket{}, backoff: map[string]backoff{}}
	if r.budget == 0 {
		r.budget = DefaultTenantBudget
	}
	return r
}

// newPass starts a sweep: every tenant's budget is refilled. A round's
// own sweep (unbounded) spends no budget: it comes once a round, not
// once a second, and what it writes is bounded by the workloads, so the
// preempted pods of a round are back, gated, before its decisions
// (backoff still applies).
func (r *retrier) newPass(unbounded bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.pass++
	r.unbounded = unbounded
}

// due reports whether the object's backoff lets it be tried at now.
func (r *retrier) due(key string, now time.Time) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	b, ok := r.backoff[key]
	return !ok || !now.Before(b.next)
}

// failed backs the object off: retryBase after its first failure, twice
// as long after each next one, at most retryMax.
func (r *retrier) failed(key string, now time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	b, ok := r.backoff[key]
	if !ok && len(r.backoff) >= maxRetryEntries {
		r.pruneBackoff(now)
		if len(r.backoff) >= maxRetryEntries {
			return // unpaced, but still within its tenant's budget
		}
	}
	b.fails = min(b.fails+1, 62)
	d := retryMax
	if shift := b.fails - 1; shift < 30 && retryBase<<shift < retryMax {
		d = retryBase << shift
	}
	b.next = now.Add(d)
	r.backoff[key] = b
}

// succeeded forgets the object's failures.
func (r *retrier) succeeded(key string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.backoff, key)
}

// pruneBackoff forgets the objects not tried for a while (gone, most).
func (r *retrier) pruneBackoff(now time.Time) {
	for k, b := range r.backoff {
		if now.Sub(b.next) > 2*retryMax {
			delete(r.backoff, k)
		}
	}
}

// take spends n of the tenant's tokens if it has them; it reports
// whether it did.
func (r *retrier) take(tenant string, n int) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.unbounded {
		return true
	}
	b := r.refill(tenant)
	if b.tokens < n {
		return false
	}
	b.tokens -= n
	return true
}

// charge spends n tokens whatever the tenant has (the requests that
// follow those a take paid for): a debt of at most one budget, which
// the next passes refill before the tenant's next take.
func (r *retrier) charge(tenant string, n int) {
	if n <= 0 {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.unbounded {
		return
	}
	b := r.refill(tenant)
	b.tokens = max(b.tokens-n, -r.budget)
}

// refill returns the tenant's bucket, refilled for the passes since its
// last (a new one is full). Under r.mu.
func (r *retrier) refill(tenant string) *bucket {
	b := r.buckets[tenant]
	if b == nil {
		if len(r.buckets) >= maxRetryEntries {
			for k, o := range r.buckets {
				if o.pass < r.pass {
					delete(r.buckets, k) // refilled since: at most a budget's debt forgiven
				}
			}
		}
		b = &bucket{tokens: r.budget, pass: r.pass}
		if len(r.buckets) < maxRetryEntries {
			r.buckets[tenant] = b
		}
		return b
	}
	if d := r.pass - b.pass; d > 0 {
		b.tokens = int(min(int64(r.budget), int64(b.tokens)+d*int64(r.budget)))
		b.pass = r.pass
	}
	return b
}

// tenantOf names the tenant whose budget a namespace's requests spend:
// its tenant's name, or the namespace for one no tenant owns.
func (c *Controller) tenantOf(ns string) string {
	if c.ten != nil {
		if pl, err := c.ten.Resolve(ns, nil); err == nil && pl.Tenant != nil {
			return "tenant/" + pl.Tenant.Name
		}
	}
	return "namespace/" + ns
}

// sweepDelete deletes a preempted pod whose grace is over, its copy kept
// (deleteAndRequeue), when its backoff and its tenant's budget allow; it
// reports whether it did.
func (c *Controller) sweepDelete(ctx context.Context, key string, p *corev1.Pod, now time.Time) bool {
	bk := "delete/" + string(p.UID)
	if !c.retry.due(bk, now) || !c.retry.take(c.tenantOf(p.Namespace), 2) {
		return false
	}
	if err := c.deleteAndRequeue(ctx, key, p); err != nil {
		c.retry.failed(bk, now)
		c.log.Warn("delete preempted pod", "pod", p.Namespace+"/"+p.Name, "err", err)
		return false
	}
	c.retry.succeeded(bk)
	return true
}

// withinBudget returns the workloads a sweep may preempt for running
// without admission within their tenants' budgets (two requests a pod:
// its copy and its deletion; one for a Job); the others are hinted again
// for a later sweep (a round preempts them in any case).
func (c *Controller) withinBudget(ws []*workload) []*workload {
	var out []*workload
	var later []string
	for _, w := range ws {
		cost := 1
		if w.kind != kindJob {
			cost = max(1, 2*len(w.bypass))
		}
		switch {
		case !w.jobRun && len(w.bypass) == 0:
		case c.retry.take(c.tenantOf(w.ns), cost):
		default:
			later = append(later, w.key)
			continue
		}
		out = append(out, w)
	}
	c.caches.rehint(later)
	return out
}

// rehint notes workloads again for the next Sweep.
func (k *caches) rehint(keys []string) {
	if len(keys) == 0 {
		return
	}
	k.hintMu.Lock()
	defer k.hintMu.Unlock()
	for _, key := range keys {
		if len(k.hints) < maxRecords {
			k.hints[key] = true
		}
	}
}
