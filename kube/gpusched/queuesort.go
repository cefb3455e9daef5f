package gpusched

import (
	"math"
	"time"

	"github.com/gpusched/gpusched/gang"
	"github.com/gpusched/gpusched/kube/model"
	corev1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"
)

// podInfoGetter is what the framework's queued pod info offers.
type podInfoGetter interface{ GetPodInfo() fwk.PodInfo }

// sortKey is where a queued entity stands in the queue.
type sortKey struct {
	priority int32
	key      float64 // the order's key, lower first
	arrival  time.Time
	job      string // the pod group, or namespace/name
	name     string
}

// Less implements fwk.QueueSortPlugin: higher priority first, then the
// lower key of the configured order, then the earlier job (a pod group
// arrives with its first pod), then the job's name, so that the members of
// a group follow each other.
func (pl *Plugin) Less(a, b fwk.QueuedEntityInfo) bool {
	ka, kb := pl.sortKey(a), pl.sortKey(b)
	switch {
	case ka.priority != kb.priority:
		return ka.priority > kb.priority
	case ka.key != kb.key && !(math.IsNaN(ka.key) || math.IsNaN(kb.key)):
		return ka.key < kb.key
	case !ka.arrival.Equal(kb.arrival):
		return ka.arrival.Before(kb.arrival)
	case ka.job != kb.job:
		return ka.job < kb.job
	}
	return ka.name < kb.name
}

func (pl *Plugin) sortKey(e fwk.QueuedEntityInfo) sortKey {
	k := sortKey{priority: e.GetPriority(), arrival: e.GetTimestamp()}
	g, ok := e.(podInfoGetter)
	if !ok || g.GetPodInfo() == nil || g.GetPodInfo().GetPod() == nil {
		return k // a pod group entity of the framework's own gang scheduling
	}
	p := g.GetPodInfo().GetPod()
	k.arrival = p.CreationTimestamp.Time
	k.job, k.name = p.Namespace+"/"+p.Name, p.Name
	if grp := model.PodGroup(p); grp != "" {
		k.job = grp
		if t, ok := pl.groups.arrival(grp); ok {
			k.arrival = t
		}
	}
	if _, fifo := pl.order.(gang.ByArrival); fifo {
		k.key = float64(k.arrival.UnixNano()) / 1e9
	} else {
		k.key = pl.order.Key(pl.jobView(p, k.arrival), 0)
	}
	return k
}

// jobView describes a pod's job to a gang.Order: arrival, GPUs, the
// attained service the plugin measured (never a pod's claim), and its
// remaining time from the admin's model (Args.ExpectedSeconds less the
// attained service over its GPUs; unknown without a model).
func (pl *Plugin) jobView(p *corev1.Pod, arrival time.Time) gang.JobView {
	gpus, _ := model.PodGPUs(p, pl.res)
	j := gang.JobView{
		Arrival:     float64(arrival.UnixNano()) / 1e9,
		ScaleFactor: max(gpus, 1),
		Weight:      1,
		Type:        -1,
		Throughput:  []float64{1},
		Remaining:   math.MaxFloat64,
	}
	if pl.service != nil {
		j.Attained = pl.service.attained(jobOf(p))
	}
	if e := pl.args.ExpectedSeconds; e > 0 {
		j.Remaining = max(0, e-j.Attained/float64(j.ScaleFactor))
	}
	j.Steps = j.Remaining
	return j
}
