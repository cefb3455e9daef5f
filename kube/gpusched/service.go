package gpusched

import (
	"container/heap"
	"sync"
	"time"

	"github.com/gpusched/gpusched/kube/model"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// maxServiceJobs bounds the jobs whose attained service the meter keeps;
// past it, each new job makes it forget the job with no pod running that
// it saw last longest ago.
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
//
// Every operation costs O(log n) in the n jobs it keeps, under its mutex:
// the jobs with no pod running are in a min-heap by when they were last
// seen (idle), so forgetting the oldest is a pop. Before #40 it searched
// them (a selection of an eighth of them, O(n^2)): 2.0 s under the mutex
// at 65,537 jobs (BenchmarkServiceEvict).
type service struct {
	mu      sync.Mutex
	now     func() time.Time
	jobs    map[string]*jobService
	running map[types.UID]*runningPod
	idle    idleJobs
}

type jobService struct {
	name string
	// idx is its place in the idle heap, -1 while a pod of it runs.
	idx     int
	done    float64 // GPU-seconds of its pods that ended
	running int     // its pods bound now
	// gpus and since sum, over its pods bound now, their GPUs and their
	// GPUs times the Unix second they were bound at, so that attained
	// costs O(1).
	gpus  int
	since float64
	last  time.Time
}

// idleJobs is a min-heap (container/heap) of the jobs with no pod running,
// the one seen last longest ago first (then by name: a total order).
type idleJobs []*jobService

func (h idleJobs) Len() int { return len(h) }
func (h idleJobs) Less(i, j int) bool {
	if !h[i].last.Equal(h[j].last) {
		return h[i].last.Before(h[j].last)
	}
	return h[i].name < h[j].name
}
func (h idleJobs) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].idx, h[j].idx = i, j
}
func (h *idleJobs) Push(x any) {
	js := x.(*jobService)
	js.idx = len(*h)
	*h = append(*h, js)
}
func (h *idleJobs) Pop() any {
	old := *h
	js := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	js.idx = -1
	return js
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
	if js.idx >= 0 {
		heap.Remove(&s.idle, js.idx)
	}
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
	js.last = now
	if js.running == 0 {
		js.gpus, js.since = 0, 0
		heap.Push(&s.idle, js)
	}
}

// jobLocked returns a job's entry, made (not idle yet: the caller binds
// or ends a pod of it) if missing; a new entry at the bound forgets the
// oldest idle job first.
func (s *service) jobLocked(job string) *jobService {
	js := s.jobs[job]
	if js == nil {
		if len(s.jobs) >= maxServiceJobs && s.idle.Len() > 0 {
			old := heap.Pop(&s.idle).(*jobService)
			delete(s.jobs, old.name)
		}
		js = &jobService{name: job, idx: -1}
		s.jobs[job] = js
	}
	return js
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
