package admission

import (
	"github.com/gpusched/gpusched/kube/model"
	"github.com/gpusched/gpusched/perfmodel/learn"
	"github.com/gpusched/gpusched/scheduler"
	"github.com/gpusched/gpusched/topology"
	corev1 "k8s.io/api/core/v1"
)

// learnedShare is a learned job's rate on type t over its fastest
// estimate (1 on a type it is fastest on; 1 everywhere while nothing is
// known): the normalised rate the claims' path gives, for the admin's
// model of remaining work.
func learnedShare(st scheduler.JobStatus, t topology.GPUType) float64 {
	top, on := 0.0, 0.0
	for _, e := range st.Estimates {
		if e.Source == learn.SourceNone {
			continue
		}
		top = max(top, e.Mean)
		if e.Type == t {
			on = e.Mean
		}
	}
	if top == 0 || on == 0 {
		return 1
	}
	return on / top
}

// tellLearned tells a learned workload what the core measured of it
// (ReasonLearned), when the measured types or the ratio (to a tenth)
// changed since it was last told.
func (c *Controller) tellLearned(w *workload, st scheduler.JobStatus) {
	msg := model.LearnedMessage(st.Estimates, learn.SourceMeasured)
	if msg == "" {
		return
	}
	said := c.learnedSaid[w.key]
	// The windows change at every round: compare what comes before them.
	if said != "" && model.LearnedTopic(said) == model.LearnedTopic(msg) {
		return
	}
	if c.learnedSaid == nil {
		c.learnedSaid = map[string]string{}
	}
	c.learnedSaid[w.key] = msg
	c.event(w, corev1.EventTypeNormal, ReasonLearned, msg)
}
