package admission

import (
	"fmt"
	"sync/atomic"
	"time"

	"github.com/gpusched/gpusched/kube/model"
	"github.com/gpusched/gpusched/scheduler"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// shared is what the progress channel's calls read without the
// controller's mutex (a round holds it for its whole length): the core
// (itself safe for concurrent use, replaced when the tenancy's weights
// change) and the caches (set once they have synced).
type shared struct {
	sched  atomic.Pointer[scheduler.Scheduler]
	caches atomic.Pointer[caches]
}

// Workload resolves the pod of a progress report to the workload whose
// rates the core learns (the progress channel's resolver, kube/progress:
// the pod's namespace, name and UID come from its service-account token,
// checked by the channel). The pod must be bound and running, with the
// UID given; a pod whose controller is a Job counts as that Job's only if
// the Job of that name has that UID and its selector matches the pod (a
// tenant's pod naming another Job is not that Job's); the workload must
// be one the core learns (Config.Estimator). Safe for concurrent use, and
// never waits for a round.
func (c *Controller) Workload(namespace, pod string, uid types.UID) (string, bool) {
	k, s := c.shared.caches.Load(), c.shared.sched.Load()
	if k == nil || s == nil || c.cfg.Estimator == nil {
		return "", false
	}
	p, err := k.podList.Pods(namespace).Get(pod)
	if err != nil || p.UID != uid || p.Namespace != namespace || p.Spec.NodeName == "" || p.DeletionTimestamp != nil || terminal(p) || p.Status.Phase != corev1.PodRunning {
		return "", false
	}
	var key string
	if o := controllerOf(p); o != nil && o.Kind == "Job" {
		j, err := k.jobs.Jobs(namespace).Get(o.Name)
		if err != nil || j.UID != o.UID || !(&claimed{job: j}).selects(p, c.cfg.Resource) {
			return "", false
		}
		key = "job/" + namespace + "/" + j.Name
	} else {
		gang := 0
		if g := model.UpstreamPodGroup(p); g != "" {
			gang = k.gang(p.Namespace, g)
		}
		key, _ = workloadKey(p, gang)
	}
	st, err := s.Status(key)
	if err != nil || !st.Spec.Learn {
		return "", false
	}
	return key, true
}

// Progress takes a progress report of a workload (the progress channel's
// sink, kube/progress): its cumulative steps, at the time the channel
// received it, on the core's clock (Config.Clock, else Unix seconds). The
// core takes the GPU type and count from where it placed the workload;
// its errors (scheduler.ErrNotRunning, ErrInvalid, ErrUnknownJob) are the
// channel's to answer. Safe for concurrent use, and never waits for a
// round.
func (c *Controller) Progress(workload string, steps float64, at time.Time) error {
	s := c.shared.sched.Load()
	if s == nil {
		return fmt.Errorf("%w: the controller has no core yet", scheduler.ErrNotRunning)
	}
	now := float64(at.UnixNano()) / 1e9
	if c.cfg.Clock != nil {
		now = c.cfg.Clock()
	}
	return s.Progress(workload, steps, now)
}
