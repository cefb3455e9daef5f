package gpusched

import (
	"sync"
	"time"

	"github.com/gpusched/gpusched/kube/model"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// maxServiceJobs bounds the jobs whose attained service the meter keeps;
// past it, the ones last seen longest ago are forgotten (an eighth at a
// time).
const maxServiceJobs = 1 << 16

// service measures the attained service of jobs (Tiresias's, in
// GPU-seconds) from what the plugin sees, never from what a pod claims:
// each bound pod of a job adds its GPUs times the time it has been bound,
// from its PodScheduled condition (which the API server sets at binding;
// a tenant cannot write a pod's status) or, without one, from when the
// plugin saw it bound. A pod's service stays with its job when the pod
// ends, so that a job preempted and created again keeps what it had. A
// job is its pod group, else its controller (a Job, a JobSet...), else
// the pod by name. It is safe for concurrent use.
type service struct {
	mu      sync.Mutex
	now     func() time.Time
	jobs    map[string]*jobService
	running map[types.UID]*runningPod
}

type jobService struct {
	done    float64 // GPU-seconds of its pods that ended
	running int     // its pods bound now
	// gpus and since sum, over its pods bound now, their GPUs and their
	// GPUs times the Unix second they were bound at, so that attained
	// costs O(1).
	gpus  int
	since float64
	last  time.Time
}

type runningPod struct {
	job   string
	gpus  int
	since time.Time
}

func newService(now func() time.Time) *service {
	if now == nil {
		now = time.Now
	}
	return &service{now: now, jobs: map[string]*jobService{}, running: map[types.UID]*runningPod{}}
}

// jobOf names the job a pod belongs to.
func jobOf(p *corev1.Pod) string {
	if g := model.PodGroup(p); g != "" {
		return "group/" + g
	}
	for _, o := range p.OwnerReferences {
		if o.Controller != nil && *o.Controller {
			return "owner/" + p.Namespace + "/" + o.Kind + "/" + o.Name
		}
	}
	return "pod/" + p.Namespace + "/" + p.Name
}

// bound follows a pod bound with gpus GPUs.
func (s *service) bound(p *corev1.Pod, gpus int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.running[p.UID]; ok {
		return
	}
	now := s.now()
	since := now
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionTrue && !c.LastTransitionTime.IsZero() && c.LastTransitionTime.Time.Before(now) {
			since = c.LastTransitionTime.Time
		}
	}
	job := jobOf(p)
	s.running[p.UID] = &runningPod{job: job, gpus: gpus, since: since}
	js := s.jobLocked(job)
	js.running++
	js.gpus += gpus
	js.since += float64(gpus) * unix(since)
	js.last = now
}

func unix(t time.Time) float64 { return float64(t.UnixNano()) / 1e9 }

// ended follows a pod that finished or was deleted.
func (s *service) ended(uid types.UID) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.running[uid]
	if !ok {
		return
	}
	delete(s.running, uid)
	now := s.now()
	js := s.jobLocked(r.job)
	js.done += float64(r.gpus) * max(0, now.Sub(r.since).Seconds())
	js.running--
	js.gpus -= r.gpus
	js.since -= float64(r.gpus) * unix(r.since)
	if js.running == 0 {
		js.gpus, js.since = 0, 0
	}
	js.last = now
}

func (s *service) jobLocked(job string) *jobService {
	js := s.jobs[job]
	if js == nil {
		if len(s.jobs) >= maxServiceJobs {
			s.forgetLocked()
		}
		js = &jobService{}
		s.jobs[job] = js
	}
	return js
}

// forgetLocked drops an eighth of the jobs with no pod running, those
// last seen longest ago.
func (s *service) forgetLocked() {
	var idle []time.Time
	for _, js := range s.jobs {
		if js.running == 0 {
			idle = append(idle, js.last)
		}
	}
	if len(idle) == 0 {
		return
	}
	k := max(1, len(idle)/8)
	// the k-th oldest time, by partial selection
	for i := range k {
		m := i
		for j := i + 1; j < len(idle); j++ {
			if idle[j].Before(idle[m]) {
				m = j
			}
		}
		idle[i], idle[m] = idle[m], idle[i]
	}
	cut := idle[k-1]
	for name, js := range s.jobs {
		if js.running == 0 && !js.last.After(cut) {
			delete(s.jobs, name)
		}
	}
}

// attained returns a job's attained service in GPU-seconds now.
func (s *service) attained(job string) float64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	js := s.jobs[job]
	if js == nil {
		return 0
	}
	v := js.done
	if js.running > 0 {
		v += max(0, float64(js.gpus)*unix(s.now())-js.since)
	}
	return v
}
