package admission

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

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

// learnedMessage says what the core measured of a job, once it has
// measured two types or more: how much faster it is on its fastest than
// on its slowest, with the measured types; "" before.
func learnedMessage(st scheduler.JobStatus) string {
	var m []learn.Estimate
	for _, e := range st.Estimates {
		if e.Source == learn.SourceMeasured {
			m = append(m, e)
		}
	}
	if len(m) < 2 {
		return ""
	}
	slices.SortFunc(m, func(a, b learn.Estimate) int { return cmp.Compare(b.Mean, a.Mean) })
	fast, slow := m[0], m[len(m)-1]
	return fmt.Sprintf("learned: %.1fx faster on %s than %s (measured on %d types, %d windows)", fast.Mean/slow.Mean, fast.Type, slow.Type, len(m), windows(m))
}

func windows(es []learn.Estimate) int {
	n := 0
	for _, e := range es {
		n += e.Windows
	}
	return n
}

// tellLearned tells a learned workload what the core measured of it
// (ReasonLearned), when the measured types or the ratio (to a tenth)
// changed since it was last told.
func (c *Controller) tellLearned(w *workload, st scheduler.JobStatus) {
	msg := learnedMessage(st)
	if msg == "" {
		return
	}
	said := c.learnedSaid[w.key]
	// The windows change at every round: compare what comes before them.
	if said != "" && cutWindows(said) == cutWindows(msg) {
		return
	}
	if c.learnedSaid == nil {
		c.learnedSaid = map[string]string{}
	}
	c.learnedSaid[w.key] = msg
	c.event(w, corev1.EventTypeNormal, ReasonLearned, msg)
}

// cutWindows is a learned message without its count of windows.
func cutWindows(msg string) string {
	if i := strings.LastIndex(msg, ", "); i >= 0 {
		return msg[:i]
	}
	return msg
}
