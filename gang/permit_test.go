package gang

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// run starts n members of a group concurrently and returns their results.
func runMembers(c *Coscheduler, group string, n int) []error {
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			m := fmt.Sprintf("m%d", i)
			switch st, _ := c.Permit(group, m); st {
			case Allow:
			case Wait:
				errs[i] = c.Wait(context.Background(), group, m)
			default:
				errs[i] = errors.New("rejected at once")
			}
		}()
	}
	wg.Wait()
	return errs
}

func TestCoschedulerAllTogether(t *testing.T) {
	c := &Coscheduler{Timeout: 5 * time.Second}
	require.NoError(t, c.SetGroup("job", 8))
	for i, err := range runMembers(c, "job", 8) {
		assert.NoError(t, err, "member %d", i)
	}
	// A ninth member of a complete group is allowed at once.
	st, _ := c.Permit("job", "m8")
	assert.Equal(t, Allow, st)
	// The same member twice is rejected.
	st, _ = c.Permit("job", "m8")
	assert.Equal(t, Reject, st)
	st, _ = c.Permit("nope", "m")
	assert.Equal(t, Reject, st)
}

// Members of a group that never completes are all rejected at the timeout;
// two groups waiting at once do not block each other.
func TestCoschedulerTimeout(t *testing.T) {
	c := &Coscheduler{Timeout: 50 * time.Millisecond, Backoff: -1}
	require.NoError(t, c.SetGroup("a", 4))
	require.NoError(t, c.SetGroup("b", 3))
	var wg sync.WaitGroup
	var errA, errB []error
	wg.Add(2)
	go func() { defer wg.Done(); errA = runMembers(c, "a", 3) }()
	go func() { defer wg.Done(); errB = runMembers(c, "b", 3) }()
	wg.Wait()
	for _, err := range errA {
		assert.ErrorIs(t, err, ErrRejected)
	}
	for _, err := range errB {
		assert.NoError(t, err)
	}
	// After the timeout the group starts over and can complete.
	for _, err := range runMembers(c, "a", 4) {
		assert.NoError(t, err)
	}
}

func TestCoschedulerRejectAndErrors(t *testing.T) {
	c := &Coscheduler{Backoff: -1}
	require.NoError(t, c.SetGroup("g", 2))
	require.NoError(t, c.SetGroup("g", 2), "declaring a group again is harmless")
	assert.ErrorIs(t, c.SetGroup("g", 3), ErrConflict)
	assert.ErrorIs(t, c.SetGroup("h", 0), ErrInvalid)
	assert.ErrorIs(t, c.SetGroup("", 1), ErrInvalid)
	st, left := c.Permit("g", "a")
	require.Equal(t, Wait, st)
	assert.Positive(t, left)
	done := make(chan error)
	go func() { done <- c.Wait(context.Background(), "g", "a") }()
	time.Sleep(10 * time.Millisecond)
	c.Reject("g")
	assert.ErrorIs(t, <-done, ErrRejected)
	assert.ErrorIs(t, c.Wait(context.Background(), "g", "zz"), ErrUnknownMember)
	ctx, cancel := context.WithCancel(context.Background())
	st, _ = c.Permit("g", "b")
	require.Equal(t, Wait, st)
	cancel()
	assert.ErrorIs(t, c.Wait(ctx, "g", "b"), context.Canceled)
	c.Delete("g")
	st, _ = c.Permit("g", "c")
	assert.Equal(t, Reject, st)
	assert.Equal(t, "wait", Wait.String())
}

// After a rejection the group backs off: members that ask during the
// window are rejected at once (they do not sit on their reservation for a
// whole timeout); a member rejected before it called Wait learns it at
// once; after the window the group gathers afresh.
func TestCoschedulerBackoff(t *testing.T) {
	c := &Coscheduler{Timeout: time.Hour, Backoff: 100 * time.Millisecond}
	require.NoError(t, c.SetGroup("g", 3))
	st, _ := c.Permit("g", "a")
	require.Equal(t, Wait, st)
	c.Reject("g") // say b failed its filter
	assert.ErrorIs(t, c.Wait(context.Background(), "g", "a"), ErrRejected, "rejected before it waited")
	st, left := c.Permit("g", "c")
	assert.Equal(t, Reject, st, "a late member fails at once")
	assert.True(t, left > 0 && left <= 100*time.Millisecond, "time left in the window: %v", left)
	assert.ErrorIs(t, c.Wait(context.Background(), "g", "c"), ErrRejected)
	time.Sleep(120 * time.Millisecond)
	for i, err := range runMembers(c, "g", 3) {
		assert.NoError(t, err, "member %d", i)
	}

	// A timeout starts the window too.
	c2 := &Coscheduler{Timeout: 20 * time.Millisecond, Backoff: time.Hour}
	require.NoError(t, c2.SetGroup("g", 2))
	st, _ = c2.Permit("g", "a")
	require.Equal(t, Wait, st)
	assert.ErrorIs(t, c2.Wait(context.Background(), "g", "a"), ErrRejected)
	st, _ = c2.Permit("g", "b")
	assert.Equal(t, Reject, st)
}

// A deleted group's name can be declared again, with another size, and an
// old timer does not reject the new group's members.
func TestCoschedulerReuseName(t *testing.T) {
	c := &Coscheduler{Timeout: 30 * time.Millisecond, Backoff: time.Hour}
	require.NoError(t, c.SetGroup("job", 2))
	st, _ := c.Permit("job", "m0")
	require.Equal(t, Wait, st)
	c.Delete("job")
	assert.ErrorIs(t, c.Wait(context.Background(), "job", "m0"), ErrUnknownMember, "the group is gone")
	require.NoError(t, c.SetGroup("job", 3), "the name is free again, and the backoff went with the group")
	c.Timeout = time.Hour
	st, _ = c.Permit("job", "m0")
	require.Equal(t, Wait, st)
	time.Sleep(60 * time.Millisecond) // the first group's timer would have fired by now
	done := make(chan error, 1)
	go func() { done <- c.Wait(context.Background(), "job", "m0") }()
	st, _ = c.Permit("job", "m1")
	require.Equal(t, Wait, st)
	st, _ = c.Permit("job", "m2")
	require.Equal(t, Allow, st)
	assert.NoError(t, <-done)

	// A completed group, deleted and declared again, admits the same members.
	c.Delete("job")
	require.NoError(t, c.SetGroup("job", 2))
	for i, err := range runMembers(c, "job", 2) {
		assert.NoError(t, err, "member %d", i)
	}
}

// Many groups gather, time out, back off and are deleted concurrently (run
// with -race).
func TestCoschedulerConcurrent(t *testing.T) {
	c := &Coscheduler{Timeout: 5 * time.Millisecond, Backoff: 2 * time.Millisecond}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			name := fmt.Sprint("g", g)
			for round := range 20 {
				_ = c.SetGroup(name, 1+g%3)
				runMembers(c, name, 1+(g+round)%3)
				if round%5 == 4 {
					c.Reject(name)
				}
				if round%7 == 6 {
					c.Delete(name)
				}
			}
		})
	}
	wg.Wait()
}
