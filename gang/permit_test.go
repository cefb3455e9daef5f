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
	c := &Coscheduler{Timeout: 50 * time.Millisecond}
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
	c := &Coscheduler{}
	require.NoError(t, c.SetGroup("g", 2))
	assert.Error(t, c.SetGroup("g", 2))
	assert.Error(t, c.SetGroup("h", 0))
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
