package admission

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A failed write is retried after 1 s, 2 s, 4 s, ... at most 5 minutes;
// a success forgets its failures.
func TestRetrierBackoff(t *testing.T) {
	r := newRetrier(&Config{})
	t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	now := t0
	assert.True(t, r.due("a", now))
	var waits []time.Duration
	for range 12 {
		r.failed("a", now)
		next := now
		for !r.due("a", next) {
			next = next.Add(time.Second)
		}
		waits = append(waits, next.Sub(now))
		now = next
	}
	s := time.Second
	assert.Equal(t, []time.Duration{s, 2 * s, 4 * s, 8 * s, 16 * s, 32 * s, 64 * s, 128 * s, 256 * s, 300 * s, 300 * s, 300 * s}, waits)
	assert.True(t, r.due("b", now), "another object is not backed off")
	r.failed("a", now)
	assert.False(t, r.due("a", now))
	r.succeeded("a")
	assert.True(t, r.due("a", now))
	r.failed("a", now)
	assert.False(t, r.due("a", now.Add(999*time.Millisecond)), "back to 1 s after a success")
	assert.True(t, r.due("a", now.Add(time.Second)))
}

// Each tenant has the budget per pass (a sweep), refilled by the budget
// at each pass up to it; charges past the budget are a debt later passes
// pay; tenants do not share.
func TestRetrierBudget(t *testing.T) {
	r := newRetrier(&Config{TenantBudget: 4})
	assert.True(t, r.take("a", 3))
	assert.False(t, r.take("a", 2), "1 left")
	assert.True(t, r.take("a", 1))
	assert.True(t, r.take("b", 4), "b's own budget")
	r.newPass(false)
	assert.True(t, r.take("a", 4))
	r.charge("a", 6) // -6, floored at -4
	r.newPass(false)
	assert.False(t, r.take("a", 1), "the debt is paid first")
	r.newPass(false)
	assert.True(t, r.take("a", 4))
	r.newPass(false)
	r.newPass(false)
	assert.False(t, r.take("a", 5), "refilled up to the budget only")
	assert.True(t, r.take("a", 4))
	r.charge("a", 0)
	r.charge("a", -3)
	assert.False(t, r.take("a", 1), "no negative charge")
	// A round's own sweep spends nothing and charges nothing.
	r.newPass(true)
	assert.True(t, r.take("a", 100))
	r.charge("a", 100)
	r.newPass(false)
	assert.True(t, r.take("a", 4), "the round left the budget whole")
}

// The tracked objects and tenants are bounded: past maxRetryEntries, the
// objects not tried for a while are forgotten and the full buckets
// dropped.
func TestRetrierBounded(t *testing.T) {
	r := newRetrier(&Config{TenantBudget: 1})
	now := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	for i := range maxRetryEntries {
		r.failed(fmt.Sprint(i), now)
		r.take(fmt.Sprint(i), 1)
	}
	require.Len(t, r.backoff, maxRetryEntries)
	r.failed("new", now)
	assert.Len(t, r.backoff, maxRetryEntries, "nothing stale yet: not tracked")
	later := now.Add(3 * retryMax)
	r.failed("new", later)
	assert.Len(t, r.backoff, 1, "the stale ones are forgotten")
	r.newPass(false)
	r.take("new", 1)
	assert.Len(t, r.buckets, 1, "the full buckets are dropped")
}

func TestConfigRemovalChecks(t *testing.T) {
	pol, err := PolicyByName("fifo")
	require.NoError(t, err)
	neg := int64(-1)
	for name, cfg := range map[string]Config{
		"max grace":      {MaxDeletionGrace: -time.Second},
		"max grace long": {MaxDeletionGrace: 2 * time.Hour},
		"pod grace":      {PodDeletionGrace: &neg},
		"short key":      {CopyKey: []byte("short")},
		"budget":         {TenantBudget: -1},
	} {
		cfg.Client, cfg.Policy, cfg.NoState = nil, pol, true
		err := cfg.checkRemoval()
		assert.ErrorIs(t, err, ErrConfig, name)
	}
	assert.NoError(t, (&Config{MaxDeletionGrace: time.Hour, CopyKey: testCopyKey, TenantBudget: 100}).checkRemoval())
}
