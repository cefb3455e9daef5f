package leader

import (
	"context"
	"errors"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// When ctx ends, the leader's work stops first (its context cancelled)
// and the lease is released only after it has returned: a last save lands
// before the next leader can start.
func TestReleasesAfterStartReturns(t *testing.T) {
	cs := fake.NewClientset()
	var saved, releasedAfterSave, released atomic.Bool
	cs.PrependReactor("update", "leases", func(a k8stesting.Action) (bool, runtime.Object, error) {
		l := a.(k8stesting.UpdateAction).GetObject().(*coordinationv1.Lease)
		if l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity == "" {
			released.Store(true)
			releasedAfterSave.Store(saved.Load())
		}
		return false, nil, nil
	})
	ctx, cancel := context.WithCancel(context.Background())
	started := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, cancel, cs, slog.New(slog.DiscardHandler), true, "ns", "lease", func(sctx context.Context) error {
			close(started)
			<-sctx.Done()
			time.Sleep(200 * time.Millisecond) // the last save
			saved.Store(true)
			return sctx.Err()
		})
	}()
	select {
	case <-started:
	case <-time.After(10 * time.Second):
		t.Fatal("never led")
	}
	cancel()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return")
	}
	assert.True(t, saved.Load())
	assert.True(t, released.Load(), "the lease is released")
	assert.True(t, releasedAfterSave.Load(), "released only after the work returned")
}

// A failure of the leader's work is Run's error, and stops the process's
// context.
func TestStartFailureStops(t *testing.T) {
	cs := fake.NewClientset()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	boom := errors.New("boom")
	err := Run(ctx, cancel, cs, slog.New(slog.DiscardHandler), true, "ns", "lease", func(context.Context) error { return boom })
	require.ErrorIs(t, err, boom)
	assert.Error(t, ctx.Err(), "stop was called")
}
