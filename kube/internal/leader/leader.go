// Package leader runs a controller's work under a Lease, as the kube
// binaries of gpusched do: one replica leads, the others wait.
package leader

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"sync"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// finishWithin is how long Run waits, once ctx ends, for start to return
// (its last save) before it releases the lease.
var finishWithin = 15 * time.Second

// Run runs start until ctx ends or start fails. With elect, start runs
// only while this process (named by its host name) holds the Lease
// namespace/name; losing the lease cancels start's context, and a failure
// of start releases the lease and cancels ctx through stop. When ctx
// ends, start's context is cancelled first and the lease is released
// once start has returned (at most 15 s later), so that what it
// does as it stops (a last save) lands before the next leader starts. A
// context cancellation is not an error.
func Run(ctx context.Context, stop func(), cs kubernetes.Interface, log *slog.Logger, elect bool, namespace, name string, start func(context.Context) error) error {
	if !elect {
		if err := start(ctx); err != nil && !errors.Is(err, context.Canceled) {
			return err
		}
		return nil
	}
	id, err := os.Hostname()
	if err != nil {
		return err
	}
	lock, err := resourcelock.New(resourcelock.LeasesResourceLock, namespace, name, cs.CoreV1(), cs.CoordinationV1(),
		resourcelock.ResourceLockConfig{Identity: id})
	if err != nil {
		return err
	}
	// The elector runs on a context of its own, cancelled once start has
	// returned after ctx ended (or at once if it never led).
	electCtx, release := context.WithCancel(context.WithoutCancel(ctx))
	defer release()
	var (
		mu       sync.Mutex
		leading  bool
		runErr   error
		finished = make(chan struct{})
	)
	go func() {
		select {
		case <-ctx.Done():
		case <-electCtx.Done():
			return
		}
		mu.Lock()
		led := leading
		mu.Unlock()
		if led {
			select {
			case <-finished:
			case <-time.After(finishWithin):
				log.Warn("the controller did not stop in time; releasing the lease", "after", finishWithin)
			}
		}
		release()
	}()
	leaderelection.RunOrDie(electCtx, leaderelection.LeaderElectionConfig{
		Lock: lock, LeaseDuration: 15 * time.Second, RenewDeadline: 10 * time.Second, RetryPeriod: 2 * time.Second,
		ReleaseOnCancel: true, Name: name,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(lctx context.Context) {
				mu.Lock()
				leading = true
				mu.Unlock()
				defer close(finished)
				// Cancelled when the lease is lost or ctx ends.
				sctx, cancel := context.WithCancel(lctx)
				defer cancel()
				defer context.AfterFunc(ctx, cancel)()
				if err := start(sctx); err != nil && !errors.Is(err, context.Canceled) {
					mu.Lock()
					runErr = err
					mu.Unlock()
					stop()
				}
			},
			OnStoppedLeading: func() { log.Info("leader lease released or lost", "identity", id) },
		},
	})
	mu.Lock()
	defer mu.Unlock()
	return runErr
}
