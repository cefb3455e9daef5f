package admission

import (
	"context"
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Keys of the state ConfigMap.
const (
	stateKeyScheduler  = "scheduler.json"
	stateKeyController = "controller.json"
	// maxState bounds the state a ConfigMap holds (the API server's limit
	// is 1 MiB).
	maxState = 1 << 20
)

// load restores the state a previous controller saved; no ConfigMap is a
// fresh start.
func (c *Controller) load(ctx context.Context) error {
	ns, name := c.cfg.stateLocation()
	cm, err := c.cfg.Client.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("admission: reading state %s/%s: %w", ns, name, err)
	}
	var st ctrlState
	if raw := cm.Data[stateKeyController]; raw != "" {
		if err := json.Unmarshal([]byte(raw), &st); err != nil {
			return fmt.Errorf("%w: %s/%s %s: %w", ErrState, ns, name, stateKeyController, err)
		}
		if st.Version != stateVersion || st.Rounds < 0 {
			return fmt.Errorf("%w: %s/%s: version %d, %d rounds", ErrState, ns, name, st.Version, st.Rounds)
		}
	} else {
		st.Version = stateVersion
	}
	if st.Requeue == nil {
		st.Requeue = map[string][]requeued{}
	}
	if raw := cm.Data[stateKeyScheduler]; raw != "" {
		if err := c.sched.Restore([]byte(raw)); err != nil {
			return fmt.Errorf("%w: %s/%s: %w", ErrState, ns, name, err)
		}
	}
	c.state = st
	c.log.Info("state restored", "configmap", ns+"/"+name, "rounds", st.Rounds, "jobs", len(c.sched.Jobs()))
	return nil
}

// save writes the core's snapshot and the controller's state.
func (c *Controller) save(ctx context.Context) error {
	snap, err := c.sched.Snapshot()
	if err != nil {
		return fmt.Errorf("admission: snapshot: %w", err)
	}
	own, err := json.Marshal(c.state)
	if err != nil {
		return fmt.Errorf("admission: state: %w", err)
	}
	if len(snap)+len(own) > maxState {
		return fmt.Errorf("%w: %d bytes of state exceed a ConfigMap's %d", ErrState, len(snap)+len(own), maxState)
	}
	ns, name := c.cfg.stateLocation()
	cms := c.cfg.Client.CoreV1().ConfigMaps(ns)
	data := map[string]string{stateKeyScheduler: string(snap), stateKeyController: string(own)}
	cm, err := cms.Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		_, err = cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns,
			Labels: map[string]string{"app.kubernetes.io/managed-by": "gpusched-admission"}}, Data: data}, metav1.CreateOptions{})
	} else if err == nil {
		cm = cm.DeepCopy()
		cm.Data = data
		_, err = cms.Update(ctx, cm, metav1.UpdateOptions{})
	}
	if err != nil {
		return fmt.Errorf("admission: saving state %s/%s: %w", ns, name, err)
	}
	return nil
}
