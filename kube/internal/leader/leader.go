// Package leader runs a controller's work under a Lease, as the kube
// binaries of gpusched do: one replica leads, the others wait.
package leader

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// Run runs start until ctx ends or start fails. With elect, start runs
// only while this process (named by its host name) holds the Lease
// namespace/name; losing the lease cancels start's context, and a failure
// of start releases the lease and cancels ctx through stop. A context
// cancellation is not an error.
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
	var runErr error
	leaderelection.RunOrDie(ctx, leaderelection.LeaderElectionConfig{
		Lock: lock, LeaseDuration: 15 * time.Second, RenewDeadline: 10 * time.Second, RetryPeriod: 2 * time.Second,
		ReleaseOnCancel: true, Name: name,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(ctx context.Context) {
				if err := start(ctx); err != nil && !errors.Is(err, context.Canceled) {
					runErr = err
					stop()
				}
			},
			OnStoppedLeading: func() { log.Info("leader lease lost", "identity", id) },
		},
	})
	return runErr
}
