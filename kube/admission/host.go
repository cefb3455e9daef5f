package admission

import (
	"cmp"
	"context"
	"fmt"
	"k8s.io/apimachinery/pkg/types"
	resourcehelper "k8s.io/component-helpers/resource"
	"maps"
	"slices"

	"github.com/gpusched/gpusched/kube/model"
	"github.com/gpusched/gpusched/multires"
	"github.com/gpusched/gpusched/scheduler"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ReasonHost (Normal) says what CPUs and memory a workload's pods were
// given (Config.HostProfiles); a Warning with the same reason says why
// they could not be (an unknown profile, a pod without CPU or memory
// requests, a resize the API server refused).
const ReasonHost = "GPUSchedHost"

// gib is the bytes of multires' GB in the Kubernetes mapping (GiB).
const gib = 1 << 30

// indexNode indexes the pods bound to a node and not ended, by node name:
// the host split subtracts what they request.
const indexNode = "gpusched.io/node"

func podNodeIndex(obj any) ([]string, error) {
	if p, ok := obj.(*corev1.Pod); ok && p.Spec.NodeName != "" && !terminal(p) {
		return []string{p.Spec.NodeName}, nil
	}
	return nil, nil
}

// hostTarget is what each pod of a workload gets: CPUs (cores) and
// memory (bytes).
type hostTarget struct {
	cpus, bytes float64
	note        string // how it came about, for the event
}

// hostJob is a workload on a node in the split.
type hostJob struct {
	pa   *pendingAdmit
	w    *workload
	gpus int
}

// planHost sizes the CPUs and memory of the round's workloads that name a
// host profile (model.AnnotationHostProfile), with Synergy's split on
// each node (multires.Split: best cases where they fit, else jobs taken
// down to their proportional share, the most CPU-hungry first), within
// each workload's bounds. A workload on several nodes gets the least of
// its shares. The targets of workloads admitted this round are written
// with their admission; running pods whose target changed are resized in
// place (pods/resize) first, so that what a new one needs is freed.
func (c *Controller) planHost(ctx context.Context, assignments []scheduler.Assignment, present map[string]*workload, ran []*pendingAdmit) {
	if c.cfg.HostProfiles == nil {
		return
	}
	order := make(map[string]int, len(ran))
	for i, pa := range ran {
		order[pa.key] = i
	}
	perNode := map[string][]hostJob{}
	for _, as := range assignments {
		if len(as.Jobs) != 1 {
			continue // shared GPUs: left as they ask
		}
		i, ok := order[as.Jobs[0]]
		if !ok {
			continue
		}
		w := present[as.Jobs[0]]
		counts := map[string]int{}
		for _, d := range as.Devices {
			counts[d.Server]++
		}
		for node, n := range counts {
			perNode[node] = append(perNode[node], hostJob{pa: ran[i], w: w, gpus: n})
		}
	}
	targets := map[*pendingAdmit]*hostTarget{}
	for _, node := range slices.Sorted(maps.Keys(perNode)) {
		jobs := perNode[node]
		slices.SortFunc(jobs, func(a, b hostJob) int { return order[a.pa.key] - order[b.pa.key] })
		c.splitNode(node, jobs, targets)
	}
	var resize []*pendingAdmit
	for pa, t := range targets {
		pa.host = t
		if pa.w == nil {
			resize = append(resize, pa)
		}
	}
	// Shrinks first, so that what the others grow into is free by then.
	grows := func(pa *pendingAdmit) bool { return c.grows(present[pa.key], pa.host) }
	slices.SortStableFunc(resize, func(a, b *pendingAdmit) int {
		if ga, gb := grows(a), grows(b); ga != gb {
			if ga {
				return 1
			}
			return -1
		}
		return order[a.key] - order[b.key]
	})
	for _, pa := range resize {
		c.resizeRunning(ctx, present[pa.key], pa.host)
	}
}

// splitNode splits one node among its jobs and lowers each job's target
// to its share there.
func (c *Controller) splitNode(node string, jobs []hostJob, targets map[*pendingAdmit]*hostTarget) {
	info, ok := c.nodes[node]
	if !ok || info.cpus <= 0 || info.memGB <= 0 {
		return
	}
	srv := multires.Server{GPUs: len(info.server.GPUs), CPUs: info.cpus, MemGB: info.memGB}
	var mj []multires.Job
	var who []hostJob
	sized := map[types.UID]bool{}
	for _, j := range jobs {
		job, fixed, ok := c.hostJob(j)
		switch {
		case fixed != nil:
			// Sized as it asks: its GPUs are the node's less, and what
			// its pods request (below, where they are bound; here, from
			// its spec, where they are not yet, up to its GPUs'
			// proportional share: a pod that asks for more than the node
			// has never binds, and must not stop the others' split).
			srv.GPUs -= j.gpus
			if !bound(j.w, node) {
				g := float64(j.gpus) / float64(len(info.server.GPUs))
				srv.CPUs -= min(fixed.cpus, g*info.cpus)
				srv.MemGB -= min(fixed.bytes/gib, g*info.memGB)
			}
		case ok:
			mj, who = append(mj, job), append(who, j)
			for _, p := range j.w.pods {
				sized[p.UID] = true
			}
		}
	}
	// What every other pod bound to the node requests (other workloads,
	// pods without GPUs, daemons) is the node's less too.
	cpus, bytes := c.boundRequests(node, sized)
	srv.CPUs -= cpus
	srv.MemGB -= bytes / gib
	if len(mj) == 0 || srv.GPUs <= 0 || srv.CPUs <= 0 || srv.MemGB <= 0 {
		return
	}
	plan, err := multires.Split(srv, mj)
	if err != nil {
		c.log.Warn("host split", "node", node, "err", err)
		return
	}
	for k, j := range who {
		c.lower(targets, j, node, plan.Placements[k])
	}
}

// lower sets a job's target to its share on node, or lowers it there: a
// job on several nodes gets the least of its shares.
func (c *Controller) lower(targets map[*pendingAdmit]*hostTarget, j hostJob, node string, pl multires.Placement) {
	sh := pl.Parts[0].Share()
	per := float64(c.perPod(j.w))
	t := &hostTarget{cpus: sh.CPUs * per, bytes: sh.MemGB * per * gib}
	t.note = fmt.Sprintf("%g CPUs and %s per pod on %s (rate %.2f of its proportional share's", t.cpus, fmtBytes(t.bytes), node, pl.Rate)
	if pl.Demoted {
		t.note += ", below its best case: the node's CPUs or memory are shared)"
	} else {
		t.note += ", its best case)"
	}
	if old := targets[j.pa]; old != nil {
		t.cpus, t.bytes = min(t.cpus, old.cpus), min(t.bytes, old.bytes)
	}
	targets[j.pa] = t
}

// bound says whether some pod of w is bound to node.
func bound(w *workload, node string) bool {
	for _, p := range w.pods {
		if p.Spec.NodeName == node && !terminal(p) {
			return true
		}
	}
	return false
}

// boundRequests sums the CPU and memory requests of the pods bound to
// node, but those of the workloads being sized.
func (c *Controller) boundRequests(node string, sized map[types.UID]bool) (cpus, bytes float64) {
	objs, err := c.caches.pods.GetIndexer().ByIndex(indexNode, node)
	if err != nil {
		return 0, 0
	}
	for _, o := range objs {
		p, ok := o.(*corev1.Pod)
		if !ok || sized[p.UID] || terminal(p) {
			continue
		}
		c, b := requests(p)
		cpus, bytes = cpus+c, bytes+b
	}
	return cpus, bytes
}

// requests is a pod's CPU and memory requests, as the scheduler counts
// them (init containers, sidecars and overhead included).
func requests(p *corev1.Pod) (cpus, bytes float64) {
	r := resourcehelper.PodRequests(p, resourcehelper.PodResourcesOptions{})
	return r.Cpu().AsApproximateFloat64(), r.Memory().AsApproximateFloat64()
}

// hostJob maps a workload on a node to the split's job, or says it is
// sized as it asks (fixed: its pods' requests there).
func (c *Controller) hostJob(j hostJob) (job multires.Job, fixed *hostTarget, ok bool) {
	spec, perPod := j.w.podSpec(), c.perPod(j.w)
	if spec == nil || perPod <= 0 {
		return job, nil, false
	}
	pods := float64(j.gpus) / float64(perPod)
	reqCPU, reqBytes := requests(&corev1.Pod{Spec: *spec})
	hr, err := model.ParseHostRange(j.w.ann)
	var p *multires.Profile
	if err == nil && hr != nil {
		p = c.cfg.HostProfiles.Lookup(hr.Profile)
	}
	i := model.HostContainer(spec, c.gpuResource())
	switch {
	case err != nil:
		c.event(j.w, corev1.EventTypeWarning, ReasonHost, "host sizing ignored: "+err.Error())
	case hr == nil:
	case p == nil:
		c.event(j.w, corev1.EventTypeWarning, ReasonHost, fmt.Sprintf("host sizing ignored: no profile %q", cut(hr.Profile)))
	case i < 0 || spec.Containers[i].Resources.Requests.Cpu().IsZero() || spec.Containers[i].Resources.Requests.Memory().IsZero():
		c.event(j.w, corev1.EventTypeWarning, ReasonHost, "host sizing ignored: the GPU container has no CPU or memory request (its minimum, and its QoS class)")
	default:
		per := float64(perPod)
		own := spec.Containers[i].Resources.Requests
		// The minimum is the range's, else the container's own request;
		// never above the range's maximum (a tenant that lowers its
		// maximum below what it was given shrinks), and every bound
		// within model's limits, so that no workload's bounds can fail
		// the node's split.
		minCPU := min(cmp.Or(hr.MinCPUs, own.Cpu().AsApproximateFloat64()), model.MaxHostCPUs)
		minBytes := min(cmp.Or(hr.MinBytes, own.Memory().AsApproximateFloat64()), model.MaxHostBytes)
		if hr.MaxCPUs > 0 {
			minCPU = min(minCPU, hr.MaxCPUs)
		}
		if hr.MaxBytes > 0 {
			minBytes = min(minBytes, hr.MaxBytes)
		}
		return multires.Job{ID: 0, GPUs: j.gpus, Profile: p,
			Min: multires.Share{CPUs: minCPU / per, MemGB: minBytes / per / gib},
			Max: multires.Share{CPUs: hr.MaxCPUs / per, MemGB: hr.MaxBytes / per / gib}}, nil, true
	}
	return job, &hostTarget{cpus: reqCPU * pods, bytes: reqBytes * pods}, false
}

// perPod is the GPUs of each of a workload's pods.
func (c *Controller) perPod(w *workload) int {
	if w.perPod > 0 || w.kind == kindJob || len(w.pods) == 0 {
		return w.perPod
	}
	g, err := model.PodGPUs(w.pods[0], c.gpuResource())
	if err != nil {
		return 0
	}
	return g
}

// gpuResource is the extended resource that counts GPUs.
func (c *Controller) gpuResource() corev1.ResourceName {
	return cmp.Or(c.cfg.Resource, model.ResourceGPU)
}

func fmtBytes(b float64) string {
	return fmt.Sprintf("%.3gGi", b/gib)
}

// grows says whether t gives a workload's first pod more CPUs or memory
// than it requests.
func (c *Controller) grows(w *workload, t *hostTarget) bool {
	if w == nil || len(w.pods) == 0 {
		return false
	}
	spec := &w.pods[0].Spec
	i := model.HostContainer(spec, c.gpuResource())
	if i < 0 {
		return false
	}
	r := spec.Containers[i].Resources.Requests
	return t.cpus > r.Cpu().AsApproximateFloat64() || t.bytes > r.Memory().AsApproximateFloat64()
}

// resizeRunning resizes the pods of a running workload whose requests
// differ from its target (a Job's running pods: their template cannot
// change while the Job runs).
func (c *Controller) resizeRunning(ctx context.Context, w *workload, t *hostTarget) {
	if w == nil {
		return
	}
	changed := false
	for _, p := range w.pods {
		if terminal(p) {
			continue
		}
		_, did, err := c.resizePod(ctx, p, t)
		if err != nil {
			c.event(w, corev1.EventTypeWarning, ReasonHost, fmt.Sprintf("pod %s not resized: %v", p.Name, cut(err.Error())))
			return
		}
		changed = changed || did
	}
	if changed {
		c.event(w, corev1.EventTypeNormal, ReasonHost, "resized in place: "+t.note)
	}
}

// resizePod sets a pod's host container to t through the pods/resize
// subresource (which also serves a pod not yet scheduled). It returns the
// pod as written (p itself, a cached object it never changes, when
// nothing changed) and whether it changed anything.
func (c *Controller) resizePod(ctx context.Context, p *corev1.Pod, t *hostTarget) (*corev1.Pod, bool, error) {
	i := model.HostContainer(&p.Spec, c.gpuResource())
	if i < 0 {
		return p, false, nil
	}
	pods := c.cfg.Client.CoreV1().Pods(p.Namespace)
	written := p
	changed, err := retried(c, p, func() (*corev1.Pod, error) { return pods.Get(ctx, p.Name, metav1.GetOptions{}) },
		(*corev1.Pod).DeepCopy, func(cur *corev1.Pod) bool { return model.SetHostRequests(&cur.Spec, i, t.cpus, t.bytes) },
		func(cur *corev1.Pod) (*corev1.Pod, error) {
			return pods.UpdateResize(ctx, cur.Name, cur, metav1.UpdateOptions{})
		},
		func(out *corev1.Pod) {
			c.caches.own.wrotePod(out, false)
			written = out
		})
	return written, changed, err
}

// hostOnJob sets a Job's template to its target (allowed while it is
// suspended with no active pod).
func (c *Controller) hostOnJob(spec *corev1.PodSpec, t *hostTarget) {
	if t == nil {
		return
	}
	if i := model.HostContainer(spec, c.gpuResource()); i >= 0 {
		model.SetHostRequests(spec, i, t.cpus, t.bytes)
	}
}
